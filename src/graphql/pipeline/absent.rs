//! Variables a request leaves out. The GraphQL specification tells an argument or an input
//! object's field given a variable the request does not provide (declared nullable, without
//! a default) apart from one given null: the first is absent, as if not written, the second
//! is null ("Coercing Field Arguments", "Input Objects: Input Coercion"). async-graphql gives
//! every such variable the value null, and in practice-api's updates null clears a field
//! where absent leaves it: a client that declares `$first: String` and sends only `last`
//! (as a JavaScript client does that drops `undefined` from its JSON) would erase the
//! patient's first name. So a query or mutation that leaves such a variable out runs on a
//! copy of its document from which each use of it as an argument or an input object's field
//! is taken out. In a list the specification makes such a variable null, and it stays.
//!
//! The copy holds the chosen operation alone, with the fragments it reaches: taken out of a
//! fragment another operation shares, a use would leave that operation's variable unused,
//! which validation refuses. And it is the document as sent that must pass validation first
//! (`execute::Schemas::check`): a use taken out could hide an error in it (an unknown
//! argument, a variable of the wrong type), which the document is refused for whatever the
//! variables.

use std::collections::{HashMap, HashSet};

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Selection, SelectionSet,
};
use async_graphql::{Name, Positioned, Variables};
use async_graphql_value::Value;

/// The copy of `document` to run, when the operation `chosen` (its name in a document of
/// several; none for one alone) uses variables that `variables` leaves out and that have no
/// default: the operation alone with the fragments it reaches, without those uses as
/// arguments or input fields, nor the definitions of those variables nothing uses any more
/// (validation refuses a variable defined and not used). None when it leaves none out.
pub fn leave_out_absent(
    document: &ExecutableDocument,
    chosen: Option<&Name>,
    variables: &Variables,
) -> Option<ExecutableDocument> {
    let operation = match (&document.operations, chosen) {
        (DocumentOperations::Single(operation), _) => operation,
        (DocumentOperations::Multiple(operations), Some(name)) => operations.get(name)?,
        (DocumentOperations::Multiple(_), None) => return None,
    };
    let absent: HashSet<Name> = operation
        .node
        .variable_definitions
        .iter()
        .map(|definition| &definition.node)
        .filter(|definition| {
            definition.default_value.is_none()
                && definition.var_type.node.nullable
                && !variables.contains_key(&definition.name.node)
        })
        .map(|definition| definition.name.node.clone())
        .collect();
    if absent.is_empty() {
        return None;
    }
    let mut operation = operation.clone();
    let mut fragments = HashMap::new();
    let mut next = spreads(&operation.node.selection_set.node);
    while let Some(name) = next.pop() {
        if fragments.contains_key(&name) {
            continue;
        }
        if let Some(fragment) = document.fragments.get(&name) {
            next.extend(spreads(&fragment.node.selection_set.node));
            fragments.insert(name, fragment.clone());
        }
    }
    let mut leave_out = LeaveOut {
        absent: &absent,
        used: HashSet::new(),
    };
    leave_out.selections(&mut operation.node.selection_set.node);
    for fragment in fragments.values_mut() {
        leave_out.selections(&mut fragment.node.selection_set.node);
    }
    // A definition stays while something still names it (a list's item).
    let used = leave_out.used;
    operation.node.variable_definitions.retain(|definition| {
        let name = &definition.node.name.node;
        !absent.contains(name) || used.contains(name)
    });
    let operations = match chosen {
        // A request that names its operation finds it by name.
        Some(name) => DocumentOperations::Multiple(HashMap::from([(name.clone(), operation)])),
        None => DocumentOperations::Single(operation),
    };
    Some(ExecutableDocument {
        operations,
        fragments,
    })
}

/// The fragments `selections` spreads, at any depth short of another fragment.
fn spreads(selections: &SelectionSet) -> Vec<Name> {
    let mut out = Vec::new();
    for selection in &selections.items {
        match &selection.node {
            Selection::Field(field) => out.extend(spreads(&field.node.selection_set.node)),
            Selection::InlineFragment(fragment) => {
                out.extend(spreads(&fragment.node.selection_set.node));
            }
            Selection::FragmentSpread(spread) => {
                out.push(spread.node.fragment_name.node.clone());
            }
        }
    }
    out
}

/// Takes the uses of the variables `absent` names out of a document's selections, and
/// notes, as it goes, which variables the values it keeps still name (`used`).
struct LeaveOut<'a> {
    absent: &'a HashSet<Name>,
    used: HashSet<Name>,
}

