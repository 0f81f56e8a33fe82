//! Variables a request leaves out. The GraphQL specification tells an argument or an input
//! object's field given a variable the request does not provide (declared nullable, without
//! a default) apart from one given null: the first is absent, as if not written, the second
//! is null ("Coercing Field Arguments", "Input Objects: Input Coercion"). async-graphql gives
//! every such variable the value null, and in practice-api's updates null clears a field
//! where absent leaves it: a client that declares `$first: String` and sends only `last`
//! (as a JavaScript client does that drops `undefined` from its JSON) would erase the
//! patient's first name. So before a request runs, each use of such a variable as an
//! argument or an input object's field is taken out of its copy of the document. In a list
//! the specification makes such a variable null, and it stays.

use std::collections::HashSet;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, OperationDefinition, Selection, SelectionSet,
};
use async_graphql::{Name, Variables};
use async_graphql_value::Value;

/// Takes out of `document` every argument and input field whose value is a variable of the
/// operation `chosen` (its name in a document of several; none for one alone) that
/// `variables` leaves out and that has no default, and the variable's definition when
/// nothing uses it any more (validation refuses a variable defined and not used).
pub fn leave_out_absent(
    document: &mut ExecutableDocument,
    chosen: Option<&Name>,
    variables: &Variables,
) {
    let Some(operation) = chosen_operation(document, chosen) else {
        return;
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
        return;
    }
    in_selections(&mut operation.node.selection_set.node, &absent);
    for fragment in document.fragments.values_mut() {
        in_selections(&mut fragment.node.selection_set.node, &absent);
    }
    // What still names one of them: a list's item.
    let mut used = HashSet::new();
    let mut note = |value: &Value| {
        value_names(value, &mut |name| {
            used.insert(name.clone());
        });
    };
    for fragment in document.fragments.values() {
        selection_values(&fragment.node.selection_set.node, &mut note);
    }
    let Some(operation) = chosen_operation(document, chosen) else {
        return;
    };
    selection_values(&operation.node.selection_set.node, &mut note);
    operation.node.variable_definitions.retain(|definition| {
        let name = &definition.node.name.node;
        !absent.contains(name) || used.contains(name)
    });
}

/// The operation `chosen` names (none: the one alone).
fn chosen_operation<'d>(
    document: &'d mut ExecutableDocument,
    chosen: Option<&Name>,
) -> Option<&'d mut async_graphql::Positioned<OperationDefinition>> {
    match (&mut document.operations, chosen) {
        (DocumentOperations::Single(operation), _) => Some(operation),
        (DocumentOperations::Multiple(operations), Some(name)) => operations.get_mut(name),
        (DocumentOperations::Multiple(_), None) => None,
    }
}

/// Calls `note` with each value given to an argument in `selections`, deeply.
fn selection_values(selections: &SelectionSet, note: &mut dyn FnMut(&Value)) {
    for selection in &selections.items {
        let (arguments, directives, inner) = match &selection.node {
            Selection::Field(field) => (
                &field.node.arguments[..],
                &field.node.directives,
                Some(&field.node.selection_set.node),
            ),
            Selection::InlineFragment(fragment) => (
                &[][..],
                &fragment.node.directives,
                Some(&fragment.node.selection_set.node),
            ),
            Selection::FragmentSpread(spread) => (&[][..], &spread.node.directives, None),
        };
        let directive_arguments = directives
            .iter()
            .flat_map(|directive| directive.node.arguments.iter());
        for (_, value) in arguments.iter().chain(directive_arguments) {
            note(&value.node);
        }
        if let Some(inner) = inner {
            selection_values(inner, note);
        }
    }
}

/// Calls `found` with each variable `value` names, deeply.
fn value_names(value: &Value, found: &mut dyn FnMut(&Name)) {
    match value {
        Value::Variable(name) => found(name),
        Value::List(items) => items.iter().for_each(|item| value_names(item, found)),
        Value::Object(fields) => fields.values().for_each(|field| value_names(field, found)),
        _ => {}
    }
}

fn in_selections(selections: &mut SelectionSet, absent: &HashSet<Name>) {
    for selection in &mut selections.items {
        match &mut selection.node {
            Selection::Field(field) => {
                let field = &mut field.node;
                in_arguments(&mut field.arguments, absent);
                for directive in &mut field.directives {
                    in_arguments(&mut directive.node.arguments, absent);
                }
                in_selections(&mut field.selection_set.node, absent);
            }
            Selection::InlineFragment(fragment) => {
                for directive in &mut fragment.node.directives {
                    in_arguments(&mut directive.node.arguments, absent);
                }
                in_selections(&mut fragment.node.selection_set.node, absent);
            }
            Selection::FragmentSpread(spread) => {
                for directive in &mut spread.node.directives {
                    in_arguments(&mut directive.node.arguments, absent);
                }
            }
        }
    }
}

