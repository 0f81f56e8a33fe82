//! The audit log: every read of patient data and every write, with who did it and when; an
//! operation whose record cannot be written fails.

use std::time::Duration;

use rstest::rstest;
use serde_json::{Value, json};
use sqlx::Connection;

use crate::helpers::{
    Engine, NoNewFiles, PASSWORD, Raw, TestApp, error_code, journals_holding_reads,
    journals_of_reads, sqlite_directory,
};
use crate::spawn;

const EVENTS: &str = "query($p: ID, $a: ID, $r: DateRange, $g: Pagination) {
    auditEvents(patientId: $p, actorId: $a, dateRange: $r, pagination: $g) {
        data { id at actorType actorId actorName action operation resourceType resourceId patientId }
        pageInfo { hasMore }
    }
}";

/// The events that match, newest first, as the admin reads them.
async fn events(app: &TestApp, filter: Value) -> Vec<Value> {
    let mut variables = filter;
    variables["g"] = json!({ "pageSize": 100 });
    let data = app.ok(EVENTS, variables).await;
    data["auditEvents"]["data"]
        .as_array()
        .expect("a list of events")
        .clone()
}

/// (actorType, action, operation, resourceType) of each event, for comparing.
fn summary(events: &[Value]) -> Vec<(String, String, String, String)> {
    events
        .iter()
        .map(|e| {
            let text = |key: &str| e[key].as_str().unwrap_or("").to_string();
            (
                text("actorType"),
                text("action"),
                text("operation"),
                text("resourceType"),
            )
        })
        .collect()
}

