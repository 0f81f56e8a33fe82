//! Idempotent retries: a mutation sent with an `Idempotency-Key` header (as the IETF draft
//! `draft-ietf-httpapi-idempotency-key-header` names it) and sent again with the same key, by
//! the same token, within 24 hours, gets the first response again and writes nothing twice.
//! The same key with a different request is refused. Queries need no key and ignore one.

use std::time::Duration;

use axum::http::HeaderMap;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::auth::{Principal, secret};
use crate::graphql::error::code;
use crate::graphql::pipeline::{Params, Rejection, Stop};
use crate::store::audit::Read;
use crate::store::idempotency::{Claimed, Key, Reclaim, StoredResponse};
use crate::store::{Store, now_ms};

/// The request header.
const HEADER: &str = "idempotency-key";

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
pub fn request_hash(params: &Params) -> String {
    let mut variables = params.variables.clone().map(Value::Object);
    if let Some(variables) = variables.as_mut() {
        sort_keys(variables);
    }
    let canonical = serde_json::json!([params.query, params.operation_name, variables]);
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Puts the keys of every object in order, so that a retry that sends its variables in
/// another order is the same request.
fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.sort_keys();
            fields.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// A key this request holds: its response is kept when it is done.
pub struct Held {
    practice_id: String,
    /// The key, as the request's writes mark it.
    pub key: Key,
}

/// What to do with a mutation that carries a key.
pub enum Outcome {
    /// Run it; keep its response with [`finish`].
    Run(Held),
    /// Answer with the first response again.
    Replay(StoredResponse),
}

/// Claims `key` for the caller's request. `abandon_after` is how long an unfinished claim is
/// waited for before a retry may take it over (when it wrote nothing): longer than any request
/// may run.
pub async fn claim(
    store: &Store,
    principal: &Principal,
    key: String,
    request_hash: String,
    abandon_after: Duration,
) -> Result<Outcome, Rejection> {
    let now = now_ms();
    let held = Held {
        practice_id: principal.practice_id.clone(),
        key: Key {
            token_id: principal.token_id.clone(),
            key,
            request_hash,
            claimed_at: now,
        },
    };
    let reclaim = Reclaim {
        expired_before: now - millis(KEEP_FOR),
        abandoned_before: now - millis(abandon_after),
    };
    let claimed = store
        .practice(&held.practice_id)
        .claim_idempotency_key(&held.key, reclaim)
        .await
        .map_err(|error| {
            tracing::warn!(%error, "could not claim an idempotency key");
            Rejection::database_unavailable()
        })?;
    match claimed {
        Claimed::Mine => Ok(Outcome::Run(held)),
        Claimed::Done(stored) => Ok(Outcome::Replay(stored)),
        Claimed::Pending => Err(Rejection::new(
            Stop::InProgress,
            code::IDEMPOTENCY_KEY_IN_USE,
            "A request with this Idempotency-Key is still being handled; retry in a moment to \
             get its response",
        )),
        Claimed::Lost => Err(Rejection::new(
            Stop::AnswerLost,
            code::IDEMPOTENCY_ANSWER_LOST,
            "The request with this Idempotency-Key made its changes, but its server stopped \
             before its answer was kept; it will not run again: read the records to see what \
             it did",
        )),
        Claimed::OtherRequest => Err(Rejection::new(
            Stop::KeyReused,
            code::IDEMPOTENCY_KEY_REUSED,
            "This Idempotency-Key was used for a different request: send a new key with each \
             new request, and the same key only with a retry of the same request",
        )),
    }
}

/// Keeps the response of a request that held its key and ran, for its retries, with the reads
/// of patient data it carries; secrets in it (the token of createApiToken or signIn, shown
/// once) are kept as null. A request that failed for a passing reason (every root field null,
/// every error INTERNAL_SERVER_ERROR or SERVICE_UNAVAILABLE) and, as the database says, wrote
/// nothing, lets its key go instead, so that a retry runs it again; once a request has written
/// anything, its key is never let go, whatever the response says. If the response cannot be
/// kept, a retry is told its answer was lost (or, when it wrote nothing, runs again): said in
/// the log.
pub async fn finish(
    store: &Store,
    held: &Held,
    status: u16,
    content_type: &str,
    body: &Value,
    reads: &[Read],
) {
    let practice = store.practice(&held.practice_id);
    if failed_before_writing(body) {
        match practice.release_idempotency_key(&held.key).await {
            Ok(true) => return,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "could not let go of an idempotency key"),
        }
    }
    let mut body = body.clone();
    redact_secrets(&mut body);
    let response = StoredResponse {
        status: i64::from(status),
        content_type: content_type.to_string(),
        response: body.to_string(),
        reads: Some(Read::to_json(reads)),
    };
    if let Err(error) = practice.finish_idempotency_key(&held.key, &response).await {
        tracing::error!(%error, "could not keep the response of an idempotent request");
    }
}

