//! GraphiQL, the in-browser IDE, at `GET /graphql` for browsers.
//!
//! Everything the page needs is in the binary: clinics run the server on networks without
//! internet, so React and GraphiQL are vendored in `assets/graphiql/` (see its README for the
//! versions and how to update them) and served at `/graphiql/{file}`.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

/// What the page may load and run: only what this server serves, and no script but its files;
/// GraphiQL sets styles of its own. No site may frame it.
const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' \
                           'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
                           connect-src 'self'; object-src 'none'; base-uri 'none'; \
                           frame-ancestors 'none'";

/// True when the client is a browser asking for a page.
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// The GraphiQL page. The `x-token` header goes in GraphiQL's "Headers" tab; the schema's
/// descriptions show in its documentation explorer once a token is set (the page fetches the
/// schema again, with the new headers, when they change).
pub fn page() -> Response {
    (
        [
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(PAGE_POLICY),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        Html(include_str!("graphiql.html")),
    )
        .into_response()
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The vendored files, by the name they are served under: name, content type, bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "react.production.min.js",
        JS,
        include_bytes!("../../assets/graphiql/react.production.min.js"),
    ),
    (
        "react-dom.production.min.js",
        JS,
        include_bytes!("../../assets/graphiql/react-dom.production.min.js"),
    ),
    (
        "graphiql.min.js",
        JS,
        include_bytes!("../../assets/graphiql/graphiql.min.js"),
    ),
    (
        "graphiql.min.css",
        CSS,
        include_bytes!("../../assets/graphiql/graphiql.min.css"),
    ),
    ("page.js", JS, include_bytes!("graphiql.js")),
];

/// `GET /graphiql/{file}`: one of the vendored files, cached by the browser for a day; any
/// other name is 404. The page asks for them with `?v=VERSION`, so that an upgrade is not
/// hidden by a browser's cache.
pub async fn asset(Path(file): Path<String>) -> Response {
    let Some(&(_, content_type, bytes)) = ASSETS.iter().find(|(name, _, _)| *name == file) else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        bytes,
    )
        .into_response()
}
