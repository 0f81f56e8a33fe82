//! Realtime: the events every mutation writes, as the feed (`events` query) and the
//! subscription (`events`, graphql-transport-ws on /graphql) serve them.
//!
//! - which events each mutation writes, with which identifiers (and the fan-out of a label's
//!   deletion to the patients that had it);
//! - who sees what: an event reaches only a caller that may read its resource;
//! - the feed's paging and the checks on its arguments; twenty writers at once, read in order
//!   by the feed and by a subscription, each event exactly once;
//! - subscriptions through the npm `graphql-ws` client (tests/realtime/subscribe.mjs), and
//!   through raw frames: every close code, ping/pong, errors as `error` messages, queries and
//!   mutations over the socket, the query limits, the per-connection and per-token limits;
//! - resuming with `after`, across a restart; a token revoked, signed out or expired closing
//!   its live subscription (4403); an event written through one instance reaching a
//!   subscriber of another.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use practice_api::config::ServeConfig;
use rstest::rstest;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdout};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::helpers::{
    Engine, PASSWORD, TestApp, error_code, error_message, node_clients, test_config,
};
use crate::spawn;

/// The longest anything may take to arrive before a test fails rather than hangs.
const WAIT: Duration = Duration::from_secs(10);
/// How long a test listens to be sure that nothing more arrives.
const QUIET: Duration = Duration::from_millis(400);

/// What the tests select of an event.
const EVENT: &str = "id eventType identifiers { patientId bookingId labelId }";

// ----------------------------------------------------------------------------------------
// The feed

fn feed_query() -> String {
    format!(
        "query($after: ID, $types: [String!], $limit: Int) {{ events(after: $after, eventTypes: $types, limit: $limit) {{ data {{ {EVENT} }} cursor hasMore }} }}"
    )
}

/// The feed as `token` sees it, with these variables (`after`, `types`, `limit`): the whole
/// response.
async fn feed(app: &TestApp, token: &str, variables: Value) -> Value {
    app.gql(Some(token), &feed_query(), variables).await
}

/// A page of the feed, asserting that there was no error: `events`.
async fn page(app: &TestApp, token: &str, variables: Value) -> Value {
    let body = feed(app, token, variables).await;
    assert!(body.get("errors").is_none(), "{body}");
    body["data"]["events"].clone()
}

