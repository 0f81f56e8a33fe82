//! Realtime: what happens to events once they are in the log (`store::events`, written in the
//! transaction of their change). The [`Hub`] follows the log and hands each new event to this
//! instance's live subscriptions; the webhook worker ([`webhooks`]) delivers the outbox; the
//! retention sweep ([`retention`]) deletes what is older than the operator keeps.
//!
//! Depends on the store only; the GraphQL layer serves the events (the feed, subscriptions,
//! the webhook operations) and the HTTP layer starts what runs in the background.

pub mod hub;
pub mod retention;
pub mod webhooks;

use std::time::Duration;

pub use hub::Hub;

use crate::store::Store;

/// What the background work of events needs to know.
#[derive(Clone, Debug)]
pub struct EventSettings {
    /// How long events are kept.
    pub retention: Duration,
    /// How webhooks are delivered.
    pub delivery: webhooks::DeliverySettings,
}

/// Starts the webhook worker and the retention sweep over `store`, woken by `hub`; the worker
/// is returned, to be stopped with the server.
pub fn start_background(
    store: &Store,
    hub: &Hub,
    settings: &EventSettings,
) -> webhooks::Deliveries {
    retention::start(store.clone(), settings.retention);
    webhooks::start(store.clone(), hub.clone(), settings.delivery.clone())
}