fn event(
    actor: &str,
    action: &str,
    operation: &str,
    resource: &str,
) -> (String, String, String, String) {
    (
        actor.to_string(),
        action.to_string(),
        operation.to_string(),
        resource.to_string(),
    )
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn who_looked_at_a_patient_and_who_changed_it(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Ada", "Lovelace").await;
    let other = app.patient("Alan", "Turing").await;
    let label = app.label("VIP").await;
    let email = app.user("practitioner", "pat@example.com").await;
    let staff = app.sign_in(&email, PASSWORD).await;
    let me = app
        .gql(Some(&staff), "{ currentUser { id } }", json!({}))
        .await;
    let user_id = me["data"]["currentUser"]["id"]
        .as_str()
        .expect("id")
        .to_string();

    // A staff user reads the patient under an alias, then finds both in a search.
    let read = app
        .gql(
            Some(&staff),
            "query($id: ID!) { seen: patient(id: $id) { firstName } }",
            json!({ "id": patient }),
        )
        .await;
    assert_eq!(read["data"]["seen"]["firstName"], json!("Ada"));
    let found = app
        .gql(
            Some(&staff),
            "{ patients(search: \"a\") { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        found["data"]["patients"]["data"].as_array().map(Vec::len),
        Some(2)
    );
    // ... and labels the patient: a write, whose returned patient is not a second read.
    let labelled = app
        .gql(
            Some(&staff),
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id } error } }",
            json!({ "p": patient, "l": label }),
        )
        .await;
    assert_eq!(labelled["data"]["addPatientLabel"]["error"], Value::Null);
    // A token for the patient query alone reads it too.
    let reader = app.token(&["query:patient"]).await;
    let read = app
        .gql(
            Some(&reader),
            "query($id: ID!) { patient(id: $id) { email } }",
            json!({ "id": patient }),
        )
        .await;
    assert!(read.get("errors").is_none(), "{read}");
    // A query that reads no patient data leaves no read behind.
    app.gql(Some(&reader), "{ currentPractice { id } }", json!({}))
        .await;

    let trail = events(&app, json!({ "p": patient })).await;
    assert_eq!(
        summary(&trail),
        vec![
            event("token", "read", "patient", "patient"),
            event("user", "add_label", "addPatientLabel", "label"),
            event("user", "read", "patients", "patient"),
            event("user", "read", "patient", "patient"),
            event("token", "create", "createPatient", "patient"),
        ],
        "{trail:#?}"
    );
    for e in &trail {
        assert_eq!(e["patientId"], json!(patient));
    }
    let by_user = &trail[3];
    assert_eq!(by_user["actorId"], json!(user_id));
    assert_eq!(by_user["actorName"], json!("Test practitioner"));
    assert_eq!(by_user["resourceId"], json!(patient));
    assert_eq!(trail[1]["resourceId"], json!(label));
    assert_eq!(trail[0]["actorName"], json!("test"));
    assert_eq!(trail[4]["actorName"], json!("test admin"));
    // Newest first, and each stamped with a time.
    let times: Vec<&str> = trail
        .iter()
        .map(|e| e["at"].as_str().expect("at"))
        .collect();
    let mut sorted = times.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted);

    // The other patient was seen in the search only.
    let trail = events(&app, json!({ "p": other })).await;
    assert_eq!(
        summary(&trail),
        vec![
            event("user", "read", "patients", "patient"),
            event("token", "create", "createPatient", "patient"),
        ]
    );

    // Everything the staff user did, sign-in included: the search saw two patients.
    let theirs = events(&app, json!({ "a": user_id })).await;
    assert_eq!(
        summary(&theirs),
        vec![
            event("user", "add_label", "addPatientLabel", "label"),
            event("user", "read", "patients", "patient"),
            event("user", "read", "patients", "patient"),
            event("user", "read", "patient", "patient"),
            event("user", "sign_in", "signIn", "token"),
        ],
        "{theirs:#?}"
    );
    assert!(theirs.iter().all(|e| e["actorId"] == json!(user_id)));

    // Deleting the label from the catalogue takes it off the patient: on the patient's trail.
    app.ok(
        "mutation($id: ID!) { deleteLabel(id: $id) { error } }",
        json!({ "id": label }),
    )
    .await;
    let trail = events(&app, json!({ "p": patient })).await;
    assert_eq!(
        summary(&trail[..1]),
        vec![event("token", "remove_label", "deleteLabel", "label")]
    );

    // A span of time in the future holds nothing.
    let later = events(
        &app,
        json!({ "p": patient, "r": { "start": "2999-01-01T00:00:00Z", "end": "2999-12-31T00:00:00Z" } }),
    )
    .await;
    assert!(later.is_empty());

    // Reading the log needs `settings`, and another practice sees none of it.
    let refused = app.gql(Some(&staff), EVENTS, json!({})).await;
    assert_eq!(error_code(&refused), "FORBIDDEN");
    let (_, elsewhere) = app.other_practice("Elsewhere").await;
    let theirs = app
        .gql(Some(&elsewhere), EVENTS, json!({ "p": patient }))
        .await;
    assert_eq!(theirs["data"]["auditEvents"]["data"], json!([]));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn bookings_read_and_written_are_on_the_patients_trail(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Ada", "Lovelace").await;
    let doctor = app.doctor("Gregory", "House").await;
    let made = app
        .ok(
            "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id } error } }",
            json!({ "d": {
                "patient": patient, "doctor": doctor,
                "start": "2030-01-07T09:00:00Z", "end": "2030-01-07T09:30:00Z"
            } }),
        )
        .await;
    let booking = made["createBooking"]["data"]["id"]
        .as_str()
        .expect("booking")
        .to_string();
    let desk = app.token(&["bookings:read"]).await;
    let page = app
        .gql(
            Some(&desk),
            "{ bookings(dateRange: { start: \"2030-01-07T00:00:00Z\", end: \"2030-01-08T00:00:00Z\" }) { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(page["data"]["bookings"]["data"][0]["id"], json!(booking));
    let trail = events(&app, json!({ "p": patient })).await;
    assert_eq!(
        summary(&trail),
        vec![
            event("token", "read", "bookings", "booking"),
            event("token", "create", "createBooking", "booking"),
            event("token", "create", "createPatient", "patient"),
        ]
    );
    assert_eq!(trail[0]["resourceId"], json!(booking));

    // A mutation's result that reaches other records of patient data records them as read:
    // here the doctor's bookings and their patients, through an empty update.
    let other = app.patient("Alan", "Turing").await;
    app.ok(
        "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { error } }",
        json!({ "d": {
            "patient": other, "doctor": doctor,
            "start": "2030-01-07T10:00:00Z", "end": "2030-01-07T10:30:00Z"
        } }),
    )
    .await;
    let reached = app
        .ok(
            "mutation($id: ID!) { updateBooking(id: $id, bookingData: {}) { data { doctor {
                bookings(start: \"2030-01-07\", end: \"2030-01-07\") { data { patient { lastName } } }
            } } } }",
            json!({ "id": booking }),
        )
        .await;
    let seen = &reached["updateBooking"]["data"]["doctor"]["bookings"]["data"];
    assert_eq!(seen.as_array().map(Vec::len), Some(2), "{reached}");
    let trail = events(&app, json!({ "p": other })).await;
    let mut reads: Vec<_> = summary(&trail)
        .into_iter()
        .filter(|(_, action, ..)| action == "read")
        .collect();
    reads.sort();
    assert_eq!(
        reads,
        vec![
            event("token", "read", "updateBooking", "booking"),
            event("token", "read", "updateBooking", "patient"),
        ]
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn sign_ins_and_failed_attempts_are_recorded(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("receptionist", "desk@example.com").await;
    let failed = app
        .gql(
            None,
            "mutation { signIn(email: \"desk@example.com\", password: \"wrong password\") { token error } }",
            json!({}),
        )
        .await;
    assert!(failed["data"]["signIn"]["error"].is_string());
    let token = app.sign_in(&email, PASSWORD).await;
    let signed_out = app
        .gql(Some(&token), "mutation { signOut }", json!({}))
        .await;
    assert_eq!(signed_out["data"]["signOut"], json!(true));
    // A failed attempt is recorded in the background, so that it takes no longer to answer
    // than one for an unknown email: wait for it.
    let mut trail = Vec::new();
    for _ in 0..50 {
        trail = events(&app, json!({})).await;
        if trail.iter().any(|e| e["action"] == json!("sign_in_failed")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut seen: Vec<(String, String, String, String)> = summary(&trail)
        .into_iter()
        .filter(|(actor, ..)| actor == "user")
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            event("user", "sign_in", "signIn", "token"),
            event("user", "sign_in_failed", "signIn", "user"),
            event("user", "sign_out", "signOut", "token"),
        ]
    );
    // The operator's own writes are there too: the user made on the command line.
    assert!(
        summary(&trail).contains(&event("operator", "create", "user create", "user")),
        "{trail:#?}"
    );
}

/// The patient's first name, as the admin reads it.
async fn read_first_name(app: &TestApp, patient: &str) -> Raw {
    app.post_json(
        Some(&app.admin_token),
        &json!({ "query": "query($id: ID!) { patient(id: $id) { firstName } }", "variables": { "id": patient } }),
    )
    .await
}

/// Makes every insert into the audit log fail, as a full disk or a broken replica would.
async fn break_the_audit_log(app: &TestApp, engine: Engine) {
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&app.database_url)
        .await
        .expect("connect");
    let statements: &[&str] = match engine {
        Engine::Sqlite => &[
            "CREATE TRIGGER audit_refused BEFORE INSERT ON audit_events \
             BEGIN SELECT RAISE(ABORT, 'audit log refused'); END",
            "CREATE TRIGGER audit_reads_refused BEFORE INSERT ON audit_reads \
             BEGIN SELECT RAISE(ABORT, 'audit log refused'); END",
        ],
        Engine::Postgres => &[
            "CREATE FUNCTION audit_refused() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'audit log refused'; END $$",
            "CREATE TRIGGER audit_refused BEFORE INSERT ON audit_events \
             FOR EACH ROW EXECUTE FUNCTION audit_refused()",
            "CREATE TRIGGER audit_reads_refused BEFORE INSERT ON audit_reads \
             FOR EACH ROW EXECUTE FUNCTION audit_refused()",
        ],
    };
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(*sql))
            .execute(&mut conn)
            .await
            .expect("install the trigger");
    }
    let _ = conn.close().await;
}

