//! GraphQL over a websocket, by the `graphql-transport-ws` protocol (the one the `graphql-ws`
//! client library speaks), on `/graphql`. Our own thin layer around the request pipeline, as
//! the HTTP one is: async-graphql's ready-made handler closes with 1002 and 1011 where the
//! protocol says 4400 and 4401, lets a second `subscribe` with a live id replace the first
//! (4409), has no `connection_init` timeout (4408), and sends validation errors as `next`
//! rather than `error`.
//!
//! A connection goes: upgrade (counted against its address's rate, offered the subprotocol;
//! each message after it counts against that rate too, before it is read) →
//! `connection_init` within `PRACTICE_WS_INIT_TIMEOUT` with the token in its payload
//! (`{"x-token": ...}`) or the upgrade's `x-token` header → `connection_ack` → any number of
//! `subscribe`s, each through the pipeline's stages (authenticate again, limit: the token is
//! known without the document, which is read after; prepare, permit, execute) → `next`s,
//! then `complete` or `error` (a subscription's `error` may come after its `next`s:
//! CURSOR_EXPIRED, when the events it catches up on are swept away). Close codes:
//!
//! | code | when |
//! |---|---|
//! | 4400 | a message that is not one of the protocol's, or malformed |
//! | 4401 | `subscribe` before `connection_ack` |
//! | 4403 | the token is missing or refused, stops working (revoked, signed out, expired), reads other things than its subscriptions started with (its permissions or access groups changed), or holds too many connections |
//! | 4406 | no `graphql-transport-ws` subprotocol |
//! | 4408 | no `connection_init` in time |
//! | 4409 | `subscribe` with the id of a subscription still running |
//! | 4429 | a second `connection_init` |
//! | 1008 | a subscriber too slow to keep up with the events (it resumes with `after`), or messages past the address's rate |
//! | 1013 | the database could not be read for a subscription, or to check the token (at `connection_init`, at a `subscribe`, or again at an event about it): connect again in a moment (and resume with `after`) |
//! | 1009 | a message over [`MAX_MESSAGE_BYTES`] (RFC 6455's "message too big") |
//! | 1001 | the server is stopping |

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use futures_util::stream::{AbortHandle, BoxStream, SelectAll};
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::reply::{MediaType, Reply};
use super::server::Ticket;
use super::{AppState, prometheus};
use crate::auth::{OperationKind, Principal};
use crate::graphql::events::{Connection, Cut};
use crate::graphql::pipeline::{Caller, Executed, Params, Rejection, Stop};
use crate::store::now_ms;

/// The subprotocol spoken.
pub const PROTOCOL: &str = "graphql-transport-ws";
/// Largest message a client may send: a document at its limit with its variables.
const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// Longest time between two pings, whatever the setting: a day.
const MOST_BETWEEN_PINGS: Duration = Duration::from_secs(24 * 3600);
/// Pings in a row a client may leave without a word before it is taken for gone.
const UNANSWERED_PINGS: u32 = 2;

/// What a websocket needs of the server beyond the pipeline.
#[derive(Clone, Debug)]
pub struct WsSettings {
    /// Time a client has to send `connection_init`.
    pub init_timeout: Duration,
    /// How often a connection is pinged; one that sends nothing back for
    /// [`UNANSWERED_PINGS`] of them in a row is dropped.
    pub keep_alive: Duration,
    /// Most subscriptions running on one connection.
    pub max_subscriptions: usize,
    /// Most connections one token may hold open on this server: websockets, and event streams
    /// of a subscription (`super::sse`), counted together.
    pub max_per_token: usize,
}

/// Connections open per token on this server: websockets, and event streams of a
/// subscription.
#[derive(Clone, Default)]
pub struct PerToken(Arc<Mutex<HashMap<String, usize>>>);

/// A connection counted against its token until dropped.
pub(super) struct Counted {
    counts: PerToken,
    token_id: String,
}

impl PerToken {
    /// The connection counted against `token_id`, unless it holds `max` already.
    pub(super) fn enter(&self, token_id: &str, max: usize) -> Option<Counted> {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let open = counts.entry(token_id.to_string()).or_insert(0);
        if *open >= max.max(1) {
            return None;
        }
        *open += 1;
        Some(Counted {
            counts: self.clone(),
            token_id: token_id.to_string(),
        })
    }

