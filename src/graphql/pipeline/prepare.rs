//! The first stage: the document read once. It is checked for what can be told from its text
//! (NUL characters, length, bracket nesting), parsed (or found parsed), its operation chosen
//! by the GraphQL rules, and measured against the query limits; every later stage takes the
//! result instead of looking at the document again.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field, OperationDefinition, OperationType, Selection,
    SelectionSet,
};
use async_graphql::{Name, Positioned};
use serde_json::{Value, json};

use super::documents::Documents;
use super::limits::{self, Exceeded, Limits, Measure, Shapes};
use super::params::Params;
use super::rejection::{Rejection, Stop};
use crate::auth::{Guard, OperationKind, guard_of};
use crate::graphql::error::code;

/// A request ready to run: its document parsed, its operation chosen and measured.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub query: String,
    pub variables: async_graphql::Variables,
    pub extensions: serde_json::Map<String, Value>,
    pub document: Arc<ExecutableDocument>,
    pub operation: Operation,
    pub measure: Measure,
    /// What the response's `extensions.cost` says: the query's cost and the limit.
    pub cost: Value,
    /// The chosen operation's key in a document of named operations.
    chosen: Option<Name>,
}

/// The operation a request runs, as the stages after this one need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Its name, when it has one.
    pub name: Option<String>,
    pub kind: OperationKind,
    /// True when every root field takes no token (signIn, setPassword, createFirstAdmin:
    /// `Guard::Public`).
    pub public_only: bool,
    /// How many such fields the operation holds, through fragments too.
    pub public_fields: usize,
    /// The root fields, by response key (an alias, or the field's name), through fragments.
    pub roots: HashMap<String, String>,
}

impl Prepared {
    pub fn kind(&self) -> OperationKind {
        self.operation.kind
    }

    /// The chosen operation's definition.
    pub fn definition(&self) -> Option<&Positioned<OperationDefinition>> {
        definition(&self.document, self.chosen.as_ref())
    }

    /// The chosen operation, as a handle that outlives this request's other parts.
    pub fn chosen(&self) -> Chosen {
        Chosen {
            document: self.document.clone(),
            key: self.chosen.clone(),
        }
    }
}

/// The document and which of its operations a request runs.
#[derive(Clone, Debug)]
pub struct Chosen {
    document: Arc<ExecutableDocument>,
    key: Option<Name>,
}

impl Chosen {
    /// The chosen operation's definition.
    pub fn definition(&self) -> Option<&Positioned<OperationDefinition>> {
        definition(&self.document, self.key.as_ref())
    }

    /// The document it is in.
    pub fn document(&self) -> &ExecutableDocument {
        &self.document
    }

    /// Its key in a document of several operations; none for one alone.
    pub fn key(&self) -> Option<&Name> {
        self.key.as_ref()
    }
}

