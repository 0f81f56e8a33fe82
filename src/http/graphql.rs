//! GraphQL over HTTP, by the GraphQL-over-HTTP specification: our own thin handler around the
//! schema, because async-graphql's axum integration does not negotiate
//! `application/graphql-response+json`, set its status codes, refuse mutations over GET or
//! refuse batches as the specification asks.
//!
//! - `POST /graphql` with `Content-Type: application/json` and a body
//!   `{"query", "variables"?, "operationName"?, "extensions"?}`.
//! - `GET /graphql?query=...&variables=...` for queries; a mutation over GET is 405.
//! - The response is `application/json` unless the client's `Accept` prefers
//!   `application/graphql-response+json`. With `application/json` every well-formed request
//!   gets 200; with `application/graphql-response+json`, a request that could not run gets a
//!   4xx (400 for parse and validation errors, 401 for a missing or refused token).
//! - A JSON array (a batch) is refused with 400.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;

use super::idempotency;
use super::rate_limit::Decision;
use super::{AppState, RequestId};
use crate::auth::{self, AuthError, OperationKind};
use crate::graphql::audit::ReadLog;
use crate::graphql::error::code;
use crate::graphql::{self, limits, operation_shape};
use crate::store::audit::Reads;

/// The media types a GraphQL response can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MediaType {
    Json,
    GraphqlResponseJson,
}

impl MediaType {
    fn content_type(self) -> &'static str {
        match self {
            MediaType::Json => "application/json; charset=utf-8",
            MediaType::GraphqlResponseJson => "application/graphql-response+json; charset=utf-8",
        }
    }

    /// Chooses from the Accept header: the acceptable type with the highest q, preferring
    /// `application/graphql-response+json` on a tie; `application/json` when there is no
    /// header. None when neither is acceptable.
    fn negotiate(headers: &HeaderMap) -> Option<MediaType> {
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

/// A response body with its status.
pub(super) struct Reply {
    pub status: StatusCode,
    media: MediaType,
    pub body: Value,
}

impl Reply {
    /// The response's content type.
    pub fn content_type(&self) -> &'static str {
        self.media.content_type()
    }

    /// A request that did not run: errors only, no `data` key.
    fn request_error(media: MediaType, status: StatusCode, code: &str, message: &str) -> Reply {
        Reply {
            status,
            media,
            body: json!({ "errors": [{ "message": message, "extensions": { "code": code } }] }),
        }
    }

    /// For errors that a `application/json` client must get as 200: the status applies only
    /// under `application/graphql-response+json`.
    fn graphql_error(media: MediaType, status: StatusCode, code: &str, message: &str) -> Reply {
        let status = match media {
            MediaType::Json => StatusCode::OK,
            MediaType::GraphqlResponseJson => status,
        };
        Reply::request_error(media, status, code, message)
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body).unwrap_or_default();
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.media.content_type()),
        );
        response
    }
}

/// The parts of a GraphQL request, before they become an `async_graphql::Request`.
struct Params {
    query: String,
    variables: Option<Map<String, Value>>,
    operation_name: Option<String>,
    extensions: Option<Map<String, Value>>,
}

