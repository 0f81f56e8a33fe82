//! No N+1: a page of bookings with their patient, doctor, location and appointment type costs
//! a fixed number of SQL statements, however many bookings the page holds. Counted from
//! sqlx's own statement log, so this test has its binary to itself: the counter is global.

// The helpers serve the api suite too; this binary uses a few of them.
#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

use helpers::{Engine, TestApp};

static STATEMENTS: AtomicUsize = AtomicUsize::new(0);

/// Counts the events sqlx logs for each statement it runs, but for the pragmas that set up a
/// new pooled connection (paid once per connection, not per request), for transaction
/// control (`BEGIN`, `COMMIT`), which sqlx logs on PostgreSQL and not on SQLite, and for the
/// server's background work, which runs beside the request whatever it asks: the hub that
/// follows the event log, the webhook worker (`src/events/`), and the task that brings the
/// index of who read each patient up to date every second (on SQLite after moving the journal
/// of reads into the audit log; `src/graphql/pipeline/reads.rs`).
struct CountStatements;

/// What the background work reads and writes (and no request counted here does).
const BACKGROUND: &[&str] = &[
    "FROM events",
    "webhook_deliveries",
    "event_type_floors",
    "audit_reads_indexed",
    "audit_read_runs",
    "audit_read_buckets",
    "gin_clean_pending_list",
    "ON CONFLICT (practice_id, id) DO NOTHING",
];

impl<S: Subscriber> Layer<S> for CountStatements {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut logged = Logged::default();
        event.record(&mut logged);
        let control = ["\"PRAGMA", "\"BEGIN", "\"COMMIT"];
        // sqlx logs the whole text only when its summary is shorter than the statement.
        let background = BACKGROUND
            .iter()
            .any(|b| logged.statement.contains(b) || logged.summary.contains(b));
        if !control.iter().any(|c| logged.summary.starts_with(c)) && !background {
            STATEMENTS.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The statement as sqlx logs it: its summary and its text.
#[derive(Default)]
struct Logged {
    summary: String,
    statement: String,
}

impl tracing::field::Visit for Logged {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "summary" => self.summary = format!("{value:?}"),
            "db.statement" => self.statement = format!("{value:?}"),
            _ => {}
        }
    }
}

const PAGE: &str = "query($n: Int) { bookings(pagination: { pageSize: $n }) { data { id start \
    patient { firstName labels { text } } doctor { fullName } doctorName location { name } \
    appointment { title } } } }";

async fn statements_for_page(app: &TestApp, size: usize) -> usize {
    let before = STATEMENTS.load(Ordering::SeqCst);
    let data = app.ok(PAGE, json!({ "n": size })).await;
    let after = STATEMENTS.load(Ordering::SeqCst);
    let page = data["bookings"]["data"].as_array().expect("page");
    assert_eq!(page.len(), size);
    for booking in page {
        assert!(booking["patient"]["firstName"].is_string(), "{booking}");
        assert!(booking["doctor"]["fullName"].is_string(), "{booking}");
        assert!(booking["location"]["name"].is_string(), "{booking}");
        assert!(booking["appointment"]["title"].is_string(), "{booking}");
    }
    after - before
}

/// Both engines in one test, one after the other: the statement counter is global.
#[tokio::test]
async fn a_page_of_100_bookings_costs_a_fixed_number_of_statements() {
    let subscriber = tracing_subscriber::registry().with(CountStatements);
    tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
    for engine in [Engine::Sqlite, Engine::Postgres] {
        if let Some(app) = TestApp::spawn_with(engine, helpers::test_config()).await {
            count_on(&app, engine).await;
        }
    }
}