    /// What a connection over the cap is told.
    pub(super) fn refusal(max: usize) -> String {
        format!(
            "This token holds {max} connections (websockets and event streams) already, the \
             most it may on this server: close one first"
        )
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = counts.get_mut(&self.token_id) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                counts.remove(&self.token_id);
            }
        }
    }
}

/// True when the request asks to be upgraded to a websocket.
pub fn is_upgrade(parts: &Parts) -> bool {
    parts
        .headers
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Upgrades `GET /graphql` to a websocket.
pub async fn upgrade(app: AppState, mut parts: Parts, address: Option<IpAddr>) -> Response {
    if let Err(rejection) = app.pipeline.limit_address(address) {
        return Reply::rejected(MediaType::Json, &rejection).into_response(None);
    }
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &app).await {
        Ok(upgrade) => upgrade,
        Err(refused) => return refused.into_response(),
    };
    let header_token = parts
        .headers
        .get("x-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let start = Start {
        app,
        address,
        header_token,
        request_id: parts
            .extensions
            .get::<super::RequestId>()
            .map(|id| id.0.clone()),
        ticket: parts.extensions.get::<Ticket>().cloned(),
    };
    upgrade
        .protocols([PROTOCOL])
        // Small buffers: an idle connection should cost little (see BENCHMARKS.md).
        .read_buffer_size(4 * 1024)
        .write_buffer_size(4 * 1024)
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_frame_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| serve(socket, start))
}

/// What a connection starts with.
struct Start {
    app: AppState,
    address: Option<IpAddr>,
    header_token: Option<String>,
    request_id: Option<String>,
    /// The connection's place among those open: held as long as the websocket lives.
    ticket: Option<Ticket>,
}

/// A connection's end: a close code and its reason.
struct Close(u16, String);

impl Close {
    fn new(code: u16, reason: impl Into<String>) -> Close {
        Close(code, reason.into())
    }

    /// The close of a connection whose token was not taken: 4403, unless the database could
    /// not be read to check it, which is no word on the token: 1013, try again in a moment.
    fn refused(rejection: Rejection) -> Close {
        match rejection.stop {
            Stop::Unavailable => Close::new(1013, rejection.message),
            _ => Close::new(4403, format!("Forbidden: {}", rejection.message)),
        }
    }
}

/// What an operation hands the connection to send.
enum Out {
    Next(Value),
    Error(Value),
    Complete,
}

/// The connection once acknowledged.
struct Acked {
    token: String,
    connection: Arc<Connection>,
    cuts: watch::Receiver<Option<Cut>>,
    /// Holds the connection's place among its token's.
    _counted: Counted,
    /// Follows the events about the token ([`Connection::guard`]) while the connection lasts.
    guard: tokio::task::AbortHandle,
}

impl Drop for Acked {
    fn drop(&mut self) {
        self.guard.abort();
    }
}

