//! Two practices on one database: neither sees, finds nor changes the other's records.

use serde_json::{Value, json};

use rstest::rstest;

use crate::helpers::{Engine, PASSWORD, error_code};
use crate::spawn;

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn practices_are_isolated(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (other_id, other) = app.other_practice("Other clinic").await;
    let ours = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "Jane", "last": "Ours", "email": "jane@ours.example" }),
        )
        .await;
    let label = app.label("VIP").await;
    let theirs = app
        .patient_with(&other, json!({ "first": "Jane", "last": "Theirs" }))
        .await;

    // By id.
    let body = app
        .gql(
            Some(&other),
            "query($id: ID!) { patient(id: $id) { id } }",
            json!({ "id": ours }),
        )
        .await;
    assert_eq!(body["data"], json!({ "patient": null }));
    assert!(body.get("errors").is_none(), "{body}");
    // By search and list.
    let body = app
        .gql(
            Some(&other),
            "{ patients(search: \"jane\") { data { id } } labels { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        body["data"]["patients"]["data"],
        json!([{ "id": theirs }]),
        "{body}"
    );
    assert_eq!(body["data"]["labels"]["data"], json!([]), "{body}");
    // By mutation: not found, nothing changed.
    for (mutation, vars) in [
        (
            "mutation($id: ID!) { updatePatient(id: $id, patientData: { first: \"X\" }) { data { id } error } }",
            json!({ "id": ours }),
        ),
        (
            "mutation($id: ID!) { deletePatient(id: $id) { data { id } error } }",
            json!({ "id": ours }),
        ),
        (
            "mutation($id: ID!) { archivePatient(id: $id) { data { id } error } }",
            json!({ "id": ours }),
        ),
    ] {
        let body = app.gql(Some(&other), mutation, vars).await;
        let payload = body["data"]
            .as_object()
            .expect("data")
            .values()
            .next()
            .expect("field");
        assert_eq!(payload["data"], Value::Null, "{body}");
        assert_eq!(
            payload["error"],
            json!(format!("No patient with id {ours}")),
            "{body}"
        );
    }
    // Their label cannot go on our patient, nor ours on theirs.
    let body = app
        .gql(
            Some(&other),
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id } error } }",
            json!({ "p": theirs, "l": label }),
        )
        .await;
    assert!(
        body["data"]["addPatientLabel"]["error"]
            .as_str()
            .expect("error")
            .starts_with("No label with id"),
        "{body}"
    );
    let body = app
        .gql(
            Some(&other),
            "mutation($l: ID!) { updateLabel(id: $l, title: \"Hijacked\") { error } deleteLabel(id: $l) { error } }",
            json!({ "l": label }),
        )
        .await;
    assert_eq!(
        body["data"]["updateLabel"]["error"],
        json!(format!("No label with id {label}"))
    );
    assert_eq!(
        body["data"]["deleteLabel"]["error"],
        json!(format!("No label with id {label}"))
    );

    // Ours is untouched.
    let data = app
        .ok(
            "query($id: ID!) { patient(id: $id) { firstName deleted archived } labels { data { title } } }",
            json!({ "id": ours }),
        )
        .await;
    assert_eq!(
        data["patient"],
        json!({ "firstName": "Jane", "deleted": false, "archived": false })
    );
    assert_eq!(data["labels"]["data"], json!([{ "title": "VIP" }]));

    // Each names its own practice.
    let names = app
        .gql(Some(&other), "{ currentPractice { id name } }", json!({}))
        .await;
    assert_eq!(
        names["data"]["currentPractice"],
        json!({ "id": other_id, "name": "Other clinic" })
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn staff_and_tokens_belong_to_their_practice(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (other_id, other) = app.other_practice("Other clinic").await;
    let email = app.user_in(&other_id, "admin", "boss@other.example").await;
    let session = app.sign_in(&email, PASSWORD).await;
    // Users and tokens of one practice are not listed in the other.
    let ours = app
        .ok("{ users { data { email } } apiTokens { name } }", json!({}))
        .await;
    assert_eq!(ours["users"]["data"], json!([]));
    let theirs = app
        .gql(
            Some(&session),
            "{ users { data { email } } currentPractice { id } }",
            json!({}),
        )
        .await;
    assert_eq!(theirs["data"]["users"]["data"], json!([{ "email": email }]));
    assert_eq!(theirs["data"]["currentPractice"]["id"], json!(other_id));
    // A token id of one practice cannot be revoked from the other.
    let tokens = app
        .gql(Some(&other), "{ apiTokens { id } }", json!({}))
        .await;
    let their_token = tokens["data"]["apiTokens"][0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let revoke = app
        .ok(
            "mutation($id: ID!) { revokeApiToken(id: $id) { error } }",
            json!({ "id": their_token }),
        )
        .await;
    assert_eq!(
        revoke["revokeApiToken"]["error"],
        json!(format!("No API token with id {their_token}"))
    );
    let still = app
        .gql(Some(&other), "{ currentPractice { id } }", json!({}))
        .await;
    assert_eq!(error_code(&still), "", "{still}");
    // A staff email is unique across practices.
    let dup = practice_api::admin::create_user(
        &app.store,
        &app.practice_id,
        practice_api::admin::NewStaff {
            email: "Boss@Other.example",
            title: None,
            first_name: "A",
            last_name: "B",
            role: "admin",
            is_doctor: false,
            password: PASSWORD,
        },
    )
    .await;
    assert!(dup.is_err());
}