async fn mend_the_audit_log(app: &TestApp) {
    let mut conn = sqlx::AnyConnection::connect(&app.database_url)
        .await
        .expect("connect");
    for (trigger, table) in [
        ("audit_refused", "audit_events"),
        ("audit_reads_refused", "audit_reads"),
    ] {
        let postgres = format!("DROP TRIGGER {trigger} ON {table}");
        let sqlite = format!("DROP TRIGGER {trigger}");
        sqlx::query(sqlx::AssertSqlSafe(postgres))
            .execute(&mut conn)
            .await
            .or(sqlx::query(sqlx::AssertSqlSafe(sqlite))
                .execute(&mut conn)
                .await)
            .expect("drop the trigger");
    }
    let _ = conn.close().await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn nothing_happens_that_the_log_cannot_record(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Ada", "Lovelace").await;
    let label = app.label("VIP").await;
    break_the_audit_log(&app, engine).await;
    // SQLite records reads in a journal first (src/store/journal.rs): a read is withheld
    // when the journal cannot be written.
    let no_journal = match engine {
        Engine::Sqlite => Some(NoNewFiles::in_the_database_directory_of(&app).await),
        Engine::Postgres => None,
    };

    // A write fails, and leaves nothing behind.
    let labelled = app
        .gql(
            Some(&app.admin_token),
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id } error } }",
            json!({ "p": patient, "l": label }),
        )
        .await;
    assert_eq!(error_code(&labelled), "INTERNAL_SERVER_ERROR", "{labelled}");
    assert!(
        !labelled.to_string().contains("audit log refused"),
        "{labelled}"
    );
    let created = app
        .gql(
            Some(&app.admin_token),
            "mutation { createPatient(patientData: { first: \"Alan\", last: \"Turing\" }) { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&created), "INTERNAL_SERVER_ERROR", "{created}");

    // A read is withheld.
    let read = read_first_name(&app, &patient).await;
    assert_eq!(read.status.as_u16(), 503, "{}", read.body);
    assert_eq!(read.code(), "SERVICE_UNAVAILABLE");
    assert!(!read.body.to_string().contains("Ada"), "{}", read.body);
    // What reads no patient data still works.
    app.assert_serving().await;

    drop(no_journal);
    mend_the_audit_log(&app).await;
    let data = app
        .ok(
            "query($id: ID!) { patient(id: $id) { labels { id } } patients { data { firstName } } }",
            json!({ "id": patient }),
        )
        .await;
    assert_eq!(
        data["patient"]["labels"],
        json!([]),
        "the label must not be on"
    );
    assert_eq!(data["patients"]["data"], json!([{ "firstName": "Ada" }]));
    let trail = events(&app, json!({ "p": patient })).await;
    assert_eq!(
        summary(&trail),
        vec![
            event("token", "read", "patients", "patient"),
            event("token", "read", "patient", "patient"),
            event("token", "create", "createPatient", "patient"),
        ]
    );
}

