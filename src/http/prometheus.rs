//! `/metrics`, in the Prometheus text format, on an address of its own
//! (`PRACTICE_METRICS_LISTEN`): it needs no token, so it stays off the API's address, and off
//! unless asked for. Counted: requests by operation and outcome, their latency, rate-limit and
//! sign-in throttle refusals, the database pools' connections, the audit log's queue, the
//! websockets open, webhook attempts by outcome.

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;

use crate::graphql::pipeline::Pipeline;

/// Requests answered, by operation (the root field, or "multiple") and outcome (`ok`,
/// `errors`, or the code of the rejection).
pub const REQUESTS: &str = "practice_requests_total";
/// How long requests took, by operation.
pub const DURATION: &str = "practice_request_duration_seconds";
/// Connections of the database pools, by pool (`read`, `write`) and state (`idle`, `busy`).
const CONNECTIONS: &str = "practice_db_connections";
/// Requests of patient data waiting for their reads to be recorded.
const AUDIT_QUEUE: &str = "practice_audit_queue_depth";
/// Websocket connections open.
pub const WEBSOCKETS: &str = "practice_websocket_connections";

/// How often the latencies recorded since the last time are counted into their buckets
/// (the exporter's own default). Until then the exporter keeps each one, about 16 bytes a
/// request: a server whose `/metrics` nobody scraped grew by about 590 MB an hour at 10,000
/// requests a second, without end (BENCHMARKS.md, thirtieth round).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The recorder of this process, installed once, whatever number of servers it runs.
static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();

/// Installs the recorder (once per process) and returns its handle. The exporter's upkeep is
/// ours to run ([`keep_up`]): `install_recorder` starts none.
fn recorder() -> Result<PrometheusHandle, String> {
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full(DURATION.into()),
                    &[
                        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                        10.0, 30.0,
                    ],
                )
                .map_err(|e| e.to_string())?
                .install_recorder()
                .map_err(|e| format!("cannot record metrics: {e}"))
        })
        .clone()
}

/// Runs the exporter's upkeep every `every` for as long as what it returns is kept: the
/// latencies recorded since the last time are counted into their buckets and let go (the
/// exporter frees them a moment later, as later recordings pass), whether or not anyone
/// scrapes `/metrics` (a scrape does the same). `tests/metrics.rs` checks that they are.
fn keep_up(handle: PrometheusHandle, every: Duration) -> Upkeep {
    Upkeep(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            handle.run_upkeep();
        }
    }))
}

/// The task of [`keep_up`], stopped when this is dropped.
struct Upkeep(tokio::task::JoinHandle<()>);

impl Drop for Upkeep {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves `/metrics` on `listener` for as long as the runtime runs (axum's server does not
/// return), keeping the recorder from growing meanwhile.
pub async fn serve(listener: TcpListener, pipeline: Pipeline) -> Result<(), String> {
    let handle = recorder()?;
    let _upkeep = keep_up(handle.clone(), UPKEEP_EVERY);
    let app = Router::new()
        .route("/metrics", get(render))
        .with_state((handle, pipeline));
    axum::serve(listener, app)
        .await
        .map_err(|e| format!("metrics server: {e}"))
}

/// The metrics now, the gauges read at this moment.
async fn render(
    State((handle, pipeline)): State<(PrometheusHandle, Pipeline)>,
) -> impl IntoResponse {
    let ((read_size, read_idle), (write_size, write_idle)) = pipeline.store().pool_use();
    for (pool, size, idle) in [
        ("read", read_size, read_idle),
        ("write", write_size, write_idle),
    ] {
        let idle = idle as f64;
        let busy = (f64::from(size) - idle).max(0.0);
        metrics::gauge!(CONNECTIONS, "pool" => pool, "state" => "idle").set(idle);
        metrics::gauge!(CONNECTIONS, "pool" => pool, "state" => "busy").set(busy);
    }
    metrics::gauge!(AUDIT_QUEUE).set(pipeline.audit_queue_depth() as f64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
}
