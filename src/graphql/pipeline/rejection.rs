//! A request that stops before its operation runs, or whose result cannot be sent: every early
//! exit of every stage is one of these. Each transport turns it into its own answer in one
//! place (HTTP: a status and a body of `errors`; the websocket: an `error` message or a close).

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::limits::Exceeded;
use super::rate_limit::RateStatus;
use crate::auth::OperationKind;
use crate::graphql::error::code;

/// Why a request was stopped; the transport picks its status from this.
#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    /// The request itself cannot be read (not JSON, no query, a bad parameter or header).
    Malformed,
    /// The document cannot run as sent: it does not parse, breaks a limit, or names no
    /// operation it holds. A GraphQL error of the document rather than of the transport.
    Document,
    /// No valid token.
    Unauthenticated,
    /// The token may not do this.
    Forbidden,
    /// The caller is over its rate limit.
    RateLimited(RateStatus),
    /// The operation cannot be sent this way (a mutation over GET).
    WrongMethod,
    /// None of the response types the client accepts can be given.
    NotAcceptable,
    /// The body is not of a type the endpoint reads.
    UnsupportedMediaType,
    /// The body is larger than the limit.
    TooLarge,
    /// A request with the same idempotency key is still running.
    InProgress,
    /// The idempotency key was used for another request.
    KeyReused,
    /// The idempotency key's request wrote, and its answer was lost with its server.
    AnswerLost,
    /// The server cannot answer now (the database, the audit log, the time limit): try again.
    Unavailable,
}

/// A stopped request: why, and what the caller is told.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    pub stop: Stop,
    /// The error's `extensions.code`.
    pub code: &'static str,
    /// A sentence for the caller: what went wrong and what to do.
    pub message: String,
    /// More of the error's `extensions` (the limit broken and by how much).
    pub details: Vec<(&'static str, Value)>,
    /// What the query cost, once it was measured: the response's `extensions.cost`.
    pub cost: Option<Box<Value>>,
}

impl Rejection {
    pub fn new(stop: Stop, code: &'static str, message: impl Into<String>) -> Rejection {
        Rejection {
            stop,
            code,
            message: message.into(),
            details: Vec::new(),
            cost: None,
        }
    }

    /// The request cannot be read.
    pub fn malformed(message: impl Into<String>) -> Rejection {
        Rejection::new(Stop::Malformed, code::BAD_REQUEST, message)
    }

    /// An argument or value the document carries is unusable.
    pub fn bad_input(message: impl Into<String>) -> Rejection {
        Rejection::new(Stop::Document, code::BAD_USER_INPUT, message)
    }

    /// A document over a limit: QUERY_TOO_COMPLEX, naming the limit, the document's value and
    /// the limit's.
    pub fn too_complex(exceeded: &Exceeded) -> Rejection {
        let mut rejection =
            Rejection::new(Stop::Document, code::QUERY_TOO_COMPLEX, exceeded.message());
        rejection.details = vec![
            ("limit", json!(exceeded.limit)),
            ("value", json!(exceeded.value)),
            ("max", json!(exceeded.max)),
        ];
        rejection
    }

    /// The database cannot be reached.
    pub fn database_unavailable() -> Rejection {
        Rejection::new(
            Stop::Unavailable,
            code::SERVICE_UNAVAILABLE,
            "The database is unavailable; try again shortly",
        )
    }

    /// The request, of this kind when its document was read, ran longer than the limit and
    /// was stopped. A mutation's root fields run one after another, each committed as it
    /// ends: those before the one stopped (rolled back) may have been made, and a retry
    /// without an idempotency key would make them again.
    pub fn timed_out(limit: Duration, kind: Option<OperationKind>) -> Rejection {
        let limit = humantime::format_duration(limit);
        let message = if kind == Some(OperationKind::Mutation) {
            format!(
                "The request took longer than the limit of {limit} and was stopped: the \
                 change in progress was undone, but changes of the root fields before it may \
                 have been made. Look before trying again, or send the mutation with an \
                 Idempotency-Key, whose retry is answered from the first"
            )
        } else {
            format!(
                "The request took longer than the limit of {limit} and was stopped; try again, \
                 or ask for less"
            )
        };
        Rejection::new(Stop::Unavailable, code::SERVICE_UNAVAILABLE, message)
    }

    /// Adds the response's `extensions.cost`.
    pub fn with_cost(mut self, cost: Value) -> Rejection {
        self.cost = Some(Box::new(cost));
        self
    }

    /// The value of one of the error's `extensions` beyond its code.
    pub fn detail(&self, key: &str) -> Option<&Value> {
        self.details.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The response body: errors only, no `data` (nothing ran).
    pub fn body(&self) -> Value {
        let mut extensions = Map::new();
        extensions.insert("code".into(), json!(self.code));
        for (key, value) in &self.details {
            extensions.insert((*key).into(), value.clone());
        }
        let mut body = Map::new();
        body.insert(
            "errors".into(),
            json!([{ "message": self.message, "extensions": extensions }]),
        );
        if let Some(cost) = &self.cost {
            body.insert("extensions".into(), json!({ "cost": cost }));
        }
        Value::Object(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_is_errors_only() {
        let exceeded = Exceeded {
            limit: "depth",
            value: 19,
            max: 15,
        };
        let body = Rejection::too_complex(&exceeded)
            .with_cost(json!({ "requested": 3, "limit": 10 }))
            .body();
        assert_eq!(
            body,
            json!({
                "errors": [{
                    "message": "The query is nested 19 levels deep, more than the limit of 15",
                    "extensions": { "code": "QUERY_TOO_COMPLEX", "limit": "depth", "value": 19,
                                    "max": 15 }
                }],
                "extensions": { "cost": { "requested": 3, "limit": 10 } }
            })
        );
        assert!(body.get("data").is_none());
    }
}