/// SQLite: while the audit log refuses reads, they wait in the server's journal of reads
/// (src/store/journal.rs): on disk, so served; the log cannot be listed meanwhile; once it
/// takes them again, each is listed once and no journal is left.
#[tokio::test]
async fn sqlite_keeps_reads_in_its_journal_while_the_log_refuses_them() {
    let app = spawn!(Engine::Sqlite);
    let patient = app.patient("Ada", "Lovelace").await;
    break_the_audit_log(&app, Engine::Sqlite).await;
    for _ in 0..2 {
        let read = read_first_name(&app, &patient).await;
        assert_eq!(read.status.as_u16(), 200, "{}", read.body);
        assert_eq!(read.body["data"]["patient"]["firstName"], "Ada");
        let listed = app
            .gql(
                Some(&app.admin_token),
                EVENTS,
                json!({ "p": patient, "g": { "pageSize": 10 } }),
            )
            .await;
        assert!(listed["data"]["auditEvents"].is_null(), "{listed}");
        assert_eq!(error_code(&listed), "INTERNAL_SERVER_ERROR", "{listed}");
        assert!(
            !listed.to_string().contains("audit log refused"),
            "{listed}"
        );
    }
    mend_the_audit_log(&app).await;
    let trail = events(&app, json!({ "p": patient })).await;
    assert_eq!(
        summary(&trail),
        vec![
            event("token", "read", "patient", "patient"),
            event("token", "read", "patient", "patient"),
            event("token", "create", "createPatient", "patient"),
        ]
    );
    // (The next journal, made ahead, may be there: zeros, no reads.)
    let left = journals_holding_reads(&sqlite_directory(&app.database_url));
    assert!(left.is_empty(), "{left:?}");
}

/// A store on a new SQLite file and no server (nothing moves or indexes reads behind the
/// test's back), and the id of its practice; None where the test is skipped.
async fn store_of_a_file() -> Option<(
    crate::helpers::TestDatabase,
    practice_api::store::Store,
    String,
)> {
    use practice_api::store::{PoolSettings, Store};

    let db = crate::helpers::TestDatabase::new(Engine::Sqlite).await?;
    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("open");
    let practice = practice_api::admin::practice(&store, None)
        .await
        .expect("practice")
        .id;
    Some((db, store, practice))
}

/// SQLite: journals of reads left beside the database by processes gone are moved into the
/// log by the next one, a line moved twice is one row, a line cut short by a crash is left
/// out, and a journal the log refuses (a damaged line, a practice the database does not
/// have) is set aside as `-unmoved-reads-` rather than lost or tried for ever.
#[tokio::test]
async fn journals_left_behind_are_moved_once_and_those_refused_set_aside() {
    let Some((db, store, practice)) = store_of_a_file().await else {
        return;
    };
    let file = db.url.trim_start_matches("sqlite://").to_owned();
    let line = |practice: &str, id: &str| {
        json!([
            practice,
            id,
            1_700_000_000_000_i64,
            "token",
            "t1",
            "reader",
            json!([["patient", "patient", "ada", "ada"]]).to_string()
        ])
        .to_string()
    };
    let one = line(&practice, "01900000-0000-7000-8000-000000000001");
    let two = line(&practice, "01900000-0000-7000-8000-000000000002");
    let journal = |name: &str, text: String| {
        std::fs::write(format!("{file}-reads-{name}"), text).expect("write")
    };
    // The same line in two journals (a mover died before removing the first), and one cut
    // short after the whole ones.
    journal(
        "a",
        format!("{one}\n{two}\n[\"{practice}\", \"01900000-0000-7000"),
    );
    journal("b", format!("{one}\n"));
    journal("damaged", format!("{one}\nnot a line\n"));
    journal(
        "stranger",
        format!(
            "{}\n",
            line("no-such-practice", "01900000-0000-7000-8000-000000000009")
        ),
    );

    let moved = store.move_reads().await.expect("moved");
    assert_eq!(moved, 3, "whole lines of the journals taken");
    let trail = trail_at_the_store(&store, &practice, "ada").await;
    assert_eq!(trail, vec!["patient ada", "patient ada"], "each line once");
    let left = journals_of_reads(&sqlite_directory(&db.url));
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter()
            .all(|path| path.to_string_lossy().contains("-unmoved-reads-")),
        "{left:?}"
    );
}

/// Who read a patient is found from the moment the read is recorded, before and after the
/// index of who read each patient catches up with it (`Store::index_reads`, which a server
/// runs in the background): on SQLite, its runs and spans; on PostgreSQL, the GIN index of
/// each row's patients, whose pending entries (one page here) it moves into the index.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_read_is_on_the_patients_trail_before_and_after_it_is_indexed(#[case] engine: Engine) {
    use practice_api::admin;
    use practice_api::store::audit::{Actor, ActorKind, Read, Reads};
    use practice_api::store::{PoolSettings, Store};

    let Some(db) = crate::helpers::TestDatabase::new(engine).await else {
        return;
    };
    // A store and no server: nothing indexes behind the test's back.
    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("open");
    let practice = admin::practice(&store, None).await.expect("practice").id;
    let read = |operation: &str, resource: &str, patient: Option<&str>| Read {
        operation: operation.into(),
        resource_type: if patient.is_some() {
            "patient"
        } else {
            "label"
        },
        resource_id: resource.into(),
        patient_id: patient.map(Into::into),
    };
    let actor = Actor {
        kind: ActorKind::Token,
        id: "t1".into(),
        name: Some("reader".into()),
    };
    let batch = [
        // A page of two patients, one lookup, and a read that reached no patient.
        Reads {
            practice_id: practice.clone(),
            actor: actor.clone(),
            reads: vec![
                read("patients", "ada", Some("ada")),
                read("patients", "alan", Some("alan")),
            ],
        },
        // Another caller's lookup: a row of its own (a batch's requests by one caller are
        // one row, the first and the last here).
        Reads {
            practice_id: practice.clone(),
            actor: Actor {
                id: "t2".into(),
                ..actor.clone()
            },
            reads: vec![read("patient", "ada", Some("ada"))],
        },
        Reads {
            practice_id: practice.clone(),
            actor,
            reads: vec![read("labels", "vip", None)],
        },
    ];
    store.record_reads(&batch).await.expect("record");

    let trail = |patient: &'static str| trail_at_the_store(&store, &practice, patient);
    let before = (trail("ada").await, trail("alan").await);
    assert_eq!(before.0, ["patient ada", "patients ada"]);
    assert_eq!(before.1, ["patients alan"]);
    assert_eq!(trail("nobody").await, Vec::<String>::new());

    // SQLite indexes one row at a time: the first caller's two requests (the second reached
    // no patient, and adds nothing), the other caller's lookup, then nothing. PostgreSQL
    // empties the GIN index's list of pending entries, a page, then finds nothing more.
    let mut moved = Vec::new();
    loop {
        let n = store.index_reads(1).await.expect("index").rows;
        if n == 0 {
            break;
        }
        moved.push(n);
        // The trail is the same half-way.
        assert_eq!((trail("ada").await, trail("alan").await), before);
    }
    let expected: &[u64] = match engine {
        Engine::Sqlite => &[1, 1],
        Engine::Postgres => &[1],
    };
    assert_eq!(moved, expected);
    assert_eq!((trail("ada").await, trail("alan").await), before);
    store.close().await;
}

