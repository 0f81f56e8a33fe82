//! Idempotent retries: a mutation retried with the same Idempotency-Key runs once.

use rstest::rstest;
use serde_json::{Value, json};

use crate::helpers::{Engine, NoNewFiles, Raw, TestApp};
use crate::spawn;

const CREATE: &str = "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id firstName } error } }";

/// Sends createPatient for `first` with `key` as Idempotency-Key.
async fn create(app: &TestApp, token: &str, key: &str, first: &str) -> Raw {
    let body =
        json!({ "query": CREATE, "variables": { "d": { "first": first, "last": "Lovelace" } } });
    app.send(
        app.client
            .post(&app.url)
            .header("x-token", token)
            .header("idempotency-key", key)
            .json(&body),
    )
    .await
}

/// POSTs `body` with the admin token, `key` as Idempotency-Key and this Accept.
async fn keyed(app: &TestApp, key: &str, accept: &str, body: &Value) -> Raw {
    app.send(
        app.client
            .post(&app.url)
            .header("x-token", &app.admin_token)
            .header("idempotency-key", key)
            .header("accept", accept)
            .json(body),
    )
    .await
}

async fn patient_count(app: &TestApp) -> usize {
    let data = app
        .ok(
            "{ patients(pagination: { pageSize: 100 }) { data { id } } }",
            json!({}),
        )
        .await;
    data["patients"]["data"].as_array().map_or(0, Vec::len)
}

