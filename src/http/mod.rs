//! HTTP: the router, GraphQL over HTTP (around the request pipeline of `graphql::pipeline`),
//! GraphiQL and health. Transport only: what a request means is the pipeline's to say.

mod admit;
mod client;
mod graphiql;
mod graphql;
mod idempotency;
mod prometheus;
mod reply;
mod server;
mod settings;
mod sse;
mod ws;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use serde_json::json;
use tokio::net::TcpListener;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::TraceLayer;

use self::client::ClientAddresses;
use self::server::ConnectionLimits;
use crate::config::ServeConfig;
use crate::graphql::ApiSettings;
use crate::graphql::pipeline::{Pipeline, Rates};
use crate::store::Store;

/// What every handler shares. axum hands each request a clone of it (its `State`), so it is
/// one reference-counted pointer to [`App`]: a clone of the whole (its pools, caches, limits
/// and settings) was a few allocations and a dozen counts on every request.
#[derive(Clone)]
pub struct AppState(std::sync::Arc<App>);

impl std::ops::Deref for AppState {
    type Target = App;

    fn deref(&self) -> &App {
        &self.0
    }
}

/// What every handler shares, behind [`AppState`].
pub struct App {
    /// The stages every GraphQL request goes through.
    pub pipeline: Pipeline,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    /// What a client connection may cost.
    pub connections: ConnectionLimits,
    /// Who a request's client is.
    pub addresses: ClientAddresses,
    /// The origins whose browsers may call the API.
    pub cors_origins: Vec<HeaderValue>,
    /// What a websocket may do.
    pub ws: ws::WsSettings,
    /// Websockets open per token.
    pub ws_per_token: ws::PerToken,
    /// What the background work of events needs.
    pub events: crate::events::EventSettings,
}

impl AppState {
    pub fn new(store: Store, config: &ServeConfig) -> AppState {
        let settings = ApiSettings {
            user_token_ttl: config.user_token_ttl,
            limits: config.limits(),
            webhook_allow_private: config.webhook_allow_private,
            webhook_first_delay: config
                .webhook_retry_schedule
                .0
                .first()
                .copied()
                .unwrap_or_default(),
            subscriber_lag: config.max_subscriber_lag,
        };
        let rates = Rates {
            per_token: config.rate_limit,
            per_address: config.address_rate_limit,
        };
        let addresses = ClientAddresses::new(&config.trusted_proxies, config.forwarded_header);
        AppState(std::sync::Arc::new(App {
            pipeline: Pipeline::new(store, settings, rates),
            max_body_bytes: config.max_body_bytes,
            request_timeout: config.request_timeout,
            connections: ConnectionLimits {
                header_timeout: config.header_timeout,
                write_timeout: config.write_timeout,
                max_age: config.max_connection_age,
                max_connections: config.max_client_connections,
                max_per_address: config.max_connections_per_address,
                drain_timeout: config.request_timeout,
                addresses: addresses.clone(),
            },
            addresses,
            ws: ws::WsSettings {
                init_timeout: config.ws_init_timeout,
                keep_alive: config.ws_keep_alive,
                max_subscriptions: config.max_subscriptions_per_connection,
                max_per_token: config.max_websockets_per_token,
            },
            ws_per_token: ws::PerToken::default(),
            events: config.events(),
            cors_origins: config
                .cors_origins
                .0
                .iter()
                .filter_map(|origin| HeaderValue::from_str(origin).ok())
                .collect(),
        }))
    }
}

/// The routes: `/graphql` (GET and POST), GraphiQL's files, the Settings application
/// (`/settings`), and health.
pub fn router(state: AppState) -> Router {
    let api = Router::new().route("/graphql", get(graphql::handle).post(graphql::handle));
    let api = match cors(&state.cors_origins) {
        Some(cors) => api.layer(cors),
        None => api,
    };
    Router::new()
        .merge(api)
        .route("/graphiql/{file}", get(graphiql::asset))
        .merge(settings::routes())
        .route("/health", get(health))
        .route("/healthz", get(health))
        .route("/readyz", get(ready))
        .layer(axum::middleware::from_fn(request_id))
        .layer(
            TraceLayer::new_for_http().make_span_with(|request: &Request| {
                // The x-token header is never logged: only method and path.
                tracing::info_span!(
                    "request",
                    method = %request.method(),
                    path = %request.uri().path(),
                    request_id = tracing::field::Empty,
                )
            }),
        )
        .with_state(state)
}