/// SQLite: one transaction of the index of who read each patient stops short of a request
/// whose list of reads would take it past its few megabytes of text, and says there is more:
/// a batch of thousands of pages would hold the one writer, and every write, for seconds.
#[tokio::test]
async fn a_batch_of_the_index_of_reads_stops_at_its_size() {
    use practice_api::store::audit::{Actor, ActorKind, Indexed, Read, Reads};

    let Some((db, store, practice)) = store_of_a_file().await else {
        return;
    };
    // Three requests of 25,000 patients' reads each: over 2 MB of text apiece, each by a
    // caller of its own (one caller's requests of a batch are one row).
    let request = |n: usize| Reads {
        practice_id: practice.clone(),
        actor: Actor {
            kind: ActorKind::Token,
            id: format!("t{n}"),
            name: Some("reader".into()),
        },
        reads: (0..25_000)
            .map(|i| {
                let patient = format!("{n}-{i:05}-0000-0000-0000-000000000000");
                Read {
                    operation: "patients".into(),
                    resource_type: "patient",
                    resource_id: patient.clone(),
                    patient_id: Some(patient),
                }
            })
            .collect(),
    };
    store
        .record_reads(&[request(1), request(2), request(3)])
        .await
        .expect("record");
    store.move_reads().await.expect("moved");

    let first = store.index_reads(100).await.expect("index");
    assert_eq!(
        first,
        Indexed {
            rows: 2,
            more: true
        }
    );
    let second = store.index_reads(100).await.expect("index");
    assert_eq!(
        second,
        Indexed {
            rows: 1,
            more: false
        }
    );
    assert_eq!(
        store.index_reads(100).await.expect("index"),
        Indexed::default()
    );
    let indexed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_read_runs")
        .fetch_one(&sqlx::AnyPool::connect(&db.url).await.expect("open"))
        .await
        .expect("count");
    assert_eq!(indexed, 75_000);

    // A batch that reached its number of requests says there may be more too.
    let small = |n: usize| {
        let mut reads = request(n);
        reads.reads.truncate(1);
        reads
    };
    store
        .record_reads(&[small(4), small(5)])
        .await
        .expect("record");
    store.move_reads().await.expect("moved");
    let one = Indexed {
        rows: 1,
        more: true,
    };
    assert_eq!(store.index_reads(1).await.expect("index"), one);
    assert_eq!(store.index_reads(1).await.expect("index"), one);
    assert_eq!(
        store.index_reads(1).await.expect("index"),
        Indexed::default()
    );
    store.close().await;
}

