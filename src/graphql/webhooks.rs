//! Webhooks: the subscriptions that post events to an integration's URL, and their delivery
//! log. Reading needs `webhooks:read`, changing `webhooks:write`; `settings` implies both.
//! Making or changing one needs too the read permission of each event type it sends (see
//! [`every_type_readable`]): its events go to its URL, whoever set it.

use async_graphql::{Context, ID, InputObject, Object, Result};

use super::access::{authorize, authorize_write};
use super::error::{OrFail, bad_input, code, coded};
use super::events::{every_type_readable, visible_types};
use super::input::required_text;
use super::objects::{
    CreateWebhookPayload, DeleteWebhookPayload, PageInfo, UpdateWebhookPayload, WebhookDelivery,
    WebhookDeliveryData, WebhookDeliveryPayload, WebhookSubscription, WebhookSubscriptionData,
    envelope, items,
};
use super::options::QueryOptions;
use super::pagination::Pagination;
use super::{ApiSettings, store};
use crate::auth::OperationKind;
use crate::domain::Change;
use crate::events::webhooks::{address, sign};
use crate::store::events::EVENT_TYPES;
use crate::store::webhooks::{self as stored, Header, WebhookFields};
use crate::store::{PracticeStore, now_ms};

/// Most event types one subscription takes.
pub const MAX_EVENT_TYPES: usize = 10;
/// Longest label.
pub const MAX_LABEL_CHARS: usize = 256;
/// Most headers one subscription adds.
pub const MAX_HEADERS: usize = 10;
/// Longest header name and value.
const MAX_HEADER_NAME: usize = 64;
const MAX_HEADER_VALUE: usize = 1024;
/// How long the old secret goes on signing after a rotation.
const OLD_SECRET_SIGNS_FOR_MS: i64 = 24 * 3600 * 1000;

/// A header to add to every delivery.
#[derive(InputObject, Clone, Debug)]
pub struct WebhookHeaderInput {
    /// The header's name, e.g. "Authorization". Not one the delivery sets itself
    /// (Content-Type, the webhook-* ones, ...).
    pub key: String,
    /// Its value, at most 1,024 characters on one line.
    pub value: String,
}

/// A new webhook subscription.
#[derive(InputObject)]
pub struct CreateWebhookInput {
    /// Where to post: an https URL on a public address (plain http and private addresses
    /// only when the server's operator allows them).
    pub url: String,
    /// The event types to deliver, 1 to 10 of them, e.g. ["booking.created"].
    pub event_types: Vec<String>,
    /// What the subscription is for, 1 to 256 characters.
    pub label: String,
    /// Headers to add to every delivery, at most 10.
    pub headers: Option<Vec<WebhookHeaderInput>>,
}

/// A change to a webhook subscription; what is omitted stays.
#[derive(InputObject)]
pub struct UpdateWebhookInput {
    /// A new URL (same rules as when made).
    pub url: Option<String>,
    /// New event types, replacing the old ones.
    pub event_types: Option<Vec<String>>,
    /// A new label.
    pub label: Option<String>,
    /// New headers, replacing the old ones; an empty list clears them.
    pub headers: Option<Vec<WebhookHeaderInput>>,
    /// True pauses delivery (deliveries wait); false resumes it and sends what waited.
    pub delivery_paused: Option<bool>,
}

/// Headers a subscription may not set: the delivery's own.
fn reserved(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("webhook-")
        || [
            "content-type",
            "content-length",
            "content-encoding",
            "transfer-encoding",
            "host",
            "connection",
            "user-agent",
            "te",
            "upgrade",
            "expect",
            "keep-alive",
            "proxy-connection",
            "trailer",
        ]
        .contains(&name.as_str())
}

/// Checks headers and writes them as stored. A name given twice (in any case) is refused:
/// sent twice, most fields are a malformed request the receiver may refuse every time.
fn headers(list: Vec<WebhookHeaderInput>) -> Result<String> {
    if list.len() > MAX_HEADERS {
        return Err(bad_input(format!(
            "headers holds at most {MAX_HEADERS} headers, got {}",
            list.len()
        )));
    }
    let mut out = Vec::with_capacity(list.len());
    for header in list {
        let key = header.key.trim().to_string();
        let is_token = !key.is_empty()
            && key.len() <= MAX_HEADER_NAME
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !is_token {
            return Err(bad_input(format!(
                "header name {key:?} must be 1 to {MAX_HEADER_NAME} letters, digits or - _ ."
            )));
        }
        if out
            .iter()
            .any(|h: &Header| h.key.eq_ignore_ascii_case(&key))
        {
            return Err(bad_input(format!("header {key:?} is given twice")));
        }
        if reserved(&key) {
            return Err(bad_input(format!(
                "header {key:?} is set by the delivery itself and cannot be replaced"
            )));
        }
        let value = header.value;
        let is_value = value.chars().count() <= MAX_HEADER_VALUE
            && value.chars().all(|c| c == '\t' || (' '..='~').contains(&c));
        if !is_value {
            return Err(bad_input(format!(
                "the value of header {key:?} must be at most {MAX_HEADER_VALUE} printable \
                 ASCII characters on one line"
            )));
        }
        out.push(Header { key, value });
    }
    Ok(serde_json::to_string(&out).unwrap_or_else(|_| "[]".into()))
}

