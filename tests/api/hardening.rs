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
    // A patient's labels weigh the 20 it can have, and it can have no more.
    let patient = app.patient("Many", "Labels").await;
    for i in 0..20 {
        let label = app.label(&format!("L{i}")).await;
        let added = app
            .ok(
                "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }",
                json!({ "p": patient, "l": label }),
            )
            .await;
        assert_eq!(added["addPatientLabel"]["error"], Value::Null);
    }
    let one_more = app.label("L20").await;
    let refused = app
        .ok(
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }",
            json!({ "p": patient, "l": one_more }),
        )
        .await;
    assert_eq!(
        refused["addPatientLabel"]["error"],
        "A patient has at most 20 labels: take one off first"
    );
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
        .by(practice_api::store::audit::Author {
            actor: &practice_api::store::audit::Actor::operator(),
            operation: Some("test"),
            key: None,
        })
        .import_patients(many)
        .await
        .expect("import");
    let mine = app.patient("Zqx", "Mine").await;
    let found = app
        .ok(
            "query($s: String) { patients(search: $s) { data { id } } }",
            json!({ "s": "zqx" }),
        )
        .await;
    assert_eq!(found["patients"]["data"], json!([{ "id": mine }]));
    // In the busy practice the same search matches more than one search may touch.
    let broad = app
        .gql(
            Some(&other_token),
            "query($s: String) { patients(search: $s) { data { id } } }",
            json!({ "s": "zqx" }),
        )
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
    let sign_in_from = |client: &'static str, email: String, password: String| {
        let request = app
            .client
            .post(&app.url)
            .header("x-forwarded-for", client)
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