/// The feed's first page with these variables that `wanted` says is the one, asked again
/// until it is, for up to [`WAIT`].
async fn page_until(
    app: &TestApp,
    token: &str,
    variables: Value,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let until = Instant::now() + WAIT;
    loop {
        let found = page(app, token, variables.clone()).await;
        if wanted(&found) {
            return found;
        }
        assert!(
            Instant::now() < until,
            "not within 10 s: {variables} gave {found}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every event after `after` that `token` may see, page by page, and the last cursor.
async fn all_events(
    app: &TestApp,
    token: &str,
    after: Option<String>,
) -> (Vec<Value>, Option<String>) {
    let mut events = Vec::new();
    let mut cursor = after;
    loop {
        let page = page(app, token, json!({ "after": cursor, "limit": 500 })).await;
        events.extend(page["data"].as_array().expect("data").iter().cloned());
        cursor = page["cursor"].as_str().map(str::to_string);
        if page["hasMore"] != json!(true) {
            return (events, cursor);
        }
    }
}

/// The events after `after` that `token` may see, once there are at least `n` of them.
///
/// On PostgreSQL an event shows (in the feed and to subscribers) only once every transaction
/// that began before its own has ended, anywhere on the database server: with other tests
/// writing at the same time, a write just made may take a moment to appear.
async fn settled(app: &TestApp, token: &str, after: Option<&str>, n: usize) -> Vec<Value> {
    let until = Instant::now() + WAIT;
    loop {
        let (events, _) = all_events(app, token, after.map(str::to_string)).await;
        if events.len() >= n {
            return events;
        }
        assert!(
            Instant::now() < until,
            "only {} of {n} events in the feed after 10 s: {events:?}",
            events.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn id_of(event: &Value) -> String {
    event["id"].as_str().expect("an event id").to_string()
}

fn ids(events: &[Value]) -> Vec<String> {
    events.iter().map(id_of).collect()
}

/// (type, identifiers) of an event, the part each test compares.
fn what(event: &Value) -> (String, Value) {
    (
        event["eventType"].as_str().expect("eventType").to_string(),
        event["identifiers"].clone(),
    )
}

/// The identifiers an event should carry; those not given are null.
fn named(patient: Option<&str>, booking: Option<&str>, label: Option<&str>) -> Value {
    json!({ "patientId": patient, "bookingId": booking, "labelId": label })
}

fn created(patient: &str) -> (String, Value) {
    ("patient.created".into(), named(Some(patient), None, None))
}

/// Asserts that event ids are 32 hex characters and strictly increase, as strings.
fn assert_in_order(ids: &[String]) {
    for id in ids {
        assert!(
            id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
            "an event id is 32 hex characters: {id:?}"
        );
    }
    for pair in ids.windows(2) {
        assert!(pair[0] < pair[1], "event ids increase: {pair:?} in {ids:?}");
    }
}

/// The admin's view of the events, a mutation at a time.
struct Log<'a> {
    app: &'a TestApp,
    cursor: Option<String>,
    last: Option<String>,
}

impl<'a> Log<'a> {
    fn new(app: &'a TestApp) -> Self {
        Log {
            app,
            cursor: None,
            last: None,
        }
    }

    /// The events written since the last call, as (type, identifiers), once there are at
    /// least `n` (see `settled`), checking their ids.
    async fn since(&mut self, n: usize) -> Vec<(String, Value)> {
        let until = Instant::now() + WAIT;
        let (events, cursor) = loop {
            let (events, cursor) =
                all_events(self.app, &self.app.admin_token, self.cursor.clone()).await;
            if events.len() >= n || Instant::now() > until {
                break (events, cursor);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let mut seen: Vec<String> = self.last.iter().cloned().collect();
        seen.extend(ids(&events));
        assert_in_order(&seen);
        self.last = seen.last().cloned();
        self.cursor = cursor;
        events.iter().map(what).collect()
    }
}

// ----------------------------------------------------------------------------------------
// Writing

/// Runs a mutation with the admin token; asserts that its payload has no `error`; returns
/// the payload.
async fn mutate(app: &TestApp, query: &str, variables: Value) -> Value {
    let data = app.ok(query, variables).await;
    let payload = data
        .as_object()
        .and_then(|fields| fields.values().next())
        .expect("a payload")
        .clone();
    assert!(payload["error"].is_null(), "{data}");
    payload
}

/// A booking of `patient` with `doctor` on 4 March 2031 from `hour`:00 to `hour`:30; its id.
async fn book(app: &TestApp, patient: &str, doctor: &str, hour: u32) -> String {
    let payload = mutate(
        app,
        "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id } error } }",
        json!({ "d": {
            "patient": patient, "doctor": doctor,
            "start": format!("2031-03-04T{hour:02}:00:00Z"),
            "end": format!("2031-03-04T{hour:02}:30:00Z"),
        } }),
    )
    .await;
    payload["data"]["id"]
        .as_str()
        .expect("booking id")
        .to_string()
}

/// Puts label `label` on `patient`; returns the PatientLabel's id.
async fn add_label(app: &TestApp, patient: &str, label: &str) -> String {
    let payload = mutate(
        app,
        "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { labels { id referenceId } } error } }",
        json!({ "p": patient, "l": label }),
    )
    .await;
    payload["data"]["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .find(|l| l["referenceId"] == json!(label))
        .and_then(|l| l["id"].as_str())
        .expect("the label on the patient")
        .to_string()
}

/// An API token made through the API: (its id, its secret).
async fn api_token(
    app: &TestApp,
    permissions: &[&str],
    expires_at: Option<String>,
) -> (String, String) {
    let payload = mutate(
        app,
        "mutation($p: [String!]!, $e: DateTime) { createApiToken(name: \"realtime\", permissions: $p, expiresAt: $e) { token data { id } error } }",
        json!({ "p": permissions, "e": expires_at }),
    )
    .await;
    (
        payload["data"]["id"]
            .as_str()
            .expect("token id")
            .to_string(),
        payload["token"].as_str().expect("token").to_string(),
    )
}

/// `writers` tasks at once, each creating `each` patients: the ids of all of them, once done.
fn write_concurrently(app: Arc<TestApp>, writers: usize, each: usize) -> JoinHandle<Vec<String>> {
    tokio::spawn(async move {
        let tasks: Vec<JoinHandle<Vec<String>>> = (0..writers)
            .map(|w| {
                let app = app.clone();
                tokio::spawn(async move {
                    let mut made = Vec::new();
                    for i in 0..each {
                        made.push(app.patient("Writer", &format!("W{w}N{i}")).await);
                    }
                    made
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("a writer"));
        }
        all
    })
}

// ----------------------------------------------------------------------------------------
// Subscribers

fn subscription() -> String {
    format!(
        "subscription($after: ID, $types: [String!], $patient: ID) {{ events(after: $after, eventTypes: $types, patientId: $patient) {{ {EVENT} }} }}"
    )
}

/// Something subscribed to `events`.
trait Subscriber {
    /// The next event (the `events` of a `next`), or None when none comes within `wait`;
    /// panics on anything else.
    async fn event_within(&mut self, wait: Duration) -> Option<Value>;

    async fn event(&mut self) -> Value {
        self.event_within(WAIT).await.expect("an event within 10 s")
    }

    /// The next `n` events.
    async fn events(&mut self, n: usize) -> Vec<Value> {
        let mut events = Vec::with_capacity(n);
        for _ in 0..n {
            events.push(self.event().await);
        }
        events
    }
}

/// Writes probe patients through `writer` until `subscriber` (subscribed without `after`, to
/// patient.created at least) receives the last probe written: from then on it is live, and
/// the events that follow are the test's. Returns that probe's event.
async fn make_live(subscriber: &mut impl Subscriber, writer: &TestApp) -> Value {
    for i in 0..10 {
        let probe = writer.patient("Probe", &format!("Probe{i}")).await;
        let until = Instant::now() + Duration::from_secs(3);
        while let Some(event) = subscriber
            .event_within(until.saturating_duration_since(Instant::now()))
            .await
        {
            assert_eq!(event["eventType"], "patient.created", "{event}");
            if event["identifiers"]["patientId"] == json!(probe) {
                return event;
            }
        }
    }
    panic!("none of 10 probe patients reached the subscriber, 3 s apart");
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What arrives on a websocket: a message of the protocol, or the close (code and reason).
#[derive(Debug)]
enum Frame {
    Message(Value),
    Closed(u16, String),
}

/// A raw graphql-transport-ws client.
struct Ws {
    socket: Socket,
}

fn ws_url(app: &TestApp) -> String {
    app.url.replacen("http://", "ws://", 1)
}

impl Ws {
    /// Opens a websocket to `app`: offering the subprotocol or not, with an x-token header on
    /// the upgrade or not.
    async fn open(app: &TestApp, subprotocol: bool, header_token: Option<&str>) -> Ws {
        let mut request = ws_url(app).into_client_request().expect("request");
        if subprotocol {
            request.headers_mut().insert(
                "Sec-WebSocket-Protocol",
                HeaderValue::from_static("graphql-transport-ws"),
            );
        }
        if let Some(token) = header_token {
            request
                .headers_mut()
                .insert("x-token", HeaderValue::from_str(token).expect("header"));
        }
        let (socket, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .expect("the upgrade in time")
            .expect("the upgrade");
        Ws { socket }
    }

    /// A connection acknowledged for `token`, sent in `connection_init`.
    async fn connect(app: &TestApp, token: &str) -> Ws {
        let mut ws = Ws::open(app, true, None).await;
        ws.init(token).await;
        ws.acked().await;
        ws
    }

    async fn init(&mut self, token: &str) {
        self.send(json!({ "type": "connection_init", "payload": { "x-token": token } }))
            .await;
    }

    async fn acked(&mut self) {
        let message = self.message().await;
        assert_eq!(message["type"], "connection_ack", "{message}");
    }

    async fn send(&mut self, message: Value) {
        self.raw(Message::text(message.to_string())).await;
    }

    async fn raw(&mut self, message: Message) {
        self.socket.send(message).await.expect("send");
    }

    async fn subscribe(&mut self, id: &str, query: &str, variables: Value) {
        self.send(json!({
            "id": id, "type": "subscribe",
            "payload": { "query": query, "variables": variables },
        }))
        .await;
    }

    /// Subscribes to `events` as `id`, with these variables (`after`, `types`, `patient`).
    async fn follow(&mut self, id: &str, variables: Value) {
        self.subscribe(id, &subscription(), variables).await;
    }

    /// The next frame within `wait`, or None; the server's pings are answered on the way.
    async fn frame_within(&mut self, wait: Duration) -> Option<Frame> {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let item = tokio::time::timeout(left, self.socket.next()).await.ok()?;
            return Some(match item {
                Some(Ok(Message::Text(text))) => {
                    let message: Value = serde_json::from_str(text.as_str())
                        .unwrap_or_else(|_| panic!("a message that is not JSON: {text}"));
                    if message["type"] == "ping" {
                        self.send(json!({ "type": "pong" })).await;
                        continue;
                    }
                    Frame::Message(message)
                }
                Some(Ok(Message::Close(Some(frame)))) => {
                    Frame::Closed(u16::from(frame.code), frame.reason.to_string())
                }
                Some(Ok(Message::Close(None))) => Frame::Closed(1005, String::new()),
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                Some(Ok(Message::Binary(bytes))) => panic!("a binary frame: {bytes:?}"),
                Some(Err(e)) => Frame::Closed(1006, format!("no close frame: {e}")),
                None => Frame::Closed(1006, "no close frame".into()),
            });
        }
    }

    async fn frame(&mut self) -> Frame {
        self.frame_within(WAIT).await.expect("a frame within 10 s")
    }

    /// The next message; panics on a close.
    async fn message(&mut self) -> Value {
        match self.frame().await {
            Frame::Message(message) => message,
            closed => panic!("expected a message, got {closed:?}"),
        }
    }

    /// The close, as (code, reason); panics on a message before it.
    async fn closed(&mut self) -> (u16, String) {
        match self.frame().await {
            Frame::Closed(code, reason) => (code, reason),
            Frame::Message(message) => panic!("expected the close, got {message}"),
        }
    }

    /// What a subscriber gets once its token stops working: 4403, and nothing before it.
    ///
    /// Nothing means no event, and no `complete` either: a `complete` tells a client (the npm
    /// graphql-ws one does) that its subscription ended normally, and it never learns of the
    /// 4403 that follows.
    async fn cut_off(&mut self) {
        let mut before = Vec::new();
        let (code, reason) = loop {
            match self.frame().await {
                Frame::Message(message) => before.push(message),
                Frame::Closed(code, reason) => break (code, reason),
            }
        };
        assert!(
            before.iter().all(|m| m["type"] != "next"),
            "an event after the token stopped working: {before:?}"
        );
        assert_eq!(code, 4403, "{reason}");
        assert_eq!(
            before,
            Vec::<Value>::new(),
            "messages before the 4403 close ({code} {reason:?})"
        );
    }

    /// The `error` message of operation `id`: its errors.
    async fn error(&mut self, id: &str) -> Value {
        let message = self.message().await;
        assert_eq!(message["type"], "error", "{message}");
        assert_eq!(message["id"], json!(id), "{message}");
        let errors = message["payload"].clone();
        assert!(
            errors.as_array().is_some_and(|e| !e.is_empty()),
            "an error message carries a list of errors: {message}"
        );
        errors
    }

    /// The `next` of operation `id`, then its `complete`: the `next`'s payload.
    async fn single(&mut self, id: &str) -> Value {
        let next = self.message().await;
        assert_eq!(
            (&next["type"], &next["id"]),
            (&json!("next"), &json!(id)),
            "{next}"
        );
        let complete = self.message().await;
        assert_eq!(complete, json!({ "id": id, "type": "complete" }));
        next["payload"].clone()
    }

    /// Asserts that nothing arrives for a while.
    async fn quiet(&mut self) {
        if let Some(frame) = self.frame_within(QUIET).await {
            panic!("expected nothing more, got {frame:?}");
        }
    }

    /// Asserts that the connection is still open and working: a query is answered.
    async fn still_open(&mut self, app: &TestApp) {
        self.subscribe("alive", "{ currentPractice { id } }", json!({}))
            .await;
        let payload = self.single("alive").await;
        assert_eq!(
            payload["data"]["currentPractice"]["id"],
            json!(app.practice_id)
        );
    }

    async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}

impl Subscriber for Ws {
    async fn event_within(&mut self, wait: Duration) -> Option<Value> {
        let message = match self.frame_within(wait).await? {
            Frame::Message(message) => message,
            closed => panic!("expected an event, got {closed:?}"),
        };
        assert_eq!(message["type"], "next", "{message}");
        assert!(message["payload"].get("errors").is_none(), "{message}");
        Some(message["payload"]["data"]["events"].clone())
    }
}

/// The npm `graphql-ws` client (tests/realtime/subscribe.mjs) running one subscription.
struct NodeSubscriber {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl NodeSubscriber {
    /// Starts it and waits for the connection's acknowledgement; None (the test skips) when
    /// node or the packages are missing, see `node_clients`.
    async fn start(app: &TestApp, token: &str, query: &str, variables: Value) -> Option<Self> {
        let dir: PathBuf = node_clients()?;
        let request = json!({ "query": query, "variables": variables }).to_string();
        let mut child = tokio::process::Command::new("node")
            .arg(dir.join("subscribe.mjs"))
            .args([ws_url(app).as_str(), token, request.as_str()])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run node tests/realtime/subscribe.mjs");
        let stdout = child.stdout.take().expect("stdout");
        let mut subscriber = NodeSubscriber {
            _child: child,
            lines: BufReader::new(stdout).lines(),
        };
        let first = subscriber
            .line_within(WAIT)
            .await
            .expect("connected in time");
        assert_eq!(first, json!({ "connected": true }));
        Some(subscriber)
    }

    async fn line_within(&mut self, wait: Duration) -> Option<Value> {
        let line = tokio::time::timeout(wait, self.lines.next_line())
            .await
            .ok()?;
        let line = line
            .expect("read the client's output")
            .expect("the client exited");
        Some(serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}")))
    }
}

impl Subscriber for NodeSubscriber {
    async fn event_within(&mut self, wait: Duration) -> Option<Value> {
        let line = self.line_within(wait).await?;
        let payload = line
            .get("next")
            .unwrap_or_else(|| panic!("expected an event, got {line}"));
        assert!(payload.get("errors").is_none(), "{line}");
        Some(payload["data"]["events"].clone())
    }
}

// ----------------------------------------------------------------------------------------
// 1. Each mutation's events

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn each_mutation_writes_its_events(#[case] engine: Engine) {
    let app = spawn!(engine);
    let doctor = app.doctor("Grace", "Hopper").await;
    let mut log = Log::new(&app);
    assert_eq!(log.since(0).await, vec![], "a staff user is no event");
    let event = |kind: &str, patient: Option<&str>, booking: Option<&str>, label: Option<&str>| {
        (kind.to_string(), named(patient, booking, label))
    };

    // Labels.
    let vip = app.label("VIP").await;
    assert_eq!(
        log.since(1).await,
        vec![event("label.created", None, None, Some(&vip))]
    );
    mutate(
        &app,
        "mutation($l: ID!) { updateLabel(id: $l, title: \"Very important\") { error } }",
        json!({ "l": vip }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event("label.updated", None, None, Some(&vip))]
    );
    // The same title again changes nothing: no event (the next assertion would see it).
    mutate(
        &app,
        "mutation($l: ID!) { updateLabel(id: $l, title: \"Very important\") { error } }",
        json!({ "l": vip }),
    )
    .await;

    // Patients.
    let jane = app.patient("Jane", "Doe").await;
    assert_eq!(log.since(1).await, vec![created(&jane)]);
    mutate(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { first: \"Janet\" }) { error } }",
        json!({ "id": jane }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event("patient.updated", Some(&jane), None, None)]
    );
    // The same change again changes nothing: no event (the next assertion would see it),
    // and its audit record all the same.
    mutate(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { first: \"Janet\" }) { error } }",
        json!({ "id": jane }),
    )
    .await;
    let audited = app
        .ok(
            "query($p: ID!) { auditEvents(patientId: $p, pagination: { pageSize: 100 }) { data { action operation } } }",
            json!({ "p": jane }),
        )
        .await;
    let updates = audited["auditEvents"]["data"]
        .as_array()
        .expect("audit events")
        .iter()
        .filter(|e| e["operation"] == "updatePatient" && e["action"] == "update")
        .count();
    assert_eq!(updates, 2, "{audited}");
    let place = add_label(&app, &jane, &vip).await;
    assert_eq!(
        log.since(1).await,
        vec![event("patient.label.added", Some(&jane), None, Some(&vip))]
    );
    mutate(
        &app,
        "mutation($p: ID!, $l: ID!) { removePatientLabel(patientId: $p, labelId: $l) { error } }",
        json!({ "p": jane, "l": place }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event(
            "patient.label.removed",
            Some(&jane),
            None,
            Some(&vip)
        )],
        "labelId is the Label's id, not the PatientLabel's"
    );
    // Labels set through updatePatient are their label events, with no patient.updated
    // beside them (events do not overlap); a name changed with them is one.
    let set_labels = "mutation($id: ID!, $l: [ID!], $f: String) { updatePatient(id: $id, patientData: { labels: $l, first: $f }) { error } }";
    mutate(&app, set_labels, json!({ "id": jane, "l": [vip] })).await;
    assert_eq!(
        log.since(1).await,
        vec![event("patient.label.added", Some(&jane), None, Some(&vip))]
    );
    mutate(
        &app,
        set_labels,
        json!({ "id": jane, "l": [], "f": "Jane" }),
    )
    .await;
    assert_eq!(
        log.since(2).await,
        vec![
            event("patient.updated", Some(&jane), None, None),
            event("patient.label.removed", Some(&jane), None, Some(&vip))
        ]
    );
    mutate(
        &app,
        "mutation($id: ID!) { archivePatient(id: $id, reason: \"Moved away\") { error } }",
        json!({ "id": jane }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event("patient.archived", Some(&jane), None, None)]
    );
    mutate(
        &app,
        "mutation($id: ID!) { unarchivePatient(id: $id) { error } }",
        json!({ "id": jane }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event("patient.unarchived", Some(&jane), None, None)]
    );

    // Bookings.
    let booking = book(&app, &jane, &doctor, 9).await;
    assert_eq!(
        log.since(1).await,
        vec![event("booking.created", Some(&jane), Some(&booking), None)]
    );
    mutate(
        &app,
        "mutation($id: ID!) { updateBooking(id: $id, bookingData: { start: \"2031-03-04T10:00:00Z\", end: \"2031-03-04T10:30:00Z\" }) { error } }",
        json!({ "id": booking }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event("booking.updated", Some(&jane), Some(&booking), None)]
    );
    // Moved where it is, and given the metadata it has: no event.
    let set = "mutation($id: ID!, $v: String!) { updateBookingMetadata(bookingId: $id, key: \"crm\", value: $v) { error } }";
    mutate(&app, set, json!({ "id": booking, "v": "A-1" })).await;
    assert_eq!(
        log.since(1).await,
        vec![event("booking.updated", Some(&jane), Some(&booking), None)]
    );
    mutate(
        &app,
        "mutation($id: ID!) { updateBooking(id: $id, bookingData: { start: \"2031-03-04T10:00:00Z\", end: \"2031-03-04T10:30:00Z\" }) { error } }",
        json!({ "id": booking }),
    )
    .await;
    mutate(&app, set, json!({ "id": booking, "v": "A-1" })).await;
    mutate(
        &app,
        "mutation($id: ID!) { deleteBooking(id: $id, cancellationReason: \"Ill\", sendCancellationMessages: false) { error } }",
        json!({ "id": booking }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event("booking.deleted", Some(&jane), Some(&booking), None)]
    );

    // Deleting a label takes it off every patient that had it: an event for each.
    let allergy = app.label("Allergy").await;
    let john = app.patient("John", "Roe").await;
    add_label(&app, &jane, &allergy).await;
    add_label(&app, &john, &allergy).await;
    assert_eq!(
        log.since(4).await,
        vec![
            event("label.created", None, None, Some(&allergy)),
            created(&john),
            event("patient.label.added", Some(&jane), None, Some(&allergy)),
            event("patient.label.added", Some(&john), None, Some(&allergy)),
        ]
    );
    mutate(
        &app,
        "mutation($l: ID!) { deleteLabel(id: $l) { error } }",
        json!({ "l": allergy }),
    )
    .await;
    let mut fan_out = log.since(3).await;
    fan_out.sort_by_key(|(kind, ids)| format!("{kind} {ids}"));
    let mut expected = vec![
        event("label.deleted", None, None, Some(&allergy)),
        event("patient.label.removed", Some(&jane), None, Some(&allergy)),
        event("patient.label.removed", Some(&john), None, Some(&allergy)),
    ];
    expected.sort_by_key(|(kind, ids)| format!("{kind} {ids}"));
    assert_eq!(fan_out, expected);

    mutate(
        &app,
        "mutation($id: ID!) { deletePatient(id: $id) { error } }",
        json!({ "id": john }),
    )
    .await;
    assert_eq!(
        log.since(1).await,
        vec![event("patient.deleted", Some(&john), None, None)]
    );
}

// ----------------------------------------------------------------------------------------
// 2. Who sees what

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_caller_sees_only_the_events_it_may_read(#[case] engine: Engine) {
    let app = spawn!(engine);
    let doctor = app.doctor("Grace", "Hopper").await;
    let bookings_only = app.token(&["bookings:read"]).await;
    let jane = app.patient("Jane", "Doe").await;
    let start = settled(&app, &app.admin_token, None, 1).await;
    let cursor = id_of(&start[0]);

    // A bookings-only subscriber: the patient and label events pass it by, in the replay and
    // live.
    let mut ws = Ws::connect(&app, &bookings_only).await;
    ws.follow("s", json!({ "after": cursor })).await;
    let vip = app.label("VIP").await;
    add_label(&app, &jane, &vip).await;
    let john = app.patient("John", "Roe").await;
    let booking = book(&app, &john, &doctor, 9).await;
    let event = ws.event().await;
    assert_eq!(
        what(&event),
        (
            "booking.created".into(),
            named(Some(&john), Some(&booking), None)
        )
    );
    app.patient("Ann", "Lee").await;
    let second = book(&app, &jane, &doctor, 11).await;
    let event = ws.event().await;
    assert_eq!(event["identifiers"]["bookingId"], json!(second), "{event}");
    ws.quiet().await;

    // The feed: each token sees exactly the events of the resources it may read.
    let everything = settled(&app, &app.admin_token, None, 7).await;
    assert_eq!(everything.len(), 7, "{everything:?}");
    for (permission, prefix) in [
        ("bookings:read", "booking."),
        ("patients:read", "patient."),
        ("labels:read", "label."),
    ] {
        let token = app.token(&[permission]).await;
        let expected: Vec<String> = everything
            .iter()
            .filter(|e| {
                e["eventType"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(prefix))
            })
            .map(id_of)
            .collect();
        assert!(!expected.is_empty());
        let seen = settled(&app, &token, None, expected.len()).await;
        assert_eq!(ids(&seen), expected, "{permission}: {seen:?}");
    }

    // A token that may read none of the events asked for is told so, not answered with
    // silence: in the feed and on the websocket.
    let patient_only = app.token(&["query:patient"]).await;
    let body = app.gql(Some(&patient_only), &feed_query(), json!({})).await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
    assert_eq!(
        error_message(&body),
        "Missing permission patients:read",
        "{body}"
    );
    let body = app
        .gql(
            Some(&bookings_only),
            "query($t: [String!]) { events(eventTypes: $t) { data { id } } }",
            json!({ "t": ["patient.created", "label.created"] }),
        )
        .await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
    assert_eq!(
        body["errors"][0]["extensions"]["alternatives"],
        json!(["labels:read"]),
        "{body}"
    );
    let mut ws = Ws::connect(&app, &patient_only).await;
    ws.follow("s", json!({})).await;
    let errors = ws.error("s").await;
    assert_eq!(errors[0]["extensions"]["code"], "FORBIDDEN", "{errors}");
}

// ----------------------------------------------------------------------------------------
// 3. The feed's paging and arguments

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_feed_pages_with_its_cursor(#[case] engine: Engine) {
    let app = spawn!(engine);
    let admin = &app.admin_token;
    let empty = page(&app, admin, json!({})).await;
    assert_eq!(
        empty,
        json!({ "data": [], "cursor": null, "hasMore": false })
    );

    let mut patients = Vec::new();
    for i in 0..5 {
        patients.push(app.patient("Page", &format!("P{i}")).await);
    }
    settled(&app, admin, None, 5).await;
    let patient_ids = |page: &Value| -> Vec<String> {
        page["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|e| {
                e["identifiers"]["patientId"]
                    .as_str()
                    .expect("id")
                    .to_string()
            })
            .collect()
    };
    let first = page(&app, admin, json!({ "limit": 2 })).await;
    assert_eq!(patient_ids(&first), patients[0..2]);
    assert_eq!(first["hasMore"], true);
    assert_eq!(first["cursor"], first["data"][1]["id"]);
    let second = page(&app, admin, json!({ "after": first["cursor"], "limit": 2 })).await;
    assert_eq!(patient_ids(&second), patients[2..4]);
    assert_eq!(second["hasMore"], true);
    assert_eq!(second["cursor"], second["data"][1]["id"]);
    let third = page(
        &app,
        admin,
        json!({ "after": second["cursor"], "limit": 2 }),
    )
    .await;
    assert_eq!(patient_ids(&third), patients[4..5]);
    assert_eq!(third["hasMore"], false);
    assert_eq!(third["cursor"], third["data"][0]["id"]);
    // At the end: nothing, and the cursor stays where it was.
    let end = page(&app, admin, json!({ "after": third["cursor"], "limit": 2 })).await;
    assert_eq!(
        end,
        json!({ "data": [], "cursor": third["cursor"], "hasMore": false })
    );
    // hasMore is exact at the edge.
    assert_eq!(
        page(&app, admin, json!({ "limit": 5 })).await["hasMore"],
        false
    );
    assert_eq!(
        page(&app, admin, json!({ "limit": 4 })).await["hasMore"],
        true
    );

    // Only the types asked for.
    let label = app.label("VIP").await;
    settled(&app, admin, None, 6).await;
    let labels = page(&app, admin, json!({ "types": ["label.created"] })).await;
    assert_eq!(
        labels["data"].as_array().expect("data").len(),
        1,
        "{labels}"
    );
    assert_eq!(labels["data"][0]["identifiers"]["labelId"], json!(label));
    let after_labels = page(
        &app,
        admin,
        json!({ "types": ["label.created"], "after": labels["cursor"] }),
    )
    .await;
    assert_eq!(after_labels["data"], json!([]));

    // 100 at most by default, 500 at most when asked.
    let names: Vec<String> = (0..96).map(|i| format!("M{i}")).collect();
    let more = names.iter().map(|name| app.patient("Many", name));
    futures_util::future::join_all(more).await;
    settled(&app, admin, None, 102).await;
    let default = page(&app, admin, json!({})).await;
    assert_eq!(default["data"].as_array().expect("data").len(), 100);
    assert_eq!(default["hasMore"], true);
    let all = page(&app, admin, json!({ "limit": 500 })).await;
    assert_eq!(all["data"].as_array().expect("data").len(), 102);
    assert_eq!(all["hasMore"], false);
    assert_in_order(&ids(all["data"].as_array().expect("data")));
    let one = page(&app, admin, json!({ "limit": 1 })).await;
    assert_eq!(one["data"].as_array().expect("data").len(), 1);

    // Bad arguments.
    for variables in [
        json!({ "limit": 0 }),
        json!({ "limit": -1 }),
        json!({ "limit": 501 }),
        json!({ "types": ["patient.exploded"] }),
        json!({ "types": ["patient.created", "Patient.Created"] }),
        // Matching nothing, it would move the cursor past every event asked for.
        json!({ "types": [] }),
        json!({ "after": "not-a-cursor" }),
        json!({ "after": "" }),
        json!({ "after": "zz".repeat(16) }),
    ] {
        let body = feed(&app, admin, variables.clone()).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{variables}: {body}");
    }
}

// ----------------------------------------------------------------------------------------
// 4. The npm graphql-ws client

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_graphql_ws_client_receives_live_events_in_order(#[case] engine: Engine) {
    let app = spawn!(engine);
    let query = format!("subscription {{ events {{ {EVENT} patient {{ firstName lastName }} }} }}");
    let Some(mut client) = NodeSubscriber::start(&app, &app.admin_token, &query, json!({})).await
    else {
        return;
    };
    let probe = make_live(&mut client, &app).await;
    assert_eq!(
        probe["patient"],
        json!({ "firstName": "Probe", "lastName": "Probe0" })
    );

    let ann = app.patient("Ann", "Lee").await;
    let bob = app.patient("Bob", "Ray").await;
    mutate(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { email: \"ann@example.com\" }) { error } }",
        json!({ "id": ann }),
    )
    .await;
    let got = client.events(3).await;
    assert_eq!(
        got.iter().map(what).collect::<Vec<_>>(),
        vec![
            created(&ann),
            created(&bob),
            ("patient.updated".into(), named(Some(&ann), None, None)),
        ]
    );
    let names: Vec<&Value> = got.iter().map(|e| &e["patient"]).collect();
    assert_eq!(
        names,
        [
            &json!({ "firstName": "Ann", "lastName": "Lee" }),
            &json!({ "firstName": "Bob", "lastName": "Ray" }),
            &json!({ "firstName": "Ann", "lastName": "Lee" }),
        ]
    );
    // The same events, in the same order, as the feed has them.
    let feed = settled(&app, &app.admin_token, Some(&id_of(&probe)), 3).await;
    assert_eq!(ids(&got), ids(&feed));
    assert_in_order(&ids(&got));
    assert_eq!(client.event_within(QUIET).await, None);
}

// ----------------------------------------------------------------------------------------
// 5. Resuming

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscription_resumes_after_its_cursor_across_a_restart(#[case] engine: Engine) {
    let mut app = spawn!(engine);
    app.patient("Ann", "One").await;
    let start = settled(&app, &app.admin_token, None, 1).await;

    // Subscribe after the first event: the kept one comes first, then the live one.
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow("s", json!({ "after": id_of(&start[0]) })).await;
    let bob = app.patient("Bob", "Two").await;
    let cy = app.patient("Cy", "Three").await;
    let got = ws.events(2).await;
    assert_eq!(
        got.iter().map(what).collect::<Vec<_>>(),
        vec![created(&bob), created(&cy)]
    );
    let last = id_of(&got[1]);
    ws.close().await;

    // Changes while away, a restart, then a resumption while more changes are made.
    let mut missed = Vec::new();
    for i in 0..25 {
        missed.push(app.patient("Away", &format!("A{i}")).await);
    }
    app.restart().await;
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow("s", json!({ "after": last })).await;
    for i in 0..10 {
        missed.push(app.patient("Back", &format!("B{i}")).await);
    }
    let got = ws.events(missed.len()).await;
    assert_eq!(
        got.iter().map(what).collect::<Vec<_>>(),
        missed.iter().map(|p| created(p)).collect::<Vec<_>>()
    );
    let mut seen = vec![last.clone()];
    seen.extend(ids(&got));
    assert_in_order(&seen);
    ws.quiet().await;
    let feed = settled(&app, &app.admin_token, Some(&last), missed.len()).await;
    assert_eq!(ids(&got), ids(&feed));
}

// ----------------------------------------------------------------------------------------
// 6. Many writers at once

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_feed_reader_sees_every_concurrent_write_once_in_order(#[case] engine: Engine) {
    const WRITERS: usize = 20;
    const EACH: usize = 10;
    let app = Arc::new(spawn!(engine));
    let writing = write_concurrently(app.clone(), WRITERS, EACH);

    // Follow the feed with small pages while the writers write, until they are done and the
    // feed has nothing more.
    let mut seen: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let until = Instant::now() + Duration::from_secs(60);
    let mut done_at = None;
    loop {
        assert!(Instant::now() < until, "the writers took over 60 s");
        if done_at.is_none() && writing.is_finished() {
            done_at = Some(Instant::now());
        }
        let page = page(
            &app,
            &app.admin_token,
            json!({ "after": cursor, "limit": 7 }),
        )
        .await;
        let data = page["data"].as_array().expect("data");
        if let Some(next) = page["cursor"].as_str() {
            cursor = Some(next.to_string());
        }
        seen.extend(data.iter().cloned());
        if data.is_empty() {
            // Over once the writers are, and every write has shown or the feed has stayed
            // short of them for a while (see `settled`).
            if done_at.is_some_and(|at| seen.len() >= WRITERS * EACH || at.elapsed() > WAIT) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let written = writing.await.expect("the writers");

    let seen_ids = ids(&seen);
    assert_in_order(&seen_ids);
    let whole = settled(&app, &app.admin_token, None, WRITERS * EACH).await;
    let missed: Vec<&Value> = whole
        .iter()
        .filter(|e| !seen_ids.contains(&id_of(e)))
        .collect();
    assert!(
        missed.is_empty(),
        "the reader skipped {} events: {missed:?}",
        missed.len()
    );
    assert_eq!(seen.len(), WRITERS * EACH);
    let patients: HashSet<&str> = seen
        .iter()
        .map(|e| {
            assert_eq!(e["eventType"], "patient.created", "{e}");
            e["identifiers"]["patientId"].as_str().expect("patientId")
        })
        .collect();
    let written: HashSet<&str> = written.iter().map(String::as_str).collect();
    assert_eq!(patients, written);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscriber_receives_every_concurrent_write_once_in_order(#[case] engine: Engine) {
    const WRITERS: usize = 20;
    const EACH: usize = 10;
    let app = Arc::new(spawn!(engine));
    app.patient("Seed", "Zero").await;
    let start = settled(&app, &app.admin_token, None, 1).await;
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow("s", json!({ "after": id_of(&start[0]) })).await;

    let written = write_concurrently(app.clone(), WRITERS, EACH)
        .await
        .expect("the writers");
    let got = ws.events(WRITERS * EACH).await;
    ws.quiet().await;
    let mut got_ids = vec![id_of(&start[0])];
    got_ids.extend(ids(&got));
    assert_in_order(&got_ids);
    let patients: HashSet<&str> = got
        .iter()
        .map(|e| e["identifiers"]["patientId"].as_str().expect("patientId"))
        .collect();
    let written: HashSet<&str> = written.iter().map(String::as_str).collect();
    assert_eq!(patients, written);
    let feed = settled(
        &app,
        &app.admin_token,
        Some(&id_of(&start[0])),
        WRITERS * EACH,
    )
    .await;
    assert_eq!(ids(&got), ids(&feed));
}

// ----------------------------------------------------------------------------------------
// 7. The protocol, frame by frame

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_handshake_closes_with_the_protocol_codes(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            ws_init_timeout: Duration::from_millis(300),
            ..test_config()
        }
    );
    let admin = app.admin_token.as_str();

    // No subprotocol offered.
    let mut ws = Ws::open(&app, false, Some(admin)).await;
    assert_eq!(ws.closed().await.0, 4406);

    // No connection_init in time.
    let opened = Instant::now();
    let mut ws = Ws::open(&app, true, Some(admin)).await;
    assert_eq!(ws.closed().await.0, 4408);
    assert!(
        opened.elapsed() >= Duration::from_millis(250),
        "{:?}",
        opened.elapsed()
    );

    // A bad token, or none.
    let mut ws = Ws::open(&app, true, None).await;
    ws.init("not-a-token").await;
    assert_eq!(ws.closed().await.0, 4403);
    let mut ws = Ws::open(&app, true, None).await;
    ws.send(json!({ "type": "connection_init" })).await;
    assert_eq!(ws.closed().await.0, 4403);
    let mut ws = Ws::open(&app, true, Some("not-a-token")).await;
    ws.send(json!({ "type": "connection_init", "payload": {} }))
        .await;
    assert_eq!(ws.closed().await.0, 4403);

    // The token in the upgrade's header will do.
    let mut ws = Ws::open(&app, true, Some(admin)).await;
    ws.send(json!({ "type": "connection_init" })).await;
    ws.acked().await;
    ws.still_open(&app).await;

    // Subscribe before the acknowledgement.
    let mut ws = Ws::open(&app, true, Some(admin)).await;
    ws.follow("s", json!({})).await;
    assert_eq!(ws.closed().await.0, 4401);

    // A second connection_init.
    let mut ws = Ws::connect(&app, admin).await;
    ws.init(admin).await;
    assert_eq!(ws.closed().await.0, 4429);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_malformed_message_closes_with_4400(#[case] engine: Engine) {
    let app = spawn!(engine);
    let query = subscription();
    let malformed = [
        Message::text("not json"),
        Message::text("[1, 2]"),
        Message::text(json!({ "type": "shout" }).to_string()),
        Message::text(json!({ "id": "s", "type": "subscribe" }).to_string()),
        Message::text(json!({ "id": "s", "type": "subscribe", "payload": {} }).to_string()),
        Message::text(
            json!({ "id": "s", "type": "subscribe", "payload": { "query": 42 } }).to_string(),
        ),
        Message::text(json!({ "type": "subscribe", "payload": { "query": query } }).to_string()),
        Message::binary(
            json!({ "id": "s", "type": "subscribe", "payload": { "query": query } })
                .to_string()
                .into_bytes(),
        ),
    ];
    for message in malformed {
        let mut ws = Ws::connect(&app, &app.admin_token).await;
        ws.raw(message.clone()).await;
        let (code, reason) = ws.closed().await;
        assert_eq!(code, 4400, "{message:?}: {reason}");
    }
}

/// A message over 256 KiB closes the connection with 1009 (RFC 6455's "message too big")
/// and a reason, where the connection was dropped without a close frame.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_message_too_long_closes_with_1009(#[case] engine: Engine) {
    let app = spawn!(engine);
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    let query = format!(
        "{{ currentPractice {{ id }} }} # {}",
        "x".repeat(300 * 1024)
    );
    ws.subscribe("s", &query, json!({})).await;
    let (code, reason) = ws.closed().await;
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("262144 bytes"), "{reason}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_second_subscribe_with_a_live_id_closes_with_4409(#[case] engine: Engine) {
    let app = spawn!(engine);
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    // An id may be used again once its operation is over.
    ws.follow("a", json!({})).await;
    ws.send(json!({ "id": "a", "type": "complete" })).await;
    ws.follow("a", json!({})).await;
    ws.quiet().await;
    // Not while it runs.
    ws.follow("a", json!({})).await;
    assert_eq!(
        ws.closed().await,
        (4409, "Subscriber for a already exists".to_string())
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn pings_queries_mutations_and_errors_over_the_socket(#[case] engine: Engine) {
    let app = spawn!(engine);
    let mut ws = Ws::connect(&app, &app.admin_token).await;

    // Ping: pong, with the payload echoed.
    ws.send(json!({ "type": "ping", "payload": { "n": 1 } }))
        .await;
    assert_eq!(
        ws.message().await,
        json!({ "type": "pong", "payload": { "n": 1 } })
    );
    ws.send(json!({ "type": "ping" })).await;
    assert_eq!(ws.message().await["type"], "pong");

    // A query and a mutation: one next, then complete.
    ws.subscribe("q", "{ currentPractice { id } }", json!({}))
        .await;
    let payload = ws.single("q").await;
    assert_eq!(
        payload["data"],
        json!({ "currentPractice": { "id": app.practice_id } })
    );
    ws.subscribe(
        "m",
        "mutation { createPatient(patientData: { first: \"Sock\", last: \"Et\" }) { data { id } error } }",
        json!({}),
    )
    .await;
    let payload = ws.single("m").await;
    let patient = payload["data"]["createPatient"]["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{payload}"))
        .to_string();
    let events = settled(&app, &app.admin_token, None, 1).await;
    assert_eq!(
        events.iter().map(what).collect::<Vec<_>>(),
        vec![created(&patient)]
    );

    // Validation errors: an `error` message, and the connection stays open.
    ws.subscribe("v", "subscription { events { id nope } }", json!({}))
        .await;
    let errors = ws.error("v").await;
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope")),
        "{errors}"
    );
    assert!(errors[0]["extensions"]["code"].is_string(), "{errors}");
    ws.subscribe("v2", "{ patients { data { nope } } }", json!({}))
        .await;
    ws.error("v2").await;
    ws.still_open(&app).await;

    // A permission error over the socket is what it is over HTTP: the fields the token may
    // read answered, the others null with FORBIDDEN, in a `next`.
    let bookings_only = app.token(&["bookings:read"]).await;
    let mut ws = Ws::connect(&app, &bookings_only).await;
    ws.subscribe(
        "q",
        "{ bookings { data { id } } patients { data { id } } }",
        json!({}),
    )
    .await;
    let result = ws.single("q").await;
    assert_eq!(result["data"]["bookings"]["data"], json!([]), "{result}");
    assert_eq!(result["data"]["patients"], Value::Null, "{result}");
    assert_eq!(
        result["errors"][0]["extensions"]["code"], "FORBIDDEN",
        "{result}"
    );
    assert_eq!(
        result["errors"][0]["extensions"]["permission"], "patients:read",
        "{result}"
    );
    ws.still_open(&app).await;
}

/// A mutation sent over the socket runs to its end whatever its client does meanwhile: a
/// `complete` for it withholds its result (the protocol: "the result should not be sent
/// through once it does"), and a connection closed does not stop it half-way. Both wait for
/// the database's write lock, held beside the server, while their clients give up on them.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_mutation_runs_to_its_end_whatever_its_client_does(#[case] engine: Engine) {
    let app = spawn!(engine);
    let create = |first: &str| {
        format!(
            "mutation {{ createPatient(patientData: {{ first: \"{first}\", last: \"Held\" }}) {{ data {{ id }} error }} }}"
        )
    };
    let mut told = Ws::connect(&app, &app.admin_token).await;
    let mut cut = Ws::connect(&app, &app.admin_token).await;
    let mut told_at_once = Ws::connect(&app, &app.admin_token).await;
    let mut cut_at_once = Ws::connect(&app, &app.admin_token).await;
    let mut held = crate::helpers::hold_writes(&app.database_url, engine, "patients").await;
    told.subscribe("m", &create("Completed"), json!({})).await;
    cut.subscribe("m", &create("Closed"), json!({})).await;
    // Given up on as soon as sent: the `complete`, or the close, right behind the `subscribe`.
    told_at_once
        .subscribe("m", &create("CompletedAtOnce"), json!({}))
        .await;
    told_at_once
        .send(json!({ "id": "m", "type": "complete" }))
        .await;
    cut_at_once
        .subscribe("m", &create("ClosedAtOnce"), json!({}))
        .await;
    cut_at_once.close().await;
    match engine {
        Engine::Postgres => crate::helpers::wait_on_locks(&app.database_url, 4).await,
        // The file's lock is waited for inside SQLite, where nothing shows it.
        Engine::Sqlite => tokio::time::sleep(Duration::from_millis(300)).await,
    }
    told.send(json!({ "id": "m", "type": "complete" })).await;
    cut.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    sqlx::query("ROLLBACK")
        .execute(&mut held)
        .await
        .expect("let go");
    let made = settled(&app, &app.admin_token, None, 4).await;
    assert_eq!(made.len(), 4, "every patient made: {made:?}");
    let names = app
        .ok("{ patients { data { firstName } } }", json!({}))
        .await;
    let mut names: Vec<&str> = names["patients"]["data"]
        .as_array()
        .expect("patients")
        .iter()
        .filter_map(|p| p["firstName"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["Closed", "ClosedAtOnce", "Completed", "CompletedAtOnce"]
    );
    // The result of an operation its client completed is not sent.
    for ws in [&mut told, &mut told_at_once] {
        assert!(
            ws.frame_within(Duration::from_millis(500)).await.is_none(),
            "nothing after the client's complete"
        );
        ws.still_open(&app).await;
    }
}

/// A token the database cannot be read to check, at `connection_init`, closes the connection
/// with 1013 (try again in a moment), not 4403: the token was not refused, and a client told
/// 4403 would sign its user out. The same token connects once the database is back.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_token_that_cannot_be_checked_at_init_closes_with_1013(#[case] engine: Engine) {
    use sqlx::Connection as _;
    let app = spawn!(engine);
    // Never presented yet: no instance holds it in memory.
    let (_, token) = api_token(&app, &["patients:read"], None).await;
    let mut outside = sqlx::AnyConnection::connect(&app.database_url)
        .await
        .expect("connect");
    let rename = |from: &str, to: &str| format!("ALTER TABLE {from} RENAME TO {to}");
    sqlx::query(sqlx::AssertSqlSafe(rename("tokens", "tokens_away")))
        .execute(&mut outside)
        .await
        .expect("rename");
    let mut ws = Ws::open(&app, true, None).await;
    ws.init(&token).await;
    let closed = ws.frame().await;
    sqlx::query(sqlx::AssertSqlSafe(rename("tokens_away", "tokens")))
        .execute(&mut outside)
        .await
        .expect("rename back");
    match closed {
        Frame::Closed(code, reason) => assert_eq!(code, 1013, "{reason}"),
        Frame::Message(message) => panic!("expected the close, got {message}"),
    }
    Ws::connect(&app, &token).await.still_open(&app).await;
}

/// A client that sends nothing back for two pings in a row (its machine gone without a word:
/// here, one that reads nothing, so answers nothing) is dropped, and its place among its
/// token's connections is free again; one that answers stays, however long it is quiet.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_client_that_answers_no_ping_is_dropped(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            ws_keep_alive: Duration::from_millis(500),
            max_websockets_per_token: 1,
            ..test_config()
        }
    );
    let token = app.token(&["patients:read"]).await;
    let mut answering = Ws::connect(&app, &app.admin_token).await;
    let mut silent = Ws::connect(&app, &token).await;
    // The silent one reads nothing, and so answers nothing, until its token's one place is
    // free again; the answering one reads, and so answers each ping, all the while.
    let until = Instant::now() + WAIT;
    let mut again = loop {
        assert!(
            answering
                .frame_within(Duration::from_millis(100))
                .await
                .is_none(),
            "nothing but pings"
        );
        let mut again = Ws::open(&app, true, None).await;
        again.init(&token).await;
        match again.frame().await {
            Frame::Message(message) if message["type"] == "connection_ack" => break again,
            Frame::Closed(4403, _) if Instant::now() < until => {}
            Frame::Closed(4403, reason) => panic!("the silent one still holds its place: {reason}"),
            unexpected => panic!("{unexpected:?}"),
        }
    };
    // What reached the silent one: the pings, then the end, with no close code.
    let mut pings = 0;
    let end = loop {
        match tokio::time::timeout(WAIT, silent.socket.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                let message: Value = serde_json::from_str(text.as_str()).expect("JSON");
                assert_eq!(message["type"], "ping", "{message}");
                pings += 1;
            }
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            Ok(Some(Ok(Message::Close(Some(frame))))) => {
                panic!("no close code for a client gone: {frame:?}")
            }
            // A close without a code, or the end of the stream (the pongs the client's library
            // sends as it reads the pings find the socket shut).
            Ok(other) => break format!("{other:?}"),
            Err(_) => panic!("no end after {pings} pings"),
        }
    };
    assert!(pings >= 2, "{pings} pings before the end: {end}");
    answering.still_open(&app).await;
    again.still_open(&app).await;
}

// A bad argument to the subscription (an unknown event type, a malformed `after`) is an
// `error` message, not a `next` with errors.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn bad_subscription_arguments_come_as_an_error_message(#[case] engine: Engine) {
    let app = spawn!(engine);
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    for (id, variables) in [
        ("types", json!({ "types": ["patient.exploded"] })),
        ("none", json!({ "types": [] })),
        ("after", json!({ "after": "not-a-cursor" })),
        ("short", json!({ "after": "0123abcd" })),
    ] {
        ws.follow(id, variables).await;
        let errors = ws.error(id).await;
        assert_eq!(
            errors[0]["extensions"]["code"], "BAD_USER_INPUT",
            "{errors}"
        );
    }
    ws.still_open(&app).await;
}

/// A socket is held to the rate limits as HTTP requests are: each `subscribe` counts against
/// its token before its document is read (past the limit, its error says so, whatever the
/// document), and each message counts against the client's address before it is read (past
/// that limit, the connection is closed, 1008, with when to come back).
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_socket_is_held_to_the_rate_limits(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            rate_limit: 3,
            address_rate_limit: 20,
            ..test_config()
        }
    );
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    let mut codes = Vec::new();
    for i in 0..5 {
        let id = format!("broken{i}");
        ws.subscribe(&id, "subscription { events {", json!({}))
            .await;
        let errors = ws.error(&id).await;
        codes.push(
            errors[0]["extensions"]["code"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        );
    }
    let limited = codes.iter().position(|c| c == "RATE_LIMITED");
    let first = limited.unwrap_or_else(|| panic!("never rate limited: {codes:?}"));
    assert!(
        codes[..first].iter().all(|c| c == "GRAPHQL_PARSE_FAILED"),
        "{codes:?}"
    );
    assert!(
        codes[first..].iter().all(|c| c == "RATE_LIMITED"),
        "{codes:?}"
    );

    // Pings, until the address's limit closes the connection.
    let mut pongs = 0;
    let (code, reason) = loop {
        ws.send(json!({ "type": "ping" })).await;
        match ws.frame().await {
            Frame::Message(message) => {
                assert_eq!(message["type"], "pong", "{message}");
                pongs += 1;
                assert!(pongs < 20, "still answering after {pongs} pings");
            }
            Frame::Closed(code, reason) => break (code, reason),
        }
    };
    assert_eq!(code, 1008, "{reason}");
    assert!(
        reason.contains("a minute per address") && reason.contains("try again in"),
        "{reason}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscription_is_held_to_the_query_limits(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_depth: 4,
            // Above what the feed's pages of 500 cost (4,501), which the set-up reads.
            max_cost: 4_600,
            ..test_config()
        }
    );
    // Were a document let through, the replay of this event would show it at once.
    app.patient("Seed", "Zero").await;
    let start = settled(&app, &app.admin_token, None, 1).await;
    let after = json!({ "after": id_of(&start[0]) });
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    let refused = |errors: &Value, limit: &str| {
        assert_eq!(
            errors[0]["extensions"]["code"], "QUERY_TOO_COMPLEX",
            "{errors}"
        );
        assert_eq!(errors[0]["extensions"]["limit"], limit, "{errors}");
    };
    ws.subscribe(
        "deep",
        "subscription($after: ID) { events(after: $after) { booking { patient { labels { text } } } } }",
        after.clone(),
    )
    .await;
    refused(&ws.error("deep").await, "depth");
    let aliases: String = (0..31).map(|i| format!("a{i}: id ")).collect();
    ws.subscribe(
        "aliases",
        &format!("subscription($after: ID) {{ events(after: $after) {{ {aliases} }} }}"),
        after.clone(),
    )
    .await;
    refused(&ws.error("aliases").await, "aliases");
    ws.subscribe(
        "cost",
        "subscription($after: ID) { events(after: $after) { patient { bookings(start: \"2031-01-01\", end: \"2031-01-02\") { id start end comments reference deleted cancellationReason patientId createdAt updatedAt } } } }",
        after.clone(),
    )
    .await;
    refused(&ws.error("cost").await, "cost");
    ws.still_open(&app).await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_connection_runs_a_bounded_number_of_subscriptions(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_subscriptions_per_connection: 2,
            ..test_config()
        }
    );
    app.patient("Seed", "Zero").await;
    let start = settled(&app, &app.admin_token, None, 1).await;
    let after = json!({ "after": id_of(&start[0]) });
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow("a", after.clone()).await;
    ws.follow("b", after.clone()).await;
    ws.follow("c", after.clone()).await;
    ws.error("c").await;
    // Completing one makes room.
    ws.send(json!({ "id": "a", "type": "complete" })).await;
    ws.follow("c", after.clone()).await;
    let ann = app.patient("Ann", "Lee").await;
    let mut by_id = Vec::new();
    for _ in 0..2 {
        let message = ws.message().await;
        assert_eq!(message["type"], "next", "{message}");
        assert_eq!(
            message["payload"]["data"]["events"]["identifiers"]["patientId"],
            json!(ann)
        );
        by_id.push(message["id"].as_str().expect("id").to_string());
    }
    by_id.sort();
    assert_eq!(by_id, ["b", "c"]);
    ws.quiet().await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_token_holds_a_bounded_number_of_connections(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_websockets_per_token: 2,
            ..test_config()
        }
    );
    let token = app.token(&["patients:read"]).await;
    let one = Ws::connect(&app, &token).await;
    let mut two = Ws::connect(&app, &token).await;
    let mut three = Ws::open(&app, true, None).await;
    three.init(&token).await;
    assert_eq!(three.closed().await.0, 4403);
    // Other tokens are not counted with it.
    let mut other = Ws::connect(&app, &app.admin_token).await;
    other.still_open(&app).await;
    two.still_open(&app).await;
    // A subscription over Server-Sent Events is held open too, and counted with them:
    // refused for the token that holds two, before its stream starts.
    let stream = |token: &str| {
        app.client
            .post(&app.url)
            .header("x-token", token)
            .header("accept", "text/event-stream")
            .json(&json!({ "query": "subscription { events { id } }" }))
            .send()
    };
    let refused = stream(&token).await.expect("answered");
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.expect("json");
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "FORBIDDEN",
        "{body}"
    );
    // The admin's, with one websocket, runs, and takes the admin's second place.
    let running = stream(&app.admin_token).await.expect("answered");
    assert_eq!(running.status(), 200);
    let mut third = Ws::open(&app, true, None).await;
    third.init(&app.admin_token).await;
    assert_eq!(third.closed().await.0, 4403);
    drop(running);
    // A connection closed gives its place back.
    one.close().await;
    let until = Instant::now() + WAIT;
    loop {
        let mut again = Ws::open(&app, true, None).await;
        again.init(&token).await;
        match again.frame().await {
            Frame::Message(message) if message["type"] == "connection_ack" => break,
            Frame::Closed(4403, _) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            unexpected => panic!("a place once one is closed: {unexpected:?}"),
        }
    }
}

// ----------------------------------------------------------------------------------------
// 8. A token that stops working

/// A websocket with `token` following the events, from a first patient on, once the next
/// one's event has come through it: what a test of its close cuts.
async fn following(app: &TestApp, token: &str) -> Ws {
    app.patient("Seed", "Zero").await;
    let start = settled(app, &app.admin_token, None, 1).await;
    let mut ws = Ws::connect(app, token).await;
    ws.follow("s", json!({ "after": id_of(&start[0]) })).await;
    let ann = app.patient("Ann", "Lee").await;
    assert_eq!(what(&ws.event().await), created(&ann));
    ws
}

// Revoked: the close is 4403, with no event after the revocation and no `complete` before it
// (a client told `complete` would think the subscription ended by itself).
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn revoking_the_token_closes_its_subscription_with_4403(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (token_id, token) = api_token(&app, &["patients:read"], None).await;
    let mut ws = following(&app, &token).await;

    mutate(
        &app,
        "mutation($id: ID!) { revokeApiToken(id: $id) { error } }",
        json!({ "id": token_id }),
    )
    .await;
    app.patient("Bob", "Ray").await;
    ws.cut_off().await;
}

// The API tokens a user made, revoked with them (resetUserPassword with revokeApiTokens): as
// for revocation, the subscription held by such a token is closed at once.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_users_tokens_revoked_with_them_close_their_subscriptions_with_4403(
    #[case] engine: Engine,
) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    let session = app.sign_in(&email, PASSWORD).await;
    let me = app
        .gql(Some(&session), "{ currentUser { id } }", json!({}))
        .await;
    let ada = me["data"]["currentUser"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{me}"))
        .to_string();
    let made = app
        .gql(
            Some(&session),
            "mutation { createApiToken(name: \"Ada's sync\", permissions: [\"patients:read\"]) { token error } }",
            json!({}),
        )
        .await;
    let token = made["data"]["createApiToken"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    let mut ws = following(&app, &token).await;

    mutate(
        &app,
        "mutation($id: ID!) { resetUserPassword(id: $id, revokeApiTokens: true) { data { id } error } }",
        json!({ "id": ada }),
    )
    .await;
    app.patient("Bob", "Ray").await;
    ws.cut_off().await;
}

// Signed out: as for revocation.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn signing_out_closes_the_sessions_subscription_with_4403(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("practitioner", "pat@example.com").await;
    let session = app.sign_in(&email, PASSWORD).await;
    let mut ws = following(&app, &session).await;

    let out = app
        .gql(Some(&session), "mutation { signOut }", json!({}))
        .await;
    assert_eq!(out["data"]["signOut"], true, "{out}");
    app.patient("Bob", "Ray").await;
    ws.cut_off().await;
}

// Nothing running on it: a connection whose token stops working is closed all the same, at
// once (the contract: "A connection whose token is revoked or expires is closed (4403)"),
// where it stayed open until its next `subscribe`. Revoked, signed out, its user disabled.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_connection_running_nothing_is_closed_when_its_token_stops_working(
    #[case] engine: Engine,
) {
    let app = spawn!(engine);
    let (token_id, token) = api_token(&app, &["patients:read"], None).await;
    let mut revoked = Ws::connect(&app, &token).await;
    // It works: a query on it is answered.
    revoked
        .send(json!({ "id": "q", "type": "subscribe", "payload": { "query": "{ currentPractice { id } }" } }))
        .await;
    let answer = revoked.single("q").await;
    assert!(
        answer["data"]["currentPractice"]["id"].is_string(),
        "{answer}"
    );
    mutate(
        &app,
        "mutation($id: ID!) { revokeApiToken(id: $id) { error } }",
        json!({ "id": token_id }),
    )
    .await;
    let (code, reason) = revoked.closed().await;
    assert_eq!(
        (code, reason.as_str()),
        (4403, "The token has been revoked or signed out")
    );

    let email = app.user("practitioner", "pat@example.com").await;
    let first = app.sign_in(&email, PASSWORD).await;
    let second = app.sign_in(&email, PASSWORD).await;
    let mut signed_out = Ws::connect(&app, &first).await;
    let mut disabled = Ws::connect(&app, &second).await;
    let out = app
        .gql(Some(&first), "mutation { signOut }", json!({}))
        .await;
    assert_eq!(out["data"]["signOut"], true, "{out}");
    assert_eq!(signed_out.closed().await.0, 4403);
    // The other session's connection is left open by a sign-out that is not its own.
    assert!(
        disabled
            .frame_within(Duration::from_millis(500))
            .await
            .is_none(),
        "the other session's connection was closed"
    );
    let id = app
        .gql(Some(&second), "{ currentUser { id } }", json!({}))
        .await["data"]["currentUser"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    mutate(
        &app,
        "mutation($id: ID!) { disableUser(id: $id) { error } }",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(disabled.closed().await.0, 4403);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn disabling_a_user_or_changing_their_password_closes_their_subscriptions(
    #[case] engine: Engine,
) {
    let app = spawn!(engine);
    let email = app.user("practitioner", "pat@example.com").await;
    let first = app.sign_in(&email, PASSWORD).await;
    let second = app.sign_in(&email, PASSWORD).await;
    app.patient("Seed", "Zero").await;
    let start = settled(&app, &app.admin_token, None, 1).await;
    let mut one = Ws::connect(&app, &first).await;
    one.follow("s", json!({ "after": id_of(&start[0]) })).await;
    let mut two = Ws::connect(&app, &second).await;
    two.follow("s", json!({ "after": id_of(&start[0]) })).await;
    let ann = app.patient("Ann", "Lee").await;
    assert_eq!(what(&one.event().await), created(&ann));
    assert_eq!(what(&two.event().await), created(&ann));

    // A changed password ends the other session's subscription; this one's goes on.
    let changed = app
        .gql(
            Some(&first),
            "mutation { changePassword(currentPassword: \"correct horse battery\", newPassword: \"a brand new one\") { error } }",
            json!({}),
        )
        .await;
    assert!(
        changed["data"]["changePassword"]["error"].is_null(),
        "{changed}"
    );
    let bob = app.patient("Bob", "Ray").await;
    two.cut_off().await;
    assert_eq!(what(&one.event().await), created(&bob));

    // Disabled: every subscription of theirs ends.
    let id = app
        .gql(Some(&first), "{ currentUser { id } }", json!({}))
        .await["data"]["currentUser"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let disabled = app
        .ok(
            "mutation($id: ID!) { disableUser(id: $id) { error } }",
            json!({ "id": id }),
        )
        .await;
    assert!(disabled["disableUser"]["error"].is_null(), "{disabled}");
    app.patient("Cy", "Ray").await;
    one.cut_off().await;
}

/// A practitioner (a staff user kept to access groups) made with `email`, signed in and
/// following `patient.created` and `patient.updated` live over a websocket: the session's
/// token, the socket, and the probe event that made it live.
async fn practitioner_following_patients(app: &TestApp, email: &str) -> (String, Ws, Value) {
    let email = app.user("practitioner", email).await;
    let session = app.sign_in(&email, PASSWORD).await;
    let mut ws = Ws::connect(app, &session).await;
    ws.follow(
        "s",
        json!({ "types": ["patient.created", "patient.updated"] }),
    )
    .await;
    let live = make_live(&mut ws, app).await;
    (session, ws, live)
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscriber_outside_a_patients_access_groups_gets_none_of_its_events(
    #[case] engine: Engine,
) {
    let app = spawn!(engine);
    let group = crate::record::define(&app, "access_groups", "psychiatry").await;
    let secret = app.patient_in_group("Secret", "Record", &group).await;
    // The patients' events (the group's own creation is an event the outsider may see).
    let (_, mut ws, _) = practitioner_following_patients(&app, "out@example.com").await;
    // A change to the hidden patient, then one to a patient in no group: only the second
    // reaches the outsider.
    mutate(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { occupation: \"x\" }) { error } }",
        json!({ "id": secret }),
    )
    .await;
    let open = app.patient("Open", "Record").await;
    assert_eq!(what(&ws.event().await), created(&open));
}

/// A websocket reads by the access groups its user has now. One following events when they
/// change is closed (4403): the user's change is an event it checks the token again at, and
/// its subscriptions read by the groups they started with. One with nothing running reads by
/// the new groups from its next subscribe. Before, both went on reading by the groups of
/// `connection_init` (the events of patients in a group the user had left, say).
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_websocket_reads_by_its_users_access_groups_now(#[case] engine: Engine) {
    let app = spawn!(engine);
    let oncology = crate::record::define(&app, "access_groups", "oncology").await;
    let psychiatry = crate::record::define(&app, "access_groups", "psychiatry").await;
    let (user, session) = app
        .staff_in_groups("both@example.com", &[&oncology, &psychiatry])
        .await;

    // Following events when the groups change.
    let mut following = Ws::connect(&app, &session).await;
    following
        .follow("s", json!({ "types": ["patient.created"] }))
        .await;
    make_live(&mut following, &app).await;
    app.set_groups(&user, &[&oncology]).await;
    let (code, reason) = following.closed().await;
    assert_eq!(code, 4403, "{reason}");
    assert!(reason.contains("access groups changed"), "{reason}");

    // Connected, with nothing running, when the user joins psychiatry again: the next
    // subscription sees a psychiatry patient's change.
    let secret = app.patient_in_group("Secret", "Record", &psychiatry).await;
    let mut idle = Ws::connect(&app, &session).await;
    idle.still_open(&app).await;
    app.set_groups(&user, &[&oncology, &psychiatry]).await;
    idle.follow("s", json!({ "types": ["patient.updated"] }))
        .await;
    // The subscription is live once a change to a patient in no group reaches it.
    let open = app.patient("Open", "Record").await;
    let touch = "mutation($id: ID!) { updatePatient(id: $id, patientData: { occupation: \"x\" }) { error } }";
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        mutate(&app, touch, json!({ "id": open })).await;
        if idle
            .event_within(Duration::from_millis(500))
            .await
            .is_some()
        {
            break;
        }
        assert!(Instant::now() < until, "the subscription never went live");
    }
    mutate(&app, touch, json!({ "id": secret })).await;
    let event = loop {
        let event = idle.event().await;
        if event["identifiers"]["patientId"] != json!(open) {
            break event;
        }
    };
    assert_eq!(event["identifiers"]["patientId"], json!(secret), "{event}");

    // A connection made after the change goes on when the same groups are given again in
    // another order: the event of the user's change comes before the probe's.
    let mut fresh = Ws::connect(&app, &session).await;
    fresh
        .follow("s", json!({ "types": ["patient.created"] }))
        .await;
    make_live(&mut fresh, &app).await;
    app.set_groups(&user, &[&psychiatry, &oncology]).await;
    make_live(&mut fresh, &app).await;
}

/// Takes `table` away from under the server (renamed), writes an event of `event_type` naming
/// `(column, id)` as another process would, and waits for `ws` to close: its code and reason.
/// The table is put back before this returns.
async fn closed_with_table_away(
    app: &TestApp,
    ws: &mut Ws,
    table: &str,
    event_type: &str,
    (column, id): (&str, &str),
) -> (u16, String) {
    use sqlx::Connection as _;
    let mut outside = sqlx::AnyConnection::connect(&app.database_url)
        .await
        .expect("connect");
    let run = |sql: String| sqlx::query(sqlx::AssertSqlSafe(sql));
    run(format!("ALTER TABLE {table} RENAME TO {table}_away"))
        .execute(&mut outside)
        .await
        .expect("rename");
    run(format!(
        "INSERT INTO events (practice_id, occurred_at, event_type, {column}) \
         VALUES ('{}', {}, '{event_type}', '{id}')",
        app.practice_id,
        chrono::Utc::now().timestamp_millis()
    ))
    .execute(&mut outside)
    .await
    .expect("an event");
    let closed = ws.closed().await;
    run(format!("ALTER TABLE {table}_away RENAME TO {table}"))
        .execute(&mut outside)
        .await
        .expect("rename back");
    closed
}

/// When the read of an event's patient fails (for a subscriber kept to access groups), the
/// event is not passed over without a word: the connection closes (1013: try again later), naming the cursor to resume
/// from, and the subscription resumed there gets the event. The read is made to fail by taking
/// the patients' table away from under the server, and the event written beside it, as another
/// process would.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscriber_whose_patient_check_fails_is_closed_with_its_cursor(#[case] engine: Engine) {
    let app = spawn!(engine);
    let open = app.patient("Open", "Record").await;
    let (session, mut ws, live) = practitioner_following_patients(&app, "kept@example.com").await;

    let (code, reason) = closed_with_table_away(
        &app,
        &mut ws,
        "patients",
        "patient.updated",
        ("patient_id", &open),
    )
    .await;
    assert_eq!(code, 1013, "{reason}");
    let resume = format!("resume with after: {}", id_of(&live));
    assert!(reason.contains(&resume), "{reason}");

    let mut again = Ws::connect(&app, &session).await;
    again
        .follow(
            "s",
            json!({ "after": id_of(&live), "types": ["patient.created", "patient.updated"] }),
        )
        .await;
    let event = again.event().await;
    assert_eq!(event["eventType"], "patient.updated", "{event}");
    assert_eq!(event["identifiers"]["patientId"], json!(open), "{event}");
}

/// When the token cannot be checked again at an event about it (the database could not be
/// read), the connection closes (1013: try again later) rather than going on with a token that
/// may have been revoked: no later event would check it. So does one that runs nothing. The check is made to fail by taking
/// the tokens' table away, and the event written beside it, as another process would.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscriber_whose_token_cannot_be_checked_again_is_closed(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (token_id, token) = api_token(&app, &["patients:read"], None).await;
    let mut ws = Ws::connect(&app, &token).await;
    ws.follow("s", json!({ "types": ["patient.created"] }))
        .await;
    make_live(&mut ws, &app).await;
    // So is a connection that runs nothing, whose guard checks the token at the event.
    let (idle_id, idle_token) = api_token(&app, &["patients:read"], None).await;
    let idle = Ws::connect(&app, &idle_token).await;

    for (token_id, mut ws) in [(token_id, ws), (idle_id, idle)] {
        let (code, reason) = closed_with_table_away(
            &app,
            &mut ws,
            "tokens",
            "token.revoked",
            ("token_id", &token_id),
        )
        .await;
        assert_eq!(code, 1013, "{reason}");
        assert!(reason.contains("could not be checked again"), "{reason}");
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_expiring_token_closes_its_subscription_with_4403(#[case] engine: Engine) {
    let app = spawn!(engine);
    let expires = chrono::Utc::now() + chrono::Duration::seconds(2);
    let expires_at = expires.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let (_, token) = api_token(&app, &["patients:read"], Some(expires_at)).await;
    let mut ws = following(&app, &token).await;

    // Closed once it expires, with nothing in between.
    ws.cut_off().await;
    let early = expires - chrono::Utc::now();
    assert!(
        early <= chrono::Duration::milliseconds(100),
        "closed {early} before the token expired"
    );
}

// ----------------------------------------------------------------------------------------
// 9. Several instances

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_event_through_one_instance_reaches_a_subscriber_of_another(#[case] engine: Engine) {
    let one = spawn!(engine);
    let two = one.another_instance().await;
    let mut ws = Ws::connect(&two, &two.admin_token).await;
    ws.follow("s", json!({})).await;
    // Live (no `after`): only the instances' sharing of events can bring them.
    make_live(&mut ws, &one).await;
    let ann = one.patient("Ann", "Lee").await;
    let vip = one.label("VIP").await;
    let got = ws.events(2).await;
    assert_eq!(
        got.iter().map(what).collect::<Vec<_>>(),
        vec![
            created(&ann),
            ("label.created".into(), named(None, None, Some(&vip)))
        ]
    );
    assert_in_order(&ids(&got));
    // And the other way.
    let bob = two.patient("Bob", "Ray").await;
    assert_eq!(what(&ws.event().await), created(&bob));
    ws.quiet().await;
}

// ----------------------------------------------------------------------------------------
// Filters

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscription_gets_only_the_types_and_patient_it_asks_for(#[case] engine: Engine) {
    let app = spawn!(engine);
    let ann = app.patient("Ann", "Lee").await;
    let bob = app.patient("Bob", "Ray").await;
    let start = settled(&app, &app.admin_token, None, 2).await;
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow(
        "s",
        json!({ "after": id_of(&start[1]), "types": ["patient.updated"], "patient": ann }),
    )
    .await;
    let update = "mutation($id: ID!, $e: String) { updatePatient(id: $id, patientData: { email: $e }) { error } }";
    mutate(&app, update, json!({ "id": bob, "e": "bob@example.com" })).await;
    app.label("VIP").await;
    mutate(&app, update, json!({ "id": ann, "e": "ann@example.com" })).await;
    app.patient("Cy", "Three").await;
    mutate(&app, update, json!({ "id": ann, "e": "ann@example.org" })).await;
    let updated = ("patient.updated".to_string(), named(Some(&ann), None, None));
    let got = ws.events(2).await;
    assert_eq!(
        got.iter().map(what).collect::<Vec<_>>(),
        vec![updated.clone(), updated]
    );
    ws.quiet().await;
}

// ----------------------------------------------------------------------------------------
// A subscriber that falls behind

/// A label taken off `patients` patients at once: `patients + 1` events in one transaction,
/// which the hub hands on in one go (the label's other events come one commit at a time, each
/// an HTTP request apart). Returns the label's id.
async fn burst(app: &TestApp, patients: &[String], title: &str) -> String {
    let label = app.label(title).await;
    for patient in patients {
        add_label(app, patient, &label).await;
    }
    mutate(
        app,
        "mutation($id: ID!) { deleteLabel(id: $id) { error } }",
        json!({ "id": label }),
    )
    .await;
    label
}

/// Falling behind once (a burst larger than the lag allowed) is caught up from the log, in
/// order, with nothing lost; falling behind again and again closes the connection (1008) with
/// the cursor to resume from.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscriber_that_falls_behind_catches_up_then_is_closed(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_subscriber_lag: 8,
            ..test_config()
        }
    );
    let mut patients = Vec::new();
    for i in 0..12 {
        patients.push(app.patient("Burst", &format!("B{i}")).await);
    }
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow(
        "s",
        json!({ "types": ["label.deleted", "patient.label.removed", "patient.created"] }),
    )
    .await;
    make_live(&mut ws, &app).await;

    let label = burst(&app, &patients, "Burst").await;
    let events = ws.events(13).await;
    assert_eq!(
        what(&events[0]),
        ("label.deleted".into(), named(None, None, Some(&label)))
    );
    let removed: HashSet<String> = events[1..]
        .iter()
        .map(|e| {
            assert_eq!(e["eventType"], "patient.label.removed", "{e}");
            e["identifiers"]["patientId"]
                .as_str()
                .expect("patient")
                .to_string()
        })
        .collect();
    assert_eq!(removed, patients.iter().cloned().collect::<HashSet<_>>());
    assert_in_order(&ids(&events));

    // Behind again and again within the minute: too slow, closed, by the fourth time at the
    // latest (the first burst was one; joining right after a quiet spell may have been another).
    let mut closed = None;
    for round in 0..3 {
        burst(&app, &patients, &format!("Again {round}")).await;
        let mut received = 0;
        while received < 13 {
            match ws.frame().await {
                Frame::Message(message) => {
                    assert_eq!(message["type"], "next", "{message}");
                    received += 1;
                }
                Frame::Closed(code, reason) => {
                    closed = Some((code, reason));
                    break;
                }
            }
        }
        if closed.is_some() {
            break;
        }
    }
    let (code, reason) = closed.expect("closed as too slow by the fourth time behind");
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("resume with after"), "{reason}");
}

/// A subscriber without a cursor that falls behind before its first event catches up from
/// where it subscribed (the last event the hub handed on), not from the log's first event:
/// none of the events before it subscribed comes through. So too when the sweep has deleted every event kept (`swept`):
/// it starts at the practice's floor, and is not told its events expired.
#[rstest]
#[case::sqlite(Engine::Sqlite, false)]
#[case::postgres(Engine::Postgres, false)]
#[case::sqlite_swept(Engine::Sqlite, true)]
#[case::postgres_swept(Engine::Postgres, true)]
#[tokio::test]
async fn a_subscriber_behind_before_its_first_event_gets_nothing_older(
    #[case] engine: Engine,
    #[case] swept: bool,
) {
    let retention = if swept {
        Duration::from_secs(1)
    } else {
        test_config().event_retention
    };
    let mut app = spawn!(
        engine,
        ServeConfig {
            max_subscriber_lag: 8,
            event_retention: retention,
            ..test_config()
        }
    );
    let mut patients = Vec::new();
    for i in 0..12 {
        patients.push(app.patient("Burst", &format!("B{i}")).await);
    }
    let label = app.label("Burst").await;
    for patient in &patients {
        add_label(&app, patient, &label).await;
    }
    if swept {
        // Past the retention, the sweep at start deletes every event there is; started again
        // on the empty log, the hub starts at the practice's floor.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        app.restart().await;
        let until = Instant::now() + WAIT;
        while !all_events(&app, &app.admin_token, None).await.0.is_empty() {
            assert!(Instant::now() < until, "the sweep deletes the old events");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        app.restart().await;
    } else {
        // A live subscriber on another connection: once it has its probe, the hub has handed
        // on every event before it, and where a new subscriber starts is after them all.
        let mut probe = Ws::connect(&app, &app.admin_token).await;
        probe
            .follow("p", json!({ "types": ["patient.created"] }))
            .await;
        make_live(&mut probe, &app).await;
    }
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow(
        "s",
        json!({ "types": ["patient.created", "patient.label.added", "patient.label.removed"] }),
    )
    .await;
    // No event may make it live (any event of the practice moves where it stands): a pause
    // for the subscribe message to be handled instead.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Thirteen events in one transaction: more than it may fall behind.
    mutate(
        &app,
        "mutation($id: ID!) { deleteLabel(id: $id) { error } }",
        json!({ "id": label }),
    )
    .await;
    let events = ws.events(12).await;
    for event in &events {
        assert_eq!(event["eventType"], "patient.label.removed", "{event}");
    }
    assert_in_order(&ids(&events));
    let marker = app.patient("After", "Burst").await;
    let next = ws.event().await;
    assert_eq!(next["identifiers"]["patientId"], json!(marker), "{next}");
}

// ----------------------------------------------------------------------------------------
// Server-Sent Events, through the npm graphql-sse client

/// The npm graphql-sse client (tests/realtime/sse.mjs) on one operation.
async fn sse(app: &TestApp, token: &str, query: &str, variables: Value) -> Option<NodeSubscriber> {
    let dir: PathBuf = node_clients()?;
    let request = json!({ "query": query, "variables": variables }).to_string();
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join("sse.mjs"))
        .args([app.url.as_str(), token, request.as_str()])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node tests/realtime/sse.mjs");
    let stdout = child.stdout.take().expect("stdout");
    Some(NodeSubscriber {
        _child: child,
        lines: BufReader::new(stdout).lines(),
    })
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn subscriptions_and_queries_run_over_server_sent_events(#[case] engine: Engine) {
    let app = spawn!(engine);
    // A query: one result, then complete.
    let Some(mut query) = sse(
        &app,
        &app.admin_token,
        "{ currentPractice { id } }",
        json!({}),
    )
    .await
    else {
        return;
    };
    assert_eq!(
        query.line_within(WAIT).await,
        Some(json!({ "connected": true }))
    );
    let result = query.line_within(WAIT).await.expect("a result");
    assert_eq!(
        result["next"]["data"]["currentPractice"]["id"],
        json!(app.practice_id)
    );
    assert_eq!(
        query.line_within(WAIT).await,
        Some(json!({ "complete": true }))
    );

    // A document that does not fit the schema: its errors come through the stream.
    let mut invalid = sse(&app, &app.admin_token, "subscription { nope }", json!({}))
        .await
        .expect("node");
    assert_eq!(
        invalid.line_within(WAIT).await,
        Some(json!({ "connected": true }))
    );
    let result = invalid.line_within(WAIT).await.expect("a result");
    assert_eq!(
        result["next"]["errors"][0]["extensions"]["code"], "GRAPHQL_VALIDATION_FAILED",
        "{result}"
    );
    assert_eq!(
        invalid.line_within(WAIT).await,
        Some(json!({ "complete": true }))
    );

    // A token that does not work is refused before any stream starts, with its status.
    let mut refused = sse(
        &app,
        "pa_not_a_token",
        "{ currentPractice { id } }",
        json!({}),
    )
    .await
    .expect("node");
    let failed = refused.line_within(WAIT).await.expect("a failure");
    assert_eq!(failed["status"], 401, "{failed}");

    // A subscription, resumed after a cursor, then live; revoking its token ends it with a
    // last result that says why.
    let (token_id, token) = api_token(&app, &["patients:read"], None).await;
    let seed = app.patient("Seed", "Zero").await;
    let start = settled(&app, &app.admin_token, None, 1).await;
    let kept = app.patient("Kept", "One").await;
    let mut subscriber = sse(
        &app,
        &token,
        &subscription(),
        json!({ "after": id_of(&start[0]) }),
    )
    .await
    .expect("node");
    assert_eq!(
        subscriber.line_within(WAIT).await,
        Some(json!({ "connected": true }))
    );
    assert_eq!(what(&subscriber.event().await), created(&kept));
    let live = app.patient("Live", "Two").await;
    assert_eq!(what(&subscriber.event().await), created(&live));
    mutate(
        &app,
        "mutation($id: ID!) { revokeApiToken(id: $id) { error } }",
        json!({ "id": token_id }),
    )
    .await;
    app.patient("After", "Three").await;
    let last = subscriber.line_within(WAIT).await.expect("a last result");
    assert_eq!(
        last["next"]["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
        "{last}"
    );
    assert_eq!(
        subscriber.line_within(WAIT).await,
        Some(json!({ "complete": true }))
    );
    assert_ne!(seed, kept);
}

/// A browser's `EventSource` (the npm eventsource package, which parses a stream as the HTML
/// specification says) is told `complete`: the event carries the empty `data` field the
/// protocol asks for. Without it an EventSource dispatches no event, sees the stream end, and
/// connects again, running the operation once more.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_event_source_is_told_complete(#[case] engine: Engine) {
    let app = spawn!(engine);
    let Some(dir) = node_clients() else {
        return;
    };
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join("eventsource.mjs"))
        .args([
            app.url.as_str(),
            app.admin_token.as_str(),
            "{ currentPractice { id } }",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node tests/realtime/eventsource.mjs");
    let stdout = child.stdout.take().expect("stdout");
    let mut source = NodeSubscriber {
        _child: child,
        lines: BufReader::new(stdout).lines(),
    };
    let result = source.line_within(WAIT).await.expect("a result");
    assert_eq!(
        result["next"]["data"]["currentPractice"]["id"],
        json!(app.practice_id),
        "{result}"
    );
    assert_eq!(
        source.line_within(WAIT).await,
        Some(json!({ "complete": "" })),
        "the complete event, dispatched with its empty data"
    );
}

/// A subscription over Server-Sent Events whose connection reaches its age ends with a last
/// result that says to subscribe again, then `complete`, rather than being cut off.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_event_stream_ends_with_a_word_when_its_connection_ages(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_connection_age: Duration::from_secs(2),
            ..test_config()
        }
    );
    let Some(mut subscriber) = sse(&app, &app.admin_token, &subscription(), json!({})).await else {
        return;
    };
    assert_eq!(
        subscriber.line_within(WAIT).await,
        Some(json!({ "connected": true }))
    );
    let last = subscriber
        .line_within(Duration::from_secs(6))
        .await
        .expect("a last result");
    assert_eq!(
        last["next"]["errors"][0]["extensions"]["code"], "SERVICE_UNAVAILABLE",
        "{last}"
    );
    assert_eq!(
        subscriber.line_within(WAIT).await,
        Some(json!({ "complete": true }))
    );
}

/// A subscription sent as a plain JSON request is refused with the ways to run one.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_subscription_over_plain_http_is_refused(#[case] engine: Engine) {
    let app = spawn!(engine);
    let raw = app
        .post_json(
            Some(&app.admin_token),
            &json!({ "query": "subscription { events { id } } " }),
        )
        .await;
    assert_eq!(raw.status, reqwest::StatusCode::BAD_REQUEST, "{}", raw.body);
    assert_eq!(raw.code(), "BAD_REQUEST");
    assert!(
        raw.body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("text/event-stream") && m.contains("websocket")),
        "{}",
        raw.body
    );
}

