//! The GraphQL schema: one module per resource, merged into one query and one mutation root.
//! Resolvers check permissions (see `access`) and call the store; they write no SQL.

pub mod access;
pub mod audit;
mod bookings;
pub mod error;
mod input;
mod labels;
pub mod limits;
mod loaders;
mod locations;
mod options;
mod pagination;
mod patients;
mod payload;
pub mod scalars;
mod tokens;
mod users;

use std::time::Duration;

use async_graphql::Positioned;
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field, OperationDefinition, OperationType, Selection,
    SelectionSet,
};
use async_graphql::{Context, EmptySubscription, MergedObject, Schema};

use crate::auth::{OperationKind, Principal};
use crate::store::Store;
pub use tokens::parse_permissions;

/// Every query of the API.
#[derive(MergedObject, Default)]
pub struct Query(
    patients::PatientQueries,
    bookings::BookingQueries,
    locations::LocationQueries,
    labels::LabelQueries,
    users::UserQueries,
    tokens::TokenQueries,
    audit::AuditQueries,
);

/// Every mutation of the API.
#[derive(MergedObject, Default)]
pub struct Mutation(
    users::SessionMutations,
    patients::PatientMutations,
    bookings::BookingMutations,
    locations::LocationMutations,
    labels::LabelMutations,
    tokens::TokenMutations,
);

/// The schema type.
pub type ApiSchema = Schema<Query, Mutation, EmptySubscription>;

/// Settings the resolvers need.
#[derive(Clone, Debug)]
pub struct ApiSettings {
    /// How long a token from signIn is valid.
    pub user_token_ttl: Duration,
    /// What a document may ask for.
    pub limits: limits::Limits,
}

/// The address a request came from, for the sign-in throttle.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddress(pub Option<std::net::IpAddr>);

/// Builds the schema over a store.
pub fn build_schema(store: Store, settings: ApiSettings) -> ApiSchema {
    Schema::build(Query::default(), Mutation::default(), EmptySubscription)
        .data(store)
        // The HTTP layer measures depth first, with a message that names it; this is the
        // backstop for any other way in.
        .limit_depth(settings.limits.max_depth)
        .data(settings)
        .data(std::sync::Arc::new(
            crate::auth::throttle::SignInThrottle::default(),
        ))
        .finish()
}

/// The schema in SDL, as `practice-api schema` prints it and `schema.graphql` holds it.
pub fn sdl() -> String {
    Schema::build(Query::default(), Mutation::default(), EmptySubscription)
        .finish()
        .sdl()
}

/// The store, from a resolver's context.
fn store<'c>(ctx: &Context<'c>) -> &'c Store {
    ctx.data_unchecked::<Store>()
}

/// Adds what one request's resolvers need: the caller and the per-request batch loaders.
pub fn for_caller(
    request: async_graphql::Request,
    store: &Store,
    principal: Option<Principal>,
    kind: Option<OperationKind>,
) -> async_graphql::Request {
    let Some(principal) = principal else {
        return request;
    };
    let cached = kind == Some(OperationKind::Query);
    let request = loaders::install(request, store, &principal.practice_id, cached);
    request.data(principal)
}

/// What the HTTP layer needs to know of a request's operation before running it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperationShape {
    pub kind: OperationKind,
    /// True when every root field is signIn: the one operation that takes no token.
    pub sign_in_only: bool,
    /// How many signIn fields the operation holds, through fragments too. More than one is
    /// refused: aliases must not multiply password guesses.
    pub sign_ins: usize,
}

/// The operation a request would run: the one named, or the document's only one.
pub fn find_operation<'d>(
    doc: &'d ExecutableDocument,
    operation_name: Option<&str>,
) -> Option<&'d Positioned<OperationDefinition>> {
    match (&doc.operations, operation_name) {
        (DocumentOperations::Single(op), _) => Some(op),
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next(),
        (DocumentOperations::Multiple(_), None) => None,
    }
}

/// Finds the operation a request would run. None when the document has no operation of that
/// name (execution will report it).
pub fn operation_shape(
    doc: &ExecutableDocument,
    operation_name: Option<&str>,
) -> Option<OperationShape> {
    let operation = find_operation(doc, operation_name)?;
    let kind = match operation.node.ty {
        OperationType::Query => OperationKind::Query,
        OperationType::Mutation => OperationKind::Mutation,
        OperationType::Subscription => OperationKind::Subscription,
    };
    let items = &operation.node.selection_set.node.items;
    let sign_in_only = kind == OperationKind::Mutation
        && !items.is_empty()
        && items.iter().all(|item| match &item.node {
            Selection::Field(field) => field.node.name.node == "signIn",
            // Fragments could hide other fields: they need a token.
            _ => false,
        });
    let mut sign_ins = 0;
    if kind == OperationKind::Mutation {
        for_each_root_field(&operation.node.selection_set.node, doc, &mut |field| {
            sign_ins += usize::from(field.name.node == "signIn");
        });
    }
    Some(OperationShape {
        kind,
        sign_in_only,
        sign_ins,
    })
}

