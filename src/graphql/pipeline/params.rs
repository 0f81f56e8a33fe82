//! The parameters of a GraphQL request, `{"query", "variables"?, "operationName"?,
//! "extensions"?}`, as every transport carries them: an HTTP body or query string, or the
//! payload of a websocket `subscribe` message.

use serde_json::{Map, Value};

/// What a client asks to run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    pub query: String,
    pub variables: Option<Map<String, Value>>,
    pub operation_name: Option<String>,
    pub extensions: Option<Map<String, Value>>,
}

impl Params {
    /// Reads the parameters from a JSON object; an error says which one is wrong.
    pub fn from_object(mut object: Map<String, Value>) -> Result<Params, String> {
        // Each member is taken out of the object, not copied. The query may be left out when
        // a persisted query's hash stands for it (see `persisted`); otherwise a request
        // without one is refused there.
        let query = match object.remove("query") {
            Some(Value::String(q)) => q,
            Some(_) => return Err("\"query\" must be a string".into()),
            None => String::new(),
        };
        let operation_name = match object.remove("operationName") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(name),
            Some(_) => return Err("\"operationName\" must be a string or null".into()),
        };
        let mut map = |key: &str| match object.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(format!("\"{key}\" must be an object or null")),
        };
        let variables = map("variables")?;
        let extensions = map("extensions")?;
        Ok(Params {
            query,
            variables,
            operation_name,
            extensions,
        })
    }

    /// True if the document holds a NUL character, as itself or as a string's `\u0000`.
    pub fn document_has_nul(&self) -> bool {
        self.query.contains('\0') || self.query.contains("\\u0000")
    }

    /// True if the document or a variable holds a NUL character.
    pub fn has_nul(&self) -> bool {
        fn in_value(value: &Value) -> bool {
            match value {
                Value::String(text) => text.contains('\0'),
                Value::Array(items) => items.iter().any(in_value),
                Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || in_value(v)),
                _ => false,
            }
        }
        self.document_has_nul()
            || self
                .variables
                .as_ref()
                .is_some_and(|vars| vars.iter().any(|(k, v)| k.contains('\0') || in_value(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn reads_the_parameters() {
        let p = Params::from_object(object(
            json!({ "query": "{ a }", "variables": { "x": 1 }, "operationName": null }),
        ))
        .expect("valid");
        assert_eq!(p.query, "{ a }");
        assert!(p.variables.is_some());
        assert!(Params::from_object(object(json!({ "query": 1 }))).is_err());
        assert!(Params::from_object(object(json!({ "query": "{a}", "variables": "x" }))).is_err());
        assert_eq!(
            Params::from_object(object(json!({ "variables": {} })))
                .expect("read")
                .query,
            "",
            "a persisted query may leave it out"
        );
    }

    #[test]
    fn finds_nul_characters() {
        let nul = |query: &str, vars: Value| Params {
            query: query.into(),
            variables: Some(object(vars)),
            ..Params::default()
        };
        assert!(!nul("{ a }", json!({ "x": "y" })).has_nul());
        assert!(nul("{ a(b: \"\\u0000\") }", json!({})).has_nul());
        assert!(nul("{ a }", json!({ "x": ["y\u{0}"] })).has_nul());
    }
}
