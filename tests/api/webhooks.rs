//! Webhooks, end to end: the operations and their rules, and deliveries to a receiver on
//! loopback whose signature check is the npm `standardwebhooks` package
//! (`tests/realtime/receiver.mjs`), not our code: the signed body, retries on the schedule,
//! `Retry-After`, 410 pausing, secret rotation, redelivery, a process killed right after a
//! commit, and two instances delivering each event once.

use std::process::Stdio;
use std::time::{Duration, Instant};

use practice_api::config::{RetrySchedule, ServeConfig};
use rstest::rstest;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::helpers::{
    Engine, TestApp, error_code, hold_rows, node_clients, test_config, waits_on_a_lock,
};
use crate::spawn;

/// A webhook receiver on loopback (`tests/realtime/receiver.mjs`).
struct Receiver {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    url: String,
}

/// `let receiver = receiver!();`: a receiver, or an early return where node is missing on a
/// laptop (with CI=true it panics instead).
macro_rules! receiver {
    () => {
        match Receiver::start().await {
            Some(receiver) => receiver,
            None => return,
        }
    };
}

impl Receiver {
    async fn start() -> Option<Receiver> {
        let dir = node_clients()?;
        let mut child = tokio::process::Command::new("node")
            .arg(dir.join("receiver.mjs"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the receiver");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut receiver = Receiver {
            _child: child,
            stdin,
            lines,
            url: String::new(),
        };
        let first = receiver
            .line(Duration::from_secs(10))
            .await
            .expect("listening");
        receiver.url = first["listening"].as_str().expect("url").to_string();
        Some(receiver)
    }

    async fn line(&mut self, within: Duration) -> Option<Value> {
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .ok()?
            .expect("read the receiver")?;
        Some(serde_json::from_str(&line).expect("a JSON line"))
    }

    /// Tells the receiver something, and waits until it has taken it.
    async fn tell(&mut self, command: Value) {
        let line = format!("{command}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("tell the receiver");
        let ok = self.line(Duration::from_secs(10)).await.expect("ok");
        assert!(ok.get("ok").is_some(), "{ok}");
    }

    /// The secrets whose signatures it checks.
    async fn secrets(&mut self, secrets: &[&str]) {
        self.tell(json!({ "secrets": secrets })).await;
    }

    /// The statuses it answers with, in turn, before going back to 200.
    async fn answer(&mut self, statuses: &[u16]) {
        self.tell(json!({ "answer": statuses })).await;
    }

    /// The next request it got, within `within`.
    async fn next(&mut self, within: Duration) -> Option<Value> {
        let line = self.line(within).await?;
        assert!(line.get("body").is_some(), "not a request: {line}");
        Some(line)
    }

    /// The next request, which must come within 10 s.
    async fn expect(&mut self) -> Value {
        self.next(Duration::from_secs(10))
            .await
            .expect("a delivery within 10 s")
    }

    /// Asserts that nothing comes within `within`.
    async fn expect_nothing(&mut self, within: Duration) {
        if let Some(request) = self.next(within).await {
            panic!("nothing was due, but got {request}");
        }
    }
}

/// A receiver on loopback that takes connections and never answers. Each connection is
/// handed over in turn ([`Silent::connected`]) and stays open while it is kept, or while it
/// waits to be handed over; none after the receiver is dropped.
struct Silent {
    url: String,
    connections: tokio::sync::mpsc::UnboundedReceiver<tokio::net::TcpStream>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Silent {
    async fn start() -> Silent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen");
        let url = format!("http://{}/hooks", listener.local_addr().expect("address"));
        let (connected, connections) = tokio::sync::mpsc::unbounded_channel();
        let accepting = tokio::spawn(async move {
            while let Ok((connection, _)) = listener.accept().await {
                let _ = connected.send(connection);
            }
        });
        Silent {
            url,
            connections,
            accepting,
        }
    }

    /// The next connection an attempt makes, within `within`.
    async fn next(&mut self, within: Duration) -> Option<tokio::net::TcpStream> {
        tokio::time::timeout(within, self.connections.recv())
            .await
            .ok()
            .flatten()
    }

    /// The next connection an attempt makes, which must come within 10 s.
    async fn connected(&mut self) -> tokio::net::TcpStream {
        self.next(Duration::from_secs(10))
            .await
            .expect("the attempt connects")
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Pauses (`p: true`) or resumes (`p: false`) subscription `id`.
const PAUSE: &str = "mutation($id: ID!, $p: Boolean) { updateWebhook(id: $id, input: { deliveryPaused: $p }) { data { deliveryPaused } error } }";

/// A subscription of label.created to `silent` with one delivery on its way: its attempt
/// connected and never answered. The subscription's id, and the attempt's connection (the
/// attempt ends when it is dropped).
async fn one_on_its_way(app: &TestApp, silent: &mut Silent) -> (String, tokio::net::TcpStream) {
    let hook = subscribe(app, &silent.url, &["label.created"]).await;
    let id = hook["id"].as_str().expect("id").to_string();
    app.label("On its way").await;
    (id, silent.connected().await)
}

/// What a request's body says.
fn body(request: &Value) -> Value {
    serde_json::from_str(request["body"].as_str().expect("body")).expect("a JSON body")
}

/// The settings webhook tests run with: loopback allowed, and a schedule of seconds.
fn config(schedule: &[u64]) -> ServeConfig {
    ServeConfig {
        webhook_allow_private: true,
        webhook_retry_schedule: RetrySchedule(
            schedule
                .iter()
                .map(|ms| Duration::from_millis(*ms))
                .collect(),
        ),
        ..test_config()
    }
}

const FIELDS: &str = "id secret url label eventTypes headers { key value } version deleted \
                      deliveryPaused createdAt updatedAt";

/// Makes a subscription; returns it.
async fn subscribe(app: &TestApp, url: &str, types: &[&str]) -> Value {
    let query = format!(
        "mutation($i: CreateWebhookInput!) {{ createWebhook(input: $i) {{ data {{ {FIELDS} }} error }} }}"
    );
    let data = app
        .ok(
            &query,
            json!({ "i": { "url": url, "eventTypes": types, "label": "test" } }),
        )
        .await;
    assert_eq!(data["createWebhook"]["error"], Value::Null, "{data}");
    data["createWebhook"]["data"].clone()
}

async fn deliveries(app: &TestApp, subscription: &str) -> Vec<Value> {
    let data = app
        .ok(
            "query($s: ID!) { webhookDeliveries(subscriptionId: $s) { data { id eventId eventType attempt status responseStatus error at nextAttemptAt attempts { attempt responseStatus error } } } }",
            json!({ "s": subscription }),
        )
        .await;
    data["webhookDeliveries"]["data"]
        .as_array()
        .expect("deliveries")
        .clone()
}

/// The numbers of the attempts a delivery lists.
fn attempt_numbers(delivery: &Value) -> Vec<i64> {
    delivery["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| a["attempt"].as_i64().expect("attempt"))
        .collect()
}

/// Waits until the subscription's latest delivery is as `wanted` says (`what` names it for
/// the failure's message); returns it.
async fn wait_for(
    app: &TestApp,
    subscription: &str,
    what: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let list = deliveries(app, subscription).await;
        if let Some(first) = list.first()
            && wanted(first)
        {
            return first.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no delivery became {what}: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the subscription's latest delivery has this status.
async fn wait_for_status(app: &TestApp, subscription: &str, status: &str) -> Value {
    wait_for(app, subscription, status, |d| d["status"] == status).await
}

/// Waits until the subscription's latest delivery has made this many attempts (its last one
/// recorded).
async fn wait_for_attempt(app: &TestApp, subscription: &str, attempt: i64) -> Value {
    wait_for(app, subscription, &format!("attempt {attempt}"), |d| {
        d["attempt"] == attempt
    })
    .await
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_delivery_is_signed_thin_and_names_its_event(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0]));
    let hook = subscribe(&app, &receiver.url, &["patient.created", "label.created"]).await;
    let secret = hook["secret"].as_str().expect("secret");
    assert!(secret.starts_with("whsec_"), "{hook}");
    assert_eq!(hook["version"], "1");
    receiver.secrets(&[secret]).await;

    let patient = app.patient("Ada", "Lovelace").await;
    let request = receiver.expect().await;
    assert_eq!(request["verified"], json!([0]), "{request}");
    assert_eq!(request["method"], "POST");
    assert_eq!(request["headers"]["content-type"], "application/json");
    let sent = body(&request);
    let feed = app
        .settled_events(
            &app.admin_token,
            "{ events { data { id eventType } } }",
            json!({}),
            |events| !events.is_empty(),
        )
        .await;
    let event = &feed[0];
    // Thin: the ids only, optional ones left out rather than null.
    assert_eq!(
        sent,
        json!({
            "subscriptionId": hook["id"],
            "eventId": event["id"],
            "eventType": "patient.created",
            "identifiers": { "patientId": patient },
        })
    );
    let log = wait_for_status(&app, hook["id"].as_str().expect("id"), "delivered").await;
    assert_eq!(log["id"], request["id"], "webhook-id is the delivery's id");
    assert_eq!(log["eventId"], event["id"]);
    assert_eq!(log["responseStatus"], 200);
    assert_eq!(log["attempt"], 1);

    // A type it does not take is not sent.
    let _ = app
        .ok(
            "mutation($id: ID!) { archivePatient(id: $id) { error } }",
            json!({ "id": patient }),
        )
        .await;
    app.label("VIP").await;
    let request = receiver.expect().await;
    assert_eq!(body(&request)["eventType"], "label.created");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_failed_delivery_is_retried_on_the_schedule(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 1000, 1000]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    receiver.answer(&[500]).await;
    app.label("VIP").await;
    let first = receiver.expect().await;
    assert_eq!(first["status"], 500);
    let second = receiver.expect().await;
    assert_eq!(second["status"], 200);
    assert_eq!(
        first["id"], second["id"],
        "the same webhook-id on every attempt"
    );
    assert_eq!(
        body(&first),
        body(&second),
        "the same body on every attempt"
    );
    let waited = second["at"].as_i64().expect("at") - first["at"].as_i64().expect("at");
    assert!(
        (850..3000).contains(&waited),
        "the retry came {waited} ms after, on a schedule of 1 s with a tenth of jitter"
    );
    assert_eq!(second["verified"], json!([0]), "{second}");
    let log = wait_for_status(&app, hook["id"].as_str().expect("id"), "delivered").await;
    assert_eq!(log["attempt"], 2);
    assert_eq!(
        log["attempts"],
        json!([
            { "attempt": 1, "responseStatus": 500, "error": "the receiver answered 500" },
            { "attempt": 2, "responseStatus": 200, "error": null },
        ])
    );

    // Every attempt failing: the schedule runs out and the delivery has failed.
    receiver.answer(&[503, 503, 503]).await;
    app.label("Allergy").await;
    for _ in 0..3 {
        assert_eq!(receiver.expect().await["status"], 503);
    }
    let failed = wait_for_status(&app, hook["id"].as_str().expect("id"), "failed").await;
    assert_eq!(failed["attempt"], 3);
    assert_eq!(failed["nextAttemptAt"], Value::Null);
    receiver.expect_nothing(Duration::from_millis(1500)).await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn retry_after_is_honoured(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 100]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    receiver.tell(json!({ "retryAfter": "2" })).await;
    receiver.answer(&[429]).await;
    app.label("VIP").await;
    let first = receiver.expect().await;
    let second = receiver.expect().await;
    let waited = second["at"].as_i64().expect("at") - first["at"].as_i64().expect("at");
    assert!(
        waited >= 1900,
        "Retry-After: 2 asked for 2 s, the schedule for 100 ms; it came after {waited} ms"
    );

    // The same as an HTTP date, three seconds ahead.
    let at = chrono::Utc::now() + chrono::Duration::seconds(3);
    let date = at.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    receiver.tell(json!({ "retryAfter": date })).await;
    receiver.answer(&[503]).await;
    app.label("Dated").await;
    let first = receiver.expect().await;
    assert_eq!(first["status"], 503);
    let second = receiver.expect().await;
    let waited = second["at"].as_i64().expect("at") - first["at"].as_i64().expect("at");
    assert!(
        waited >= 1500,
        "Retry-After: {date} asked for about 3 s; it came after {waited} ms"
    );

    // A Retry-After is the receiver's: every delivery of its subscription waits for it, not
    // only the one it answered.
    receiver.tell(json!({ "retryAfter": "3" })).await;
    receiver.answer(&[429]).await;
    app.label("Asked to wait").await;
    let refused = receiver.expect().await;
    assert_eq!(refused["status"], 429);
    let hook_id = hook["id"].as_str().expect("id");
    let attempted = wait_for_attempt(&app, hook_id, 1).await;
    // The hold is shown on the subscription while it stands: three seconds and up to a tenth
    // more from the attempt, as the server recorded it.
    let ms = |value: &Value| {
        chrono::DateTime::parse_from_rfc3339(value.as_str().expect("a date"))
            .expect("a date")
            .timestamp_millis()
    };
    let held = "query($id: ID!) { webhook(id: $id) { deliveryHeldUntil } }";
    let shown = app.ok(held, json!({ "id": hook_id })).await;
    assert!(
        shown["webhook"]["deliveryHeldUntil"].is_string(),
        "the hold is shown: {shown}"
    );
    let ahead = ms(&shown["webhook"]["deliveryHeldUntil"]) - ms(&attempted["at"]);
    assert!(
        (2800..=3400).contains(&ahead),
        "Retry-After: 3 holds for 3 s and up to a tenth more; the hold ends {ahead} ms after the attempt"
    );
    app.label("Made meanwhile").await;
    let mut types = Vec::new();
    for _ in 0..2 {
        let request = receiver.expect().await;
        let waited = request["at"].as_i64().expect("at") - refused["at"].as_i64().expect("at");
        assert!(
            waited >= 2900,
            "Retry-After: 3 held the subscription for 3 s; a delivery came after {waited} ms"
        );
        types.push(body(&request)["identifiers"]["labelId"].clone());
    }
    types.dedup();
    assert_eq!(
        types.len(),
        2,
        "the retry and the other delivery: {types:?}"
    );
    let shown = app.ok(held, json!({ "id": hook_id })).await;
    assert_eq!(
        shown["webhook"]["deliveryHeldUntil"],
        Value::Null,
        "the hold is over: {shown}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn gone_pauses_the_subscription_until_it_is_resumed(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 200, 200]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let id = hook["id"].as_str().expect("id");
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    receiver.answer(&[410]).await;
    app.label("One").await;
    assert_eq!(receiver.expect().await["status"], 410);
    let paused = wait_for_status(&app, id, "paused").await;
    assert_eq!(paused["responseStatus"], 410);
    let data = app
        .ok(
            "query($id: ID!) { webhook(id: $id) { deliveryPaused } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["webhook"]["deliveryPaused"], true);

    // While paused, deliveries wait; nothing is retried, nothing new is sent.
    app.label("Two").await;
    receiver.expect_nothing(Duration::from_millis(800)).await;

    // Resumed: what waited goes out, the 410'd one and the new one.
    let resumed = app
        .ok(
            "mutation($id: ID!) { updateWebhook(id: $id, input: { deliveryPaused: false }) { data { deliveryPaused } error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(resumed["updateWebhook"]["data"]["deliveryPaused"], false);
    let mut titles = Vec::new();
    for _ in 0..2 {
        let request = receiver.expect().await;
        assert_eq!(request["status"], 200);
        titles.push(body(&request)["identifiers"]["labelId"].clone());
    }
    titles.sort_by_key(|t| t.to_string());
    titles.dedup();
    assert_eq!(titles.len(), 2, "both labels' events were delivered");
}

/// A subscription that has failed every attempt for 5 days is paused (the contract's), and a
/// change of its label or headers meanwhile does not start its count again, where it did: an
/// integration that saves its subscription on each deploy was never paused. Resumed, it
/// starts afresh.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn five_days_of_failures_pause_a_subscription_whatever_else_changed(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let id = hook["id"].as_str().expect("id");
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    receiver.answer(&[500, 500, 500]).await;
    app.label("One").await;
    assert_eq!(receiver.expect().await["status"], 500);
    wait_for_status(&app, id, "failed").await;

    // Failing for six days, as far as the subscription's row says.
    let outside = sqlx::AnyPool::connect(&app.database_url)
        .await
        .expect("connect");
    let six_days_ago = practice_api::store::now_ms() - 6 * 24 * 3600 * 1000;
    let age_failures = || async {
        sqlx::query("UPDATE webhook_subscriptions SET failing_since = $1 WHERE id = $2")
            .bind(six_days_ago)
            .bind(id)
            .execute(&outside)
            .await
            .expect("age the failures");
    };
    let paused_now = || async {
        let data = app
            .ok(
                "query($id: ID!) { webhook(id: $id) { deliveryPaused } }",
                json!({ "id": id }),
            )
            .await;
        data["webhook"]["deliveryPaused"].clone()
    };
    age_failures().await;
    let update = "mutation($id: ID!, $i: UpdateWebhookInput!) { updateWebhook(id: $id, input: $i) { data { deliveryPaused } error } }";
    let renamed = app
        .ok(
            update,
            json!({ "id": id, "i": { "label": "renamed", "headers": [{ "key": "x-env", "value": "prod" }] } }),
        )
        .await;
    assert_eq!(
        renamed["updateWebhook"],
        json!({ "data": { "deliveryPaused": false }, "error": null })
    );
    app.label("Two").await;
    assert_eq!(receiver.expect().await["status"], 500);
    let paused = wait_for_status(&app, id, "paused").await;
    assert_eq!(paused["responseStatus"], 500, "{paused}");
    assert_eq!(paused_now().await, true);

    // Resumed: what waited goes out, and a failure now is a first one, which pauses nothing.
    let resumed = app
        .ok(
            update,
            json!({ "id": id, "i": { "deliveryPaused": false } }),
        )
        .await;
    assert_eq!(resumed["updateWebhook"]["error"], Value::Null, "{resumed}");
    assert_eq!(receiver.expect().await["status"], 500);
    wait_for_status(&app, id, "failed").await;
    assert_eq!(paused_now().await, false);

    // Sent to another URL, another receiver: its failures start afresh too.
    age_failures().await;
    let moved = app
        .ok(
            update,
            json!({ "id": id, "i": { "url": format!("{}/v2", receiver.url) } }),
        )
        .await;
    assert_eq!(moved["updateWebhook"]["error"], Value::Null, "{moved}");
    receiver.answer(&[500]).await;
    app.label("Three").await;
    assert_eq!(receiver.expect().await["status"], 500);
    wait_for_status(&app, id, "failed").await;
}

/// Paused by hand, a subscription's deliveries wait as they do after a 410: a retry already
/// scheduled does not go out, the retention's sweep keeps what waits as long as the events are
/// kept from the pause (then gives it up), and all of it goes out once resumed.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn paused_by_hand_the_retries_wait_and_are_kept(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 1000, 1000]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let id = hook["id"].as_str().expect("id");
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    app.label("Delivered").await;
    receiver.expect().await;
    wait_for_status(&app, id, "delivered").await;
    receiver.answer(&[500]).await;
    app.label("Retried").await;
    let failed = receiver.expect().await;
    assert_eq!(failed["status"], 500);
    let paused = app.ok(PAUSE, json!({ "id": id, "p": true })).await;
    assert_eq!(paused["updateWebhook"]["data"]["deliveryPaused"], true);
    // The retry was due a second after the first attempt.
    receiver.expect_nothing(Duration::from_millis(2500)).await;
    let waiting = wait_for_status(&app, id, "paused").await;
    assert_eq!(waiting["nextAttemptAt"], Value::Null, "{waiting}");

    // A sweep keeps what waits as long as the events are kept (here an hour), counted from
    // the pause: made long before it (as a redelivery of an old one is), it is kept too.
    let outside = sqlx::AnyPool::connect(&app.database_url)
        .await
        .expect("connect");
    sqlx::query("UPDATE webhook_deliveries SET created_at = 1 WHERE status = 'paused'")
        .execute(&outside)
        .await
        .expect("age it");
    practice_api::events::retention::sweep(&app.store, Duration::from_secs(3600)).await;
    let kept = deliveries(&app, id).await;
    let statuses: Vec<&Value> = kept.iter().map(|d| &d["status"]).collect();
    assert_eq!(
        statuses,
        [&json!("delivered"), &json!("paused")],
        "{kept:?}"
    );
    let kept: Vec<Value> = kept.into_iter().rev().collect();

    // Sent again while paused, it waits with the rest.
    let again = app
        .ok(
            "mutation($d: ID!) { redeliverWebhook(deliveryId: $d) { data { status } error } }",
            json!({ "d": kept[0]["id"] }),
        )
        .await;
    assert_eq!(
        again["redeliverWebhook"]["data"]["status"], "paused",
        "{again}"
    );
    receiver.expect_nothing(Duration::from_millis(800)).await;

    app.ok(PAUSE, json!({ "id": id, "p": false })).await;
    let resumed = receiver.expect().await;
    assert_eq!(resumed["status"], 200);
    assert_eq!(resumed["id"], failed["id"], "the waiting delivery went out");
    wait_for_status(&app, id, "delivered").await;

    // Paused longer than the events are kept: given up by the sweep, with what was delivered,
    // and not sent when delivery resumes.
    app.ok(PAUSE, json!({ "id": id, "p": true })).await;
    app.label("Given up").await;
    wait_for_status(&app, id, "paused").await;
    let now = practice_api::store::now_ms();
    let swept = app
        .store
        .forget_deliveries(now + 1, 100)
        .await
        .expect("sweep");
    assert_eq!(swept.given_up, 1, "{swept:?}");
    let left = deliveries(&app, id).await;
    assert!(left.is_empty(), "{left:?}");
    app.ok(PAUSE, json!({ "id": id, "p": false })).await;
    receiver.expect_nothing(Duration::from_millis(1500)).await;

    // Deleted while paused: what waited is dropped, as what was pending is.
    app.ok(PAUSE, json!({ "id": id, "p": true })).await;
    app.label("Dropped").await;
    wait_for_status(&app, id, "paused").await;
    app.ok(
        "mutation($id: ID!) { deleteWebhook(id: $id) { error } }",
        json!({ "id": id }),
    )
    .await;
    let left = deliveries(&app, id).await;
    assert!(left.iter().all(|d| d["status"] != "paused"), "{left:?}");
}

/// A delivery left pending for a subscription that is paused or deleted is not sent: on
/// PostgreSQL a write that began before the pause or the delete commits its delivery after
/// them, as `pending`, where neither could see it. Made here by setting the row so by hand.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_delivery_committed_behind_a_pause_or_a_delete_is_not_sent(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 1000, 1000]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let id = hook["id"].as_str().expect("id");
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    app.ok(PAUSE, json!({ "id": id, "p": true })).await;
    app.label("Behind the pause").await;
    wait_for_status(&app, id, "paused").await;
    let pool = sqlx::AnyPool::connect(&app.database_url)
        .await
        .expect("open");
    let straggle = || async {
        sqlx::query(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = 0 \
             WHERE subscription_id = $1 AND status = 'paused'",
        )
        .bind(id)
        .execute(&pool)
        .await
        .expect("leave it pending")
        .rows_affected()
    };
    assert_eq!(straggle().await, 1);
    receiver.expect_nothing(Duration::from_millis(1500)).await;
    // Nor is the worker woken for it again and again, to claim nothing.
    let due = app.store.next_delivery_due(0, 4).await.expect("due");
    assert_eq!(due, None);
    // Resumed, it goes out.
    app.ok(PAUSE, json!({ "id": id, "p": false })).await;
    let sent = receiver.expect().await;
    assert_eq!(sent["status"], 200);

    // Deleted: a straggler is never sent.
    app.ok(PAUSE, json!({ "id": id, "p": true })).await;
    app.label("Behind the delete").await;
    wait_for_status(&app, id, "paused").await;
    sqlx::query(
        "UPDATE webhook_subscriptions SET deleted_at = 1, delivery_paused = 0 WHERE id = $1",
    )
    .bind(id)
    .execute(&pool)
    .await
    .expect("delete it as deleteWebhook does");
    assert_eq!(straggle().await, 1);
    receiver.expect_nothing(Duration::from_millis(1500)).await;
    let due = app.store.next_delivery_due(0, 4).await.expect("due");
    assert_eq!(due, None);
    // The sweep deletes it, however young, and leaves the delivered one its age keeps.
    let swept = app.store.forget_deliveries(0, 100).await.expect("sweep");
    assert_eq!(swept.deleted, 1);
    assert_eq!(
        swept.given_up, 0,
        "a deleted subscription's delivery is not given up"
    );
    let left: (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM webhook_deliveries WHERE subscription_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(left.0, 1);
}

/// On PostgreSQL, an attempt's record takes the subscription's row before the delivery's, as
/// `deleteWebhook` and `updateWebhook` take them: held up at the subscription, it holds
/// nothing of the delivery, so that the two wait for each other rather than deadlock.
/// (SQLite writes one transaction at a time: there is no order to keep.)
#[tokio::test]
async fn an_attempts_record_takes_the_subscriptions_row_before_the_deliverys() {
    let mut receiver = receiver!();
    let Some(app) = TestApp::spawn_with(Engine::Postgres, config(&[0])).await else {
        return;
    };
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let id = hook["id"].as_str().expect("id");
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    // Held as an update of the subscription holds it (a delivery's reference to it may still
    // be written).
    let mut subscription = hold_rows(
        &app.database_url,
        "SELECT id FROM webhook_subscriptions WHERE id = $1 FOR NO KEY UPDATE",
        id,
    )
    .await;
    app.label("Held").await;
    let sent = receiver.expect().await;
    assert_eq!(sent["status"], 200);
    // Until the attempt's record waits on the subscription's row.
    waits_on_a_lock(&app.database_url).await;
    // The delivery's row is free: taken at once, not waited for.
    let mut delivery = hold_rows(
        &app.database_url,
        "SELECT id FROM webhook_deliveries WHERE subscription_id = $1 FOR UPDATE NOWAIT",
        id,
    )
    .await;
    for held in [&mut delivery, &mut subscription] {
        sqlx::query("ROLLBACK").execute(held).await.expect("let go");
    }
    wait_for_status(&app, id, "delivered").await;
}

/// The same URL and event type in two live subscriptions is refused, also when the two are
/// asked for at once (a client's retry through two instances of a PostgreSQL deployment).
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_same_subscription_asked_for_at_once_is_made_once(#[case] engine: Engine) {
    let app = spawn!(engine, config(&[0]));
    let create =
        "mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { data { id } error } }";
    for round in 0..5 {
        let input = json!({ "i": {
            "url": format!("https://hooks.example.com/{round}"),
            "eventTypes": ["label.created"],
            "label": "at once",
        } });
        let answers = futures_util::future::join_all(
            (0..8).map(|_| app.gql(Some(&app.admin_token), create, input.clone())),
        )
        .await;
        let made = answers
            .iter()
            .filter(|body| body["data"]["createWebhook"]["data"].is_object())
            .count();
        assert_eq!(made, 1, "round {round}: {answers:?}");
    }
}

/// A receiver that takes connections and never answers holds a few places for deliveries,
/// not all of them: another subscription's delivery, behind its backlog in time, goes out at
/// once, where it waited for the first attempts' timeout (15 s).
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_receiver_that_never_answers_holds_up_no_other(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 60_000]));
    let silent = Silent::start().await;
    subscribe(&app, &silent.url, &["label.created"]).await;
    for i in 0..30 {
        app.label(&format!("Backlog {i}")).await;
    }
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    let started = Instant::now();
    app.label("Behind the backlog").await;
    let request = receiver
        .next(Duration::from_secs(8))
        .await
        .expect("the other subscription's delivery, long before the silent one's time out");
    assert_eq!(request["status"], 200);
    assert!(started.elapsed() < Duration::from_secs(8));
}

/// A delivery being sent when its subscription is paused stays pending until its attempt
/// ends: sent again meanwhile it is refused, and a resume does not send it a second time
/// beside the attempt still on its way (a pause marked it paused, a redelivery then took
/// its lease, and the resume sent it again).
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_delivery_being_sent_is_not_sent_again_beside_itself(#[case] engine: Engine) {
    let app = spawn!(engine, config(&[0, 60_000]));
    let mut silent = Silent::start().await;
    let (id, _on_its_way) = one_on_its_way(&app, &mut silent).await;
    let id = id.as_str();
    app.ok(PAUSE, json!({ "id": id, "p": true })).await;
    let listed = deliveries(&app, id).await;
    assert_eq!(listed[0]["status"], "pending", "{listed:?}");
    let again = app
        .ok(
            "mutation($d: ID!) { redeliverWebhook(deliveryId: $d) { error } }",
            json!({ "d": listed[0]["id"] }),
        )
        .await;
    assert_eq!(
        again["redeliverWebhook"]["error"],
        "This delivery is waiting for its next attempt already"
    );
    app.ok(PAUSE, json!({ "id": id, "p": false })).await;
    let second = silent.next(Duration::from_secs(3)).await;
    assert!(
        second.is_none(),
        "sent a second time while the first was on its way"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_rotated_secret_signs_beside_the_old_one(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let old = hook["secret"].as_str().expect("secret").to_string();
    let rotated = app
        .ok(
            "mutation($id: ID!) { rotateWebhookSecret(id: $id) { data { secret } error } }",
            json!({ "id": hook["id"] }),
        )
        .await;
    let new = rotated["rotateWebhookSecret"]["data"]["secret"]
        .as_str()
        .expect("secret")
        .to_string();
    assert_ne!(new, old);
    receiver.secrets(&[&new, &old]).await;
    app.label("VIP").await;
    let request = receiver.expect().await;
    assert_eq!(request["verified"], json!([0, 1]), "{request}");
    assert_eq!(
        request["signature"]
            .as_str()
            .expect("signature")
            .split(' ')
            .count(),
        2
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_delivery_can_be_sent_again(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 200, 200]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let id = hook["id"].as_str().expect("id");
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    app.label("VIP").await;
    let first = receiver.expect().await;
    let delivered = wait_for_status(&app, id, "delivered").await;
    let again = app
        .ok(
            "mutation($d: ID!) { redeliverWebhook(deliveryId: $d) { data { id status } error } }",
            json!({ "d": delivered["id"] }),
        )
        .await;
    assert_eq!(again["redeliverWebhook"]["error"], Value::Null, "{again}");
    let second = receiver.expect().await;
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second["verified"], json!([0]));

    // A delivery that failed every attempt, sent again: a fresh schedule of attempts, each
    // numbered after the ones before.
    receiver.answer(&[500, 500, 500, 500]).await;
    app.label("Failing").await;
    for _ in 0..3 {
        assert_eq!(receiver.expect().await["status"], 500);
    }
    let failed = wait_for_status(&app, id, "failed").await;
    assert_eq!(failed["attempt"], 3);
    let again = app
        .ok(
            "mutation($d: ID!) { redeliverWebhook(deliveryId: $d) { data { id status } error } }",
            json!({ "d": failed["id"] }),
        )
        .await;
    assert_eq!(again["redeliverWebhook"]["error"], Value::Null, "{again}");
    assert_eq!(receiver.expect().await["status"], 500);
    assert_eq!(receiver.expect().await["status"], 200);
    let delivered = wait_for_status(&app, id, "delivered").await;
    assert_eq!(delivered["attempt"], 5);
    assert_eq!(attempt_numbers(&delivered), vec![1, 2, 3, 4, 5]);

    // Sent again and again, a delivery lists its newest 20 attempts: its list stays as long
    // as the query's cost says it can be.
    for _ in 0..16 {
        let again = app
            .ok(
                "mutation($d: ID!) { redeliverWebhook(deliveryId: $d) { error } }",
                json!({ "d": delivered["id"] }),
            )
            .await;
        assert_eq!(again["redeliverWebhook"]["error"], Value::Null, "{again}");
        assert_eq!(receiver.expect().await["status"], 200);
        wait_for_status(&app, id, "delivered").await;
    }
    let delivered = wait_for_status(&app, id, "delivered").await;
    assert_eq!(delivered["attempt"], 21);
    assert_eq!(attempt_numbers(&delivered), (2..=21).collect::<Vec<i64>>());

    let unknown = app
        .ok(
            "mutation { redeliverWebhook(deliveryId: \"nope\") { data { id } error } }",
            json!({}),
        )
        .await;
    assert_eq!(
        unknown["redeliverWebhook"]["error"],
        "No webhook delivery with id nope"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_operations_keep_their_rules(#[case] engine: Engine) {
    let app = spawn!(engine, config(&[0]));
    let url = "http://127.0.0.1:9/hooks";
    let create = |input: Value| {
        let app = &app;
        async move {
            app.gql(
                Some(&app.admin_token),
                "mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { data { id eventTypes headers { key value } } error } }",
                json!({ "i": input }),
            )
            .await
        }
    };
    let bad = [
        json!({ "url": url, "eventTypes": [], "label": "x" }),
        json!({ "url": url, "eventTypes": ["patient.exploded"], "label": "x" }),
        // Port 0 reaches nothing; a fragment is never sent.
        json!({ "url": "http://127.0.0.1:0/hooks", "eventTypes": ["label.created"], "label": "x" }),
        json!({ "url": format!("{url}#crm"), "eventTypes": ["label.created"], "label": "x" }),
        json!({ "url": url, "eventTypes": [
            "patient.created", "patient.updated", "patient.deleted", "patient.archived",
            "patient.unarchived", "patient.label.added", "patient.label.removed",
            "booking.created", "booking.updated", "booking.deleted", "label.created"
        ], "label": "x" }),
        json!({ "url": url, "eventTypes": ["label.created"], "label": "x".repeat(257) }),
        json!({ "url": url, "eventTypes": ["label.created"], "label": "  " }),
        json!({ "url": "ftp://example.com/", "eventTypes": ["label.created"], "label": "x" }),
        json!({ "url": "not a url", "eventTypes": ["label.created"], "label": "x" }),
        json!({ "url": url, "eventTypes": ["label.created"], "label": "x",
                "headers": [{ "key": "webhook-signature", "value": "forged" }] }),
        json!({ "url": url, "eventTypes": ["label.created"], "label": "x",
                "headers": [{ "key": "X-Evil", "value": "a\r\nInjected: yes" }] }),
        // Sent twice, a field such as Authorization makes a request many receivers refuse.
        json!({ "url": url, "eventTypes": ["label.created"], "label": "x",
                "headers": [{ "key": "Authorization", "value": "Bearer a" },
                            { "key": "authorization", "value": "Bearer b" }] }),
        // The connection's own, which HTTP/2 would drop and HTTP/1.1 act on.
        json!({ "url": url, "eventTypes": ["label.created"], "label": "x",
                "headers": [{ "key": "Keep-Alive", "value": "timeout=5" }] }),
    ];
    for input in bad {
        let body = create(input.clone()).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{input}: {body}");
    }

    let made = create(
        json!({ "url": url, "eventTypes": ["label.created", "patient.created"],
        "label": "CRM", "headers": [{ "key": "Authorization", "value": "Bearer abc" }] }),
    )
    .await;
    let hook = &made["data"]["createWebhook"]["data"];
    assert_eq!(
        hook["headers"],
        json!([{ "key": "Authorization", "value": "Bearer abc" }])
    );
    let id = hook["id"].as_str().expect("id");
    // The same URL and type in two live subscriptions is a refusal, in `error`.
    let twice =
        create(json!({ "url": url, "eventTypes": ["patient.created"], "label": "again" })).await;
    assert_eq!(
        twice["data"]["createWebhook"]["error"],
        format!("Another webhook subscription already sends patient.created to {url}")
    );
    // Also when the URL is written another way that means the same: it is kept in one
    // spelling.
    let spelt = create(
        json!({ "url": "HTTP://127.0.0.1:9/%68ook%73", "eventTypes": ["patient.created"], "label": "again" }),
    )
    .await;
    assert_eq!(
        spelt["data"]["createWebhook"]["error"],
        format!("Another webhook subscription already sends patient.created to {url}"),
        "{spelt}"
    );
    // An empty list of headers clears them.
    let cleared = app
        .ok(
            "mutation($id: ID!) { updateWebhook(id: $id, input: { headers: [], label: \"CRM 2\" }) { data { label headers { key } eventTypes } error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        cleared["updateWebhook"]["data"],
        json!({ "label": "CRM 2", "headers": [], "eventTypes": ["label.created", "patient.created"] })
    );
    // Deleted: kept, marked, and no longer changeable; its URL is free again.
    let deleted = app
        .ok(
            "mutation($id: ID!) { deleteWebhook(id: $id) { data { deleted } error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(deleted["deleteWebhook"]["data"]["deleted"], true);
    let changed = app
        .ok(
            "mutation($id: ID!) { updateWebhook(id: $id, input: { label: \"x\" }) { error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        changed["updateWebhook"]["error"],
        "This webhook subscription has been deleted and can no longer be changed"
    );
    let twice = app
        .ok(
            "mutation($id: ID!) { deleteWebhook(id: $id) { data { id } error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        twice["deleteWebhook"],
        json!({ "data": null, "error": "This webhook subscription has been deleted and can no longer be changed" })
    );
    let again =
        create(json!({ "url": url, "eventTypes": ["patient.created"], "label": "new" })).await;
    assert_eq!(again["data"]["createWebhook"]["error"], Value::Null);
    let listed = app
        .ok(
            "{ live: webhooks { data { id } } all: webhooks(options: { includeDeleted: true }) { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(listed["live"]["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["all"]["data"].as_array().map(Vec::len), Some(2));

    // A practice has at most 50 live subscriptions; the deleted one does not count.
    for batch in 0..2 {
        let fields: String = (0..25)
            .filter(|i| batch * 25 + i < 49)
            .map(|i| {
                let n = batch * 25 + i;
                format!(
                    "h{n}: createWebhook(input: {{ url: \"{url}/{n}\", eventTypes: [\"label.deleted\"], label: \"h\" }}) {{ error }} "
                )
            })
            .collect();
        let made = app.ok(&format!("mutation {{ {fields} }}"), json!({})).await;
        let refused: Vec<&Value> = made
            .as_object()
            .expect("fields")
            .values()
            .filter(|f| !f["error"].is_null())
            .collect();
        assert!(refused.is_empty(), "{made}");
    }
    let over =
        create(json!({ "url": url, "eventTypes": ["label.deleted"], "label": "51st" })).await;
    assert_eq!(
        over["data"]["createWebhook"]["error"],
        "A practice has at most 50 webhook subscriptions: delete one first, or give one \
         subscription several event types"
    );
    let again_id = again["data"]["createWebhook"]["data"]["id"].clone();
    app.ok(
        "mutation($id: ID!) { deleteWebhook(id: $id) { error } }",
        json!({ "id": again_id }),
    )
    .await;
    let after =
        create(json!({ "url": url, "eventTypes": ["label.deleted"], "label": "50th" })).await;
    assert_eq!(
        after["data"]["createWebhook"]["error"],
        Value::Null,
        "{after}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn webhooks_need_their_permissions(#[case] engine: Engine) {
    let app = spawn!(engine, config(&[0]));
    let hook = subscribe(&app, "http://127.0.0.1:9/in", &["label.created"]).await;
    let reader = app.token(&["webhooks:read"]).await;
    let settings = app.token(&["settings", "labels:read"]).await;
    let nothing = app.token(&["patients:read"]).await;
    let with_headers = "mutation($id: ID!) { updateWebhook(id: $id, input: { headers: [{ key: \"authorization\", value: \"Bearer receiver-credential\" }] }) { error } }";
    let updated = app.ok(with_headers, json!({ "id": hook["id"] })).await;
    assert_eq!(updated["updateWebhook"]["error"], Value::Null, "{updated}");
    let held = "query($id: ID!) { webhook(id: $id) { id secret headers { key value } } }";
    let read = app
        .gql(Some(&reader), held, json!({ "id": hook["id"] }))
        .await;
    assert_eq!(read["data"]["webhook"]["id"], hook["id"]);
    assert_eq!(
        read["data"]["webhook"]["secret"],
        Value::Null,
        "the secret is for writers"
    );
    assert_eq!(
        read["data"]["webhook"]["headers"],
        Value::Null,
        "the headers carry the receiver's credentials: for writers too"
    );
    let written = app.ok(held, json!({ "id": hook["id"] })).await;
    assert_eq!(
        written["webhook"]["headers"][0]["value"],
        "Bearer receiver-credential"
    );
    let create = "mutation { createWebhook(input: { url: \"http://127.0.0.1:9/other\", eventTypes: [\"label.created\"], label: \"x\" }) { data { id secret } error } }";
    let refused = app.gql(Some(&reader), create, json!({})).await;
    assert_eq!(error_code(&refused), "FORBIDDEN");
    assert_eq!(
        refused["errors"][0]["message"],
        "Missing permission webhooks:write"
    );
    let made = app.gql(Some(&settings), create, json!({})).await;
    assert!(
        made["data"]["createWebhook"]["data"]["secret"].is_string(),
        "settings implies webhooks:write: {made}"
    );
    // A subscription sends only events its maker may read, as the feed shows them.
    let writer = app.token(&["webhooks:write"]).await;
    let create_for = "mutation($t: [String!]!) { createWebhook(input: { url: \"http://127.0.0.1:9/more\", eventTypes: $t, label: \"x\" }) { data { id } error } }";
    for (token, types, missing) in [
        (&writer, json!(["label.created"]), "labels:read"),
        (&settings, json!(["patient.created"]), "patients:read"),
        (
            &settings,
            json!(["label.created", "booking.created"]),
            "bookings:read",
        ),
    ] {
        let refused = app
            .gql(Some(token), create_for, json!({ "t": types }))
            .await;
        assert_eq!(error_code(&refused), "FORBIDDEN", "{types}: {refused}");
        assert_eq!(
            refused["errors"][0]["message"],
            format!("Missing permission {missing}"),
            "{types}: {refused}"
        );
    }
    let mine = made["data"]["createWebhook"]["data"]["id"].clone();
    let widen = "mutation($id: ID!) { updateWebhook(id: $id, input: { eventTypes: [\"label.created\", \"patient.updated\"] }) { data { eventTypes } error } }";
    let refused = app.gql(Some(&settings), widen, json!({ "id": mine })).await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused}");
    assert_eq!(
        refused["errors"][0]["message"],
        "Missing permission patients:read"
    );
    // Nor may it send an existing subscription's events elsewhere.
    let elsewhere = "mutation($id: ID!) { updateWebhook(id: $id, input: { url: \"http://127.0.0.1:9/mine\" }) { data { url } error } }";
    let refused = app
        .gql(Some(&writer), elsewhere, json!({ "id": mine }))
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused}");
    assert_eq!(
        refused["errors"][0]["message"],
        "Missing permission labels:read"
    );
    let moved = app
        .gql(Some(&settings), elsewhere, json!({ "id": mine }))
        .await;
    assert_eq!(
        moved["data"]["updateWebhook"]["data"]["url"], "http://127.0.0.1:9/mine",
        "{moved}"
    );
    let widened = app.ok(widen, json!({ "id": mine })).await;
    assert_eq!(
        widened["updateWebhook"]["data"]["eventTypes"],
        json!(["label.created", "patient.updated"]),
        "{widened}"
    );
    let refused = app
        .gql(Some(&nothing), "{ webhooks { data { id } } }", json!({}))
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN");
    // The delivery log names events: each delivery is listed to whoever may read its type's
    // records, as the feed lists events, and the log is FORBIDDEN to a reader of none.
    app.label("Logged").await;
    let log = "query($s: ID!) { webhookDeliveries(subscriptionId: $s) { data { eventType } } }";
    let refused = app
        .gql(Some(&reader), log, json!({ "s": hook["id"] }))
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused}");
    assert_eq!(
        refused["errors"][0]["message"],
        "Missing permission patients:read"
    );
    let of_patients = app.token(&["webhooks:read", "patients:read"]).await;
    let of_labels = app.token(&["webhooks:read", "labels:read"]).await;
    for (token, listed) in [
        (&of_patients, json!([])),
        (&of_labels, json!([{ "eventType": "label.created" }])),
    ] {
        let read = app.gql(Some(token), log, json!({ "s": hook["id"] })).await;
        assert_eq!(read["data"]["webhookDeliveries"]["data"], listed, "{read}");
    }
    // Another practice sees none of them.
    let (_, other) = app.other_practice("Other").await;
    let theirs = app
        .gql(
            Some(&other),
            "query($id: ID!) { webhook(id: $id) { id } webhooks { data { id } } }",
            json!({ "id": hook["id"] }),
        )
        .await;
    assert_eq!(theirs["data"]["webhook"], Value::Null);
    assert_eq!(theirs["data"]["webhooks"]["data"], json!([]));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn private_addresses_are_refused_unless_allowed(#[case] engine: Engine) {
    let app = spawn!(engine);
    for url in [
        "http://hooks.example.com/in",
        "https://127.0.0.1/in",
        "https://[::1]/in",
        "https://10.0.0.5/in",
        "https://169.254.169.254/latest",
        "https://localhost/in",
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                "mutation($u: String!) { createWebhook(input: { url: $u, eventTypes: [\"label.created\"], label: \"x\" }) { data { id } error } }",
                json!({ "u": url }),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{url}: {body}");
    }
}

/// A name that is not "localhost" but resolves to a loopback address: the check of the URL
/// lets it through, the check of the address connected to does not.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[tokio::test]
async fn the_address_connected_to_is_checked(#[case] engine: Engine) {
    let mut receiver = receiver!();
    // The machine's own name, or Debian's names for ::1, from /etc/hosts.
    let own = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let mut host = None;
    for candidate in [own.as_str(), "ip6-localhost", "ip6-loopback"] {
        let loopback = tokio::net::lookup_host((candidate, 0))
            .await
            .map(|addresses| addresses.collect::<Vec<_>>())
            .is_ok_and(|found| !found.is_empty() && found.iter().all(|a| a.ip().is_loopback()));
        if !candidate.is_empty() && loopback {
            host = Some(candidate.to_string());
            break;
        }
    }
    let Some(host) = host else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "no name of this machine resolves to loopback only: the check cannot be tested"
        );
        eprintln!("skipping: no name of this machine resolves to loopback only");
        return;
    };
    let app = spawn!(
        engine,
        ServeConfig {
            webhook_retry_schedule: RetrySchedule(vec![Duration::ZERO]),
            ..test_config()
        }
    );
    let port = receiver.url.rsplit(':').next().expect("port");
    let url = format!("https://{host}:{port}");
    let hook = subscribe(&app, &url, &["label.created"]).await;
    app.label("VIP").await;
    let failed = wait_for_status(&app, hook["id"].as_str().expect("id"), "failed").await;
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("no public address")),
        "{failed}"
    );
    receiver.expect_nothing(Duration::from_millis(300)).await;
}

/// Two instances on one database, both delivering: each event reaches the receiver once.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn two_instances_deliver_each_event_once(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let one = spawn!(engine, config(&[0]));
    let two = one.another_instance().await;
    let hook = subscribe(&one, &receiver.url, &["label.created"]).await;
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    for i in 0..20 {
        let app = if i % 2 == 0 { &one } else { &two };
        app.label(&format!("Label {i}")).await;
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..20 {
        let request = receiver.expect().await;
        assert_eq!(request["verified"], json!([0]));
        assert!(
            seen.insert(request["id"].as_str().expect("id").to_string()),
            "delivered twice: {request}"
        );
    }
    receiver.expect_nothing(Duration::from_millis(1500)).await;
}

/// The server killed with SIGKILL right after a commit: the event's delivery, written with
/// it, goes out when the server is back.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_commit_is_delivered_even_if_the_server_is_killed_right_after(#[case] engine: Engine) {
    use crate::cli::{Cli, last_line, post, start_server_with};
    let mut receiver = receiver!();
    let Some(cli) = Cli::on(engine).await else {
        return;
    };
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    // The first attempt is due a second after the commit: the kill comes first.
    let settings = [
        ("PRACTICE_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PRACTICE_WEBHOOK_RETRY_SCHEDULE", "1s"),
    ];
    let (mut server, url) = start_server_with(&cli, &settings);
    let client = reqwest::Client::new();
    let made = post(
        &client,
        &url,
        &token,
        "mutation($u: String!) { createWebhook(input: { url: $u, eventTypes: [\"label.created\"], label: \"crash\" }) { data { secret } error } }",
        json!({ "u": receiver.url }),
    )
    .await;
    let secret = made["data"]["createWebhook"]["data"]["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    receiver.secrets(&[&secret]).await;
    let label = post(
        &client,
        &url,
        &token,
        "mutation { createLabel(title: \"Killed\") { data { id } } }",
        json!({}),
    )
    .await;
    server.kill().expect("SIGKILL");
    server.wait().expect("wait");
    let label_id = label["data"]["createLabel"]["data"]["id"].clone();
    assert!(label_id.is_string(), "{label}");
    receiver.expect_nothing(Duration::from_millis(200)).await;

    let (mut server, _) = start_server_with(&cli, &settings);
    let request = receiver.expect().await;
    assert_eq!(request["verified"], json!([0]), "{request}");
    assert_eq!(body(&request)["identifiers"]["labelId"], label_id);
    server.kill().expect("kill");
    let _ = server.wait();
}

/// A subscription's types narrowed drop what waits of the others: sent on, it would go to
/// whatever URL the subscription has, though the caller that narrowed it was asked only for
/// the types it keeps. Nor does a redelivery send an event its caller may not read, or one
/// of a type the subscription no longer sends.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn what_a_subscription_no_longer_sends_is_not_sent(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0, 10_000]));
    let hook = subscribe(&app, &receiver.url, &["label.created", "patient.created"]).await;
    let id = hook["id"].as_str().expect("id");
    receiver
        .secrets(&[hook["secret"].as_str().expect("secret")])
        .await;
    app.patient("Delivered", "Once").await;
    assert_eq!(
        body(&receiver.expect().await)["eventType"],
        "patient.created"
    );
    let delivered = wait_for_status(&app, id, "delivered").await;
    receiver.answer(&[500]).await;
    app.patient("Waiting", "Retry").await;
    assert_eq!(receiver.expect().await["status"], 500);
    let waiting = wait_for_attempt(&app, id, 1).await;
    assert_eq!(waiting["status"], "pending", "{waiting}");

    // A caller that may read labels, not patients, keeps only label.created.
    let labels_only = app
        .token(&["webhooks:read", "webhooks:write", "labels:read"])
        .await;
    let narrowed = app
        .gql(
            Some(&labels_only),
            "mutation($id: ID!) { updateWebhook(id: $id, input: { eventTypes: [\"label.created\"] }) { data { eventTypes } error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        narrowed["data"]["updateWebhook"]["data"]["eventTypes"],
        json!(["label.created"]),
        "{narrowed}"
    );
    let listed: Vec<Value> = deliveries(&app, id)
        .await
        .iter()
        .map(|d| d["id"].clone())
        .collect();
    assert_eq!(
        listed,
        vec![delivered["id"].clone()],
        "the retry waiting is dropped"
    );

    let redeliver = "mutation($d: ID!) { redeliverWebhook(deliveryId: $d) { data { id } error } }";
    let refused = app
        .gql(
            Some(&labels_only),
            redeliver,
            json!({ "d": delivered["id"] }),
        )
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused}");
    assert_eq!(
        refused["errors"][0]["message"],
        "Missing permission patients:read"
    );
    let refused = app.ok(redeliver, json!({ "d": delivered["id"] })).await;
    assert_eq!(
        refused["redeliverWebhook"],
        json!({ "data": null, "error": "This delivery's subscription no longer sends patient.created: it cannot be sent again" })
    );
    // Label events still go out, and nothing of patients with them.
    app.label("Still sent").await;
    assert_eq!(body(&receiver.expect().await)["eventType"], "label.created");
    // A deleted subscription's delivery is refused as such, not as one still pending.
    app.ok(
        "mutation($id: ID!) { deleteWebhook(id: $id) { error } }",
        json!({ "id": id }),
    )
    .await;
    let sent = wait_for_status(&app, id, "delivered").await;
    let refused = app.ok(redeliver, json!({ "d": sent["id"] })).await;
    assert_eq!(
        refused["redeliverWebhook"]["error"],
        "This webhook subscription has been deleted and can no longer be changed"
    );
}

/// Rotated again within a day, a subscription signs with every secret of that day: a
/// receiver that has not yet taken the second rotation's secret goes on verifying with the
/// one it has. Five old secrets at once at most: a sixth rotation is refused, not the oldest
/// cut short.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn each_rotation_keeps_the_days_old_secrets_signing(#[case] engine: Engine) {
    let mut receiver = receiver!();
    let app = spawn!(engine, config(&[0]));
    let hook = subscribe(&app, &receiver.url, &["label.created"]).await;
    let rotate = "mutation($id: ID!) { rotateWebhookSecret(id: $id) { data { secret } error } }";
    let mut secrets = vec![hook["secret"].as_str().expect("secret").to_string()];
    for _ in 0..2 {
        let rotated = app.ok(rotate, json!({ "id": hook["id"] })).await;
        let secret = rotated["rotateWebhookSecret"]["data"]["secret"]
            .as_str()
            .unwrap_or_else(|| panic!("{rotated}"));
        secrets.push(secret.to_string());
    }
    let newest_first: Vec<&str> = secrets.iter().rev().map(String::as_str).collect();
    receiver.secrets(&newest_first).await;
    app.label("VIP").await;
    let request = receiver.expect().await;
    assert_eq!(request["verified"], json!([0, 1, 2]), "{request}");
    let signatures = request["signature"].as_str().expect("signature");
    assert_eq!(signatures.split(' ').count(), 3, "{signatures}");

