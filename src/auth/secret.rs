//! Token secrets: `pa_<practice id>_<64 hex digits of randomness>`. The practice id in the
//! secret lets the lookup be scoped to one practice like every other query; the random part
//! carries 256 bits. Only the SHA-256 of the whole secret is stored: the secret is already
//! random, so a slow hash would add nothing but latency to every request.

use sha2::{Digest, Sha256};

const PREFIX: &str = "pa_";

/// A freshly made secret and the hash to store.
pub struct NewSecret {
    pub secret: String,
    pub hash: String,
}

/// Makes a new secret for a token of `practice_id`.
pub fn new_secret(practice_id: &str) -> NewSecret {
    let random: [u8; 32] = rand::random();
    let secret = format!("{PREFIX}{practice_id}_{}", hex::encode(random));
    let hash = hash_secret(&secret);
    NewSecret { secret, hash }
}

/// The stored form of a secret.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The practice a secret belongs to, or None if it is not shaped like one of ours.
pub fn practice_of(secret: &str) -> Option<&str> {
    let rest = secret.strip_prefix(PREFIX)?;
    let (practice, random) = rest.rsplit_once('_')?;
    let well_formed = !practice.is_empty()
        && practice.len() <= 64
        && random.len() == 64
        && random.bytes().all(|b| b.is_ascii_hexdigit());
    well_formed.then_some(practice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_its_practice() {
        let made = new_secret("0190-abc");
        assert_eq!(practice_of(&made.secret), Some("0190-abc"));
        assert_eq!(made.hash, hash_secret(&made.secret));
        assert_eq!(made.hash.len(), 64);
        assert_ne!(new_secret("p").secret, new_secret("p").secret);
    }

    #[test]
    fn rejects_malformed_secrets() {
        for bad in [
            "",
            "pa_",
            "pa_x_123",
            "xx_p_00",
            &format!("pa__{}", "0".repeat(64)),
        ] {
            assert_eq!(practice_of(bad), None, "{bad}");
        }
    }
}