/// Prepares `params` under `limits`, parsing through `documents`, measuring by the schema's
/// `shapes`.
pub fn prepare(
    params: Params,
    documents: &Documents,
    limits: &Limits,
    shapes: &Shapes,
) -> Result<Prepared, Rejection> {
    if params.has_nul() {
        // No database text column can hold U+0000 (PostgreSQL refuses it outright), and no
        // name, note or id of ours contains one: refuse it here, the same on every engine.
        return Err(Rejection::bad_input(
            "text must not contain NUL characters (U+0000)",
        ));
    }
    if params.query.len() > limits.max_document_bytes {
        return Err(Rejection::too_complex(&Exceeded {
            limit: "documentBytes",
            value: params.query.len() as u64,
            max: limits.max_document_bytes as u64,
        }));
    }
    let nesting = limits::bracket_nesting(&params.query);
    if nesting > limits::MAX_BRACKET_NESTING {
        return Err(Rejection::too_complex(&Exceeded {
            limit: "depth",
            value: nesting as u64,
            max: limits::MAX_BRACKET_NESTING as u64,
        }));
    }
    let parsed = documents.parse(&params.query).map_err(|e| {
        let code = match e.invalid {
            true => code::GRAPHQL_VALIDATION_FAILED,
            false => code::GRAPHQL_PARSE_FAILED,
        };
        Rejection::new(Stop::Document, code, e.message)
    })?;
    let document = parsed.document.clone();
    if parsed.expanded > limits::MAX_EXPANDED_SELECTIONS {
        return Err(Rejection::too_complex(&Exceeded {
            limit: "selections",
            value: parsed.expanded,
            max: limits::MAX_EXPANDED_SELECTIONS,
        }));
    }
    let name = params.operation_name.clone();
    let (chosen, definition) = choose(&document, name.as_deref()).map_err(|message| {
        Rejection::new(Stop::Document, code::GRAPHQL_VALIDATION_FAILED, message)
    })?;
    let chosen = chosen.cloned();
    let operation = Operation::of(name, definition, &document);
    if operation.public_fields > 1 {
        // Aliases must not multiply password (or link) guesses.
        return Err(Rejection::bad_input(
            "send one signIn, setPassword or createFirstAdmin per request",
        ));
    }
    let variables =
        async_graphql::Variables::from_json(Value::Object(params.variables.unwrap_or_default()));
    // Measured by the first request that runs the operation; kept for the next ones when no
    // variable decided it.
    let measure = match parsed.fixed_measure(chosen.as_ref()) {
        Some(measure) => measure,
        None => {
            let (measure, read_variables) =
                limits::measure_noting(shapes, &document, definition, &variables);
            if !read_variables {
                parsed.keep_measure(chosen.as_ref(), measure);
            }
            measure
        }
    };
    let cost = json!({ "requested": measure.cost, "limit": limits.max_cost });
    limits
        .check(&measure)
        .map_err(|exceeded| Rejection::too_complex(&exceeded).with_cost(cost.clone()))?;
    Ok(Prepared {
        query: params.query,
        variables,
        extensions: params.extensions.unwrap_or_default(),
        document,
        operation,
        measure,
        cost,
        chosen,
    })
}

/// The definition of the operation of `document` under `key` (None: its only, anonymous one).
fn definition<'d>(
    document: &'d ExecutableDocument,
    key: Option<&Name>,
) -> Option<&'d Positioned<OperationDefinition>> {
    match (&document.operations, key) {
        (DocumentOperations::Single(operation), _) => Some(operation),
        (DocumentOperations::Multiple(operations), Some(key)) => operations.get(key),
        (DocumentOperations::Multiple(_), None) => None,
    }
}

/// The operation a request runs, by the GraphQL rules ("GetOperation"): the one named, or the
/// document's only one; with its key among named operations. The messages are async-graphql's,
/// which checks again as it runs.
fn choose<'d>(
    document: &'d ExecutableDocument,
    name: Option<&str>,
) -> Result<(Option<&'d Name>, &'d Positioned<OperationDefinition>), String> {
    let unknown = |name: &str| format!("Unknown operation named \"{name}\"");
    match (&document.operations, name) {
        (DocumentOperations::Multiple(operations), Some(name)) => operations
            .get_key_value(name)
            .map(|(key, operation)| (Some(key), operation))
            .ok_or_else(|| unknown(name)),
        (DocumentOperations::Single(_), Some(name)) => Err(unknown(name)),
        (DocumentOperations::Single(operation), None) => Ok((None, operation)),
        (DocumentOperations::Multiple(operations), None) if operations.len() == 1 => operations
            .iter()
            .next()
            .map(|(key, operation)| (Some(key), operation))
            .ok_or_else(|| "Operation name required in request.".into()),
        (DocumentOperations::Multiple(_), None) => {
            Err("Operation name required in request.".into())
        }
    }
}

impl Operation {
    /// The operation's name as metrics label it: its one root field, "multiple", or
    /// "unknown" for a field the schema does not have (the label set stays the schema's).
    pub fn metric_name(&self) -> &'static str {
        let mut fields = self.roots.values();
        match (fields.next(), fields.next()) {
            (Some(field), None) => crate::auth::OPERATIONS
                .iter()
                .find(|(kind, name, _)| *kind == self.kind && name == field)
                .map_or("unknown", |(_, name, _)| name),
            (Some(_), Some(_)) => "multiple",
            (None, _) => "none",
        }
    }

    fn of(
        name: Option<String>,
        definition: &Positioned<OperationDefinition>,
        document: &ExecutableDocument,
    ) -> Operation {
        let kind = match definition.node.ty {
            OperationType::Query => OperationKind::Query,
            OperationType::Mutation => OperationKind::Mutation,
            OperationType::Subscription => OperationKind::Subscription,
        };
        let selection = &definition.node.selection_set.node;
        let is_public = |name: &str| guard_of(kind, name) == Some(Guard::Public);
        let public_only = !selection.items.is_empty()
            && selection.items.iter().all(|item| match &item.node {
                Selection::Field(field) => is_public(&field.node.name.node),
                // Fragments could hide other fields: they need a token.
                _ => false,
            });
        let mut public_fields = 0;
        let mut roots = HashMap::new();
        for_each_root_field(selection, document, &mut |field| {
            let field_name = field.name.node.as_str();
            public_fields += usize::from(is_public(field_name));
            roots.insert(
                field.response_key().node.to_string(),
                field_name.to_string(),
            );
        });
        Operation {
            name,
            kind,
            public_only,
            public_fields,
            roots,
        }
    }
}