    for _ in 0..3 {
        let rotated = app.ok(rotate, json!({ "id": hook["id"] })).await;
        assert_eq!(
            rotated["rotateWebhookSecret"]["error"],
            Value::Null,
            "{rotated}"
        );
    }
    let refused = app.ok(rotate, json!({ "id": hook["id"] })).await;
    let error = refused["rotateWebhookSecret"]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("a sixth old secret: {refused}"));
    assert!(
        error.starts_with("This subscription's secret was rotated 5 times within a day"),
        "{error}"
    );
    app.label("Six").await;
    let request = receiver.expect().await;
    assert_eq!(
        request["signature"]
            .as_str()
            .expect("signature")
            .split(' ')
            .count(),
        6,
        "the current secret and five old ones: {request}"
    );
}

/// A delivery not yet attempted says when its first attempt is due: the schedule's first
/// delay after its event.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_first_attempt_is_listed_when_it_is_due(#[case] engine: Engine) {
    let app = spawn!(engine, config(&[60_000]));
    let hook = subscribe(&app, "http://127.0.0.1:9/later", &["label.created"]).await;
    let id = hook["id"].as_str().expect("id");
    app.label("Later").await;
    let listed = deliveries(&app, id).await;
    let at = |field: &str| {
        chrono::DateTime::parse_from_rfc3339(listed[0][field].as_str().expect(field))
            .expect("a timestamp")
            .timestamp_millis()
    };
    assert_eq!(listed[0]["attempt"], 0, "{listed:?}");
    assert_eq!(at("nextAttemptAt") - at("at"), 60_000, "{listed:?}");
}

