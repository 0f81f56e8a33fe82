//! HTTP: the router, GraphQL over HTTP (around the request pipeline of `graphql::pipeline`),
//! GraphiQL and health. Transport only: what a request means is the pipeline's to say.

mod graphiql;
mod graphql;
mod idempotency;
mod reply;
mod server;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use serde_json::json;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use self::server::ConnectionLimits;
use crate::config::ServeConfig;
use crate::graphql::ApiSettings;
use crate::graphql::pipeline::Pipeline;
use crate::store::Store;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The stages every GraphQL request goes through.
    pub pipeline: Pipeline,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    /// What a client connection may cost.
    pub connections: ConnectionLimits,
}

impl AppState {
    pub fn new(store: Store, config: &ServeConfig) -> AppState {
        let settings = ApiSettings {
            user_token_ttl: config.user_token_ttl,
            limits: config.limits(),
        };
        AppState {
            pipeline: Pipeline::new(store, settings, config.rate_limit),
            max_body_bytes: config.max_body_bytes,
            request_timeout: config.request_timeout,
            connections: ConnectionLimits {
                header_timeout: config.header_timeout,
                max_connections: config.max_client_connections,
                drain_timeout: config.request_timeout,
            },
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
    // Ends with the server, when the last state holding the pipeline is gone.
    state.pipeline.forget_idle_callers();
    let store = state.pipeline.store().clone();
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
