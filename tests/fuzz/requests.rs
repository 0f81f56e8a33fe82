//! Requests: what is sent (document, variables, token, headers), how, and what an answer
//! must be.

use super::*;

/// One HTTP request to `/graphql`.
#[derive(Clone)]
pub(crate) struct FuzzRequest {
    /// What the strategy meant it to be.
    pub(crate) kind: &'static str,
    pub(crate) get: bool,
    pub(crate) query_string: String,
    /// What the token is, and its bytes.
    pub(crate) token: (&'static str, Option<Vec<u8>>),
    pub(crate) accept: Option<&'static str>,
    pub(crate) content_type: Option<&'static str>,
    pub(crate) body: Vec<u8>,
}

impl fmt::Debug for FuzzRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "({})", self.kind)?;
        if self.get {
            writeln!(f, "GET /graphql?{:?}", self.query_string)?;
        } else {
            writeln!(f, "POST /graphql")?;
        }
        writeln!(f, "x-token: {}", self.token.0)?;
        if let Some(accept) = self.accept {
            writeln!(f, "accept: {accept:?}")?;
        }
        if let Some(content_type) = self.content_type {
            writeln!(f, "content-type: {content_type:?}")?;
        }
        if !self.get {
            match std::str::from_utf8(&self.body) {
                Ok(text) => write!(f, "body ({} bytes): {text:?}", self.body.len())?,
                Err(_) => write!(
                    f,
                    "body ({} bytes, not UTF-8): b\"{}\"",
                    self.body.len(),
                    self.body.escape_ascii()
                )?,
            }
        }
        Ok(())
    }
}

/// The tokens a request may carry.
pub(crate) struct Tokens {
    pub(crate) admin: String,
    pub(crate) patients_read: String,
    pub(crate) query_patient: String,
    pub(crate) receptionist: String,
    pub(crate) other_practice: String,
}

pub(crate) fn token(tokens: &Tokens) -> BoxedStrategy<(&'static str, Option<Vec<u8>>)> {
    let mut obs_text = b"tok".to_vec();
    obs_text.extend_from_slice(&[0xC3, 0xA9, 0xFF]);
    let t = |label: &'static str, value: &str| (label, Some(value.as_bytes().to_vec()));
    prop_oneof![
        10 => Just(t("<admin: every permission>", &tokens.admin)),
        3 => Just(("<none>", None)),
        4 => select(vec![
            t("<patients:read only>", &tokens.patients_read),
            t("<query:patient only>", &tokens.query_patient),
            t("<receptionist's signIn token>", &tokens.receptionist),
            t("<admin of another practice>", &tokens.other_practice),
            t("\"garbage\"", "garbage"),
            t("\"\" (empty)", ""),
            t("\"   \" (spaces)", "   "),
            t("<admin token with a character cut>", &tokens.admin[..tokens.admin.len() - 1]),
            ("<10 KB of x>", Some(vec![b'x'; 10_000])),
            ("<bytes that are not ASCII>", Some(obs_text)),
        ]),
    ]
    .boxed()
}

pub(crate) fn accept() -> BoxedStrategy<Option<&'static str>> {
    prop_oneof![
        4 => Just(None),
        4 => Just(Some("application/json")),
        4 => Just(Some("application/graphql-response+json")),
        2 => select(vec![
            Some("application/graphql-response+json, application/json;q=0.9"),
            Some("*/*"),
            Some("text/html"),
            Some("text/html, application/json"),
            Some("application/json;q=0"),
            Some("application/json;q=abc"),
            Some("application/graphql-response+json;q=NaN"),
            Some("application/json;q=inf, application/graphql-response+json;q=-inf"),
            Some(""),
            Some("garbage;;;,,,"),
            Some("application/*;q=0.1"),
        ]),
    ]
    .boxed()
}

pub(crate) fn content_type() -> BoxedStrategy<Option<&'static str>> {
    prop_oneof![
        20 => Just(Some("application/json")),
        2 => Just(Some("application/json; charset=utf-8")),
        1 => Just(None),
        2 => select(vec![
            Some("APPLICATION/JSON"),
            Some("application/json;charset=latin1"),
            Some("text/plain"),
            Some("application/graphql"),
            Some("application/x-www-form-urlencoded"),
            Some(""),
            Some("application/jsonx"),
            Some("multipart/form-data; boundary=x"),
        ]),
    ]
    .boxed()
}

