//! Staff and sessions: creating, changing, disabling and enabling staff users, passwords set
//! through one-time links, one's own password, sessions, the first admin, and the practice's
//! name and time zone; with each refusal.

use serde_json::{Value, json};

use rstest::rstest;

use crate::helpers::{
    Engine, PASSWORD, TestApp, error_code, error_message, hold_rows, refused_within_100_ms,
    waits_on_a_lock,
};
use crate::spawn;

const USER_FIELDS: &str = "id email firstName lastName role deleted lastSignInAt title gender \
                           qualifications registration medicalSpecialties positionTitle \
                           minimumTreatmentAge isDoctor";

const NEW_PASSWORD: &str = "a brand new password";

/// `createUser` with `token`; returns the whole body.
async fn create_user(app: &TestApp, token: &str, input: Value) -> Value {
    app.gql(
        Some(token),
        &format!(
            "mutation($i: CreateUserInput!) {{ createUser(input: $i) {{ data {{ {USER_FIELDS} }} \
             error setPasswordToken }} }}"
        ),
        json!({ "i": input }),
    )
    .await
}

fn staff(email: &str, role: &str) -> Value {
    json!({ "email": email, "firstName": "Grace", "lastName": "Hopper", "role": role })
}

/// Creates a staff user with the admin token; returns (id, set-password token).
async fn new_user(app: &TestApp, email: &str, role: &str) -> (String, String) {
    let body = create_user(app, &app.admin_token, staff(email, role)).await;
    let made = &body["data"]["createUser"];
    assert!(made["error"].is_null(), "{body}");
    (
        made["data"]["id"].as_str().expect("id").to_string(),
        made["setPasswordToken"]
            .as_str()
            .expect("setPasswordToken")
            .to_string(),
    )
}

/// `setPassword` without x-token; returns the whole body.
async fn set_password(app: &TestApp, link: &str, password: &str) -> Value {
    app.gql(
        None,
        "mutation($t: String!, $p: String!) { setPassword(setPasswordToken: $t, password: $p) \
         { token expiresAt user { id email } error } }",
        json!({ "t": link, "p": password }),
    )
    .await
}

/// A staff user with a password, signed in; returns (id, session token).
async fn signed_in_user(app: &TestApp, email: &str, role: &str) -> (String, String) {
    let (id, link) = new_user(app, email, role).await;
    let body = set_password(app, &link, PASSWORD).await;
    assert!(body["data"]["setPassword"]["error"].is_null(), "{body}");
    (id, app.sign_in(email, PASSWORD).await)
}

