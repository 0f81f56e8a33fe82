//! What an operator runs the server with: health and readiness checks, and metrics in the
//! Prometheus text format, read by Prometheus's own client library.

use std::time::Duration;

use practice_api::config::ServeConfig;
use reqwest::StatusCode;
use rstest::rstest;
use serde_json::{Value, json};

use crate::helpers::{Engine, free_port, test_config};
use crate::spawn;

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn health_and_readiness(#[case] engine: Engine) {
    let app = spawn!(engine);
    let root = app.url.trim_end_matches("/graphql").to_string();
    let health = app
        .client
        .get(format!("{root}/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), StatusCode::OK);
    let ready = app
        .client
        .get(format!("{root}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), StatusCode::OK);
    // A database behind this build's migrations is not ready, and says why.
    sqlx::any::install_default_drivers();
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&app.database_url)
        .await
        .expect("connect");
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 8")
        .execute(&mut conn)
        .await
        .expect("forget a migration");
    let ready = app
        .client
        .get(format!("{root}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = ready.json().await.expect("json");
    assert_eq!(body["reason"], "migrations not applied: 8", "{body}");
}

/// Parses Prometheus text with `prometheus_client`'s parser (PyPI), and returns what it read as
/// JSON: `[{name, type, samples: [[name, labels, value]]}]`. None where Python or the package
/// is missing on a laptop; in CI (CI=true), that fails.
fn parse_with_prometheus_client(text: &str) -> Option<Value> {
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = [
    {"name": f.name, "type": f.type,
     "samples": [[s.name, s.labels, s.value] for s in f.samples]}
    for f in text_string_to_metric_families(sys.stdin.read())
]
print(json.dumps(families))
"#;
    let available = std::process::Command::new("python3")
        .args(["-c", "import prometheus_client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!(
                "python3 with prometheus_client is missing and CI=true (pip install -r .ci/requirements.txt)"
            );
        }
        eprintln!("skipping: python3 with prometheus_client is missing");
        return None;
    }
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("parse");
    assert!(
        output.status.success(),
        "prometheus_client could not parse the metrics: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).expect("json"))
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn metrics_speak_the_prometheus_text_format(#[case] engine: Engine) {
    let port = free_port();
    let app = spawn!(
        engine,
        ServeConfig {
            metrics_listen: Some(format!("127.0.0.1:{port}")),
            rate_limit: 3,
            ..test_config()
        }
    );
    for _ in 0..5 {
        app.post_json(
            Some(&app.admin_token),
            &json!({ "query": "{ currentPractice { id } }" }),
        )
        .await;
    }
    let metrics_url = format!("http://127.0.0.1:{port}/metrics");
    let mut text = String::new();
    for _ in 0..50 {
        if let Ok(answer) = app.client.get(&metrics_url).send().await {
            assert!(
                answer
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|t| t.starts_with("text/plain"))
            );
            text = answer.text().await.expect("text");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!text.is_empty(), "no metrics at {metrics_url}");
    // The API's own address does not serve them.
    let root = app.url.trim_end_matches("/graphql");
    let on_api = app
        .client
        .get(format!("{root}/metrics"))
        .send()
        .await
        .expect("api");
    assert_eq!(on_api.status(), StatusCode::NOT_FOUND);
    let Some(families) = parse_with_prometheus_client(&text) else {
        return;
    };
    let family = |name: &str| {
        families
            .as_array()
            .expect("families")
            .iter()
            .find(|f| f["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    };
    let requests = family("practice_requests");
    assert_eq!(requests["type"], "counter");
    let samples = requests["samples"].as_array().expect("samples");
    let count = |outcome: &str| {
        samples
            .iter()
            .filter(|s| s[1]["operation"] == "currentPractice" && s[1]["outcome"] == outcome)
            .map(|s| s[2].as_f64().unwrap_or(0.0))
            .sum::<f64>()
    };
    assert!(count("ok") >= 3.0, "{requests}");
    assert!(count("RATE_LIMITED") >= 2.0, "{requests}");
    assert_eq!(
        family("practice_request_duration_seconds")["type"],
        "histogram"
    );
    assert_eq!(family("practice_rate_limited")["type"], "counter");
    assert_eq!(family("practice_db_connections")["type"], "gauge");
    assert_eq!(family("practice_audit_queue_depth")["type"], "gauge");
}
