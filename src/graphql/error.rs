//! The errors the API returns, each with its `extensions.code`.

use async_graphql::{Error, ErrorExtensions};

use crate::auth::AuthError;
use crate::store::StoreError;

/// The fixed list of `extensions.code` values.
pub mod code {
    pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";
    pub const FORBIDDEN: &str = "FORBIDDEN";
    pub const BAD_USER_INPUT: &str = "BAD_USER_INPUT";
    pub const GRAPHQL_PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
    pub const GRAPHQL_VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";
    pub const QUERY_TOO_COMPLEX: &str = "QUERY_TOO_COMPLEX";
    pub const RATE_LIMITED: &str = "RATE_LIMITED";
    pub const IDEMPOTENCY_KEY_IN_USE: &str = "IDEMPOTENCY_KEY_IN_USE";
    pub const IDEMPOTENCY_KEY_REUSED: &str = "IDEMPOTENCY_KEY_REUSED";
    pub const IDEMPOTENCY_ANSWER_LOST: &str = "IDEMPOTENCY_ANSWER_LOST";
    pub const BAD_REQUEST: &str = "BAD_REQUEST";
    pub const SERVICE_UNAVAILABLE: &str = "SERVICE_UNAVAILABLE";
    /// A mutation named a record the practice does not have (also in the payload's `error`).
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// The practice refused a change (also in the payload's `error`).
    pub const REFUSED: &str = "REFUSED";
    /// A persisted query's hash is not known: send the document with it.
    pub const PERSISTED_QUERY_NOT_FOUND: &str = "PERSISTED_QUERY_NOT_FOUND";
    /// A cursor older than the events kept: start again without it.
    pub const CURSOR_EXPIRED: &str = "CURSOR_EXPIRED";
    /// A subscriber fell too far behind the events: resume with `after`.
    pub const CONSUMER_TOO_SLOW: &str = "CONSUMER_TOO_SLOW";
    pub const INTERNAL_SERVER_ERROR: &str = "INTERNAL_SERVER_ERROR";
}

/// An error with a code.
pub fn coded(code: &'static str, message: impl Into<String>) -> Error {
    Error::new(message).extend_with(|_, ext| ext.set("code", code))
}

/// Password guesses for one email (or from one address) past the throttle's free ones, by
/// signIn or changePassword: RATE_LIMITED, with `extensions.retryAfter` in whole seconds.
pub fn guesses_throttled(message: impl Into<String>, wait: &std::time::Duration) -> Error {
    metrics::counter!("practice_sign_in_throttled_total").increment(1);
    let seconds = crate::auth::seconds(wait);
    coded(code::RATE_LIMITED, message).extend_with(|_, ext| ext.set("retryAfter", seconds))
}

/// The caller lacks a permission; the message names it (`Missing permission patients:read`),
/// and so does `extensions.permission`; `extensions.alternatives` lists the narrower
/// permissions that would also do (e.g. `query:patient`).
pub fn forbidden(permission: impl std::fmt::Display, alternatives: &[String]) -> Error {
    let permission = permission.to_string();
    let alternatives = alternatives.to_vec();
    Error::new(missing_permission(&permission)).extend_with(move |_, ext| {
        ext.set("code", code::FORBIDDEN);
        ext.set("permission", permission.as_str());
        if !alternatives.is_empty() {
            ext.set("alternatives", alternatives.clone());
        }
    })
}

/// What a missing permission says, wherever it is refused: `Missing permission patients:read`.
pub fn missing_permission(permission: impl std::fmt::Display) -> String {
    format!("Missing permission {permission}")
}

/// An argument is invalid; the message says which and how.
pub fn bad_input(message: impl Into<String>) -> Error {
    coded(code::BAD_USER_INPUT, message)
}

/// The store failed. The details are logged (inside the request's span, which carries its id);
/// the caller learns only that it was not their fault, and whether to retry.
pub fn store_failed(err: StoreError) -> Error {
    store_failed_ref(&err)
}

/// [`store_failed`] for an error shared by several fields (a batch load).
pub fn store_failed_ref(err: &StoreError) -> Error {
    match err {
        StoreError::Unavailable(detail) => {
            tracing::warn!(%detail, "database unavailable");
            coded(
                code::SERVICE_UNAVAILABLE,
                "The database is unavailable; try again shortly",
            )
        }
        StoreError::Contended(error) => {
            tracing::warn!(%error, "the database was held by another change");
            coded(
                code::SERVICE_UNAVAILABLE,
                "The database was busy with another change; try again",
            )
        }
        StoreError::TakenOver => {
            tracing::warn!("a write was refused: a retry took its Idempotency-Key over");
            coded(
                code::IDEMPOTENCY_KEY_IN_USE,
                "A retry with this Idempotency-Key took this request over, as it ran too long: \
                 nothing was written here, and the retry's response is the one kept",
            )
        }
        other => internal(other),
    }
}

/// A bug or an unexpected failure: logged, and answered without details.
pub fn internal(err: impl std::fmt::Display) -> Error {
    tracing::error!(error = %err, "internal error");
    coded(code::INTERNAL_SERVER_ERROR, "Internal server error")
}

/// A refused token.
pub fn unauthenticated(err: AuthError) -> Error {
    match err {
        AuthError::Store(e) => store_failed(e),
        other => coded(code::UNAUTHENTICATED, other.to_string()),
    }
}

/// Shorthand for resolvers: `store_call().await.or_fail()?`.
pub trait OrFail<T> {
    fn or_fail(self) -> Result<T, Error>;
}

impl<T> OrFail<T> for Result<T, StoreError> {
    fn or_fail(self) -> Result<T, Error> {
        self.map_err(store_failed)
    }
}
