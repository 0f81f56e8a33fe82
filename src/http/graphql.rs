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
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::idempotency::{self, Outcome};
use super::prometheus;
use super::reply::{MediaType, Reply};
use super::{AppState, RequestId};
use crate::auth::{OperationKind, Principal};
use crate::graphql::error::code;
use crate::graphql::pipeline::{Caller, Params, Prepared, RateStatus, Rejection, Stop};
use crate::store::audit::Read;

/// `GET` and `POST /graphql`.
pub async fn handle(State(app): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET && super::ws::is_upgrade(&parts) {
        let address = client_address(&app, &parts);
        return super::ws::upgrade(app, parts, address).await;
    }
    if super::sse::wants_events(&parts.headers) {
        return super::sse::handle(app, parts, body).await;
    }
    if parts.method == Method::GET
        && parts.uri.query().is_none_or(str::is_empty)
        && super::graphiql::wants_html(&parts.headers)
    {
        return super::graphiql::page();
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
    let started = Instant::now();
    let limit = app.request_timeout;
    let mut seen = Seen::default();
    let answered = tokio::time::timeout(limit, answer(&app, media, &parts, body, &mut seen)).await;
    let (reply, outcome) = match answered {
        Ok(Ok(reply)) => {
            let outcome = if reply.body.get("errors").is_some() {
                "errors"
            } else {
                "ok"
            };
            (reply, outcome)
        }
        Ok(Err(rejection)) => (Reply::rejected(media, &rejection), rejection.code),
        Err(_) => {
            tracing::warn!(?limit, "request stopped: it took too long");
            let rejection = Rejection::timed_out(limit);
            (Reply::rejected(media, &rejection), rejection.code)
        }
    };
    let operation = seen.operation.unwrap_or("none");
    metrics::counter!(prometheus::REQUESTS, "operation" => operation, "outcome" => outcome)
        .increment(1);
    metrics::histogram!(prometheus::DURATION, "operation" => operation)
        .record(started.elapsed().as_secs_f64());
    reply.into_response(seen.rate)
}

/// What the stages learnt of a request, for its answer's headers and its metrics.
#[derive(Default)]
pub(super) struct Seen {
    /// Where the caller stands with its rate limit, once it was counted.
    pub rate: Option<RateStatus>,
    /// The operation's root field ("multiple" for several), once the document was read.
    pub operation: Option<&'static str>,
}

/// A request admitted to run: its operation read, its caller known and within its rate.
pub(super) struct Admitted {
    pub prepared: Prepared,
    pub caller: Caller,
    /// The token it came with, for what runs longer than a request (a subscription).
    pub token: Option<String>,
    /// Its Idempotency-Key and the hash of what it asks, when it sent one.
    key: Option<(String, String)>,
}

/// The stages before execution, in order, whatever the response's form (JSON or an event
/// stream): the client's address counted, the parameters read, the document prepared, the
/// token authenticated and the caller's rate counted.
pub(super) async fn admit(
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
    if parts.method == Method::GET && prepared.kind() == OperationKind::Mutation {
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

/// The request's stages, in order.
async fn answer(
    app: &AppState,
    media: MediaType,
    parts: &Parts,
    body: Body,
    seen: &mut Seen,
) -> Result<Reply, Rejection> {
    let Admitted {
        prepared,
        caller,
        key,
        ..
    } = admit(app, parts, body, seen).await?;
    if prepared.kind() == OperationKind::Subscription {
        return Err(Rejection::new(
            Stop::Malformed,
            code::BAD_REQUEST,
            "a subscription needs a stream: open a websocket (graphql-transport-ws) on \
             /graphql, or ask for Server-Sent Events with Accept: text/event-stream",
        ));
    }
    match (key, &caller.principal) {
        (Some((key, hash)), Some(principal)) if prepared.kind() == OperationKind::Mutation => {
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

/// Executes a mutation sent with an Idempotency-Key once: a retry gets the first response,
/// its reads of patient data recorded again and the caller's permissions checked again.
async fn run_once(
    app: &AppState,
    media: MediaType,
    prepared: Prepared,
    caller: Caller,
    principal: &Principal,
    key: String,
    hash: String,
) -> Result<Reply, Rejection> {
    let store = app.pipeline.store();
    let claimed = idempotency::claim(store, principal, key, hash, app.request_timeout * 2).await?;
    let held = match claimed {
        Outcome::Run(held) => held,
        Outcome::Replay(stored) => {
            let reads = stored
                .reads
                .as_deref()
                .map(Read::from_json)
                .unwrap_or_default();
            app.pipeline
                .deliver_again(&prepared, principal, reads)
                .await?;
            return Ok(replay(stored));
        }
    };
    let caller = Caller {
        key: Some(held.key.clone()),
        ..caller
    };
    // The mutation runs to its end in a task of its own: neither the time limit nor a client
    // that goes away stops it half-way, and its outcome is kept for the retry either way.
    let app = app.clone();
    let task = tokio::spawn(async move {
        let store = app.pipeline.store();
        let ran = match app.pipeline.run(prepared, caller).await {
            Ok(ran) if ran.executed.ran => ran,
            Ok(refused) => {
                // Validation refused it: it did not run, and a retry may.
                idempotency::release(store, &held).await;
                return Ok(Reply::executed(media, refused.executed));
            }
            Err(rejection) => {
                idempotency::release(store, &held).await;
                return Err(rejection);
            }
        };
        let first = Reply::executed(media, ran.executed.clone());
        let content_type = media.content_type();
        idempotency::finish(
            store,
            &held,
            first.status.as_u16(),
            content_type,
            &first.body,
            ran.reads(),
        )
        .await;
        let executed = app.pipeline.deliver(ran).await?;
        Ok(Reply::executed(media, executed))
    });
    task.await.unwrap_or_else(|failed| {
        tracing::error!(error = %failed, "an idempotent mutation's task failed");
        Err(Rejection::new(
            Stop::Unavailable,
            code::INTERNAL_SERVER_ERROR,
            "Internal server error",
        ))
    })
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

/// The client's address: the peer's, or the one a trusted proxy forwards for (grouped as
/// every limit counts it).
fn client_address(app: &AppState, parts: &Parts) -> Option<IpAddr> {
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
