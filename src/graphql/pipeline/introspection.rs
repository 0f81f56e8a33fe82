//! What an introspection query (`__schema`, `__type`) returns, counted before it runs.
//!
//! The cost of other fields weighs each list by the most items it can hold. Introspection's
//! lists are the schema's own types, fields and arguments, and nest without end
//! (`fields { type { fields { type { ... } } } }`), so a bound for each list would either
//! refuse the introspection query every client tool sends or let a kilobyte of aliases and
//! nesting ask for megabytes, all of it built on a runtime thread that never yields. The
//! schema is known, so the answer's size is too: each introspection field is counted here
//! against the schema itself, item by item, as the executor will resolve it, and each value it
//! returns costs a quarter of a cost unit ([`cost_of_values`]): it is read from memory, not the store.
//!
//! The schema is taken from its SDL, with what the SDL leaves out and introspection shows:
//! the built-in scalars, the introspection types and the built-in directives ([`BUILT_IN`]).
//! `cargo test` checks the count against the executor's own answer to the full introspection
//! query.

use std::collections::{HashMap, HashSet};

use async_graphql::parser::types::{
    BaseType, ExecutableDocument, Selection, SelectionSet, Type, TypeKind, TypeSystemDefinition,
};

/// What the SDL does not say and introspection shows. Added where the SDL has no type or
/// directive of the name.
const BUILT_IN: &str = r#"
scalar String
scalar Int
scalar Float
scalar Boolean
scalar ID
type __Schema { description: String! types: [__Type!]! queryType: __Type! mutationType: __Type
  subscriptionType: __Type directives: [__Directive!]! }
type __Type { kind: __TypeKind! name: String description: String
  fields(includeDeprecated: Boolean! = false): [__Field!] interfaces: [__Type!]
  possibleTypes: [__Type!] enumValues(includeDeprecated: Boolean! = false): [__EnumValue!]
  inputFields(includeDeprecated: Boolean! = false): [__InputValue!] ofType: __Type
  specifiedByURL: String isOneOf: Boolean }
type __Field { name: String! description: String args(includeDeprecated: Boolean! = false): [__InputValue!]!
  type: __Type! isDeprecated: Boolean! deprecationReason: String }
type __InputValue { name: String! description: String type: __Type! defaultValue: String
  isDeprecated: Boolean! deprecationReason: String }
type __EnumValue { name: String! description: String isDeprecated: Boolean! deprecationReason: String }
type __Directive { name: String! description: String locations: [__DirectiveLocation!]!
  args(includeDeprecated: Boolean! = false): [__InputValue!]! isRepeatable: Boolean! }
enum __TypeKind { SCALAR OBJECT INTERFACE UNION ENUM INPUT_OBJECT LIST NON_NULL }
enum __DirectiveLocation { QUERY MUTATION SUBSCRIPTION FIELD FRAGMENT_DEFINITION FRAGMENT_SPREAD
  INLINE_FRAGMENT VARIABLE_DEFINITION SCHEMA SCALAR OBJECT FIELD_DEFINITION ARGUMENT_DEFINITION
  INTERFACE UNION ENUM ENUM_VALUE INPUT_OBJECT INPUT_FIELD_DEFINITION }
directive @deprecated(reason: String = "No longer supported") on FIELD_DEFINITION | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION | ENUM_VALUE
directive @include(if: Boolean!) on FIELD | FRAGMENT_SPREAD | INLINE_FRAGMENT
directive @oneOf on INPUT_OBJECT
directive @skip(if: Boolean!) on FIELD | FRAGMENT_SPREAD | INLINE_FRAGMENT
directive @specifiedBy(url: String!) on SCALAR
"#;

/// The most selections the count of one document may look at before it gives up and calls
/// the query too costly: a count looks at each selection once for each schema element it
/// applies to (types, fields, arguments). The full introspection query takes about 11,000
/// looks; 200,000 take a few milliseconds, before the caller is known.
const MOST_LOOKS: u64 = 200_000;

/// The cost of `values` values of introspection: a quarter of a unit each, rounded up (the
/// full introspection query, about 10,000 values, then costs a quarter of the default limit).
pub fn cost_of_values(values: u64) -> u64 {
    values.div_ceil(4)
}

/// A field of an object or interface: its arguments' types and its own.
#[derive(Clone, Debug)]
struct Field {
    args: Vec<Type>,
    ty: Type,
}

