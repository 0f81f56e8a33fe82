//! The Settings application, at `GET /settings`: the page a clinic's admin manages tokens,
//! staff, the catalogue, webhooks and the audit log with, in the browser.
//!
//! It is a client of the public GraphQL API at `/graphql` and nothing more: this module only
//! hands out its files, which are compiled into the binary from `assets/settings/` (plain ES
//! modules, no build step, no Node.js; the UI library is vendored in
//! `assets/settings/vendor/`, see its README). Every answer carries the same strict headers:
//! the page runs no inline script or style and loads nothing from another host, no site may
//! frame it, and no cache keeps any of it (the files are small, and an upgrade of the server
//! must never meet a browser holding half of the old application).

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// What the page may load and run: only this server's own files and its API. No inline
/// script, no inline style, no plugin, no frame, no `<base>`, forms only to itself.
pub const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                          img-src 'self' data:; connect-src 'self'; form-action 'self'; \
                          frame-ancestors 'none'; base-uri 'none'";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// The files under `/settings/assets/`, by the name they are served under: name, content
/// type, bytes. The modules import one another by these names (`./api.js`).
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "htm-preact-standalone.js",
        JS,
        include_bytes!("../../assets/settings/vendor/htm-preact-standalone.module.js"),
    ),
    (
        "settings.css",
        CSS,
        include_bytes!("../../assets/settings/settings.css"),
    ),
    ("app.js", JS, include_bytes!("../../assets/settings/app.js")),
    ("api.js", JS, include_bytes!("../../assets/settings/api.js")),
    ("ui.js", JS, include_bytes!("../../assets/settings/ui.js")),
    (
        "access.js",
        JS,
        include_bytes!("../../assets/settings/access.js"),
    ),
    (
        "tokens.js",
        JS,
        include_bytes!("../../assets/settings/tokens.js"),
    ),
    (
        "staff.js",
        JS,
        include_bytes!("../../assets/settings/staff.js"),
    ),
    (
        "account.js",
        JS,
        include_bytes!("../../assets/settings/account.js"),
    ),
    (
        "catalogue.js",
        JS,
        include_bytes!("../../assets/settings/catalogue.js"),
    ),
    (
        "practice.js",
        JS,
        include_bytes!("../../assets/settings/practice.js"),
    ),
    (
        "audit.js",
        JS,
        include_bytes!("../../assets/settings/audit.js"),
    ),
    (
        "webhooks.js",
        JS,
        include_bytes!("../../assets/settings/webhooks.js"),
    ),
];

/// The routes: the page at `/settings` and `/settings/`, its files at
/// `/settings/assets/{file}`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/settings", get(page))
        .route("/settings/", get(page))
        .route("/settings/assets/{file}", get(asset))
}

/// The headers of every answer of this module.
fn strict(content_type: &'static str) -> [(HeaderName, HeaderValue); 5] {
    [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ]
}

/// `GET /settings`: the page. Which screen it shows is in the URL's fragment (`#/tokens`),
/// which browsers never send: the one-time secrets of set-password and first-start links
/// stay out of every server's and proxy's log.
async fn page() -> Response {
    (
        strict(HTML),
        include_str!("../../assets/settings/index.html"),
    )
        .into_response()
}

/// `GET /settings/assets/{file}`: one of [`ASSETS`]; any other name is 404.
async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some(&(_, content_type, bytes)) => (strict(content_type), bytes).into_response(),
        None => (StatusCode::NOT_FOUND, strict(TEXT), "not found").into_response(),
    }
}
