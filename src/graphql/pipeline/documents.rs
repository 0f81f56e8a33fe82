//! Parsed GraphQL documents, kept by their text. Clients send the same few queries over and
//! over with different variables, and parsing is the largest single cost of a small query
//! (a quarter of a `patient(id)` request's instructions, measured with callgrind; see
//! BENCHMARKS.md), so each text is parsed once and its document reused.
//!
//! The cache holds at most [`BUDGET`] bytes of query text, least recently used out first,
//! and never a document longer than [`LARGEST`]: a client sending ever new texts only
//! evicts, and a parsed document is a few times its text's size, so the cache stays within
//! a few megabytes.

use std::sync::Arc;

use async_graphql::ServerError;
use async_graphql::parser::parse_query;
use async_graphql::parser::types::ExecutableDocument;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

/// Bytes of query text the cache holds at most.
const BUDGET: u64 = 1 << 20;

/// The longest query text that is kept.
pub(super) const LARGEST: usize = 8 * 1024;

/// A cache of at most [`BUDGET`] bytes of query text, as `weighter` counts it: the parsed
/// documents', and the documents known to pass validation ([`super::validated`]).
pub(super) fn of_query_texts<K, V, W>(weighter: W) -> Arc<Cache<K, V, W>>
where
    K: Eq + std::hash::Hash,
    V: Clone,
    W: Weighter<K, V> + Clone,
{
    // An estimate of the entries it holds, for the cache's sizing: queries of ~1 KiB.
    let entries = (BUDGET / 1024) as usize;
    Arc::new(Cache::with_weighter(entries, BUDGET, weighter))
}

/// Documents by their text.
#[derive(Clone)]
pub struct Documents {
    cache: Arc<Cache<String, Arc<ExecutableDocument>, TextLength>>,
}

/// Weighs an entry by its text's length.
#[derive(Clone)]
struct TextLength;

impl Weighter<String, Arc<ExecutableDocument>> for TextLength {
    fn weight(&self, text: &String, _: &Arc<ExecutableDocument>) -> u64 {
        text.len() as u64
    }
}

impl Default for Documents {
    fn default() -> Self {
        Documents {
            cache: of_query_texts(TextLength),
        }
    }
}

impl std::fmt::Debug for Documents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Documents")
            .field("entries", &self.cache.len())
            .finish()
    }
}

impl Documents {
    /// The document of `query`, parsed now or earlier; a parse error says what is wrong.
    pub fn parse(&self, query: &str) -> Result<Arc<ExecutableDocument>, ServerError> {
        if let Some(doc) = self.cache.get(query) {
            return Ok(doc);
        }
        let doc = Arc::new(parse_query(query).map_err(ServerError::from)?);
        if query.len() <= LARGEST {
            self.cache.insert(query.to_string(), doc.clone());
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_once_and_reuses() {
        let documents = Documents::default();
        let first = documents
            .parse("{ labels { data { id } } }")
            .expect("parses");
        let second = documents
            .parse("{ labels { data { id } } }")
            .expect("parses");
        assert!(Arc::ptr_eq(&first, &second));
        let other = documents
            .parse("{ patients { data { id } } }")
            .expect("parses");
        assert!(!Arc::ptr_eq(&first, &other));
    }

    #[test]
    fn keeps_no_long_text_and_no_error() {
        let documents = Documents::default();
        let long = format!("{{ {} }}", "labels { data { id } } ".repeat(LARGEST / 20));
        assert!(long.len() > LARGEST);
        documents.parse(&long).expect("a long query still parses");
        assert!(documents.parse("{ labels ").is_err());
        assert_eq!(documents.cache.len(), 0);
    }

    #[test]
    fn stays_within_its_budget() {
        let documents = Documents::default();
        for n in 0..20_000 {
            let query = format!("{{ a{n}: labels {{ data {{ id }} }} }}");
            documents.parse(&query).expect("parses");
        }
        assert!(documents.cache.weight() <= BUDGET);
    }
}