/// SQLite: a patient read in runs of the index spread over many spans is found in every one
/// of them, and each span is noted once a patient, however many of its runs read them; a
/// patient read in no run is found nowhere, and one read in a single run of a span is found
/// in that run alone.
#[tokio::test]
async fn the_index_of_reads_finds_a_patient_in_every_run_of_every_span() {
    use practice_api::store::audit::{Actor, ActorKind, Read, Reads};

    let Some((db, store, practice)) = store_of_a_file().await else {
        return;
    };
    let reads = |patients: &[&str]| Reads {
        practice_id: practice.clone(),
        actor: Actor {
            kind: ActorKind::Token,
            id: "t1".into(),
            name: Some("reader".into()),
        },
        reads: patients
            .iter()
            .map(|patient| Read {
                operation: "patient".into(),
                resource_type: "patient",
                resource_id: (*patient).into(),
                patient_id: Some((*patient).into()),
            })
            .collect(),
    };
    // Ids whose offsets in the runs differ (their last two characters), and one that is no
    // hexadecimal at all.
    let (ada, alan, grace) = (
        "01a21e75-b76a-76a6-832f-08b6135fd849",
        "01a21e75-b76a-76a6-832f-08b88bd3d57e",
        "grace",
    );
    // 200 runs, each one row: ada in every run, alan in every third, grace in run 150 alone.
    for run in 1..=200 {
        let mut patients = vec![ada];
        if run % 3 == 0 {
            patients.push(alan);
        }
        if run == 150 {
            patients.push(grace);
        }
        store
            .record_reads(&[reads(&patients)])
            .await
            .expect("record");
        store.move_reads().await.expect("moved");
        assert_eq!(store.index_reads(100).await.expect("index").rows, 1);
    }
    let pool = sqlx::AnyPool::connect(&db.url).await.expect("open");
    let runs: i64 = sqlx::query_scalar("SELECT runs FROM audit_reads_indexed")
        .fetch_one(&pool)
        .await
        .expect("runs");
    assert_eq!(runs, 200);
    let spans = |patient: &'static str| {
        let pool = pool.clone();
        async move {
            let spans: i64 =
                sqlx::query_scalar("SELECT count(*) FROM audit_read_buckets WHERE patient_id = $1")
                    .bind(patient)
                    .fetch_one(&pool)
                    .await
                    .expect("spans");
            spans
        }
    };
    // 200 runs are four or five spans of 64, whatever the offset.
    assert!((4..=5).contains(&spans(ada).await), "{}", spans(ada).await);
    assert!(
        (4..=5).contains(&spans(alan).await),
        "{}",
        spans(alan).await
    );
    assert_eq!(spans(grace).await, 1);
    // The spans past their last run are closed, each noting its runs; the rest are open.
    // Every span, open or closed, notes the first of its runs that read its patient (`low`):
    // that run has an entry of the patient, and no run of the span before it has one.
    let (open, unnoted, past, misnoted): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM audit_read_buckets INDEXED BY audit_read_buckets_open \
         WHERE runs IS NULL), \
         (SELECT count(*) FROM audit_read_buckets WHERE low IS NULL), \
         (SELECT count(*) FROM audit_read_buckets WHERE runs IS NULL AND ends <= 200), \
         (SELECT count(*) FROM audit_read_buckets b WHERE NOT EXISTS (SELECT 1 \
         FROM audit_read_runs f WHERE f.patient_id = b.patient_id \
         AND f.run = b.ends - 63 + b.low) OR EXISTS (SELECT 1 FROM audit_read_runs f \
         WHERE f.patient_id = b.patient_id AND f.run >= b.ends - 63 \
         AND f.run < b.ends - 63 + b.low))",
    )
    .fetch_one(&pool)
    .await
    .expect("open spans");
    assert_eq!((open, unnoted, past, misnoted), (2, 0, 0, 0));
    // grace's one span is closed (its offset, 31, ends it at run 160): one run noted, the
    // first and the last, run 150.
    let (runs, low, high, bucket): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT runs, low, high, bucket FROM audit_read_buckets WHERE patient_id = 'grace'",
    )
    .fetch_one(&pool)
    .await
    .expect("grace's span");
    assert_eq!((low, high, runs), (low, low, 1 << low));
    assert_eq!(bucket * 64 - 31 + low, 150);

    // Listed a page of 100 at a time, newest first: every read, each once.
    let count = |patient: &'static str| {
        let store = store.clone();
        let practice = practice.clone();
        async move {
            use practice_api::store::PageRequest;
            use practice_api::store::audit::AuditFilter;
            let filter = AuditFilter {
                patient_id: Some(patient.into()),
                ..AuditFilter::default()
            };
            let mut listed = Vec::new();
            for page in 1.. {
                let page = store
                    .practice(&practice)
                    .list_audit_events(
                        &filter,
                        PageRequest {
                            page,
                            page_size: 100,
                        },
                    )
                    .await
                    .expect("events");
                let more = page.has_more;
                listed.extend(page.items.into_iter().map(|event| event.id));
                if !more {
                    break;
                }
            }
            let unique: std::collections::BTreeSet<_> = listed.iter().cloned().collect();
            assert_eq!(unique.len(), listed.len(), "{patient}: listed twice");
            listed.len()
        }
    };
    assert_eq!(count(ada).await, 200);
    assert_eq!(count(alan).await, 66);
    assert_eq!(count(grace).await, 1);
    assert_eq!(count("nobody").await, 0);

    // Spans noted before their first run was (migration 0025's, `low` NULL while open) are
    // read and closed from their span's first run: found the same, and closed the same.
    sqlx::query("UPDATE audit_read_buckets SET low = NULL WHERE runs IS NULL")
        .execute(&pool)
        .await
        .expect("as noted before");
    assert_eq!(count(ada).await, 200);
    assert_eq!(count(alan).await, 66);
    // grace's span of runs 161 to 224 opens at run 201 (its `low`, 40) and stays open until
    // 224: a reader finds every read of it meanwhile.
    for run in 201..=264 {
        store
            .record_reads(&[reads(&[grace])])
            .await
            .expect("record");
        store.move_reads().await.expect("moved");
        assert_eq!(store.index_reads(100).await.expect("index").rows, 1);
        assert_eq!(count(grace).await, run - 199, "after run {run}");
    }
    let low: i64 = sqlx::query_scalar(
        "SELECT low FROM audit_read_buckets WHERE patient_id = 'grace' AND ends = 224",
    )
    .fetch_one(&pool)
    .await
    .expect("grace's second span");
    assert_eq!(low, 40);
    // Every span of ada and alan is closed now, its bits the runs that read them.
    let (open, unnoted, ada_runs, alan_runs): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM audit_read_buckets WHERE runs IS NULL \
         AND patient_id <> 'grace'), \
         (SELECT count(*) FROM audit_read_buckets WHERE low IS NULL), \
         (SELECT count(*) FROM audit_read_buckets b CROSS JOIN audit_read_span_runs k \
         WHERE b.patient_id = $1 AND (b.runs >> k.i) & 1 = 1), \
         (SELECT count(*) FROM audit_read_buckets b CROSS JOIN audit_read_span_runs k \
         WHERE b.patient_id = $2 AND (b.runs >> k.i) & 1 = 1)",
    )
    .bind(ada)
    .bind(alan)
    .fetch_one(&pool)
    .await
    .expect("closed");
    assert_eq!((open, unnoted, ada_runs, alan_runs), (0, 0, 200, 66));
    assert_eq!(count(ada).await, 200);
    assert_eq!(count(alan).await, 66);
    assert_eq!(count(grace).await, 65);
    store.close().await;
}