/// An attempt that ends after another instance took its delivery over (this one stalled past
/// its lease) records nothing: the delivery is the other's, which records its own attempt.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_attempt_whose_claim_was_taken_over_records_nothing(#[case] engine: Engine) {
    let app = spawn!(engine, config(&[0, 60_000]));
    let mut silent = Silent::start().await;
    let (id, held) = one_on_its_way(&app, &mut silent).await;
    let id = id.as_str();
    // Another instance, a minute and a bit later by its clock, finds the lease run out.
    let later = practice_api::store::now_ms() + 61_000;
    let taken = app
        .store
        .claim_deliveries(later, later + 60_000, 8, 8, 0)
        .await
        .expect("claim");
    assert_eq!(taken.len(), 1, "{taken:?}");
    // The first attempt ends (its connection cut, which it reads at once): not recorded.
    drop(held);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let listed = deliveries(&app, id).await;
    assert_eq!(
        (&listed[0]["status"], &listed[0]["attempt"]),
        (&json!("pending"), &json!(0)),
        "{listed:?}"
    );
    let delivered = practice_api::store::webhooks::Outcome {
        response_status: Some(200),
        error: None,
        retry_at: None,
        gone: false,
        hold_until: None,
    };
    app.store
        .finish_attempt(&taken[0], &delivered, 1_000_000)
        .await
        .expect("the attempt of the claim that holds it is recorded");
    let listed = deliveries(&app, id).await;
    assert_eq!(listed[0]["status"], "delivered", "{listed:?}");
    assert_eq!(attempt_numbers(&listed[0]), vec![1]);
}

