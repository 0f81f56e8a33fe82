//! One way to spawn a test server: the real router on 127.0.0.1, port 0, over a brand-new
//! database (an SQLite file, or a PostgreSQL database made for the test and dropped after it),
//! driven by a real HTTP client.
//!
//! PostgreSQL is at `PRACTICE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`; its user must be allowed to create databases).
//! When it cannot be reached, PostgreSQL tests fail if `CI=true` and are skipped otherwise.

use std::sync::Arc;
use std::time::Duration;

use practice_api::admin::{self, NewStaff};
use practice_api::config::ServeConfig;
use practice_api::http::{AppState, serve};
use practice_api::store::{PoolSettings, Store};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use sqlx::Connection;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The password every test user gets.
pub const PASSWORD: &str = "correct horse battery";

/// The two database engines every black-box test runs on, as rstest cases:
/// `#[rstest] #[case::sqlite(Engine::Sqlite)] #[case::postgres(Engine::Postgres)] #[tokio::test]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// `let app = spawn!(engine);`: a server on that engine, or, where PostgreSQL is missing on a
/// laptop, an early return that skips the test (it says so on stderr).
#[macro_export]
macro_rules! spawn {
    ($engine:expr) => {
        $crate::spawn!($engine, $crate::helpers::test_config())
    };
    ($engine:expr, $config:expr) => {
        match $crate::helpers::TestApp::spawn_with($engine, $config).await {
            Some(app) => app,
            None => return,
        }
    };
}

/// The settings tests run with: the defaults, but for a rate limit that a test's own burst of
/// set-up requests cannot reach (the rate-limit test sets its own).
pub fn test_config() -> ServeConfig {
    ServeConfig {
        rate_limit: 1_000_000,
        address_rate_limit: 1_000_000,
        ..ServeConfig::default()
    }
}

/// The command line as the author of writes a test makes through the store directly.
pub fn operator() -> practice_api::store::audit::Author<'static> {
    static OPERATOR: std::sync::LazyLock<practice_api::store::audit::Actor> =
        std::sync::LazyLock::new(practice_api::store::audit::Actor::operator);
    practice_api::store::audit::Author {
        actor: &OPERATOR,
        operation: Some("test"),
        key: None,
    }
}

/// Holds the rows of `sql` (a `SELECT ... FOR UPDATE`, its one parameter `id`) in a
/// transaction of its own on `url`, until the connection returned rolls back.
pub async fn hold_rows(url: &str, sql: &str, id: &str) -> sqlx::AnyConnection {
    use sqlx::Connection;
    let mut held = sqlx::AnyConnection::connect(url).await.expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut held)
        .await
        .expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .bind(id)
        .execute(&mut held)
        .await
        .expect("hold the rows");
    held
}

/// Holds up every write to `table` from a connection of its own on `url`, until the
/// connection returned rolls back: on PostgreSQL a lock on the table, on SQLite the file's
/// write lock (which holds up every write).
pub async fn hold_writes(url: &str, engine: Engine, table: &str) -> sqlx::AnyConnection {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut held = sqlx::AnyConnection::connect(url)
        .await
        .expect("open the database beside the server");
    let hold = match engine {
        Engine::Sqlite => vec!["BEGIN IMMEDIATE".to_string()],
        Engine::Postgres => vec![
            "BEGIN".to_string(),
            format!("LOCK TABLE {table} IN EXCLUSIVE MODE"),
        ],
    };
    for sql in hold {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut held)
            .await
            .expect("hold the lock");
    }
    held
}

/// Returns once a connection to the PostgreSQL database at `url` waits on a lock (within 10
/// s, or panics).
pub async fn waits_on_a_lock(url: &str) {
    wait_on_locks(url, 1).await;
}