async fn serve(mut socket: WebSocket, start: Start) {
    if socket.protocol().is_none() {
        // The upgrade goes through without it, as the protocol's reference server does, so
        // that the client learns why.
        let frame = CloseFrame {
            code: 4406,
            reason: Utf8Bytes::from_static("Subprotocol not acceptable"),
        };
        let _ = socket.send(Message::Close(Some(frame))).await;
        return;
    }
    metrics::gauge!(prometheus::WEBSOCKETS).increment(1.0);
    let (mut sink, mut incoming) = socket.split();
    let mut session = Session {
        start,
        acked: None,
        running: HashMap::new(),
    };
    let mut outputs: SelectAll<BoxStream<'static, (String, Out)>> = SelectAll::new();
    let init_deadline = tokio::time::sleep(session.start.app.ws.init_timeout);
    tokio::pin!(init_deadline);
    let mut pings = tokio::time::interval(
        session
            .start
            .app
            .ws
            .keep_alive
            .clamp(Duration::from_millis(1), MOST_BETWEEN_PINGS),
    );
    // A loop held up (a slow client's writes, the database) pings once when it is free again,
    // not once for each interval missed, which would leave the client no time to answer.
    pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    pings.tick().await;
    // Pings sent since the client last sent anything: a client whose machine went away
    // without a word (no close, no reset) holds its place among its token's connections until
    // it is noticed, which the kernel alone takes a quarter of an hour to do.
    let mut unanswered: u32 = 0;
    let ticket = session.start.ticket.clone();
    let stopping = async move {
        match ticket {
            Some(ticket) => ticket.stopped().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stopping);
    let close = loop {
        let expiry = session.expiry();
        let cut = session.cut();
        tokio::select! {
            message = incoming.next() => {
                unanswered = 0;
                let message = match message {
                    Some(Ok(message)) => message,
                    // Over the limit: said in the close, as RFC 6455 has it, where the
                    // connection was dropped without a word. Nothing else can be read past.
                    Some(Err(error)) if too_long(&error) => {
                        break Some(Close::new(
                            1009,
                            format!("A message may be at most {MAX_MESSAGE_BYTES} bytes"),
                        ));
                    }
                    _ => break None,
                };
                match session.receive(message, &mut outputs).await {
                    Ok(replies) => {
                        if send_all(&mut sink, replies).await.is_err() {
                            break None;
                        }
                    }
                    Err(close) => break Some(close),
                }
            }
            Some((id, out)) = outputs.next(), if !outputs.is_empty() => {
                if matches!(out, Out::Error(_) | Out::Complete) {
                    session.running.remove(&id);
                }
                if send_all(&mut sink, vec![message(&id, out)]).await.is_err() {
                    break None;
                }
            }
            () = &mut init_deadline, if session.acked.is_none() => {
                break Some(Close::new(4408, "Connection initialisation timeout"));
            }
            why = cut => break Some(match why {
                Cut::Forbidden(reason) => Close::new(4403, reason),
                Cut::TooSlow(reason) => Close::new(1008, reason),
                Cut::Unavailable(reason) => Close::new(1013, reason),
            }),
            () = expiry => break Some(Close::new(4403, "The token has expired")),
            _ = pings.tick() => {
                if unanswered >= UNANSWERED_PINGS {
                    // Gone, as far as can be told: closed without a code or reason, since
                    // nobody is there to read them (the reference server just drops it).
                    tracing::debug!("a websocket answered none of its last pings: dropped");
                    break None;
                }
                unanswered += 1;
                // The protocol's ping, which its clients answer with `pong`, and the
                // websocket's own, which any websocket client answers by itself.
                let pings = vec![text(json!({ "type": "ping" })), Message::Ping(Default::default())];
                if send_all(&mut sink, pings).await.is_err() {
                    break None;
                }
            }
            () = &mut stopping => break Some(Close::new(1001, "The server is stopping")),
        }
    };
    for (_, running) in session.running.drain() {
        running.handle.abort();
    }
    metrics::gauge!(prometheus::WEBSOCKETS).decrement(1.0);
    if let Some(Close(code, reason)) = close {
        let frame = CloseFrame {
            code,
            reason: Utf8Bytes::from(limit_reason(&reason)),
        };
        let _ = sink.send(Message::Close(Some(frame))).await;
    }
    let _ = sink.close().await;
}

/// Whether a failure to read a message is its length, past [`MAX_MESSAGE_BYTES`].
fn too_long(error: &axum::Error) -> bool {
    use tungstenite::error::{CapacityError, Error};
    matches!(
        std::error::Error::source(error).and_then(|inner| inner.downcast_ref::<Error>()),
        Some(Error::Capacity(CapacityError::MessageTooLong { .. }))
    )
}

/// A connection's state.
struct Session {
    start: Start,
    acked: Option<Acked>,
    /// The operations running, by id.
    running: HashMap<String, Running>,
}

/// An operation running on the connection.
struct Running {
    handle: AbortHandle,
    /// A subscription, which reads by the connection's holder (`Connection::principal`); a
    /// query or mutation reads by the holder it started with.
    follows: bool,
}

impl Session {
    /// Completes when the connection's token expires (never, for one that does not).
    fn expiry(&self) -> impl std::future::Future<Output = ()> + use<> {
        let at = self
            .acked
            .as_ref()
            .and_then(|acked| acked.connection.principal().expires_at);
        async move {
            match at {
                Some(at) => {
                    let wait = u64::try_from(at - now_ms()).unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                None => std::future::pending().await,
            }
        }
    }

    /// Completes when a subscription, or the guard of the token ([`Connection::guard`]), says
    /// the connection must end, with why.
    fn cut(&self) -> impl std::future::Future<Output = Cut> + use<> {
        let cuts = self.acked.as_ref().map(|acked| acked.cuts.clone());
        async move {
            let Some(mut cuts) = cuts else {
                return std::future::pending().await;
            };
            let cut = match cuts.wait_for(Option::is_some).await {
                Ok(cut) => cut.clone(),
                Err(_) => None,
            };
            match cut {
                Some(cut) => cut,
                None => std::future::pending().await,
            }
        }
    }

    /// Handles a client's message: what to send back, or why the connection ends.
    async fn receive(
        &mut self,
        message: Message,
        outputs: &mut SelectAll<BoxStream<'static, (String, Out)>>,
    ) -> Result<Vec<Message>, Close> {
        let raw = match message {
            Message::Text(raw) => raw,
            Message::Close(_) => return Err(Close::new(1000, "Normal Closure")),
            // The websocket's own pings are answered by the library.
            Message::Ping(_) | Message::Pong(_) => return Ok(Vec::new()),
            Message::Binary(_) => {
                return Err(Close::new(4400, "Messages must be JSON in text frames"));
            }
        };
        // Each message is a request from the client's address, counted before it is read, as
        // an HTTP request is counted before its body: a client past its address's limit is
        // closed, not read on at the speed of its socket.
        if let Err(rejection) = self.start.app.pipeline.limit_address(self.start.address) {
            return Err(Close::new(1008, rejection.message));
        }
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(raw.as_str()) else {
            return Err(Close::new(
                4400,
                "Invalid message received: not a JSON object",
            ));
        };
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "connection_init" => {
                let payload = payload(&message)?;
                self.init(payload).await.map(|ack| vec![ack])
            }
            "ping" => {
                let payload = payload(&message)?;
                let mut pong = json!({ "type": "pong" });
                if let Some(payload) = payload {
                    pong["payload"] = Value::Object(payload);
                }
                Ok(vec![text(pong)])
            }
            "pong" => payload(&message).map(|_| Vec::new()),
            "subscribe" => {
                let id = id(&message)?;
                let Some(Value::Object(payload)) = message.get("payload") else {
                    return Err(Close::new(
                        4400,
                        "Invalid message received: subscribe needs a payload object",
                    ));
                };
                if !matches!(payload.get("query"), Some(Value::String(_))) {
                    return Err(Close::new(
                        4400,
                        "Invalid message received: payload.query must be a string",
                    ));
                }
                let params = Params::from_object(payload.clone())
                    .map_err(|e| Close::new(4400, format!("Invalid message received: {e}")))?;
                if self.acked.is_none() {
                    return Err(Close::new(4401, "Unauthorized"));
                }
                if self.running.contains_key(&id) {
                    return Err(Close::new(
                        4409,
                        format!("Subscriber for {id} already exists"),
                    ));
                }
                match self.subscribe(&id, params).await? {
                    Ok((stream, follows)) => {
                        let (stream, handle) = futures_util::stream::abortable(stream);
                        self.running.insert(id, Running { handle, follows });
                        outputs.push(stream.boxed());
                        Ok(Vec::new())
                    }
                    Err(rejection) => Ok(vec![message_of_rejection(&id, &rejection)]),
                }
            }
            "complete" => {
                let id = id(&message)?;
                if let Some(running) = self.running.remove(&id) {
                    running.handle.abort();
                }
                Ok(Vec::new())
            }
            _ => Err(Close::new(4400, "Invalid message received: unknown type")),
        }
    }

    /// `connection_init`: checks the token, once.
    async fn init(&mut self, payload: Option<Map<String, Value>>) -> Result<Message, Close> {
        if self.acked.is_some() {
            return Err(Close::new(4429, "Too many initialisation requests"));
        }
        let from_payload = payload
            .as_ref()
            .and_then(|p| p.get("x-token"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let token = from_payload.or_else(|| self.start.header_token.clone());
        let pipeline = &self.start.app.pipeline;
        // Followed from before the token is authenticated: a revocation after that comes
        // through it (see `Connection::guard`). The hub is ready once it has found the end of
        // the log, which a server that cannot read its database may not have yet.
        let wait = self.start.app.ws.init_timeout;
        let Ok(events) = tokio::time::timeout(wait, pipeline.hub().subscribe_to_changes()).await
        else {
            return Err(Close::new(
                1013,
                "The server cannot follow its events yet: connect again in a moment",
            ));
        };
        let principal: Principal = pipeline
            .authenticate_token(token.as_deref())
            .await
            .map_err(Close::refused)?;
        let ws = &self.start.app.ws;
        let Some(counted) = self
            .start
            .app
            .ws_per_token
            .enter(&principal.token_id, ws.max_per_token)
        else {
            return Err(Close::new(
                4403,
                format!("Forbidden: {}", PerToken::refusal(ws.max_per_token)),
            ));
        };
        let token = token.unwrap_or_default();
        let (connection, cuts) = Connection::new(token.clone(), principal);
        // Closed when its token stops working, whether a subscription runs on it or not.
        let guard =
            tokio::spawn(connection.clone().guard(events, pipeline.store().clone())).abort_handle();
        self.acked = Some(Acked {
            token,
            connection,
            cuts,
            _counted: counted,
            guard,
        });
        Ok(text(json!({ "type": "connection_ack" })))
    }

    /// `subscribe`: the operation through the pipeline's stages, as a stream of what to send;
    /// a rejection before it runs is sent as `error`. Err when the connection must end.
    async fn subscribe(
        &mut self,
        id: &str,
        params: Params,
    ) -> Result<Result<(BoxStream<'static, (String, Out)>, bool), Rejection>, Close> {
        let Some(acked) = &self.acked else {
            return Err(Close::new(4401, "Unauthorized"));
        };
        if self.running.len() >= self.start.app.ws.max_subscriptions {
            return Ok(Err(Rejection::bad_input(format!(
                "This connection runs {} operations already, the most it may: complete one \
                 first, or open another connection",
                self.start.app.ws.max_subscriptions
            ))));
        }
        let pipeline = self.start.app.pipeline.clone();
        // The token again: it may have stopped working since the connection began. Its limit
        // is counted before the document is read, which the token is known without.
        let principal = pipeline
            .authenticate_token(Some(&acked.token))
            .await
            .map_err(Close::refused)?;
        // What the connection's subscriptions read by (see `Connection::refresh`): with none
        // running, nothing reads by what it was, and it is just replaced.
        if !self.running.values().any(|r| r.follows) {
            acked.connection.replace(principal.clone());
        } else if !acked.connection.refresh(principal.clone()) {
            return Err(Close::new(4403, Cut::CHANGED));
        }
        if let Err(rejection) = pipeline.limit(Some(&principal), self.start.address) {
            return Ok(Err(rejection));
        }
        let prepared = match pipeline.resolve(params).and_then(|p| pipeline.prepare(p)) {
            Ok(prepared) => prepared,
            Err(rejection) => return Ok(Err(rejection)),
        };
        // A subscription is refused before it starts; a query or mutation runs as over HTTP,
        // each root field refused by its own guard, the others answered.
        if prepared.kind() == OperationKind::Subscription
            && let Err(rejection) = pipeline.permit(&prepared, &principal)
        {
            return Ok(Err(rejection));
        }
        let caller = Caller {
            principal: Some(principal),
            address: self.start.address,
            request_id: self.start.request_id.clone(),
            key: None,
        };
        let id = id.to_string();
        if prepared.kind() == OperationKind::Subscription {
            let stream = match pipeline.subscribe(prepared, caller, acked.connection.clone()) {
                Ok(stream) => stream,
                Err(rejection) => return Ok(Err(rejection)),
            };
            return Ok(Ok((subscription_messages(id, stream), true)));
        }
        // A query or mutation: one result, then complete. A mutation starts here, as its
        // `subscribe` is read, in a task of its own: the client's `complete`, or the
        // connection's end, whenever they come, withhold its result, as the protocol says, and
        // do not stop it half-way. A query is dropped with its client.
        let limit = self.start.app.request_timeout;
        let kind = prepared.kind();
        let outcome: BoxFuture<'static, Result<Executed, Rejection>> =
            if kind == OperationKind::Mutation {
                let deadline = tokio::time::Instant::now() + limit;
                let place = self.start.ticket.clone();
                super::graphql::mutation_to_its_end(
                    pipeline,
                    prepared,
                    caller,
                    (deadline, limit),
                    place,
                )
                .boxed()
            } else {
                async move {
                    tokio::time::timeout(limit, pipeline.execute(prepared, caller))
                        .await
                        .unwrap_or_else(|_| Err(Rejection::timed_out(limit, Some(kind))))
                }
                .boxed()
            };
        let single = futures_util::stream::once(async move {
            let executed = outcome.await;
            let outs = match executed {
                Ok(executed) if executed.ran => vec![Out::Next(executed.body), Out::Complete],
                Ok(refused) => vec![Out::Error(errors_of(refused))],
                Err(rejection) => vec![Out::Error(rejection.body()["errors"].clone())],
            };
            futures_util::stream::iter(outs.into_iter().map(move |out| (id.clone(), out)))
        })
        .flatten();
        Ok(Ok((single.boxed(), false)))
    }
}

/// A subscription's responses as messages: `next` for each event; `error` for errors before
/// any data (validation, permission, a bad cursor) or a rejection, which end it; `complete`
/// when it ends by itself.
fn subscription_messages(
    id: String,
    stream: BoxStream<'static, Result<Executed, Rejection>>,
) -> BoxStream<'static, (String, Out)> {
    let outs = stream.map(|item| match item {
        Ok(executed) if failed_before_data(&executed) => Out::Error(errors_of(executed)),
        Ok(executed) => Out::Next(executed.body),
        Err(rejection) => Out::Error(rejection.body()["errors"].clone()),
    });
    futures_util::stream::unfold((outs, false), |(mut outs, done)| async move {
        if done {
            return None;
        }
        match outs.next().await {
            Some(Out::Error(errors)) => Some((Out::Error(errors), (outs, true))),
            Some(out) => Some((out, (outs, false))),
            None => Some((Out::Complete, (outs, true))),
        }
    })
    .map(move |out| (id.clone(), out))
    .boxed()
}

/// True for a response with errors and no data: validation failed, or the root field did (a
/// permission, an argument, a cursor), before any event.
fn failed_before_data(executed: &Executed) -> bool {
    let has_errors = executed
        .body
        .get("errors")
        .and_then(Value::as_array)
        .is_some_and(|errors| !errors.is_empty());
    let no_data = match executed.body.get("data") {
        None | Some(Value::Null) => true,
        Some(Value::Object(fields)) => fields.values().all(Value::is_null),
        Some(_) => false,
    };
    has_errors && no_data
}

/// The errors of a response, as an `error` message carries them: a non-empty list.
fn errors_of(executed: Executed) -> Value {
    match executed.body.get("errors") {
        Some(Value::Array(errors)) if !errors.is_empty() => Value::Array(errors.clone()),
        _ => {
            json!([{ "message": "The operation returned no data", "extensions": { "code": "INTERNAL_SERVER_ERROR" } }])
        }
    }
}

/// A message of the protocol for operation `id`.
fn message(id: &str, out: Out) -> Message {
    text(match out {
        Out::Next(payload) => json!({ "id": id, "type": "next", "payload": payload }),
        Out::Error(errors) => json!({ "id": id, "type": "error", "payload": errors }),
        Out::Complete => json!({ "id": id, "type": "complete" }),
    })
}

fn message_of_rejection(id: &str, rejection: &Rejection) -> Message {
    message(id, Out::Error(rejection.body()["errors"].clone()))
}

fn text(value: Value) -> Message {
    Message::Text(Utf8Bytes::from(value.to_string()))
}

async fn send_all(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    messages: Vec<Message>,
) -> Result<(), axum::Error> {
    for message in messages {
        sink.feed(message).await?;
    }
    sink.flush().await
}

/// A message's `payload`, which must be an object, null or absent.
fn payload(message: &Map<String, Value>) -> Result<Option<Map<String, Value>>, Close> {
    match message.get("payload") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(payload)) => Ok(Some(payload.clone())),
        Some(_) => Err(Close::new(
            4400,
            "Invalid message received: payload must be an object",
        )),
    }
}

/// A message's `id`, which must be a non-empty string.
fn id(message: &Map<String, Value>) -> Result<String, Close> {
    match message.get("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= 128 => Ok(id.clone()),
        _ => Err(Close::new(
            4400,
            "Invalid message received: id must be a string of 1 to 128 characters",
        )),
    }
}

/// A close reason cut to what a close frame holds (123 bytes), at a character boundary.
fn limit_reason(reason: &str) -> String {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_fit_a_close_frame() {
        let long = "é".repeat(100);
        let cut = limit_reason(&long);
        assert!(cut.len() <= 123);
        assert!(long.starts_with(&cut));
        assert_eq!(limit_reason("Forbidden"), "Forbidden");
    }
}
