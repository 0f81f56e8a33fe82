//! HTTP: the router, GraphQL over HTTP, GraphiQL and health.

mod graphiql;
mod graphql;
mod order;
mod rate_limit;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use serde_json::json;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use self::rate_limit::RateLimits;
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
        AppState {
            store,
            schema,
            max_body_bytes: config.max_body_bytes,
            limits: config.limits(),
            rate_limits: Arc::new(RateLimits::new(config.rate_limit)),
        }
    }
}

/// The routes: `/graphql` (GET and POST) and `/health`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/graphql", get(graphql::handle).post(graphql::handle))
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
    axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}