impl Params {
    /// Reads the parameters from a JSON object (a POST body, or GET parameters made into one).
    fn from_object(object: Map<String, Value>) -> Result<Params, String> {
        let query = match object.get("query") {
            Some(Value::String(q)) => q.clone(),
            Some(_) => return Err("\"query\" must be a string".into()),
            None => return Err("the request has no \"query\"".into()),
        };
        let map = |key: &str| match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m.clone())),
            Some(_) => Err(format!("\"{key}\" must be an object or null")),
        };
        let operation_name = match object.get("operationName") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(name.clone()),
            Some(_) => return Err("\"operationName\" must be a string or null".into()),
        };
        Ok(Params {
            query,
            variables: map("variables")?,
            operation_name,
            extensions: map("extensions")?,
        })
    }

    /// Reads a POST body.
    fn from_body(body: &[u8]) -> Result<Params, String> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| format!("the request body is not valid JSON: {e}"))?;
        match value {
            Value::Object(object) => Params::from_object(object),
            Value::Array(_) => Err("batched requests (a JSON array) are not supported: send \
                                    one operation per request"
                .into()),
            _ => Err("the request body must be a JSON object with a \"query\"".into()),
        }
    }

    /// Reads GET parameters; `variables` and `extensions` are JSON text.
    fn from_query_string(raw: &str) -> Result<Params, String> {
        let mut object = Map::new();
        for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
            let value = match key.as_ref() {
                "variables" | "extensions" => serde_json::from_str(&value)
                    .map_err(|e| format!("the \"{key}\" parameter is not valid JSON: {e}"))?,
                _ => Value::String(value.into_owned()),
            };
            object.insert(key.into_owned(), value);
        }
        Params::from_object(object)
    }

    /// True if the document or a variable holds a NUL character.
    fn has_nul(&self) -> bool {
        fn in_value(value: &Value) -> bool {
            match value {
                Value::String(text) => text.contains('\0'),
                Value::Array(items) => items.iter().any(in_value),
                Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || in_value(v)),
                _ => false,
            }
        }
        self.query.contains('\0')
            || self.query.contains("\\u0000")
            || self
                .variables
                .as_ref()
                .is_some_and(|vars| vars.iter().any(|(k, v)| k.contains('\0') || in_value(v)))
    }

    fn into_request(self) -> async_graphql::Request {
        let mut request = async_graphql::Request::new(self.query);
        if let Some(variables) = self.variables {
            request = request.variables(async_graphql::Variables::from_json(Value::Object(
                variables,
            )));
        }
        if let Some(name) = self.operation_name {
            request = request.operation_name(name);
        }
        if let Some(extensions) = self.extensions {
            for (key, value) in extensions {
                if let Ok(value) = async_graphql::Value::from_json(value) {
                    request.extensions.insert(key, value);
                }
            }
        }
        request
    }
}

