//! Automatic persisted queries, the convention of Apollo's clients: a request may carry
//! `extensions.persistedQuery = { version: 1, sha256Hash }` and leave the document out. A hash
//! the server knows stands for its document; an unknown one is refused with
//! PERSISTED_QUERY_NOT_FOUND, and the client sends the document with its hash, which is checked
//! and then kept. What is kept is bounded: the documents of at most [`BUDGET`] bytes, least
//! recently used out first.

use std::sync::Arc;

use quick_cache::Weighter;
use quick_cache::sync::Cache;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::params::Params;
use super::rejection::{Rejection, Stop};
use crate::graphql::error::code;

/// Bytes of documents kept at most.
const BUDGET: u64 = 4 << 20;

/// Documents by the SHA-256 of their text, hex-encoded.
#[derive(Clone)]
pub struct Persisted {
    cache: Arc<Cache<String, Arc<str>, TextLength>>,
}

#[derive(Clone)]
struct TextLength;

impl Weighter<String, Arc<str>> for TextLength {
    fn weight(&self, hash: &String, text: &Arc<str>) -> u64 {
        (hash.len() + text.len()) as u64
    }
}

impl Default for Persisted {
    fn default() -> Self {
        // An estimate of the entries, for the cache's sizing: documents of ~2 KiB.
        let entries = (BUDGET / 2048) as usize;
        Persisted {
            cache: Arc::new(Cache::with_weighter(entries, BUDGET, TextLength)),
        }
    }
}

impl Persisted {
    /// The request with its document: as sent, or the one its hash stands for. A document
    /// sent with its hash is kept only if it could be run: no longer than `max_bytes` (the
    /// limit on documents, which is checked after this) and without NUL characters; another
    /// is refused by the next stage, and kept it would only push out the ones that run.
    pub fn resolve(&self, mut params: Params, max_bytes: usize) -> Result<Params, Rejection> {
        let Some(persisted) = params
            .extensions
            .as_ref()
            .and_then(|e| e.get("persistedQuery"))
        else {
            if params.query.is_empty() {
                return Err(Rejection::malformed("the request has no \"query\""));
            }
            return Ok(params);
        };
        let hash = hash_of(persisted)?;
        if params.query.is_empty() {
            let text = self.cache.get(&hash).ok_or_else(|| {
                Rejection::new(
                    Stop::Document,
                    code::PERSISTED_QUERY_NOT_FOUND,
                    "PersistedQueryNotFound",
                )
            })?;
            params.query = text.to_string();
            return Ok(params);
        }
        let actual = hex::encode(Sha256::digest(params.query.as_bytes()));
        if actual != hash {
            return Err(Rejection::malformed(
                "provided sha does not match query: extensions.persistedQuery.sha256Hash must \
                 be the SHA-256 of the query, in hexadecimal",
            ));
        }
        if params.query.len() <= max_bytes && !params.document_has_nul() {
            self.cache.insert(hash, Arc::from(params.query.as_str()));
        }
        Ok(params)
    }
}

/// The hash of `extensions.persistedQuery`, lower-cased, once it is checked.
fn hash_of(persisted: &Value) -> Result<String, Rejection> {
    let malformed = |what: &str| Rejection::malformed(format!("extensions.persistedQuery {what}"));
    let Value::Object(persisted) = persisted else {
        return Err(malformed("must be an object { version: 1, sha256Hash }"));
    };
    if persisted.get("version") != Some(&Value::from(1)) {
        return Err(malformed("has version 1 only"));
    }
    match persisted.get("sha256Hash") {
        Some(Value::String(hash))
            if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Ok(hash.to_ascii_lowercase())
        }
        _ => Err(malformed("needs a sha256Hash of 64 hexadecimal digits")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(query: &str, hash: &str) -> Params {
        let extensions = json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } });
        Params {
            query: query.into(),
            extensions: extensions.as_object().cloned(),
            ..Params::default()
        }
    }

    #[test]
    fn a_hash_stands_for_its_document_once_it_was_sent() {
        let persisted = Persisted::default();
        let query = "{ currentPractice { id } }";
        let hash = hex::encode(Sha256::digest(query.as_bytes()));
        let unknown = persisted
            .resolve_within(params("", &hash))
            .expect_err("not known yet");
        assert_eq!(unknown.code, code::PERSISTED_QUERY_NOT_FOUND);
        let wrong = persisted
            .resolve_within(params("{ labels { data { id } } }", &hash))
            .expect_err("another document");
        assert_eq!(wrong.stop, Stop::Malformed);
        assert_eq!(
            persisted
                .resolve_within(params(query, &hash))
                .expect("sent")
                .query,
            query
        );
        assert_eq!(
            persisted
                .resolve_within(params("", &hash.to_uppercase()))
                .expect("known")
                .query,
            query
        );
        assert!(persisted.resolve_within(params("", "abc")).is_err());
    }

    #[test]
    fn a_document_that_cannot_run_is_not_kept() {
        let persisted = Persisted::default();
        for query in [
            "{ a }".repeat(10),
            "{ a(b: \"\0\") }".to_string(),
            "{ a(b: \"\\u0000\") }".to_string(),
        ] {
            let hash = hex::encode(Sha256::digest(query.as_bytes()));
            // Passed on to be refused by the next stage, and not kept.
            let sent = persisted.resolve(params(&query, &hash), 40).expect("sent");
            assert_eq!(sent.query, query);
            let again = persisted
                .resolve(params("", &hash), 40)
                .expect_err("not kept");
            assert_eq!(again.code, code::PERSISTED_QUERY_NOT_FOUND);
        }
    }

    impl Persisted {
        /// Resolves under the default limit on documents.
        fn resolve_within(&self, params: Params) -> Result<Params, Rejection> {
            self.resolve(params, 32 * 1024)
        }
    }
}
