//! Webhook subscriptions and the log of their deliveries, shaped as the specified API's
//! webhooks.

use async_graphql::{Context, ID, Object, SimpleObject};

use super::page::PageInfo;
use crate::auth::{Access, Resource};
use crate::graphql::ApiSettings;
use crate::graphql::access::principal;
use crate::graphql::scalars::DateTime;
use crate::store::now_ms;
use crate::store::webhooks as stored;

/// The version of the body webhooks carry.
pub const BODY_VERSION: &str = "1";

/// A webhook subscription: the events of the listed types, posted to `url` as they happen,
/// signed as Standard Webhooks says. The body is thin: `{"subscriptionId", "eventId",
/// "eventType", "identifiers"}`; the receiver asks the API for the records.
pub struct WebhookSubscription(pub stored::Webhook);

/// A webhook subscription: the events of the listed types, posted to `url` as they happen,
/// signed as Standard Webhooks says (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
/// The body is `{"subscriptionId", "eventId", "eventType", "identifiers"}`.
#[Object]
impl WebhookSubscription {
    /// The subscription's id: the body's `subscriptionId`.
    async fn id(&self) -> ID {
        ID(self.0.subscription.id.clone())
    }
    /// The signing secret (`whsec_...`), for checking the `webhook-signature` header: shown
    /// to callers with `webhooks:write` only.
    async fn secret(&self, ctx: &Context<'_>) -> Option<&str> {
        may_write(ctx).then_some(self.0.subscription.secret.as_str())
    }
    /// Where deliveries are posted.
    async fn url(&self) -> &str {
        &self.0.subscription.url
    }
    /// What the subscription is for, in the caller's words.
    async fn label(&self) -> &str {
        &self.0.subscription.label
    }
    /// The event types delivered, e.g. ["booking.created", "patient.updated"].
    async fn event_types(&self) -> &[String] {
        &self.0.event_types
    }
    /// Headers added to every delivery (an authorization for the receiver, say). They carry
    /// the receiver's credentials, as the secret does: shown to callers with `webhooks:write`
    /// only, null to others.
    async fn headers(&self, ctx: &Context<'_>) -> Option<Vec<WebhookHeader>> {
        if !may_write(ctx) {
            return None;
        }
        serde_json::from_str::<Vec<stored::Header>>(&self.0.subscription.headers)
            .ok()
            .map(|headers| {
                headers
                    .into_iter()
                    .map(|h| WebhookHeader {
                        key: h.key,
                        value: h.value,
                    })
                    .collect()
            })
    }
    /// The version of the body's shape: "1".
    async fn version(&self) -> &str {
        BODY_VERSION
    }
    /// When the subscription was made.
    async fn created_at(&self) -> DateTime {
        DateTime::from_ms(self.0.subscription.created_at)
    }
    /// When it last changed.
    async fn updated_at(&self) -> DateTime {
        DateTime::from_ms(self.0.subscription.updated_at)
    }
    /// True once deleted: nothing more is delivered.
    async fn deleted(&self) -> bool {
        self.0.subscription.deleted_at.is_some()
    }
    /// True while deliveries wait: set by updateWebhook, by a receiver that answered 410
    /// Gone, or after 5 days of failed attempts. Deliveries made meanwhile wait, and go out
    /// when it is set to false again; those that wait longer than the events are kept (7
    /// days by default) are given up.
    async fn delivery_paused(&self) -> bool {
        self.0.subscription.delivery_paused != 0
    }
    /// Until when every delivery of the subscription waits because the receiver answered an
    /// attempt with `Retry-After` (on a 429 or 503, say): the time it asked for, plus up to a
    /// tenth of the wait, so that different servers' deliveries do not all come back at once.
    /// Null when no such wait stands; a new `url`, or `deliveryPaused: false`, ends it.
    async fn delivery_held_until(&self) -> Option<DateTime> {
        self.0
            .subscription
            .held_until
            .filter(|until| *until > now_ms())
            .map(DateTime::from_ms)
    }
}

