//! Puts response fields in the order the query selected them. async-graphql 7 resolves a
//! selection's fields concurrently and writes each as it completes, so a field that waits on
//! the database can land after its later siblings; the GraphQL specification wants the
//! selection's order, and clients that compare responses as text rely on it.

use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use serde_json::{Map, Value};

/// Reorders `data` by `selection`, the operation's selection set in `doc`.
pub fn in_selection_order(data: &mut Value, selection: &SelectionSet, doc: &ExecutableDocument) {
    order(data, selection, doc);
}

fn order(value: &mut Value, selection: &SelectionSet, doc: &ExecutableDocument) {
    match value {
        Value::Array(items) => {
            for item in items {
                order(item, selection, doc);
            }
        }
        Value::Object(map) => {
            let mut unplaced = std::mem::take(map);
            place(&mut unplaced, map, selection, doc);
            // Anything the selection does not name (there should be nothing) goes last.
            map.extend(unplaced);
        }
        _ => {}
    }
}

/// Moves the fields `selection` names from `from` to `to`, in its order, recursively.
fn place(
    from: &mut Map<String, Value>,
    to: &mut Map<String, Value>,
    selection: &SelectionSet,
    doc: &ExecutableDocument,
) {
    for item in &selection.items {
        match &item.node {
            Selection::Field(field) => {
                let key = field.node.response_key().node.as_str();
                if let Some(mut value) = from.remove(key) {
                    order(&mut value, &field.node.selection_set.node, doc);
                    to.insert(key.to_string(), value);
                }
            }
            Selection::FragmentSpread(spread) => {
                if let Some(fragment) = doc.fragments.get(&spread.node.fragment_name.node) {
                    place(from, to, &fragment.node.selection_set.node, doc);
                }
            }
            Selection::InlineFragment(inline) => {
                place(from, to, &inline.node.selection_set.node, doc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;
    use async_graphql::parser::types::DocumentOperations;
    use serde_json::json;

    #[test]
    fn follows_the_selection_through_fragments_and_lists() {
        let doc = parse_query(
            "{ b: patients { data { z a ...F } } a: currentPractice { name id } } \
             fragment F on Patient { m }",
        )
        .expect("parses");
        let mut data = json!({
            "a": { "id": 1, "name": "n" },
            "b": { "data": [{ "m": 1, "a": 2, "z": 3 }, { "a": 4, "m": 5, "z": 6 }] }
        });
        let DocumentOperations::Single(op) = &doc.operations else {
            panic!("one operation");
        };
        in_selection_order(&mut data, &op.node.selection_set.node, &doc);
        assert_eq!(
            serde_json::to_string(&data).expect("json"),
            r#"{"b":{"data":[{"z":3,"a":2,"m":1},{"z":6,"a":4,"m":5}]},"a":{"name":"n","id":1}}"#
        );
    }
}