/// Is the request body JSON? (`application/json`, any parameters.)
fn is_json_content(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// `GET` and `POST /graphql`.
pub async fn handle(State(app): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET
        && parts.uri.query().is_none_or(str::is_empty)
        && super::graphiql::wants_html(&parts.headers)
    {
        return super::graphiql::page().into_response();
    }
    let Some(media) = MediaType::negotiate(&parts.headers) else {
        return Reply::request_error(
            MediaType::Json,
            StatusCode::NOT_ACCEPTABLE,
            code::BAD_REQUEST,
            "the Accept header must allow application/graphql-response+json or application/json",
        )
        .into_response();
    };
    let bad_request = |message: &str| {
        Reply::request_error(media, StatusCode::BAD_REQUEST, code::BAD_REQUEST, message)
            .into_response()
    };
    let params = if parts.method == Method::GET {
        Params::from_query_string(parts.uri.query().unwrap_or(""))
    } else {
        if !is_json_content(&parts.headers) {
            return Reply::request_error(
                media,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                code::BAD_REQUEST,
                "send the request with Content-Type: application/json",
            )
            .into_response();
        }
        let body: Bytes = match axum::body::to_bytes(body, app.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(_) => {
                return Reply::request_error(
                    media,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    code::BAD_REQUEST,
                    &format!(
                        "the request body is larger than the limit of {} bytes",
                        app.max_body_bytes
                    ),
                )
                .into_response();
            }
        };
        Params::from_body(&body)
    };
    let params = match params {
        Ok(params) => params,
        Err(message) => return bad_request(&message),
    };
    if params.has_nul() {
        // No database text column can hold U+0000 (PostgreSQL refuses it outright), and no
        // name, note or id of ours contains one: refuse it here, the same on every engine.
        return Reply::graphql_error(
            media,
            StatusCode::BAD_REQUEST,
            code::BAD_USER_INPUT,
            "text must not contain NUL characters (U+0000)",
        )
        .into_response();
    }
    if params.query.len() > app.limits.max_document_bytes {
        let exceeded = limits::Exceeded {
            limit: "documentBytes",
            value: params.query.len() as u64,
            max: app.limits.max_document_bytes as u64,
        };
        return too_complex(media, &exceeded, None).into_response();
    }
    let nesting = limits::bracket_nesting(&params.query);
    if nesting > limits::MAX_BRACKET_NESTING {
        let exceeded = limits::Exceeded {
            limit: "depth",
            value: nesting as u64,
            max: limits::MAX_BRACKET_NESTING as u64,
        };
        return too_complex(media, &exceeded, None).into_response();
    }
    let idempotency_key = match idempotency::key_of(&parts.headers) {
        Ok(key) => key,
        Err(message) => return bad_request(&message),
    };
    let request_hash = idempotency_key.as_ref().map(|_| {
        idempotency::request_hash(
            &params.query,
            params.operation_name.as_deref(),
            params.variables.as_ref(),
        )
    });
    let mut request = params.into_request();

    let operation_name = request.operation_name.clone();
    let (shape, doc) = match app.documents.parse(&request.query) {
        Ok(doc) => {
            request.set_parsed_query((*doc).clone());
            (operation_shape(&doc, operation_name.as_deref()), doc)
        }
        Err(err) => {
            return Reply::graphql_error(
                media,
                StatusCode::BAD_REQUEST,
                code::GRAPHQL_PARSE_FAILED,
                &err.message,
            )
            .into_response();
        }
    };
    if shape.is_some_and(|s| s.sign_ins > 1) {
        return Reply::graphql_error(
            media,
            StatusCode::BAD_REQUEST,
            code::BAD_USER_INPUT,
            "send one signIn per request",
        )
        .into_response();
    }

    let measure = limits::measure(&doc, operation_name.as_deref(), &request.variables);
    let cost = json!({ "requested": measure.cost, "limit": app.limits.max_cost });
    if let Err(exceeded) = app.limits.check(0, &measure) {
        return too_complex(media, &exceeded, Some(cost)).into_response();
    }
    if parts.method == Method::GET && shape.is_some_and(|s| s.kind != OperationKind::Query) {
        let mut response = Reply::request_error(
            media,
            StatusCode::METHOD_NOT_ALLOWED,
            code::BAD_REQUEST,
            "only queries can be sent with GET: send mutations with POST",
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }

    // Every operation but signIn needs a valid token, introspection included.
    let principal = if shape.is_some_and(|s| s.sign_in_only) {
        None
    } else {
        let token = parts
            .headers
            .get("x-token")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let result = match token {
            None => Err(AuthError::Missing),
            Some(token) => auth::authenticate(&app.store, token).await,
        };
        match result {
            Ok(principal) => Some(principal),
            Err(AuthError::Store(err)) => {
                tracing::warn!(error = %err, "could not check a token");
                return unavailable(media);
            }
            Err(err) => {
                return Reply::graphql_error(
                    media,
                    StatusCode::UNAUTHORIZED,
                    code::UNAUTHENTICATED,
                    &err.to_string(),
                )
                .into_response();
            }
        }
    };

    // Counted per token; signIn, which has none, per client address.
    let rate_key = match (
        &principal,
        parts.extensions.get::<ConnectInfo<SocketAddr>>(),
    ) {
        (Some(principal), _) => principal.token_id.clone(),
        (None, Some(ConnectInfo(addr))) => format!("ip:{}", addr.ip()),
        (None, None) => "ip:unknown".to_string(),
    };
    let decision = app.rate_limits.check(&rate_key);
    if let Decision::Limited { retry_after } = decision {
        let mut response = Reply::request_error(
            media,
            StatusCode::TOO_MANY_REQUESTS,
            code::RATE_LIMITED,
            &format!(
                "Too many requests: the limit is {} a minute; try again in {retry_after} s",
                app.rate_limits.per_minute()
            ),
        )
        .into_response();
        app.rate_limits.headers(decision, response.headers_mut());
        return response;
    }

    // A mutation with an Idempotency-Key runs once; a retry gets the first response.
    let mut held_key = None;
    if let (Some(key), Some(hash), Some(principal), Some(s)) =
        (idempotency_key, request_hash, &principal, shape)
        && s.kind == OperationKind::Mutation
    {
        let claimed =
            idempotency::claim(&app.store, principal, key, hash, app.request_timeout * 2).await;
        let mut response = match claimed {
            Ok(Ok(idempotency::Outcome::Run(held))) => {
                held_key = Some(held);
                None
            }
            Ok(Ok(idempotency::Outcome::Answer(response))) => Some(response),
            Ok(Err((status, code, message))) => {
                let mut refused =
                    Reply::request_error(media, status, code, &message).into_response();
                if status == StatusCode::CONFLICT {
                    refused
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                }
                Some(refused)
            }
            Err(error) => {
                tracing::warn!(%error, "could not claim an idempotency key");
                Some(unavailable(media))
            }
        };
        if let Some(response) = response.as_mut() {
            app.rate_limits.headers(decision, response.headers_mut());
        }
        if let Some(response) = response {
            return response;
        }
    }

    let address = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    let mut request = request.data(graphql::ClientAddress(address));
    // The reads of patient data are recorded before the data leaves: a query's, and what a
    // mutation's result reaches beyond its own record (a booking's doctor's bookings).
    let mut reads = None;
    if let Some(principal) = &principal {
        let log = Arc::new(ReadLog::new(&doc, operation_name.as_deref()));
        request = request.data(log.clone());
        reads = Some((log, principal.practice_id.clone(), principal.actor.clone()));
    }
    let request = graphql::for_caller(request, &app.store, principal, shape.map(|s| s.kind));
    let response = app.schema.execute(request).await;
    let recorded = match reads {
        Some((log, practice_id, actor)) => {
            let reads = Reads {
                practice_id,
                actor,
                reads: log.take(),
            };
            app.read_audit.record(reads).await
        }
        None => true,
    };
    let mut reply = if recorded {
        let request_id = parts.extensions.get::<RequestId>().map(|id| id.0.as_str());
        let mut reply = finish(media, response, request_id);
        if let Some(data) = reply.body.get_mut("data") {
            super::order::in_selection_order(data, &doc, operation_name.as_deref());
        }
        reply
    } else {
        Reply::request_error(
            media,
            StatusCode::SERVICE_UNAVAILABLE,
            code::SERVICE_UNAVAILABLE,
            "The audit log could not be written, so the data read is withheld; try again \
             shortly",
        )
    };
    reply.body["extensions"]["cost"] = cost;
    if let Some(held) = held_key {
        idempotency::finish(&app.store, held, &reply).await;
    }
    let mut response = reply.into_response();
    app.rate_limits.headers(decision, response.headers_mut());
    response
}

/// The database could not be reached: try again shortly.
fn unavailable(media: MediaType) -> Response {
    Reply::request_error(
        media,
        StatusCode::SERVICE_UNAVAILABLE,
        code::SERVICE_UNAVAILABLE,
        "The database is unavailable; try again shortly",
    )
    .into_response()
}

/// A document over a limit: QUERY_TOO_COMPLEX, naming the limit, the document's value and
/// the limit's, with the cost when it was measured.
fn too_complex(media: MediaType, exceeded: &limits::Exceeded, cost: Option<Value>) -> Reply {
    let mut reply = Reply::graphql_error(
        media,
        StatusCode::BAD_REQUEST,
        code::QUERY_TOO_COMPLEX,
        &exceeded.message(),
    );
    let extensions = &mut reply.body["errors"][0]["extensions"];
    extensions["limit"] = json!(exceeded.limit);
    extensions["value"] = json!(exceeded.value);
    extensions["max"] = json!(exceeded.max);
    if let Some(cost) = cost {
        reply.body["extensions"]["cost"] = cost;
    }
    reply
}

/// Turns an executed response into a reply: every error gets a code, an internal error names
/// the request id (its details are in the log under it), and a response that did not run
/// (validation failed) has no `data` and, under graphql-response+json, status 400.
fn finish(media: MediaType, response: async_graphql::Response, request_id: Option<&str>) -> Reply {
    let ran = !(response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|e| e.path.is_empty()));
    let mut body = Map::new();
    if ran {
        let mut data = response.data.into_json().unwrap_or(Value::Null);
        for err in &response.errors {
            null_at(&mut data, &err.path);
        }
        body.insert("data".into(), data);
    }
    if !response.errors.is_empty() {
        let errors = response
            .errors
            .into_iter()
            .map(|err| {
                let mut value = serde_json::to_value(&err).unwrap_or_else(|_| json!({}));
                let has_code = err
                    .extensions
                    .as_ref()
                    .is_some_and(|ext| ext.get("code").is_some());
                if !has_code {
                    let code = if ran {
                        code::BAD_USER_INPUT
                    } else {
                        code::GRAPHQL_VALIDATION_FAILED
                    };
                    value["extensions"]["code"] = json!(code);
                }
                if let Some(id) = request_id
                    && value["extensions"]["code"] == json!(code::INTERNAL_SERVER_ERROR)
                {
                    value["message"] = json!(format!("Internal server error (request id {id})"));
                    value["extensions"]["requestId"] = json!(id);
                }
                value
            })
            .collect();
        body.insert("errors".into(), Value::Array(errors));
    }
    if !response.extensions.is_empty() {
        body.insert(
            "extensions".into(),
            serde_json::to_value(&response.extensions).unwrap_or(Value::Null),
        );
    }
    let status = if ran || media == MediaType::Json {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    Reply {
        status,
        media,
        body: Value::Object(body),
    }
}

/// Puts `null` where a field failed. async-graphql 7 leaves a failed field out of its object
/// (and an object whose fields all failed becomes null) where the GraphQL specification wants
/// the field present and null (async-graphql issue #1549). Every field of our schema that can
/// fail is nullable, so null is the right value there.
fn null_at(data: &mut Value, path: &[async_graphql::PathSegment]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = data;
    for segment in parents {
        if here.is_null() {
            *here = Value::Object(Map::new());
        }
        here = match (segment, here) {
            (async_graphql::PathSegment::Field(name), Value::Object(map)) => {
                map.entry(name.clone()).or_insert(Value::Null)
            }
            (async_graphql::PathSegment::Index(i), Value::Array(items)) => {
                match items.get_mut(*i) {
                    Some(item) => item,
                    None => return,
                }
            }
            _ => return,
        };
    }
    if here.is_null() {
        *here = Value::Object(Map::new());
    }
    if let (async_graphql::PathSegment::Field(name), Value::Object(map)) = (last, here) {
        map.entry(name.clone()).or_insert(Value::Null);
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
    fn failed_fields_become_null() {
        use async_graphql::PathSegment::{Field, Index};
        let mut data = json!({ "bookings": { "data": [null, { "id": "b" }] } });
        let field = |s: &str| Field(s.to_string());
        null_at(
            &mut data,
            &[field("bookings"), field("data"), Index(0), field("patient")],
        );
        null_at(
            &mut data,
            &[field("bookings"), field("data"), Index(0), field("doctor")],
        );
        null_at(
            &mut data,
            &[field("bookings"), field("data"), Index(1), field("patient")],
        );
        null_at(&mut data, &[field("other")]);
        assert_eq!(
            data,
            json!({
                "bookings": { "data": [
                    { "patient": null, "doctor": null },
                    { "id": "b", "patient": null }
                ] },
                "other": null
            })
        );
        let mut root = Value::Null;
        null_at(&mut root, &[field("patients")]);
        assert_eq!(root, json!({ "patients": null }));
    }

    #[test]
    fn reads_request_parameters() {
        let p = Params::from_body(br#"{"query":"{ a }","variables":{"x":1},"operationName":null}"#)
            .expect("valid");
        assert_eq!(p.query, "{ a }");
        assert!(p.variables.is_some());
        assert!(Params::from_body(b"[]").is_err());
        assert!(Params::from_body(b"{").is_err());
        assert!(Params::from_body(br#"{"query":1}"#).is_err());
        assert!(Params::from_body(br#"{"query":"{a}","variables":"x"}"#).is_err());
        assert!(Params::from_body(br#"{"variables":{}}"#).is_err());
        let g = Params::from_query_string("query=%7B+a+%7D&variables=%7B%22x%22%3A1%7D")
            .expect("valid");
        assert_eq!(g.query, "{ a }");
        assert!(Params::from_query_string("query=x&variables=%7B").is_err());
    }
}
