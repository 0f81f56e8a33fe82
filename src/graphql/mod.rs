//! The GraphQL schema: the object graph (`objects`), one module per resource for the root
//! fields and their inputs, merged into one query and one mutation root, and the stages a
//! request goes through (`pipeline`). Resolvers check permissions (see `access`) and call
//! the store; they write no SQL.

pub mod access;
mod audit;
mod bookings;
mod catalogue;
pub mod error;
pub mod events;
mod input;
mod labels;
mod loaders;
mod locations;
pub mod objects;
mod options;
mod pagination;
mod patients;
pub mod pipeline;
mod read_log;
mod record;
pub mod scalars;
mod staff;
mod tokens;
mod users;
pub mod webhooks;

use std::time::Duration;

use async_graphql::{Context, MergedObject, MergedSubscription, Schema};

use crate::events::Hub;
use crate::store::Store;

/// Every query of the API.
#[derive(MergedObject, Default)]
pub struct Query(
    patients::PatientQueries,
    bookings::BookingQueries,
    locations::LocationQueries,
    catalogue::CatalogueQueries,
    labels::LabelQueries,
    users::UserQueries,
    staff::StaffQueries,
    tokens::TokenQueries,
    audit::AuditQueries,
    events::EventQueries,
    webhooks::WebhookQueries,
);

/// Every mutation of the API.
#[derive(MergedObject, Default)]
pub struct Mutation(
    users::SessionMutations,
    staff::StaffMutations,
    users::PracticeMutations,
    patients::PatientMutations,
    record::RecordMutations,
    bookings::BookingMutations,
    locations::LocationMutations,
    catalogue::CatalogueMutations,
    labels::LabelMutations,
    tokens::TokenMutations,
    webhooks::WebhookMutations,
);

/// Every subscription of the API.
#[derive(MergedSubscription, Default)]
pub struct Subscription(events::EventSubscription);

/// The schema type.
pub type ApiSchema = Schema<Query, Mutation, Subscription>;

/// Settings the resolvers need.
#[derive(Clone, Debug)]
pub struct ApiSettings {
    /// How long a token from signIn is valid.
    pub user_token_ttl: Duration,
    /// What a document may ask for.
    pub limits: pipeline::Limits,
    /// Webhooks may go to plain http and private addresses.
    pub webhook_allow_private: bool,
    /// The retry schedule's first delay: how long after its event a delivery's first attempt
    /// is due.
    pub webhook_first_delay: Duration,
    /// Events a subscription may fall behind the live ones before it catches up from the log.
    pub subscriber_lag: usize,
}

/// The address a request came from, for the sign-in throttle.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddress(pub Option<std::net::IpAddr>);

/// Builds the schema over a store, with the hub its subscriptions follow.
pub fn build_schema(store: Store, hub: Hub, settings: ApiSettings) -> ApiSchema {
    schema_validating(store, hub, settings, async_graphql::ValidationMode::Strict)
}

/// The same schema, validating documents in async-graphql's fast mode: for documents known
/// to pass in full (see `pipeline::validated`).
pub fn build_fast_schema(store: Store, hub: Hub, settings: ApiSettings) -> ApiSchema {
    schema_validating(store, hub, settings, async_graphql::ValidationMode::Fast)
}

fn schema_validating(
    store: Store,
    hub: Hub,
    settings: ApiSettings,
    mode: async_graphql::ValidationMode,
) -> ApiSchema {
    let builder = Schema::build(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
    );
    // The strict schema also validates without running, for a request that leaves variables
    // out (its document as sent is checked before the copy without them runs).
    let builder = match mode {
        async_graphql::ValidationMode::Strict => builder.extension(pipeline::StopBeforeExecution),
        async_graphql::ValidationMode::Fast => builder,
    };
    builder
        .validation_mode(mode)
        .data(store)
        .data(hub)
        // The prepare stage measures depth first, with a message that names it; this is the
        // backstop.
        .limit_depth(settings.limits.max_depth)
        .data(settings)
        .finish()
}

/// The schema in SDL, as `practice-api schema` prints it and `schema.graphql` holds it.
pub fn sdl() -> String {
    Schema::build(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
    )
    .finish()
    .sdl()
}

/// The store, from a resolver's context.
fn store<'c>(ctx: &Context<'c>) -> &'c Store {
    ctx.data_unchecked::<Store>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{OPERATIONS, OperationKind, guard_of};
    use async_graphql::parser::types::TypeKind;

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
                    "Subscription" => OperationKind::Subscription,
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
            assert!(guard_of(*kind, name).is_some(), "{name} has no guard");
        }
        assert_eq!(roots.len(), OPERATIONS.len(), "{roots:?}");
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
        Schema::build(
            Query::default(),
            Mutation::default(),
            Subscription::default(),
        )
        .finish()
    }
}
