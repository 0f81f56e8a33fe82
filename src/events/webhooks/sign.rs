//! Standard Webhooks signatures (<https://www.standardwebhooks.com>), with the `hmac` and `sha2`
//! crates: `webhook-signature: v1,<base64 of HMAC-SHA256 over "id.timestamp.body">`, keyed
//! with the base64 part of a `whsec_` secret. Written here rather than taken from the
//! `standardwebhooks` crate, which pulls in an HTTP client of its own; its test vector is
//! checked below, and the tests check every signature with the npm `standardwebhooks` package.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// What a secret starts with.
const PREFIX: &str = "whsec_";

/// A new secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> String {
    let random: [u8; 32] = rand::random();
    format!("{PREFIX}{}", STANDARD.encode(random))
}

/// One signature, `v1,<base64>`, of a message with `secret`; None for a secret that is not a
/// `whsec_` one (ours always are).
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix(PREFIX)?).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The `webhook-signature` header: a signature per secret, space-separated.
pub fn signatures(secrets: &[&str], id: &str, timestamp: i64, body: &str) -> String {
    secrets
        .iter()
        .filter_map(|secret| sign(secret, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of the Standard Webhooks specification's reference libraries.
    #[test]
    fn signs_as_the_specification_says() {
        let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
        let id = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
        let body = r#"{"email":"test@example.com","username":"test_user"}"#;
        assert_eq!(
            sign(secret, id, 1649367553, body).as_deref(),
            Some("v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=")
        );
        assert_eq!(sign("nope", id, 1, body), None);
    }

    #[test]
    fn every_secret_signs() {
        let (a, b) = (new_secret(), new_secret());
        assert!(a.starts_with(PREFIX) && a != b);
        let both = signatures(&[&a, &b], "m", 1, "{}");
        assert_eq!(both.split(' ').count(), 2);
    }
}