/// Checks event types: 1 to 10 known ones, each once.
fn event_types(mut types: Vec<String>) -> Result<Vec<String>> {
    types.sort();
    types.dedup();
    if types.is_empty() || types.len() > MAX_EVENT_TYPES {
        return Err(bad_input(format!(
            "eventTypes must name 1 to {MAX_EVENT_TYPES} event types, got {}",
            types.len()
        )));
    }
    if let Some(unknown) = types.iter().find(|t| !EVENT_TYPES.contains(&t.as_str())) {
        return Err(bad_input(format!(
            "{unknown:?} is not an event type: use one of {}",
            EVENT_TYPES.join(", ")
        )));
    }
    Ok(types)
}

/// Checks a receiver's URL against the rules and the operator's setting.
fn url(ctx: &Context<'_>, url: &str) -> Result<String> {
    let allow_private = ctx
        .data::<ApiSettings>()
        .is_ok_and(|settings| settings.webhook_allow_private);
    address::check_new_url(url.trim(), allow_private)
        .map(|url| url.to_string())
        .map_err(bad_input)
}

/// A delivery with its attempts.
async fn with_attempts(
    practice: &PracticeStore<'_>,
    deliveries: Vec<stored::Delivery>,
) -> Result<Vec<WebhookDelivery>> {
    let ids: Vec<String> = deliveries.iter().map(|d| d.id.clone()).collect();
    let mut attempts = practice.attempts_of(&ids).await.or_fail()?;
    Ok(deliveries
        .into_iter()
        .map(|delivery| WebhookDelivery {
            attempts: attempts.remove(&delivery.id).unwrap_or_default(),
            delivery,
        })
        .collect())
}

#[derive(Default)]
pub struct WebhookQueries;

#[Object]
impl WebhookQueries {
    /// A webhook subscription by id, deleted ones included; null if the practice has none with
    /// that id. Needs `webhooks:read`.
    async fn webhook(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The subscription's id.")] id: ID,
    ) -> Result<Option<WebhookSubscription>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let found = store(ctx)
            .practice(&principal.practice_id)
            .find_webhook(&id)
            .await
            .or_fail()?;
        Ok(found.map(WebhookSubscription))
    }

    /// A page of the practice's webhook subscriptions, newest first. Needs `webhooks:read`.
    async fn webhooks(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
        #[graphql(desc = "includeDeleted lists deleted subscriptions too.")] options: Option<
            QueryOptions,
        >,
    ) -> Result<Option<WebhookSubscriptionData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let include_deleted = options.and_then(|o| o.include_deleted).unwrap_or(false);
        let found = store(ctx)
            .practice(&principal.practice_id)
            .list_webhooks(include_deleted, page)
            .await
            .or_fail()?;
        Ok(Some(WebhookSubscriptionData {
            page_info: Some(PageInfo::of(page, &found)),
            data: items(found.items, WebhookSubscription),
        }))
    }

    /// The deliveries of a subscription, newest first, with every attempt: the delivery log.
    /// Needs `webhooks:read`; lists only the deliveries of event types the caller may read in
    /// the feed of events (`events`: each type needs its resource's read permission, e.g.
    /// `patient.*` `patients:read`), and is FORBIDDEN when it may read none.
    async fn webhook_deliveries(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The subscription's id.")] subscription_id: ID,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
    ) -> Result<Option<WebhookDeliveryData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        // A delivery's type and event tell that something happened to a record: shown to
        // whoever may read such records.
        let types = visible_types(
            principal,
            EVENT_TYPES.iter().map(ToString::to_string).collect(),
        )?;
        let practice = store(ctx).practice(&principal.practice_id);
        if practice
            .find_webhook(&subscription_id)
            .await
            .or_fail()?
            .is_none()
        {
            return Err(coded(
                code::NOT_FOUND,
                format!(
                    "No webhook subscription with id {}",
                    subscription_id.as_str()
                ),
            ));
        }
        let found = practice
            .list_deliveries(&subscription_id, &types, page)
            .await
            .or_fail()?;
        let page_info = PageInfo::of(page, &found);
        let deliveries = with_attempts(&practice, found.items).await?;
        Ok(Some(WebhookDeliveryData {
            data: items(deliveries, |d| d),
            page_info: Some(page_info),
        }))
    }
}

#[derive(Default)]
pub struct WebhookMutations;