/// Calls `visit` with each root field of a selection, through fragments, each fragment once
/// (the document is not validated yet, so a fragment may even spread itself).
fn for_each_root_field<'d>(
    selection: &'d SelectionSet,
    document: &'d ExecutableDocument,
    visit: &mut impl FnMut(&'d Field),
) {
    fn walk<'d>(
        selection: &'d SelectionSet,
        document: &'d ExecutableDocument,
        seen: &mut Vec<&'d str>,
        visit: &mut impl FnMut(&'d Field),
    ) {
        for item in &selection.items {
            match &item.node {
                Selection::Field(field) => visit(&field.node),
                Selection::InlineFragment(inline) => {
                    walk(&inline.node.selection_set.node, document, seen, visit);
                }
                Selection::FragmentSpread(spread) => {
                    let name = spread.node.fragment_name.node.as_str();
                    if seen.contains(&name) {
                        continue;
                    }
                    seen.push(name);
                    if let Some(fragment) = document.fragments.get(&spread.node.fragment_name.node)
                    {
                        walk(&fragment.node.selection_set.node, document, seen, visit);
                    }
                }
            }
        }
    }
    walk(selection, document, &mut Vec::new(), visit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(query: &str, name: Option<&str>) -> Result<Prepared, Rejection> {
        let params = Params {
            query: query.into(),
            operation_name: name.map(str::to_string),
            ..Params::default()
        };
        let shapes = Shapes::of_sdl(&crate::graphql::sdl());
        prepare(params, &Documents::default(), &Limits::default(), &shapes)
    }

    fn operation(query: &str, name: Option<&str>) -> Operation {
        prepared(query, name).expect("prepares").operation
    }

    #[test]
    fn a_kept_document_is_measured_again_where_its_variables_weigh() {
        let documents = Documents::default();
        let shapes = Shapes::of_sdl(&crate::graphql::sdl());
        let query = "query($n: Int, $id: ID!) { patient(id: $id) { id } \
                     patients(pagination: { pageSize: $n }) { data { id } } }";
        let cost = |n: u64| {
            let params = Params {
                query: query.into(),
                variables: serde_json::json!({ "n": n, "id": "x" })
                    .as_object()
                    .cloned(),
                ..Params::default()
            };
            prepare(params, &documents, &Limits::default(), &shapes)
                .expect("prepares")
                .measure
                .cost
        };
        // patient(1) + id(1), then patients(1) + n × (data(1) + id(1)); the second and third
        // requests find the document kept, but not its measure.
        assert_eq!(cost(10), 2 + 1 + 10 * 2);
        assert_eq!(cost(40), 2 + 1 + 40 * 2);
        assert_eq!(cost(10), 2 + 1 + 10 * 2);
        let parsed = documents.parse(query).expect("kept");
        assert_eq!(parsed.fixed_measure(None), None);
    }

    #[test]
    fn a_measure_no_variable_decides_is_kept_for_the_operation_that_ran() {
        let documents = Documents::default();
        let shapes = Shapes::of_sdl(&crate::graphql::sdl());
        let query = "query A($id: ID!) { patient(id: $id) { id } } \
                     query B { labels { data { id } } }";
        let prepare_a = |id: &str| {
            let params = Params {
                query: query.into(),
                operation_name: Some("A".into()),
                variables: serde_json::json!({ "id": id }).as_object().cloned(),
                ..Params::default()
            };
            prepare(params, &documents, &Limits::default(), &shapes).expect("prepares")
        };
        let first = prepare_a("x").measure;
        let parsed = documents.parse(query).expect("kept");
        // Only the operation that ran was measured, and its measure is kept.
        assert_eq!(parsed.fixed_measure(Some(&Name::new("A"))), Some(first));
        assert_eq!(parsed.fixed_measure(Some(&Name::new("B"))), None);
        assert_eq!(prepare_a("y").measure, first);
        assert_eq!(first.cost, 2);
        // A kept measure is what the next request gets, without walking the document.
        let kept = Measure { cost: 999, ..first };
        let text = "query($id: ID!) { patient(id: $id) { firstName } }";
        documents
            .parse(text)
            .expect("parses")
            .keep_measure(None, kept);
        let params = Params {
            query: text.into(),
            variables: serde_json::json!({ "id": "x" }).as_object().cloned(),
            ..Params::default()
        };
        let prepared = prepare(params, &documents, &Limits::default(), &shapes).expect("prepares");
        assert_eq!(prepared.measure, kept);
    }

    #[test]
    fn only_sign_in_goes_without_token() {
        let op = operation(
            "mutation { signIn(email: \"a\", password: \"b\") { token } }",
            None,
        );
        assert_eq!(
            (op.kind, op.public_only, op.public_fields),
            (OperationKind::Mutation, true, 1)
        );
        let aliased = prepared(
            "mutation { a: signIn(email: \"a\", password: \"b\") { token } \
             ...F ... on Mutation { c: signIn(email: \"a\", password: \"c\") { token } } } \
             fragment F on Mutation { b: signIn(email: \"a\", password: \"d\") { token } ...F }",
            None,
        )
        .expect_err("three signIns");
        assert_eq!(
            aliased.message,
            "send one signIn, setPassword or createFirstAdmin per request"
        );
        let mixed = operation(
            "mutation { signIn(email: \"a\", password: \"b\") { token } signOut }",
            None,
        );
        assert!(!mixed.public_only);
        assert!(!operation("query { signIn }", None).public_only);
        let fragment = operation("mutation { ...F } fragment F on Mutation { signOut }", None);
        assert!(!fragment.public_only);
        let link = operation(
            "mutation { setPassword(setPasswordToken: \"t\", password: \"p\") { token } }",
            None,
        );
        assert!(link.public_only);
        prepared(
            "mutation { setPassword(setPasswordToken: \"t\", password: \"p\") { token } \
             signIn(email: \"a\", password: \"b\") { token } }",
            None,
        )
        .expect_err("two public fields");
    }

    #[test]
    fn chooses_the_operation_by_the_rules() {
        let doc = "query A { patients { pageInfo { page } } } mutation B { signOut }";
        assert_eq!(operation(doc, Some("B")).kind, OperationKind::Mutation);
        assert_eq!(operation(doc, Some("A")).kind, OperationKind::Query);
        let unnamed = prepared(doc, None).expect_err("two operations, no name");
        assert_eq!(unnamed.message, "Operation name required in request.");
        assert_eq!(unnamed.code, code::GRAPHQL_VALIDATION_FAILED);
        assert_eq!(
            prepared(doc, Some("C")).expect_err("no C").message,
            "Unknown operation named \"C\""
        );
        assert!(prepared("{ a }", Some("A")).is_err());
    }

    #[test]
    fn names_the_root_fields_by_response_key() {
        let op = operation(
            "{ p: patient(id: \"1\") { id } ...F } fragment F on Query { patients { pageInfo { page } } }",
            None,
        );
        assert_eq!(op.roots.get("p").map(String::as_str), Some("patient"));
        assert_eq!(
            op.roots.get("patients").map(String::as_str),
            Some("patients")
        );
    }

    #[test]
    fn refuses_what_the_text_shows() {
        let nul = prepared("{ a(b: \"\\u0000\") }", None).expect_err("NUL");
        assert_eq!(nul.code, code::BAD_USER_INPUT);
        let deep = format!("{}{}", "{ a ".repeat(200), "}".repeat(200));
        assert_eq!(
            prepared(&deep, None).expect_err("deep").detail("limit"),
            Some(&json!("depth"))
        );
        assert_eq!(
            prepared("{ a ", None).expect_err("bad").code,
            code::GRAPHQL_PARSE_FAILED
        );
    }
}