/// A server on SQLite brings the index of who read each patient up to date behind its reads,
/// within seconds, and the trail reads the same before and after.
#[tokio::test]
async fn an_sqlite_server_indexes_its_reads_behind_them() {
    let app = spawn!(Engine::Sqlite);
    let patient = app.patient("Ada", "Lovelace").await;
    for _ in 0..3 {
        app.ok(
            "query($id: ID!) { patient(id: $id) { firstName } patients { data { id } } }",
            json!({ "id": patient }),
        )
        .await;
    }
    let before = summary(&events(&app, json!({ "p": patient })).await);
    assert_eq!(before.len(), 7, "{before:#?}");

    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&app.database_url)
        .await
        .expect("connect");
    let mut pending: i64 = -1;
    for _ in 0..100 {
        pending = sqlx::query_scalar(
            "SELECT count(*) FROM audit_reads WHERE rowid > \
             (SELECT through FROM audit_reads_indexed)",
        )
        .fetch_one(&mut conn)
        .await
        .expect("count");
        if pending == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(pending, 0, "the server did not index its reads within 10 s");
    let indexed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM audit_read_runs WHERE patient_id = $1")
            .bind(&patient)
            .fetch_one(&mut conn)
            .await
            .expect("count");
    assert_eq!(
        indexed, 3,
        "one entry per row: the requests came one after another, a batch each"
    );
    let _ = conn.close().await;
    assert_eq!(
        summary(&events(&app, json!({ "p": patient })).await),
        before
    );
}

/// An SQLite file whose reads were waiting for the index in the table of the release before
/// (migration 0021's `audit_reads_unindexed`) is upgraded with them indexed: the patient's
/// trail still lists every read, and nothing is left for the index to take.
#[tokio::test]
async fn reads_waiting_for_the_index_survive_the_upgrade() {
    use practice_api::store::{PoolSettings, Store};

    let Some(db) = crate::helpers::TestDatabase::new(Engine::Sqlite).await else {
        return;
    };
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&format!("{}?mode=rwc", db.url))
        .await
        .expect("open");
    crate::helpers::migrate_to(&pool, Engine::Sqlite, 23).await;
    let read = |id: &str, patient: &str| {
        format!(
            "INSERT INTO audit_reads (practice_id, id, at, actor_type, actor_id, actor_name, \
             reads) VALUES ('p1', '{id}', 1, 'token', 't1', 'reader', \
             '[[\"patient\",\"patient\",\"{patient}\",\"{patient}\"]]')"
        )
    };
    for statement in [
        "INSERT INTO practices (id, name, is_default, created_at) VALUES ('p1', 'Clinic', 1, 0)"
            .to_string(),
        // Indexed already.
        read("r1", "ada"),
        "INSERT INTO audit_read_patients (practice_id, patient_id, read_id) \
         VALUES ('p1', 'ada', 'r1')"
            .to_string(),
        // Waiting for the index.
        read("r2", "ada"),
        read("r3", "alan"),
        "INSERT INTO audit_reads_unindexed (practice_id, read_id) VALUES ('p1', 'r2'), ('p1', 'r3')"
            .to_string(),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .expect("old rows");
    }
    pool.close().await;

    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("upgrade");
    let trail = |patient: &'static str| trail_at_the_store(&store, "p1", patient);
    assert_eq!(store.index_reads(100).await.expect("index").rows, 0);
    let indexed: Vec<(String, String)> =
        sqlx::query_as("SELECT patient_id, read_id FROM audit_read_patients ORDER BY 1, 2")
            .fetch_all(&sqlx::AnyPool::connect(&db.url).await.expect("open"))
            .await
            .expect("index");
    assert_eq!(
        indexed,
        [("ada", "r1"), ("ada", "r2"), ("alan", "r3")].map(|(p, r)| (p.to_string(), r.to_string()))
    );
    assert_eq!(trail("ada").await, ["patient ada", "patient ada"]);
    assert_eq!(trail("alan").await, ["patient alan"]);
    store.close().await;
}

