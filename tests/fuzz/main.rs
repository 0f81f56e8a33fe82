//! A bounded fuzz test of the real HTTP stack: mutated GraphQL documents, variables and raw
//! bodies, sent over TCP to one server (SQLite) for the whole run. Whatever it is sent, the
//! server must never answer 5xx, never panic, never take seconds, always answer a JSON object
//! with `data` or `errors`, and give every error an `extensions.code` from the fixed list
//! below (never INTERNAL_SERVER_ERROR); after the run it must still serve a normal query.
//!
//! First a small corpus of requests that found bugs or sit on a limit, every run; then the
//! random cases: documents built from the schema's real fields (wild ones, and strict ones
//! that mostly validate, to reach the resolvers and the store), then edited character by
//! character; real operations with variables of right and wrong types; raw bodies; GET
//! requests; documents built to find limits (deep, wide, recursive). With and without tokens,
//! under both response media types.
//!
//! - `PRACTICE_FUZZ_CASES`: how many random requests (default 400).
//! - `PROPTEST_RNG_SEED`: another seed than the fixed default, to explore further.
//! - `RUST_LOG=practice_api=debug`: the server's log on stderr, to read an internal error.
//! - `PRACTICE_FUZZ_VERBOSE=1`: every request (before it is sent) and the start of its answer
//!   on stderr. If the run aborts (the server crashed the process, a stack overflow say), the
//!   last request printed is the one that did it.
//!
//! A failure prints the minimal request proptest found, and what the server answered; one
//! that kept the server busy is not shrunk (later answers would mean nothing). Nothing is
//! written to disk: failure persistence is off.

// The helpers serve the api suite too; this binary uses a few of them.
#[allow(dead_code)]
#[path = "../api/helpers.rs"]
mod helpers;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use reqwest::header::HeaderValue;
use serde_json::{Map, Value, json};

use helpers::{Engine, PASSWORD, TestApp};

/// Requests per run unless `PRACTICE_FUZZ_CASES` says otherwise.
const DEFAULT_CASES: u32 = 400;
/// The seed unless `PROPTEST_RNG_SEED` says otherwise: every run tries the same inputs.
const DEFAULT_SEED: u64 = 0x5eed_f022;
/// The only `extensions.code` values an answer to these requests may carry.
const ALLOWED_CODES: &[&str] = &[
    "UNAUTHENTICATED",
    "FORBIDDEN",
    "BAD_USER_INPUT",
    "BAD_REQUEST",
    "GRAPHQL_PARSE_FAILED",
    "GRAPHQL_VALIDATION_FAILED",
    // Added with the query limits (README, "Query limits"): a document over a limit.
    "QUERY_TOO_COMPLEX",
    // A refusal whose payload's `error` the document did not select, and a persisted query's
    // unknown hash.
    "NOT_FOUND",
    "REFUSED",
    "PERSISTED_QUERY_NOT_FOUND",
];
/// Largest nesting the bombs try (braces, list and object literals).
const MAX_NESTING: usize = 3000;
/// Longer than any answer should take, even in a debug build.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Slower than this is a failure too: no request here should cost the server seconds.
const SLOW_ANSWER: Duration = Duration::from_secs(5);

type S = BoxedStrategy<String>;

mod bodies;
mod documents;
mod requests;
mod run;
mod schema;

use bodies::*;
use documents::*;
use requests::*;
use run::*;
use schema::*;

#[test]
fn the_server_survives_mutated_requests() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    count_panics();
    // The server has a runtime of its own, the client another: a request that keeps the
    // server's workers busy cannot stop the client from timing out and reporting it.
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("server runtime");
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let app = server
        .block_on(TestApp::spawn_with(Engine::Sqlite, helpers::test_config()))
        .expect("SQLite is always there");
    let seeded = server.block_on(seed(&app));
    let client = client_runtime.block_on(async {
        // A connection of its own for every request: after refusing an oversized body the
        // server closes the connection, which a pooled client would try to use again.
        reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .pool_max_idle_per_host(0)
            .build()
            .expect("client")
    });
    let harness = Harness {
        runtime: &client_runtime,
        client,
        url: app.url.clone(),
        stats: RefCell::new(Stats {
            started: Some(Instant::now()),
            ..Stats::default()
        }),
        busy: RefCell::new(false),
        verbose: std::env::var_os("PRACTICE_FUZZ_VERBOSE").is_some(),
    };

    // The corpus first. Each is named before it is sent: if one crashes the process, the
    // last name printed is the culprit.
    let mut failures = Vec::new();
    let mut not_sent = Vec::new();
    for (name, request) in corpus(&seeded.tokens) {
        if !*harness.busy.borrow() {
            let _ = writeln!(std::io::stderr(), "fuzz corpus: sending {name}");
        }
        match harness.run(&request) {
            Outcome::Passed => {}
            Outcome::Skipped => not_sent.push(name),
            Outcome::Unsendable(why) | Outcome::Failed(why) => {
                failures.push(format!("{name}: {why}\n{request:?}"))
            }
        }
    }

    let result = if failures.is_empty() {
        let wild = Gen::new(true, &seeded);
        let strict = Gen::new(false, &seeded);
        let strategy = requests(&wild, &strict, &seeded.tokens);
        let mut config = Config::with_cases(cases());
        config.failure_persistence = None;
        config.max_shrink_iters = 2000;
        config.max_shrink_time = 90_000;
        if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
            config.rng_seed = RngSeed::Fixed(DEFAULT_SEED);
        }
        let mut runner = TestRunner::new(config);
        runner
            .run(&strategy, |request| match harness.run(&request) {
                Outcome::Passed | Outcome::Skipped => Ok(()),
                Outcome::Unsendable(why) => Err(TestCaseError::reject(why)),
                Outcome::Failed(why) => Err(TestCaseError::fail(why)),
            })
            .map_err(|failure| failure.to_string())
    } else {
        let not_sent = match not_sent.is_empty() {
            true => String::new(),
            false => format!(
                "\n\nNot sent, the server being busy with the above: {}.",
                not_sent.join("; ")
            ),
        };
        Err(format!(
            "{} of the corpus failed (the random cases did not run):\n\n{}{not_sent}",
            failures.len(),
            failures.join("\n\n")
        ))
    };
    let summary = harness.stats.borrow().summary();
    let _ = writeln!(std::io::stderr(), "{summary}");
    if let Err(failure) = result {
        if *harness.busy.borrow() {
            let _ = writeln!(
                std::io::stderr(),
                "fuzz: the server was kept busy; the input below is the first that did it, not shrunk"
            );
        }
        // The server may still be busy with the request that failed: leave it behind.
        server.shutdown_background();
        let _inside = client_runtime.enter();
        drop(app);
        panic!("{failure}");
    }

    // The server still serves, and the run did not lose the patient it could not name.
    server.block_on(async {
        app.assert_serving().await;
        let data = app
            .ok(
                "query($s: String) { patients(search: $s, options: { includeArchived: true, includeDeleted: true }) { data { id firstName lastName } } }",
                json!({ "s": "Zzyzx" }),
            )
            .await;
        let found = data["patients"]["data"]
            .as_array()
            .expect("a page of patients");
        assert!(
            found.iter().any(|p| p["id"] == json!(seeded.sentinel_patient)
                && p["firstName"] == json!("Sentinel")),
            "the seeded patient is missing: {data}"
        );
        let data = app
            .ok(
                "query($id: ID!) { patient(id: $id) { id } }",
                json!({ "id": seeded.target_patient }),
            )
            .await;
        assert_eq!(data["patient"]["id"], json!(seeded.target_patient));
        app.store.close().await;
        drop(app);
    });
}