/// Every request the fuzz test sends.
pub(crate) fn requests(wild: &Gen, strict: &Gen, tokens: &Tokens) -> BoxedStrategy<FuzzRequest> {
    let texts = &wild.texts;
    let ids: Vec<String> = wild.real_ids.iter().chain(&wild.odd_ids).cloned().collect();
    let ids = &ids[..];
    // Any headers; or, for requests meant to reach the resolvers, mostly the right ones.
    let any_headers = (token(tokens), accept(), content_type()).boxed();
    let tame_headers = (
        prop_oneof![
            8 => Just(("<admin: every permission>", Some(tokens.admin.as_bytes().to_vec()))),
            2 => token(tokens),
        ],
        select(vec![
            None,
            Some("application/json"),
            Some("application/graphql-response+json"),
        ]),
        Just(Some("application/json")),
    )
        .boxed();
    let post = |kind: &'static str, headers: &BoxedStrategy<_>, body: BoxedStrategy<Vec<u8>>| {
        (headers.clone(), body)
            .prop_map(move |((token, accept, content_type), body)| FuzzRequest {
                kind,
                get: false,
                query_string: String::new(),
                token,
                accept,
                content_type,
                body,
            })
            .boxed()
    };
    let get = |kind: &'static str, query_string: S| {
        (token(tokens), accept(), query_string)
            .prop_map(move |(token, accept, query_string)| FuzzRequest {
                kind,
                get: true,
                query_string,
                token,
                accept,
                content_type: None,
                body: Vec::new(),
            })
            .boxed()
    };
    let body = |doc: String,
                variables: Option<Value>,
                operation_name: Option<Value>,
                extensions: Option<Value>| {
        let mut body = Map::new();
        body.insert("query".into(), Value::String(doc));
        for (key, value) in [
            ("variables", variables),
            ("operationName", operation_name),
            ("extensions", extensions),
        ] {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        serde_json::to_vec(&body).expect("serialises")
    };
    let json_body = |doc: S| {
        (
            doc,
            variables(ids, texts),
            operation_name(),
            extensions(texts),
        )
            .prop_map(move |(doc, variables, operation_name, extensions)| {
                body(doc, variables, operation_name, extensions)
            })
            .boxed()
    };
    let strict_body = strict
        .mutated_document()
        .prop_map(move |doc| body(doc, None, None, None))
        .boxed();
    let templated = prop_oneof![
        4 => strict.templated().prop_map(move |(doc, variables)| body(doc, Some(variables), None, None)),
        1 => (wild.templated(), operation_name()).prop_map(move |((doc, variables), name)| {
            body(doc, Some(variables), name, None)
        }),
    ]
    .boxed();
    let get_query_string = (
        prop_oneof![wild.mutated_document(), strict.mutated_document()],
        variables(ids, texts),
        prop::option::weighted(0.2, select(&["A", "B", "Op", ""][..])),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(doc, variables, operation_name, broken_variables)| {
            let mut qs = form_urlencoded::Serializer::new(String::new());
            qs.append_pair("query", &doc);
            if broken_variables {
                qs.append_pair("variables", "{\"v0\":");
            } else if let Some(variables) = variables {
                qs.append_pair("variables", &variables.to_string());
            }
            if let Some(name) = operation_name {
                qs.append_pair("operationName", name);
            }
            qs.finish()
        })
        .boxed();
    prop_oneof![
        25 => post("wild document", &any_headers, json_body(wild.mutated_document())),
        20 => post("strict document", &tame_headers, strict_body),
        20 => post("operation with variables", &tame_headers, templated),
        10 => get("GET document", get_query_string),
        15 => post("raw body", &any_headers, raw_body(texts)),
        4 => get("raw GET", raw_query_string(wild.mutated_document())),
        6 => post("bomb", &any_headers, json_body(wild.bomb())),
    ]
    .boxed()
}

/// What the server answered.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) body: Vec<u8>,
    /// The query string as sent (after URL parsing), empty if none.
    pub(crate) query_empty: bool,
}

/// Why there is no answer.
pub(crate) enum NoAnswer {
    /// The client cannot send this (e.g. a URI over 64 KiB): not the server's business.
    Unsendable(String),
    /// The server did not answer: it panicked, or dropped the connection.
    Failed(String),
    /// The server did not answer in time: it may still be busy.
    TimedOut(String),
}

