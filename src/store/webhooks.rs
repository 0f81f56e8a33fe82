//! Webhook subscriptions and the outbox of their deliveries. A delivery is written with its
//! event (see `events.rs`); any instance claims the deliveries that are due, for a lease, so
//! that one instance at a time makes each attempt, and an instance that dies lets its claims go
//! when their lease ends.

use std::collections::HashMap;

use sqlx::FromRow;

use super::audit::Event;
use super::{Change, Page, PageRequest, PracticeStore, Store, StoreResult, new_id, now_ms};
use crate::domain::limits::{MAX_ATTEMPTS_LISTED, MAX_OLD_SECRETS};
use crate::domain::{Bound, Record, Refusal};

const SUBSCRIPTION_COLUMNS: &str = "id, url, label, headers, secret, old_secrets, held_until, \
     delivery_paused, failing_since, deleted_at, created_at, updated_at";

/// What a sweep of deliveries deleted ([`Store::forget_deliveries`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Deliveries deleted, with their attempts.
    pub deleted: u64,
    /// Of them, deliveries given up before they were delivered: their subscription stayed
    /// paused longer than the events are kept.
    pub given_up: u64,
}

/// A webhook subscription as stored.
#[derive(Clone, Debug, FromRow)]
pub struct Subscription {
    pub id: String,
    pub url: String,
    pub label: String,
    /// JSON: `[{"key", "value"}]`.
    pub headers: String,
    pub secret: String,
    /// JSON: the old secrets ([`OldSecret`]) that may still sign.
    pub old_secrets: String,
    /// Until when the receiver asked (`Retry-After`) to be sent nothing.
    pub held_until: Option<i64>,
    pub delivery_paused: i64,
    pub failing_since: Option<i64>,
    pub deleted_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A subscription with its event types.
#[derive(Clone, Debug)]
pub struct Webhook {
    pub subscription: Subscription,
    pub event_types: Vec<String>,
}

/// What a new subscription, or a change of one, sets.
#[derive(Clone, Debug, Default)]
pub struct WebhookFields {
    pub url: Option<String>,
    pub label: Option<String>,
    /// JSON: `[{"key", "value"}]`.
    pub headers: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub delivery_paused: Option<bool>,
}

/// A header a subscription adds to its deliveries, as `Subscription::headers` holds them.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct Header {
    pub key: String,
    pub value: String,
}

/// A secret a subscription had, which signs beside its current one until `until`.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct OldSecret {
    pub secret: String,
    pub until: i64,
}

/// The old secrets of `json` ([`Subscription::old_secrets`]) that still sign at `now`.
pub fn old_secrets_at(json: &str, now: i64) -> Vec<OldSecret> {
    let mut old: Vec<OldSecret> = serde_json::from_str(json).unwrap_or_default();
    old.retain(|s| s.until > now);
    old
}

/// A delivery of one event to one subscription, with its latest attempt.
#[derive(Clone, Debug, FromRow)]
pub struct Delivery {
    pub id: String,
    pub subscription_id: String,
    pub event_id: String,
    pub event_type: String,
    /// JSON: the identifiers the body carries.
    pub identifiers: String,
    /// `pending`, `delivered`, `failed` or `paused`.
    pub status: String,
    pub attempts: i64,
    pub next_attempt_at: Option<i64>,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub last_attempt_at: Option<i64>,
    pub created_at: i64,
}

/// One attempt of a delivery.
#[derive(Clone, Debug, FromRow)]
pub struct Attempt {
    pub delivery_id: String,
    pub attempt: i64,
    pub at: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
}

/// A delivery claimed by an instance, with what it takes to send it.
#[derive(Clone, Debug, FromRow)]
pub struct Claimed {
    pub practice_id: String,
    pub id: String,
    pub subscription_id: String,
    pub event_id: String,
    pub event_type: String,
    pub identifiers: String,
    pub attempts: i64,
    /// The attempts made before its schedule started (a redelivery starts one afresh).
    pub schedule_from: i64,
    pub url: String,
    pub headers: String,
    pub secret: String,
    /// JSON: its subscription's old secrets ([`OldSecret`]).
    pub old_secrets: String,
    /// Until when this instance holds it: the claim's own mark. Another instance that took
    /// it over (this one stalled past its lease) set another, and a change that dropped it
    /// took the row: either way this attempt's end is not recorded ([`Store::finish_attempt`]).
    pub lease_until: i64,
}