#[Object]
impl WebhookMutations {
    /// Makes a webhook subscription, with a new signing secret (in `data.secret`). Refused
    /// when another live subscription already sends one of the event types to the same URL.
    /// Needs `webhooks:write`, and the read permission of each event type's resource
    /// (`patient.*` `patients:read`, `booking.*` `bookings:read`, `label.*` `labels:read`).
    async fn create_webhook(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The subscription to make.")] input: CreateWebhookInput,
    ) -> Result<Option<CreateWebhookPayload>> {
        let practice = authorize_write(ctx)?;
        let types = event_types(input.event_types)?;
        every_type_readable(authorize(ctx, OperationKind::Mutation)?, &types)?;
        let fields = WebhookFields {
            url: Some(url(ctx, &input.url)?),
            label: Some(required_text("label", input.label, MAX_LABEL_CHARS)?),
            headers: input.headers.map(headers).transpose()?,
            event_types: Some(types),
            delivery_paused: None,
        };
        let change = practice
            .create_webhook(fields, &sign::new_secret())
            .await
            .or_fail()?;
        payload(ctx, change)
    }

    /// Changes a webhook subscription; what the input omits stays. Setting deliveryPaused to
    /// false resumes delivery, and what waited is sent (what waited longer than the events are
    /// kept was given up). New eventTypes drop the deliveries waiting of the types left out,
    /// as deleteWebhook drops all of them. Needs `webhooks:write`, and the read
    /// permission of each event type's resource the subscription sends after the change, as
    /// createWebhook does.
    async fn update_webhook(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The subscription's id.")] id: ID,
        #[graphql(desc = "What to change.")] input: UpdateWebhookInput,
    ) -> Result<Option<UpdateWebhookPayload>> {
        let practice = authorize_write(ctx)?;
        let types = input.event_types.map(event_types).transpose()?;
        // Whatever it changes (its URL above all), the caller must be able to read what the
        // subscription sends afterwards.
        let sends = match &types {
            Some(types) => Some(types.clone()),
            None => practice
                .find_webhook(&id)
                .await
                .or_fail()?
                .map(|webhook| webhook.event_types),
        };
        if let Some(sends) = sends {
            every_type_readable(authorize(ctx, OperationKind::Mutation)?, &sends)?;
        }
        let fields = WebhookFields {
            url: input.url.map(|u| url(ctx, &u)).transpose()?,
            label: input
                .label
                .map(|l| required_text("label", l, MAX_LABEL_CHARS))
                .transpose()?,
            headers: input.headers.map(headers).transpose()?,
            event_types: types,
            delivery_paused: input.delivery_paused,
        };
        let change = practice.update_webhook(&id, fields).await.or_fail()?;
        payload(ctx, change)
    }

    /// Deletes a webhook subscription: nothing more is delivered, and deliveries still due are
    /// dropped. It stays readable, with `deleted: true`; deleting it again is refused. Needs
    /// `webhooks:write`.
    async fn delete_webhook(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The subscription's id.")] id: ID,
    ) -> Result<Option<DeleteWebhookPayload>> {
        let practice = authorize_write(ctx)?;
        let change = practice.delete_webhook(&id).await.or_fail()?;
        payload(ctx, change)
    }

    /// Gives a subscription a new signing secret. For 24 hours deliveries are signed with both
    /// the new and the old one (two signatures in `webhook-signature`), so that the receiver
    /// can switch without losing a delivery; rotated again within those hours, each old secret
    /// goes on signing for its own 24 hours (one more signature each). Refused while 5 old
    /// secrets still sign. Needs `webhooks:write`.
    async fn rotate_webhook_secret(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The subscription's id.")] id: ID,
    ) -> Result<Option<UpdateWebhookPayload>> {
        let practice = authorize_write(ctx)?;
        let old_until = now_ms() + OLD_SECRET_SIGNS_FOR_MS;
        let change = practice
            .rotate_webhook_secret(&id, &sign::new_secret(), old_until)
            .await
            .or_fail()?;
        payload(ctx, change)
    }

    /// Sends a delivery again, now, whatever became of it (delivered, failed or paused), with
    /// a fresh schedule of attempts. Refused while it is pending, when its subscription is
    /// deleted, or when its subscription no longer sends its event type. Needs
    /// `webhooks:write`, and the read permission of the event type's resource, as
    /// createWebhook does: it goes to whatever URL the subscription has now.
    async fn redeliver_webhook(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The delivery's id (WebhookDelivery.id).")] delivery_id: ID,
    ) -> Result<Option<WebhookDeliveryPayload>> {
        let practice = authorize_write(ctx)?;
        if let Some(found) = practice.find_delivery(&delivery_id).await.or_fail()? {
            every_type_readable(
                authorize(ctx, OperationKind::Mutation)?,
                std::slice::from_ref(&found.event_type),
            )?;
        }
        let change = practice.redeliver(&delivery_id).await.or_fail()?;
        let change = match change {
            Ok(delivery) => Ok(with_attempts(&practice, vec![delivery])
                .await?
                .pop()
                .ok_or_else(|| coded(code::INTERNAL_SERVER_ERROR, "the delivery vanished"))?),
            Err(denied) => Err(denied),
        };
        Ok(envelope(ctx, change, |d| d)?.map(Into::into))
    }
}

/// A webhook operation's payload.
fn payload<P>(ctx: &Context<'_>, change: Change<stored::Webhook>) -> Result<Option<P>>
where
    P: From<super::objects::ResponsePayload<WebhookSubscription>>,
{
    Ok(envelope(ctx, change, WebhookSubscription)?.map(Into::into))
}
