//! Documents whose validation is known to pass, kept by their text and operation, so that a
//! client sending the same query over and over with new variables has it validated once.
//!
//! async-graphql validates every request's document against the schema with all of the
//! specification's rules, a walk of the document per request that costs about 6 % of a small
//! query's time in the server (`perf record -g`, BENCHMARKS.md). The rules look at the
//! document, and at the variables in one place only: a variable's value is checked against
//! the type of the argument it stands for. So once a document has passed, a later request
//! with the same text, operation and variables that are surely valid for their declared
//! types passes too, and runs on a schema that validates in async-graphql's fast mode (the
//! depth limit still checked). "Surely valid" is kept narrow, stricter than async-graphql's
//! own check: every declared variable given, none null, each a String, ID (as a string), Int
//! (within 32 bits), Float or Boolean, or a list of them. The document must hold one
//! operation: the rules then see every fragment used by it (an unused one fails), and every
//! variable a fragment uses declared by it, in a position its declared type fits; in a
//! document of several operations, a fragment of another one is checked against whatever
//! variables the request sent, declared or not. Any other request, and (to keep the rule
//! plain) any document with a directive, is validated in full, so that its errors are exactly
//! async-graphql's.

use std::sync::Arc;

use async_graphql::parser::types::{
    BaseType, Directive, ExecutableDocument, OperationDefinition, Selection, SelectionSet, Type,
};
use async_graphql::{Positioned, Value, Variables};
use quick_cache::sync::Cache;
use quick_cache::{Equivalent, Weighter};

use super::documents::{LARGEST, of_query_texts};

/// A document's text and the name of the operation chosen in it.
type Key = (String, Option<String>);

/// A [`Key`] looked up without copying the request's text: it hashes as the key does (a
/// `&str` as its `String`, field by field as the tuple).
#[derive(Hash)]
struct KeyOf<'q>(&'q str, Option<&'q str>);

impl Equivalent<Key> for KeyOf<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.0 == key.0 && self.1 == key.1.as_deref()
    }
}

/// Documents that passed validation in full, by text and operation: at most 1 MiB of text,
/// none longer than the parsed documents' cache keeps ([`super::documents`]).
#[derive(Clone)]
pub struct Validated {
    cache: Arc<Cache<Key, (), TextLength>>,
}

/// Weighs an entry by its text's length.
#[derive(Clone)]
struct TextLength;

impl Weighter<Key, ()> for TextLength {
    fn weight(&self, key: &Key, _: &()) -> u64 {
        (key.0.len() + key.1.as_ref().map_or(0, String::len)) as u64
    }
}

impl Default for Validated {
    fn default() -> Self {
        Validated {
            cache: of_query_texts(TextLength),
        }
    }
}

impl std::fmt::Debug for Validated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validated")
            .field("entries", &self.cache.len())
            .finish()
    }
}

/// What a request's validation may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    /// Its document passed before, and its variables are surely valid: validated in
    /// async-graphql's fast mode.
    Known,
    /// Validated in full; if it passes, the document is known from then on.
    Learn,
    /// Validated in full, and not kept (a directive, a variable not surely valid, a long text).
    Full,
}

impl Validated {
    /// How the request of `query` (its document `doc`, operation `definition` named
    /// `operation`) with `variables` is to be validated.
    pub fn validation(
        &self,
        query: &str,
        operation: Option<&str>,
        doc: &ExecutableDocument,
        definition: &OperationDefinition,
        variables: &Variables,
    ) -> Validation {
        if query.len() > LARGEST
            || doc.operations.iter().count() != 1
            || !surely_valid(definition, variables)
        {
            return Validation::Full;
        }
        if self.cache.get(&KeyOf(query, operation)).is_some() {
            return Validation::Known;
        }
        if has_directives(doc) {
            return Validation::Full;
        }
        Validation::Learn
    }

    /// Keeps the document of `query` and `operation` as one that passed validation in full.
    pub fn learn(&self, query: &str, operation: Option<&str>) {
        if query.len() <= LARGEST {
            self.cache
                .insert((query.to_string(), operation.map(str::to_string)), ());
        }
    }
}

/// True when every variable the operation declares is given a value that is surely valid for
/// its declared type (see the module's doc).
fn surely_valid(definition: &OperationDefinition, variables: &Variables) -> bool {
    definition.variable_definitions.iter().all(|def| {
        let def = &def.node;
        def.directives.is_empty()
            && variables
                .get(&def.name.node)
                .is_some_and(|value| surely_of(&def.var_type.node, value))
    })
}

/// True when `value` is surely valid for `ty`: not null, and a built-in scalar of the right
/// kind, or a list of such.
fn surely_of(ty: &Type, value: &Value) -> bool {
    match (&ty.base, value) {
        (_, Value::Null) => false,
        (BaseType::List(item), Value::List(items)) => items.iter().all(|v| surely_of(item, v)),
        (BaseType::List(_), _) => false,
        (BaseType::Named(name), value) => match (name.as_str(), value) {
            ("String" | "ID", Value::String(_)) => true,
            ("Int", Value::Number(n)) => n.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
            ("Float", Value::Number(_)) => true,
            ("Boolean", Value::Boolean(_)) => true,
            _ => false,
        },
    }
}