/// Lets a key go whose request did not run (it was refused before it could), so that a retry
/// runs it.
pub async fn release(store: &Store, held: &Held) {
    let released = store
        .practice(&held.practice_id)
        .release_idempotency_key(&held.key)
        .await;
    if let Err(error) = released {
        tracing::warn!(%error, "could not let go of an idempotency key");
    }
}

/// True when a response holds no data and only errors that say "try again".
fn failed_before_writing(body: &Value) -> bool {
    let no_data = match body.get("data") {
        None | Some(Value::Null) => true,
        Some(Value::Object(fields)) => fields.values().all(Value::is_null),
        Some(_) => false,
    };
    let transient = |e: &Value| {
        matches!(
            e["extensions"]["code"].as_str(),
            Some(code::INTERNAL_SERVER_ERROR | code::SERVICE_UNAVAILABLE)
        )
    };
    let errors = body["errors"].as_array();
    no_data && errors.is_some_and(|errors| !errors.is_empty() && errors.iter().all(transient))
}

/// Replaces every token secret in a response with null.
fn redact_secrets(value: &mut Value) {
    match value {
        Value::String(text) if secret::practice_of(text).is_some() => *value = Value::Null,
        Value::Array(items) => items.iter_mut().for_each(redact_secrets),
        Value::Object(fields) => fields.values_mut().for_each(redact_secrets),
        _ => {}
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
            map.append(
                HEADER,
                axum::http::HeaderValue::from_str(v).expect("header"),
            );
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
        let params = |query: &str, name: Option<&str>, variables: Option<&str>| Params {
            query: query.into(),
            operation_name: name.map(str::to_string),
            variables: variables.map(|v| serde_json::from_str(v).expect("json")),
            extensions: None,
        };
        let vars = Some(r#"{"id":"1"}"#);
        let a = request_hash(&params("mutation { x }", None, vars));
        assert_eq!(a, request_hash(&params("mutation { x }", None, vars)));
        assert_ne!(a, request_hash(&params("mutation { x }", Some("X"), vars)));
        assert_ne!(a, request_hash(&params("mutation { y }", None, vars)));
        assert_ne!(a, request_hash(&params("mutation { x }", None, None)));
        assert_eq!(
            request_hash(&params(
                "m",
                None,
                Some(r#"{"a":1,"b":{"c":2,"d":[{"e":3,"f":4}]}}"#)
            )),
            request_hash(&params(
                "m",
                None,
                Some(r#"{"b":{"d":[{"f":4,"e":3}],"c":2},"a":1}"#)
            ))
        );
    }

    #[test]
    fn tells_passing_failures() {
        let failed = |code: &str, data: Value| serde_json::json!({ "data": data, "errors": [{ "extensions": { "code": code } }] });
        let null = serde_json::json!({ "createPatient": null });
        assert!(failed_before_writing(&failed(
            "SERVICE_UNAVAILABLE",
            null.clone()
        )));
        assert!(failed_before_writing(&failed(
            "INTERNAL_SERVER_ERROR",
            Value::Null
        )));
        assert!(!failed_before_writing(&failed("BAD_USER_INPUT", null)));
        let partly = serde_json::json!({ "a": { "data": { "id": "1" } }, "b": null });
        assert!(!failed_before_writing(&failed(
            "SERVICE_UNAVAILABLE",
            partly
        )));
    }

    #[test]
    fn keeps_no_secret() {
        let secret = format!("pa_p1_{}", "ab".repeat(32));
        let mut body = serde_json::json!({ "data": { "createApiToken": {
            "token": secret, "data": { "name": "pa_not_a_secret" } } } });
        redact_secrets(&mut body);
        assert_eq!(body["data"]["createApiToken"]["token"], Value::Null);
        assert_eq!(
            body["data"]["createApiToken"]["data"]["name"],
            "pa_not_a_secret"
        );
    }
}