fn in_arguments<N>(
    arguments: &mut Vec<(N, async_graphql::Positioned<Value>)>,
    absent: &HashSet<Name>,
) {
    arguments.retain(|(_, value)| !is_absent(&value.node, absent));
    for (_, value) in arguments {
        in_value(&mut value.node, absent);
    }
}

fn in_value(value: &mut Value, absent: &HashSet<Name>) {
    match value {
        Value::Object(fields) => {
            fields.retain(|_, value| !is_absent(value, absent));
            for value in fields.values_mut() {
                in_value(value, absent);
            }
        }
        // A list's item stays: a variable left out there is null.
        Value::List(items) => {
            for item in items {
                in_value(item, absent);
            }
        }
        _ => {}
    }
}

fn is_absent(value: &Value, absent: &HashSet<Name>) -> bool {
    matches!(value, Value::Variable(name) if absent.contains(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;

    /// What the document's fields are given once the variables `variables` leaves out are
    /// taken out: `field.argument` and `field.argument.key`, the variable each names (or
    /// "-"), in order, through fragments.
    fn given(query: &str, chosen: Option<&str>, variables: serde_json::Value) -> Vec<String> {
        let mut document = parse_query(query).expect("parses");
        let variables = Variables::from_json(variables);
        leave_out_absent(&mut document, chosen.map(Name::new).as_ref(), &variables);
        let mut out = Vec::new();
        let mut sets: Vec<&SelectionSet> = match &document.operations {
            DocumentOperations::Single(operation) => vec![&operation.node.selection_set.node],
            DocumentOperations::Multiple(operations) => operations
                .iter()
                .filter(|(name, _)| Some(name.as_str()) == chosen)
                .map(|(_, operation)| &operation.node.selection_set.node)
                .collect(),
        };
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

    #[test]
    fn a_variable_left_out_takes_its_argument_and_field_with_it() {
        let query = "mutation($id: ID!, $first: String, $last: String, $title: String = \"Dr\") \
                     { updatePatient(id: $id, patientData: { first: $first, last: $last, \
                     title: $title }) { error } updateLabel(id: $id, color: $first) { error } }";
        assert_eq!(
            given(query, None, serde_json::json!({ "id": "p", "last": "Doe" })),
            [
                "updatePatient.id=$id",
                "updatePatient.patientData=-",
                "updatePatient.patientData.last=$last",
                "updatePatient.patientData.title=$title",
                "updateLabel.id=$id",
            ]
        );
        // Its definition goes with its last use: a variable defined and not used is refused.
        let mut document = parse_query(query).expect("parses");
        leave_out_absent(
            &mut document,
            None,
            &Variables::from_json(serde_json::json!({ "id": "p" })),
        );
        let DocumentOperations::Single(operation) = &document.operations else {
            panic!("one operation");
        };
        let defined: Vec<&str> = operation
            .node
            .variable_definitions
            .iter()
            .map(|d| d.node.name.node.as_str())
            .collect();
        assert_eq!(defined, ["id", "title"]);
        // Given, even as null, it stays.
        assert_eq!(
            given(
                query,
                None,
                serde_json::json!({ "id": "p", "first": null, "last": "Doe" })
            )
            .len(),
            7
        );
    }

    #[test]
    fn a_lists_item_stays_and_fragments_follow_the_chosen_operation() {
        let query = "query a($x: ID) { events(after: $x, eventTypes: [$x]) { cursor } ...F } \
                     query b($x: ID!) { patient(id: $x) { id } } \
                     fragment F on Query { patient(id: $x) { id } }";
        assert_eq!(
            given(query, Some("a"), serde_json::json!({})),
            ["events.eventTypes=[1]"]
        );
        // Still named in the list, $x stays defined.
        let mut document = parse_query(query).expect("parses");
        leave_out_absent(&mut document, Some(&Name::new("a")), &Variables::default());
        let DocumentOperations::Multiple(operations) = &document.operations else {
            panic!("two operations");
        };
        assert_eq!(
            operations[&Name::new("a")].node.variable_definitions.len(),
            1
        );
        // b's $x is required: nothing of b is taken out (nor of the fragment, which a
        // request running b does not run).
        assert_eq!(
            given(query, Some("b"), serde_json::json!({})),
            ["patient.id=$x", "patient.id=$x"]
        );
    }
}