/// True when the document holds a directive anywhere.
fn has_directives(doc: &ExecutableDocument) -> bool {
    fn any(directives: &[Positioned<Directive>]) -> bool {
        !directives.is_empty()
    }
    fn in_set(set: &SelectionSet) -> bool {
        set.items.iter().any(|item| match &item.node {
            Selection::Field(field) => {
                any(&field.node.directives) || in_set(&field.node.selection_set.node)
            }
            Selection::FragmentSpread(spread) => any(&spread.node.directives),
            Selection::InlineFragment(inline) => {
                any(&inline.node.directives) || in_set(&inline.node.selection_set.node)
            }
        })
    }
    let operations = doc.operations.iter().any(|(_, op)| {
        any(&op.node.directives)
            || op
                .node
                .variable_definitions
                .iter()
                .any(|v| any(&v.node.directives))
            || in_set(&op.node.selection_set.node)
    });
    operations
        || doc.fragments.values().any(|fragment: &Positioned<_>| {
            any(&fragment.node.directives) || in_set(&fragment.node.selection_set.node)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;
    use async_graphql::parser::types::DocumentOperations;

    fn first(doc: &ExecutableDocument) -> &OperationDefinition {
        match &doc.operations {
            DocumentOperations::Single(op) => &op.node,
            DocumentOperations::Multiple(ops) => &ops.values().next().expect("an operation").node,
        }
    }

    fn vars(json: serde_json::Value) -> Variables {
        Variables::from_json(json)
    }

    #[test]
    fn a_document_is_known_once_learnt_and_only_with_surely_valid_variables() {
        let validated = Validated::default();
        let query = "query($id: ID!, $n: Int, $tags: [String!]) { patient(id: $id) { id } }";
        let doc = parse_query(query).expect("parses");
        let op = first(&doc);
        let good = vars(serde_json::json!({"id": "p1", "n": 5, "tags": ["a"]}));
        let validation = |v: &Variables| validated.validation(query, None, &doc, op, v);
        assert_eq!(validation(&good), Validation::Learn);
        validated.learn(query, None);
        assert_eq!(validation(&good), Validation::Known);
        // Another operation name is another key.
        assert_eq!(
            validated.validation(query, Some("Other"), &doc, op, &good),
            Validation::Learn
        );
        for doubtful in [
            serde_json::json!({"id": 1, "n": 5, "tags": ["a"]}),
            serde_json::json!({"id": "p1", "n": 5_000_000_000_i64, "tags": ["a"]}),
            serde_json::json!({"id": "p1", "n": 1.5, "tags": ["a"]}),
            serde_json::json!({"id": "p1", "n": null, "tags": ["a"]}),
            serde_json::json!({"id": "p1", "tags": ["a"]}),
            serde_json::json!({"id": "p1", "n": 5, "tags": "a"}),
            serde_json::json!({"id": "p1", "n": 5, "tags": [null]}),
            serde_json::json!({"id": "p1", "n": 5, "tags": [{"a": 1}]}),
        ] {
            assert_eq!(
                validation(&vars(doubtful.clone())),
                Validation::Full,
                "{doubtful}"
            );
        }
    }

    #[test]
    fn input_objects_enums_and_custom_scalars_are_validated_in_full() {
        let validated = Validated::default();
        for (query, variables) in [
            (
                "query($f: PatientFilter) { patients(filter: $f) { pageInfo { total } } }",
                serde_json::json!({"f": {}}),
            ),
            (
                "query($s: BookingStatus!) { bookings(status: $s) { pageInfo { total } } }",
                serde_json::json!({"s": "CONFIRMED"}),
            ),
            (
                "query($d: Date!) { bookings(date: $d) { pageInfo { total } } }",
                serde_json::json!({"d": "2026-01-01"}),
            ),
        ] {
            let doc = parse_query(query).expect("parses");
            validated.learn(query, None);
            assert_eq!(
                validated.validation(query, None, &doc, first(&doc), &vars(variables)),
                Validation::Full,
                "{query}"
            );
        }
    }

    #[test]
    fn a_document_of_several_operations_is_validated_in_full() {
        // Validating A, async-graphql checks B's fragment against the request's `$p`.
        let query = "query A($s: String!) { patients(search: $s) { pageInfo { page } } } \
                     query B($p: Int!) { ...F } fragment F on Query \
                     { patients(pagination: { page: $p }) { pageInfo { page } } }";
        let doc = parse_query(query).expect("parses");
        let a = match &doc.operations {
            DocumentOperations::Multiple(ops) => &ops.get("A").expect("A").node,
            DocumentOperations::Single(_) => unreachable!("two operations"),
        };
        let validated = Validated::default();
        validated.learn(query, Some("A"));
        let variables = vars(serde_json::json!({"s": "x", "p": "oops"}));
        assert_eq!(
            validated.validation(query, Some("A"), &doc, a, &variables),
            Validation::Full
        );
    }

    #[test]
    fn a_document_with_a_directive_is_never_learnt() {
        let validated = Validated::default();
        let variables = vars(serde_json::json!({"id": "p1", "b": true}));
        for query in [
            "query($id: ID!, $b: Boolean!) { patient(id: $id) { id email @skip(if: $b) } }",
            "query($id: ID!, $b: Boolean!) { patient(id: $id) { ...F @include(if: $b) } } \
             fragment F on Patient { id }",
            "query($id: ID!, $b: Boolean!) { patient(id: $id) { ... @skip(if: $b) { id } } }",
            "query($id: ID!, $b: Boolean!) { patient(id: $id) { ...F } } \
             fragment F on Patient { id email @include(if: $b) }",
            "query($id: ID!, $b: Boolean!) @deprecated { patient(id: $id) { id } }",
        ] {
            let doc = parse_query(query).expect("parses");
            assert_eq!(
                validated.validation(query, None, &doc, first(&doc), &variables),
                Validation::Full,
                "{query}"
            );
        }
    }
}