/// Returns once `n` connections to the PostgreSQL database at `url` wait on a lock (within 10
/// s, or panics).
pub async fn wait_on_locks(url: &str, n: i64) {
    use sqlx::Connection;
    let mut probe = sqlx::AnyConnection::connect(url).await.expect("connect");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (waiting,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut probe)
        .await
        .expect("look");
        if waiting >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "{waiting} waited on a lock, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A port free a moment ago, for an address a server takes from its settings
/// (`metrics_listen`, say) rather than from a listener the test binds.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The server where PostgreSQL tests make their databases.
pub fn postgres_admin_url() -> String {
    std::env::var("PRACTICE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A database made for one test. An SQLite file goes with its folder; a PostgreSQL database
/// is dropped when the last server using it is gone.
pub struct TestDatabase {
    pub url: String,
    dir: TempDir,
    postgres_name: Option<String>,
}

impl TestDatabase {
    /// A fresh database, or None (having said why) when PostgreSQL is missing and this is not CI.
    pub async fn new(engine: Engine) -> Option<TestDatabase> {
        let dir = tempfile::tempdir().expect("tempdir");
        match engine {
            Engine::Sqlite => Some(TestDatabase {
                url: format!("sqlite://{}", dir.path().join("test.db").display()),
                dir,
                postgres_name: None,
            }),
            Engine::Postgres => {
                let admin = postgres_admin_url();
                let mut conn = match sqlx::PgConnection::connect(&admin).await {
                    Ok(conn) => conn,
                    Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
                        panic!("PostgreSQL is unreachable at {admin} and CI=true: {e}")
                    }
                    Err(e) => {
                        eprintln!("skipping: PostgreSQL is unreachable at {admin}: {e}");
                        return None;
                    }
                };
                let name = format!("practice_test_{}", uuid::Uuid::new_v4().simple());
                // A linguistic collation (ICU's en-US), as a production database would have,
                // rather than the byte order of a C locale; plain if the server has no ICU.
                let icu = format!(
                    "CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' \
                     LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
                );
                if sqlx::query(sqlx::AssertSqlSafe(icu))
                    .execute(&mut conn)
                    .await
                    .is_err()
                {
                    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                        .execute(&mut conn)
                        .await
                        .expect("create the test database");
                }
                let _ = conn.close().await;
                let base = admin
                    .rsplit_once('/')
                    .map(|(base, _)| base)
                    .unwrap_or(&admin);
                Some(TestDatabase {
                    url: format!("{base}/{name}"),
                    dir,
                    postgres_name: Some(name),
                })
            }
        }
    }

    /// A folder that lives as long as the database.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(name) = self.postgres_name.take() else {
            return;
        };
        // Drop runs outside any runtime that could be blocked on: use a thread of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&postgres_admin_url()).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await
                .map(|_| ())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop a test database: {e}");
        }
    }
}

/// A running server over its own database.
pub struct TestApp {
    /// `http://127.0.0.1:PORT/graphql`
    pub url: String,
    pub client: reqwest::Client,
    pub store: Store,
    pub database_url: String,
    /// The default practice.
    pub practice_id: String,
    /// A `*` token of the default practice.
    pub admin_token: String,
    config: ServeConfig,
    pool: PoolSettings,
    db: Arc<TestDatabase>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
}

/// A raw HTTP response: status, headers and the body parsed as JSON (Null if it is not).
pub struct Raw {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl TestApp {
    /// A server with these settings (the listen address is ignored: port 0) over a fresh
    /// database; None when the engine is missing on a laptop (see [`spawn!`]).
    pub async fn spawn_with(engine: Engine, config: ServeConfig) -> Option<TestApp> {
        let db = Arc::new(TestDatabase::new(engine).await?);
        Some(TestApp::on_database(db, config, PoolSettings::default()).await)
    }

    /// A server over `db` (which may already serve others).
    pub async fn on_database(
        db: Arc<TestDatabase>,
        config: ServeConfig,
        pool: PoolSettings,
    ) -> TestApp {
        TestApp::on_url(db.clone(), &db.url.clone(), config, pool).await
    }

    /// A server over `db`, reached at `url` (e.g. through a proxy).
    pub async fn on_url(
        db: Arc<TestDatabase>,
        url: &str,
        config: ServeConfig,
        pool: PoolSettings,
    ) -> TestApp {
        let store = Store::open(url, &pool).await.expect("open store");
        let practice_id = admin::practice(&store, None).await.expect("practice").id;
        let (_, admin_token) =
            admin::create_token(&store, &practice_id, "test admin", &["*".into()], None)
                .await
                .expect("admin token");
        let mut app = TestApp {
            url: String::new(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
            store,
            database_url: url.to_string(),
            practice_id,
            admin_token,
            config,
            pool,
            db,
            shutdown: None,
            server: None,
        };
        app.start().await;
        app
    }

    /// A second server over the same database, as another instance behind a load balancer.
    pub async fn another_instance(&self) -> TestApp {
        TestApp::on_database(self.db.clone(), self.config.clone(), self.pool.clone()).await
    }

    async fn start(&mut self) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (tx, rx) = oneshot::channel::<()>();
        let metrics = practice_api::http::bind_metrics(&self.config)
            .await
            .expect("the metrics' address");
        let state = AppState::new(self.store.clone(), &self.config);
        self.server = Some(tokio::spawn(serve(listener, metrics, state, async {
            let _ = rx.await;
        })));
        self.shutdown = Some(tx);
        self.url = format!("http://127.0.0.1:{port}/graphql");
    }