/// A header added to every delivery of a subscription.
#[derive(SimpleObject, Clone, Debug)]
pub struct WebhookHeader {
    /// The header's name.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// A page of webhook subscriptions.
#[derive(SimpleObject)]
pub struct WebhookSubscriptionData {
    /// The subscriptions on this page, newest first.
    pub data: Option<Vec<Option<WebhookSubscription>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

/// One event's delivery to one subscription, with each attempt made.
pub struct WebhookDelivery {
    pub delivery: stored::Delivery,
    pub attempts: Vec<stored::Attempt>,
}

/// One event's delivery to one subscription: where it stands, and every attempt made.
#[Object]
impl WebhookDelivery {
    /// The delivery's id: the `webhook-id` header of each of its attempts.
    async fn id(&self) -> ID {
        ID(self.delivery.id.clone())
    }
    /// The event delivered (Event.id; the body's `eventId`).
    async fn event_id(&self) -> ID {
        ID(self.delivery.event_id.clone())
    }
    /// The event's type.
    async fn event_type(&self) -> &str {
        &self.delivery.event_type
    }
    /// How many attempts were made.
    async fn attempt(&self) -> i32 {
        i32::try_from(self.delivery.attempts).unwrap_or(i32::MAX)
    }
    /// "pending" (an attempt is due), "delivered" (a 2xx came back), "failed" (every attempt
    /// of the schedule failed) or "paused" (its subscription is paused).
    async fn status(&self) -> &str {
        &self.delivery.status
    }
    /// The status of the last answer, if there was one.
    async fn response_status(&self) -> Option<i32> {
        self.delivery
            .last_status
            .and_then(|s| i32::try_from(s).ok())
    }
    /// Why the last attempt failed, if it did.
    async fn error(&self) -> Option<&str> {
        self.delivery.last_error.as_deref()
    }
    /// When the last attempt was made; when the delivery was made, before any.
    async fn at(&self) -> DateTime {
        DateTime::from_ms(
            self.delivery
                .last_attempt_at
                .unwrap_or(self.delivery.created_at),
        )
    }
    /// When the next attempt is due, while it is pending. A receiver's `Retry-After` holds
    /// every delivery of its subscription until the time it asked for, past this one.
    async fn next_attempt_at(&self, ctx: &Context<'_>) -> Option<DateTime> {
        // A first attempt is due the retry schedule's first delay after its event.
        let first_delay = match self.delivery.attempts {
            0 => ctx.data::<ApiSettings>().map_or(0, |s| {
                i64::try_from(s.webhook_first_delay.as_millis()).unwrap_or(0)
            }),
            _ => 0,
        };
        DateTime::from_opt(self.delivery.next_attempt_at.map(|at| at + first_delay))
    }
    /// Its newest 20 attempts, oldest first (`attempt` numbers them all).
    async fn attempts(&self) -> Vec<WebhookAttempt> {
        self.attempts
            .iter()
            .map(|a| WebhookAttempt {
                attempt: i32::try_from(a.attempt).unwrap_or(i32::MAX),
                at: DateTime::from_ms(a.at),
                response_status: a.response_status.and_then(|s| i32::try_from(s).ok()),
                error: a.error.clone(),
            })
            .collect()
    }
}

/// One attempt of a delivery.
#[derive(SimpleObject)]
pub struct WebhookAttempt {
    /// Its number, from 1.
    pub attempt: i32,
    /// When it was made.
    pub at: DateTime,
    /// The receiver's status, if it answered.
    pub response_status: Option<i32>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// A page of a subscription's deliveries.
#[derive(SimpleObject)]
pub struct WebhookDeliveryData {
    /// The deliveries on this page, newest first.
    pub data: Option<Vec<Option<WebhookDelivery>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

/// What createWebhook returns: the subscription made (with its secret), or why not.
#[derive(SimpleObject)]
pub struct CreateWebhookPayload {
    /// The subscription; null when refused.
    pub data: Option<WebhookSubscription>,
    /// Why nothing was made, in a sentence; null on success.
    pub error: Option<String>,
}

/// What updateWebhook and rotateWebhookSecret return.
#[derive(SimpleObject)]
pub struct UpdateWebhookPayload {
    /// The subscription as changed; null when refused.
    pub data: Option<WebhookSubscription>,
    /// Why nothing changed, in a sentence; null on success.
    pub error: Option<String>,
}

/// What deleteWebhook returns.
#[derive(SimpleObject)]
pub struct DeleteWebhookPayload {
    /// The subscription, deleted; null when refused.
    pub data: Option<WebhookSubscription>,
    /// Why nothing changed, in a sentence; null on success.
    pub error: Option<String>,
}

/// What redeliverWebhook returns.
#[derive(SimpleObject)]
pub struct WebhookDeliveryPayload {
    /// The delivery, due again now; null when refused.
    pub data: Option<WebhookDelivery>,
    /// Why nothing changed, in a sentence; null on success.
    pub error: Option<String>,
}

/// Builds a payload of a webhook operation from a change's outcome (see `envelope`).
macro_rules! from_response {
    ($($payload:ident: $record:ty),*) => {$(
        impl From<super::ResponsePayload<$record>> for $payload {
            fn from(p: super::ResponsePayload<$record>) -> Self {
                $payload { data: p.data, error: p.error }
            }
        }
    )*};
}

from_response!(
    CreateWebhookPayload: WebhookSubscription,
    UpdateWebhookPayload: WebhookSubscription,
    DeleteWebhookPayload: WebhookSubscription,
    WebhookDeliveryPayload: WebhookDelivery
);

/// Whether the caller may change webhooks, and so see what a subscription holds of the
/// receiver's credentials (its secret and headers).
fn may_write(ctx: &Context<'_>) -> bool {
    principal(ctx).is_ok_and(|p| p.permissions.allows(Resource::Webhooks, Access::Write))
}
