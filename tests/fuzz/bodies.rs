//! JSON: variables of right and wrong types, and raw bodies and query strings.

use super::*;

pub(crate) fn json_leaf(texts: &[String]) -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => select(vec![
            json!(0),
            json!(1),
            json!(-1),
            json!(25),
            json!(100),
            json!(2147483647),
            json!(2147483648i64),
            json!(-2147483649i64),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1e308),
            json!(f64::MAX),
            json!(-0.0),
            json!(5e-324),
            json!(f64::MIN_POSITIVE),
            json!(0.5),
            json!(1.0),
        ]),
        1 => any::<i64>().prop_map(|i| json!(i)),
        1 => any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        4 => text_strategy(texts, true).prop_map(Value::String),
    ]
    .boxed()
}

pub(crate) fn json_any(texts: &[String]) -> BoxedStrategy<Value> {
    json_leaf(texts)
        .prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        select(
                            &[
                                "first", "last", "email", "dob", "labels", "patient", "doctor",
                                "start", "end", "page", "pageSize", "v0", "id", "", "\u{0}", "😀",
                            ][..]
                        ),
                        inner
                    ),
                    0..6
                )
                .prop_map(|fields| Value::Object(
                    fields
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect()
                )),
            ]
        })
        .boxed()
}

/// Variable values shaped like what the schema takes, with odd values inside.
pub(crate) fn json_typed(ids: &[String], texts: &[String]) -> BoxedStrategy<Value> {
    let id = select(ids.to_vec()).prop_map(Value::String);
    let text = text_strategy(texts, true).prop_map(Value::String);
    let leaf = json_leaf(texts);
    let maybe = |s: BoxedStrategy<Value>| prop::option::weighted(0.6, s);
    prop_oneof![
        3 => id.clone(),
        2 => (maybe(text.clone().boxed()), maybe(text.clone().boxed()), maybe(select(DATES).prop_map(|d| json!(d)).boxed()), maybe(leaf.clone()))
            .prop_map(|(first, last, dob, labels)| {
                let mut m = Map::new();
                for (k, v) in [("first", first), ("last", last), ("dob", dob), ("labels", labels)] {
                    if let Some(v) = v {
                        m.insert(k.into(), v);
                    }
                }
                Value::Object(m)
            }),
        2 => (id.clone(), id.clone(), select(DATETIMES), maybe(leaf.clone()))
            .prop_map(|(patient, doctor, start, end)| {
                let mut m = Map::new();
                m.insert("patient".into(), patient);
                m.insert("doctor".into(), doctor);
                m.insert("start".into(), json!(start));
                if let Some(end) = end {
                    m.insert("end".into(), end);
                }
                Value::Object(m)
            }),
        2 => (leaf.clone(), leaf.clone()).prop_map(|(page, size)| json!({ "page": page, "pageSize": size })),
        1 => select(DATETIMES).prop_map(|d| json!(d)),
        1 => prop::collection::vec(id, 0..4).prop_map(Value::Array),
        2 => leaf,
    ]
    .boxed()
}

/// The `variables` of a request: none, null, a map of (mostly) the names documents declare,
/// or any JSON at all.
pub(crate) fn variables(ids: &[String], texts: &[String]) -> BoxedStrategy<Option<Value>> {
    let entry = (
        select(&["v0", "v1", "v2", "v0", "v1", "d", "", "v0 "][..]),
        prop_oneof![3 => json_typed(ids, texts), 2 => json_any(texts)],
    );
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(Value::Null)),
        6 => prop::collection::vec(entry, 0..4).prop_map(|entries| Some(Value::Object(
            entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        ))),
        1 => json_any(texts).prop_map(Some),
    ]
    .boxed()
}

pub(crate) fn operation_name() -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        8 => Just(None),
        3 => select(&["A", "B", "Op", "", "Nope"][..]).prop_map(|s| Some(json!(s))),
        1 => Just(Some(Value::Null)),
        1 => select(vec![json!(5), json!([]), json!({}), json!(true)]).prop_map(Some),
    ]
    .boxed()
}

pub(crate) fn extensions(texts: &[String]) -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        10 => Just(None),
        1 => Just(Some(json!({}))),
        1 => Just(Some(json!({ "persistedQuery": { "version": 1, "sha256Hash": "abc" } }))),
        1 => json_any(texts).prop_map(Some),
    ]
    .boxed()
}