/// A named type as introspection lists it: which of its lists it has (None: null).
#[derive(Clone, Debug, Default)]
struct Named {
    fields: Option<Vec<Field>>,
    interfaces: Option<Vec<String>>,
    possible: Option<Vec<String>>,
    enum_values: Option<u64>,
    input_fields: Option<Vec<Type>>,
}

/// The schema as introspection shows it.
#[derive(Clone, Debug, Default)]
pub struct Introspected {
    types: HashMap<String, Named>,
    /// Every type's name, as `__schema { types }` lists them.
    names: Vec<String>,
    /// Each directive's arguments' types.
    directives: Vec<Vec<Type>>,
    /// The query, mutation and subscription types.
    roots: [Option<String>; 3],
}

/// Where in introspection's answer a selection applies.
#[derive(Clone, Copy, Debug)]
enum Node<'s> {
    Schema,
    /// A `__Type` of a field's or an argument's type: a list or non-null type around another,
    /// or a named one. With `true`, the type without its outermost non-null (what a non-null
    /// type's `ofType` is).
    Type(&'s Type, bool),
    Named(&'s str),
    Field(&'s Field),
    InputValue(&'s Type),
    EnumValue,
    Directive(usize),
}

/// A [`Node`] as a key: its kind, where its element is held, whether it is unwrapped, and a
/// type's name.
type Key<'s> = (u8, usize, bool, &'s str);

impl<'s> Node<'s> {
    /// The node as a key of what has been counted: the schema's elements by where they are
    /// held (each is held once), types by name.
    fn key(self) -> Key<'s> {
        match self {
            Node::Schema => (0, 0, false, ""),
            Node::Type(ty, unwrapped) => (1, std::ptr::from_ref(ty) as usize, unwrapped, ""),
            Node::Named(name) => (2, 0, false, name),
            Node::Field(field) => (3, std::ptr::from_ref(field) as usize, false, ""),
            Node::InputValue(ty) => (4, std::ptr::from_ref(ty) as usize, false, ""),
            Node::EnumValue => (5, 0, false, ""),
            Node::Directive(i) => (6, i, false, ""),
        }
    }
}

impl Introspected {
    /// The schema of `sdl`, with the built-in types and directives it does not define.
    pub fn of_sdl(sdl: &str) -> Introspected {
        let mut schema = Introspected {
            roots: [Some("Query".into()), None, None],
            ..Introspected::default()
        };
        let mut directive_names = Vec::new();
        for text in [sdl, BUILT_IN] {
            let Ok(doc) = async_graphql::parser::parse_schema(text) else {
                continue;
            };
            for definition in doc.definitions {
                match definition {
                    TypeSystemDefinition::Schema(root) => {
                        let root = root.node;
                        let name = |n: Option<async_graphql::Positioned<async_graphql::Name>>| {
                            n.map(|n| n.node.to_string())
                        };
                        schema.roots = [
                            name(root.query),
                            name(root.mutation),
                            name(root.subscription),
                        ];
                    }
                    TypeSystemDefinition::Type(t) => {
                        let t = t.node;
                        let name = t.name.node.to_string();
                        if schema.types.contains_key(&name) {
                            continue;
                        }
                        let fields = |fields: Vec<
                            async_graphql::Positioned<
                                async_graphql::parser::types::FieldDefinition,
                            >,
                        >| {
                            fields
                                .into_iter()
                                .map(|f| Field {
                                    args: f
                                        .node
                                        .arguments
                                        .into_iter()
                                        .map(|a| a.node.ty.node)
                                        .collect(),
                                    ty: f.node.ty.node,
                                })
                                .collect()
                        };
                        let names = |list: Vec<async_graphql::Positioned<async_graphql::Name>>| {
                            list.into_iter().map(|n| n.node.to_string()).collect()
                        };
                        let named = match t.kind {
                            TypeKind::Scalar => Named::default(),
                            TypeKind::Object(o) => Named {
                                fields: Some(fields(o.fields)),
                                interfaces: Some(names(o.implements)),
                                ..Named::default()
                            },
                            TypeKind::Interface(i) => Named {
                                fields: Some(fields(i.fields)),
                                interfaces: Some(names(i.implements)),
                                // Filled in below, from the objects that implement it.
                                possible: Some(Vec::new()),
                                ..Named::default()
                            },
                            TypeKind::Union(u) => Named {
                                possible: Some(names(u.members)),
                                ..Named::default()
                            },
                            TypeKind::Enum(e) => Named {
                                enum_values: Some(e.values.len() as u64),
                                ..Named::default()
                            },
                            TypeKind::InputObject(i) => Named {
                                input_fields: Some(
                                    i.fields.into_iter().map(|f| f.node.ty.node).collect(),
                                ),
                                ..Named::default()
                            },
                        };
                        schema.names.push(name.clone());
                        schema.types.insert(name, named);
                    }
                    TypeSystemDefinition::Directive(d) => {
                        let d = d.node;
                        let name = d.name.node.to_string();
                        if directive_names.contains(&name) {
                            continue;
                        }
                        directive_names.push(name);
                        schema
                            .directives
                            .push(d.arguments.into_iter().map(|a| a.node.ty.node).collect());
                    }
                }
            }
        }
        // An interface's possible types: the objects that implement it.
        let implementing: Vec<(String, String)> = schema
            .types
            .iter()
            .filter(|(_, t)| t.fields.is_some() && t.possible.is_none())
            .flat_map(|(name, t)| {
                t.interfaces
                    .iter()
                    .flatten()
                    .map(move |i| (i.clone(), name.clone()))
            })
            .collect();
        for (interface, object) in implementing {
            if let Some(possible) = schema
                .types
                .get_mut(&interface)
                .and_then(|t| t.possible.as_mut())
            {
                possible.push(object);
            }
        }
        schema
    }
}

/// The count of a document's introspection fields: what each selection set comes to where it
/// applies, taken once for the whole document, and the selections looked at, bounded for the
/// whole document by [`MOST_LOOKS`] (a document of many introspection fields shares it).
pub struct Counter<'s, 'd> {
    schema: &'s Introspected,
    doc: &'d ExecutableDocument,
    counted: HashMap<(Key<'s>, *const SelectionSet), u64>,
    /// Fragments being expanded, against one that spreads itself (the document is not
    /// validated yet).
    fragments: HashSet<&'d str>,
    looks: u64,
}

impl<'s, 'd> Counter<'s, 'd> {
    /// A count of `doc`'s introspection against `schema`.
    pub fn new(schema: &'s Introspected, doc: &'d ExecutableDocument) -> Self {
        Counter {
            schema,
            doc,
            counted: HashMap::new(),
            fragments: HashSet::new(),
            looks: 0,
        }
    }

    /// How many values the introspection field `field` (`__schema`, or `__type` of the type
    /// named `type_name`) returns with `set` selected under it, its own included; None once
    /// counting the document's introspection has looked at more than [`MOST_LOOKS`]
    /// selections (the query is then too costly to run).
    pub fn count(
        &mut self,
        field: &str,
        type_name: Option<&str>,
        set: &'d SelectionSet,
    ) -> Option<u64> {
        let schema = self.schema;
        let inner = match (field, type_name) {
            ("__schema", _) => self.set(Node::Schema, set),
            ("__type", Some(name)) => match schema.types.get_key_value(name) {
                Some((name, _)) => self.set(Node::Named(name), set),
                None => 0,
            },
            _ => 0,
        };
        (self.looks <= MOST_LOOKS).then_some(inner.saturating_add(1))
    }

    /// The values `set` returns at `node`.
    fn set(&mut self, node: Node<'s>, set: &'d SelectionSet) -> u64 {
        if self.looks > MOST_LOOKS {
            return 0;
        }
        let key = (node.key(), std::ptr::from_ref(set));
        if let Some(known) = self.counted.get(&key) {
            return *known;
        }
        let mut values: u64 = 0;
        for item in &set.items {
            self.looks += 1;
            let item_values = match &item.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    let inner = &field.selection_set.node;
                    1u64.saturating_add(self.field(node, field.name.node.as_str(), inner))
                }
                Selection::InlineFragment(inline) => {
                    self.set(node, &inline.node.selection_set.node)
                }
                Selection::FragmentSpread(spread) => {
                    let name = spread.node.fragment_name.node.as_str();
                    match self.doc.fragments.get(name) {
                        Some(fragment) if self.fragments.insert(name) => {
                            let count = self.set(node, &fragment.node.selection_set.node);
                            self.fragments.remove(name);
                            count
                        }
                        _ => 0,
                    }
                }
            };
            values = values.saturating_add(item_values);
        }
        self.counted.insert(key, values);
        values
    }

    /// The values under the field `name` of `node`, with `inner` selected under it (nothing
    /// for a scalar, a null, or a field introspection does not have).
    fn field(&mut self, node: Node<'s>, name: &str, inner: &'d SelectionSet) -> u64 {
        if inner.items.is_empty() {
            return 0;
        }
        let schema = self.schema;
        let each = |counter: &mut Self, nodes: &mut dyn Iterator<Item = Node<'s>>| {
            nodes.fold(0u64, |sum, node| {
                sum.saturating_add(counter.set(node, inner))
            })
        };
        let named = |name: &'s String| Node::Named(name.as_str());
        match (node, name) {
            (Node::Schema, "types") => each(self, &mut schema.names.iter().map(named)),
            (Node::Schema, "queryType") => each(self, &mut schema.roots[0].iter().map(named)),
            (Node::Schema, "mutationType") => each(self, &mut schema.roots[1].iter().map(named)),
            (Node::Schema, "subscriptionType") => {
                each(self, &mut schema.roots[2].iter().map(named))
            }
            (Node::Schema, "directives") => {
                each(self, &mut (0..schema.directives.len()).map(Node::Directive))
            }
            (Node::Type(ty, unwrapped), _) => match (&ty.base, ty.nullable || unwrapped) {
                // A non-null type: its `ofType` is the same type, nullable.
                (_, false) => match name {
                    "ofType" => self.set(Node::Type(ty, true), inner),
                    _ => 0,
                },
                (BaseType::List(of), true) => match name {
                    "ofType" => self.set(Node::Type(of, false), inner),
                    _ => 0,
                },
                (BaseType::Named(n), true) => match schema.types.get_key_value(n.as_str()) {
                    Some((n, _)) => self.field(Node::Named(n), name, inner),
                    None => 0,
                },
            },
            (Node::Named(n), _) => {
                let Some(t) = schema.types.get(n) else {
                    return 0;
                };
                match name {
                    "fields" => each(self, &mut t.fields.iter().flatten().map(Node::Field)),
                    "interfaces" => each(self, &mut t.interfaces.iter().flatten().map(named)),
                    "possibleTypes" => each(self, &mut t.possible.iter().flatten().map(named)),
                    "enumValues" => t
                        .enum_values
                        .map_or(0, |n| n.saturating_mul(self.set(Node::EnumValue, inner))),
                    "inputFields" => each(
                        self,
                        &mut t.input_fields.iter().flatten().map(Node::InputValue),
                    ),
                    _ => 0,
                }
            }
            (Node::Field(f), "args") => each(self, &mut f.args.iter().map(Node::InputValue)),
            (Node::Field(f), "type") => self.set(Node::Type(&f.ty, false), inner),
            (Node::InputValue(ty), "type") => self.set(Node::Type(ty, false), inner),
            (Node::Directive(i), "args") => each(
                self,
                &mut schema
                    .directives
                    .get(i)
                    .into_iter()
                    .flatten()
                    .map(Node::InputValue),
            ),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graphql::{Mutation, Query, Subscription};
    use async_graphql::parser::parse_query;

    /// The full introspection query, as GraphiQL and graphql-js's `getIntrospectionQuery` send
    /// it (every option on).
    const FULL: &str = include_str!("../../../tests/introspection.graphql");

    /// The values of an answer: each field of each object, as the count counts them.
    fn values(value: &serde_json::Value) -> u64 {
        match value {
            serde_json::Value::Object(o) => o.values().map(|v| 1 + values(v)).sum(),
            serde_json::Value::Array(a) => a.iter().map(values).sum(),
            _ => 0,
        }
    }

    /// The values the schema's executor answers `query` with.
    async fn answered(query: &str) -> u64 {
        let schema = async_graphql::Schema::build(
            Query::default(),
            Mutation::default(),
            Subscription::default(),
        )
        .finish();
        let response = schema.execute(query).await;
        assert!(response.errors.is_empty(), "{:?}", response.errors);
        values(&response.data.into_json().expect("json"))
    }

    /// The values counted for the root fields of `query`'s one operation, together.
    fn counted(query: &str) -> u64 {
        looks(query)
            .into_iter()
            .map(|(_, count)| count.expect("counted"))
            .sum()
    }

    #[tokio::test]
    async fn counts_what_the_executor_answers() {
        for query in [
            FULL,
            "{ __schema { types { name } } }",
            "{ __type(name: \"Patient\") { name fields { name type { kind ofType { name fields { name } } } } } }",
            "{ __type(name: \"Nothing\") { name } }",
            "{ a: __type(name: \"BookingStatus\") { enumValues { name } } b: __schema { directives { name args { name } } } }",
            "{ __schema { types { ... on __Type { possibleTypes { name } interfaces { name } } } } }",
            "{ __schema { directives { name description isRepeatable locations args(includeDeprecated: true) { name type { name } defaultValue } } } }",
            "{ __schema { types { inputFields { name } } } }",
            "{ __schema { types { enumValues(includeDeprecated: true) { name } } } }",
            "{ __schema { types { fields(includeDeprecated: true) { name } } } }",
            "{ __schema { types { fields(includeDeprecated: true) { args { name } } } } }",
            // Nested further than any tool asks: each field's type's fields' types' fields.
            "{ __schema { types { fields { type { ofType { fields { type { ofType { ofType { fields { name } } } } } } } } } } }",
        ] {
            assert_eq!(counted(query), answered(query).await, "{query}");
        }
    }

    #[test]
    fn the_full_introspection_query_costs_well_within_the_default_limit() {
        let cost = cost_of_values(counted(FULL));
        let limit = super::super::Limits::default().max_cost;
        assert!(
            cost * 2 <= limit,
            "{cost}: the schema has grown past half the limit"
        );
    }

    /// For each root field of `query`'s one operation, in turn: the looks the document's count
    /// has taken once it is counted, and what it came to.
    fn looks(query: &str) -> Vec<(u64, Option<u64>)> {
        let schema = Introspected::of_sdl(&crate::graphql::sdl());
        let doc = parse_query(query).expect("parses");
        let (_, op) = doc.operations.iter().next().expect("an operation");
        let mut counter = Counter::new(&schema, &doc);
        op.node
            .selection_set
            .node
            .items
            .iter()
            .map(|item| {
                let Selection::Field(field) = &item.node else {
                    panic!("fields only");
                };
                let field = &field.node;
                let type_name =
                    field
                        .arguments
                        .iter()
                        .find_map(|(n, v)| match v.node.clone().into_const() {
                            Some(async_graphql::Value::String(s)) if n.node == "name" => Some(s),
                            _ => None,
                        });
                let count = counter.count(
                    field.name.node.as_str(),
                    type_name.as_deref(),
                    &field.selection_set.node,
                );
                (counter.looks, count)
            })
            .collect()
    }

    #[test]
    fn a_count_that_would_take_too_long_is_refused_for_the_whole_document() {
        // Each field of each type looked at 100 times (the fields repeated, not aliased):
        // some 47,000 looks a `__schema`. Enough of them pass the cap together, though none
        // does alone.
        let names = "name ".repeat(100);
        let one = format!("__schema {{ types {{ fields {{ {names} }} }} }} ");
        let (first, _) = looks(&format!("{{ {one} }}"))[0];
        let fields = usize::try_from(MOST_LOOKS / first + 1).expect("a few");
        assert!(fields >= 2, "{first}");
        let counted = looks(&format!("{{ {} }}", one.repeat(fields)));
        let (last, others) = counted.split_last().expect("fields");
        assert!(
            others.iter().all(|(_, count)| count.is_some()),
            "{counted:?}"
        );
        assert_eq!(last.1, None, "{counted:?}");
        // A fragment spread by every field again is counted once where it applies.
        let spread = "__schema { ...F }";
        let counted = looks(&format!(
            "{{ {} }} fragment F on __Schema {{ types {{ fields {{ {names} }} }} }}",
            spread.repeat(50)
        ));
        assert!(
            counted.iter().all(|(_, count)| count.is_some()),
            "{counted:?}"
        );
        assert!(counted[49].0 < first + 100, "{:?}", counted[49]);
    }

    #[test]
    fn a_chain_of_fragments_costs_a_look_a_spread() {
        // Each of 1,000 fragments spreads the next, under every type: each spread is a look,
        // and the fragments being expanded are a set, not a list searched at each spread (which
        // took 50 s for a 30 KB document of long chains: not measured here).
        let mut query = String::from("{ __schema { types { ...A0 } } } ");
        for k in 0..1_000 {
            query.push_str(&format!("fragment A{k} on __Type {{ ...A{} }} ", k + 1));
        }
        query.push_str("fragment A1000 on __Type { name }");
        let counted = looks(&query);
        let (looks, count) = counted[0];
        assert!(count.is_some());
        // About a look for each spread of each type, and one for each type's name.
        assert!(looks < 130 * 1_002, "{looks}");
    }
}
