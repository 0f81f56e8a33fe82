//! GraphQL over Server-Sent Events, in the "distinct connections" mode of the `graphql-sse`
//! protocol: for clients that cannot open a websocket. A `GET` or `POST /graphql` that accepts
//! `text/event-stream` goes through the same stages as any other request (`admit::admit`),
//! then gets a stream of `next` events (each an execution result) ended by `complete`: one
//! result for a query or mutation, one per event for a subscription, which runs until the
//! client closes the connection.
//!
//! As the protocol asks, errors found in the document (validation, limits) come through the
//! accepted stream, as a `next` with `errors`; a request that cannot be read at all (bad JSON,
//! no token, over its rate) is refused with its status before any stream starts. When the
//! token stops working, the subscriber falls behind, or its connection is told to close (it
//! reached its age, or the server stops), or the events it was catching up on are swept away,
//! a last `next` says why (code UNAUTHENTICATED, CONSUMER_TOO_SLOW, SERVICE_UNAVAILABLE or
//! CURSOR_EXPIRED) before `complete`. A subscription's stream counts against its token's
//! connections with its websockets (`PRACTICE_MAX_WEBSOCKETS_PER_TOKEN`); past them it is
//! refused (403, FORBIDDEN) before it starts.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, BoxStream};
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::AppState;
use super::admit::{Admitted, Seen, admit};
use super::reply::{MediaType, Reply};
use super::server::Ticket;
use super::ws::{Counted, PerToken};
use crate::auth::OperationKind;
use crate::graphql::error::code;
use crate::graphql::events::{Connection, Cut};
use crate::graphql::pipeline::{Executed, Rejection, Stop};
use crate::store::now_ms;

/// True when the client asks for an event stream and not for JSON (a client that accepts
/// both gets JSON: an event stream is asked for on purpose).
pub fn wants_events(headers: &HeaderMap) -> bool {
    let types: Vec<String> = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|item| item.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .collect();
    types.iter().any(|t| t == "text/event-stream")
        && !types
            .iter()
            .any(|t| t == "application/json" || t == "application/graphql-response+json")
}

/// `GET` or `POST /graphql` with `Accept: text/event-stream`.
pub async fn handle(app: AppState, parts: Parts, body: Body) -> Response {
    let mut seen = Seen::default();
    let limit = app.request_timeout;
    let admitted = tokio::time::timeout(limit, admit(&app, &parts, body, &mut seen)).await;
    let admitted = match admitted {
        Ok(Ok(admitted)) => admitted,
        // Found in the document: told through the stream, as the protocol asks.
        Ok(Err(rejection)) if rejection.stop == Stop::Document => {
            return events(stream::iter([rejection.body()]).boxed());
        }
        Ok(Err(rejection)) => {
            return Reply::rejected(MediaType::GraphqlResponseJson, &rejection)
                .into_response(seen.rate);
        }
        Err(_) => {
            let rejection = Rejection::timed_out(limit, seen.kind);
            return Reply::rejected(MediaType::GraphqlResponseJson, &rejection)
                .into_response(seen.rate);
        }
    };
    if admitted.key.is_some() && admitted.prepared.kind() == OperationKind::Mutation {
        // Honoured on JSON requests only: run over a stream, its mutation would be made again
        // on every retry, which is what the key is sent to prevent.
        let rejection = Rejection::malformed(
            "Idempotency-Key is honoured on requests that accept application/json or \
             application/graphql-response+json: send the mutation that way",
        );
        return Reply::rejected(MediaType::GraphqlResponseJson, &rejection)
            .into_response(seen.rate);
    }
    let results = if admitted.prepared.kind() == OperationKind::Subscription {
        // Held open like a websocket, and counted with the token's websockets.
        let counted = match &admitted.caller.principal {
            Some(principal) => {
                let max = app.ws.max_per_token;
                let Some(counted) = app.ws_per_token.enter(&principal.token_id, max) else {
                    let rejection =
                        Rejection::new(Stop::Forbidden, code::FORBIDDEN, PerToken::refusal(max));
                    return Reply::rejected(MediaType::GraphqlResponseJson, &rejection)
                        .into_response(seen.rate);
                };
                Some(counted)
            }
            None => None,
        };
        let ticket = parts.extensions.get::<Ticket>().cloned();
        subscription(&app, admitted, ticket, counted)
    } else {
        let Admitted {
            prepared, caller, ..
        } = admitted;
        let pipeline = app.pipeline.clone();
        let kind = prepared.kind();
        async move {
            match tokio::time::timeout(limit, pipeline.execute(prepared, caller)).await {
                Ok(Ok(executed)) => executed.body,
                Ok(Err(rejection)) => rejection.body(),
                Err(_) => Rejection::timed_out(limit, Some(kind)).body(),
            }
        }
        .into_stream()
        .boxed()
    };
    events(results)
}

/// A subscription's results: one per event, until the client goes away, the token stops
/// working or the subscriber falls behind (a last result says which).
fn subscription(
    app: &AppState,
    admitted: Admitted,
    ticket: Option<Ticket>,
    counted: Option<Counted>,
) -> BoxStream<'static, Value> {
    let Admitted {
        prepared,
        caller,
        token,
        ..
    } = admitted;
    let Some(principal) = caller.principal.clone() else {
        return stream::iter([Rejection::new(
            Stop::Unauthenticated,
            code::UNAUTHENTICATED,
            "A subscription needs a token",
        )
        .body()])
        .boxed();
    };
    if let Err(rejection) = app.pipeline.permit(&prepared, &principal) {
        return stream::iter([rejection.body()]).boxed();
    }
    let expires_at = principal.expires_at;
    let (connection, cuts) = Connection::new(token.unwrap_or_default(), principal);
    let results = match app.pipeline.subscribe(prepared, caller, connection.clone()) {
        Ok(results) => results,
        Err(rejection) => return stream::iter([rejection.body()]).boxed(),
    };
    let state = Following {
        results,
        cuts,
        connection,
        expires_at,
        ticket,
        _counted: counted,
        done: false,
    };
    stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        let next = state.next().await;
        state.done = next.as_ref().is_none_or(|(last, _)| *last);
        next.map(|(_, value)| (value, state))
    })
    .boxed()
}