pub(crate) async fn exchange(
    client: &reqwest::Client,
    url: &str,
    request: &FuzzRequest,
) -> Result<Answer, NoAnswer> {
    let mut builder = if request.get {
        if request.query_string.is_empty() {
            client.get(url)
        } else {
            client.get(format!("{url}?{}", request.query_string))
        }
    } else {
        client.post(url).body(request.body.clone())
    };
    if let Some(token) = &request.token.1 {
        let value = HeaderValue::from_bytes(token).expect("the token lists only valid headers");
        builder = builder.header("x-token", value);
    }
    if let Some(accept) = request.accept {
        builder = builder.header("accept", accept);
    }
    if let Some(content_type) = request.content_type {
        builder = builder.header("content-type", content_type);
    }
    let built = builder
        .build()
        .map_err(|e| NoAnswer::Unsendable(e.without_url().to_string()))?;
    let query_empty = built.url().query().is_none_or(str::is_empty);
    let response = client.execute(built).await.map_err(|e| {
        if e.is_builder() {
            NoAnswer::Unsendable(e.without_url().to_string())
        } else if e.is_timeout() {
            NoAnswer::TimedOut(format!(
                "no answer within {} s (is the server busy or hung?)",
                REQUEST_TIMEOUT.as_secs()
            ))
        } else {
            NoAnswer::Failed(format!(
                "no answer (did the server panic or hang?): {:?}",
                e.without_url()
            ))
        }
    })?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = response
        .bytes()
        .await
        .map_err(|e| {
            let timed_out = e.is_timeout();
            let why = format!(
                "HTTP {status}, but the body broke off: {:?}",
                e.without_url()
            );
            if timed_out {
                NoAnswer::TimedOut(why)
            } else {
                NoAnswer::Failed(why)
            }
        })?
        .to_vec();
    Ok(Answer {
        status,
        content_type,
        body,
        query_empty,
    })
}

/// At most `max` characters of a body, for a message.
pub(crate) fn shown(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    if text.chars().count() <= max {
        text.into_owned()
    } else {
        text.chars().take(max).collect::<String>() + "…"
    }
}

/// Why an answer is wrong, if it is; otherwise the codes of its errors.
pub(crate) fn check(request: &FuzzRequest, answer: &Answer) -> Result<Vec<String>, String> {
    let status = answer.status;
    let what = || {
        format!(
            "HTTP {status} ({}): {}",
            answer.content_type,
            shown(&answer.body, 4000)
        )
    };
    if status >= 500 {
        return Err(format!("a 5xx answer: {}", what()));
    }
    // A browser's GET without a query gets the GraphiQL page.
    if request.get && answer.query_empty && request.accept.is_some_and(|a| a.contains("text/html"))
    {
        if status == 200 && answer.content_type.starts_with("text/html") {
            return Ok(Vec::new());
        }
        return Err(format!("expected the GraphiQL page, got {}", what()));
    }
    let body: Value = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("the body is not JSON ({e}): {}", what()))?;
    let Some(object) = body.as_object() else {
        return Err(format!("the body is not a JSON object: {}", what()));
    };
    if !object.contains_key("data") && !object.contains_key("errors") {
        return Err(format!("the body has neither data nor errors: {}", what()));
    }
    let mut codes = Vec::new();
    if let Some(errors) = object.get("errors") {
        let Some(errors) = errors.as_array().filter(|e| !e.is_empty()) else {
            return Err(format!("errors is not a non-empty list: {}", what()));
        };
        for error in errors {
            if !error["message"].is_string() {
                return Err(format!("an error without a message: {}", what()));
            }
            let Some(code) = error["extensions"]["code"].as_str() else {
                return Err(format!("an error without extensions.code: {}", what()));
            };
            if code == "INTERNAL_SERVER_ERROR" {
                return Err(format!("an INTERNAL_SERVER_ERROR: {}", what()));
            }
            // The sign-in throttle (README, "Sign-in throttling and timeouts"): after 20 failed
            // sign-ins from one address, which this run makes, signIn fails with RATE_LIMITED
            // and retryAfter, at the field.
            let throttled = code == "RATE_LIMITED"
                && error["path"].as_array().is_some_and(|p| !p.is_empty())
                && error["extensions"]["retryAfter"].is_u64();
            if !ALLOWED_CODES.contains(&code) && !throttled {
                return Err(format!("extensions.code {code} is not allowed: {}", what()));
            }
            codes.push(code.to_string());
        }
    }
    Ok(codes)
}
