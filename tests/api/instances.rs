//! Several instances on one database behave as one: what one writes the other reads at once,
//! a token revoked through one is refused by the other, and the no-overlap rule holds across
//! them. PostgreSQL is the engine for this; SQLite serves several processes on one machine too.

use rstest::rstest;
use serde_json::{Value, json};

use crate::helpers::{Engine, PASSWORD, error_code, refused_within_100_ms};
use crate::spawn;

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_write_through_one_is_read_through_the_other(#[case] engine: Engine) {
    let one = spawn!(engine);
    let two = one.another_instance().await;
    let id = one.patient("Jane", "Doe").await;
    let data = two
        .ok(
            "query($id: ID!) { patient(id: $id) { firstName } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["patient"]["firstName"], "Jane");
    let label = two.label("VIP").await;
    let added = one
        .ok(
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }",
            json!({ "p": id, "l": label }),
        )
        .await;
    assert_eq!(added["addPatientLabel"]["error"], Value::Null);
    let data = two
        .ok(
            "query($id: ID!) { patient(id: $id) { labels { text } } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["patient"]["labels"], json!([{ "text": "VIP" }]));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_revocation_through_one_holds_on_the_other(#[case] engine: Engine) {
    let one = spawn!(engine);
    let two = one.another_instance().await;
    let query = "{ patients { data { id } } }";

    // A session signed in on one, used on both, signed out on the other.
    let email = one.user("practitioner", "pat@example.com").await;
    let session = one.sign_in(&email, PASSWORD).await;
    for app in [&one, &two] {
        let body = app.gql(Some(&session), query, json!({})).await;
        assert!(body.get("errors").is_none(), "{body}");
    }
    let out = two
        .gql(Some(&session), "mutation { signOut }", json!({}))
        .await;
    assert_eq!(out["data"]["signOut"], json!(true));
    refused_within_100_ms(&one, &session, query, "UNAUTHENTICATED").await;

    // An API token revoked on one is refused by the other at its next request.
    let made = one
        .ok(
            "mutation { createApiToken(name: \"crm\", permissions: [\"patients:read\"]) { token data { id } } }",
            json!({}),
        )
        .await;
    let token = made["createApiToken"]["token"]
        .as_str()
        .expect("token")
        .to_string();
    let id = made["createApiToken"]["data"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let body = two.gql(Some(&token), query, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    one.ok(
        "mutation($id: ID!) { revokeApiToken(id: $id) { error } }",
        json!({ "id": id }),
    )
    .await;
    refused_within_100_ms(&two, &token, query, "UNAUTHENTICATED").await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn one_slot_is_booked_once_across_instances(#[case] engine: Engine) {
    let one = spawn!(engine);
    let two = one.another_instance().await;
    let doctor = one.doctor("Grace", "Hopper").await;
    let mut bodies = Vec::new();
    for i in 0..20 {
        let patient = one.patient("Rush", &format!("Patient{i}")).await;
        bodies.push(json!({
            "query": "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id } error } }",
            "variables": { "d": {
                "patient": patient, "doctor": doctor,
                "start": "2031-05-06T10:00:00Z", "end": "2031-05-06T10:30:00Z"
            } }
        }));
    }
    let sends = bodies.iter().enumerate().map(|(i, body)| {
        let app = if i % 2 == 0 { &one } else { &two };
        app.post_json(Some(&app.admin_token), body)
    });
    let results = futures_util::future::join_all(sends).await;
    let mut booked = 0;
    for raw in &results {
        assert!(
            raw.body.get("errors").is_none(),
            "no internal error: {}",
            raw.body
        );
        let payload = &raw.body["data"]["createBooking"];
        if payload["error"].is_null() {
            booked += 1;
        } else {
            let error = payload["error"].as_str().expect("error");
            assert!(error.contains("is already booked"), "{error}");
        }
    }
    assert_eq!(booked, 1);
}

/// PostgreSQL: each instance keeps the tokens it has found in memory, and forgets them at any
/// change to a token or a staff user made anywhere (the change's commit notifies every
/// instance). A change made straight in the database is heard as well; and while an
/// instance's notifications are cut off, it asks the database at every request, so a change
/// it could not hear of still holds at once.
#[tokio::test]
async fn a_token_revoked_anywhere_is_refused_at_once_by_every_instance() {
    let one = spawn!(Engine::Postgres);
    let two = one.another_instance().await;
    let query = "{ patients { data { id } } }";
    sqlx::any::install_default_drivers();
    let mut db = <sqlx::AnyConnection as sqlx::Connection>::connect(&one.database_url)
        .await
        .expect("connect");
    let revoke = "UPDATE tokens SET revoked_at = 1 WHERE permissions = $1";

    // Found by both, then revoked by hand in the database: both hear of it.
    let token = one.token(&["patients:read"]).await;
    for app in [&one, &two] {
        let body = app.gql(Some(&token), query, json!({})).await;
        assert!(body.get("errors").is_none(), "{body}");
    }
    sqlx::query(revoke)
        .bind("patients:read")
        .execute(&mut db)
        .await
        .expect("revoke");
    // Heard within milliseconds, at the NOTIFY of its commit (a change through the API waits
    // until its own instance has heard it, and is refused at once: the test above).
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    for app in [&one, &two] {
        let refused = app.gql(Some(&token), query, json!({})).await;
        assert_eq!(error_code(&refused), "UNAUTHENTICATED", "{refused}");
    }

    // The notifications cut off (their connections ended by the database), and a token
    // revoked without a notification (its trigger switched off meanwhile): the
    // instances that found it before ask the database, and refuse it.
    let token = one.token(&["bookings:read"]).await;
    let bookings = "{ bookings { data { id } } }";
    for app in [&one, &two] {
        let body = app.gql(Some(&token), bookings, json!({})).await;
        assert!(body.get("errors").is_none(), "{body}");
    }
    let ended: Vec<(bool,)> = sqlx::query_as(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
         AND query LIKE 'LISTEN%practice_credentials%'",
    )
    .fetch_all(&mut db)
    .await
    .expect("terminate");
    assert_eq!(
        ended.len(),
        2,
        "each instance listens on a connection of its own"
    );
    // The instances see their connection end at once; a moment for them to act on it.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    sqlx::raw_sql("ALTER TABLE tokens DISABLE TRIGGER tokens_notify")
        .execute(&mut db)
        .await
        .expect("no trigger");
    sqlx::query(revoke)
        .bind("bookings:read")
        .execute(&mut db)
        .await
        .expect("revoke");
    sqlx::raw_sql("ALTER TABLE tokens ENABLE ALWAYS TRIGGER tokens_notify")
        .execute(&mut db)
        .await
        .expect("the trigger again");
    for app in [&one, &two] {
        let refused = app.gql(Some(&token), bookings, json!({})).await;
        assert_eq!(error_code(&refused), "UNAUTHENTICATED", "{refused}");
    }

    // Listening again a second later, they serve tokens as before.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let token = one.token(&["patients:read"]).await;
    for app in [&one, &two] {
        let body = app.gql(Some(&token), query, json!({})).await;
        assert!(body.get("errors").is_none(), "{body}");
    }
    let listening: (i64,) = sqlx::query_as(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
         AND query LIKE 'LISTEN%practice_credentials%'",
    )
    .fetch_one(&mut db)
    .await
    .expect("count");
    assert_eq!(listening.0, 2, "both listen again");
}
