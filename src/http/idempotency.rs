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
use crate::store::idempotency::{Claim, Claimed, Reclaim, StoredResponse};
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
    token_id: String,
    key: String,
    request_hash: String,
}

/// What to do with a mutation that carries a key.
pub enum Outcome {
    /// Run it; keep its response with [`finish`].
    Run(Held),
    /// Answer with the first response again.
    Replay(StoredResponse),
}

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
    store: &Store,
    principal: &Principal,
    key: String,
    request_hash: String,
    abandon_after: Duration,
) -> Result<Outcome, Rejection> {
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
        Claimed::OtherRequest => Err(Rejection::new(
            Stop::KeyReused,
            code::IDEMPOTENCY_KEY_REUSED,
            "This Idempotency-Key was used for a different request: send a new key with each \
             new request, and the same key only with a retry of the same request",
        )),
    }
}

/// Keeps the response of a request that held its key, for its retries; secrets in it (the
/// token of createApiToken or signIn, shown once) are kept as null. A request that failed
/// for a passing reason before it changed anything (every root field null, every error
/// INTERNAL_SERVER_ERROR or SERVICE_UNAVAILABLE) lets its key go instead, so that a retry runs
/// it again. If the response cannot be kept, a retry finds the claim unfinished and, once it
/// is abandoned, runs again: said in the log.
pub async fn finish(store: &Store, held: Held, status: u16, content_type: &str, body: &Value) {
    let practice = store.practice(&held.practice_id);
    let done = if failed_before_writing(body) {
        practice.release_idempotency_key(held.claim()).await
    } else {
        let mut body = body.clone();
        redact_secrets(&mut body);
        let response = StoredResponse {
            status: i64::from(status),
            content_type: content_type.to_string(),
            response: body.to_string(),
        };
        practice
            .finish_idempotency_key(held.claim(), &response)
            .await
    };
    if let Err(error) = done {
        tracing::error!(%error, "could not keep the response of an idempotent request");
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

/// How often expired keys are deleted.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Deletes the keys older than [`KEEP_FOR`], in every practice. Expired keys are ignored even
/// before they are swept; this keeps the table to a day's keys.
pub async fn sweep(store: &Store) {
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
    fn keeps_no_secret_and_lets_passing_failures_go() {
        let secret = format!("pa_p1_{}", "ab".repeat(32));
        let mut body = serde_json::json!({ "data": { "createApiToken": {
            "token": secret, "data": { "name": "pa_not_a_secret" } } } });
        redact_secrets(&mut body);
        assert_eq!(body["data"]["createApiToken"]["token"], Value::Null);
        assert_eq!(
            body["data"]["createApiToken"]["data"]["name"],
            "pa_not_a_secret"
        );

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
        assert!(!failed_before_writing(
            &serde_json::json!({ "data": { "a": null } })
        ));
    }
}