/// Gives every request an id, recorded in its log span and returned in `x-request-id`, so
/// that a client reporting an error can be matched with the server's log.
async fn request_id(
    mut request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    tracing::Span::current().record("request_id", id.as_str());
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// How often what is kept for a while is swept away.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Deletes, in every practice, what is kept for a while only: idempotency keys after a day,
/// sign-in failures an hour after the last, sessions a day after they ended. Each sweep is
/// one statement that a failure leaves for the next hour.
async fn sweep(store: &Store) {
    let now = crate::store::now_ms();
    let ago = |d: Duration| now - i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let swept = [
        (
            "expired idempotency keys",
            store
                .forget_idempotency_keys(ago(idempotency::KEEP_FOR))
                .await,
        ),
        (
            "old sign-in failures",
            store
                .forget_sign_in_failures(ago(crate::auth::throttle::FORGET_AFTER), now)
                .await,
        ),
        (
            "ended sessions",
            store
                .forget_ended_sessions(ago(Duration::from_secs(24 * 3600)))
                .await,
        ),
        (
            "used or expired one-time links",
            store
                .forget_ended_links(ago(Duration::from_secs(24 * 3600)))
                .await,
        ),
    ];
    for (what, result) in swept {
        match result {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "{what} deleted"),
            Err(error) => tracing::warn!(%error, "could not delete {what}"),
        }
    }
}

/// The id of a request, as `x-request-id` gives it.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// What browsers of the configured origins may do (CORS): call `/graphql` with a token, an
/// idempotency key and JSON, and read the headers that say where they stand. Browsers of any
/// other origin get no `Access-Control-Allow-Origin`, and so no answer they can read. None
/// when no origin is configured.
fn cors(origins: &[HeaderValue]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let name = HeaderName::from_static;
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.iter().cloned()))
            .allow_methods([Method::GET, Method::POST])
            .allow_headers([
                name("x-token"),
                name("idempotency-key"),
                header::CONTENT_TYPE,
                header::ACCEPT,
            ])
            .expose_headers([
                name("ratelimit"),
                name("ratelimit-policy"),
                name("x-ratelimit-limit"),
                name("x-ratelimit-remaining"),
                name("x-ratelimit-reset"),
                name("retry-after"),
                name("x-request-id"),
                name("idempotent-replayed"),
            ])
            .max_age(Duration::from_secs(600)),
    )
}

/// Liveness: the process answers. Cheap, and needs no token.
async fn health() -> impl IntoResponse {
    (
        [(header::CACHE_CONTROL, "no-store")],
        Json(json!({ "status": "ok" })),
    )
}

/// Readiness: the database answers and every migration this build knows is applied; 503
/// with the reason otherwise. Needs no token; at most a second.
async fn ready(axum::extract::State(app): axum::extract::State<AppState>) -> impl IntoResponse {
    let checked = tokio::time::timeout(Duration::from_secs(1), app.pipeline.store().readiness())
        .await
        .unwrap_or_else(|_| Err("the database did not answer within a second".into()));
    let (status, body) = match checked {
        Ok(()) => (StatusCode::OK, json!({ "status": "ready" })),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "not ready", "reason": reason }),
        ),
    };
    (status, [(header::CACHE_CONTROL, "no-store")], Json(body))
}

/// Takes the address `/metrics` is to be served at (`PRACTICE_METRICS_LISTEN`), if any, so
/// that one that cannot be served stops the server before it starts.
pub async fn bind_metrics(config: &ServeConfig) -> Result<Option<TcpListener>, String> {
    let Some(address) = &config.metrics_listen else {
        return Ok(None);
    };
    TcpListener::bind(address)
        .await
        .map(Some)
        .map_err(|e| format!("cannot serve /metrics on {address} (PRACTICE_METRICS_LISTEN): {e}"))
}

/// Serves the API on `listener`, and `/metrics` on `metrics` if given, until `shutdown`
/// completes, then finishes requests in flight.
pub async fn serve(
    listener: TcpListener,
    metrics: Option<TcpListener>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Some(listener) = metrics {
        tracing::info!(address = %listener.local_addr()?, "metrics served at /metrics");
        let pipeline = state.pipeline.clone();
        tokio::spawn(async move {
            if let Err(error) = prometheus::serve(listener, pipeline).await {
                tracing::error!(%error, "metrics are not served");
            }
        });
    }
    // Ends with the server, when the last state holding the pipeline is gone.
    state.pipeline.forget_idle_callers();
    let deliveries = crate::events::start_background(
        state.pipeline.store(),
        state.pipeline.hub(),
        &state.events,
    );
    let store = state.pipeline.store().clone();
    let sweeper = tokio::spawn(async move {
        let mut every = tokio::time::interval(SWEEP_EVERY);
        loop {
            every.tick().await;
            sweep(&store).await;
        }
    });
    let limits = state.connections.clone();
    server::run(listener, router(state), limits, shutdown).await;
    sweeper.abort();
    // Then the webhook attempts under way, as the requests in flight were.
    deliveries.finish().await;
    Ok(())
}