// ----------------------------------------------------------------------------------------
// Retention

/// Events older than the retention are deleted (the sweep runs when the server starts, then
/// every ten minutes); a cursor from before them is CURSOR_EXPIRED, in the feed and for a
/// subscription, and the events after them are still there.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn events_past_the_retention_are_deleted_and_their_cursors_expire(#[case] engine: Engine) {
    let mut app = spawn!(
        engine,
        ServeConfig {
            event_retention: Duration::from_secs(1),
            ..test_config()
        }
    );
    app.patient("Old", "One").await;
    app.patient("Old", "Two").await;
    let old = settled(&app, &app.admin_token, None, 2).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    app.restart().await;
    let fresh = app.patient("New", "Three").await;

    // The sweep at start deletes the two old events; the new one stays.
    let until = Instant::now() + WAIT;
    let kept = loop {
        let (kept, _) = all_events(&app, &app.admin_token, None).await;
        if kept.len() == 1 || Instant::now() > until {
            break kept;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        kept.iter().map(what).collect::<Vec<_>>(),
        vec![created(&fresh)]
    );

    // A cursor before what was deleted has missed events: expired.
    let body = app
        .gql(
            Some(&app.admin_token),
            &feed_query(),
            json!({ "after": id_of(&old[0]) }),
        )
        .await;
    assert_eq!(error_code(&body), "CURSOR_EXPIRED", "{body}");
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow("s", json!({ "after": id_of(&old[0]) })).await;
    let errors = ws.error("s").await;
    assert_eq!(
        errors[0]["extensions"]["code"], "CURSOR_EXPIRED",
        "{errors}"
    );
    // The last deleted event's own id missed nothing: it resumes.
    let body = app
        .gql(
            Some(&app.admin_token),
            &feed_query(),
            json!({ "after": id_of(&old[1]) }),
        )
        .await;
    assert_eq!(error_code(&body), "", "{body}");
}