/// PostgreSQL: who read each patient before migration 0026 stays in `audit_read_patients`
/// and is listed with the reads recorded after the upgrade, whose rows list their patients
/// instead (none listed, NULL, for a read that reached no patient: the GIN index leaves such
/// rows out); nothing new goes into `audit_read_patients`, and the pending entries' move
/// into the index leaves the trail as it was. Another practice's read of the same id that
/// lists the same patient adds nothing to this practice's trail; a server whose neighbour is
/// moving the pending entries does nothing meanwhile instead of waiting.
#[tokio::test]
async fn reads_of_patients_from_before_their_lists_stay_on_the_trail() {
    use practice_api::store::audit::{Actor, ActorKind, Read, Reads};
    use practice_api::store::{PoolSettings, Store};

    let Some(db) = crate::helpers::TestDatabase::new(Engine::Postgres).await else {
        return;
    };
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.expect("open");
    crate::helpers::migrate_to(&pool, Engine::Postgres, 25).await;
    for statement in [
        "INSERT INTO practices (id, name, is_default, created_at) VALUES ('p1', 'Clinic', 1, 0)",
        "INSERT INTO audit_reads (practice_id, id, at, actor_type, actor_id, actor_name, reads) \
         VALUES ('p1', 'r0', 1, 'token', 't0', 'reader', \
         '[[\"patient\",\"patient\",\"ada\",\"ada\"]]')",
        "INSERT INTO audit_read_patients (practice_id, patient_id, read_id) \
         VALUES ('p1', 'ada', 'r0')",
    ] {
        sqlx::query(statement)
            .execute(&pool)
            .await
            .expect("old rows");
    }

    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("upgrade");
    let by = |id: &str| Actor {
        kind: ActorKind::Token,
        id: id.into(),
        name: Some("reader".into()),
    };
    let read = |resource_type: &'static str, id: &str, patient: Option<&str>| Read {
        operation: resource_type.into(),
        resource_type,
        resource_id: id.into(),
        patient_id: patient.map(Into::into),
    };
    let batch = [
        Reads {
            practice_id: "p1".into(),
            actor: by("t1"),
            reads: vec![
                read("patient", "ada", Some("ada")),
                read("patient", "alan", Some("alan")),
                read("patient", "ada", Some("ada")),
            ],
        },
        Reads {
            practice_id: "p1".into(),
            actor: by("t2"),
            reads: vec![read("label", "vip", None)],
        },
    ];
    store.record_reads(&batch).await.expect("record");

    // Another practice's row of reads under the id of p1's old one, listing the same patient.
    for statement in [
        "INSERT INTO practices (id, name, is_default, created_at) VALUES ('p2', 'Other', 0, 0)",
        "INSERT INTO audit_reads (practice_id, id, at, actor_type, actor_id, actor_name, reads, \
         patients) VALUES ('p2', 'r0', 2, 'token', 't9', 'other', \
         '[[\"patient\",\"patient\",\"ada\",\"ada\"]]', ARRAY['ada'])",
    ] {
        sqlx::query(statement)
            .execute(&pool)
            .await
            .expect("other practice");
    }

    let trail = |patient: &'static str| trail_at_the_store(&store, "p1", patient);
    let ada = ["patient ada", "patient ada", "patient ada"];
    assert_eq!(trail("ada").await, ada);
    assert_eq!(trail("alan").await, ["patient alan"]);
    let lists: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT actor_id, array_to_string(patients, ',') FROM audit_reads \
         WHERE practice_id = 'p1' ORDER BY actor_id",
    )
    .fetch_all(&pool)
    .await
    .expect("lists");
    let expected = [("t0", None), ("t1", Some("ada,alan")), ("t2", None)];
    assert_eq!(
        lists,
        expected.map(|(actor, patients)| (actor.to_string(), patients.map(str::to_string)))
    );
    let (entries,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM audit_read_patients")
        .fetch_one(&pool)
        .await
        .expect("entries");
    assert_eq!(entries, 1, "only the entry from before the upgrade");

    // Another server moving the pending entries: this one does nothing, at once.
    let mut neighbour = pool.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(practice_api::store::audit::CLEANING_READS)
        .execute(&mut *neighbour)
        .await
        .expect("lock");
    let waited = tokio::time::timeout(Duration::from_secs(5), store.index_reads(100)).await;
    assert_eq!(waited.expect("no wait").expect("index").rows, 0);
    neighbour.rollback().await.expect("rollback");
    assert_eq!(store.index_reads(100).await.expect("index").rows, 1);
    assert_eq!(store.index_reads(100).await.expect("index").rows, 0);
    assert_eq!(trail("ada").await, ada);
    assert_eq!(trail("alan").await, ["patient alan"]);
    assert_eq!(trail("nobody").await, Vec::<String>::new());
    pool.close().await;
    store.close().await;
}

/// The trail of `patient` as the store lists it to the practice: "operation resource" each,
/// newest first.
async fn trail_at_the_store(
    store: &practice_api::store::Store,
    practice: &str,
    patient: &str,
) -> Vec<String> {
    use practice_api::store::PageRequest;
    use practice_api::store::audit::AuditFilter;
    let filter = AuditFilter {
        patient_id: Some(patient.into()),
        ..AuditFilter::default()
    };
    let page = PageRequest {
        page: 1,
        page_size: 100,
    };
    store
        .practice(practice)
        .list_audit_events(&filter, page)
        .await
        .expect("events")
        .items
        .iter()
        .map(|e| {
            let operation = e.operation.clone().unwrap_or_default();
            let resource = e.resource_id.clone().unwrap_or_default();
            format!("{operation} {resource}")
        })
        .collect()
}