/// An attempt whose instance dies while its subscription is paused leaves its delivery
/// pending (a pause leaves one being sent to its attempt's end). Past its lease, the next
/// sweep marks it paused with the rest: it goes out when delivery resumes, and the stalled
/// attempt, should it end after all, records nothing over it.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_delivery_left_pending_by_a_dead_attempt_waits_paused(#[case] engine: Engine) {
    use sqlx::Connection;
    let app = spawn!(engine, config(&[0, 60_000]));
    let mut silent = Silent::start().await;
    let (id, first) = one_on_its_way(&app, &mut silent).await;
    let id = id.as_str();
    app.ok(PAUSE, json!({ "id": id, "p": true })).await;
    assert_eq!(deliveries(&app, id).await[0]["status"], "pending");
    // Its instance is gone: its lease runs out (set here: a minute is not waited for).
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&app.database_url)
        .await
        .expect("connect");
    sqlx::query("UPDATE webhook_deliveries SET lease_until = 1 WHERE subscription_id = $1")
        .bind(id)
        .execute(&mut conn)
        .await
        .expect("the lease runs out");
    conn.close().await.expect("close");
    app.store
        .forget_deliveries(0, 100)
        .await
        .expect("the sweep");
    assert_eq!(deliveries(&app, id).await[0]["status"], "paused");
    // The stalled attempt ends: nothing recorded over the paused delivery.
    drop(first);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listed = deliveries(&app, id).await;
    assert_eq!(
        (&listed[0]["status"], &listed[0]["attempt"]),
        (&json!("paused"), &json!(0)),
        "{listed:?}"
    );
    // Resumed, it goes out.
    app.ok(PAUSE, json!({ "id": id, "p": false })).await;
    silent.connected().await;
}
