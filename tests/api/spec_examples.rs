//! The examples of the specification, sent as the specification shows them.

use serde_json::json;

use rstest::rstest;

use crate::helpers::{Engine, PASSWORD};
use crate::spawn;

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn sign_in_without_a_token_returns_a_token_that_works(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    // No x-token header on this call.
    let body = app
        .gql(
            None,
            &format!(
                "mutation {{ signIn(email: \"{email}\", password: \"{PASSWORD}\") {{ token }} }}"
            ),
            json!(null),
        )
        .await;
    let token = body["data"]["signIn"]["token"].as_str().expect("token");
    let me = app
        .gql(Some(token), "{ currentUser { email role } }", json!({}))
        .await;
    assert_eq!(
        me["data"]["currentUser"],
        json!({ "email": email, "role": "admin" })
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn patient_query_with_a_token(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "Jane", "last": "Doe", "email": "jane@example.com" }),
        )
        .await;
    let body = app
        .gql(
            Some(&app.admin_token),
            &format!("query {{ patient(id: \"{id}\") {{ firstName email }} }}"),
            json!(null),
        )
        .await;
    assert_eq!(
        body,
        json!({
            "data": { "patient": { "firstName": "Jane", "email": "jane@example.com" } },
            // Every response says what the query cost: patient(1) + firstName + email.
            "extensions": { "cost": { "requested": 3, "limit": 10_000 } }
        })
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn named_add_patient_label_with_variables(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Jane", "Doe").await;
    let label = app.label("VIP").await;
    let raw = app
        .post_json(
            Some(&app.admin_token),
            &json!({
                "query": "mutation addPatientLabel($patientId: ID!, $labelReferenceId: ID!) {\n  addPatientLabel(patientId: $patientId, labelReferenceId: $labelReferenceId) {\n    data { id }\n    error\n  }\n}",
                "variables": { "patientId": patient, "labelReferenceId": label },
                "operationName": "addPatientLabel"
            }),
        )
        .await;
    assert_eq!(
        raw.body["data"],
        json!({ "addPatientLabel": { "data": { "id": patient }, "error": null } })
    );
    assert!(raw.body.get("errors").is_none(), "{}", raw.body);
    // The label is now on the patient.
    let data = app
        .ok(
            "query($id: ID!) { patient(id: $id) { labels { referenceId text color } } }",
            json!({ "id": patient }),
        )
        .await;
    assert_eq!(
        data["patient"]["labels"],
        json!([{ "referenceId": label, "text": "VIP", "color": "#123456" }])
    );
}