impl LeaveOut<'_> {
    fn selections(&mut self, selections: &mut SelectionSet) {
        for selection in &mut selections.items {
            let (arguments, directives, inner) = match &mut selection.node {
                Selection::Field(field) => {
                    let field = &mut field.node;
                    (
                        Some(&mut field.arguments),
                        &mut field.directives,
                        Some(&mut field.selection_set.node),
                    )
                }
                Selection::InlineFragment(fragment) => {
                    let fragment = &mut fragment.node;
                    (
                        None,
                        &mut fragment.directives,
                        Some(&mut fragment.selection_set.node),
                    )
                }
                Selection::FragmentSpread(spread) => (None, &mut spread.node.directives, None),
            };
            if let Some(arguments) = arguments {
                self.arguments(arguments);
            }
            for directive in directives {
                self.arguments(&mut directive.node.arguments);
            }
            if let Some(inner) = inner {
                self.selections(inner);
            }
        }
    }

    fn arguments<N>(&mut self, arguments: &mut Vec<(N, Positioned<Value>)>) {
        arguments.retain(|(_, value)| !self.is_absent(&value.node));
        for (_, value) in arguments {
            self.value(&mut value.node);
        }
    }

    fn value(&mut self, value: &mut Value) {
        match value {
            Value::Variable(name) => {
                self.used.insert(name.clone());
            }
            Value::Object(fields) => {
                fields.retain(|_, value| !self.is_absent(value));
                for value in fields.values_mut() {
                    self.value(value);
                }
            }
            // A list's item stays: a variable left out there is null.
            Value::List(items) => {
                for item in items {
                    self.value(item);
                }
            }
            _ => {}
        }
    }

    fn is_absent(&self, value: &Value) -> bool {
        matches!(value, Value::Variable(name) if self.absent.contains(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;

    /// The document a request runs: `query` as sent, or its copy without what `variables`
    /// leaves out.
    fn run(query: &str, chosen: Option<&str>, variables: serde_json::Value) -> ExecutableDocument {
        let document = parse_query(query).expect("parses");
        let chosen = chosen.map(Name::new);
        let variables = Variables::from_json(variables);
        leave_out_absent(&document, chosen.as_ref(), &variables).unwrap_or(document)
    }

    /// What the fields of `document` are given, its operations' and fragments':
    /// `field.argument` and `field.argument.key`, with the variable each names (or "-").
    fn given(document: &ExecutableDocument) -> Vec<String> {
        let mut out = Vec::new();
        let mut sets: Vec<&SelectionSet> = document
            .operations
            .iter()
            .map(|(_, operation)| &operation.node.selection_set.node)
            .collect();
        sets.extend(
            document
                .fragments
                .values()
                .map(|f| &f.node.selection_set.node),
        );
        for set in sets {
            for selection in &set.items {
                let Selection::Field(field) = &selection.node else {
                    continue;
                };
                let field = &field.node;
                for (name, value) in &field.arguments {
                    let at = format!("{}.{}", field.name.node, name.node);
                    let shown = |value: &Value| match value {
                        Value::Variable(v) => format!("${v}"),
                        Value::List(items) => format!("[{}]", items.len()),
                        _ => "-".to_string(),
                    };
                    out.push(format!("{at}={}", shown(&value.node)));
                    if let Value::Object(fields) = &value.node {
                        for (key, value) in fields {
                            out.push(format!("{at}.{key}={}", shown(value)));
                        }
                    }
                }
            }
        }
        out
    }

    /// The variables the operations of `document` define.
    fn defined(document: &ExecutableDocument) -> Vec<String> {
        document
            .operations
            .iter()
            .flat_map(|(_, operation)| operation.node.variable_definitions.iter())
            .map(|d| d.node.name.node.to_string())
            .collect()
    }

    #[test]
    fn a_variable_left_out_takes_its_argument_field_and_definition_with_it() {
        let query = "mutation($id: ID!, $first: String, $last: String, $title: String = \"Dr\") \
                     { updatePatient(id: $id, patientData: { first: $first, last: $last, \
                     title: $title }) { error } updateLabel(id: $id, color: $first) { error } }";
        let document = run(query, None, serde_json::json!({ "id": "p", "last": "Doe" }));
        assert_eq!(
            given(&document),
            [
                "updatePatient.id=$id",
                "updatePatient.patientData=-",
                "updatePatient.patientData.last=$last",
                "updatePatient.patientData.title=$title",
                "updateLabel.id=$id",
            ]
        );
        assert_eq!(defined(&document), ["id", "last", "title"]);
        // Given, even as null, it stays; every variable given, the document is not copied.
        let sent = serde_json::json!({ "id": "p", "first": null, "last": "Doe" });
        assert_eq!(given(&run(query, None, sent.clone())).len(), 7);
        let document = parse_query(query).expect("parses");
        assert!(leave_out_absent(&document, None, &Variables::from_json(sent)).is_none());
    }

    #[test]
    fn the_copy_holds_the_operation_and_what_it_reaches() {
        // b shares F with a, and defines the $x a's list names: taken out of F for a, a use
        // would leave b's $x unused (validation looks at every operation of the document).
        let query = "query a($x: ID) { events(after: $x, eventTypes: [$x]) { cursor } ...F } \
                     query b($x: ID) { ...F ...G } \
                     fragment F on Query { patient(id: $x) { id } } \
                     fragment G on Query { labels { data { id } } }";
        let document = run(query, Some("a"), serde_json::json!({}));
        assert_eq!(given(&document), ["events.eventTypes=[1]"]);
        assert_eq!(document.operations.iter().count(), 1, "a alone");
        let fragments: Vec<&str> = document.fragments.keys().map(|k| k.as_str()).collect();
        assert_eq!(fragments, ["F"], "what a reaches");
        // Still named in the list, $x stays defined.
        assert_eq!(defined(&document), ["x"]);
        // Run by b with $x given, the document is as sent.
        let document = run(query, Some("b"), serde_json::json!({ "x": "p" }));
        assert_eq!(document.operations.iter().count(), 2);
    }
}
