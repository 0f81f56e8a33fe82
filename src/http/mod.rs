//! HTTP: the router, GraphQL over HTTP, GraphiQL and health.

mod audit;
mod documents;
mod graphiql;
mod graphql;
mod idempotency;
mod order;
mod rate_limit;
mod server;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use serde_json::json;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use self::audit::ReadAudit;
use self::documents::Documents;
use self::rate_limit::RateLimits;
use self::server::ConnectionLimits;
use crate::config::ServeConfig;
use crate::graphql::limits::Limits;
use crate::graphql::{ApiSchema, ApiSettings, build_schema};
use crate::store::Store;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub schema: ApiSchema,
    pub max_body_bytes: usize,
    pub limits: Limits,
    pub rate_limits: Arc<RateLimits>,
    pub request_timeout: Duration,
    /// Records the reads of queries in the audit log.
    pub read_audit: ReadAudit,
    /// What a client connection may cost.
    pub connections: ConnectionLimits,
    /// Documents parsed before, by their text.
    pub documents: Documents,
}

impl AppState {
    pub fn new(store: Store, config: &ServeConfig) -> AppState {
        let schema = build_schema(
            store.clone(),
            ApiSettings {
                user_token_ttl: config.user_token_ttl,
                limits: config.limits(),
            },
        );
        let read_audit = ReadAudit::start(store.clone());
        AppState {
            store,
            schema,
            max_body_bytes: config.max_body_bytes,
            limits: config.limits(),
            rate_limits: Arc::new(RateLimits::new(config.rate_limit)),
            request_timeout: config.request_timeout,
            read_audit,
            connections: ConnectionLimits {
                header_timeout: config.header_timeout,
                max_connections: config.max_client_connections,
                drain_timeout: config.request_timeout,
            },
            documents: Documents::default(),
        }
    }
}

/// The routes: `/graphql` (GET and POST) and `/health`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/graphql",
            get(graphql::handle)
                .post(graphql::handle)
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    time_limit,
                )),
        )
        .route("/graphiql/{file}", get(graphiql::asset))
        .route("/health", get(health))
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

/// Stops a GraphQL request that takes longer than `PRACTICE_REQUEST_TIMEOUT`, a slow client's
/// trickling body included. Dropping the handler rolls back the transaction it was in; what
/// it had already committed stays.
async fn time_limit(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let limit = state.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(?limit, "request stopped: it took too long");
            let body = json!({ "errors": [{
                "message": format!(
                    "The request took longer than the limit of {} and was stopped; try again, \
                     or ask for less",
                    humantime::format_duration(limit)
                ),
                "extensions": { "code": "SERVICE_UNAVAILABLE" }
            }] });
            let mut response =
                (axum::http::StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
            response.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json; charset=utf-8"),
            );
            response
        }
    }
}

/// The id of a request, as `x-request-id` gives it.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// Liveness: the process answers.
async fn health() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// Serves the API on `listener` until `shutdown` completes, then finishes requests in flight.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let rate_limits = Arc::downgrade(&state.rate_limits);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(RateLimits::FORGET_EVERY);
        // Ends with the server, when the last state holding the limits is gone.
        while let Some(limits) = rate_limits.upgrade() {
            limits.forget_idle();
            drop(limits);
            every.tick().await;
        }
    });
    let store = state.store.clone();
    let sweeper = tokio::spawn(async move {
        let mut every = tokio::time::interval(idempotency::SWEEP_EVERY);
        loop {
            every.tick().await;
            idempotency::sweep(&store).await;
        }
    });
    let limits = state.connections;
    server::run(listener, router(state), limits, shutdown).await;
    sweeper.abort();
    Ok(())
}