/// A subscription followed over an event stream.
struct Following {
    results: BoxStream<'static, Result<Executed, Rejection>>,
    cuts: watch::Receiver<Option<Cut>>,
    /// Held for the subscription's life: the cuts come through it.
    connection: Arc<Connection>,
    expires_at: Option<i64>,
    /// The HTTP connection's place, which says when it is told to close.
    ticket: Option<Ticket>,
    /// Counted against the token's connections while it runs.
    _counted: Option<Counted>,
    done: bool,
}

impl Following {
    /// The next result, and whether it is the last; None when the subscription ended.
    async fn next(&mut self) -> Option<(bool, Value)> {
        let expiry = async {
            match self.expires_at {
                Some(at) => {
                    let wait = u64::try_from(at - now_ms()).unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                None => std::future::pending().await,
            }
        };
        let closing = async {
            match &self.ticket {
                Some(ticket) => ticket.closing().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = self.results.next() => match result? {
                Ok(executed) => Some((false, executed.body)),
                Err(rejection) => Some((true, rejection.body())),
            },
            cut = self.cuts.wait_for(Option::is_some) => {
                let cut = cut.ok().and_then(|cut| cut.clone());
                Some((true, cut_body(cut)))
            },
            () = closing => Some((true, closing_body())),
            () = expiry => {
                self.connection.cut(Cut::Forbidden("The token has expired".into()));
                Some((true, cut_body(Some(Cut::Forbidden("The token has expired".into())))))
            }
        }
    }
}

/// The last result of a subscription that was cut off.
fn cut_body(cut: Option<Cut>) -> Value {
    let (code, message) = match cut {
        Some(Cut::TooSlow(reason)) => (code::CONSUMER_TOO_SLOW, reason),
        Some(Cut::Unavailable(reason)) => (code::SERVICE_UNAVAILABLE, reason),
        Some(Cut::Forbidden(reason)) => (code::UNAUTHENTICATED, reason),
        None => (code::UNAUTHENTICATED, "The subscription ended".to_string()),
    };
    json!({ "errors": [{ "message": message, "extensions": { "code": code } }] })
}

/// The last result of a subscription whose connection closes: it reached its age
/// (`PRACTICE_MAX_CONNECTION_AGE`), or the server stops. The client subscribes again, on a
/// new connection, after the last event it got.
fn closing_body() -> Value {
    json!({ "errors": [{
        "message": "This connection is closing (it reached its age, or the server stops): \
                    subscribe again with after: the id of the last event received",
        "extensions": { "code": code::SERVICE_UNAVAILABLE },
    }] })
}

/// How long an event stream may stay quiet before a comment goes down it, so that proxies
/// between the two ends do not take it for dead.
const KEEP_ALIVE: Duration = Duration::from_secs(12);

/// The `complete` event, with the empty `data` field the protocol asks for: an `EventSource`
/// dispatches no event without one. (axum's `Event` writes no `data` line for empty data,
/// which is why the events are written here.)
const COMPLETE: &[u8] = b"event: complete\ndata: \n\n";

/// Results as the protocol's events: a `next` each, then `complete`; a comment after each
/// quiet [`KEEP_ALIVE`].
fn events(results: BoxStream<'static, Value>) -> Response {
    // Compact JSON holds no line break (one in a string is written `\n`): each result is one
    // `data` line.
    let frames = results
        .map(|result| Bytes::from(format!("event: next\ndata: {result}\n\n")))
        .chain(stream::once(async { Bytes::from_static(COMPLETE) }))
        .boxed();
    let kept_alive = stream::unfold(frames, |mut frames| async move {
        // The stream's own state is kept between polls, so a quiet spell drops nothing.
        let frame = tokio::select! {
            frame = frames.next() => frame?,
            () = tokio::time::sleep(KEEP_ALIVE) => Bytes::from_static(b":\n\n"),
        };
        Some((Ok::<_, Infallible>(frame), frames))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(kept_alive),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// The bytes on the wire, as the protocol writes them: `complete` with its empty `data`
    /// field, and each result on one `data` line.
    #[tokio::test]
    async fn the_events_are_written_as_the_protocol_shows_them() {
        let results = stream::iter([json!({ "data": { "x": "two\nlines" } })]).boxed();
        let response = events(results);
        assert_eq!(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes()),
            Some(&b"text/event-stream"[..])
        );
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("the body");
        assert_eq!(
            std::str::from_utf8(&body).expect("text"),
            "event: next\ndata: {\"data\":{\"x\":\"two\\nlines\"}}\n\nevent: complete\ndata: \n\n"
        );
    }

    #[test]
    fn knows_an_event_stream_accept() {
        let mut headers = HeaderMap::new();
        headers.insert(
            axum::http::header::ACCEPT,
            HeaderValue::from_static("text/event-stream;q=0.9"),
        );
        assert!(wants_events(&headers));
        headers.insert(
            axum::http::header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        assert!(!wants_events(&headers));
        headers.insert(
            axum::http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        assert!(!wants_events(&headers));
    }
}
