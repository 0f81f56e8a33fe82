//! The one place where the outcome of a GraphQL request becomes an HTTP response: an executed
//! operation, a rejection from any stage (the time limit included), or a response replayed
//! for an idempotent retry; and the headers that say where the caller stands with its rate
//! limit.
//!
//! By the GraphQL-over-HTTP specification: the response is `application/json` unless the
//! client's `Accept` prefers `application/graphql-response+json`. With `application/json`
//! every well-formed request gets 200; with `application/graphql-response+json`, a request
//! that could not run gets a 4xx (400 for parse and validation errors, 401 for a missing or
//! refused token).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use crate::graphql::pipeline::{Executed, RateStatus, Rejection, Stop};

/// The header a replayed idempotent response carries.
const REPLAYED: &str = "idempotent-replayed";

/// The media types a GraphQL response can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaType {
    Json,
    GraphqlResponseJson,
}

impl MediaType {
    pub fn content_type(self) -> &'static str {
        match self {
            MediaType::Json => "application/json; charset=utf-8",
            MediaType::GraphqlResponseJson => "application/graphql-response+json; charset=utf-8",
        }
    }

    /// Chooses from the Accept header: the acceptable type with the highest q, preferring
    /// `application/graphql-response+json` on a tie; `application/json` when there is no
    /// header. None when neither is acceptable.
    pub fn negotiate(headers: &HeaderMap) -> Option<MediaType> {
        let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Some(MediaType::Json);
        };
        if accept.trim().is_empty() {
            return Some(MediaType::Json);
        }
        let mut best: Option<(f32, MediaType)> = None;
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let media = match essence.as_str() {
                "application/graphql-response+json" => MediaType::GraphqlResponseJson,
                "application/json" | "application/*" | "*/*" => MediaType::Json,
                _ => continue,
            };
            if q <= 0.0 {
                continue;
            }
            let better = match best {
                None => true,
                Some((best_q, best_media)) => {
                    q > best_q
                        || (q == best_q
                            && media == MediaType::GraphqlResponseJson
                            && best_media == MediaType::Json)
                }
            };
            if better {
                best = Some((q, media));
            }
        }
        best.map(|(_, media)| media)
    }
}

/// A GraphQL response about to be sent: status, type and body.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub status: StatusCode,
    pub media: MediaType,
    pub body: Value,
    /// Headers of its own (Allow, Retry-After, the rate limit of a refused caller).
    headers: HeaderMap,
}

impl Reply {
    /// An executed operation: 200, but 400 under `application/graphql-response+json` when it
    /// did not run (validation failed).
    pub fn executed(media: MediaType, executed: Executed) -> Reply {
        let status = if executed.ran || media == MediaType::Json {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        Reply {
            status,
            media,
            body: executed.body,
            headers: HeaderMap::new(),
        }
    }

    /// A rejection, with the status its stop calls for.
    pub fn rejected(media: MediaType, rejection: &Rejection) -> Reply {
        // Errors of the document and of the token are GraphQL errors: an `application/json`
        // client gets them as 200.
        let graphql_error = |status| match media {
            MediaType::Json => StatusCode::OK,
            MediaType::GraphqlResponseJson => status,
        };
        let mut headers = HeaderMap::new();
        let status = match &rejection.stop {
            Stop::Malformed => StatusCode::BAD_REQUEST,
            Stop::Document => graphql_error(StatusCode::BAD_REQUEST),
            Stop::Unauthenticated => graphql_error(StatusCode::UNAUTHORIZED),
            Stop::Forbidden => graphql_error(StatusCode::FORBIDDEN),
            Stop::RateLimited(status) => {
                rate_headers(*status, &mut headers);
                StatusCode::TOO_MANY_REQUESTS
            }
            Stop::WrongMethod => {
                headers.insert(header::ALLOW, HeaderValue::from_static("POST"));
                StatusCode::METHOD_NOT_ALLOWED
            }
            Stop::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            Stop::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Stop::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Stop::InProgress => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                StatusCode::CONFLICT
            }
            Stop::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Stop::AnswerLost => StatusCode::CONFLICT,
            Stop::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        };
        Reply {
            status,
            media,
            body: rejection.body(),
            headers,
        }
    }

    /// The response as it was first sent, for an idempotent retry.
    pub fn replayed(status: StatusCode, media: MediaType, body: Value) -> Reply {
        let mut headers = HeaderMap::new();
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
        Reply {
            status,
            media,
            body,
            headers,
        }
    }

    /// The HTTP response, with the caller's rate-limit headers when it was counted.
    pub fn into_response(self, rate: Option<RateStatus>) -> Response {
        let body = serde_json::to_vec(&self.body).unwrap_or_default();
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.media.content_type()),
        );
        // An answer holds a practice's data, read with a token: no cache keeps it, and one
        // that would must tell callers apart by their token.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(header::VARY, HeaderValue::from_static("accept, x-token"));
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
        if let Some(rate) = rate {
            rate_headers(rate, headers);
        }
        // The reply's own, last: a refusal of the rate limit says where the refused caller
        // stands.
        headers.extend(self.headers);
        response
    }
}

/// The headers that tell a caller where it stands: the IETF `RateLimit` / `RateLimit-Policy`
/// pair and the widespread `X-RateLimit-*` triple, and `Retry-After` when it was refused.
fn rate_headers(status: RateStatus, headers: &mut HeaderMap) {
    // The names are constants (not parsed at each response), and the numbers are written
    // straight into their header values (no String in between): every response carries five.
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
    const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    let RateStatus {
        policy,
        limit,
        remaining,
        reset,
        retry_after,
    } = status;
    let mut set = |name: HeaderName, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set(POLICY, format!("\"{policy}\";q={limit};w=60"));
    set(RATELIMIT, format!("\"{policy}\";r={remaining};t={reset}"));
    headers.insert(LIMIT, HeaderValue::from(limit));
    headers.insert(REMAINING, HeaderValue::from(remaining));
    headers.insert(RESET, HeaderValue::from(reset));
    if let Some(retry_after) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiate(accept: Option<&str>) -> Option<MediaType> {
        let mut headers = HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(header::ACCEPT, HeaderValue::from_str(a).expect("header"));
        }
        MediaType::negotiate(&headers)
    }

    #[test]
    fn negotiates_the_response_type() {
        use MediaType::*;
        assert_eq!(negotiate(None), Some(Json));
        assert_eq!(negotiate(Some("*/*")), Some(Json));
        assert_eq!(negotiate(Some("application/json")), Some(Json));
        assert_eq!(
            negotiate(Some(
                "application/graphql-response+json, application/json;q=0.9"
            )),
            Some(GraphqlResponseJson)
        );
        assert_eq!(
            negotiate(Some("application/json, application/graphql-response+json")),
            Some(GraphqlResponseJson)
        );
        assert_eq!(
            negotiate(Some(
                "application/graphql-response+json;q=0.5, application/json"
            )),
            Some(Json)
        );
        assert_eq!(negotiate(Some("text/html")), None);
    }

    #[test]
    fn document_errors_are_200_under_plain_json() {
        let rejection = Rejection::bad_input("no");
        assert_eq!(
            Reply::rejected(MediaType::Json, &rejection).status,
            StatusCode::OK
        );
        assert_eq!(
            Reply::rejected(MediaType::GraphqlResponseJson, &rejection).status,
            StatusCode::BAD_REQUEST
        );
        let malformed = Rejection::malformed("no");
        assert_eq!(
            Reply::rejected(MediaType::Json, &malformed).status,
            StatusCode::BAD_REQUEST
        );
    }
}