    /// Stops the server and closes the database, then opens both again over the same file.
    pub async fn restart(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("join").expect("serve");
        }
        self.store.close().await;
        self.store = Store::open(&self.database_url, &self.pool)
            .await
            .expect("reopen store");
        self.start().await;
    }

    /// The test's folder (for SQLite, the one holding the database).
    pub fn dir(&self) -> &std::path::Path {
        self.db.dir()
    }

    /// POSTs a GraphQL request with `token` in x-token; returns the whole response body.
    pub async fn gql(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        let raw = self
            .post_json(token, &json!({ "query": query, "variables": variables }))
            .await;
        assert_eq!(raw.status, StatusCode::OK, "{}", raw.body);
        raw.body
    }

    /// Like `gql`, with the admin token, and asserting that there were no errors.
    pub async fn ok(&self, query: &str, variables: Value) -> Value {
        let body = self.gql(Some(&self.admin_token), query, variables).await;
        assert!(body.get("errors").is_none(), "unexpected errors: {body}");
        body["data"].clone()
    }

    /// The feed's events (`data.events.data` of `query`, asked with `token`), once `enough`
    /// holds of them; fails after 10 seconds.
    ///
    /// On PostgreSQL an event shows in the feed only once every transaction that began before
    /// its own has ended, anywhere on the database server (other tests' included), while its
    /// webhook delivery, written in the same transaction, may already be on its way: under
    /// load, a write just made may take a moment to appear.
    pub async fn settled_events(
        &self,
        token: &str,
        query: &str,
        variables: Value,
        enough: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let body = self.gql(Some(token), query, variables.clone()).await;
            assert!(body.get("errors").is_none(), "unexpected errors: {body}");
            let events = body["data"]["events"]["data"]
                .as_array()
                .cloned()
                .expect("events");
            if enough(&events) {
                return events;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the feed did not settle within 10 s: {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// POSTs any JSON body.
    pub async fn post_json(&self, token: Option<&str>, body: &Value) -> Raw {
        let mut request = self.client.post(&self.url).json(body);
        if let Some(token) = token {
            request = request.header("x-token", token);
        }
        Raw::from(request.send().await.expect("request")).await
    }

    /// Sends a request built by the caller.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Raw {
        Raw::from(request.send().await.expect("request")).await
    }

    /// An API token of the default practice with these permissions.
    pub async fn token(&self, permissions: &[&str]) -> String {
        self.token_in(&self.practice_id, permissions).await
    }

    /// An API token of `practice_id` with these permissions.
    pub async fn token_in(&self, practice_id: &str, permissions: &[&str]) -> String {
        let permissions: Vec<String> = permissions.iter().map(|p| p.to_string()).collect();
        admin::create_token(&self.store, practice_id, "test", &permissions, None)
            .await
            .expect("token")
            .1
    }

    /// Adds a staff user to the default practice; returns their email.
    pub async fn user(&self, role: &str, email: &str) -> String {
        self.user_in(&self.practice_id, role, email).await
    }

    pub async fn user_in(&self, practice_id: &str, role: &str, email: &str) -> String {
        admin::create_user(
            &self.store,
            practice_id,
            NewStaff {
                email,
                title: None,
                first_name: "Test",
                last_name: role,
                role,
                is_doctor: false,
                password: PASSWORD,
            },
        )
        .await
        .expect("user");
        email.to_string()
    }

    /// Adds a practitioner kept to these access groups to the default practice, signed in:
    /// their id, and the session's token.
    pub async fn staff_in_groups(&self, email: &str, groups: &[&str]) -> (String, String) {
        let email = self.user("practitioner", email).await;
        let session = self.sign_in(&email, PASSWORD).await;
        let me = self
            .gql(Some(&session), "{ currentUser { id } }", json!({}))
            .await;
        let id = me["data"]["currentUser"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{me}"))
            .to_string();
        self.set_groups(&id, groups).await;
        (id, session)
    }

    /// Adds a patient in access group `group`, whom only admins, API tokens and staff in the
    /// group see; returns their id.
    pub async fn patient_in_group(&self, first: &str, last: &str, group: &str) -> String {
        let id = self.patient(first, last).await;
        let body = self
            .ok(
                "mutation($p: ID!, $g: ID!) { addPatientAccessGroup(patientId: $p, accessGroupId: $g) { error } }",
                json!({ "p": id, "g": group }),
            )
            .await;
        assert_eq!(
            body["addPatientAccessGroup"]["error"],
            Value::Null,
            "{body}"
        );
        id
    }

    /// Puts staff user `id` in exactly these access groups (with the admin token).
    pub async fn set_groups(&self, id: &str, groups: &[&str]) {
        let body = self
            .ok(
                "mutation($id: ID!, $g: [ID!]) { updateUser(id: $id, input: { accessGroupIds: $g }) { data { accessGroupIds } error } }",
                json!({ "id": id, "g": groups }),
            )
            .await;
        assert_eq!(
            body["updateUser"]["data"]["accessGroupIds"],
            json!(groups),
            "{body}"
        );
    }

    /// Adds a doctor ("Dr FIRST LAST") to the default practice; returns their id.
    pub async fn doctor(&self, first: &str, last: &str) -> String {
        let email = format!(
            "{}.{}@example.com",
            first.to_lowercase(),
            last.to_lowercase()
        );
        admin::create_user(
            &self.store,
            &self.practice_id,
            NewStaff {
                email: &email,
                title: Some("Dr"),
                first_name: first,
                last_name: last,
                role: "practitioner",
                is_doctor: true,
                password: PASSWORD,
            },
        )
        .await
        .expect("doctor")
        .id
    }

    /// Signs in; returns the token.
    pub async fn sign_in(&self, email: &str, password: &str) -> String {
        let body = self
            .gql(
                None,
                "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token error } }",
                json!({ "e": email, "p": password }),
            )
            .await;
        body["data"]["signIn"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("sign-in failed: {body}"))
            .to_string()
    }

    /// A second practice with its own `*` token.
    pub async fn other_practice(&self, name: &str) -> (String, String) {
        let practice = admin::create_practice(&self.store, name)
            .await
            .expect("practice");
        let token = self.token_in(&practice.id, &["*"]).await;
        (practice.id, token)
    }

    /// Creates a patient with the admin token; returns its id.
    pub async fn patient(&self, first: &str, last: &str) -> String {
        self.patient_with(&self.admin_token, json!({ "first": first, "last": last }))
            .await
    }

    /// Creates a patient with `token` from a `CreatePatientDataInput`; returns its id.
    pub async fn patient_with(&self, token: &str, data: Value) -> String {
        let body = self
            .gql(
                Some(token),
                "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id } error } }",
                json!({ "d": data }),
            )
            .await;
        body["data"]["createPatient"]["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("createPatient failed: {body}"))
            .to_string()
    }

    /// Creates a label with the admin token; returns its id.
    pub async fn label(&self, title: &str) -> String {
        let data = self
            .ok(
                "mutation($t: String!) { createLabel(title: $t, color: \"#123456\") { data { id } error } }",
                json!({ "t": title }),
            )
            .await;
        data["createLabel"]["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("createLabel failed: {data}"))
            .to_string()
    }

    /// Checks the server still answers a plain query.
    pub async fn assert_serving(&self) {
        let data = self.ok("{ currentPractice { id } }", json!({})).await;
        assert_eq!(data["currentPractice"]["id"], json!(self.practice_id));
    }
}

impl Raw {
    async fn from(response: reqwest::Response) -> Raw {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Raw {
            status,
            headers,
            body,
        }
    }

    /// The `extensions.code` of the first error.
    pub fn code(&self) -> &str {
        error_code(&self.body)
    }
}

/// The `extensions.code` of a response's first error, or "" if it has none.
pub fn error_code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or("")
}

/// Asserts that `app` answers `query` from `token` with the error `code` within 100 ms, after
/// a change to tokens, users or roles made through any instance. On PostgreSQL an instance
/// that keeps tokens in memory forgets them when it reads the change's notification, which
/// PostgreSQL hands to every instance at the commit; the instance that made the change answers
/// once it has read its own. Here the instances share the test's one thread, so another may
/// read its copy a few milliseconds after the next request comes in: that window (README,
/// "Tokens and permissions") is what the 100 ms allow for.
pub async fn refused_within_100_ms(app: &TestApp, token: &str, query: &str, code: &str) {
    let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
    loop {
        let body = app.gql(Some(token), query, serde_json::json!({})).await;
        if error_code(&body) == code {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "not refused with {code}: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The message of a response's first error.
pub fn error_message(body: &Value) -> &str {
    body["errors"][0]["message"].as_str().unwrap_or("")
}

/// The folder of the npm clients the realtime tests drive (`tests/realtime`), when `node` and
/// the packages (`npm ci --prefix tests/realtime`) are there. Without them: a panic if
/// `CI=true`, otherwise None, having said on stderr that the test is skipped.
pub fn node_clients() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/realtime");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    let why = if !node {
        "node is not installed"
    } else if [
        "graphql-ws",
        "graphql-sse",
        "eventsource",
        "standardwebhooks",
    ]
    .iter()
    .any(|package| !dir.join("node_modules").join(package).is_dir())
    {
        "tests/realtime/node_modules is missing (npm ci --prefix tests/realtime)"
    } else {
        return Some(dir);
    };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{why}, and CI=true: the realtime tests need it");
    }
    eprintln!("skipping: {why}");
    None
}

/// Applies the migrations of `engine` up to `version` to the database of `pool`: a database
/// as an earlier release left it, for a test of the upgrade.
pub async fn migrate_to(pool: &sqlx::AnyPool, engine: Engine, version: i64) {
    let folder = match engine {
        Engine::Sqlite => "sqlite",
        Engine::Postgres => "postgres",
    };
    let mut old = sqlx::migrate::Migrator::new(std::path::Path::new(&format!(
        "{}/migrations/{folder}",
        env!("CARGO_MANIFEST_DIR")
    )))
    .await
    .expect("migrations");
    let before: Vec<_> = old
        .migrations
        .iter()
        .filter(|m| m.version <= version)
        .cloned()
        .collect();
    old.migrations = std::borrow::Cow::Owned(before);
    old.run(pool)
        .await
        .unwrap_or_else(|e| panic!("migrate to {version}: {e}"));
}

/// The directory of the SQLite database at `url` (`sqlite://` and a path).
pub fn sqlite_directory(url: &str) -> std::path::PathBuf {
    let file = url
        .strip_prefix("sqlite://")
        .expect("an SQLite database in a file");
    std::path::Path::new(file)
        .parent()
        .expect("a directory")
        .to_owned()
}

/// The journals of reads in `dir` (src/store/journal.rs), those set aside as
/// `-unmoved-reads-` among them.
pub fn journals_of_reads(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|name| name.to_string_lossy().contains("-reads-"))
        })
        .collect();
    found.sort();
    found
}

/// The journals of reads in `dir` that hold any: a server makes the next journal ahead,
/// zeros only, once it has set one aside, and a journal's text ends at its first zero byte
/// (src/store/journal.rs, `Journal::set_aside_making_the_next`).
pub fn journals_holding_reads(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    journals_of_reads(dir)
        .into_iter()
        .filter(|p| {
            use std::io::Read;
            let mut first = [0u8; 1];
            std::fs::File::open(p)
                .and_then(|mut file| file.read(&mut first))
                .is_ok_and(|n| n == 1 && first[0] != 0)
        })
        .collect()
}

/// While it lives, the SQLite test database's directory takes no new file, as a full disk
/// would refuse one: the server's journal of reads cannot be made, so no read can be recorded
/// (src/store/journal.rs). `chmod` stops a user; root, whom it does not stop, is stopped with
/// the directory's immutable flag (`chattr +i`, on the file systems that have it). Fails the
/// test when neither holds.
pub struct NoNewFiles(std::path::PathBuf);

impl NoNewFiles {
    pub async fn in_the_database_directory_of(app: &TestApp) -> NoNewFiles {
        use std::os::unix::fs::PermissionsExt;
        let dir = sqlite_directory(&app.database_url);
        // Made first, so that a failure below still gives the directory back.
        let guard = NoNewFiles(dir.clone());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        let refused = |dir: &std::path::Path| std::fs::File::create(dir.join("probe")).is_err();
        if !refused(&dir) {
            let _ = std::fs::remove_file(dir.join("probe"));
            let status = std::process::Command::new("chattr")
                .arg("+i")
                .arg(&dir)
                .status()
                .expect("chattr (e2fsprogs)");
            assert!(status.success(), "chattr +i {}", dir.display());
        }
        assert!(
            refused(&guard.0),
            "{} still takes new files",
            guard.0.display()
        );
        // A journal already open is set aside by a listing of the log: the next read needs
        // a new one.
        let _ = app
            .gql(
                Some(&app.admin_token),
                "{ auditEvents { data { id } } }",
                serde_json::json!({}),
            )
            .await;
        guard
    }
}

impl Drop for NoNewFiles {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}
