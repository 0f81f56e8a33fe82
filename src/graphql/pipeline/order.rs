//! Puts response fields in the order the query selected them. async-graphql 7 resolves a
//! selection's fields concurrently and writes each as it completes, so a field that waits on
//! the database can land after its later siblings; the GraphQL specification wants the
//! selection's order, and clients that compare responses as text rely on it.

use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use serde_json::Value;

/// Reorders `data` by `selection`, the operation's selection set in `doc`.
pub fn in_selection_order(data: &mut Value, selection: &SelectionSet, doc: &ExecutableDocument) {
    order(data, &fields_of(selection, doc), doc);
}

/// The fields a selection set names, through its fragments, in its order: each response key
/// with the selection of its first field (as GraphQL merges fields of one key).
fn fields_of<'d>(
    selection: &'d SelectionSet,
    doc: &'d ExecutableDocument,
) -> Vec<(&'d str, &'d SelectionSet)> {
    fn walk<'d>(
        selection: &'d SelectionSet,
        doc: &'d ExecutableDocument,
        out: &mut Vec<(&'d str, &'d SelectionSet)>,
    ) {
        for item in &selection.items {
            match &item.node {
                Selection::Field(field) => {
                    let key = field.node.response_key().node.as_str();
                    if !out.iter().any(|(k, _)| *k == key) {
                        out.push((key, &field.node.selection_set.node));
                    }
                }
                Selection::FragmentSpread(spread) => {
                    if let Some(fragment) = doc.fragments.get(&spread.node.fragment_name.node) {
                        walk(&fragment.node.selection_set.node, doc, out);
                    }
                }
                Selection::InlineFragment(inline) => {
                    walk(&inline.node.selection_set.node, doc, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(selection, doc, &mut out);
    out
}

/// Orders `value` by `fields` (a list's items each). An object whose fields are in order
/// already, as most are, is left as it is and only its values are looked into: no key is
/// hashed, moved or copied. One that is not is rebuilt in the selection's order.
fn order(value: &mut Value, fields: &[(&str, &SelectionSet)], doc: &ExecutableDocument) {
    match value {
        Value::Array(items) => {
            for item in items {
                order(item, fields, doc);
            }
        }
        Value::Object(map) => {
            let mut next = 0;
            let mut in_order = true;
            for (key, inner) in map.iter_mut() {
                // A selected field may be missing (a fragment on another type), never out of
                // its place: look for this key from where the previous one was found.
                match fields[next..].iter().position(|(k, _)| k == key) {
                    Some(at) => {
                        next += at;
                        order(inner, &fields_of(fields[next].1, doc), doc);
                        next += 1;
                    }
                    None => {
                        in_order = false;
                        break;
                    }
                }
            }
            if !in_order {
                let mut unplaced = std::mem::take(map);
                for (key, selection) in fields {
                    if let Some(mut inner) = unplaced.remove(*key) {
                        order(&mut inner, &fields_of(selection, doc), doc);
                        map.insert((*key).to_string(), inner);
                    }
                }
                // Anything the selection does not name (there should be nothing) goes last.
                map.extend(unplaced);
            }
        }
        _ => {}
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

    /// Objects in order already are kept, their lists looked into; a field a fragment on
    /// another type would select may be missing; a field twice is one key.
    #[test]
    fn keeps_what_is_in_order_and_orders_what_is_inside() {
        let doc = parse_query(
            "{ a: patients { id data { id ... on Booking { start } b: labels { y x } id } } }",
        )
        .expect("parses");
        let mut data = json!({
            "a": { "id": 1, "data": [
                { "id": 1, "b": [{ "x": 1, "y": 2 }] },
                { "b": [{ "y": 3, "x": 4 }], "id": 2 },
            ] }
        });
        let DocumentOperations::Single(op) = &doc.operations else {
            panic!("one operation");
        };
        in_selection_order(&mut data, &op.node.selection_set.node, &doc);
        assert_eq!(
            serde_json::to_string(&data).expect("json"),
            r#"{"a":{"id":1,"data":[{"id":1,"b":[{"y":2,"x":1}]},{"id":2,"b":[{"y":3,"x":4}]}]}}"#
        );
    }
}
