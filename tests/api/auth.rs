//! Tokens, sign-in and permissions.

use std::time::Duration;

use practice_api::config::ServeConfig;
use serde_json::{Value, json};

use rstest::rstest;

use crate::helpers::{Engine, PASSWORD, error_code, error_message};
use crate::spawn;

const PATIENT: &str = "query($id: ID!) { patient(id: $id) { id firstName labels { text } } }";
const PATIENTS: &str = "{ patients { data { id } } }";
const CREATE_PATIENT: &str =
    "mutation { createPatient(patientData: { first: \"A\", last: \"B\" }) { data { id } error } }";

fn assert_forbidden(body: &Value, permission: &str) {
    assert_eq!(error_code(body), "FORBIDDEN", "{body}");
    assert!(
        error_message(body) == format!("Missing permission {permission}"),
        "{body}"
    );
}

fn assert_unauthenticated(body: &Value, says: &str) {
    assert_eq!(error_code(body), "UNAUTHENTICATED", "{body}");
    assert!(error_message(body).contains(says), "{body}");
    assert!(body.get("data").is_none(), "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_token_for_the_patient_query_alone(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let token = app.token(&["query:patient"]).await;

    let body = app.gql(Some(&token), PATIENT, json!({ "id": id })).await;
    assert_eq!(body["data"]["patient"]["firstName"], "Jane", "{body}");
    assert!(
        body.get("errors").is_none(),
        "labels are part of the patient: {body}"
    );

    let refused = app.gql(Some(&token), PATIENTS, json!({})).await;
    assert_forbidden(&refused, "patients:read");
    assert_eq!(
        refused["errors"][0]["extensions"],
        json!({ "code": "FORBIDDEN", "permission": "patients:read", "alternatives": ["query:patients"] })
    );
    assert_forbidden(
        &app.gql(Some(&token), CREATE_PATIENT, json!({})).await,
        "patients:write",
    );
    assert_forbidden(
        &app.gql(Some(&token), "{ labels { data { id } } }", json!({}))
            .await,
        "labels:read",
    );
    assert_forbidden(
        &app.gql(Some(&token), "{ users { data { id } } }", json!({}))
            .await,
        "users:read",
    );
    assert_forbidden(
        &app.gql(Some(&token), "{ apiTokens { id } }", json!({}))
            .await,
        "settings",
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_bookings_token_gets_no_patient_data(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let token = app.token(&["bookings:read", "bookings:write"]).await;
    let body = app.gql(Some(&token), PATIENT, json!({ "id": id })).await;
    assert_forbidden(&body, "patients:read");
    assert_eq!(body["data"]["patient"], Value::Null, "{body}");
    assert_forbidden(
        &app.gql(Some(&token), PATIENTS, json!({})).await,
        "patients:read",
    );
    let add = app
        .gql(
            Some(&token),
            "mutation($p: ID!) { addPatientLabel(patientId: $p, labelReferenceId: \"x\") { error } }",
            json!({ "p": id }),
        )
        .await;
    assert_forbidden(&add, "patients:write");
    // It is a valid token all the same.
    let me = app
        .gql(Some(&token), "{ currentPractice { name } }", json!({}))
        .await;
    assert_eq!(me["data"]["currentPractice"]["name"], "My practice", "{me}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_everything_token_does_everything(#[case] engine: Engine) {
    let app = spawn!(engine);
    let token = app.token(&["*"]).await;
    let id = app
        .patient_with(&token, json!({ "first": "A", "last": "B" }))
        .await;
    let body = app
        .gql(
            Some(&token),
            "query($id: ID!) { patient(id: $id) { id } patients { data { id } } labels { data { id } } users { data { id } } apiTokens { id } }",
            json!({ "id": id }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(body["data"]["patient"]["id"], json!(id));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn missing_unknown_and_malformed_tokens_are_unauthenticated(#[case] engine: Engine) {
    let app = spawn!(engine);
    assert_unauthenticated(&app.gql(None, PATIENTS, json!({})).await, "needs a token");
    assert_unauthenticated(
        &app.gql(Some("   "), PATIENTS, json!({})).await,
        "needs a token",
    );
    assert_unauthenticated(
        &app.gql(Some("nonsense"), PATIENTS, json!({})).await,
        "not valid",
    );
    let forged = format!("pa_{}_{}", app.practice_id, "0".repeat(64));
    assert_unauthenticated(
        &app.gql(Some(&forged), PATIENTS, json!({})).await,
        "not valid",
    );
    // Introspection needs a token too.
    let intro = app
        .gql(None, "{ __schema { types { name } } }", json!({}))
        .await;
    assert_unauthenticated(&intro, "needs a token");
    let intro = app
        .gql(
            Some(&app.admin_token),
            "{ __schema { queryType { name } } }",
            json!({}),
        )
        .await;
    assert_eq!(intro["data"]["__schema"]["queryType"]["name"], "Query");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn wrong_credentials_say_the_same_whether_or_not_the_email_exists(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    let sign_in = "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token user { id } error } }";
    let wrong_password = app
        .gql(
            None,
            sign_in,
            json!({ "e": email, "p": "not the password" }),
        )
        .await;
    let unknown_email = app
        .gql(
            None,
            sign_in,
            json!({ "e": "nobody@example.com", "p": PASSWORD }),
        )
        .await;
    assert_eq!(wrong_password, unknown_email);
    assert_eq!(
        wrong_password["data"]["signIn"],
        json!({ "token": null, "user": null, "error": "The email or password is incorrect" })
    );
    // The email is matched case-insensitively.
    app.sign_in("ADA@Example.com", PASSWORD).await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn sign_in_tokens_expire(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            user_token_ttl: Duration::from_secs(1),
            ..crate::helpers::test_config()
        }
    );
    let email = app.user("admin", "ada@example.com").await;
    let token = app.sign_in(&email, PASSWORD).await;
    let body = app.gql(Some(&token), PATIENTS, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_unauthenticated(&app.gql(Some(&token), PATIENTS, json!({})).await, "expired");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn api_tokens_expire(#[case] engine: Engine) {
    let app = spawn!(engine);
    let expires = chrono::Utc::now() + chrono::Duration::milliseconds(1200);
    let made = app
        .ok(
            "mutation($at: DateTime) { createApiToken(name: \"short\", permissions: [\"patients:read\"], expiresAt: $at) { token data { expiresAt } error } }",
            json!({ "at": expires.to_rfc3339() }),
        )
        .await;
    let token = made["createApiToken"]["token"]
        .as_str()
        .expect("token")
        .to_string();
    let body = app.gql(Some(&token), PATIENTS, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_unauthenticated(&app.gql(Some(&token), PATIENTS, json!({})).await, "expired");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn sign_out_ends_the_session_at_once(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("receptionist", "rosa@example.com").await;
    let token = app.sign_in(&email, PASSWORD).await;
    let other_session = app.sign_in(&email, PASSWORD).await;
    let out = app
        .gql(Some(&token), "mutation { signOut }", json!({}))
        .await;
    assert_eq!(out["data"]["signOut"], json!(true), "{out}");
    assert_unauthenticated(&app.gql(Some(&token), PATIENTS, json!({})).await, "revoked");
    // Only that session ended.
    let body = app.gql(Some(&other_session), PATIENTS, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    // An API token cannot sign out.
    let api = app
        .gql(Some(&app.admin_token), "mutation { signOut }", json!({}))
        .await;
    assert_eq!(error_code(&api), "BAD_USER_INPUT", "{api}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn revoked_api_tokens_are_refused_on_the_next_request(#[case] engine: Engine) {
    let app = spawn!(engine);
    let made = app
        .ok(
            "mutation { createApiToken(name: \"widget\", permissions: [\"patients:read\"]) { token data { id name permissions revoked } error } }",
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
    assert_eq!(
        made["createApiToken"]["data"]["permissions"],
        json!(["patients:read"])
    );
    let body = app.gql(Some(&token), PATIENTS, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");

    let listed = app
        .ok("{ apiTokens { id name lastUsedAt revoked } }", json!({}))
        .await;
    let entry = listed["apiTokens"]
        .as_array()
        .expect("list")
        .iter()
        .find(|t| t["id"] == json!(id))
        .cloned()
        .expect("listed");
    assert_eq!(entry["revoked"], json!(false));

    let revoked = app
        .ok(
            "mutation($id: ID!) { revokeApiToken(id: $id) { data { revoked } error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(revoked["revokeApiToken"]["data"]["revoked"], json!(true));
    assert_unauthenticated(&app.gql(Some(&token), PATIENTS, json!({})).await, "revoked");

    let unknown = app
        .ok(
            "mutation { revokeApiToken(id: \"nope\") { data { id } error } }",
            json!({}),
        )
        .await;
    assert_eq!(
        unknown["revokeApiToken"]["error"],
        "No API token with id nope"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_token_can_only_grant_what_it_holds(#[case] engine: Engine) {
    let app = spawn!(engine);
    let settings = app.token(&["settings", "patients:read"]).await;
    let create = |perms: Value| {
        let app = &app;
        let settings = settings.clone();
        async move {
            app.gql(
                Some(&settings),
                "mutation($p: [String!]!) { createApiToken(name: \"x\", permissions: $p) { token error } }",
                json!({ "p": perms }),
            )
            .await
        }
    };
    assert_forbidden(&create(json!(["*"])).await, "*");
    assert_forbidden(&create(json!(["patients:write"])).await, "patients:write");
    let fine = create(json!(["patients:read"])).await;
    assert!(
        fine["data"]["createApiToken"]["token"].is_string(),
        "{fine}"
    );
    let unknown = create(json!(["patients:delete"])).await;
    assert_eq!(error_code(&unknown), "BAD_USER_INPUT", "{unknown}");
    let no_such_op = app
        .gql(
            Some(&app.admin_token),
            "mutation { createApiToken(name: \"x\", permissions: [\"query:nothing\"]) { token } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&no_such_op), "BAD_USER_INPUT", "{no_such_op}");
    assert!(
        error_message(&no_such_op).contains("nothing"),
        "{no_such_op}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn staff_roles_decide_what_a_signed_in_user_may_do(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Jane", "Doe").await;
    let receptionist = app
        .sign_in(
            &app.user("receptionist", "rosa@example.com").await,
            PASSWORD,
        )
        .await;
    let practitioner = app
        .sign_in(
            &app.user("practitioner", "grace@example.com").await,
            PASSWORD,
        )
        .await;

    // Receptionist: patients and labels read, users read; no patient writes, no settings.
    let read = app
        .gql(Some(&receptionist), PATIENT, json!({ "id": patient }))
        .await;
    assert_eq!(read["data"]["patient"]["firstName"], "Jane", "{read}");
    let users = app
        .gql(
            Some(&receptionist),
            "{ users { data { email } } }",
            json!({}),
        )
        .await;
    assert!(users.get("errors").is_none(), "{users}");
    assert_forbidden(
        &app.gql(Some(&receptionist), CREATE_PATIENT, json!({}))
            .await,
        "patients:write",
    );
    assert_forbidden(
        &app.gql(
            Some(&receptionist),
            "mutation { createLabel(title: \"X\") { error } }",
            json!({}),
        )
        .await,
        "labels:write",
    );
    assert_forbidden(
        &app.gql(Some(&receptionist), "{ apiTokens { id } }", json!({}))
            .await,
        "settings",
    );

    // Practitioner: patients and labels read and write; no settings.
    let created = app
        .gql(Some(&practitioner), CREATE_PATIENT, json!({}))
        .await;
    assert!(
        created["data"]["createPatient"]["data"]["id"].is_string(),
        "{created}"
    );
    let label = app
        .gql(
            Some(&practitioner),
            "mutation { createLabel(title: \"X\") { data { id } } }",
            json!({}),
        )
        .await;
    assert!(
        label["data"]["createLabel"]["data"]["id"].is_string(),
        "{label}"
    );
    assert_forbidden(
        &app.gql(Some(&practitioner), "{ apiTokens { id } }", json!({}))
            .await,
        "settings",
    );

    let me = app
        .gql(
            Some(&practitioner),
            "{ currentUser { email role isDoctor } }",
            json!({}),
        )
        .await;
    assert_eq!(
        me["data"]["currentUser"],
        json!({ "email": "grace@example.com", "role": "practitioner", "isDoctor": false })
    );
    let api = app
        .gql(
            Some(&app.admin_token),
            "{ currentUser { email } }",
            json!({}),
        )
        .await;
    assert_eq!(api["data"]["currentUser"], Value::Null, "{api}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn secrets_are_stored_only_as_hashes(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    let session = app.sign_in(&email, PASSWORD).await;
    let made = app
        .ok(
            "mutation { createApiToken(name: \"t\", permissions: [\"*\"]) { token } }",
            json!({}),
        )
        .await;
    let api = made["createApiToken"]["token"]
        .as_str()
        .expect("token")
        .to_string();
    let created = app
        .ok(
            "mutation { createUser(input: { email: \"eve@example.com\", firstName: \"E\", lastName: \"V\", role: \"receptionist\" }) { setPasswordToken } }",
            json!({}),
        )
        .await;
    let link = created["createUser"]["setPasswordToken"]
        .as_str()
        .expect("link")
        .to_string();
    let text = match engine {
        // Every byte the database wrote, WAL included.
        Engine::Sqlite => {
            app.store.close().await;
            let mut bytes = Vec::new();
            for entry in std::fs::read_dir(app.dir()).expect("dir") {
                bytes.extend(std::fs::read(entry.expect("entry").path()).expect("read"));
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
        // Every column of the tables that hold credentials.
        Engine::Postgres => {
            let pool = sqlx::AnyPool::connect(&app.database_url)
                .await
                .expect("connect");
            let rows: Vec<(String,)> = sqlx::query_as(
                "SELECT t::text FROM tokens t UNION ALL SELECT u::text FROM users u \
                 UNION ALL SELECT l::text FROM user_links l",
            )
            .fetch_all(&pool)
            .await
            .expect("dump");
            rows.into_iter()
                .map(|(row,)| row)
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    for secret in [
        &app.admin_token,
        &session,
        &api,
        &link,
        &PASSWORD.to_string(),
    ] {
        let random_part = secret.rsplit('_').next().expect("part");
        assert!(
            !text.contains(random_part),
            "{secret} is stored in the clear"
        );
    }
    assert!(
        text.contains("$argon2id$"),
        "passwords are hashed with Argon2id"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_token_cannot_outlive_itself_through_the_tokens_it_makes(#[case] engine: Engine) {
    let app = spawn!(engine);
    let soon = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let later = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let made = app
        .ok(
            "mutation($at: DateTime) { createApiToken(name: \"short\", permissions: [\"settings\"], expiresAt: $at) { token } }",
            json!({ "at": soon }),
        )
        .await;
    let short = made["createApiToken"]["token"]
        .as_str()
        .expect("token")
        .to_string();
    let create = "mutation($at: DateTime) { createApiToken(name: \"child\", permissions: [\"settings\"], expiresAt: $at) { token error } }";
    for at in [Value::Null, json!(later)] {
        let body = app.gql(Some(&short), create, json!({ "at": at })).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    }
    let body = app.gql(Some(&short), create, json!({ "at": soon })).await;
    assert!(
        body["data"]["createApiToken"]["token"].is_string(),
        "{body}"
    );
    // Names are one line of text.
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation { createApiToken(name: \"two\\nlines\", permissions: [\"*\"]) { token } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn forty_wrong_passwords_are_throttled(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    let sign_in =
        "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token error } }";
    let mut incorrect = 0;
    let mut throttled = 0;
    for i in 0..40 {
        let body = app
            .gql(
                None,
                sign_in,
                json!({ "e": email, "p": format!("guess {i}") }),
            )
            .await;
        if error_code(&body) == "RATE_LIMITED" {
            throttled += 1;
            let retry = body["errors"][0]["extensions"]["retryAfter"].as_u64();
            assert!(retry.is_some_and(|s| s >= 1), "{body}");
        } else {
            assert_eq!(
                body["data"]["signIn"]["error"], "The email or password is incorrect",
                "{body}"
            );
            incorrect += 1;
        }
    }
    assert_eq!(incorrect, 5, "five free guesses, then a growing delay");
    assert_eq!(throttled, 35);
    // While throttled, even the right password waits: guessing gains nothing.
    let body = app
        .gql(None, sign_in, json!({ "e": email, "p": PASSWORD }))
        .await;
    assert_eq!(error_code(&body), "RATE_LIMITED", "{body}");
    // An unknown email is throttled the same way, so the throttle reveals nothing.
    for i in 0..6 {
        let body = app
            .gql(
                None,
                sign_in,
                json!({ "e": "nobody@example.com", "p": format!("guess {i}") }),
            )
            .await;
        let expected = if i < 5 { "" } else { "RATE_LIMITED" };
        assert_eq!(error_code(&body), expected, "{body}");
    }
    // Other emails from this address still get their own free guesses (20 in all).
    let other = app.user("receptionist", "rosa@example.com").await;
    let token = app.sign_in(&other, PASSWORD).await;
    assert!(!token.is_empty());
}
