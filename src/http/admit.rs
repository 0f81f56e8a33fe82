//! Admission: the stages every GraphQL request over HTTP goes through before it runs,
//! whatever form its answer takes (a JSON reply, `graphql.rs`, or an event stream,
//! `sse.rs`): its client's address counted, its parameters read, its document prepared, its
//! token authenticated and its caller's rate counted.

use std::net::{IpAddr, SocketAddr};

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use serde_json::Value;

use super::idempotency;
use super::{AppState, RequestId};
use crate::auth::OperationKind;
use crate::graphql::error::code;
use crate::graphql::pipeline::{Caller, Params, Prepared, RateStatus, Rejection, Stop};

/// What the stages learnt of a request, for its answer's headers and its metrics.
#[derive(Default)]
pub struct Seen {
    /// Where the caller stands with its rate limit, once it was counted.
    pub rate: Option<RateStatus>,
    /// The operation's root field ("multiple" for several), once the document was read.
    pub operation: Option<&'static str>,
    /// Its kind, once the document was read.
    pub kind: Option<OperationKind>,
}

/// A request admitted to run: its operation read, its caller known and within its rate.
pub struct Admitted {
    pub prepared: Prepared,
    pub caller: Caller,
    /// The token it came with, for what runs longer than a request (a subscription).
    pub token: Option<String>,
    /// Its Idempotency-Key and the hash of what it asks, when it sent one.
    pub key: Option<(String, String)>,
}

/// The stages before execution, in order, whatever the response's form (JSON or an event
/// stream): the client's address counted, the parameters read, the document prepared, the
/// token authenticated and the caller's rate counted.
pub async fn admit(
    app: &AppState,
    parts: &Parts,
    body: Body,
    seen: &mut Seen,
) -> Result<Admitted, Rejection> {
    let address = client_address(app, parts);
    seen.rate = Some(app.pipeline.limit_address(address)?);
    let params = app.pipeline.resolve(read_params(app, parts, body).await?)?;
    let key = idempotency::key_of(&parts.headers).map_err(Rejection::malformed)?;
    let request_hash = key.as_ref().map(|_| idempotency::request_hash(&params));
    let prepared = app.pipeline.prepare(params)?;
    seen.operation = Some(prepared.operation.metric_name());
    seen.kind = Some(prepared.kind());
    if from_query_string_of(parts) && prepared.kind() == OperationKind::Mutation {
        return Err(Rejection::new(
            Stop::WrongMethod,
            code::BAD_REQUEST,
            "only queries can be sent with GET: send mutations with POST",
        ));
    }
    let token = token(&parts.headers);
    let principal = app.pipeline.authenticate(&prepared, token).await?;
    seen.rate = Some(app.pipeline.limit(principal.as_ref(), address)?);
    let caller = Caller {
        principal,
        address,
        request_id: parts.extensions.get::<RequestId>().map(|id| id.0.clone()),
        key: None,
    };
    Ok(Admitted {
        prepared,
        caller,
        token: token.map(str::to_string),
        key: key.zip(request_hash),
    })
}

/// Whether the request's parameters are in its query string: a GET's, and a HEAD's, which
/// is a GET without the body of the answer (axum routes it to the GET handler, and hyper reads
/// a body whatever the method: read as a POST, it ran mutations).
fn from_query_string_of(parts: &Parts) -> bool {
    parts.method == Method::GET || parts.method == Method::HEAD
}

/// The request's parameters: from the query string of a GET (or HEAD), from the JSON body of
/// a POST.
async fn read_params(app: &AppState, parts: &Parts, body: Body) -> Result<Params, Rejection> {
    let read = if from_query_string_of(parts) {
        from_query_string(parts.uri.query().unwrap_or(""))
    } else {
        if !is_json_content(&parts.headers) {
            return Err(Rejection::new(
                Stop::UnsupportedMediaType,
                code::BAD_REQUEST,
                "send the request with Content-Type: application/json",
            ));
        }
        let body: Bytes = axum::body::to_bytes(body, app.max_body_bytes)
            .await
            .map_err(|_| {
                Rejection::new(
                    Stop::TooLarge,
                    code::BAD_REQUEST,
                    format!(
                        "the request body is larger than the limit of {} bytes",
                        app.max_body_bytes
                    ),
                )
            })?;
        from_body(&body)
    };
    read.map_err(Rejection::malformed)
}

/// Reads a POST body.
fn from_body(body: &[u8]) -> Result<Params, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the request body is not valid JSON: {e}"))?;
    match value {
        Value::Object(object) => Params::from_object(object),
        Value::Array(_) => Err(
            "batched requests (a JSON array) are not supported: send one \
                                operation per request"
                .into(),
        ),
        _ => Err("the request body must be a JSON object with a \"query\"".into()),
    }
}

/// Reads GET parameters; `variables` and `extensions` are JSON text.
fn from_query_string(raw: &str) -> Result<Params, String> {
    let mut object = serde_json::Map::new();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        let value = match key.as_ref() {
            "variables" | "extensions" => serde_json::from_str(&value)
                .map_err(|e| format!("the \"{key}\" parameter is not valid JSON: {e}"))?,
            _ => Value::String(value.into_owned()),
        };
        object.insert(key.into_owned(), value);
    }
    Params::from_object(object)
}

/// Is the request body JSON? (`application/json`, any parameters.)
fn is_json_content(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The token of the `x-token` header.
fn token(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-token").and_then(|v| v.to_str().ok())
}

/// The client's address: the peer's, or the one a trusted proxy forwards for (grouped as
/// every limit counts it).
pub fn client_address(app: &AppState, parts: &Parts) -> Option<IpAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| app.addresses.client(peer.ip(), &parts.headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_request_parameters() {
        let p = from_body(br#"{"query":"{ a }","variables":{"x":1},"operationName":null}"#)
            .expect("valid");
        assert_eq!(p.query, "{ a }");
        assert!(p.variables.is_some());
        assert!(from_body(b"[]").is_err());
        assert!(from_body(b"{").is_err());
        assert!(from_body(br#"{"query":1}"#).is_err());
        assert!(from_body(br#"{"query":"{a}","variables":"x"}"#).is_err());
        let g = from_query_string("query=%7B+a+%7D&variables=%7B%22x%22%3A1%7D").expect("valid");
        assert_eq!(g.query, "{ a }");
        assert!(from_query_string("query=x&variables=%7B").is_err());
    }
}
