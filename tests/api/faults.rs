//! A database that goes away while the server runs: clients get a clear SERVICE_UNAVAILABLE,
//! not a hang or a crash, and the server recovers by itself when the database is back. The
//! database is cut off by a real TCP proxy between the server and PostgreSQL.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use practice_api::config::ServeConfig;
use practice_api::store::PoolSettings;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::helpers::{Engine, PASSWORD, TestApp, TestDatabase, error_code};

/// Forwards 127.0.0.1:port to a target; `down` closes every connection and stops listening.
struct Proxy {
    port: u16,
    target: SocketAddr,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut proxy = Proxy {
            port,
            target,
            task: None,
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&mut self, listener: TcpListener) {
        let target = self.target;
        self.task = Some(tokio::spawn(async move {
            // Dropping this set (when the task is aborted) aborts every connection.
            let mut connections = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        }));
    }

    fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    async fn up(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("rebind");
        self.serve(listener);
    }
}

#[tokio::test]
async fn a_database_that_goes_away_is_service_unavailable_until_it_returns() {
    let Some(db) = TestDatabase::new(Engine::Postgres).await else {
        return;
    };
    let db = Arc::new(db);
    let admin = crate::helpers::postgres_admin_url();
    let authority = admin
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("127.0.0.1:5432");
    let target: SocketAddr = tokio::net::lookup_host(authority)
        .await
        .expect("resolve")
        .next()
        .expect("an address");
    let mut proxy = Proxy::start(target).await;
    let through_proxy = db
        .url
        .replacen(authority, &format!("127.0.0.1:{}", proxy.port), 1);
    let pool = PoolSettings {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(1),
    };
    let app = TestApp::on_url(db.clone(), &through_proxy, ServeConfig::default(), pool).await;
    let email = app.user("admin", "ada@example.com").await;
    app.assert_serving().await;

    // A token not used yet, so that no instance holds it in memory (src/auth/cache.rs).
    let unused = app.token(&["patients:read"]).await;

    proxy.down();
    let started = Instant::now();
    // The token check cannot reach the database.
    let patients = json!({ "query": "{ patients { data { id } } }" });
    let raw = app.post_json(Some(&unused), &patients).await;
    assert_eq!(
        raw.status,
        reqwest::StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        raw.body
    );
    assert_eq!(raw.code(), "SERVICE_UNAVAILABLE", "{}", raw.body);
    // A token found before may still be known (on PostgreSQL, until the instance sees its
    // notifications' connection end): then the query itself cannot reach the database.
    let raw = app.post_json(Some(&app.admin_token), &patients).await;
    assert_eq!(raw.code(), "SERVICE_UNAVAILABLE", "{}", raw.body);
    // Nor can a resolver (signIn needs no token).
    let body = app
        .gql(
            None,
            "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token } }",
            json!({ "e": email, "p": PASSWORD }),
        )
        .await;
    assert_eq!(error_code(&body), "SERVICE_UNAVAILABLE", "{body}");
    assert!(started.elapsed() < Duration::from_secs(20), "no hang");

    proxy.up().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let raw = app
            .post_json(
                Some(&app.admin_token),
                &json!({ "query": "{ currentPractice { id } }" }),
            )
            .await;
        if raw.status.is_success() && raw.body.get("errors").is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "did not recover: {}", raw.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    app.assert_serving().await;
}

/// An SQLite file another process keeps locked for writing past the store's wait (a command
/// line import, a second server on the same file): a write is answered SERVICE_UNAVAILABLE,
/// to be tried again, not INTERNAL_SERVER_ERROR (SQLite's "database is locked"); once the lock is let go, it goes through.
#[tokio::test]
async fn a_write_kept_waiting_by_another_writer_is_service_unavailable() {
    let db = Arc::new(
        TestDatabase::new(Engine::Sqlite)
            .await
            .expect("SQLite is always there"),
    );
    // A wait for a connection longer than SQLite's wait for the lock (5 s), so that what is
    // answered is the lock's refusal, not the pool's.
    let pool = PoolSettings {
        acquire_timeout: Duration::from_secs(30),
        ..PoolSettings::default()
    };
    let app = TestApp::on_database(db, crate::helpers::test_config(), pool).await;
    let mut other = crate::helpers::hold_writes(&app.database_url, Engine::Sqlite, "labels").await;
    let create =
        "mutation { createLabel(title: \"Held\", color: \"#f59e0b\") { data { id } error } }";
    let body = app.gql(Some(&app.admin_token), create, json!({})).await;
    assert_eq!(error_code(&body), "SERVICE_UNAVAILABLE", "{body}");
    sqlx::query("ROLLBACK")
        .execute(&mut other)
        .await
        .expect("let it go");
    let made = app.ok(create, json!({})).await;
    assert!(made["createLabel"]["data"]["id"].is_string(), "{made}");
}
