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
//! With each document is kept what each of its operations that requests ran costs, where no
//! variable decides it ([`limits::measure_noting`]): a request that sends the text again is
//! not walked through. Only an operation a request chose is measured, once, by that request,
//! so a document of many operations costs no more than it did.

use std::sync::{Arc, RwLock};

use async_graphql::parser::parse_query;
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{Name, ServerError};
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use super::limits::{self, Measure};

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

/// A parsed document, and the costs of its operations that requests ran, where no variable
/// decides them.
#[derive(Debug)]
pub struct Parsed {
    pub document: Arc<ExecutableDocument>,
    /// The selections (sets and their items) its operations expand to through their
    /// fragments, counted once ([`limits::expanded_selections`]).
    pub expanded: u64,
    /// Measures by the operation's key among named operations (None: the document's only,
    /// anonymous one); at most one for each operation of the document.
    fixed: RwLock<Vec<(Option<Name>, Measure)>>,
}

impl Parsed {
    fn new(document: ExecutableDocument) -> Parsed {
        Parsed {
            expanded: limits::expanded_selections(&document),
            document: Arc::new(document),
            fixed: RwLock::default(),
        }
    }

    /// The measure of the operation under `key`, kept by an earlier request.
    pub fn fixed_measure(&self, key: Option<&Name>) -> Option<Measure> {
        let fixed = self.fixed.read().unwrap_or_else(|e| e.into_inner());
        fixed
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, measure)| *measure)
    }

    /// Keeps the measure of the operation under `key`, which no variable decided
    /// ([`limits::measure_noting`]), for the requests that send the document again.
    pub fn keep_measure(&self, key: Option<&Name>, measure: Measure) {
        let mut fixed = self.fixed.write().unwrap_or_else(|e| e.into_inner());
        if !fixed.iter().any(|(k, _)| k.as_ref() == key) {
            fixed.push((key.cloned(), measure));
        }
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

/// Why a text gives no document: what is wrong, and whether the text is GraphQL at all.
#[derive(Debug)]
pub struct Unparsed {
    /// The parser's message.
    pub message: String,
    /// The text is GraphQL, but breaks a rule of the specification's validation that the
    /// parser checks: an anonymous operation beside another, two operations or fragments of
    /// one name, no operation at all.
    pub invalid: bool,
}

impl Documents {
    /// The document of `query`, parsed now or earlier; why not otherwise.
    pub fn parse(&self, query: &str) -> Result<Arc<Parsed>, Unparsed> {
        if let Some(parsed) = self.cache.get(query) {
            return Ok(parsed);
        }
        let document = parse_query(query).map_err(|error| {
            use async_graphql::parser::Error;
            let invalid = matches!(
                error,
                Error::MultipleOperations { .. }
                    | Error::OperationDuplicated { .. }
                    | Error::FragmentDuplicated { .. }
                    | Error::MissingOperation
            );
            Unparsed {
                message: ServerError::from(error).message,
                invalid,
            }
        })?;
        let parsed = Arc::new(Parsed::new(document));
        if query.len() <= LARGEST {
            self.cache.insert(query.to_string(), parsed.clone());
        }
        Ok(parsed)
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
        assert!(Arc::ptr_eq(&first.document, &second.document));
        let other = documents
            .parse("{ patients { data { id } } }")
            .expect("parses");
        assert!(!Arc::ptr_eq(&first.document, &other.document));
    }

    #[test]
    fn keeps_no_long_text_and_no_error() {
        let documents = Documents::default();
        let long = format!("{{ {} }}", "labels { data { id } } ".repeat(LARGEST / 20));
        assert!(long.len() > LARGEST);
        documents.parse(&long).expect("a long query still parses");
        assert!(
            !documents
                .parse("{ labels ")
                .expect_err("not GraphQL")
                .invalid
        );
        for invalid in [
            "{ labels { data { id } } } mutation { signOut }",
            "query a { labels { data { id } } } query a { currentUser { id } }",
            "fragment f on Query { labels { data { id } } }",
        ] {
            assert!(
                documents.parse(invalid).expect_err(invalid).invalid,
                "{invalid}"
            );
        }
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

    #[test]
    fn keeps_the_measure_of_each_operation_once() {
        let documents = Documents::default();
        let query = "query A { labels { data { id } } } query B { locations { id } }";
        let parsed = documents.parse(query).expect("parses");
        let (a, b) = (Name::new("A"), Name::new("B"));
        assert_eq!(parsed.fixed_measure(Some(&a)), None);
        let measure = Measure {
            cost: 51,
            ..Measure::default()
        };
        parsed.keep_measure(Some(&a), measure);
        // The next request finds it with the document, under its operation only.
        let again = documents.parse(query).expect("parses");
        assert_eq!(again.fixed_measure(Some(&a)), Some(measure));
        assert_eq!(again.fixed_measure(Some(&b)), None);
        assert_eq!(again.fixed_measure(None), None);
        // Kept once: a second keep of the same operation changes nothing.
        again.keep_measure(Some(&a), Measure::default());
        assert_eq!(again.fixed_measure(Some(&a)), Some(measure));
    }
}