/// What became of an attempt.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The receiver's status, if it answered.
    pub response_status: Option<u16>,
    /// Why it failed, if it did (no answer, or not a 2xx).
    pub error: Option<String>,
    /// When to try again; None when this was the last attempt, or a success.
    pub retry_at: Option<i64>,
    /// The receiver answered 410 Gone: pause its subscription.
    pub gone: bool,
    /// The receiver asked (`Retry-After`) to be sent nothing until then: every delivery of
    /// its subscription waits.
    pub hold_until: Option<i64>,
}

/// When a pending delivery is due: its next attempt's time, and for the first attempt the
/// schedule's first delay (placeholder `first_delay`) after it.
fn due(first_delay: &str) -> String {
    format!("(next_attempt_at + CASE WHEN attempts = 0 THEN {first_delay} ELSE 0 END)")
}

/// `flying`: how many deliveries of each subscription are in flight (claimed, their lease not
/// run out at `now`, a placeholder).
fn in_flight(now: &str) -> String {
    format!(
        "flying AS (SELECT practice_id, subscription_id, COUNT(*) AS n \
         FROM webhook_deliveries WHERE status = 'pending' AND lease_until >= {now} \
         GROUP BY practice_id, subscription_id)"
    )
}

/// The condition that delivery `d`'s subscription has fewer than `most` (a placeholder) in
/// flight, by [`in_flight`]'s `flying`.
fn below_bound(most: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM flying f WHERE f.practice_id = d.practice_id \
         AND f.subscription_id = d.subscription_id AND f.n >= {most})"
    )
}

/// The condition that delivery `d`'s subscription `s` meets `condition`.
fn subscription_is(condition: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.practice_id = d.practice_id \
         AND s.id = d.subscription_id AND {condition})"
    )
}

/// What a delivery's subscription is for it to be sent: live and not paused. (A write that
/// began before a pause or a delete of its subscription may commit its delivery as `pending`
/// after them, where neither could see it.)
const LIVE: &str = "s.deleted_at IS NULL AND s.delivery_paused = 0";

/// What subscription `s` is while its receiver has not asked (`Retry-After`) to wait: `$1`
/// is now.
const NOT_HELD: &str = "(s.held_until IS NULL OR s.held_until <= $1)";

/// The condition that delivery `d`'s event type is one its subscription sends now: a change
/// of the types drops the deliveries of those it no longer sends that wait (see
/// `update_webhook`), and a write that began before it may commit one behind it.
const TYPE_SENT: &str = "EXISTS (SELECT 1 FROM webhook_event_types t \
     WHERE t.practice_id = d.practice_id AND t.subscription_id = d.subscription_id \
     AND t.event_type = d.event_type)";