async fn count_on(app: &TestApp, engine: Engine) {
    let setup = app
        .ok(
            "mutation { a: createLocation(name: \"Main\") { data { id } } b: createLocation(name: \"Annex\") { data { id } } t: createAppointmentType(title: \"Consultation\", duration: 15) { data { id } } u: createAppointmentType(title: \"Check\", duration: 15) { data { id } } }",
            json!({}),
        )
        .await;
    let locations = [&setup["a"]["data"]["id"], &setup["b"]["data"]["id"]];
    let types = [&setup["t"]["data"]["id"], &setup["u"]["data"]["id"]];
    let label = app.label("VIP").await;
    let mut doctors = Vec::new();
    for i in 0..4 {
        doctors.push(app.doctor("Doc", &format!("Number{i}")).await);
    }
    for i in 0..100 {
        let patient = app.patient("Pat", &format!("Number{i}")).await;
        app.ok(
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }",
            json!({ "p": patient, "l": label }),
        )
        .await;
        let start = chrono::DateTime::parse_from_rfc3339("2031-01-06T08:00:00Z").expect("time")
            + chrono::Duration::minutes(15 * (i / 4) as i64);
        let booked = app
            .ok(
                "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { error } }",
                json!({ "d": {
                    "patient": patient, "doctor": doctors[i % 4], "location": locations[i % 2],
                    "bookingType": types[i % 2], "start": start.to_rfc3339()
                }}),
            )
            .await;
        assert_eq!(
            booked["createBooking"]["error"],
            serde_json::Value::Null,
            "{booked}"
        );
    }
    // The token's last use is recorded at most once a minute; let that write happen now.
    app.ok("{ currentPractice { id } }", json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    // Let the pool open the connections a busy page uses.
    statements_for_page(app, 100).await;
    let for_100 = statements_for_page(app, 100).await;
    let for_10 = statements_for_page(app, 10).await;
    let for_1 = statements_for_page(app, 1).await;
    eprintln!(
        "statements on {engine:?}: page of 100 bookings with relations = {for_100}, of 10 = {for_10}, of 1 = {for_1}"
    );
    assert_eq!(for_100, for_10, "the count must not grow with the page");
    assert_eq!(for_100, for_1, "the count must not grow with the page");
    // Bookings, patients, their labels, doctors, locations, appointment types, and (on
    // PostgreSQL) the audit log's record of the bookings and patients read, one statement.
    // SQLite appends the record to its journal of reads, a file, and moves it into the log
    // later, many requests at a time (src/store/journal.rs). Not the token: both engines
    // keep it in memory while they hear of every change to tokens (src/auth/cache.rs).
    let recorded = match engine {
        Engine::Sqlite => 0,
        Engine::Postgres => 1,
    };
    assert_eq!(for_100, 6 + recorded);

    // patient(id): the patient and (PostgreSQL) the record of its read.
    let id = app.patient("Single", "Lookup").await;
    let before = STATEMENTS.load(Ordering::SeqCst);
    let data = app
        .ok(
            "query($id: ID!) { patient(id: $id) { firstName } }",
            json!({ "id": id }),
        )
        .await;
    let statements = STATEMENTS.load(Ordering::SeqCst) - before;
    assert_eq!(data["patient"]["firstName"], "Single");
    eprintln!("statements on {engine:?}: patient(id) = {statements}");
    assert_eq!(statements, 1 + recorded);

    // patient(id) with its labels, asked for through a fragment: the labels come in the
    // patient's own statement (src/store/patients.rs, find_patient_with_labels).
    let before = STATEMENTS.load(Ordering::SeqCst);
    let data = app
        .ok(
            "query($id: ID!) { patient(id: $id) { ...Named } } \
             fragment Named on Patient { firstName labels { text } }",
            json!({ "id": id }),
        )
        .await;
    let statements = STATEMENTS.load(Ordering::SeqCst) - before;
    assert_eq!(data["patient"]["labels"], json!([]));
    eprintln!("statements on {engine:?}: patient(id) with labels = {statements}");
    assert_eq!(statements, 1 + recorded);

    // A page of patients of whom some have no labels: their labels are loaded with the
    // page's, once, and not asked for again one by one (or a batch at a time) as the
    // patients without any reach their field.
    for i in 0..20 {
        app.patient("Bare", &format!("Alone{i:02}")).await;
    }
    let before = STATEMENTS.load(Ordering::SeqCst);
    let data = app
        .ok(
            "{ patients(pagination: { pageSize: 100 }) { data { lastName labels { text } } } }",
            json!({}),
        )
        .await;
    let statements = STATEMENTS.load(Ordering::SeqCst) - before;
    let page = data["patients"]["data"].as_array().expect("page");
    let without = page
        .iter()
        .filter(|p| p["labels"].as_array().is_some_and(Vec::is_empty))
        .count();
    assert!(without >= 20 && without < page.len(), "{data}");
    eprintln!("statements on {engine:?}: page of 100 patients with labels = {statements}");
    // The page, its patients' labels, and (PostgreSQL) the record of the patients read.
    assert_eq!(statements, 2 + recorded);

    // A page of patients with their numbers and access groups, which the patients' rows hold:
    // the names of the practice's definitions are read once for the page, not a patient at
    // a time.
    let defined = app
        .ok(
            "mutation { n: createPracticeNumber(name: \"NHS number\") { data { id } } g: createAccessGroup(name: \"team\", label: \"Team\") { data { id } } }",
            json!({}),
        )
        .await;
    let (number, group) = (&defined["n"]["data"]["id"], &defined["g"]["data"]["id"]);
    let listed = app
        .ok(
            "{ patients(pagination: { pageSize: 30 }) { data { id } } }",
            json!({}),
        )
        .await;
    for patient in listed["patients"]["data"].as_array().expect("page") {
        let done = app
            .ok(
                "mutation($p: ID!, $n: ID!, $g: ID!) { a: addPatientNumber(patientId: $p, numberData: { numberId: $n, value: \"1\" }) { error } b: addPatientAccessGroup(patientId: $p, accessGroupId: $g) { error } }",
                json!({ "p": patient["id"], "n": number, "g": group }),
            )
            .await;
        assert!(
            done["a"]["error"].is_null() && done["b"]["error"].is_null(),
            "{done}"
        );
    }
    let before = STATEMENTS.load(Ordering::SeqCst);
    let data = app
        .ok(
            "{ patients(pagination: { pageSize: 30 }) { data { numbers { name } accessGroups { label } } } }",
            json!({}),
        )
        .await;
    let statements = STATEMENTS.load(Ordering::SeqCst) - before;
    let page = data["patients"]["data"].as_array().expect("page");
    assert_eq!(page.len(), 30);
    for patient in page {
        assert_eq!(
            patient["numbers"],
            json!([{ "name": "NHS number" }]),
            "{data}"
        );
        assert_eq!(
            patient["accessGroups"],
            json!([{ "label": "Team" }]),
            "{data}"
        );
    }
    eprintln!(
        "statements on {engine:?}: page of 30 patients with numbers and access groups = {statements}"
    );
    // The page, the number definitions, the access groups, and (PostgreSQL) the record.
    assert_eq!(statements, 3 + recorded);
}
