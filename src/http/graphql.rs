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
//! A request goes: admission (`admit.rs`: read params → prepare → GET carries queries only →
//! authenticate → rate limit) → idempotency key around execution → reply (`reply.rs`), all
//! within the request time limit. A websocket upgrade goes to `ws.rs`, a request for an event
//! stream to `sse.rs`.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::Value;
use tracing::Instrument;

use super::AppState;
use super::admit::{Admitted, Seen, admit, client_address};
use super::idempotency::{self, Outcome};
use super::prometheus;
use super::reply::{MediaType, Reply};
use super::server::Ticket;
use crate::auth::{OperationKind, Principal};
use crate::graphql::error::code;
use crate::graphql::pipeline::{Caller, Executed, Pipeline, Prepared, Rejection, Stop};
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
    // drops the stage in progress, which rolls back the transaction it was in. A client that
    // goes away drops this too, but for a mutation, run in a task of its own to the same
    // deadline (see `run_to_its_end`).
    let started = Instant::now();
    let limit = app.request_timeout;
    let deadline = tokio::time::Instant::now() + limit;
    let mut seen = Seen::default();
    let answered = tokio::time::timeout_at(
        deadline,
        answer(&app, media, &parts, body, &mut seen, deadline),
    )
    .await;
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
            let rejection = Rejection::timed_out(limit, seen.kind);
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
/// The request's stages, in order.
async fn answer(
    app: &AppState,
    media: MediaType,
    parts: &Parts,
    body: Body,
    seen: &mut Seen,
    deadline: tokio::time::Instant,
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
        _ if prepared.kind() == OperationKind::Mutation => {
            let place = parts.extensions.get::<Ticket>().cloned();
            run_to_its_end(app, media, prepared, caller, deadline, place).await
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

/// Executes a mutation in a task of its own: a client that goes away before the answer does
/// not stop it half-way, with the root fields before the one stopped made and the rest not
/// (as a keyed one runs).
async fn run_to_its_end(
    app: &AppState,
    media: MediaType,
    prepared: Prepared,
    caller: Caller,
    deadline: tokio::time::Instant,
    place: Option<Ticket>,
) -> Result<Reply, Rejection> {
    let executed = mutation_to_its_end(
        app.pipeline.clone(),
        prepared,
        caller,
        (deadline, app.request_timeout),
        place,
    )
    .await?;
    Ok(Reply::executed(media, executed))
}

/// Starts a mutation in a task of its own, now, and returns its outcome, to be awaited or
/// not: over HTTP and over a websocket, a client that goes away, or a websocket's `complete`,
/// does not stop it. Its time limit (`deadline`, of a request `limit` long) still does. The
/// task holds the connection's place, so that a server told to stop waits for it as for any
/// request in flight.
pub(super) fn mutation_to_its_end(
    pipeline: Pipeline,
    prepared: Prepared,
    caller: Caller,
    (deadline, limit): (tokio::time::Instant, std::time::Duration),
    place: Option<Ticket>,
) -> impl Future<Output = Result<Executed, Rejection>> + Send + 'static {
    let task = tokio::spawn(
        async move {
            let _place = place;
            tokio::time::timeout_at(deadline, pipeline.execute(prepared, caller))
                .await
                .unwrap_or_else(|_| Err(Rejection::timed_out(limit, Some(OperationKind::Mutation))))
        }
        .in_current_span(),
    );
    async move { task.await.unwrap_or_else(task_failed) }
}

/// What a request whose task failed (it panicked) is answered; the log says why.
fn task_failed<T>(failed: tokio::task::JoinError) -> Result<T, Rejection> {
    tracing::error!(error = %failed, "a mutation's task failed");
    Err(Rejection::new(
        Stop::Unavailable,
        code::INTERNAL_SERVER_ERROR,
        "Internal server error",
    ))
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
            return Ok(replay(stored, media));
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
    task.await.unwrap_or_else(task_failed)
}

/// The first response to a key, sent again, in the media type the retry asks for: only a
/// request that ran keeps its response, and such a response is 200 under either type, so the
/// body is the same whichever the first request asked for.
fn replay(stored: crate::store::idempotency::StoredResponse, media: MediaType) -> Reply {
    let status = u16::try_from(stored.status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let body = serde_json::from_str(&stored.response).unwrap_or(Value::Null);
    Reply::replayed(status, media, body)
}
