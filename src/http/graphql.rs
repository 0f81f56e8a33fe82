//! GraphQL over HTTP, by the GraphQL-over-HTTP specification: our own thin layer around the
//! request pipeline, because async-graphql's axum integration does not negotiate
//! `application/graphql-response+json`, set its status codes, refuse mutations over GET or
//! refuse batches as the specification asks.
//!
//! - `POST /graphql` with `Content-Type: application/json` and a body
//!   `{"query", "variables"?, "operationName"?, "extensions"?}`.
//! - `GET /graphql?query=...&variables=...` for queries; a mutation over GET is 405.
//! - A JSON array (a batch) is refused with 400.
//!
//! A request goes: read params → prepare → (GET: queries only) → authenticate → rate limit →
//! idempotency key around execution → reply (`reply.rs`), all within the request time limit.

use std::net::{IpAddr, SocketAddr};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::idempotency::{self, Outcome};
use super::reply::{MediaType, Reply};
use super::{AppState, RequestId};
use crate::auth::OperationKind;
use crate::graphql::error::code;
use crate::graphql::pipeline::{Caller, Params, Prepared, RateStatus, Rejection, Stop};

/// `GET` and `POST /graphql`.
pub async fn handle(State(app): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET
        && parts.uri.query().is_none_or(str::is_empty)
        && super::graphiql::wants_html(&parts.headers)
    {
        return super::graphiql::page().into_response();
    }
    let Some(media) = MediaType::negotiate(&parts.headers) else {
        let rejection = Rejection::new(
            Stop::NotAcceptable,
            code::BAD_REQUEST,
            "the Accept header must allow application/graphql-response+json or application/json",
        );
        return Reply::rejected(MediaType::Json, &rejection).into_response(None);
    };
    // The time limit covers everything, a slow client's trickling body included. Stopping
    // drops the stage in progress, which rolls back the transaction it was in.
    let limit = app.request_timeout;
    let mut rate = None;
    let reply =
        match tokio::time::timeout(limit, answer(&app, media, &parts, body, &mut rate)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(rejection)) => Reply::rejected(media, &rejection),
            Err(_) => {
                tracing::warn!(?limit, "request stopped: it took too long");
                Reply::rejected(media, &Rejection::timed_out(limit))
            }
        };
    reply.into_response(rate)
}

/// The request's stages, in order; `rate` is where the caller stands once it was counted.
async fn answer(
    app: &AppState,
    media: MediaType,
    parts: &Parts,
    body: Body,
    rate: &mut Option<RateStatus>,
) -> Result<Reply, Rejection> {
    let params = read_params(app, parts, body).await?;
    let key = idempotency::key_of(&parts.headers).map_err(Rejection::malformed)?;
    let request_hash = key.as_ref().map(|_| idempotency::request_hash(&params));
    let prepared = app.pipeline.prepare(params)?;
    if parts.method == Method::GET && prepared.kind() != OperationKind::Query {
        return Err(Rejection::new(
            Stop::WrongMethod,
            code::BAD_REQUEST,
            "only queries can be sent with GET: send mutations with POST",
        ));
    }
    let principal = app
        .pipeline
        .authenticate(&prepared, token(&parts.headers))
        .await?;
    let address = client_address(parts);
    *rate = Some(app.pipeline.limit(principal.as_ref(), address)?);
    let caller = Caller {
        principal,
        address,
        request_id: parts.extensions.get::<RequestId>().map(|id| id.0.clone()),
    };
    match (key, request_hash, &caller.principal) {
        (Some(key), Some(hash), Some(principal)) if prepared.kind() == OperationKind::Mutation => {
            let principal = principal.clone();
            run_once(app, media, prepared, caller, &principal, key, hash).await
        }
        _ => run(app, media, prepared, caller).await,
    }
}

/// Executes the operation.
async fn run(
    app: &AppState,
    media: MediaType,
    prepared: Prepared,
    caller: Caller,
) -> Result<Reply, Rejection> {
    let executed = app.pipeline.execute(prepared, caller).await?;
    Ok(Reply::executed(media, executed))
}

/// Executes a mutation sent with an Idempotency-Key once: a retry gets the first response.
async fn run_once(
    app: &AppState,
    media: MediaType,
    prepared: Prepared,
    caller: Caller,
    principal: &crate::auth::Principal,
    key: String,
    hash: String,
) -> Result<Reply, Rejection> {
    let store = app.pipeline.store();
    let held =
        match idempotency::claim(store, principal, key, hash, app.request_timeout * 2).await? {
            Outcome::Replay(stored) => return Ok(replay(stored)),
            Outcome::Run(held) => held,
        };
    let reply = match run(app, media, prepared, caller).await {
        Ok(reply) => reply,
        Err(rejection) => Reply::rejected(media, &rejection),
    };
    let content_type = reply.media.content_type();
    idempotency::finish(
        store,
        held,
        reply.status.as_u16(),
        content_type,
        &reply.body,
    )
    .await;
    Ok(reply)
}

/// The first response to a key, sent again.
fn replay(stored: crate::store::idempotency::StoredResponse) -> Reply {
    let status = u16::try_from(stored.status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let media = if stored.content_type.contains("graphql-response+json") {
        MediaType::GraphqlResponseJson
    } else {
        MediaType::Json
    };
    let body = serde_json::from_str(&stored.response).unwrap_or(Value::Null);
    Reply::replayed(status, media, body)
}

/// The request's parameters: from the query string of a GET, from the JSON body of a POST.
async fn read_params(app: &AppState, parts: &Parts, body: Body) -> Result<Params, Rejection> {
    let read = if parts.method == Method::GET {
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

/// The address the request came from.
fn client_address(parts: &Parts) -> Option<IpAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
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
        assert!(from_body(br#"{"variables":{}}"#).is_err());
        let g = from_query_string("query=%7B+a+%7D&variables=%7B%22x%22%3A1%7D").expect("valid");
        assert_eq!(g.query, "{ a }");
        assert!(from_query_string("query=x&variables=%7B").is_err());
    }
}