fn replayed(raw: &Raw) -> bool {
    raw.headers
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_retried_mutation_runs_once(#[case] engine: Engine) {
    let app = spawn!(engine);
    let token = app.token(&["patients:write"]).await;
    let key = "0b6a1c8e-8f5e-4a55-9a4f-8d1f0f7e2c11";

    let first = create(&app, &token, key, "Ada").await;
    assert_eq!(first.status.as_u16(), 200, "{}", first.body);
    assert!(!replayed(&first));
    let id = first.body["data"]["createPatient"]["data"]["id"].clone();
    assert!(id.is_string(), "{}", first.body);

    // The retry gets the first response, word for word, and writes nothing.
    let retry = create(&app, &token, key, "Ada").await;
    assert_eq!(retry.status.as_u16(), 200);
    assert!(replayed(&retry));
    assert_eq!(retry.body, first.body);
    // So does a retry through another instance.
    let other = app.another_instance().await;
    let through_other = create(&other, &token, key, "Ada").await;
    assert!(replayed(&through_other));
    assert_eq!(through_other.body, first.body);
    // A retry is answered in the media type it asks for, not the one the first asked for.
    for accept in ["application/graphql-response+json", "application/json"] {
        let body = json!({ "query": CREATE, "variables": { "d": { "first": "Ada", "last": "Lovelace" } } });
        let retry = app
            .send(
                app.client
                    .post(&app.url)
                    .header("x-token", &token)
                    .header("idempotency-key", key)
                    .header("accept", accept)
                    .json(&body),
            )
            .await;
        assert!(replayed(&retry));
        assert_eq!(retry.status.as_u16(), 200);
        let content_type = retry.headers["content-type"].to_str().expect("ascii");
        assert!(content_type.starts_with(accept), "{accept}: {content_type}");
        assert_eq!(retry.body, first.body);
    }
    assert_eq!(patient_count(&app).await, 1);

    // The same key with a different request is refused, and writes nothing.
    let different = create(&app, &token, key, "Grace").await;
    assert_eq!(different.status.as_u16(), 422, "{}", different.body);
    assert_eq!(different.code(), "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(patient_count(&app).await, 1);

    // A key belongs to its token: another token's request with it is its own.
    let other_token = app.token(&["patients:write"]).await;
    let theirs = create(&app, &other_token, key, "Ada").await;
    assert!(!replayed(&theirs));
    assert_ne!(theirs.body["data"]["createPatient"]["data"]["id"], id);
    assert_eq!(patient_count(&app).await, 2);

    // A new key is a new request.
    let again = create(&app, &token, "another-key", "Ada").await;
    assert!(!replayed(&again));
    assert_eq!(patient_count(&app).await, 3);

    // The audit log holds one write for the first key (and the reads that counted).
    let trail = app
        .ok(
            "query($p: ID) { auditEvents(patientId: $p) { data { action } } }",
            json!({ "p": id }),
        )
        .await;
    let writes: Vec<&Value> = trail["auditEvents"]["data"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["action"] != json!("read"))
        .collect();
    assert_eq!(writes, vec![&json!({ "action": "create" })], "{trail}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn retries_at_the_same_time_write_once(#[case] engine: Engine) {
    let app = spawn!(engine);
    let token = app.token(&["patients:write"]).await;
    let retries = (0..12).map(|_| create(&app, &token, "at-once", "Ada"));
    let answers: Vec<Raw> = futures_util::future::join_all(retries).await;
    let mut ids = Vec::new();
    for raw in &answers {
        match raw.status.as_u16() {
            200 => ids.push(raw.body["data"]["createPatient"]["data"]["id"].clone()),
            409 => {
                assert_eq!(raw.code(), "IDEMPOTENCY_KEY_IN_USE", "{}", raw.body);
                assert_eq!(
                    raw.headers.get("retry-after").map(|v| v.as_bytes()),
                    Some(&b"1"[..])
                );
            }
            other => panic!("unexpected {other}: {}", raw.body),
        }
    }
    assert!(!ids.is_empty());
    assert!(
        ids.iter().all(|id| id == &ids[0] && id.is_string()),
        "{ids:?}"
    );
    assert_eq!(patient_count(&app).await, 1);
}

/// A mutation kept waiting past the time a retry waits for it (twice the request's limit) is
/// taken over by the retry: then only one of the two writes. Here the wait is a lock another
/// connection holds on the patients across the takeover. (On SQLite the lock is the whole
/// file's, which holds up the first request's claim too, so that the retry takes over a claim
/// that never ran: the same outcome, asked of the other engine, not the race itself.)
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_request_taken_over_by_its_retry_does_not_write_as_well(#[case] engine: Engine) {
    use std::time::{Duration, Instant};
    let limit = Duration::from_millis(1_000);
    let config = practice_api::config::ServeConfig {
        request_timeout: limit,
        ..crate::helpers::test_config()
    };
    let app = spawn!(engine, config);
    let token = app.token(&["patients:write"]).await;
    let mut other = crate::helpers::hold_writes(&app.database_url, engine, "patients").await;
    let sent = Instant::now();
    let first = create(&app, &token, "held", "Ada").await;
    assert_eq!(first.code(), "SERVICE_UNAVAILABLE", "{}", first.body);
    // Past the takeover: the retry claims the key, and waits for the lock in its turn.
    tokio::time::sleep((limit * 2 + Duration::from_millis(300)).saturating_sub(sent.elapsed()))
        .await;
    let retry = tokio::spawn({
        let (url, client, token) = (app.url.clone(), app.client.clone(), token.clone());
        async move {
            let body = json!({ "query": CREATE, "variables": { "d": { "first": "Ada", "last": "Lovelace" } } });
            let answer = client
                .post(&url)
                .header("x-token", &token)
                .header("idempotency-key", "held")
                .json(&body)
                .send()
                .await
                .expect("send");
            answer.json::<Value>().await.expect("json")
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("ROLLBACK")
        .execute(&mut other)
        .await
        .expect("let go");
    let retried = retry.await.expect("the retry");
    let id = &retried["data"]["createPatient"]["data"]["id"];
    assert!(id.is_string(), "{retried}");
    assert_eq!(patient_count(&app).await, 1);
    // The retry's answer is the one kept.
    let again = create(&app, &token, "held", "Ada").await;
    assert!(replayed(&again), "{}", again.body);
    assert_eq!(again.body, retried);
}

/// A mutation sent without a key runs to its end when its client goes away before the
/// answer, as one over a websocket does, rather than being stopped where it stands: here the
/// client gives up after 700 ms, while the write waits for a lock held beside the server.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_mutation_runs_to_its_end_when_its_client_goes_away(#[case] engine: Engine) {
    use std::time::{Duration, Instant};
    let app = spawn!(engine);
    let mut other = crate::helpers::hold_writes(&app.database_url, engine, "patients").await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(700))
        .build()
        .expect("a client");
    let body =
        json!({ "query": CREATE, "variables": { "d": { "first": "Gone", "last": "Away" } } });
    let sent = impatient
        .post(&app.url)
        .header("x-token", &app.admin_token)
        .json(&body)
        .send()
        .await;
    assert!(sent.is_err(), "the client gave up: {sent:?}");
    sqlx::query("ROLLBACK")
        .execute(&mut other)
        .await
        .expect("let go");
    let until = Instant::now() + Duration::from_secs(10);
    while patient_count(&app).await == 0 {
        assert!(
            Instant::now() < until,
            "the mutation was stopped when its client went away"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(patient_count(&app).await, 1);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_bad_key_is_refused_and_a_query_ignores_its_key(#[case] engine: Engine) {
    let app = spawn!(engine);
    let too_long = "k".repeat(256);
    let refused = create(&app, &app.admin_token, &too_long, "Ada").await;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.body);
    assert!(
        refused.body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Idempotency-Key")),
        "{}",
        refused.body
    );
    assert_eq!(patient_count(&app).await, 0);

    // A query runs every time, key or not.
    let query = json!({ "query": "{ currentPractice { id } }" });
    for _ in 0..2 {
        let raw = keyed(&app, "q", "application/json", &query).await;
        assert_eq!(raw.status.as_u16(), 200);
        assert!(!replayed(&raw));
        assert_eq!(
            raw.body["data"]["currentPractice"]["id"],
            Value::from(app.practice_id.clone())
        );
    }

    // Over Server-Sent Events a key is not kept: a mutation with one is refused, not run
    // again on every retry.
    let body = json!({ "query": CREATE, "variables": { "d": { "first": "Ada", "last": "L" } } });
    for _ in 0..2 {
        let raw = keyed(&app, "streamed", "text/event-stream", &body).await;
        assert_eq!(raw.status.as_u16(), 400, "{}", raw.body);
        assert_eq!(raw.code(), "BAD_REQUEST", "{}", raw.body);
    }
    assert_eq!(patient_count(&app).await, 0);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn keys_expire_after_a_day_and_unfinished_claims_are_taken_over(#[case] engine: Engine) {
    use practice_api::store::idempotency::{Claimed, Key, Reclaim, StoredResponse};
    let app = spawn!(engine);
    let tokens = app.ok("{ apiTokens { id } }", json!({})).await;
    let token_id = tokens["apiTokens"][0]["id"].as_str().expect("token id");
    let practice = app.store.practice(&app.practice_id);
    let hour = 3_600_000;
    // Today: the server's own hourly sweep (which runs as it starts) deletes keys older than
    // a day of the real clock, and must not take this test's keys from under it.
    let now = practice_api::store::now_ms();
    let reclaim = |at: i64| Reclaim {
        expired_before: at - 24 * hour,
        abandoned_before: at - 60_000,
    };
    let claim = |request_hash: &str, at: i64| Key {
        token_id: token_id.to_string(),
        key: "k".into(),
        request_hash: request_hash.into(),
        claimed_at: at,
    };
    let claimed = |c: Key| async move {
        let at = c.claimed_at;
        practice.claim_idempotency_key(&c, reclaim(at)).await
    };

    assert!(matches!(claimed(claim("a", now)).await, Ok(Claimed::Mine)));
    // Unfinished: a retry waits, until the claim is abandoned; then the same request may
    // take it over, and a different one may not.
    assert!(matches!(
        claimed(claim("a", now + 1_000)).await,
        Ok(Claimed::Pending)
    ));
    assert!(matches!(
        claimed(claim("b", now + 120_000)).await,
        Ok(Claimed::OtherRequest)
    ));
    assert!(matches!(
        claimed(claim("a", now + 120_000)).await,
        Ok(Claimed::Mine)
    ));
    let response = StoredResponse {
        status: 200,
        content_type: "application/json".into(),
        response: "{}".into(),
        reads: None,
    };
    // The claim taken over keeps no response, and lets go of nothing: the key is its
    // retry's.
    let taken_over = claim("a", now);
    practice
        .finish_idempotency_key(&taken_over, &response)
        .await
        .expect("finish");
    let released = practice.release_idempotency_key(&taken_over).await;
    assert!(matches!(released, Ok(false)), "{released:?}");
    assert!(matches!(
        claimed(claim("a", now + 121_000)).await,
        Ok(Claimed::Pending)
    ));
    practice
        .finish_idempotency_key(&claim("a", now + 120_000), &response)
        .await
        .expect("finish");
    match claimed(claim("a", now + 23 * hour)).await {
        Ok(Claimed::Done(kept)) => assert_eq!(kept.response, "{}"),
        other => panic!("expected the kept response, got {other:?}"),
    }
    // A day on, the key is free again, for any request.
    assert!(matches!(
        claimed(claim("c", now + 25 * hour)).await,
        Ok(Claimed::Mine)
    ));
    // The sweep deletes what is older than it is told.
    let swept = app
        .store
        .forget_idempotency_keys(now + 26 * hour)
        .await
        .expect("sweep");
    assert_eq!(swept, 1);
    assert!(matches!(
        claimed(claim("d", now + 26 * hour)).await,
        Ok(Claimed::Mine)
    ));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_secret_is_never_kept_and_a_passing_failure_can_be_retried(#[case] engine: Engine) {
    let app = spawn!(engine);
    // A token made with a key: the retry gets the answer without its secret, which is shown
    // once, and the database holds no copy of it.
    let make = json!({ "query": "mutation { createApiToken(name: \"crm\", permissions: [\"patients:read\"]) { token data { id } } }" });
    let send = |key: &'static str, body: Value| {
        let app = &app;
        async move {
            app.send(
                app.client
                    .post(&app.url)
                    .header("x-token", &app.admin_token)
                    .header("idempotency-key", key)
                    .json(&body),
            )
            .await
        }
    };
    let first = send("token-key", make.clone()).await;
    let secret = first.body["data"]["createApiToken"]["token"]
        .as_str()
        .expect("a secret")
        .to_string();
    let retry = send("token-key", make).await;
    assert!(replayed(&retry));
    assert_eq!(retry.body["data"]["createApiToken"]["token"], Value::Null);
    assert_eq!(
        retry.body["data"]["createApiToken"]["data"],
        first.body["data"]["createApiToken"]["data"]
    );
    sqlx::any::install_default_drivers();
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&app.database_url)
        .await
        .expect("connect");
    let kept: Vec<(String,)> = sqlx::query_as("SELECT response FROM idempotency_keys")
        .fetch_all(&mut conn)
        .await
        .expect("read the kept responses");
    assert_eq!(kept.len(), 1);
    assert!(!kept[0].0.contains(&secret), "{}", kept[0].0);

    // A mutation that failed before it changed anything lets its key go: the retry runs.
    sqlx::query(sqlx::AssertSqlSafe(match engine {
        Engine::Sqlite => {
            "CREATE TRIGGER refuse_patients BEFORE INSERT ON patients \
                           BEGIN SELECT RAISE(ABORT, 'refused'); END"
        }
        Engine::Postgres => {
            "ALTER TABLE patients ADD CONSTRAINT refuse_patients \
                             CHECK (first_name <> 'Ada') NOT VALID"
        }
    }))
    .execute(&mut conn)
    .await
    .expect("refuse new patients");
    let failed = create(&app, &app.admin_token, "retry-me", "Ada").await;
    assert_eq!(failed.code(), "INTERNAL_SERVER_ERROR", "{}", failed.body);
    sqlx::query(sqlx::AssertSqlSafe(match engine {
        Engine::Sqlite => "DROP TRIGGER refuse_patients",
        Engine::Postgres => "ALTER TABLE patients DROP CONSTRAINT refuse_patients",
    }))
    .execute(&mut conn)
    .await
    .expect("accept patients again");
    let retried = create(&app, &app.admin_token, "retry-me", "Ada").await;
    assert!(!replayed(&retried));
    assert!(
        retried.body["data"]["createPatient"]["data"]["id"].is_string(),
        "{}",
        retried.body
    );
    assert_eq!(patient_count(&app).await, 1);
}

/// Runs `sql` on the test's database, as an operator would.
async fn execute(app: &TestApp, sql: &str) {
    sqlx::any::install_default_drivers();
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&app.database_url)
        .await
        .expect("connect");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&mut conn)
        .await
        .expect("sql");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_mutation_that_wrote_keeps_its_key_whatever_its_answer(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Grace", "Kept").await;
    let doctor = app.doctor("Alan", "Turing").await;
    // Reads can no longer be recorded: the booking is written, but its answer, which reads
    // the patient, is withheld with 503.
    execute(
        &app,
        match engine {
            Engine::Sqlite => {
                "CREATE TRIGGER no_reads BEFORE INSERT ON audit_reads \
                 BEGIN SELECT RAISE(ABORT, 'no reads'); END"
            }
            Engine::Postgres => {
                "CREATE FUNCTION no_reads() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'no reads'; END $$; \
                 CREATE TRIGGER no_reads BEFORE INSERT ON audit_reads \
                 FOR EACH ROW EXECUTE FUNCTION no_reads()"
            }
        },
    )
    .await;
    // SQLite records reads in a journal first (src/store/journal.rs), which then cannot be
    // written either.
    let no_journal = match engine {
        Engine::Sqlite => Some(NoNewFiles::in_the_database_directory_of(&app).await),
        Engine::Postgres => None,
    };
    let book = json!({
        "query": "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id patient { firstName } } error } }",
        "variables": { "d": { "patient": patient, "doctor": doctor,
                              "start": "2031-03-03T09:00:00Z", "end": "2031-03-03T09:30:00Z" } }
    });
    let send = || {
        app.send(
            app.client
                .post(&app.url)
                .header("x-token", &app.admin_token)
                .header("idempotency-key", "book-once")
                .json(&book),
        )
    };
    let first = send().await;
    assert_eq!(first.status.as_u16(), 503, "{}", first.body);
    // The retry does not book again: the key is held, and its answer is withheld again
    // while its reads cannot be recorded.
    let again = send().await;
    assert_eq!(again.status.as_u16(), 503, "{}", again.body);
    drop(no_journal);
    execute(
        &app,
        match engine {
            Engine::Sqlite => "DROP TRIGGER no_reads",
            Engine::Postgres => "DROP TRIGGER no_reads ON audit_reads; DROP FUNCTION no_reads()",
        },
    )
    .await;
    let answered = send().await;
    assert!(replayed(&answered), "{}", answered.body);
    let booking = &answered.body["data"]["createBooking"]["data"];
    assert_eq!(
        booking["patient"]["firstName"], "Grace",
        "{}",
        answered.body
    );
    let bookings = app
        .ok(
            "{ bookings(options: { includeDeleted: true }) { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        bookings["bookings"]["data"],
        json!([{ "id": booking["id"] }])
    );
    // The replay's read of the patient is in the audit log.
    let reads = app
        .ok(
            "query($p: ID) { auditEvents(patientId: $p) { data { action operation } } }",
            json!({ "p": patient }),
        )
        .await;
    let events = reads["auditEvents"]["data"].as_array().expect("events");
    assert!(
        events
            .iter()
            .any(|e| e["action"] == "read" && e["operation"] == "createBooking"),
        "{reads}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_replay_checks_the_callers_permissions_again(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("practitioner", "pat@example.com").await;
    let token = app.sign_in(&email, crate::helpers::PASSWORD).await;
    let first = create(&app, &token, "k1", "Ada").await;
    assert!(first.body["data"]["createPatient"]["data"]["id"].is_string());
    // The practitioner becomes a receptionist, who may not write patients: by an admin,
    // through the API, which every instance's memory of tokens hears of before it answers.
    let me = app
        .gql(Some(&token), "{ currentUser { id } }", json!({}))
        .await;
    let id = me["data"]["currentUser"]["id"].as_str().expect("id");
    let changed = app
        .ok(
            "mutation($id: ID!) { updateUser(id: $id, input: { role: \"receptionist\" }) { error } }",
            json!({ "id": id }),
        )
        .await;
    assert!(changed["updateUser"]["error"].is_null(), "{changed}");
    let retry = create(&app, &token, "k1", "Ada").await;
    assert_eq!(retry.code(), "FORBIDDEN", "{}", retry.body);
    assert!(retry.body.get("data").is_none(), "{}", retry.body);
}