/// Calls `visit` with each root field of a selection, through fragments, each fragment once
/// (the document may not be validated yet, so a fragment may even spread itself).
pub fn for_each_root_field<'d>(
    selection: &'d SelectionSet,
    doc: &'d ExecutableDocument,
    visit: &mut impl FnMut(&'d Field),
) {
    fn walk<'d>(
        selection: &'d SelectionSet,
        doc: &'d ExecutableDocument,
        seen: &mut Vec<&'d str>,
        visit: &mut impl FnMut(&'d Field),
    ) {
        for item in &selection.items {
            match &item.node {
                Selection::Field(field) => visit(&field.node),
                Selection::InlineFragment(inline) => {
                    walk(&inline.node.selection_set.node, doc, seen, visit);
                }
                Selection::FragmentSpread(spread) => {
                    let name = spread.node.fragment_name.node.as_str();
                    if seen.contains(&name) {
                        continue;
                    }
                    seen.push(name);
                    if let Some(fragment) = doc.fragments.get(&spread.node.fragment_name.node) {
                        walk(&fragment.node.selection_set.node, doc, seen, visit);
                    }
                }
            }
        }
    }
    walk(selection, doc, &mut Vec::new(), visit);
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;
    use async_graphql::parser::types::TypeKind;

    fn shape(query: &str, name: Option<&str>) -> Option<OperationShape> {
        operation_shape(&parse_query(query).expect("parses"), name)
    }

    #[test]
    fn only_sign_in_goes_without_token() {
        let s = shape(
            "mutation { signIn(email: \"a\", password: \"b\") { token } }",
            None,
        );
        assert_eq!(
            s,
            Some(OperationShape {
                kind: OperationKind::Mutation,
                sign_in_only: true,
                sign_ins: 1,
            })
        );
        let aliased = shape(
            "mutation { a: signIn(email: \"a\", password: \"b\") { token } \
             ...F ... on Mutation { c: signIn(email: \"a\", password: \"c\") { token } } } \
             fragment F on Mutation { b: signIn(email: \"a\", password: \"d\") { token } ...F }",
            None,
        );
        assert_eq!(aliased.expect("op").sign_ins, 3);
        let mixed = shape(
            "mutation { signIn(email: \"a\", password: \"b\") { token } signOut }",
            None,
        );
        assert!(!mixed.expect("op").sign_in_only);
        let query = shape("query { signIn }", None);
        assert!(!query.expect("op").sign_in_only);
        let fragment = shape("mutation { ...F } fragment F on Mutation { signOut }", None);
        assert!(!fragment.expect("op").sign_in_only);
    }

    #[test]
    fn picks_the_named_operation() {
        let doc = "query A { patients { pageInfo { page } } } mutation B { signOut }";
        assert_eq!(
            shape(doc, Some("B")).expect("op").kind,
            OperationKind::Mutation
        );
        assert_eq!(
            shape(doc, Some("A")).expect("op").kind,
            OperationKind::Query
        );
        assert_eq!(shape(doc, None), None);
        assert_eq!(shape(doc, Some("C")), None);
    }

    /// Every root field has a guard in `access::OPERATIONS`, and every guard a root field.
    #[test]
    fn every_root_field_has_a_guard() {
        let schema = build_schema_for_test();
        let registry = schema.sdl();
        let doc = async_graphql::parser::parse_schema(&registry).expect("sdl parses");
        let mut roots = Vec::new();
        for def in doc.definitions {
            if let async_graphql::parser::types::TypeSystemDefinition::Type(t) = def {
                let kind = match t.node.name.node.as_str() {
                    "Query" => OperationKind::Query,
                    "Mutation" => OperationKind::Mutation,
                    _ => continue,
                };
                if let TypeKind::Object(object) = &t.node.kind {
                    for field in &object.fields {
                        roots.push((kind, field.node.name.node.to_string()));
                    }
                }
            }
        }
        for (kind, name) in &roots {
            assert!(
                access::guard_of(*kind, name).is_some(),
                "{name} has no guard"
            );
        }
        assert_eq!(roots.len(), access::OPERATIONS.len(), "{roots:?}");
    }

    /// Every type, field and argument has a description: it is the API's reference.
    #[test]
    fn everything_is_described() {
        use async_graphql::parser::types::TypeSystemDefinition;
        let doc = async_graphql::parser::parse_schema(sdl()).expect("sdl parses");
        let mut missing = Vec::new();
        for def in doc.definitions {
            let TypeSystemDefinition::Type(t) = def else {
                continue;
            };
            let name = t.node.name.node.to_string();
            if t.node.description.is_none() {
                missing.push(name.clone());
            }
            match &t.node.kind {
                TypeKind::Object(object) => {
                    for field in &object.fields {
                        let field_name = format!("{name}.{}", field.node.name.node);
                        if field.node.description.is_none() {
                            missing.push(field_name.clone());
                        }
                        for arg in &field.node.arguments {
                            if arg.node.description.is_none() {
                                missing.push(format!("{field_name}({})", arg.node.name.node));
                            }
                        }
                    }
                }
                TypeKind::InputObject(input) => {
                    for field in &input.fields {
                        if field.node.description.is_none() {
                            missing.push(format!("{name}.{}", field.node.name.node));
                        }
                    }
                }
                _ => {}
            }
        }
        assert!(missing.is_empty(), "undescribed: {missing:#?}");
    }

    fn build_schema_for_test() -> ApiSchema {
        Schema::build(Query::default(), Mutation::default(), EmptySubscription).finish()
    }
}