/// Runs a mutation on a user by id (`disableUser`, `enableUser`, `resetUserPassword`) with
/// `token`; returns the payload.
async fn on_user(app: &TestApp, token: &str, mutation: &str, id: &str) -> Value {
    let body = app
        .gql(
            Some(token),
            &format!(
                "mutation($id: ID!) {{ {mutation}(id: $id) {{ data {{ id deleted }} error \
                 setPasswordToken }} }}"
            ),
            json!({ "id": id }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    body["data"][mutation].clone()
}

async fn update_user(app: &TestApp, token: &str, id: &str, input: Value) -> Value {
    app.gql(
        Some(token),
        &format!(
            "mutation($id: ID!, $i: UpdateUserInput!) {{ updateUser(id: $id, input: $i) \
             {{ data {{ {USER_FIELDS} }} error }} }}"
        ),
        json!({ "id": id, "i": input }),
    )
    .await
}

const ME: &str = "{ currentUser { id email } }";

/// Asserts that `token` is refused as a credential, and says `says`.
async fn assert_refused(app: &TestApp, token: &str, says: &str) {
    let body = app.gql(Some(token), ME, json!({})).await;
    assert_eq!(error_code(&body), "UNAUTHENTICATED", "{body}");
    assert!(error_message(&body).contains(says), "{body}");
}

async fn assert_accepted(app: &TestApp, token: &str) {
    let body = app.gql(Some(token), ME, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
}

/// signIn's answer for these credentials.
async fn sign_in(app: &TestApp, email: &str, password: &str) -> Value {
    app.gql(
        None,
        "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token error } }",
        json!({ "e": email, "p": password }),
    )
    .await
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_new_user_sets_a_password_with_the_link_and_signs_in(#[case] engine: Engine) {
    let app = spawn!(engine);
    let input = json!({
        "email": "  Grace@Example.COM ", "firstName": "Grace", "lastName": "Hopper",
        "role": "practitioner", "title": "Dr", "isDoctor": true, "gender": "female",
        "qualifications": "PhD", "registration": "GMC 123", "medicalSpecialties": ["Computing"],
        "positionTitle": "Rear admiral", "minimumTreatmentAge": 16
    });
    let body = create_user(&app, &app.admin_token, input).await;
    let made = &body["data"]["createUser"];
    assert!(made["error"].is_null(), "{body}");
    let user = &made["data"];
    assert_eq!(user["email"], "grace@example.com");
    assert_eq!(user["deleted"], false);
    assert_eq!(user["lastSignInAt"], Value::Null);
    assert_eq!(user["medicalSpecialties"], json!(["Computing"]));
    assert_eq!(user["minimumTreatmentAge"], 16);
    assert_eq!(user["isDoctor"], true);
    let link = made["setPasswordToken"].as_str().expect("link").to_string();
    assert!(
        link.starts_with(&format!("pa_{}_", app.practice_id)),
        "{link}"
    );

    // No password yet: signIn refuses any.
    let refused = sign_in(&app, "grace@example.com", "").await;
    assert!(refused["data"]["signIn"]["token"].is_null(), "{refused}");

    // A short password is the caller's to fix, and leaves the link usable.
    let short = set_password(&app, &link, "short").await;
    assert_eq!(error_code(&short), "BAD_USER_INPUT", "{short}");

    let body = set_password(&app, &link, PASSWORD).await;
    let session = &body["data"]["setPassword"];
    assert!(session["error"].is_null(), "{body}");
    assert_eq!(session["user"]["email"], "grace@example.com");
    let token = session["token"].as_str().expect("token");
    let me = app.gql(Some(token), ME, json!({})).await;
    assert_eq!(
        me["data"]["currentUser"]["email"], "grace@example.com",
        "{me}"
    );

    // The link works once.
    let again = set_password(&app, &link, "another password").await;
    assert_eq!(
        error_code(&again),
        "",
        "the payload's error was selected: {again}"
    );
    let error = again["data"]["setPassword"]["error"]
        .as_str()
        .expect("error");
    assert!(error.contains("not valid"), "{error}");
    // Unselected, the sentence comes as an error with a code.
    let unselected = app
        .gql(
            None,
            "mutation($t: String!) { setPassword(setPasswordToken: $t, password: \"whatever pw\") { token } }",
            json!({ "t": link }),
        )
        .await;
    assert_eq!(error_code(&unselected), "UNAUTHENTICATED", "{unselected}");
    for bad in [
        "",
        "nonsense",
        &format!("pa_{}_{}", app.practice_id, "0".repeat(64)),
    ] {
        let body = set_password(&app, bad, PASSWORD).await;
        assert!(
            body["data"]["setPassword"]["error"].is_string(),
            "{bad}: {body}"
        );
    }

    // The password signs in, and the sign-in is recorded.
    let signed = app.sign_in("grace@example.com", PASSWORD).await;
    assert_accepted(&app, &signed).await;
    let listed = app
        .ok(
            "{ users { data { email deleted lastSignInAt } } }",
            json!({}),
        )
        .await;
    let grace = listed["users"]["data"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["email"] == "grace@example.com")
        .expect("listed")
        .clone();
    assert!(grace["lastSignInAt"].is_string(), "{grace}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn disabling_a_user_ends_their_sessions_and_sign_in(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (id, session) = signed_in_user(&app, "rita@example.com", "receptionist").await;
    assert_accepted(&app, &session).await;

    let disabled = on_user(&app, &app.admin_token, "disableUser", &id).await;
    assert_eq!(disabled["data"]["deleted"], true, "{disabled}");
    assert_refused(&app, &session, "revoked").await;

    let body = sign_in(&app, "rita@example.com", PASSWORD).await;
    assert!(body["data"]["signIn"]["token"].is_null(), "{body}");
    let error = body["data"]["signIn"]["error"].as_str().expect("error");
    assert!(error.contains("disabled"), "{error}");
    // A wrong password still gets the one sentence for every failure.
    let body = sign_in(&app, "rita@example.com", "wrong password").await;
    assert_eq!(
        body["data"]["signIn"]["error"],
        "The email or password is incorrect"
    );
    let unselected = app
        .gql(
            None,
            "mutation { signIn(email: \"rita@example.com\", password: \"correct horse battery\") { token } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&unselected), "FORBIDDEN", "{unselected}");

    // Disabling twice is no error; enabling lets them sign in again, the old session stays
    // ended.
    let twice = on_user(&app, &app.admin_token, "disableUser", &id).await;
    assert!(twice["error"].is_null(), "{twice}");
    let enabled = on_user(&app, &app.admin_token, "enableUser", &id).await;
    assert_eq!(enabled["data"]["deleted"], false, "{enabled}");
    assert_refused(&app, &session, "revoked").await;
    let again = app.sign_in("rita@example.com", PASSWORD).await;
    assert_accepted(&app, &again).await;
}

/// `createApiToken` with `token`; returns the token's fields and its secret.
async fn make_token(app: &TestApp, token: &str, name: &str) -> (Value, String) {
    let body = app
        .gql(
            Some(token),
            "mutation($n: String!) { createApiToken(name: $n, permissions: [\"*\"]) { data { id createdBy { email } createdByTokenId } token error } }",
            json!({ "n": name }),
        )
        .await;
    let made = &body["data"]["createApiToken"];
    assert!(made["error"].is_null(), "{body}");
    (
        made["data"].clone(),
        made["token"].as_str().expect("secret").to_string(),
    )
}

/// Every API token says who made it: the staff user at the head of the chain (signed in, or
/// through the tokens they made) and the token that made it. Disabling a user, or resetting
/// their password, keeps those tokens (the practice's integrations outlive whoever set them
/// up) unless asked to revoke them (`revokeApiTokens`, which needs `settings`): then every
/// token down the chain is refused at once, and each revocation is in the audit log.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_users_api_tokens_go_with_them_when_asked(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (ada, session) = signed_in_user(&app, "ada@example.com", "admin").await;
    // Another admin, so that Ada is not the practice's last.
    new_user(&app, "grace@example.com", "admin").await;
    let (first, first_secret) = make_token(&app, &session, "Widget").await;
    assert_eq!(
        first["createdBy"],
        json!({ "email": "ada@example.com" }),
        "{first}"
    );
    assert_eq!(first["createdByTokenId"], Value::Null);
    let (second, second_secret) = make_token(&app, &first_secret, "Made by the widget").await;
    assert_eq!(
        second["createdBy"],
        json!({ "email": "ada@example.com" }),
        "{second}"
    );
    assert_eq!(second["createdByTokenId"], first["id"]);
    // The test's own token was made on the command line: a token it makes has no user.
    let (kept, kept_secret) = make_token(&app, &app.admin_token, "Operator's").await;
    assert_eq!(kept["createdBy"], Value::Null, "{kept}");
    assert!(kept["createdByTokenId"].is_string(), "{kept}");
    // Who made a token is a staff user's record: `settings` alone reads the token, not them.
    let settings = app.token(&["settings"]).await;
    let listed = app
        .gql(
            Some(&settings),
            "{ apiTokens { id createdBy { email } createdByTokenId } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&listed), "FORBIDDEN", "{listed}");
    assert!(error_message(&listed).contains("users:read"), "{listed}");
    let row = listed["data"]["apiTokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .find(|t| t["id"] == second["id"])
        .cloned()
        .expect("listed");
    assert_eq!(row["createdByTokenId"], first["id"], "{listed}");

    // Revoking tokens is the settings' business: users:write alone may not.
    let staff_admin = app.token(&["users:write"]).await;
    let disable = "mutation($id: ID!, $r: Boolean) { disableUser(id: $id, revokeApiTokens: $r) { data { id } error } }";
    let body = app
        .gql(Some(&staff_admin), disable, json!({ "id": ada, "r": true }))
        .await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
    assert!(error_message(&body).contains("settings"), "{body}");
    assert_accepted(&app, &session).await;
    // Disabled without it: the sessions end, the tokens go on.
    let body = app
        .gql(Some(&app.admin_token), disable, json!({ "id": ada }))
        .await;
    assert_eq!(body["data"]["disableUser"]["data"]["id"], ada, "{body}");
    assert_refused(&app, &session, "revoked").await;
    assert_accepted(&app, &first_secret).await;
    assert_accepted(&app, &second_secret).await;
    on_user(&app, &app.admin_token, "enableUser", &ada).await;
    // Disabled again, with them: the whole chain is refused, the operator's token works.
    let body = app
        .gql(
            Some(&app.admin_token),
            disable,
            json!({ "id": ada, "r": true }),
        )
        .await;
    assert_eq!(body["data"]["disableUser"]["data"]["id"], ada, "{body}");
    assert_refused(&app, &first_secret, "revoked").await;
    assert_refused(&app, &second_secret, "revoked").await;
    assert_accepted(&app, &kept_secret).await;
    // A request that came with the first token before it was revoked, storing its token
    // after: refused, as the revocation of its maker's chain would miss what it makes.
    let everything = practice_api::auth::parse_permissions(&["*".to_string()]).expect("*");
    let late = practice_api::auth::issue_api_token(
        app.store
            .practice(&app.practice_id)
            .by(crate::helpers::operator()),
        "Late",
        &everything,
        None,
        first["id"].as_str(),
    )
    .await;
    assert!(
        matches!(
            late,
            Err(practice_api::auth::IssueError::Refused(
                practice_api::domain::Refusal::MakerRevoked
            ))
        ),
        "{late:?}"
    );
    let log = app
        .ok(
            "{ auditEvents(pagination: { pageSize: 100 }) { data { action resourceType resourceId operation } } }",
            json!({}),
        )
        .await;
    for token in [&first["id"], &second["id"]] {
        assert!(
            log["auditEvents"]["data"]
                .as_array()
                .expect("events")
                .iter()
                .any(|e| e["action"] == "revoke"
                    && e["resourceId"] == *token
                    && e["operation"] == "disableUser"),
            "{token} revoked by disableUser in {log}"
        );
    }

    // A reset asked to revoke them does the same.
    on_user(&app, &app.admin_token, "enableUser", &ada).await;
    let session = app.sign_in("ada@example.com", PASSWORD).await;
    let (_, third_secret) = make_token(&app, &session, "Another").await;
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($id: ID!) { resetUserPassword(id: $id, revokeApiTokens: true) { data { id } error } }",
            json!({ "id": ada }),
        )
        .await;
    assert_eq!(
        body["data"]["resetUserPassword"]["data"]["id"], ada,
        "{body}"
    );
    assert!(
        body["data"]["resetUserPassword"]["error"].is_null(),
        "{body}"
    );
    assert_refused(&app, &third_secret, "revoked").await;
    assert_accepted(&app, &kept_secret).await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_disabled_user_is_refused_at_once_by_every_instance(#[case] engine: Engine) {
    let one = spawn!(engine);
    let two = one.another_instance().await;
    let (id, session) = signed_in_user(&one, "sam@example.com", "practitioner").await;
    assert_accepted(&two, &session).await;
    assert_accepted(&two, &session).await;
    on_user(&one, &one.admin_token, "disableUser", &id).await;
    refused_within_100_ms(&two, &session, ME, "UNAUTHENTICATED").await;

    // A role changed through one applies on the other as soon as it hears of it.
    let (other, theirs) = signed_in_user(&one, "kim@example.com", "practitioner").await;
    let patients = "{ patients { data { id } } }";
    let body = two.gql(Some(&theirs), patients, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    let changed = update_user(
        &one,
        &one.admin_token,
        &other,
        json!({ "role": "receptionist" }),
    )
    .await;
    assert_eq!(
        changed["data"]["updateUser"]["data"]["role"],
        "receptionist"
    );
    refused_within_100_ms(
        &two,
        &theirs,
        "mutation { createPatient(patientData: { first: \"A\", last: \"B\" }) { error } }",
        "FORBIDDEN",
    )
    .await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_reset_ends_the_password_and_every_session(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (id, first_link) = new_user(&app, "ada@example.com", "admin").await;
    set_password(&app, &first_link, PASSWORD).await;
    let one = app.sign_in("ada@example.com", PASSWORD).await;
    let two = app.sign_in("ada@example.com", PASSWORD).await;

    let reset = on_user(&app, &app.admin_token, "resetUserPassword", &id).await;
    assert!(reset["error"].is_null(), "{reset}");
    let link = reset["setPasswordToken"]
        .as_str()
        .expect("link")
        .to_string();
    assert_ne!(link, first_link);
    assert_refused(&app, &one, "revoked").await;
    assert_refused(&app, &two, "revoked").await;
    let old = sign_in(&app, "ada@example.com", PASSWORD).await;
    assert!(old["data"]["signIn"]["token"].is_null(), "{old}");

    // A second reset replaces the first link.
    let again = on_user(&app, &app.admin_token, "resetUserPassword", &id).await;
    let newest = again["setPasswordToken"]
        .as_str()
        .expect("link")
        .to_string();
    let stale = set_password(&app, &link, NEW_PASSWORD).await;
    assert!(stale["data"]["setPassword"]["error"].is_string(), "{stale}");
    let body = set_password(&app, &newest, NEW_PASSWORD).await;
    assert!(body["data"]["setPassword"]["token"].is_string(), "{body}");
    app.sign_in("ada@example.com", NEW_PASSWORD).await;

    // A disabled user's link is refused: enable them first.
    let (rid, _) = signed_in_user(&app, "rae@example.com", "receptionist").await;
    let reset = on_user(&app, &app.admin_token, "resetUserPassword", &rid).await;
    let rlink = reset["setPasswordToken"]
        .as_str()
        .expect("link")
        .to_string();
    on_user(&app, &app.admin_token, "disableUser", &rid).await;
    let body = set_password(&app, &rlink, NEW_PASSWORD).await;
    assert!(body["data"]["setPassword"]["error"].is_string(), "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn changing_ones_password_ends_the_other_sessions(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (_, here) = signed_in_user(&app, "lin@example.com", "practitioner").await;
    let elsewhere = app.sign_in("lin@example.com", PASSWORD).await;
    let change = "mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, \
                  newPassword: $n) { token expiresAt user { email } error } }";

    let wrong = app
        .gql(
            Some(&here),
            change,
            json!({ "c": "not it at all", "n": NEW_PASSWORD }),
        )
        .await;
    assert_eq!(
        wrong["data"]["changePassword"]["error"], "The current password is incorrect",
        "{wrong}"
    );
    assert_accepted(&app, &elsewhere).await;
    let short = app
        .gql(Some(&here), change, json!({ "c": PASSWORD, "n": "short" }))
        .await;
    assert_eq!(error_code(&short), "BAD_USER_INPUT", "{short}");

    let body = app
        .gql(
            Some(&here),
            change,
            json!({ "c": PASSWORD, "n": NEW_PASSWORD }),
        )
        .await;
    let changed = &body["data"]["changePassword"];
    assert!(changed["error"].is_null(), "{body}");
    assert!(changed["token"].is_null(), "this session goes on: {body}");
    assert!(changed["expiresAt"].is_string(), "{body}");
    assert_accepted(&app, &here).await;
    assert_refused(&app, &elsewhere, "revoked").await;
    let old = sign_in(&app, "lin@example.com", PASSWORD).await;
    assert!(old["data"]["signIn"]["token"].is_null(), "{old}");
    app.sign_in("lin@example.com", NEW_PASSWORD).await;

    let api = app
        .gql(
            Some(&app.admin_token),
            change,
            json!({ "c": PASSWORD, "n": NEW_PASSWORD }),
        )
        .await;
    assert_eq!(error_code(&api), "BAD_USER_INPUT", "{api}");
}

/// changePassword's tries of the current password count as sign-ins to the user's email do:
/// past the free ones it is RATE_LIMITED (with `retryAfter`), and so is signIn, so that a
/// stolen session guesses no faster than signIn lets anyone. And a change whose session ended,
/// or whose password was changed or reset, while the password was checked, changes nothing:
/// the store's own conditions, asked as the resolver asks them.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn guesses_through_a_session_are_throttled_and_a_cut_off_holds(#[case] engine: Engine) {
    use practice_api::store::tokens::TokenKind;
    use practice_api::store::users::PasswordKept;

    let app = spawn!(engine);
    let (id, here) = signed_in_user(&app, "kim@example.com", "practitioner").await;
    let change = "mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, \
                  newPassword: $n) { error } }";
    let guess = json!({ "c": "not it at all", "n": NEW_PASSWORD });
    for _ in 0..5 {
        let wrong = app.gql(Some(&here), change, guess.clone()).await;
        assert_eq!(
            wrong["data"]["changePassword"]["error"], "The current password is incorrect",
            "{wrong}"
        );
    }
    let throttled = app.gql(Some(&here), change, guess).await;
    assert_eq!(error_code(&throttled), "RATE_LIMITED", "{throttled}");
    assert!(
        throttled["errors"][0]["extensions"]["retryAfter"].is_u64(),
        "{throttled}"
    );
    let sign_in_too = sign_in(&app, "kim@example.com", PASSWORD).await;
    assert_eq!(error_code(&sign_in_too), "RATE_LIMITED", "{sign_in_too}");

    let practice = app
        .store
        .practice(&app.practice_id)
        .by(crate::helpers::operator());
    let session = current_session(&app, &here).await;
    let (stored, email) = practice
        .password_hash(&id)
        .await
        .expect("read")
        .expect("user");
    assert_eq!(email, "kim@example.com");
    let stale = practice
        .change_password(&id, "the hash checked before a reset", &stored, &session)
        .await
        .expect("store");
    assert_eq!(stale.err(), Some(PasswordKept::Changed));
    practice
        .revoke_token(&session, TokenKind::User)
        .await
        .expect("revoke")
        .expect("revoked");
    let ended = practice
        .change_password(&id, &stored, &stored, &session)
        .await
        .expect("store");
    assert_eq!(ended.err(), Some(PasswordKept::SessionEnded));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn sessions_are_listed_and_ended(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (lin, here) = signed_in_user(&app, "lin@example.com", "practitioner").await;
    let there = app.sign_in("lin@example.com", PASSWORD).await;
    assert_accepted(&app, &there).await;
    let (_, boss) = signed_in_user(&app, "boss@example.com", "admin").await;
    let sessions = "query($u: ID) { sessions(userId: $u) { id userId createdAt lastUsedAt \
                    expiresAt current } }";

    let mine = app.gql(Some(&here), sessions, json!({})).await;
    let list = mine["data"]["sessions"]
        .as_array()
        .expect("sessions")
        .clone();
    // signed_in_user's setPassword opened one more.
    assert_eq!(list.len(), 3, "{mine}");
    assert!(list.iter().all(|s| s["userId"] == lin.as_str()), "{mine}");
    assert_eq!(list.iter().filter(|s| s["current"] == true).count(), 1);
    let other = list
        .iter()
        .find(|s| s["current"] == false)
        .expect("another")["id"]
        .as_str()
        .expect("id")
        .to_string();

    // Another user's sessions need users:write.
    let theirs = app
        .gql(Some(&here), sessions, json!({ "u": "someone-else" }))
        .await;
    assert_eq!(error_code(&theirs), "FORBIDDEN", "{theirs}");
    let admin_view = app.gql(Some(&boss), sessions, json!({ "u": lin })).await;
    assert_eq!(
        admin_view["data"]["sessions"]
            .as_array()
            .expect("list")
            .len(),
        3,
        "{admin_view}"
    );
    let api = app.gql(Some(&app.admin_token), sessions, json!({})).await;
    assert!(
        api["data"]["sessions"]
            .as_array()
            .expect("every session")
            .len()
            >= 4,
        "{api}"
    );

    // One's own session: ended.
    let revoke = "mutation($id: ID!) { revokeSession(id: $id) }";
    let ended = app.gql(Some(&here), revoke, json!({ "id": other })).await;
    assert_eq!(ended["data"]["revokeSession"], true, "{ended}");
    let mine = app.gql(Some(&here), sessions, json!({})).await;
    let ids = mine["data"]["sessions"].to_string();
    assert!(
        !ids.contains(&other),
        "an ended session is not listed: {ids}"
    );
    // Someone else's, without users:write: no such session for this caller.
    let boss_sessions = app.gql(Some(&boss), sessions, json!({})).await;
    let boss_session = boss_sessions["data"]["sessions"][0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let refused = app
        .gql(Some(&here), revoke, json!({ "id": boss_session }))
        .await;
    assert_eq!(refused["data"]["revokeSession"], false, "{refused}");
    assert_accepted(&app, &boss).await;
    // With users:write, only the sessions of users whose role the caller's permissions cover,
    // as for disableUser: not an admin's.
    let manager = app.token(&["users:write", "users:read"]).await;
    let above = app
        .gql(Some(&manager), revoke, json!({ "id": boss_session }))
        .await;
    assert_eq!(above["data"]["revokeSession"], Value::Null, "{above}");
    assert_eq!(error_code(&above), "REFUSED", "{above}");
    assert!(error_message(&above).contains("role admin"), "{above}");
    assert_accepted(&app, &boss).await;
    // An admin ends anyone's.
    let current = current_session(&app, &here).await;
    let body = app.gql(Some(&boss), revoke, json!({ "id": current })).await;
    assert_eq!(body["data"]["revokeSession"], true, "{body}");
    assert_refused(&app, &here, "revoked").await;
}

/// The id of the session `token` is.
async fn current_session(app: &TestApp, token: &str) -> String {
    let body = app
        .gql(Some(token), "{ sessions { id current } }", json!({}))
        .await;
    body["data"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["current"] == true)
        .expect("current")["id"]
        .as_str()
        .expect("id")
        .to_string()
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn nobody_grants_a_role_above_their_own(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (admin_id, _) = signed_in_user(&app, "ada@example.com", "admin").await;
    // users:write alone covers no role.
    let hr = app.token(&["users:write"]).await;
    let body = create_user(&app, &hr, staff("r@example.com", "receptionist")).await;
    let error = body["data"]["createUser"]["error"]
        .as_str()
        .expect("refused");
    assert!(error.contains("receptionist"), "{error}");
    // With everything a receptionist may do, a receptionist but no admin.
    let desk = app
        .token(&[
            "users:write",
            "bookings:write",
            "patients:read",
            "labels:read",
        ])
        .await;
    let body = create_user(&app, &desk, staff("r@example.com", "receptionist")).await;
    assert!(body["data"]["createUser"]["error"].is_null(), "{body}");
    let rid = body["data"]["createUser"]["data"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let body = create_user(&app, &desk, staff("a@example.com", "admin")).await;
    assert!(
        body["data"]["createUser"]["error"]
            .as_str()
            .expect("refused")
            .contains("admin"),
        "{body}"
    );
    let body = update_user(&app, &desk, &rid, json!({ "role": "admin" })).await;
    assert!(body["data"]["updateUser"]["error"].is_string(), "{body}");
    // Nor acts on a user above it.
    let body = update_user(&app, &desk, &admin_id, json!({ "firstName": "Eve" })).await;
    assert!(body["data"]["updateUser"]["error"].is_string(), "{body}");
    let body = on_user(&app, &desk, "disableUser", &admin_id).await;
    assert!(body["error"].is_string(), "{body}");
    let body = on_user(&app, &desk, "resetUserPassword", &admin_id).await;
    assert!(body["error"].is_string(), "{body}");
    assert!(body["setPasswordToken"].is_null(), "{body}");
    // A practitioner signed in has no users:write at all.
    let (_, doc) = signed_in_user(&app, "doc@example.com", "practitioner").await;
    let body = create_user(&app, &doc, staff("x@example.com", "receptionist")).await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_last_admin_is_kept(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (ada, ada_session) = signed_in_user(&app, "ada@example.com", "admin").await;
    let last = "This is the practice's last admin";

    let body = update_user(
        &app,
        &app.admin_token,
        &ada,
        json!({ "role": "practitioner" }),
    )
    .await;
    let error = body["data"]["updateUser"]["error"]
        .as_str()
        .expect("refused");
    assert!(error.starts_with(last), "{error}");
    let body = on_user(&app, &app.admin_token, "disableUser", &ada).await;
    assert!(
        body["error"].as_str().expect("refused").starts_with(last),
        "{body}"
    );
    let body = on_user(&app, &ada_session, "disableUser", &ada).await;
    assert_eq!(
        body["error"], "You cannot disable your own account",
        "{body}"
    );

    // With a second admin, the first may go.
    let (bob, _) = signed_in_user(&app, "bob@example.com", "admin").await;
    let body = update_user(&app, &ada_session, &bob, json!({ "role": "practitioner" })).await;
    assert!(body["data"]["updateUser"]["error"].is_null(), "{body}");
    let body = update_user(&app, &ada_session, &bob, json!({ "role": "admin" })).await;
    assert!(body["data"]["updateUser"]["error"].is_null(), "{body}");
    let body = on_user(&app, &app.admin_token, "disableUser", &ada).await;
    assert!(body["error"].is_null(), "{body}");
    // A disabled admin does not count: bob is now the last.
    let body = on_user(&app, &app.admin_token, "disableUser", &bob).await;
    assert!(
        body["error"].as_str().expect("refused").starts_with(last),
        "{body}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn staff_input_is_checked(#[case] engine: Engine) {
    let app = spawn!(engine);
    let token = app.admin_token.clone();
    for (input, says) in [
        (staff("a@example.com", "boss"), "unknown role"),
        (staff("not an email", "admin"), "input.email"),
        (
            json!({ "email": "a@example.com", "firstName": " ", "lastName": "L", "role": "admin" }),
            "input.firstName must not be empty",
        ),
        (
            json!({ "email": "a@example.com", "firstName": "F", "lastName": "L", "role": "admin",
                    "minimumTreatmentAge": -1 }),
            "minimumTreatmentAge",
        ),
        (
            json!({ "email": "a@example.com", "firstName": "F", "lastName": "L", "role": "admin",
                    "medicalSpecialties": vec!["x"; 21] }),
            "at most 20",
        ),
        (
            json!({ "email": "a@example.com", "firstName": "x".repeat(201), "lastName": "L",
                    "role": "admin" }),
            "at most 200 characters",
        ),
    ] {
        let body = create_user(&app, &token, input).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert!(error_message(&body).contains(says), "{says}: {body}");
    }
    let (id, _) = new_user(&app, "taken@example.com", "receptionist").await;
    let body = create_user(&app, &token, staff("TAKEN@example.com", "admin")).await;
    assert_eq!(
        body["data"]["createUser"]["error"],
        "A staff user with email taken@example.com already exists"
    );
    let (other, _) = new_user(&app, "other@example.com", "receptionist").await;
    let body = update_user(
        &app,
        &token,
        &other,
        json!({ "email": "taken@example.com" }),
    )
    .await;
    assert!(body["data"]["updateUser"]["error"].is_string(), "{body}");
    let body = update_user(&app, &token, "no-such-user", json!({ "firstName": "X" })).await;
    assert_eq!(
        body["data"]["updateUser"]["error"],
        "No staff user with id no-such-user"
    );
    let body = app
        .gql(
            Some(&token),
            "mutation { updateUser(id: \"no-such-user\", input: { firstName: \"X\" }) { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "NOT_FOUND", "{body}");

    // An update changes what it names, clears what is null, keeps the rest.
    let body = update_user(
        &app,
        &token,
        &id,
        json!({ "title": "Dr", "gender": "male", "medicalSpecialties": ["A", "B"],
                "minimumTreatmentAge": 3 }),
    )
    .await;
    let user = &body["data"]["updateUser"]["data"];
    assert_eq!(user["title"], "Dr", "{body}");
    assert_eq!(user["medicalSpecialties"], json!(["A", "B"]));
    let body = update_user(
        &app,
        &token,
        &id,
        json!({ "gender": null, "medicalSpecialties": null, "lastName": "Byron" }),
    )
    .await;
    let user = &body["data"]["updateUser"]["data"];
    assert_eq!(user["title"], "Dr", "{body}");
    assert_eq!(user["gender"], Value::Null);
    assert_eq!(user["medicalSpecialties"], json!([]));
    assert_eq!(user["minimumTreatmentAge"], 3);
    assert_eq!(user["lastName"], "Byron");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn every_staff_change_is_audited(#[case] engine: Engine) {
    let app = spawn!(engine);
    let (id, link) = new_user(&app, "eve@example.com", "receptionist").await;
    set_password(&app, &link, PASSWORD).await;
    update_user(
        &app,
        &app.admin_token,
        &id,
        json!({ "firstName": "Evelyn" }),
    )
    .await;
    on_user(&app, &app.admin_token, "disableUser", &id).await;
    on_user(&app, &app.admin_token, "enableUser", &id).await;
    on_user(&app, &app.admin_token, "resetUserPassword", &id).await;
    let body = app
        .ok(
            "query($id: ID!) { auditEvents(pagination: { pageSize: 100 }) { data { action resourceType resourceId operation } } x: user(id: $id) { id } }",
            json!({ "id": id }),
        )
        .await;
    let actions: Vec<(String, String)> = body["auditEvents"]["data"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["resourceType"] == "user" && e["resourceId"] == id.as_str())
        .map(|e| {
            (
                e["action"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (action, operation) in [
        ("create", "createUser"),
        ("set_password", "setPassword"),
        ("update", "updateUser"),
        ("disable", "disableUser"),
        ("enable", "enableUser"),
        ("reset_password", "resetUserPassword"),
    ] {
        assert!(
            actions.contains(&(action.to_string(), operation.to_string())),
            "{action} by {operation} in {actions:?}"
        );
    }
    // Nothing of a secret is in the log.
    assert!(!body.to_string().contains(&link), "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_first_admin_comes_from_the_first_start_link(#[case] engine: Engine) {
    let app = spawn!(engine);
    let first = "mutation($t: String!, $e: String!, $p: String!) { createFirstAdmin(setupToken: $t, \
                 email: $e, firstName: \"Ada\", lastName: \"Lovelace\", password: $p) \
                 { token user { email role } error } }";
    let old = practice_api::admin::first_admin_link(&app.store)
        .await
        .expect("link")
        .expect("no staff yet");
    let link = practice_api::admin::first_admin_link(&app.store)
        .await
        .expect("link")
        .expect("no staff yet");
    // A newer link replaces the older.
    let body = app
        .gql(
            None,
            first,
            json!({ "t": old, "e": "ada@example.com", "p": PASSWORD }),
        )
        .await;
    assert!(
        body["data"]["createFirstAdmin"]["error"].is_string(),
        "{body}"
    );
    let body = app
        .gql(
            None,
            first,
            json!({ "t": link, "e": "ada@example.com", "p": "short" }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");

    let body = app
        .gql(
            None,
            first,
            json!({ "t": link, "e": "ada@example.com", "p": PASSWORD }),
        )
        .await;
    let made = &body["data"]["createFirstAdmin"];
    assert!(made["error"].is_null(), "{body}");
    assert_eq!(made["user"]["role"], "admin");
    assert_accepted(&app, made["token"].as_str().expect("token")).await;
    // The audit log names the admin, a user, as the maker of their own account.
    let log = app
        .ok(
            "{ auditEvents(pagination: { pageSize: 100 }) { data { actorType actorId actorName action resourceType resourceId operation } } }",
            json!({}),
        )
        .await;
    let made_row = log["auditEvents"]["data"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["operation"] == "createFirstAdmin" && e["resourceType"] == "user")
        .unwrap_or_else(|| panic!("no createFirstAdmin row: {log}"))
        .clone();
    assert_eq!(made_row["actorType"], "user", "{made_row}");
    assert_eq!(made_row["actorId"], made_row["resourceId"], "{made_row}");
    assert_eq!(made_row["actorName"], "Ada Lovelace", "{made_row}");
    // Once.
    let body = app
        .gql(
            None,
            first,
            json!({ "t": link, "e": "eve@example.com", "p": PASSWORD }),
        )
        .await;
    assert!(
        body["data"]["createFirstAdmin"]["error"].is_string(),
        "{body}"
    );
    // With staff, no link is made.
    assert!(
        practice_api::admin::first_admin_link(&app.store)
            .await
            .expect("checked")
            .is_none()
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_first_start_link_is_refused_once_staff_exist(#[case] engine: Engine) {
    let app = spawn!(engine);
    let link = practice_api::admin::first_admin_link(&app.store)
        .await
        .expect("link")
        .expect("no staff yet");
    app.user("admin", "ops@example.com").await;
    let body = app
        .gql(
            None,
            "mutation($t: String!) { createFirstAdmin(setupToken: $t, email: \"x@example.com\", \
             firstName: \"X\", lastName: \"Y\", password: \"long enough\") { token error } }",
            json!({ "t": link }),
        )
        .await;
    let error = body["data"]["createFirstAdmin"]["error"]
        .as_str()
        .expect("refused");
    assert!(error.contains("has staff already"), "{error}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_practice_is_renamed_and_given_a_time_zone(#[case] engine: Engine) {
    let app = spawn!(engine);
    let update = "mutation($n: String, $z: String) { updatePractice(name: $n, timezone: $z) \
                  { data { id name timezone } error } }";
    let before = app
        .ok("{ currentPractice { name timezone } }", json!({}))
        .await;
    assert_eq!(before["currentPractice"]["timezone"], "UTC");
    let body = app
        .ok(update, json!({ "n": "North Clinic", "z": "Europe/London" }))
        .await;
    assert_eq!(
        body["updatePractice"]["data"]["timezone"], "Europe/London",
        "{body}"
    );
    let body = app.ok(update, json!({ "z": "America/New_York" })).await;
    assert_eq!(body["updatePractice"]["data"]["name"], "North Clinic");
    for (variables, says) in [
        (json!({ "z": "Mars/Olympus" }), "not an IANA time zone"),
        (json!({ "n": "  " }), "name must not be empty"),
    ] {
        let body = app.gql(Some(&app.admin_token), update, variables).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert!(error_message(&body).contains(says), "{body}");
    }
    let (_, doc) = signed_in_user(&app, "doc@example.com", "practitioner").await;
    let body = app.gql(Some(&doc), update, json!({ "n": "Mine" })).await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
    // Without the permission, a bad input is refused as forbidden too: the permission first.
    let body = app
        .gql(Some(&doc), update, json!({ "z": "Mars/Olympus" }))
        .await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
    let after = app
        .ok("{ currentPractice { name timezone } }", json!({}))
        .await;
    assert_eq!(
        after["currentPractice"],
        json!({ "name": "North Clinic", "timezone": "America/New_York" })
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_users_pronouns_and_metadata(#[case] engine: Engine) {
    let app = spawn!(engine);
    let fields = "id pronouns metadata { key value } createdAt updatedAt";
    let body = app
        .gql(
            Some(&app.admin_token),
            &format!("mutation($i: CreateUserInput!) {{ createUser(input: $i) {{ data {{ {fields} }} error }} }}"),
            json!({ "i": { "email": "sam@example.com", "firstName": "Sam", "lastName": "Lee",
                           "role": "receptionist", "pronouns": "they/them",
                           "metadata": [{ "key": "hr", "value": "H-1" }, { "key": "desk", "value": "2" }] } }),
        )
        .await;
    let user = &body["data"]["createUser"]["data"];
    assert_eq!(user["pronouns"], "they/them", "{body}");
    assert_eq!(
        user["metadata"],
        json!([{ "key": "hr", "value": "H-1" }, { "key": "desk", "value": "2" }])
    );
    assert!(user["createdAt"].is_string());
    let id = user["id"].as_str().expect("id").to_string();
    let update = format!(
        "mutation($id: ID!, $i: UpdateUserInput!) {{ updateUser(id: $id, input: $i) {{ data {{ {fields} }} error }} }}"
    );
    let body = app
        .gql(
            Some(&app.admin_token),
            &update,
            json!({ "id": id, "i": { "metadata": [{ "key": "hr", "value": "H-2" }] } }),
        )
        .await;
    let user = &body["data"]["updateUser"]["data"];
    assert_eq!(
        user["metadata"],
        json!([{ "key": "hr", "value": "H-2" }]),
        "{body}"
    );
    assert_eq!(user["pronouns"], "they/them", "kept");
    // The same change again changes nothing, and writes nothing: updatedAt stays (and no
    // instance is told to forget the tokens it knows). So does enabling an enabled user.
    let updated_at = user["updatedAt"].clone();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let body = app
        .gql(
            Some(&app.admin_token),
            &update,
            json!({ "id": id, "i": { "metadata": [{ "key": "hr", "value": "H-2" }], "pronouns": "they/them" } }),
        )
        .await;
    assert_eq!(
        body["data"]["updateUser"]["data"]["updatedAt"], updated_at,
        "{body}"
    );
    let body = app
        .gql(
            Some(&app.admin_token),
            &format!(
                "mutation($id: ID!) {{ enableUser(id: $id) {{ data {{ {fields} }} error }} }}"
            ),
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        body["data"]["enableUser"]["data"]["updatedAt"], updated_at,
        "{body}"
    );
    let body = app
        .gql(
            Some(&app.admin_token),
            &update,
            json!({ "id": id, "i": { "metadata": null, "pronouns": null } }),
        )
        .await;
    let user = &body["data"]["updateUser"]["data"];
    assert_eq!(user["metadata"], json!([]), "{body}");
    assert_eq!(user["pronouns"], Value::Null);
    // Of the four changes, the two that changed something told every instance that who may
    // call changed (the internal `user.changed`, which empties their caches of tokens); the
    // two that changed nothing told none. Read once a write made after them is in the log
    // (on PostgreSQL, events show in the order of their transactions).
    app.label("After the changes").await;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let told = loop {
        let log = app
            .store
            .all_events_after(practice_api::store::events::Position::default(), 10_000)
            .await
            .expect("the log");
        if log.iter().any(|e| e.event_type == "label.created") {
            break log
                .iter()
                .filter(|e| e.event_type == "user.changed" && e.user_id.as_deref() == Some(&id))
                .count();
        }
        assert!(
            std::time::Instant::now() < until,
            "the label's event within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(told, 2);
    let many: Vec<Value> = (0..51)
        .map(|n| json!({ "key": format!("k{n}"), "value": "" }))
        .collect();
    // Past the contract's limits (50 entries, keys of 40 characters, values of 500): a
    // refusal in `error`, on create as on update, and nothing changed.
    for (metadata, says) in [
        (
            json!(many),
            "Metadata holds at most 50 entries; this change gives 51",
        ),
        (
            json!([{ "key": "k".repeat(41), "value": "x" }]),
            "A metadata key has at most 40 characters; this one has 41",
        ),
        (
            json!([{ "key": "k", "value": "x".repeat(501) }]),
            "A metadata value has at most 500 characters; this one has 501",
        ),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                &update,
                json!({ "id": id, "i": { "metadata": metadata, "pronouns": "she/her" } }),
            )
            .await;
        assert_eq!(body["data"]["updateUser"]["error"], says, "{body}");
        assert!(body["data"]["updateUser"]["data"].is_null(), "{body}");
        let body = create_user(
            &app,
            &app.admin_token,
            json!({ "email": "over@example.com", "firstName": "O", "lastName": "V",
                    "role": "receptionist", "metadata": metadata }),
        )
        .await;
        assert_eq!(body["data"]["createUser"]["error"], says, "{body}");
        assert!(
            body["data"]["createUser"]["setPasswordToken"].is_null(),
            "{body}"
        );
    }
    let body = app
        .ok(
            "query($id: ID!) { user(id: $id) { pronouns metadata { key } } users { data { email } } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        body["user"],
        json!({ "pronouns": null, "metadata": [] }),
        "unchanged"
    );
    assert!(
        !body.to_string().contains("over@example.com"),
        "no user made: {body}"
    );
    // The rest of an entry's rules are the input's: a mistake, a GraphQL error.
    for (metadata, says) in [
        (
            json!([{ "key": "", "value": "x" }]),
            "key must not be empty",
        ),
        (
            json!([{ "key": "a", "value": "x" }, { "key": "a", "value": "y" }]),
            "twice",
        ),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                &update,
                json!({ "id": id, "i": { "metadata": metadata } }),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert!(error_message(&body).contains(says), "{says}: {body}");
    }
}

/// On PostgreSQL, `setPassword` takes the user's row before the link's, as `disableUser` and
/// `resetPassword` take the user's before its links: held up at the user, it holds nothing
/// of the link, so that the two wait for each other rather than deadlock. (SQLite writes one
/// transaction at a time: there is no order to keep.)
#[tokio::test]
async fn set_password_takes_the_users_row_before_the_links() {
    let Some(app) = TestApp::spawn_with(Engine::Postgres, crate::helpers::test_config()).await
    else {
        return;
    };
    let (id, link) = new_user(&app, "order@example.com", "practitioner").await;
    let mut user = hold_rows(
        &app.database_url,
        "SELECT id FROM users WHERE id = $1 FOR UPDATE",
        &id,
    )
    .await;
    let setting = tokio::spawn({
        let (url, client, link) = (app.url.clone(), app.client.clone(), link.clone());
        async move {
            let body = json!({
                "query": "mutation($t: String!, $p: String!) { setPassword(setPasswordToken: $t, password: $p) { error } }",
                "variables": { "t": link, "p": NEW_PASSWORD },
            });
            let answer = client.post(&url).json(&body).send().await.expect("send");
            answer.json::<Value>().await.expect("json")
        }
    });
    // Until setPassword waits on the user's row.
    waits_on_a_lock(&app.database_url).await;
    // The link's row is free: taken at once, not waited for.
    let mut links = hold_rows(
        &app.database_url,
        "SELECT id FROM user_links WHERE user_id = $1 FOR UPDATE NOWAIT",
        &id,
    )
    .await;
    sqlx::query("ROLLBACK")
        .execute(&mut links)
        .await
        .expect("let go of the link");
    sqlx::query("ROLLBACK")
        .execute(&mut user)
        .await
        .expect("let go of the user");
    let done = setting.await.expect("setPassword");
    assert_eq!(done["data"]["setPassword"]["error"], Value::Null, "{done}");
}