pub(crate) const VALID_BODIES: &[&str] = &[
    r#"{"query":"{ currentPractice { id name } }"}"#,
    r#"{"query":"query($v0: Int) { patients(pagination: {pageSize: $v0}) { data { id firstName labels { text } } pageInfo { hasMore } } }","variables":{"v0":2}}"#,
    r#"{"query":"mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id } error } }","variables":{"d":{"first":"Fuzz","last":"Body"}},"operationName":null}"#,
    r#"{"query":"mutation { signIn(email: \"grace.hopper@example.com\", password: \"wrong\") { token error } }"}"#,
];

/// Bodies that are not what a client should send.
pub(crate) const TRICKY_BODIES: &[&str] = &[
    "",
    " ",
    "null",
    "true",
    "0",
    "1e400",
    r#""{ currentPractice { id } }""#,
    "[]",
    r#"[{"query":"{ currentPractice { id } }"}]"#,
    "{}",
    r#"{"query":null}"#,
    r#"{"query":1}"#,
    r#"{"query":["{ currentPractice { id } }"]}"#,
    r#"{"query":{}}"#,
    r#"{"query":true}"#,
    r#"{"query":""}"#,
    r#"{"query":"   "}"#,
    r##"{"query":"# only a comment"}"##,
    r#"{"query":"{ currentPractice { id } }","variables":"{}"}"#,
    r#"{"query":"{ currentPractice { id } }","variables":[]}"#,
    r#"{"query":"{ currentPractice { id } }","variables":1}"#,
    r#"{"query":"{ currentPractice { id } }","variables":{"a":1e400}}"#,
    r#"{"query":"{ currentPractice { id } }","operationName":1}"#,
    r#"{"query":"{ currentPractice { id } }","operationName":{}}"#,
    r#"{"query":"{ currentPractice { id } }","extensions":"x"}"#,
    r#"{"query":"{ currentPractice { id } }","extensions":[]}"#,
    r#"{"query":"\uD800"}"#,
    r#"{"query":"{ currentPractice { id } }","variables":{"x":"\uDC00"}}"#,
    r#"{"query":"\u0000"}"#,
    r#"{"query":"{ patient(id: \"\u0000\") { id } }"}"#,
    r#"{"query":"{ patient(id: \"\\u0000\") { id } }"}"#,
    r#"{"query":"query($v0: ID!) { patient(id: $v0) { id } }","variables":{"v0":"a\u0000b"}}"#,
    r#"{"query":"query($v0: ID!) { patient(id: $v0) { id } }","variables":{"v\u0000":"a"}}"#,
    r#"{"query":"{ currentPractice { id } }"} trailing"#,
    r#"{"query":"{ currentPractice { id } }"}{"query":"x"}"#,
    r#"{"query":"{ a }","query":"{ currentPractice { id } }"}"#,
    r#"{"query":"{ currentPractice { id } }""#,
    r#"{'query':'{ currentPractice { id } }'}"#,
    r#"{query:"{ currentPractice { id } }"}"#,
    r#"{"query":"{ currentPractice { id } }",}"#,
    r#"/* c */{"query":"{ currentPractice { id } }"}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {pageSize: $v}) { pageInfo { pageSize } } }","variables":{"v":1e308}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {pageSize: $v}) { pageInfo { pageSize } } }","variables":{"v":-0.0}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {page: $v}) { pageInfo { page } } }","variables":{"v":9223372036854775807}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {page: $v}) { pageInfo { page } } }","variables":{"v":18446744073709551615}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {page: $v}) { pageInfo { page } } }","variables":{"v":2.0}}"#,
    r#"{"query":"query($v: Float) { __typename }","variables":{"v":123456789012345678901234567890}}"#,
    r#"{"query":"mutation($t: String!, $p: Float) { createAppointmentType(title: $t, duration: 10, price: $p) { data { price } error } }","variables":{"t":"Huge price","p":1.7976931348623157e308}}"#,
    r#"{"query":"mutation { signIn(email: \"a\", password: \"b\") { error } } mutation M { signOut }","operationName":"M"}"#,
    r#"{"query":"mutation { a: signIn(email: \"a\", password: \"b\") { error } b: signIn(email: \"a\", password: \"b\") { error } }"}"#,
    r#"{"query":"subscription { __typename }"}"#,
    r#"{"query":"query A { __typename } query A { __typename }","operationName":"A"}"#,
    r#"{"query":"query A { __typename } query B { __typename }"}"#,
];