/// The sweep takes from a cursor only the events of the types its reader follows: a client
/// that resumes after the last event of a rare type it saw, older than the retention, has
/// missed nothing when what was swept since is of other types, and carries on, in the feed
/// and in a subscription, whether it names its types or its token reads no others. (It was
/// CURSOR_EXPIRED: a subscriber to `label.*`, told of no change for a week, had to start
/// again.) A reader of every type still has missed the others.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_cursor_expires_only_for_the_types_swept_after_it(#[case] engine: Engine) {
    let mut app = spawn!(
        engine,
        ServeConfig {
            event_retention: Duration::from_secs(1),
            ..test_config()
        }
    );
    app.label("Older").await;
    app.label("Old").await;
    app.patient("Old", "One").await;
    let old = settled(&app, &app.admin_token, None, 3).await;
    assert_eq!(old[1]["eventType"], "label.created", "{old:?}");
    let before_last_label = id_of(&old[0]);
    let last_label = id_of(&old[1]);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    app.restart().await;
    let fresh = app.label("New").await;
    // Until the sweep at start has run and the new label's event is handed out (on
    // PostgreSQL, not before every transaction of the server older than it has ended, other
    // tests' included: the log has only it then, not none).
    let until = Instant::now() + WAIT;
    while all_events(&app, &app.admin_token, None).await.0.len() != 1 {
        assert!(
            Instant::now() < until,
            "the sweep at start did not run, or the new event was not handed out"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let label_types = json!(["label.created", "label.updated", "label.deleted"]);
    let fresh_label = ("label.created".to_string(), named(None, None, Some(&fresh)));

    // The patient's event after the cursor is gone: a reader of every type missed it. So is
    // the last label after the one before it: a reader of labels missed that.
    let body = feed(&app, &app.admin_token, json!({ "after": last_label })).await;
    assert_eq!(error_code(&body), "CURSOR_EXPIRED", "{body}");
    let body = feed(
        &app,
        &app.admin_token,
        json!({ "after": before_last_label, "types": label_types }),
    )
    .await;
    assert_eq!(error_code(&body), "CURSOR_EXPIRED", "{body}");
    // A reader of labels missed nothing, named types or not.
    let labels = app.token(&["labels:read"]).await;
    for (token, types) in [
        (&app.admin_token, label_types.clone()),
        (&labels, Value::Null),
    ] {
        let body = feed(&app, token, json!({ "after": last_label, "types": types })).await;
        assert_eq!(error_code(&body), "", "{body}");
        let events = body["data"]["events"]["data"].as_array().expect("events");
        assert_eq!(
            events.iter().map(what).collect::<Vec<_>>(),
            vec![fresh_label.clone()],
            "{body}"
        );
    }
    for (token, types) in [
        (&app.admin_token, label_types.clone()),
        (&labels, Value::Null),
    ] {
        let mut ws = Ws::connect(&app, token).await;
        ws.follow("s", json!({ "after": last_label, "types": types }))
            .await;
        assert_eq!(what(&ws.event().await), fresh_label);
        ws.close().await;
    }
    let mut ws = Ws::connect(&app, &app.admin_token).await;
    ws.follow("s", json!({ "after": last_label })).await;
    let errors = ws.error("s").await;
    assert_eq!(
        errors[0]["extensions"]["code"], "CURSOR_EXPIRED",
        "{errors}"
    );
}

/// A feed that reaches the end of the log hands out where the log ended as its cursor, past
/// the events the caller does not see: a client polling for a rare type keeps a cursor as
/// young as its last poll, and the sweep of what it passed over does not expire it (it did:
/// the cursor stayed at the last event of its type, and a week after it every poll was
/// CURSOR_EXPIRED). A cursor past the end of the log, as one kept from before the database was
/// restored from a backup, is CURSOR_EXPIRED, in the feed and for a subscription, where it
/// waited for events the log had lost.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_feed_at_the_end_passes_over_what_it_does_not_show(#[case] engine: Engine) {
    let app = spawn!(engine);
    let admin = &app.admin_token;
    let labels = json!(["label.created"]);
    app.label("VIP").await;
    let first = settled(&app, admin, None, 1).await;
    let polled = page(&app, admin, json!({ "types": labels })).await;
    assert_eq!(polled["cursor"], first[0]["id"], "{polled}");
    for name in ["One", "Two", "Three"] {
        app.patient("Quiet", name).await;
    }
    let all = settled(&app, admin, None, 4).await;
    let last = &all[3]["id"];

    // Polled again: no label, and the cursor at the log's end, past the patients.
    let again = page(
        &app,
        admin,
        json!({ "types": labels, "after": polled["cursor"] }),
    )
    .await;
    assert_eq!(
        again,
        json!({ "data": [], "cursor": last, "hasMore": false }),
        "{all:?}"
    );
    // A page cut by its limit ends at its last event, as before.
    let cut = page(&app, admin, json!({ "limit": 2 })).await;
    assert_eq!(
        (&cut["cursor"], &cut["hasMore"]),
        (&all[1]["id"], &json!(true))
    );

    // Everything so far swept away: the cursor polled last missed no label and reads on;
    // so does the label's own, as no label after it was swept (only patients, which a
    // reader of every type missed: expired for it).
    tokio::time::sleep(Duration::from_millis(5)).await;
    let now = chrono::Utc::now().timestamp_millis();
    assert_eq!(app.store.forget_events(now, 1000).await.expect("sweep"), 4);
    let read_on = page(
        &app,
        admin,
        json!({ "types": labels, "after": again["cursor"] }),
    )
    .await;
    assert_eq!(read_on["data"], json!([]), "{read_on}");
    assert_eq!(read_on["cursor"], *last, "at the floor, nothing after it");
    let body = feed(
        &app,
        admin,
        json!({ "types": labels, "after": polled["cursor"] }),
    )
    .await;
    assert_eq!(body["data"]["events"]["data"], json!([]), "{body}");
    let body = feed(&app, admin, json!({ "after": polled["cursor"] })).await;
    assert_eq!(error_code(&body), "CURSOR_EXPIRED", "{body}");
    let label = app.label("Allergy").await;
    let next = settled(&app, admin, again["cursor"].as_str(), 1).await;
    assert_eq!(next[0]["identifiers"]["labelId"], json!(label), "{next:?}");

    // A practitioner kept to an access group passes over the events of patients outside it,
    // which it does not see, to the end of the log.
    let oncology = crate::record::define(&app, "access_groups", "oncology").await;
    let (_, session) = app.staff_in_groups("onc@example.com", &[&oncology]).await;
    let seen = app.patient_in_group("Seen", "Patient", &oncology).await;
    let created_ones = json!(["patient.created"]);
    let mine = page_until(
        &app,
        &session,
        json!({ "types": created_ones, "after": again["cursor"] }),
        |page| {
            page["data"]
                .as_array()
                .is_some_and(|d| d.iter().any(|e| what(e) == created(&seen)))
        },
    )
    .await;
    let hidden_group = crate::record::define(&app, "access_groups", "hidden").await;
    let hidden = app
        .patient_in_group("Hidden", "Patient", &hidden_group)
        .await;
    let log = page_until(&app, admin, json!({ "after": mine["cursor"] }), |page| {
        page["data"]
            .as_array()
            .is_some_and(|d| d.iter().any(|e| what(e) == created(&hidden)))
    })
    .await;
    assert_ne!(log["cursor"], mine["cursor"], "{log}");
    let passed = page(
        &app,
        &session,
        json!({ "types": created_ones, "after": mine["cursor"] }),
    )
    .await;
    assert_eq!(
        passed,
        json!({ "data": [], "cursor": log["cursor"], "hasMore": false }),
        "{log}"
    );

    // Past the end of the log: expired, in the feed and for a subscription.
    let beyond = "7fffffffffffffff7fffffffffffffff";
    let body = feed(&app, admin, json!({ "after": beyond })).await;
    assert_eq!(error_code(&body), "CURSOR_EXPIRED", "{body}");
    assert!(error_message(&body).contains("past the end"), "{body}");
    let mut ws = Ws::connect(&app, admin).await;
    ws.follow("s", json!({ "after": beyond })).await;
    let errors = ws.error("s").await;
    assert_eq!(
        errors[0]["extensions"]["code"], "CURSOR_EXPIRED",
        "{errors}"
    );
}