/// Marks a paused subscription's deliveries that wait to go out (`pending`) as paused, with
/// no time to go: they go out when delivery resumes. One being sent at `now` (its lease not
/// run out) stays pending and ends as its attempt does (see `finish_attempt`): marked paused,
/// a redelivery could take its lease, and a resume send it again beside the attempt.
async fn hold_waiting(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    practice_id: &str,
    subscription_id: &str,
    now: i64,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE webhook_deliveries SET status = 'paused', next_attempt_at = NULL \
         WHERE practice_id = $1 AND subscription_id = $2 AND status = 'pending' \
         AND (lease_until IS NULL OR lease_until < $3)",
    )
    .bind(practice_id)
    .bind(subscription_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

const DELIVERY_COLUMNS: &str = "id, subscription_id, event_id, event_type, identifiers, status, \
     attempts, next_attempt_at, last_status, last_error, last_attempt_at, created_at";

impl PracticeStore<'_> {
    /// The practice's webhook subscription with this id, deleted ones included.
    pub async fn find_webhook(&self, id: &str) -> StoreResult<Option<Webhook>> {
        let sql = format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions \
             WHERE practice_id = $1 AND id = $2"
        );
        let found: Option<Subscription> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(self.read())
            .await?;
        let Some(subscription) = found else {
            return Ok(None);
        };
        let mut types = self
            .webhook_types(std::slice::from_ref(&subscription.id))
            .await?;
        let event_types = types.remove(&subscription.id).unwrap_or_default();
        Ok(Some(Webhook {
            subscription,
            event_types,
        }))
    }

    /// A page of the practice's webhook subscriptions, newest first.
    pub async fn list_webhooks(
        &self,
        include_deleted: bool,
        page: PageRequest,
    ) -> StoreResult<Page<Webhook>> {
        let deleted = if include_deleted {
            ""
        } else {
            " AND deleted_at IS NULL"
        };
        let sql = format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE practice_id = $1\
             {deleted} ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
        );
        let rows: Vec<Subscription> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(page.limit())
            .bind(page.offset())
            .fetch_all(self.read())
            .await?;
        let page = page.finish(rows);
        let ids: Vec<String> = page.items.iter().map(|s| s.id.clone()).collect();
        let mut types = self.webhook_types(&ids).await?;
        Ok(Page {
            has_more: page.has_more,
            items: page
                .items
                .into_iter()
                .map(|subscription| Webhook {
                    event_types: types.remove(&subscription.id).unwrap_or_default(),
                    subscription,
                })
                .collect(),
        })
    }

    /// The event types of these subscriptions, by subscription.
    async fn webhook_types(&self, ids: &[String]) -> StoreResult<HashMap<String, Vec<String>>> {
        let sql = format!(
            "SELECT subscription_id, event_type FROM webhook_event_types \
             WHERE practice_id = $1 AND subscription_id {} ORDER BY event_type",
            self.store.engine.in_list(2)
        );
        let rows: Vec<(String, String)> = self.read_for_ids(&sql, ids).await?;
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for (id, event_type) in rows {
            out.entry(id).or_default().push(event_type);
        }
        Ok(out)
    }

    /// Adds a subscription with its secret. Refused when a live subscription of the practice
    /// already sends one of the types to the same URL.
    pub async fn create_webhook(
        &self,
        fields: WebhookFields,
        secret: &str,
    ) -> StoreResult<Change<Webhook>> {
        let now = now_ms();
        let id = new_id();
        let mut tx = self.begin_write().await?;
        let url = fields.url.unwrap_or_default();
        let types = fields.event_types.unwrap_or_default();
        // Two at once on PostgreSQL (a retry through two instances) would each find the other
        // not yet there: the practice's row orders them, as SQLite's one writer does.
        self.lock_practice(&mut tx).await?;
        let live = "AND deleted_at IS NULL";
        if self
            .at_bound(&mut tx, "webhook_subscriptions", live, Bound::Webhooks)
            .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::Webhooks).into()));
        }
        if let Some(taken) = self.same_url_and_type(&mut tx, None, &url, &types).await? {
            return Ok(Err(taken.into()));
        }
        sqlx::query(
            "INSERT INTO webhook_subscriptions (practice_id, id, url, label, headers, secret, \
             delivery_paused, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        )
        .bind(self.practice_id)
        .bind(&id)
        .bind(&url)
        .bind(fields.label.unwrap_or_default())
        .bind(fields.headers.unwrap_or_else(|| "[]".into()))
        .bind(secret)
        .bind(i64::from(fields.delivery_paused.unwrap_or(false)))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        self.set_webhook_types(&mut tx, &id, &types).await?;
        self.commit(tx, Event::of("create", "webhook", &id)).await?;
        self.webhook_as_changed(&id).await
    }

    /// Changes a subscription; refused for a deleted one, or when the change would send one of
    /// its types to a URL another live subscription has it for.
    pub async fn update_webhook(
        &self,
        id: &str,
        fields: WebhookFields,
    ) -> StoreResult<Change<Webhook>> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "UPDATE webhook_subscriptions SET updated_at = updated_at \
             WHERE practice_id = $1 AND id = $2 RETURNING {SUBSCRIPTION_COLUMNS}"
        );
        let found: Option<Subscription> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(current) = found else {
            return Ok(Err(
                Refusal::NotFound(Record::Webhook, id.to_string()).into()
            ));
        };
        if current.deleted_at.is_some() {
            return Ok(Err(Refusal::WebhookDeleted.into()));
        }
        let types = match &fields.event_types {
            Some(types) => types.clone(),
            None => self
                .webhook_types(std::slice::from_ref(&current.id))
                .await?
                .remove(&current.id)
                .unwrap_or_default(),
        };
        let url = fields.url.clone().unwrap_or(current.url.clone());
        self.lock_practice(&mut tx).await?;
        if let Some(taken) = self
            .same_url_and_type(&mut tx, Some(id), &url, &types)
            .await?
        {
            return Ok(Err(taken.into()));
        }
        let paused = fields
            .delivery_paused
            .map_or(current.delivery_paused, i64::from);
        // Resumed, or sent to another URL (another receiver), it starts failing afresh: its
        // clock of failures (see `finish_attempt`) starts at its next failure, and a
        // receiver's Retry-After no longer holds it. Any other change keeps both, which are
        // the receiver's whatever the subscription's label or headers. (`current` is the row
        // as this transaction holds it.)
        let afresh = (paused == 0 && current.delivery_paused != 0) || url != current.url;
        sqlx::query(
            "UPDATE webhook_subscriptions SET url = $3, label = $4, headers = $5, \
             delivery_paused = $6, updated_at = $7, \
             failing_since = CASE WHEN $8 <> 0 THEN NULL ELSE failing_since END, \
             held_until = CASE WHEN $8 <> 0 THEN NULL ELSE held_until END \
             WHERE practice_id = $1 AND id = $2",
        )
        .bind(self.practice_id)
        .bind(id)
        .bind(&url)
        .bind(fields.label.unwrap_or(current.label))
        .bind(fields.headers.unwrap_or(current.headers))
        .bind(paused)
        .bind(now_ms().max(current.updated_at))
        .bind(i64::from(afresh))
        .execute(&mut *tx)
        .await?;
        if fields.event_types.is_some() {
            self.set_webhook_types(&mut tx, id, &types).await?;
            // What waits of the types it no longer sends goes, as a delete drops what waits:
            // sent on, it would go to whatever URL the subscription has, though the caller was
            // asked only for the types it sends now. One being sent (to the URL it had) is
            // left to record its attempt; it is not sent again (a claim passes it over), and
            // the sweep deletes it if it is left waiting.
            let sql = format!(
                "DELETE FROM webhook_deliveries AS d WHERE d.practice_id = $1 \
                 AND d.subscription_id = $2 AND d.status IN ('pending', 'paused') \
                 AND (d.lease_until IS NULL OR d.lease_until < $3) AND NOT {TYPE_SENT}"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(self.practice_id)
                .bind(id)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
        }
        if current.delivery_paused == 0 && paused != 0 {
            // Paused by hand: what was to go out waits, retries included, as a pause by the
            // receiver's 410 makes it wait.
            hold_waiting(&mut tx, self.practice_id, id, now_ms()).await?;
        }
        if current.delivery_paused != 0 && paused == 0 {
            // Delivery resumes with what waited while it was paused: nothing is lost.
            sqlx::query(
                "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $3 \
                 WHERE practice_id = $1 AND subscription_id = $2 AND status = 'paused'",
            )
            .bind(self.practice_id)
            .bind(id)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        }
        self.commit(tx, Event::of("update", "webhook", id)).await?;
        self.webhook_as_changed(id).await
    }

    /// Deletes a subscription: a soft delete; its pending deliveries are dropped. Refused for
    /// one deleted already, as a change of it is.
    pub async fn delete_webhook(&self, id: &str) -> StoreResult<Change<Webhook>> {
        let mut tx = self.begin_write().await?;
        let deleted = sqlx::query(
            "UPDATE webhook_subscriptions SET deleted_at = $3, updated_at = $3 \
             WHERE practice_id = $1 AND id = $2 AND deleted_at IS NULL",
        )
        .bind(self.practice_id)
        .bind(id)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        if deleted.rows_affected() == 0 {
            drop(tx);
            return Ok(Err(match self.find_webhook(id).await? {
                None => Refusal::NotFound(Record::Webhook, id.to_string()),
                Some(_) => Refusal::WebhookDeleted,
            }
            .into()));
        }
        sqlx::query(
            "DELETE FROM webhook_deliveries WHERE practice_id = $1 AND subscription_id = $2 \
             AND status IN ('pending', 'paused')",
        )
        .bind(self.practice_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        self.commit(tx, Event::of("delete", "webhook", id)).await?;
        self.webhook_as_changed(id).await
    }

    /// Gives a subscription a new secret; the one it had goes on signing until `old_until`,
    /// beside the old ones that still sign. Refused when [`MAX_OLD_SECRETS`] still do.
    pub async fn rotate_webhook_secret(
        &self,
        id: &str,
        secret: &str,
        old_until: i64,
    ) -> StoreResult<Change<Webhook>> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        // The row, held until the commit: two rotations at once each keep the other's secret.
        let found: Option<(String, String, Option<i64>)> = sqlx::query_as(
            "UPDATE webhook_subscriptions SET updated_at = updated_at \
             WHERE practice_id = $1 AND id = $2 RETURNING secret, old_secrets, deleted_at",
        )
        .bind(self.practice_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let (current, old, deleted_at) = match found {
            None => {
                return Ok(Err(
                    Refusal::NotFound(Record::Webhook, id.to_string()).into()
                ));
            }
            Some(row) => row,
        };
        if deleted_at.is_some() {
            return Ok(Err(Refusal::WebhookDeleted.into()));
        }
        let mut old = old_secrets_at(&old, now);
        if old.len() >= MAX_OLD_SECRETS {
            let until = old.iter().map(|s| s.until).min().unwrap_or(now);
            return Ok(Err(Refusal::SecretsSigning { until }.into()));
        }
        old.push(OldSecret {
            secret: current,
            until: old_until,
        });
        // Strings and numbers only: serialising them cannot fail.
        let old = serde_json::to_string(&old).unwrap_or_else(|_| "[]".into());
        sqlx::query(
            "UPDATE webhook_subscriptions SET old_secrets = $3, secret = $4, updated_at = $5 \
             WHERE practice_id = $1 AND id = $2",
        )
        .bind(self.practice_id)
        .bind(id)
        .bind(old)
        .bind(secret)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        self.commit(tx, Event::of("rotate_secret", "webhook", id))
            .await?;
        self.webhook_as_changed(id).await
    }

    /// A page of a subscription's deliveries of these event types, newest first.
    pub async fn list_deliveries(
        &self,
        subscription_id: &str,
        types: &[String],
        page: PageRequest,
    ) -> StoreResult<Page<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE practice_id = $1 \
             AND subscription_id = $2 AND event_type {} \
             ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
            self.store.engine.in_list(3)
        );
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(subscription_id)
            .bind(super::json_list(types))
            .bind(page.limit())
            .bind(page.offset())
            .fetch_all(self.read())
            .await?;
        Ok(page.finish(rows))
    }

    /// The newest [`MAX_ATTEMPTS_LISTED`] attempts of each of these deliveries, by delivery,
    /// in order.
    pub async fn attempts_of(&self, ids: &[String]) -> StoreResult<HashMap<String, Vec<Attempt>>> {
        let sql = format!(
            "SELECT delivery_id, attempt, at, response_status, error FROM \
             (SELECT a.*, ROW_NUMBER() OVER (PARTITION BY delivery_id ORDER BY attempt DESC) \
             AS newest FROM webhook_attempts a WHERE practice_id = $1 AND delivery_id {}) \
             AS listed WHERE newest <= {MAX_ATTEMPTS_LISTED} ORDER BY attempt",
            self.store.engine.in_list(2)
        );
        let rows: Vec<Attempt> = self.read_for_ids(&sql, ids).await?;
        let mut out: HashMap<String, Vec<Attempt>> = HashMap::new();
        for row in rows {
            out.entry(row.delivery_id.clone()).or_default().push(row);
        }
        Ok(out)
    }

    /// The practice's webhook delivery with this id.
    pub async fn find_delivery(&self, id: &str) -> StoreResult<Option<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE practice_id = $1 AND id = $2"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(self.read())
            .await?)
    }

    /// Sends a delivery again, now, whatever became of it, with a fresh schedule of retries;
    /// while its subscription is paused it waits with the rest (`paused`) and goes out when
    /// delivery resumes. Refused while it is pending (due, or being sent: a pause leaves one
    /// being sent pending), when its subscription is deleted, or when its subscription no
    /// longer sends its event type.
    pub async fn redeliver(&self, id: &str) -> StoreResult<Change<Delivery>> {
        let mut tx = self.begin_write().await?;
        let paused = "(SELECT s.delivery_paused FROM webhook_subscriptions s \
                      WHERE s.practice_id = $1 AND s.id = d.subscription_id) <> 0";
        let sql = format!(
            "UPDATE webhook_deliveries AS d SET \
             status = CASE WHEN {paused} THEN 'paused' ELSE 'pending' END, \
             next_attempt_at = CASE WHEN {paused} THEN NULL ELSE $3 END, \
             lease_until = NULL, schedule_from = attempts \
             WHERE d.practice_id = $1 AND d.id = $2 AND d.status <> 'pending' \
             AND {} AND {TYPE_SENT} RETURNING {DELIVERY_COLUMNS}",
            subscription_is("s.deleted_at IS NULL")
        );
        let updated: Option<Delivery> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .bind(now_ms())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(delivery) = updated else {
            drop(tx);
            // Why not, as it stands now.
            let sql = format!(
                "SELECT d.status, d.event_type, CASE WHEN {} THEN 1 ELSE 0 END, \
                 CASE WHEN {TYPE_SENT} THEN 1 ELSE 0 END FROM webhook_deliveries d \
                 WHERE d.practice_id = $1 AND d.id = $2",
                subscription_is("s.deleted_at IS NOT NULL")
            );
            let found: Option<(String, String, i64, i64)> =
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(self.practice_id)
                    .bind(id)
                    .fetch_optional(self.read())
                    .await?;
            return Ok(Err(match found {
                None => Refusal::NotFound(Record::WebhookDelivery, id.to_string()),
                Some((_, _, 1, _)) => Refusal::WebhookDeleted,
                Some((_, event_type, _, 0)) => Refusal::TypeNotSent(event_type),
                Some(_) => Refusal::DeliveryPending,
            }
            .into()));
        };
        self.commit(tx, Event::of("redeliver", "webhook_delivery", id))
            .await?;
        Ok(Ok(delivery))
    }

    /// The first type of `types` that a live subscription other than `except` already sends
    /// to `url`, if any.
    async fn same_url_and_type(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        except: Option<&str>,
        url: &str,
        types: &[String],
    ) -> StoreResult<Option<Refusal>> {
        let sql = format!(
            "SELECT t.event_type FROM webhook_event_types t JOIN webhook_subscriptions s \
             ON s.practice_id = t.practice_id AND s.id = t.subscription_id \
             WHERE t.practice_id = $1 AND s.url = $2 AND s.deleted_at IS NULL AND s.id <> $3 \
             AND t.event_type {} ORDER BY t.event_type LIMIT 1",
            self.store.engine.in_list(4)
        );
        let taken: Option<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(url)
            .bind(except.unwrap_or(""))
            .bind(super::json_list(types))
            .fetch_optional(&mut **tx)
            .await?;
        Ok(taken.map(|(event_type,)| Refusal::WebhookTaken {
            url: url.to_string(),
            event_type,
        }))
    }

    async fn set_webhook_types(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        id: &str,
        types: &[String],
    ) -> StoreResult<()> {
        sqlx::query(
            "DELETE FROM webhook_event_types WHERE practice_id = $1 AND subscription_id = $2",
        )
        .bind(self.practice_id)
        .bind(id)
        .execute(&mut **tx)
        .await?;
        let sql = format!(
            "INSERT INTO webhook_event_types (practice_id, subscription_id, event_type) \
             SELECT $1, $2, r.value FROM {}",
            self.store.engine.json_rows(3, true)
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .bind(super::json_list(types))
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn webhook_as_changed(&self, id: &str) -> StoreResult<Change<Webhook>> {
        Ok(self
            .find_webhook(id)
            .await?
            .ok_or_else(|| Refusal::NotFound(Record::Webhook, id.to_string()).into()))
    }
}

impl Store {
    /// Claims up to `most` deliveries that are due, in any practice, until `lease_until`, with
    /// at most `per_subscription` of one subscription in flight (counted from the leases
    /// committed, every instance's: two instances claiming at the same moment on PostgreSQL
    /// may pass it together, up to once per instance): a receiver that does not answer holds
    /// that many attempts for their timeout, and every other subscription's deliveries go on.
    /// A delivery not yet attempted is due `first_delay` milliseconds after it was written.
    pub async fn claim_deliveries(
        &self,
        now: i64,
        lease_until: i64,
        most: u32,
        per_subscription: u32,
        first_delay: i64,
    ) -> StoreResult<Vec<Claimed>> {
        let mut tx = self.begin_write().await?;
        // Each due delivery with how many of its subscription's are in flight; those of a
        // subscription at its bound are passed over, and a few times `most` are looked at, so
        // that one subscription's backlog does not fill the look.
        let sql = format!(
            "WITH {} SELECT d.practice_id, d.id, d.subscription_id, \
             COALESCE((SELECT f.n FROM flying f WHERE f.practice_id = d.practice_id \
             AND f.subscription_id = d.subscription_id), 0) FROM webhook_deliveries d \
             WHERE d.status = 'pending' AND {} <= $1 \
             AND (d.lease_until IS NULL OR d.lease_until < $1) AND {} AND {} AND {TYPE_SENT} \
             ORDER BY d.next_attempt_at LIMIT $2{}",
            in_flight("$1"),
            due("$3"),
            below_bound("$4"),
            subscription_is(&format!("{LIVE} AND {NOT_HELD}")),
            self.engine.skip_locked()
        );
        let candidates: Vec<(String, String, String, i64)> =
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(now)
                .bind(i64::from(most.saturating_mul(4)))
                .bind(first_delay)
                .bind(i64::from(per_subscription))
                .fetch_all(&mut *tx)
                .await?;
        let mut taken: HashMap<(String, String), i64> = HashMap::new();
        let mut due = Vec::new();
        for (practice_id, id, subscription_id, flying) in candidates {
            if due.len() >= most as usize {
                break;
            }
            let count = taken
                .entry((practice_id.clone(), subscription_id))
                .or_insert(flying);
            if *count < i64::from(per_subscription) {
                *count += 1;
                due.push((practice_id, id));
            }
        }
        let mut claimed = Vec::with_capacity(due.len());
        for (practice_id, id) in due {
            sqlx::query(
                "UPDATE webhook_deliveries SET lease_until = $3 \
                 WHERE practice_id = $1 AND id = $2",
            )
            .bind(&practice_id)
            .bind(&id)
            .bind(lease_until)
            .execute(&mut *tx)
            .await?;
            let row: Option<Claimed> = sqlx::query_as(
                "SELECT d.practice_id, d.id, d.subscription_id, d.event_id, d.event_type, \
                 d.identifiers, d.attempts, d.schedule_from, s.url, s.headers, s.secret, \
                 s.old_secrets, d.lease_until FROM webhook_deliveries d \
                 JOIN webhook_subscriptions s ON s.practice_id = d.practice_id \
                 AND s.id = d.subscription_id WHERE d.practice_id = $1 AND d.id = $2",
            )
            .bind(&practice_id)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await?;
            claimed.extend(row);
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// Records an attempt of a claimed delivery and what comes next: delivered, tried again
    /// later, failed for good, or paused with its subscription (410 Gone, or failing for
    /// `give_up_after` milliseconds).
    pub async fn finish_attempt(
        &self,
        delivery: &Claimed,
        outcome: &Outcome,
        give_up_after: i64,
    ) -> StoreResult<()> {
        let now = now_ms();
        let attempt = delivery.attempts + 1;
        let success = outcome.error.is_none();
        let mut tx = self.begin_write().await?;
        // The subscription's row before the delivery's (which the attempt's foreign key
        // holds), as deleteWebhook and updateWebhook take them: on PostgreSQL they wait for
        // each other rather than deadlock. Failing since when: cleared by a success, kept
        // from the first failure.
        let failing_since: Option<(Option<i64>, i64)> = sqlx::query_as(
            "UPDATE webhook_subscriptions SET failing_since = CASE WHEN $3 = 1 THEN NULL \
             ELSE COALESCE(failing_since, $4) END WHERE practice_id = $1 AND id = $2 \
             RETURNING failing_since, delivery_paused",
        )
        .bind(&delivery.practice_id)
        .bind(&delivery.subscription_id)
        .bind(i64::from(success))
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let failing_for = failing_since
            .and_then(|(since, _)| since)
            .map_or(0, |since| now - since);
        // Paused by hand while this attempt was on its way: its retry waits with the rest.
        let paused = failing_since.is_some_and(|(_, paused)| paused != 0);
        let pause = outcome.gone || (!success && failing_for >= give_up_after);
        let status = match (success, pause, outcome.retry_at) {
            (true, _, _) => "delivered",
            (false, true, _) => "paused",
            (false, false, Some(_)) if paused => "paused",
            (false, false, Some(_)) => "pending",
            (false, false, None) => "failed",
        };
        // Only while the claim is this attempt's: one that another instance took over (this
        // one stalled past its lease, or the clocks differ by more than it), or that a change
        // of the subscription's types dropped, is not this attempt's to record.
        let held = sqlx::query(
            "UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5, \
             lease_until = NULL, last_status = $6, last_error = $7, last_attempt_at = $8 \
             WHERE practice_id = $1 AND id = $2 AND status = 'pending' AND lease_until = $9",
        )
        .bind(&delivery.practice_id)
        .bind(&delivery.id)
        .bind(status)
        .bind(attempt)
        .bind(if status == "pending" {
            outcome.retry_at
        } else {
            None
        })
        .bind(outcome.response_status.map(i64::from))
        .bind(&outcome.error)
        .bind(now)
        .bind(delivery.lease_until)
        .execute(&mut *tx)
        .await?;
        if held.rows_affected() == 0 {
            tracing::info!(
                delivery = %delivery.id,
                "a webhook attempt ended after its claim was taken over or dropped: not recorded"
            );
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO webhook_attempts (practice_id, delivery_id, attempt, at, \
             response_status, error) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&delivery.practice_id)
        .bind(&delivery.id)
        .bind(attempt)
        .bind(now)
        .bind(outcome.response_status.map(i64::from))
        .bind(&outcome.error)
        .execute(&mut *tx)
        .await?;
        if let Some(until) = outcome.hold_until {
            // Every delivery of the subscription waits, not only this one.
            sqlx::query(
                "UPDATE webhook_subscriptions SET held_until = $3 WHERE practice_id = $1 \
                 AND id = $2 AND (held_until IS NULL OR held_until < $3)",
            )
            .bind(&delivery.practice_id)
            .bind(&delivery.subscription_id)
            .bind(until)
            .execute(&mut *tx)
            .await?;
        }
        if pause {
            sqlx::query(
                "UPDATE webhook_subscriptions SET delivery_paused = 1, updated_at = $3 \
                 WHERE practice_id = $1 AND id = $2",
            )
            .bind(&delivery.practice_id)
            .bind(&delivery.subscription_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            // The others that wait.
            hold_waiting(
                &mut tx,
                &delivery.practice_id,
                &delivery.subscription_id,
                now,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Marks paused the deliveries left pending in a paused subscription by an attempt
    /// whose instance died, and deletes deliveries that wait for nothing, with their
    /// attempts: up to `batch` made
    /// before `before` that were delivered or failed, or that wait paused in a subscription
    /// paused since before `before`; and up to `batch` more, whenever made, of a deleted
    /// subscription (a write may commit one behind the delete, which never goes out). A
    /// paused delivery waits for its subscription to be resumed as long as the events are
    /// kept, and no longer: otherwise a subscription paused and forgotten (its receiver gone,
    /// answering 410) would keep a row for every event, for ever. A delivery that changed
    /// since it was read (a resume set it going) is left alone.
    pub async fn forget_deliveries(&self, before: i64, batch: u32) -> StoreResult<Forgotten> {
        let mut tx = self.begin_write().await?;
        // A delivery whose attempt's instance died while its subscription was paused stayed
        // pending (a pause leaves one being sent to its attempt's end): past its lease, it
        // waits paused with the rest, and goes out when delivery resumes.
        let sql = format!(
            "UPDATE webhook_deliveries AS d SET status = 'paused', next_attempt_at = NULL, \
             lease_until = NULL WHERE d.status = 'pending' AND d.lease_until < $1 AND {}",
            subscription_is("s.delivery_paused <> 0 AND s.deleted_at IS NULL")
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        let sql = format!(
            "SELECT practice_id, id, status, 'aged' FROM (SELECT d.practice_id, d.id, d.status \
             FROM webhook_deliveries d WHERE d.created_at < $1 \
             AND (d.status IN ('delivered', 'failed') OR (d.status = 'paused' AND {})) \
             LIMIT $2) aged \
             UNION ALL SELECT practice_id, id, status, 'orphaned' FROM (SELECT d.practice_id, \
             d.id, d.status FROM webhook_deliveries d WHERE d.status IN ('pending', 'paused') \
             AND ({} OR NOT {TYPE_SENT}) LIMIT $2) orphaned",
            subscription_is("s.delivery_paused <> 0 AND s.updated_at < $1"),
            subscription_is("s.deleted_at IS NOT NULL")
        );
        let old: Vec<(String, String, String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(before)
            .bind(i64::from(batch))
            .fetch_all(&mut *tx)
            .await?;
        let mut forgotten = Forgotten::default();
        for (practice_id, id, status, why) in &old {
            // As it was read: on PostgreSQL a resume may have committed since, and a delivery
            // of a deleted subscription's may be listed twice.
            let gone = sqlx::query(
                "DELETE FROM webhook_deliveries WHERE practice_id = $1 AND id = $2 \
                 AND status = $3",
            )
            .bind(practice_id)
            .bind(id)
            .bind(status)
            .execute(&mut *tx)
            .await?;
            if gone.rows_affected() == 0 {
                continue;
            }
            sqlx::query("DELETE FROM webhook_attempts WHERE practice_id = $1 AND delivery_id = $2")
                .bind(practice_id)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            forgotten.deleted += 1;
            if status == "paused" && why == "aged" {
                forgotten.given_up += 1;
            }
        }
        tx.commit().await?;
        Ok(forgotten)
    }

    /// When the next pending delivery is due (and not held by a claim), if any is; see
    /// [`Store::claim_deliveries`] for `first_delay`.
    pub async fn next_delivery_due(
        &self,
        first_delay: i64,
        per_subscription: u32,
    ) -> StoreResult<Option<i64>> {
        let due = due("$1");
        // A subscription with as many in flight as it may have waits for one of them to end
        // (which wakes the worker), not for its next delivery's time; one whose receiver asked
        // to wait, until it said.
        // Only what a claim would take: a delivery a write left pending behind a pause or a
        // delete of its subscription, or a change of its types, waits for nothing, and must
        // not wake the worker again and again for a claim that passes it over.
        let at = format!(
            "CASE WHEN d.lease_until IS NOT NULL AND d.lease_until > {due} THEN d.lease_until \
             ELSE {due} END"
        );
        let sql = format!(
            "WITH {} SELECT MIN(CASE WHEN s.held_until IS NOT NULL AND s.held_until > {at} \
             THEN s.held_until ELSE {at} END) FROM webhook_deliveries d \
             JOIN webhook_subscriptions s ON s.practice_id = d.practice_id \
             AND s.id = d.subscription_id \
             WHERE d.status = 'pending' AND {} AND {LIVE} AND {TYPE_SENT}",
            in_flight("$2"),
            below_bound("$3"),
        );
        let next: Option<(Option<i64>,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(first_delay)
            .bind(now_ms())
            .bind(i64::from(per_subscription))
            .fetch_optional(&self.reader)
            .await?;
        Ok(next.and_then(|(at,)| at))
    }
}

impl super::Engine {
    /// What ends a SELECT of rows to claim: PostgreSQL passes rows another transaction is
    /// claiming; SQLite claims one transaction at a time anyway.
    fn skip_locked(self) -> &'static str {
        match self {
            super::Engine::Sqlite => "",
            super::Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }
}