/// A body for a POST: random bytes, cut-off JSON, tricky JSON, wrong types, a nest, a flood.
pub(crate) fn raw_body(texts: &[String]) -> BoxedStrategy<Vec<u8>> {
    let field_value = prop_oneof![
        2 => select(VALID_BODIES)
            .prop_map(|b| serde_json::from_str::<Value>(b).expect("valid")["query"].clone()),
        3 => json_any(texts),
    ];
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..512),
        3 => (select(VALID_BODIES), any::<Index>())
            .prop_map(|(b, at)| b.as_bytes()[..at.index(b.len() + 1)].to_vec()),
        3 => (select(VALID_BODIES), any::<Index>(), prop::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(b, at, bytes)| {
                let mut body = b.as_bytes().to_vec();
                let at = at.index(body.len() + 1);
                body.splice(at..at, bytes);
                body
            }),
        6 => select(TRICKY_BODIES).prop_map(|b| b.as_bytes().to_vec()),
        3 => prop::collection::vec(
            (select(&["query", "variables", "operationName", "extensions", "junk", "Query"][..]), field_value),
            0..5
        )
        .prop_map(|fields| {
            let object: Map<String, Value> =
                fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            serde_json::to_vec(&object).expect("serialises")
        }),
        1 => select(VALID_BODIES).prop_map(|b| {
            let mut body = b"\xEF\xBB\xBF".to_vec();
            body.extend_from_slice(b.as_bytes());
            body
        }),
        1 => select(VALID_BODIES).prop_map(|b| {
            b.encode_utf16().flat_map(u16::to_le_bytes).collect()
        }),
        1 => (1..100_000usize).prop_map(|n| "[".repeat(n).into_bytes()),
        1 => (1..130usize).prop_map(|n| format!(
            r#"{{"query":"query($v0: [[Int]]) {{ __typename }}","variables":{{"v0":{}1{}}}}}"#,
            "[".repeat(n),
            "]".repeat(n)
        ).into_bytes()),
        1 => (1_048_000..1_049_200usize).prop_map(|n| {
            let head = r#"{"query":"{ currentPractice { id } }","junk":""#;
            let mut body = head.as_bytes().to_vec();
            body.resize(n.saturating_sub(2).max(head.len()), b'x');
            body.extend_from_slice(b"\"}");
            body
        }),
    ]
    .boxed()
}

/// A raw GET query string.
pub(crate) fn raw_query_string(doc: S) -> S {
    prop_oneof![
        4 => select(&[
            "",
            "query",
            "query=",
            "query=%",
            "query=%ZZ",
            "query=%FF%FE%00",
            "query=%7B%20currentPractice%20%7B%20id%20%7D%20%7D",
            "query=%7Bx%7D&query=%7B%20currentPractice%20%7B%20id%20%7D%20%7D",
            "variables=%7B%7D",
            "query=%7B__typename%7D&variables=%7B",
            "query=%7B__typename%7D&variables=null",
            "query=%7B__typename%7D&variables=%5B%5D",
            "query=%7B__typename%7D&variables=%22x%22",
            "query=%7B__typename%7D&extensions=1",
            "query=%7B__typename%7D&operationName=",
            "query=%7B__typename%7D&operationName=A&operationName=B",
            "query=mutation%7BsignOut%7D",
            "query=mutation%7BsignIn(email%3A%22a%22%2C%20password%3A%22b%22)%7Berror%7D%7D",
            "query=%7B__typename%7D&variables=%7B%22a%22%3A%22%5Cu0000%22%7D",
            "query=%7B__typename%7D&variables=%7B%22a%22%3A1e400%7D",
            "&&&",
            "=&=",
            "query=+",
            "query=%00",
            "query=%E2%82",
            "query=%7B%20__typename%20%7D#fragment",
        ][..])
        .prop_map(str::to_string),
        2 => prop::collection::vec(any::<char>(), 0..60).prop_map(String::from_iter),
        2 => doc.prop_map(|d| format!("query={d}")),
        2 => prop::collection::vec(any::<u8>(), 0..60).prop_map(|bytes| {
            let mut qs = "query=".to_string();
            for b in bytes {
                qs += &format!("%{b:02X}");
            }
            qs
        }),
    ]
    .boxed()
}