/// A PostgreSQL database restored into another server (`pg_restore`) holds events of the old
/// server's transactions, whose ids the new one's do not reach for a long while: the feed did
/// not show them (it shows the events of transactions older than the oldest running), and the
/// new events came before them. At start they are put before the new events, in order; a
/// cursor from before the restore is past the end of the log, and CURSOR_EXPIRED. (Restored
/// here by moving the log's transaction ids far ahead, as another server's would be.)
#[tokio::test]
async fn a_restored_event_log_reads_on_with_its_new_events() {
    let Some(mut app) = TestApp::spawn_with(Engine::Postgres, test_config()).await else {
        return;
    };
    let admin = app.admin_token.clone();
    app.patient("Old", "One").await;
    app.patient("Old", "Two").await;
    let old = settled(&app, &admin, None, 2).await;
    let outside = sqlx::PgPool::connect(&app.database_url)
        .await
        .expect("connect");
    let ahead = 1_000_000_000_000_i64;
    sqlx::query("UPDATE events SET tx_id = tx_id + $1")
        .bind(ahead)
        .execute(&outside)
        .await
        .expect("restore");
    let (tx, id): (i64, i64) =
        sqlx::query_as("SELECT tx_id, id FROM events ORDER BY tx_id DESC, id DESC LIMIT 1")
            .fetch_one(&outside)
            .await
            .expect("the last event");
    let before_restore = format!("{tx:016x}{id:016x}");
    outside.close().await;
    app.restart().await;

    let mut ws = Ws::connect(&app, &admin).await;
    ws.follow("s", json!({})).await;
    let new = app.patient("New", "Three").await;
    assert_eq!(what(&ws.event().await), created(&new));
    let all = settled(&app, &admin, None, 3).await;
    let names: Vec<(String, Value)> = all.iter().map(what).collect();
    assert_eq!(
        names[..2],
        old.iter().map(what).collect::<Vec<_>>()[..],
        "the restored events first, in order"
    );
    assert_eq!(names[2], created(&new));
    assert_in_order(&ids(&all));
    let body = feed(&app, &admin, json!({ "after": before_restore })).await;
    assert_eq!(error_code(&body), "CURSOR_EXPIRED", "{body}");
}

