//! Several instances on one database behave as one: what one writes the other reads at once,
//! a token revoked through one is refused by the other, and the no-overlap rule holds across
//! them. PostgreSQL is the engine for this; SQLite serves several processes on one machine too.

use rstest::rstest;
use serde_json::{Value, json};

use crate::helpers::{Engine, PASSWORD, error_code};
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
    let refused = one.gql(Some(&session), query, json!({})).await;
    assert_eq!(error_code(&refused), "UNAUTHENTICATED", "{refused}");

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
    let refused = two.gql(Some(&token), query, json!({})).await;
    assert_eq!(error_code(&refused), "UNAUTHENTICATED", "{refused}");
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
