//! The second round of hardening: what a client controls is bounded, whatever it sends and
//! however slowly it reads; costs are what a query can really cost; sign-in guesses are
//! counted before they are checked, per client behind a proxy, across instances.

use std::time::Duration;

use practice_api::config::{ServeConfig, parse_proxies};
use practice_api::store::patients::PatientFields;
use reqwest::StatusCode;
use rstest::rstest;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::helpers::{Engine, PASSWORD, TestApp, error_code, error_message, test_config};
use crate::spawn;

const SIGN_IN: &str =
    "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token error } }";

/// The server's address, `127.0.0.1:PORT`.
fn address(app: &TestApp) -> std::net::SocketAddr {
    app.url
        .trim_start_matches("http://")
        .trim_end_matches("/graphql")
        .parse()
        .expect("address")
}

/// A connection from `from` (a loopback address) with a receive buffer of a few kilobytes.
async fn connect_from(app: &TestApp, from: [u8; 4]) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(2048).expect("buffer");
    socket
        .bind(std::net::SocketAddr::from((from, 0)))
        .expect("bind");
    socket.connect(address(app)).await.expect("connect")
}

/// A client whose requests come from `from`.
fn client_from(from: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(from))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn clients_that_stop_reading_hold_no_slot_for_long(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_client_connections: 20,
            max_connections_per_address: 6,
            write_timeout: Duration::from_secs(1),
            header_timeout: Duration::from_secs(20),
            ..test_config()
        }
    );
    // Six connections ask for GraphiQL's script twenty times over, more than any buffer
    // holds, and never read.
    let request = "GET /graphiql/graphiql.min.js HTTP/1.1\r\nhost: x\r\n\r\n".repeat(20);
    let mut stalled = Vec::new();
    for _ in 0..6 {
        let mut connection = connect_from(&app, [127, 0, 0, 1]).await;
        connection
            .write_all(request.as_bytes())
            .await
            .expect("send");
        stalled.push(connection);
    }
    // A seventh from the same address is turned away at once.
    let mut seventh = connect_from(&app, [127, 0, 0, 1]).await;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), seventh.read_to_string(&mut answer))
        .await
        .expect("answered at once")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    // Everyone else is served meanwhile.
    let other = client_from([127, 0, 0, 2]);
    let served = other
        .get(format!("http://{}/health", address(&app)))
        .send()
        .await
        .expect("served");
    assert_eq!(served.status(), StatusCode::OK);
    // Writes that make no progress are cut off after the write timeout (well before the
    // header timeout): the address's slots are free again.
    let mut freed = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let reached = client_from([127, 0, 0, 1])
            .get(format!("http://{}/health", address(&app)))
            .send()
            .await;
        if reached.is_ok_and(|r| r.status() == StatusCode::OK) {
            freed = true;
            break;
        }
    }
    assert!(freed, "the stalled connections still hold their slots");
    // And what the stalled clients got was cut short.
    let mut received = Vec::new();
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        stalled[0].read_to_end(&mut received),
    )
    .await;
    let whole = include_bytes!("../../assets/graphiql/graphiql.min.js").len() * 20;
    assert!(received.len() < whole, "{} of {whole}", received.len());
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn connections_live_no_longer_than_their_age(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_connection_age: Duration::from_secs(1),
            header_timeout: Duration::from_secs(20),
            ..test_config()
        }
    );
    let mut connection = connect_from(&app, [127, 0, 0, 1]).await;
    connection
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("send");
    let mut first = [0u8; 512];
    let n = connection.read(&mut first).await.expect("answer");
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    // Idle after its age: the server closes it, long before the header timeout would.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), connection.read_to_end(&mut rest))
        .await
        .expect("closed by the server after its age");
    assert!(closed.is_ok_and(|n| n == 0), "{rest:?}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn bad_tokens_count_against_their_address(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            address_rate_limit: 10,
            ..test_config()
        }
    );
    let bad = format!("pa_{}_{}", app.practice_id, "0".repeat(64));
    let mut codes = Vec::new();
    for _ in 0..12 {
        let raw = app
            .post_json(
                Some(&bad),
                &json!({ "query": "{ currentPractice { id } }" }),
            )
            .await;
        codes.push((raw.status, raw.code().to_string()));
        if raw.status == StatusCode::TOO_MANY_REQUESTS {
            let policy = raw.headers.get("ratelimit-policy").expect("policy");
            assert_eq!(policy, "\"address\";q=10;w=60");
        }
    }
    let limited = codes
        .iter()
        .filter(|(status, code)| *status == StatusCode::TOO_MANY_REQUESTS && code == "RATE_LIMITED")
        .count();
    assert_eq!(limited, 2, "{codes:?}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_query_costs_what_it_can_return(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            max_cost: 500,
            ..test_config()
        }
    );
    let cost = |body: &Value| body["extensions"]["cost"]["requested"].clone();
    // A variable's default is what the executor will use.
    let defaulted = app
        .gql(
            Some(&app.admin_token),
            "query($n: Int = 100) { bookings(pagination: { pageSize: $n }) { data { id patient { id } doctor { id } } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&defaulted), "QUERY_TOO_COMPLEX", "{defaulted}");
    assert_eq!(cost(&defaulted), json!(1 + 100 * 6));
    // A patient's bookings weigh the 500 they can be.
    let nested = app
        .gql(
            Some(&app.admin_token),
            "{ patient(id: \"x\") { bookings(start: \"2026-01-01\", end: \"2026-01-02\") { id patient { id } } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&nested), "QUERY_TOO_COMPLEX", "{nested}");
    assert_eq!(cost(&nested), json!(1 + 1 + 500 * 3));
    // A number that is no Int is refused as such, not weighed as a query too costly: as a
    // literal, and as a variable's value.
    for (query, variables) in [
        ("{ events(limit: 2147483648) { cursor } }", json!({})),
        (
            "{ labels(pagination: { pageSize: 2147483648 }) { data { id } } }",
            json!({}),
        ),
        (
            "query($n: Int) { events(limit: $n) { cursor } }",
            json!({ "n": 2_147_483_648_i64 }),
        ),
    ] {
        let body = app.gql(Some(&app.admin_token), query, variables).await;
        let code = error_code(&body);
        assert!(
            code == "GRAPHQL_VALIDATION_FAILED" || code == "BAD_USER_INPUT",
            "{query}: {body}"
        );
        assert!(
            error_message(&body).contains("2147483648") || error_message(&body).contains("Int"),
            "{query}: {body}"
        );
    }
    // A patient's labels weigh the 20 it can have, and it can have no more.
    let patient = app.patient("Many", "Labels").await;
    let mut labels = Vec::new();
    for i in 0..20 {
        let label = app.label(&format!("L{i}")).await;
        labels.push(label.clone());
        let added = app
            .ok(
                "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }",
                json!({ "p": patient, "l": label }),
            )
            .await;
        assert_eq!(added["addPatientLabel"]["error"], Value::Null);
    }
    let add = |label: String| {
        app.ok(
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }",
            json!({ "p": patient, "l": label }),
        )
    };
    let refused = add(app.label("L20").await).await;
    assert_eq!(
        refused["addPatientLabel"]["error"],
        "A patient has at most 20 labels: take one off first"
    );
    // A label the patient has, or one the catalogue does not, is told as such, full or not.
    let again = add(labels[3].clone()).await;
    let again = again["addPatientLabel"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(again.contains("already"), "{again}");
    let unknown = add("no-such-label".into()).await;
    let unknown = unknown["addPatientLabel"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(unknown.contains("no-such-label"), "{unknown}");
    let count = app
        .ok(
            "query($p: ID!) { patient(id: $p) { labels { id } } }",
            json!({ "p": patient }),
        )
        .await;
    assert_eq!(
        count["patient"]["labels"].as_array().map(Vec::len),
        Some(20)
    );
}

/// The full introspection query, as GraphiQL sends it.
const INTROSPECTION: &str = include_str!("../introspection.graphql");

/// Introspection costs what it returns, a quarter of a unit a value, counted against the
/// schema before it runs: the full introspection query runs, at the cost of what it answered,
/// as does every type's fields' types' fields, four deep; thirty aliases of the latter, a
/// kilobyte of query for megabytes of answer built on a runtime thread, are refused before
/// they run.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn introspection_costs_what_it_returns(#[case] engine: Engine) {
    fn values(value: &Value) -> u64 {
        match value {
            Value::Object(o) => o.values().map(|v| 1 + values(v)).sum(),
            Value::Array(a) => a.iter().map(values).sum(),
            _ => 0,
        }
    }
    let app = spawn!(engine);
    let full = app
        .gql(Some(&app.admin_token), INTROSPECTION, json!({}))
        .await;
    assert!(full["errors"].is_null(), "{full}");
    let answered = values(&full["data"]);
    assert!(answered > 5_000, "{answered}");
    assert_eq!(
        full["extensions"]["cost"]["requested"],
        json!(answered.div_ceil(4))
    );
    let nested = "fields { name type { name fields { name type { name fields { name type { name fields { name } } } } } } }";
    let aliases: String = (0..30)
        .map(|i| format!("a{i}: __schema {{ types {{ ...F }} }} "))
        .collect();
    let bomb = format!("query {{ {aliases} }} fragment F on __Type {{ name {nested} }}");
    let refused = app.gql(Some(&app.admin_token), &bomb, json!({})).await;
    assert_eq!(error_code(&refused), "QUERY_TOO_COMPLEX", "{refused}");
    assert_eq!(
        refused["errors"][0]["extensions"]["limit"], "cost",
        "{refused}"
    );
    // One of them alone runs, at the cost of what it answered.
    let one = format!(
        "query {{ __schema {{ types {{ ...F }} }} }} fragment F on __Type {{ name {nested} }}"
    );
    let ran = app.gql(Some(&app.admin_token), &one, json!({})).await;
    assert!(ran["errors"].is_null(), "{}", ran["errors"]);
    assert_eq!(
        ran["extensions"]["cost"]["requested"],
        json!(values(&ran["data"]).div_ceil(4))
    );
}

/// Fragments `F0` to `F{levels}`, each but the last spreading the next twice, the last
/// selecting `last`: `F0` expands to 2^levels copies of `last`.
fn doubling_fragments(levels: usize, last: &str) -> String {
    let mut text = String::new();
    for level in 0..levels {
        let next = level + 1;
        text.push_str(&format!(
            "fragment F{level} on Query {{ ...F{next} ...F{next} }} "
        ));
    }
    text.push_str(&format!("fragment F{levels} on Query {{ {last} }}"));
    text
}

/// A document whose fragments expand without measure is refused before anything walks it,
/// whether the expansion is in an operation the request does not run (behind a signIn, which
/// takes no token) or in the one it runs, ending in a fragment the document does not define
/// (which weighs nothing); within the bound, fragments spread many times still run.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn fragments_that_expand_without_measure_are_refused(#[case] engine: Engine) {
    let app = spawn!(engine);
    let refused = |body: &Value| {
        assert_eq!(error_code(body), "QUERY_TOO_COMPLEX", "{body}");
        assert_eq!(
            body["errors"][0]["extensions"]["limit"], "selections",
            "{body}"
        );
    };
    for levels in [18, 30] {
        let behind_sign_in = format!(
            "mutation A {{ signIn(email: \"nobody@example.com\", password: \"wrong\") {{ token }} }} \
             query B {{ ...F0 }} {}",
            doubling_fragments(levels, "__typename")
        );
        let raw = app
            .post_json(
                None,
                &json!({ "query": behind_sign_in, "operationName": "A" }),
            )
            .await;
        assert_eq!(raw.status, StatusCode::OK, "{}", raw.body);
        refused(&raw.body);
        let undefined_at_the_end =
            format!("{{ ...F0 }} {}", doubling_fragments(levels, "...Nowhere"));
        refused(
            &app.gql(Some(&app.admin_token), &undefined_at_the_end, json!({}))
                .await,
        );
    }
    // A fragment of 2,000 fields spread 2^15 times: few sets, but every field of each
    // looked at each time.
    let wide = format!(
        "mutation A {{ signIn(email: \"nobody@example.com\", password: \"wrong\") {{ token }} }} \
         query B {{ ...F0 }} {}",
        doubling_fragments(15, &"__typename ".repeat(2_000))
    );
    assert!(wide.len() < 32 * 1024);
    let raw = app
        .post_json(None, &json!({ "query": wide, "operationName": "A" }))
        .await;
    refused(&raw.body);
    // 2^12 selections: within the bound, and within the cost limit.
    let many = format!("{{ ...F0 }} {}", doubling_fragments(12, "__typename"));
    let body = app.gql(Some(&app.admin_token), &many, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(body["data"]["__typename"], "Query");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn searches_and_pages_touch_a_bounded_part_of_the_practice(#[case] engine: Engine) {
    let app = spawn!(engine);
    let search = "query($s: String, $p: Int) { patients(search: $s, pagination: { page: $p }) { data { id } } }";
    // A page far down the list is refused, not scanned to.
    let far = app
        .gql(
            Some(&app.admin_token),
            search,
            json!({ "s": null, "p": 2_147_483_647 }),
        )
        .await;
    assert_eq!(error_code(&far), "BAD_USER_INPUT", "{far}");
    // A search under three characters reads every patient: it costs half the limit.
    let short = app
        .gql(
            Some(&app.admin_token),
            "{ a: patients(search: \"jo\") { data { id } } b: patients(search: \"an\") { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&short), "QUERY_TOO_COMPLEX", "{short}");
    // Another practice with thousands of matches does not make this practice's search broad.
    let (other, other_token) = app.other_practice("Busy clinic").await;
    let many: Vec<(PatientFields, Vec<String>)> = (0..2001)
        .map(|i| {
            let fields = PatientFields {
                first_name: "Zqx".into(),
                last_name: format!("Many{i}"),
                email: Some(format!("zqx{i}@example.com")),
                ..Default::default()
            };
            (fields, Vec::new())
        })
        .collect();
    app.store
        .practice(&other)
        .by(crate::helpers::operator())
        .import_patients(many)
        .await
        .expect("import");
    let mine = app.patient("Zqx", "Mine").await;
    const SEARCH: &str = "query($s: String) { patients(search: $s) { data { id } } }";
    let found = app.ok(SEARCH, json!({ "s": "zqx" })).await;
    assert_eq!(found["patients"]["data"], json!([{ "id": mine }]));
    // The same through the pieces of five characters (PostgreSQL's index keyed by practice).
    let found = app.ok(SEARCH, json!({ "s": "zqx m" })).await;
    assert_eq!(found["patients"]["data"], json!([{ "id": mine }]));
    let broad = app
        .gql(Some(&other_token), SEARCH, json!({ "s": "zqx m" }))
        .await;
    assert_eq!(error_code(&broad), "BAD_USER_INPUT", "{broad}");
    // In the busy practice the same search matches more than one search may touch.
    let broad = app
        .gql(Some(&other_token), SEARCH, json!({ "s": "zqx" }))
        .await;
    assert_eq!(error_code(&broad), "BAD_USER_INPUT", "{broad}");
    assert!(error_message(&broad).contains("more than 2000"), "{broad}");
    // Narrowed, it answers.
    let narrow = app
        .gql(
            Some(&other_token),
            "query($s: String) { patients(search: $s) { data { lastName } } }",
            json!({ "s": "zqx1999@" }),
        )
        .await;
    assert_eq!(
        narrow["data"]["patients"]["data"],
        json!([{ "lastName": "Many1999" }])
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn long_lists_and_long_emails_are_refused_at_once(#[case] engine: Engine) {
    let app = spawn!(engine);
    // 100,000 different label ids: refused before any of them is looked at (deduplicating
    // them took quadratic time on a runtime thread).
    let labels: Vec<String> = (0..100_000).map(|i| format!("{i:x}")).collect();
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { error } }",
            json!({ "d": { "first": "A", "last": "B", "labels": labels } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    assert!(error_message(&body).contains("at most 20 labels"), "{body}");
    // A sign-in with an email no address can be is refused before anything is looked up
    // or counted.
    let long = format!("{}@example.com", "a".repeat(300));
    let body = app
        .gql(None, SIGN_IN, json!({ "e": long, "p": "whatever" }))
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    // Permission lists are bounded too.
    let permissions: Vec<&str> = vec!["patients:read"; 101];
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($p: [String!]!) { createApiToken(name: \"t\", permissions: $p) { error } }",
            json!({ "p": permissions }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn guesses_sent_at_once_are_counted_before_they_are_checked(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    let guesses = (0..30).map(|i| {
        let app = &app;
        let email = email.clone();
        async move {
            app.gql(
                None,
                SIGN_IN,
                json!({ "e": email, "p": format!("guess {i}") }),
            )
            .await
        }
    });
    let answers = futures_util::future::join_all(guesses).await;
    let checked = answers
        .iter()
        .filter(|body| body["data"]["signIn"]["error"] == "The email or password is incorrect")
        .count();
    let refused = answers
        .iter()
        .filter(|body| error_code(body) == "RATE_LIMITED")
        .count();
    assert!(checked <= 5, "{checked} guesses were checked");
    assert_eq!(checked + refused, 30);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn behind_a_trusted_proxy_each_client_is_throttled_on_its_own(#[case] engine: Engine) {
    let behind_proxy = ServeConfig {
        trusted_proxies: parse_proxies("127.0.0.1").expect("proxies"),
        ..test_config()
    };
    let app = spawn!(engine, behind_proxy);
    let email = app.user("admin", "ada@example.com").await;
    // Each request also carries a `Forwarded` header of the client's own making, naming a new
    // address every time, as a proxy that appends to `X-Forwarded-For` passes it on: only the
    // header the proxy writes (X-Forwarded-For, by default) is read.
    let made_up = std::sync::atomic::AtomicU32::new(0);
    let sign_in_from = |client: &'static str, email: String, password: String| {
        let n = made_up.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = app
            .client
            .post(&app.url)
            .header("x-forwarded-for", client)
            .header("forwarded", format!("for=198.51.{}.{}", n / 250, n % 250))
            .json(&json!({ "query": SIGN_IN, "variables": { "e": email, "p": password } }));
        async { app.send(request).await.body }
    };
    // Twenty-one wrong guesses from one client behind the proxy, each at another email.
    for i in 0..21 {
        sign_in_from("203.0.113.7", format!("nobody{i}@example.com"), "x".into()).await;
    }
    let blocked = sign_in_from("203.0.113.7", email.clone(), PASSWORD.into()).await;
    assert_eq!(error_code(&blocked), "RATE_LIMITED", "{blocked}");
    // Another client behind the same proxy signs in.
    let other = sign_in_from("203.0.113.8", email.clone(), PASSWORD.into()).await;
    assert!(other["data"]["signIn"]["token"].is_string(), "{other}");
    // A client of its own /64 is one client, whatever address it takes in it.
    for i in 0..21 {
        let client: &'static str = if i % 2 == 0 {
            "2001:db8::1"
        } else {
            "2001:db8::2"
        };
        sign_in_from(client, format!("v6nobody{i}@example.com"), "x".into()).await;
    }
    let same_64 = sign_in_from("2001:db8::99", email.clone(), PASSWORD.into()).await;
    assert_eq!(error_code(&same_64), "RATE_LIMITED", "{same_64}");

    // Without trusted proxies, the header is not believed: everyone is the proxy.
    let direct = spawn!(engine);
    let email = direct.user("admin", "ada@example.com").await;
    for i in 0..21 {
        let request = direct.client.post(&direct.url).header("x-forwarded-for", "203.0.113.7").json(
            &json!({ "query": SIGN_IN, "variables": { "e": format!("nobody{i}@example.com"), "p": "x" } }),
        );
        direct.send(request).await;
    }
    let request = direct
        .client
        .post(&direct.url)
        .header("x-forwarded-for", "203.0.113.8")
        .json(&json!({ "query": SIGN_IN, "variables": { "e": email, "p": PASSWORD } }));
    let spoofed = direct.send(request).await.body;
    assert_eq!(error_code(&spoofed), "RATE_LIMITED", "{spoofed}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn instances_throttle_sign_ins_together(#[case] engine: Engine) {
    let first = spawn!(engine);
    let second = first.another_instance().await;
    let email = first.user("admin", "ada@example.com").await;
    for i in 0..5 {
        let body = first
            .gql(
                None,
                SIGN_IN,
                json!({ "e": email, "p": format!("guess {i}") }),
            )
            .await;
        assert_eq!(
            body["data"]["signIn"]["error"], "The email or password is incorrect",
            "{body}"
        );
    }
    let elsewhere = second
        .gql(None, SIGN_IN, json!({ "e": email, "p": PASSWORD }))
        .await;
    assert_eq!(error_code(&elsewhere), "RATE_LIMITED", "{elsewhere}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn search_survives_the_database_being_compacted(#[case] engine: Engine) {
    let app = spawn!(engine);
    let names = ["Aaron", "Beatrix", "Cosimo", "Delphine"];
    let mut ids = Vec::new();
    for name in names {
        ids.push(app.patient(name, "Compact").await);
    }
    // Rows go (an operator's clean-up, by hand), the database is compacted: SQLite's VACUUM
    // may renumber rows that have no INTEGER PRIMARY KEY of their own.
    sqlx::any::install_default_drivers();
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&app.database_url)
        .await
        .expect("connect");
    for id in &ids[..2] {
        sqlx::query("DELETE FROM patients WHERE id = $1")
            .bind(id)
            .execute(&mut conn)
            .await
            .expect("delete");
    }
    sqlx::raw_sql(match engine {
        Engine::Sqlite => "VACUUM",
        Engine::Postgres => "VACUUM FULL patients",
    })
    .execute(&mut conn)
    .await
    .expect("vacuum");
    for (name, id) in names.iter().zip(&ids).skip(2) {
        let found = app
            .ok(
                "query($s: String) { patients(search: $s) { data { id } } }",
                json!({ "s": name.to_lowercase() }),
            )
            .await;
        assert_eq!(found["patients"]["data"], json!([{ "id": id }]), "{name}");
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn every_label_change_is_in_the_record(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Rec", "Orded").await;
    let (a, b) = (app.label("A").await, app.label("B").await);
    let update = "mutation($id: ID!, $l: [ID!]) { updatePatient(id: $id, patientData: { labels: $l }) { error } }";
    app.ok(update, json!({ "id": patient, "l": [a] })).await;
    app.ok(update, json!({ "id": patient, "l": [b] })).await;
    let log = app
        .ok(
            "query($p: ID) { auditEvents(patientId: $p) { data { action resourceId } } }",
            json!({ "p": patient }),
        )
        .await;
    let events: Vec<(String, String)> = log["auditEvents"]["data"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["action"] != "update" && e["action"] != "create")
        .map(|e| {
            (
                e["action"].as_str().unwrap_or("").to_string(),
                e["resourceId"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    // Newest first.
    assert_eq!(
        events,
        vec![
            ("add_label".to_string(), b.clone()),
            ("remove_label".to_string(), a.clone()),
            ("add_label".to_string(), a.clone()),
        ]
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_label_deleted_while_it_is_being_put_on_leaves_no_patient_out_of_the_record(
    #[case] engine: Engine,
) {
    let app = spawn!(engine);
    let label = app.label("Racing").await;
    let mut patients = Vec::new();
    for i in 0..12 {
        patients.push(app.patient("Race", &format!("P{i}")).await);
    }
    let add = "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id } error } }";
    let adds = patients.iter().map(|p| {
        let app = &app;
        let label = label.clone();
        async move { (p.clone(), app.ok(add, json!({ "p": p, "l": label })).await) }
    });
    let delete = app.ok(
        "mutation($l: ID!) { deleteLabel(id: $l) { error } }",
        json!({ "l": label }),
    );
    let (added, deleted) = tokio::join!(futures_util::future::join_all(adds), delete);
    assert_eq!(deleted["deleteLabel"]["error"], Value::Null);
    for (patient, answer) in added {
        if answer["addPatientLabel"]["data"].is_null() {
            continue;
        }
        // The label went on, so it came off with the label: both are in the record.
        let log = app
            .ok(
                "query($p: ID) { auditEvents(patientId: $p) { data { action resourceId } } }",
                json!({ "p": patient }),
            )
            .await;
        let actions: Vec<&str> = log["auditEvents"]["data"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["resourceId"] == json!(label))
            .filter_map(|e| e["action"].as_str())
            .collect();
        assert!(actions.contains(&"remove_label"), "{patient}: {actions:?}");
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn answers_are_never_cached_and_pages_are_never_framed(#[case] engine: Engine) {
    let app = spawn!(engine);
    let raw = app
        .send(
            app.client
                .get(&app.url)
                .query(&[("query", "{ currentPractice { id } }")])
                .header("x-token", &app.admin_token),
        )
        .await;
    assert_eq!(raw.status, StatusCode::OK);
    let header = |name: &str| {
        raw.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(header("cache-control"), "no-store");
    assert!(header("vary").contains("x-token"), "{}", header("vary"));
    assert!(header("content-security-policy").contains("frame-ancestors 'none'"));
    // GraphiQL: no inline script, no framing, no cache, no sniffing.
    let page = app
        .client
        .get(&app.url)
        .header("accept", "text/html")
        .send()
        .await
        .expect("page");
    let policy = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(
        page.headers()
            .get("x-content-type-options")
            .and_then(|v| v.to_str().ok()),
        Some("nosniff")
    );
    let html = page.text().await.expect("html");
    assert!(!html.contains("<script>"), "an inline script");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_staff_name_is_told_only_to_who_may_read_staff(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Booked", "Patient").await;
    app.user("receptionist", "rosa@example.com").await;
    let users = app.ok("{ users { data { id email } } }", json!({})).await;
    let rosa = users["users"]["data"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["email"] == "rosa@example.com")
        .expect("rosa")["id"]
        .clone();
    let book = "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { error } }";
    let data = json!({ "d": { "patient": patient, "doctor": rosa,
        "start": "2031-03-03T09:00:00Z", "end": "2031-03-03T09:30:00Z" } });
    let bookings_only = app.token(&["bookings:write"]).await;
    let body = app.gql(Some(&bookings_only), book, data.clone()).await;
    assert_eq!(
        body["data"]["createBooking"]["error"],
        json!(format!(
            "The staff user with id {} is not a doctor and cannot be booked",
            rosa.as_str().unwrap_or("")
        )),
        "{body}"
    );
    let with_users = app.token(&["bookings:write", "users:read"]).await;
    let body = app.gql(Some(&with_users), book, data).await;
    assert_eq!(
        body["data"]["createBooking"]["error"],
        "Test receptionist is not a doctor and cannot be booked"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn api_tokens_and_sessions_are_bounded(#[case] engine: Engine) {
    let app = spawn!(engine);
    // The admin token of the test is one; 199 more fill the practice.
    for i in 0..199 {
        app.token(&[if i % 2 == 0 {
            "patients:read"
        } else {
            "bookings:read"
        }])
        .await;
    }
    let make = "mutation { createApiToken(name: \"one too many\", permissions: [\"labels:read\"]) { token error } }";
    let refused = app.ok(make, json!({})).await;
    assert_eq!(refused["createApiToken"]["token"], Value::Null);
    assert!(
        refused["createApiToken"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("at most 200 API tokens")),
        "{refused}"
    );
    let listed = app.ok("{ apiTokens { id } }", json!({})).await;
    assert_eq!(listed["apiTokens"].as_array().map(Vec::len), Some(200));
    // Sessions that ended are swept away a day later.
    let email = app.user("receptionist", "rosa@example.com").await;
    let token = app.sign_in(&email, PASSWORD).await;
    app.gql(Some(&token), "mutation { signOut }", json!({}))
        .await;
    let tomorrow = chrono::Utc::now().timestamp_millis() + 24 * 3600 * 1000;
    let swept = app
        .store
        .forget_ended_sessions(tomorrow)
        .await
        .expect("sweep");
    assert_eq!(swept, 1);
}

/// More tokens made and revoked than `apiTokens` lists hide none that still works: an admin
/// can always find (and revoke) every token that works.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn revoked_tokens_hide_none_that_works(#[case] engine: Engine) {
    let app = spawn!(engine);
    let list = "{ apiTokens { id revoked } }";
    let before = app.ok(list, json!({})).await;
    let working = before["apiTokens"].as_array().expect("tokens").clone();
    assert_eq!(working.len(), 1, "the test's admin token: {before}");
    for _ in 0..200 {
        app.token(&["labels:read"]).await;
        let newest = app.ok(list, json!({})).await["apiTokens"][0]["id"]
            .as_str()
            .expect("id")
            .to_string();
        practice_api::admin::revoke_token(&app.store, &newest)
            .await
            .expect("revoked");
    }
    let after = app.ok(list, json!({})).await;
    let listed = after["apiTokens"].as_array().expect("tokens");
    assert_eq!(listed.len(), 200);
    assert_eq!(
        listed[0]["id"], working[0]["id"],
        "the one that works comes first"
    );
    assert_eq!(listed[0]["revoked"], false);
    assert!(listed[1..].iter().all(|t| t["revoked"] == true), "{after}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn browsers_of_configured_origins_may_call_the_api(#[case] engine: Engine) {
    let app = spawn!(
        engine,
        ServeConfig {
            cors_origins: practice_api::config::parse_origins("https://clinic.example")
                .expect("origins"),
            ..test_config()
        }
    );
    let preflight = |origin: &str| {
        app.client
            .request(reqwest::Method::OPTIONS, &app.url)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "x-token, idempotency-key, content-type",
            )
            .send()
    };
    let allowed = preflight("https://clinic.example")
        .await
        .expect("preflight");
    assert!(allowed.status().is_success(), "{}", allowed.status());
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    assert_eq!(
        header(&allowed, "access-control-allow-origin"),
        "https://clinic.example"
    );
    let allowed_headers = header(&allowed, "access-control-allow-headers");
    for name in ["x-token", "idempotency-key", "content-type"] {
        assert!(allowed_headers.contains(name), "{allowed_headers}");
    }
    let other = preflight("https://evil.example").await.expect("preflight");
    assert_eq!(header(&other, "access-control-allow-origin"), "");
    // A request of the allowed origin may read where it stands and its request id.
    let answer = app
        .client
        .post(&app.url)
        .header("origin", "https://clinic.example")
        .header("x-token", &app.admin_token)
        .json(&json!({ "query": "{ currentPractice { id } }" }))
        .send()
        .await
        .expect("answer");
    let exposed = header(&answer, "access-control-expose-headers");
    for name in ["ratelimit", "x-request-id"] {
        assert!(exposed.contains(name), "{exposed}");
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn persisted_queries_are_sent_by_hash(#[case] engine: Engine) {
    use sha2::Digest;
    let app = spawn!(engine);
    let query = "{ currentPractice { name } }";
    let hash = hex::encode(sha2::Sha256::digest(query.as_bytes()));
    let persisted = json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } });
    let unknown = app
        .post_json(Some(&app.admin_token), &json!({ "extensions": persisted }))
        .await;
    assert_eq!(
        unknown.code(),
        "PERSISTED_QUERY_NOT_FOUND",
        "{}",
        unknown.body
    );
    let wrong = app
        .post_json(
            Some(&app.admin_token),
            &json!({ "query": "{ labels { data { id } } }", "extensions": persisted }),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST, "{}", wrong.body);
    let sent = app
        .post_json(
            Some(&app.admin_token),
            &json!({ "query": query, "extensions": persisted }),
        )
        .await;
    assert!(sent.body["data"]["currentPractice"]["name"].is_string());
    let by_hash = app
        .post_json(Some(&app.admin_token), &json!({ "extensions": persisted }))
        .await;
    assert_eq!(by_hash.body["data"], sent.body["data"]);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_refusal_reaches_a_client_that_did_not_ask_for_its_error(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("admin", "ada@example.com").await;
    // The specification's own sign-in selects only the token.
    let body = app
        .gql(
            None,
            "mutation { signIn(email: \"ada@example.com\", password: \"wrong\") { token } }",
            json!({}),
        )
        .await;
    assert_eq!(body["data"]["signIn"]["token"], Value::Null);
    assert_eq!(error_code(&body), "UNAUTHENTICATED", "{body}");
    assert_eq!(body["errors"][0]["path"], json!(["signIn"]));
    assert_eq!(error_message(&body), "The email or password is incorrect");
    // A client that selects `error` sees no change.
    let body = app
        .gql(
            None,
            "mutation($e: String!) { signIn(email: $e, password: \"wrong\") { token error } }",
            json!({ "e": email }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    // A mutation's refusal, and a missing record.
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation { addPatientLabel(patientId: \"nobody\", labelReferenceId: \"x\") { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "NOT_FOUND", "{body}");
    assert_eq!(error_message(&body), "No patient with id nobody");
}
