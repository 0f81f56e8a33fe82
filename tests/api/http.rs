//! GraphQL over HTTP: methods, media types, status codes, bad input, restarts.

use practice_api::config::ServeConfig;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{Value, json};

use rstest::rstest;

use crate::helpers::{Engine, TestApp, error_code};
use crate::spawn;

const GQLR: &str = "application/graphql-response+json";

fn content_type(raw: &crate::helpers::Raw) -> &str {
    raw.headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn malformed_bodies_get_400_with_a_reason(#[case] engine: Engine) {
    let app = spawn!(engine);
    for (body, says) in [
        ("{\"query\": ", "not valid JSON"),
        ("[{\"query\": \"{ __typename }\"}]", "batched requests"),
        ("\"{ __typename }\"", "JSON object"),
        ("{\"variables\": {}}", "no \"query\""),
        ("{\"query\": 42}", "\"query\" must be a string"),
        (
            "{\"query\": \"{ __typename }\", \"variables\": \"x\"}",
            "\"variables\" must be an object",
        ),
        (
            "{\"query\": \"{ __typename }\", \"operationName\": 1}",
            "\"operationName\" must be a string",
        ),
    ] {
        let raw = app
            .send(
                app.client
                    .post(&app.url)
                    .header(CONTENT_TYPE, "application/json")
                    .header("x-token", &app.admin_token)
                    .body(body),
            )
            .await;
        assert_eq!(raw.status, StatusCode::BAD_REQUEST, "{body}: {}", raw.body);
        assert_eq!(raw.code(), "BAD_REQUEST", "{}", raw.body);
        let message = raw.body["errors"][0]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{body}: {message}");
    }
    // NUL is refused everywhere, in variables and in the document, on every engine.
    for (query, vars) in [
        (
            "query($id: ID!) { patient(id: $id) { id } }",
            json!({ "id": "a\u{0}b" }),
        ),
        ("{ patient(id: \"a\\u0000b\") { id } }", json!({})),
        (
            "{ patients(search: \"\\u0000\") { data { id } } }",
            json!({}),
        ),
    ] {
        let body = app.gql(Some(&app.admin_token), query, vars).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{query}: {body}");
        assert!(body.get("data").is_none(), "{body}");
    }
    app.assert_serving().await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn parse_and_validation_errors_by_media_type(#[case] engine: Engine) {
    let app = spawn!(engine);
    let cases = [
        ("{ patients { ", "GRAPHQL_PARSE_FAILED"),
        ("{ patients { nope } }", "GRAPHQL_VALIDATION_FAILED"),
        ("{ nothing }", "GRAPHQL_VALIDATION_FAILED"),
        // GraphQL, but an anonymous operation beside another breaks a rule of validation.
        (
            "{ currentUser { id } } mutation { signOut }",
            "GRAPHQL_VALIDATION_FAILED",
        ),
    ];
    for (query, code) in cases {
        for (accept, status) in [
            ("application/json", StatusCode::OK),
            (GQLR, StatusCode::BAD_REQUEST),
        ] {
            let raw = app
                .send(
                    app.client
                        .post(&app.url)
                        .header(ACCEPT, accept)
                        .header("x-token", &app.admin_token)
                        .json(&json!({ "query": query })),
                )
                .await;
            assert_eq!(raw.status, status, "{query} as {accept}: {}", raw.body);
            assert!(
                content_type(&raw).starts_with(accept),
                "{}",
                content_type(&raw)
            );
            assert_eq!(raw.code(), code, "{}", raw.body);
            assert!(
                raw.body.get("data").is_none(),
                "a request that did not run has no data"
            );
        }
    }
}

/// A document validated once is not validated in full again while its variables are surely
/// valid (`src/graphql/pipeline/validated.rs`): a server that has run it answers every request,
/// good variables or bad, exactly as a server that never saw it does.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_document_validated_before_is_answered_as_a_new_one(#[case] engine: Engine) {
    let seen = spawn!(engine);
    seen.patient("Ada", "Lovelace").await;
    let cases = [
        (
            "query($id: ID!) { patient(id: $id) { id firstName } }",
            json!({ "id": "no-such-patient" }),
            vec![
                json!({ "id": { "a": 1 } }),
                json!({ "id": [1] }),
                json!({ "id": true }),
                json!({ "id": null }),
                json!({ "id": 12345 }),
                json!({}),
            ],
        ),
        (
            "query($p: Int!, $s: Int) { patients(pagination: { page: $p, pageSize: $s }) \
             { data { lastName } pageInfo { page pageSize hasMore } } }",
            json!({ "p": 1, "s": 10 }),
            vec![
                json!({ "p": "one", "s": 10 }),
                json!({ "p": 1.5, "s": 10 }),
                json!({ "p": 5_000_000_000_i64, "s": 10 }),
                json!({ "p": 1, "s": null }),
                json!({ "p": 1, "s": 0 }),
                json!({ "p": 1, "s": 1_000_000 }),
                json!({ "p": 1 }),
                json!({ "s": 10 }),
            ],
        ),
        (
            "query Named($q: String!) { patients(search: $q) { data { lastName } } } \
             query Other { patients { pageInfo { hasMore } } }",
            json!({ "q": "love" }),
            vec![
                json!({ "q": 7 }),
                json!({ "q": ["love"] }),
                json!({ "q": "lo" }),
            ],
        ),
        (
            // Validating Named, async-graphql checks the other operation's fragment against
            // the request's `$p`, which Named does not declare.
            "query Named($q: String!) { patients(search: $q) { pageInfo { page } } } \
             query Other($p: Int!) { ...F } \
             fragment F on Query { patients(pagination: { page: $p }) { pageInfo { page } } }",
            json!({ "q": "love" }),
            vec![
                json!({ "q": "love", "p": "oops" }),
                json!({ "q": "love", "p": 2 }),
            ],
        ),
    ];
    async fn ask(app: &TestApp, query: &str, variables: Value) -> crate::helpers::Raw {
        let operation = query.starts_with("query Named").then_some("Named");
        let body = json!({ "query": query, "variables": variables, "operationName": operation });
        app.post_json(Some(&app.admin_token), &body).await
    }
    // The server learns each document, then knows it.
    for (query, good, _) in &cases {
        for _ in 0..2 {
            let raw = ask(&seen, query, good.clone()).await;
            assert!(raw.body.get("errors").is_none(), "{query}: {}", raw.body);
        }
    }
    // Another server, asked each time with a text it has not seen (the same document, a
    // comment after it, which moves no location): nothing learnt.
    let fresh = seen.another_instance().await;
    let mut unseen = 0;
    for (query, good, bad) in &cases {
        for variables in std::iter::once(good).chain(bad) {
            let known = ask(&seen, query, variables.clone()).await;
            unseen += 1;
            let new = ask(&fresh, &format!("{query} # {unseen}"), variables.clone()).await;
            assert_eq!(
                (known.status, &known.body),
                (new.status, &new.body),
                "{query} with {variables}"
            );
        }
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn wrong_variable_types_and_absurd_ids(#[case] engine: Engine) {
    let app = spawn!(engine);
    let query = "query($id: ID!) { patient(id: $id) { id } }";
    // Values of the wrong type fail validation; a missing value fails as the field runs.
    for (vars, code) in [
        (json!({ "id": { "a": 1 } }), "GRAPHQL_VALIDATION_FAILED"),
        (json!({ "id": [1] }), "GRAPHQL_VALIDATION_FAILED"),
        (json!({ "id": true }), "GRAPHQL_VALIDATION_FAILED"),
        (json!({}), "BAD_USER_INPUT"),
        (json!({ "id": null }), "GRAPHQL_VALIDATION_FAILED"),
    ] {
        let body = app.gql(Some(&app.admin_token), query, vars.clone()).await;
        assert_eq!(error_code(&body), code, "{vars}: {body}");
        assert!(body["data"]["patient"].is_null(), "{body}");
    }
    // Any string is a valid id: unknown ones are simply not found.
    for id in [
        json!(""),
        json!("' OR 1=1 --"),
        json!("../../etc/passwd"),
        json!("🦀".repeat(1000)),
        json!("x".repeat(200_000)),
        json!(12345),
    ] {
        let body = app
            .gql(Some(&app.admin_token), query, json!({ "id": id }))
            .await;
        assert_eq!(body["data"], json!({ "patient": null }));
        assert!(body.get("errors").is_none(), "{body}");
    }
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($id: ID!) { deletePatient(id: $id) { data { id } error } }",
            json!({ "id": "x".repeat(10_000) }),
        )
        .await;
    assert!(
        body["data"]["deletePatient"]["error"]
            .as_str()
            .expect("error")
            .starts_with("No patient")
    );
    app.assert_serving().await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn get_runs_queries_and_refuses_mutations(#[case] engine: Engine) {
    let app = spawn!(engine);
    let raw = app
        .send(
            app.client
                .get(&app.url)
                .query(&[("query", "query Q($n: Int) { patients(pagination: { pageSize: $n }) { pageInfo { pageSize } } }"), ("variables", "{\"n\": 5}")])
                .header("x-token", &app.admin_token),
        )
        .await;
    assert_eq!(raw.status, StatusCode::OK, "{}", raw.body);
    assert_eq!(
        raw.body["data"]["patients"]["pageInfo"]["pageSize"],
        json!(5)
    );

    let raw = app
        .send(
            app.client
                .get(&app.url)
                .query(&[("query", "mutation { createLabel(title: \"X\") { error } }")])
                .header("x-token", &app.admin_token),
        )
        .await;
    assert_eq!(raw.status, StatusCode::METHOD_NOT_ALLOWED, "{}", raw.body);
    assert_eq!(
        raw.headers.get("allow").and_then(|v| v.to_str().ok()),
        Some("POST")
    );
    // HEAD is a GET without the answer's body: a query from the query string, a mutation
    // refused, whatever a body says.
    let raw = app
        .send(
            app.client
                .head(&app.url)
                .query(&[("query", "{ __typename }")])
                .header("x-token", &app.admin_token),
        )
        .await;
    assert_eq!(raw.status, StatusCode::OK);
    for (query, status) in [
        (
            "mutation { createLabel(title: \"Y\") { error } }",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        ("{ __typename }", StatusCode::OK),
    ] {
        let raw = app
            .send(
                app.client
                    .head(&app.url)
                    .query(&[("query", query)])
                    .header("x-token", &app.admin_token)
                    .json(&json!({ "query": "mutation { createLabel(title: \"Z\") { error } }" })),
            )
            .await;
        assert_eq!(raw.status, status, "{query}");
    }
    let labels = app.ok("{ labels { data { id } } }", json!({})).await;
    assert_eq!(labels["labels"]["data"], json!([]), "nothing was written");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn content_type_accept_and_size_are_checked(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_body_bytes: 4096,
            ..crate::helpers::test_config()
        }
    );
    let raw = app
        .send(
            app.client
                .post(&app.url)
                .header(CONTENT_TYPE, "text/plain")
                .header("x-token", &app.admin_token)
                .body("{\"query\": \"{ __typename }\"}"),
        )
        .await;
    assert_eq!(raw.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let raw = app
        .send(
            app.client
                .post(&app.url)
                .header(ACCEPT, "text/csv")
                .header("x-token", &app.admin_token)
                .json(&json!({ "query": "{ __typename }" })),
        )
        .await;
    assert_eq!(raw.status, StatusCode::NOT_ACCEPTABLE);

    let raw = app
        .post_json(
            Some(&app.admin_token),
            &json!({ "query": format!("{{ __typename }} #{}", "x".repeat(5000)) }),
        )
        .await;
    assert_eq!(raw.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        raw.body["errors"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("4096 bytes")
    );

    let raw = app
        .send(
            app.client
                .post(&app.url)
                .header(ACCEPT, GQLR)
                .header(CONTENT_TYPE, "application/json; charset=utf-8")
                .header("x-token", &app.admin_token)
                .body("{\"query\": \"{ __typename }\"}"),
        )
        .await;
    assert_eq!(raw.status, StatusCode::OK);
    assert!(content_type(&raw).starts_with(GQLR));
    assert_eq!(
        raw.body,
        json!({ "data": { "__typename": "Query" }, "extensions": { "cost": { "requested": 1, "limit": 10_000 } } })
    );
    assert!(raw.headers.contains_key("x-request-id"));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn unauthenticated_is_401_under_graphql_response_json(#[case] engine: Engine) {
    let app = spawn!(engine);
    let raw = app
        .send(
            app.client
                .post(&app.url)
                .header(ACCEPT, GQLR)
                .json(&json!({ "query": "{ patients { data { id } } }" })),
        )
        .await;
    assert_eq!(raw.status, StatusCode::UNAUTHORIZED);
    assert_eq!(raw.code(), "UNAUTHENTICATED");
    // Without a token, a typo gets no "did you mean" hints about the schema.
    let raw = app
        .post_json(None, &json!({ "query": "{ patiens { data { id } } }" }))
        .await;
    assert_eq!(raw.code(), "UNAUTHENTICATED", "{}", raw.body);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn concurrent_label_adds_write_once(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let label = app.label("VIP").await;
    let body = json!({
        "query": "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id } error } }",
        "variables": { "p": id, "l": label }
    });
    let requests = (0..20).map(|_| app.post_json(Some(&app.admin_token), &body));
    let results = futures_util::future::join_all(requests).await;
    let mut added = 0;
    for raw in &results {
        assert_eq!(raw.status, StatusCode::OK, "{}", raw.body);
        assert!(raw.body.get("errors").is_none(), "{}", raw.body);
        let payload = &raw.body["data"]["addPatientLabel"];
        if payload["error"] == Value::Null {
            added += 1;
        } else {
            assert_eq!(
                payload["error"],
                "The label \"VIP\" is already on this patient"
            );
        }
    }
    assert_eq!(added, 1);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn data_survives_a_restart(#[case] engine: Engine) {
    let mut app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let label = app.label("VIP").await;
    app.ok(
        "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }",
        json!({ "p": id, "l": label }),
    )
    .await;
    app.restart().await;
    let data = app
        .ok(
            "query($id: ID!) { patient(id: $id) { firstName labels { text } } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        data["patient"],
        json!({ "firstName": "Jane", "labels": [{ "text": "VIP" }] })
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_internal_error_shows_only_a_request_id(#[case] engine: Engine) {
    let app = spawn!(engine);
    // Break the database under the server's feet.
    let pool = sqlx::AnyPool::connect(&app.database_url)
        .await
        .expect("connect");
    sqlx::query("DROP TABLE patient_labels")
        .execute(&pool)
        .await
        .expect("drop");
    sqlx::query("DROP TABLE labels")
        .execute(&pool)
        .await
        .expect("drop");
    pool.close().await;
    let raw = app
        .post_json(
            Some(&app.admin_token),
            &json!({ "query": "{ labels { data { id } } currentPractice { id } }" }),
        )
        .await;
    assert_eq!(raw.status, StatusCode::OK);
    let id = raw
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("request id");
    assert_eq!(raw.code(), "INTERNAL_SERVER_ERROR", "{}", raw.body);
    assert_eq!(
        raw.body["errors"][0]["message"],
        json!(format!("Internal server error (request id {id})"))
    );
    let text = raw.body.to_string().to_lowercase();
    for leak in [
        "select",
        "sqlite",
        "postgres",
        "relation",
        "no such table",
        ".rs",
        "test.db",
    ] {
        assert!(!text.contains(leak), "{leak} leaked: {text}");
    }
    // The rest of the response, and the server, carry on.
    assert_eq!(raw.body["data"]["labels"], Value::Null);
    assert_eq!(
        raw.body["data"]["currentPractice"]["id"],
        json!(app.practice_id)
    );
    app.assert_serving().await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn fields_come_in_the_order_they_were_asked(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let data = app
        .ok(
            "query($id: ID!) { zeta: patients { pageInfo { page } data { labels { id } id } } \
             __typename patient(id: $id) { email labels { text } id ...P } alpha: currentPractice { name id } } \
             fragment P on Patient { firstName }",
            json!({ "id": id }),
        )
        .await;
    let keys =
        |v: &Value| -> Vec<String> { v.as_object().expect("object").keys().cloned().collect() };
    assert_eq!(keys(&data), ["zeta", "__typename", "patient", "alpha"]);
    assert_eq!(keys(&data["zeta"]), ["pageInfo", "data"]);
    assert_eq!(keys(&data["zeta"]["data"][0]), ["labels", "id"]);
    assert_eq!(
        keys(&data["patient"]),
        ["email", "labels", "id", "firstName"]
    );
    assert_eq!(keys(&data["alpha"]), ["name", "id"]);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn deep_but_reasonable_documents_run(#[case] engine: Engine) {
    let app = spawn!(engine);
    // 8 levels: runs (and costs 3,003: a patient's 500 bookings, each with its doctor's
    // first booking of the day and its location).
    let ok = "{ booking(id: \"x\") { patient { bookings(start: \"2031-01-01\", end: \"2031-01-02\") { doctor { bookings(start: \"2031-01-01\", end: \"2031-01-02\", pageSize: 1) { data { id location { name } } } } } } } }";
    let body = app.gql(Some(&app.admin_token), ok, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    // GraphiQL's introspection query fits.
    let introspection = "query IntrospectionQuery { __schema { queryType { name } types { ...FullType } } } fragment FullType on __Type { kind name fields(includeDeprecated: true) { name args { ...InputValue } type { ...TypeRef } } inputFields { ...InputValue } } fragment InputValue on __InputValue { name type { ...TypeRef } defaultValue } fragment TypeRef on __Type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }";
    let body = app
        .gql(Some(&app.admin_token), introspection, json!({}))
        .await;
    assert!(body.get("errors").is_none(), "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn one_sign_in_per_request(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    let aliases: String = (0..50)
        .map(|i| format!("a{i}: signIn(email: \"{email}\", password: \"guess{i}\") {{ token }} "))
        .collect();
    let body = app
        .gql(None, &format!("mutation {{ {aliases} }}"), json!({}))
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    assert!(body.get("data").is_none(), "{body}");
    // Not through fragments either, nor with a token.
    let hidden = format!(
        "mutation {{ ...F }} fragment F on Mutation {{ {} }}",
        &aliases[..aliases.len() / 10]
    );
    let body = app.gql(Some(&app.admin_token), &hidden, json!({})).await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn every_limit_is_named_when_hit(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_document_bytes: 2_000,
            ..crate::helpers::test_config()
        }
    );
    let refused = |body: &Value, limit: &str, value: u64, max: u64| {
        assert_eq!(error_code(body), "QUERY_TOO_COMPLEX", "{body}");
        let ext = &body["errors"][0]["extensions"];
        assert_eq!(
            (
                ext["limit"].as_str(),
                ext["value"].as_u64(),
                ext["max"].as_u64()
            ),
            (Some(limit), Some(value), Some(max)),
            "{body}"
        );
        let message = body["errors"][0]["message"].as_str().unwrap_or("");
        assert!(message.contains(&value.to_string()), "{message}");
        assert!(
            message.contains(&format!("more than the limit of {max}")),
            "{message}"
        );
        assert!(body.get("data").is_none(), "{body}");
    };
    // Cost: 100 patients, each with the 500 bookings it can have, each with its patient's
    // 20 labels.
    let costly = "{ patients(pagination: { pageSize: 100 }) { data { bookings(start: \"2031-01-01\", end: \"2031-01-02\") { patient { labels { text } } } } } }";
    let body = app.gql(Some(&app.admin_token), costly, json!({})).await;
    refused(&body, "cost", 1 + 100 * (1 + (1 + 500 * (1 + 21))), 10_000);
    assert_eq!(
        body["extensions"]["cost"],
        json!({ "requested": 1_100_201, "limit": 10_000 })
    );
    // The page size may come from a variable.
    let paged = "query($p: Pagination) { patients(pagination: $p) { data { id firstName lastName email } } }";
    let small = app
        .gql(
            Some(&app.admin_token),
            paged,
            json!({ "p": { "pageSize": 10 } }),
        )
        .await;
    assert_eq!(small["extensions"]["cost"]["requested"], json!(1 + 10 * 5));
    // Aliases.
    let aliases: String = (0..31)
        .map(|i| format!("a{i}: currentPractice {{ id }} "))
        .collect();
    let body = app
        .gql(
            Some(&app.admin_token),
            &format!("{{ {aliases} }}"),
            json!({}),
        )
        .await;
    refused(&body, "aliases", 31, 30);
    // Directives.
    let directives: String = (0..21).map(|_| "@include(if: true) ").collect();
    let body = app
        .gql(
            Some(&app.admin_token),
            &format!("{{ currentPractice {{ id {directives} }} }}"),
            json!({}),
        )
        .await;
    refused(&body, "directives", 21, 20);
    // Depth.
    let mut deep = String::from("id");
    for _ in 0..8 {
        deep = format!(
            "patient {{ bookings(start: \"2031-01-01\", end: \"2031-01-02\") {{ {deep} }} }}"
        );
    }
    let body = app
        .gql(
            Some(&app.admin_token),
            &format!("{{ bookings {{ data {{ {deep} }} }} }}"),
            json!({}),
        )
        .await;
    refused(&body, "depth", 19, 15);
    // Document size.
    let long = format!("{{ currentPractice {{ id }} }} # {}", "x".repeat(2_000));
    let body = app.gql(Some(&app.admin_token), &long, json!({})).await;
    refused(&body, "documentBytes", long.len() as u64, 2_000);
    // Under graphql-response+json, a refusal is a 400.
    let raw = app
        .send(
            app.client
                .post(&app.url)
                .header(ACCEPT, GQLR)
                .header("x-token", &app.admin_token)
                .json(&json!({ "query": costly })),
        )
        .await;
    assert_eq!(raw.status, StatusCode::BAD_REQUEST);
    app.assert_serving().await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_token_past_its_rate_limit_gets_429_and_another_token_carries_on(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            rate_limit: 5,
            ..ServeConfig::default()
        }
    );
    let query = json!({ "query": "{ currentPractice { id } }" });
    let header = |raw: &crate::helpers::Raw, name: &str| {
        raw.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .unwrap_or_default()
    };
    // Set-up went through the library, not HTTP: all 5 requests are there.
    for remaining in (0..5).rev() {
        let raw = app.post_json(Some(&app.admin_token), &query).await;
        assert_eq!(raw.status, StatusCode::OK, "{}", raw.body);
        assert_eq!(header(&raw, "ratelimit-policy"), "\"token\";q=5;w=60");
        assert_eq!(header(&raw, "x-ratelimit-limit"), "5");
        assert_eq!(header(&raw, "x-ratelimit-remaining"), remaining.to_string());
        assert!(header(&raw, "ratelimit").starts_with(&format!("\"token\";r={remaining};t=")));
    }
    let raw = app.post_json(Some(&app.admin_token), &query).await;
    assert_eq!(raw.status, StatusCode::TOO_MANY_REQUESTS, "{}", raw.body);
    assert_eq!(raw.code(), "RATE_LIMITED", "{}", raw.body);
    let retry_after: u64 = header(&raw, "retry-after")
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=12).contains(&retry_after), "{retry_after}");
    assert_eq!(header(&raw, "x-ratelimit-remaining"), "0");
    assert!(raw.body.get("data").is_none(), "{}", raw.body);
    // Another token is not slowed.
    let other = app.token(&["*"]).await;
    let raw = app.post_json(Some(&other), &query).await;
    assert_eq!(raw.status, StatusCode::OK, "{}", raw.body);
    assert_eq!(header(&raw, "x-ratelimit-remaining"), "4");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_request_past_its_time_limit_is_stopped_and_the_server_carries_on(
    #[case] engine: Engine,
) {
    let app = spawn!(
        engine,
        ServeConfig {
            // Far shorter than an Argon2id check: every signIn overruns it.
            request_timeout: std::time::Duration::from_millis(1),
            ..crate::helpers::test_config()
        }
    );
    let email = app.user("admin", "ada@example.com").await;
    let raw = app
        .post_json(
            None,
            &json!({
                "query": "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token } }",
                "variables": { "e": email, "p": crate::helpers::PASSWORD }
            }),
        )
        .await;
    assert_eq!(raw.status, StatusCode::SERVICE_UNAVAILABLE, "{}", raw.body);
    assert_eq!(raw.code(), "SERVICE_UNAVAILABLE", "{}", raw.body);
    let message = raw.body["errors"][0]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("took longer than the limit of 1ms"),
        "{message}"
    );
    // A mutation may have made some of its changes: no plain "try again".
    assert!(
        message.contains("Idempotency-Key") && !message.contains("try again"),
        "{message}"
    );
    // The process carries on.
    let health = app
        .client
        .get(app.url.replace("/graphql", "/health"))
        .send()
        .await
        .expect("health");
    assert!(health.status().is_success());
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn thousands_of_nested_brackets_are_refused_before_parsing(#[case] engine: Engine) {
    let app = spawn!(engine);
    // Found by the fuzz test: nested inline fragments add no field depth, and used to
    // overflow the stack while the document was parsed.
    // Each within the document size limit (32 KiB), so only the nesting can refuse it.
    for (open, close, times) in [
        ("{ ... on Query ", "}", 1_500),
        ("{ a(b: ", ") }", 1_500),
        ("[", "]", 10_000),
    ] {
        let query = format!("{}{}", open.repeat(times), close.repeat(times));
        let body = app.gql(Some(&app.admin_token), &query, json!({})).await;
        assert_eq!(error_code(&body), "QUERY_TOO_COMPLEX", "{open}");
        assert_eq!(body["errors"][0]["extensions"]["limit"], "depth");
    }
    app.assert_serving().await;
}

/// Reads from a raw connection until the server closes it; None if it is still open after
/// `wait`. Returns what was read.
async fn read_until_closed(
    stream: &mut tokio::net::TcpStream,
    wait: std::time::Duration,
) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&received).into()),
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
        }
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn slow_and_idle_clients_are_cut_off_and_others_are_served(#[case] engine: Engine) {
    use tokio::io::AsyncWriteExt;
    let app = spawn!(
        engine,
        ServeConfig {
            header_timeout: std::time::Duration::from_millis(300),
            max_client_connections: 4,
            ..crate::helpers::test_config()
        }
    );
    let address = app
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/graphql")
        .to_string();
    // More clients than there are connections, each sending half a request and then
    // nothing, or nothing at all, or the start of an HTTP/2 preface.
    let mut slow = Vec::new();
    for i in 0..6 {
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        let start: &[u8] = match i % 3 {
            0 => b"POST /graphql HTTP/1.1\r\nHost: practice\r\nContent-Type: appl",
            1 => b"",
            _ => b"PRI * HTTP/2.0\r\n",
        };
        stream.write_all(start).await.expect("write");
        slow.push(stream);
    }
    // A well-behaved client is still served: the slow ones are closed after the header
    // timeout, and it gets their place.
    let answered = app.ok("{ currentPractice { id } }", json!({})).await;
    assert_eq!(answered["currentPractice"]["id"], json!(app.practice_id));
    for stream in &mut slow {
        let closed = read_until_closed(stream, std::time::Duration::from_secs(20)).await;
        assert!(closed.is_some(), "a slow client's connection is still open");
    }

    // A connection left idle after its response is closed too.
    let mut idle = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    let body = json!({ "query": "{ currentPractice { id } }" }).to_string();
    let request = format!(
        "POST /graphql HTTP/1.1\r\nHost: practice\r\nContent-Type: application/json\r\n\
         x-token: {}\r\nContent-Length: {}\r\n\r\n{body}",
        app.admin_token,
        body.len()
    );
    idle.write_all(request.as_bytes()).await.expect("write");
    let received = read_until_closed(&mut idle, std::time::Duration::from_secs(20))
        .await
        .expect("an idle connection is closed");
    assert!(received.starts_with("HTTP/1.1 200"), "{received}");
    assert!(received.contains(&app.practice_id), "{received}");
    app.assert_serving().await;
}
