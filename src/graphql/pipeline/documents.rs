//! Parsed GraphQL documents, kept by their text. Clients send the same few queries over and
//! over with different variables, and parsing is the largest single cost of a small query
//! (a quarter of a `patient(id)` request's instructions, measured with callgrind; see
//! BENCHMARKS.md), so each text is parsed once and its document reused.
//!
//! The cache holds at most [`BUDGET`] bytes of query text, least recently used out first,
//! and never a document longer than [`LARGEST`]: a client sending ever new texts only
//! evicts, and a parsed document is a few times its text's size, so the cache stays within
//! a few megabytes.
//!
//! With each document is kept what each of its operations costs when no variable decides it
//! ([`limits::fixed_measure`]): a request that sends the text again is not walked through.

use std::sync::Arc;

use async_graphql::parser::parse_query;
use async_graphql::parser::types::{DocumentOperations, ExecutableDocument};
use async_graphql::{Name, ServerError};
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use super::limits::{self, Measure, Shapes};

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

/// A parsed document, and its operations' costs where no variable decides them.
#[derive(Debug)]
pub struct Parsed {
    pub document: Arc<ExecutableDocument>,
    /// Each operation's measure when it is the same whatever the variables, by its key
    /// among named operations (None: the document's only, anonymous one). Only for a kept
    /// document: one parsed for a single request is measured by that request.
    fixed: Vec<(Option<Name>, Measure)>,
}

impl Parsed {
    /// The measure of the operation under `key`, when no variable decides it.
    pub fn fixed_measure(&self, key: Option<&Name>) -> Option<Measure> {
        self.fixed
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, measure)| *measure)
    }

    /// `document` with the fixed measures of its operations, for `shapes`.
    fn kept(document: Arc<ExecutableDocument>, shapes: &Shapes) -> Parsed {
        let fixed = match &document.operations {
            DocumentOperations::Single(op) => limits::fixed_measure(shapes, &document, op)
                .map(|m| (None, m))
                .into_iter()
                .collect(),
            DocumentOperations::Multiple(ops) => ops
                .iter()
                .filter_map(|(key, op)| {
                    limits::fixed_measure(shapes, &document, op).map(|m| (Some(key.clone()), m))
                })
                .collect(),
        };
        Parsed { document, fixed }
    }
}

/// Documents by their text.
#[derive(Clone)]
pub struct Documents {
    cache: Arc<Cache<String, Arc<Parsed>, TextLength>>,
}

/// Weighs an entry by its text's length.
#[derive(Clone)]
struct TextLength;

impl Weighter<String, Arc<Parsed>> for TextLength {
    fn weight(&self, text: &String, _: &Arc<Parsed>) -> u64 {
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
    /// The document of `query`, parsed now or earlier (its fixed costs measured by `shapes`
    /// when it is kept); a parse error says what is wrong.
    pub fn parse(&self, query: &str, shapes: &Shapes) -> Result<Arc<Parsed>, ServerError> {
        if let Some(parsed) = self.cache.get(query) {
            return Ok(parsed);
        }
        let document = Arc::new(parse_query(query).map_err(ServerError::from)?);
        if query.len() > LARGEST {
            return Ok(Arc::new(Parsed {
                document,
                fixed: Vec::new(),
            }));
        }
        let parsed = Arc::new(Parsed::kept(document, shapes));
        self.cache.insert(query.to_string(), parsed.clone());
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes() -> &'static Shapes {
        static SHAPES: std::sync::LazyLock<Shapes> =
            std::sync::LazyLock::new(|| Shapes::of_sdl(&crate::graphql::sdl()));
        &SHAPES
    }

    #[test]
    fn parses_once_and_reuses() {
        let documents = Documents::default();
        let first = documents
            .parse("{ labels { data { id } } }", shapes())
            .expect("parses");
        let second = documents
            .parse("{ labels { data { id } } }", shapes())
            .expect("parses");
        assert!(Arc::ptr_eq(&first.document, &second.document));
        let other = documents
            .parse("{ patients { data { id } } }", shapes())
            .expect("parses");
        assert!(!Arc::ptr_eq(&first.document, &other.document));
    }

    #[test]
    fn keeps_no_long_text_and_no_error() {
        let documents = Documents::default();
        let long = format!("{{ {} }}", "labels { data { id } } ".repeat(LARGEST / 20));
        assert!(long.len() > LARGEST);
        documents
            .parse(&long, shapes())
            .expect("a long query still parses");
        assert!(documents.parse("{ labels ", shapes()).is_err());
        assert_eq!(documents.cache.len(), 0);
    }

    #[test]
    fn stays_within_its_budget() {
        let documents = Documents::default();
        for n in 0..20_000 {
            let query = format!("{{ a{n}: labels {{ data {{ id }} }} }}");
            documents.parse(&query, shapes()).expect("parses");
        }
        assert!(documents.cache.weight() <= BUDGET);
    }

    #[test]
    fn keeps_each_operations_cost_unless_a_variable_decides_it() {
        let documents = Documents::default();
        let fixed = documents
            .parse(
                "query($id: ID!) { patient(id: $id) { firstName } }",
                shapes(),
            )
            .expect("parses");
        let measure = fixed
            .fixed_measure(None)
            .expect("no variable weighs anything");
        assert_eq!(measure.cost, 2);
        let paged = documents
            .parse(
                "query($n: Int) { patients(pagination: { pageSize: $n }) { data { id } } }",
                shapes(),
            )
            .expect("parses");
        assert_eq!(paged.fixed_measure(None), None);
        let named = documents
            .parse(
                "query A { labels { data { id } } } \
                 query B($s: String) { patients(search: $s) { data { id } } }",
                shapes(),
            )
            .expect("parses");
        let a = Name::new("A");
        assert_eq!(
            named.fixed_measure(Some(&a)).map(|m| m.cost),
            Some(1 + 25 * 2)
        );
        assert_eq!(named.fixed_measure(Some(&Name::new("B"))), None);
        assert_eq!(named.fixed_measure(None), None);
        // A text too long to keep is measured by each request.
        let long = format!("{{ {} }}", "labels { data { id } } ".repeat(LARGEST / 20));
        let parsed = documents.parse(&long, shapes()).expect("parses");
        assert_eq!(parsed.fixed_measure(None), None);
    }
}
