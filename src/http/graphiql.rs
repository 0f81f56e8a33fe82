//! GraphiQL, the in-browser IDE, at `GET /graphql` for browsers.

use axum::http::{HeaderMap, header};
use axum::response::Html;

/// True when the client is a browser asking for a page.
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// The GraphiQL page. The `x-token` header goes in GraphiQL's "Headers" tab; the schema's
/// descriptions show in its documentation explorer once a token is set.
pub fn page() -> Html<&'static str> {
    Html(include_str!("graphiql.html"))
}
