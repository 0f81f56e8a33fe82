//! Idempotent retries: a mutation sent with an `Idempotency-Key` header (as the IETF draft
//! `draft-ietf-httpapi-idempotency-key-header` names it) and sent again with the same key, by
//! the same token, within 24 hours, gets the first response again and writes nothing twice.
//! The same key with a different request is refused. Queries need no key and ignore one.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::Principal;
use crate::store::idempotency::{Claim, Claimed, Reclaim, StoredResponse};
use crate::store::{StoreError, now_ms};

/// The request header.
const HEADER: &str = "idempotency-key";

/// The header a replayed response carries.
const REPLAYED: &str = "idempotent-replayed";

/// Longest key.
pub const MAX_KEY_CHARS: usize = 255;

/// How long a key holds its response.
pub const KEEP_FOR: Duration = Duration::from_secs(24 * 3600);

/// The key a request carries, if it carries one; an error saying what is wrong with it.
pub fn key_of(headers: &HeaderMap) -> Result<Option<String>, String> {
    let mut values = headers.get_all(HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("send one Idempotency-Key header, not several".into());
    }
    let key = value
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|k| {
            (1..=MAX_KEY_CHARS).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic())
        })
        .ok_or_else(|| {
            format!(
                "the Idempotency-Key header must be 1 to {MAX_KEY_CHARS} visible ASCII \
                 characters, such as a UUID"
            )
        })?;
    Ok(Some(key.to_string()))
}

/// A hash of what a request asks for: its document, operation name and variables.
pub fn request_hash(
    query: &str,
    operation_name: Option<&str>,
    variables: Option<&Map<String, Value>>,
) -> String {
    let canonical = serde_json::json!([query, operation_name, variables]);
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A key this request holds: its response is kept when it is done.
pub struct Held {
    practice_id: String,
    token_id: String,
    key: String,
    request_hash: String,
}

/// What to do with a mutation that carries a key.
pub enum Outcome {
    /// Run it; keep its response with [`finish`].
    Run(Held),
    /// Answer at once: the first response again, or a refusal.
    Answer(Response),
}

/// A refusal of the key, as the handler words it: status, code, message.
pub type Refusal = (StatusCode, &'static str, String);

impl Held {
    fn claim(&self) -> Claim<'_> {
        Claim {
            token_id: &self.token_id,
            key: &self.key,
            request_hash: &self.request_hash,
        }
    }
}

/// Claims `key` for the caller's request. `abandon_after` is how long an unfinished claim is
/// waited for before a retry may take it over: longer than any request may run.
pub async fn claim(
    store: &crate::store::Store,
    principal: &Principal,
    key: String,
    request_hash: String,
    abandon_after: Duration,
) -> Result<Result<Outcome, Refusal>, StoreError> {
    let held = Held {
        practice_id: principal.practice_id.clone(),
        token_id: principal.token_id.clone(),
        key,
        request_hash,
    };
    let now = now_ms();
    let reclaim = Reclaim {
        expired_before: now - millis(KEEP_FOR),
        abandoned_before: now - millis(abandon_after),
    };
    let claimed = store
        .practice(&held.practice_id)
        .claim_idempotency_key(held.claim(), now, reclaim)
        .await?;
    Ok(match claimed {
        Claimed::Mine => Ok(Outcome::Run(held)),
        Claimed::Done(stored) => Ok(Outcome::Answer(replay(stored))),
        Claimed::Pending => Err((
            StatusCode::CONFLICT,
            crate::graphql::error::code::IDEMPOTENCY_KEY_IN_USE,
            "A request with this Idempotency-Key is still being handled; retry in a moment \
             to get its response"
                .into(),
        )),
        Claimed::OtherRequest => Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            crate::graphql::error::code::IDEMPOTENCY_KEY_REUSED,
            "This Idempotency-Key was used for a different request: send a new key with each \
             new request, and the same key only with a retry of the same request"
                .into(),
        )),
    })
}

/// Keeps the response of a request that held its key. If it cannot be kept, a retry finds
/// the claim unfinished and, once it is abandoned, runs again: said in the log.
pub async fn finish(
    store: &crate::store::Store,
    held: Held,
    status: StatusCode,
    content_type: &str,
    body: &Value,
) {
    let response = StoredResponse {
        status: i64::from(status.as_u16()),
        content_type: content_type.to_string(),
        response: body.to_string(),
    };
    let kept = store
        .practice(&held.practice_id)
        .finish_idempotency_key(held.claim(), &response)
        .await;
    if let Err(error) = kept {
        tracing::error!(%error, "could not keep the response of an idempotent request");
    }
}

/// The first response, sent again.
fn replay(stored: StoredResponse) -> Response {
    let status = u16::try_from(stored.status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let mut response = (status, stored.response).into_response();
    let content_type = HeaderValue::from_str(&stored.content_type)
        .unwrap_or(HeaderValue::from_static("application/json; charset=utf-8"));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// How often expired keys are deleted.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Deletes the keys older than [`KEEP_FOR`], in every practice. Expired keys are ignored even
/// before they are swept; this keeps the table to a day's keys.
pub async fn sweep(store: &crate::store::Store) {
    match store
        .forget_idempotency_keys(now_ms() - millis(KEEP_FOR))
        .await
    {
        Ok(0) => {}
        Ok(swept) => tracing::info!(swept, "expired idempotency keys deleted"),
        Err(error) => tracing::warn!(%error, "could not delete expired idempotency keys"),
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(HEADER, HeaderValue::from_str(v).expect("header"));
        }
        map
    }

    #[test]
    fn reads_the_key() {
        assert_eq!(key_of(&headers(&[])), Ok(None));
        assert_eq!(
            key_of(&headers(&["8e03978e-40d5-43e8-bc93-6894a57f9324"])),
            Ok(Some("8e03978e-40d5-43e8-bc93-6894a57f9324".into()))
        );
        assert!(key_of(&headers(&[""])).is_err());
        assert!(key_of(&headers(&["a b"])).is_err());
        assert!(key_of(&headers(&[&"k".repeat(256)])).is_err());
        assert!(key_of(&headers(&["a", "b"])).is_err());
    }

    #[test]
    fn hashes_what_the_request_asks() {
        let vars: Map<String, Value> = serde_json::from_str(r#"{"id":"1"}"#).expect("json");
        let a = request_hash("mutation { x }", None, Some(&vars));
        assert_eq!(a, request_hash("mutation { x }", None, Some(&vars)));
        assert_ne!(a, request_hash("mutation { x }", Some("X"), Some(&vars)));
        assert_ne!(a, request_hash("mutation { y }", None, Some(&vars)));
        assert_ne!(a, request_hash("mutation { x }", None, None));
    }
}