/// The sweep deletes old events a batch at a time, the oldest first, and leaves the rest:
/// after each batch the feed starts after the last event it deleted, and a cursor before that
/// one has expired. With nothing old it deletes nothing and sets no floor.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_sweep_deletes_old_events_oldest_first_a_batch_at_a_time(#[case] engine: Engine) {
    let app = spawn!(engine);
    for name in ["One", "Two", "Three"] {
        app.patient("Old", name).await;
    }
    let old = settled(&app, &app.admin_token, None, 3).await;
    let expired = |after: String| {
        let app = &app;
        async move {
            let body = app
                .gql(
                    Some(&app.admin_token),
                    &feed_query(),
                    json!({ "after": after }),
                )
                .await;
            error_code(&body) == "CURSOR_EXPIRED"
        }
    };

    // Nothing is older than a day ago: nothing goes, and every cursor still reads.
    let day_ago = chrono::Utc::now().timestamp_millis() - 24 * 3600 * 1000;
    assert_eq!(
        app.store.forget_events(day_ago, 1000).await.expect("sweep"),
        0
    );
    assert!(!expired(id_of(&old[0])).await);

    // Everything so far is older than a moment from now: one event a batch, in order.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let now = chrono::Utc::now().timestamp_millis();
    for (n, gone) in old.iter().enumerate().take(2) {
        assert_eq!(app.store.forget_events(now, 1).await.expect("sweep"), 1);
        let (kept, _) = all_events(&app, &app.admin_token, None).await;
        assert_eq!(ids(&kept), ids(&old[n + 1..]), "after batch {n}");
        // The last event deleted is the floor: a cursor at it missed nothing, one before it
        // did.
        assert!(!expired(id_of(gone)).await, "batch {n}");
        if n > 0 {
            assert!(expired(id_of(&old[n - 1])).await, "batch {n}");
        }
    }
    // The last batch is short: what is left is deleted, and the sweep is done.
    assert_eq!(app.store.forget_events(now, 1000).await.expect("sweep"), 1);
    assert_eq!(app.store.forget_events(now, 1000).await.expect("sweep"), 0);
    let (kept, _) = all_events(&app, &app.admin_token, None).await;
    assert!(kept.is_empty(), "{kept:?}");
    assert!(expired(id_of(&old[1])).await);
    assert!(!expired(id_of(&old[2])).await);
}
