//! The event log: each change's events, written in the change's own transaction with its audit
//! record (see [`PracticeStore::record_in`]), and the webhook deliveries they are due.
//!
//! Events are read in the order of their [`Position`]: the writing transaction, then the order
//! within it. On PostgreSQL a reader reads only events of transactions older than the oldest
//! one still running (`Engine::visible_events`): no transaction can commit an event before a
//! position a reader has passed, so a reader that follows positions never skips an event.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};
use sqlx::{Any, FromRow, Transaction};

use super::audit::Event as AuditEvent;
use super::{Engine, PracticeStore, Store, StoreResult, now_ms};

/// The event types clients see: the dotted names of the specified API's webhooks.
pub const EVENT_TYPES: &[&str] = &[
    "patient.created",
    "patient.updated",
    "patient.deleted",
    "patient.archived",
    "patient.unarchived",
    "patient.label.added",
    "patient.label.removed",
    "patient.phone.added",
    "patient.phone.updated",
    "patient.phone.removed",
    "patient.number.added",
    "patient.number.updated",
    "patient.number.removed",
    "patient.customAttribute.added",
    "patient.customAttribute.updated",
    "patient.customAttribute.removed",
    "patient.relationship.added",
    "patient.relationship.updated",
    "patient.relationship.removed",
    "patient.membership.updated",
    "booking.created",
    "booking.updated",
    "booking.deleted",
    "booking.patientJourney.arrived",
    "booking.patientJourney.inConsultation",
    "booking.patientJourney.completed",
    "booking.patientJourney.noShow",
    "label.created",
    "label.updated",
    "label.deleted",
    "product.created",
    "product.updated",
    "location.created",
    "location.updated",
    "accessGroup.created",
    "practiceNumber.created",
];

/// An internal event: a token that no longer works (revoked, signed out).
pub const TOKEN_REVOKED: &str = "token.revoked";
/// An internal event: a staff user whose sessions or permissions changed.
pub const USER_CHANGED: &str = "user.changed";

/// How far the retention's sweep has deleted a practice's events (the last position it
/// deleted), as [`PracticeStore::event_floors`] reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Floors {
    /// Of every type: past it, the practice's log holds nothing older.
    pub all: Option<Position>,
    /// Of the types asked about: a cursor before it has missed events of those types.
    pub of_types: Option<Position>,
}

/// Where an event stands in the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The writing transaction (always 0 on SQLite, which writes one at a time).
    pub tx: i64,
    /// The event's own number.
    pub id: i64,
}

impl Position {
    /// The event's public id: opaque, increasing.
    pub fn encode(self) -> String {
        format!("{:016x}{:016x}", self.tx, self.id)
    }

    /// A public id read back; None if it is not one.
    pub fn decode(text: &str) -> Option<Position> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let tx = i64::from_str_radix(&text[..16], 16).ok()?;
        let id = i64::from_str_radix(&text[16..], 16).ok()?;
        Some(Position { tx, id })
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

/// An event as stored.
#[derive(Clone, Debug, FromRow, PartialEq, Eq)]
pub struct StoredEvent {
    pub id: i64,
    pub tx_id: i64,
    pub practice_id: String,
    pub event_type: String,
    pub occurred_at: i64,
    pub patient_id: Option<String>,
    pub booking_id: Option<String>,
    pub label_id: Option<String>,
    pub token_id: Option<String>,
    pub user_id: Option<String>,
    /// The record of the catalogue a `product.*`, `location.*`, `accessGroup.created` or
    /// `practiceNumber.created` event names.
    pub record_id: Option<String>,
}

impl StoredEvent {
    pub fn position(&self) -> Position {
        Position {
            tx: self.tx_id,
            id: self.id,
        }
    }

    /// True for the changes of a token or its user ([`TOKEN_REVOKED`], [`USER_CHANGED`]): what
    /// a connection's guard and its subscriptions check their token again at.
    pub fn is_about_tokens(&self) -> bool {
        matches!(self.event_type.as_str(), TOKEN_REVOKED | USER_CHANGED)
    }

    /// True for the types clients see.
    pub fn is_public(&self) -> bool {
        EVENT_TYPES.contains(&self.event_type.as_str())
    }

    /// The catalogue's record the event names, when its type is `kind.*`.
    pub fn record_of(&self, kind: &str) -> Option<String> {
        let of_kind = self.event_type.split('.').next() == Some(kind);
        self.record_id.clone().filter(|_| of_kind)
    }

    /// The identifiers a webhook's body carries, those that are set.
    pub fn identifiers(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (key, value) in [
            ("patientId", &self.patient_id),
            ("bookingId", &self.booking_id),
            ("labelId", &self.label_id),
            ("productId", &self.record_of("product")),
            ("locationId", &self.record_of("location")),
            ("accessGroupId", &self.record_of("accessGroup")),
            ("practiceNumberId", &self.record_of("practiceNumber")),
        ] {
            if let Some(value) = value {
                out.insert(key.into(), json!(value));
            }
        }
        Value::Object(out)
    }
}

const EVENT_COLUMNS: &str = "id, tx_id, practice_id, event_type, occurred_at, patient_id, \
                             booking_id, label_id, token_id, user_id, record_id";

/// The event a write makes, if it makes one: its type and identifiers, from what the audit
/// log records of it.
fn event_of(write: &AuditEvent<'_>) -> Option<[Option<String>; 7]> {
    let resource = Some(write.resource_id.to_string());
    let patient = write.patient_id.map(str::to_string);
    let kind = match (write.resource_type, write.action) {
        ("patient", "create") => "patient.created",
        ("patient", "update") => "patient.updated",
        ("patient", "delete") => "patient.deleted",
        ("patient", "archive") => "patient.archived",
        ("patient", "unarchive") => "patient.unarchived",
        ("patient", "phone_added") => "patient.phone.added",
        ("patient", "phone_updated") => "patient.phone.updated",
        ("patient", "phone_removed") => "patient.phone.removed",
        ("patient", "number_added") => "patient.number.added",
        ("patient", "number_updated") => "patient.number.updated",
        ("patient", "number_removed") => "patient.number.removed",
        ("patient", "attribute_added") => "patient.customAttribute.added",
        ("patient", "attribute_updated") => "patient.customAttribute.updated",
        ("patient", "attribute_removed") => "patient.customAttribute.removed",
        ("patient", "relationship_added") => "patient.relationship.added",
        ("patient", "relationship_updated") => "patient.relationship.updated",
        ("patient", "relationship_removed") => "patient.relationship.removed",
        ("patient", "membership_updated" | "membership_removed") => "patient.membership.updated",
        ("patient", "access_group_added" | "access_group_removed") => "patient.updated",
        ("label", "add_label") => "patient.label.added",
        ("label", "remove_label") => "patient.label.removed",
        ("label", "create") => "label.created",
        ("label", "update") => "label.updated",
        ("label", "delete") => "label.deleted",
        ("booking", "create") => "booking.created",
        ("booking", "update" | "update_metadata" | "delete_metadata") => "booking.updated",
        ("booking", "journey_arrived") => "booking.patientJourney.arrived",
        ("booking", "journey_consultation") => "booking.patientJourney.inConsultation",
        ("booking", "journey_departed") => "booking.patientJourney.completed",
        ("booking", "journey_dna") => "booking.patientJourney.noShow",
        ("booking", "delete") => "booking.deleted",
        ("product", "create") => "product.created",
        ("product", "update") => "product.updated",
        ("location", "create") => "location.created",
        ("location", "update") => "location.updated",
        ("access_group", "create") => "accessGroup.created",
        ("number_definition", "create") => "practiceNumber.created",
        ("token", "revoke" | "sign_out" | "revoke_session") => TOKEN_REVOKED,
        (
            "user",
            "update" | "disable" | "enable" | "reset_password" | "change_password" | "set_password",
        ) => USER_CHANGED,
        _ => return None,
    };
    let (booking, label, token, user, record) = match write.resource_type {
        "booking" => (resource, None, None, None, None),
        "label" => (None, resource, None, None, None),
        "token" => (None, None, resource, None, None),
        "user" => (None, None, None, resource, None),
        "product" | "location" | "access_group" | "number_definition" => {
            (None, None, None, None, resource)
        }
        _ => (None, None, None, None, None),
    };
    Some([
        Some(kind.to_string()),
        patient,
        booking,
        label,
        token,
        user,
        record,
    ])
}

impl PracticeStore<'_> {
    /// Writes the events of `writes` in `tx`, and the webhook deliveries they are due.
    pub(super) async fn record_events(
        &self,
        tx: &mut Transaction<'_, Any>,
        writes: &[AuditEvent<'_>],
    ) -> StoreResult<()> {
        let rows: Vec<Value> = writes
            .iter()
            .filter_map(event_of)
            .map(|e| json!(e))
            .collect();
        if rows.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let sql = format!(
            "INSERT INTO events (practice_id, occurred_at, event_type, patient_id, booking_id, \
             label_id, token_id, user_id, record_id) \
             SELECT $1, $2, r.value->>0, r.value->>1, r.value->>2, r.value->>3, r.value->>4, \
             r.value->>5, r.value->>6 FROM {} RETURNING {EVENT_COLUMNS}",
            self.store.engine.json_rows(3, false)
        );
        let written: Vec<StoredEvent> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(now)
            .bind(Value::Array(rows).to_string())
            .fetch_all(&mut **tx)
            .await?;
        let due: Vec<Value> = written
            .iter()
            .filter(|e| e.is_public())
            .map(|e| {
                json!([
                    e.position().encode(),
                    e.event_type,
                    e.identifiers().to_string()
                ])
            })
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "INSERT INTO webhook_deliveries (practice_id, id, subscription_id, event_id, \
             event_type, identifiers, status, next_attempt_at, created_at) \
             SELECT $1, s.id || ':' || (r.value->>0), s.id, r.value->>0, r.value->>1, \
             r.value->>2, CASE WHEN s.delivery_paused = 0 THEN 'pending' ELSE 'paused' END, \
             CASE WHEN s.delivery_paused = 0 THEN $2 END, $2 FROM {} \
             JOIN webhook_event_types t ON t.practice_id = $1 AND t.event_type = r.value->>1 \
             JOIN webhook_subscriptions s ON s.practice_id = t.practice_id \
             AND s.id = t.subscription_id \
             WHERE s.deleted_at IS NULL",
            self.store.engine.json_rows(3, false)
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(now)
            .bind(Value::Array(due).to_string())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The practice's events after `after` (all kept ones when None), of `types`, in order;
    /// at most `limit`.
    pub async fn events_after(
        &self,
        after: Option<Position>,
        types: &[String],
        limit: u32,
    ) -> StoreResult<Vec<StoredEvent>> {
        let after = self
            .store
            .engine
            .seek(after.unwrap_or(Position { tx: -1, id: -1 }));
        // A viewer kept to their access groups sees no event of a patient outside them.
        let hidden = match self.viewer {
            None => String::new(),
            Some(_) => format!(
                " AND (events.patient_id IS NULL OR EXISTS (SELECT 1 FROM patients \
                 WHERE patients.practice_id = events.practice_id \
                 AND patients.id = events.patient_id{}))",
                self.visible_patients_at("patients", "$6")
            ),
        };
        let sql = practice_events_after(self.store.engine, &hidden);
        let query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(after.tx)
            .bind(after.id)
            .bind(super::json_list(types))
            .bind(i64::from(limit));
        let query = match self.viewer {
            Some(groups) => query.bind(super::json_list(groups)),
            None => query,
        };
        Ok(query.fetch_all(self.read()).await?)
    }

    /// Where this practice's log ends now: the position of its last event readers can see,
    /// of any type and whoever it is about, or None before its first (or once all are swept
    /// away). No event to come is before it.
    pub async fn last_event_position(&self) -> StoreResult<Option<Position>> {
        let sql = format!(
            "SELECT tx_id, id FROM events WHERE practice_id = $1 AND {} \
             ORDER BY tx_id DESC, id DESC LIMIT 1",
            self.store.engine.visible_events()
        );
        let last: Option<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .fetch_optional(self.read())
            .await?;
        Ok(last.map(|(tx, id)| Position { tx, id }))
    }

    /// Where the sweep has reached in this practice's log: the last event it deleted, of any
    /// type (the highest of the types' floors), and of the types `types`. A cursor before the
    /// second asks for events of those types that were deleted; one before the first only for
    /// events of other types, when the two differ. One statement.
    pub async fn event_floors(&self, types: &[String]) -> StoreResult<Floors> {
        let highest = |kind: &str, condition: &str| {
            format!(
                "SELECT * FROM (SELECT '{kind}', tx_id, id FROM event_type_floors \
                 WHERE practice_id = $1{condition} ORDER BY tx_id DESC, id DESC LIMIT 1) AS floor_{kind}"
            )
        };
        let sql = format!(
            "{} UNION ALL {}",
            highest("all", ""),
            highest(
                "types",
                &format!(" AND event_type {}", self.store.engine.in_list(2))
            )
        );
        let found: Vec<(String, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(super::json_list(types))
            .fetch_all(self.read())
            .await?;
        let mut floors = Floors::default();
        for (kind, tx, id) in found {
            let floor = Some(Position { tx, id });
            match kind.as_str() {
                "all" => floors.all = floor,
                _ => floors.of_types = floor,
            }
        }
        Ok(floors)
    }
}

impl Store {
    /// The events of every practice after `after`, in order, at most `limit`: what an
    /// instance hands its live subscribers. (The one read of events across practices, as the
    /// sweeps are: each event goes on to its own practice's subscribers only.)
    pub async fn all_events_after(
        &self,
        after: Position,
        limit: u32,
    ) -> StoreResult<Vec<StoredEvent>> {
        let after = self.engine.seek(after);
        let sql = all_events_after(self.engine);
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(after.tx)
            .bind(after.id)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?)
    }

    /// The last position the log has reached: that of the last event readers can see now, or
    /// of the last one the sweep deleted if that is later (every event is swept away). No
    /// event to come is before it, and no practice's floor after it. (Across practices, as
    /// the hub that asks reads the log.)
    pub async fn last_position(&self) -> StoreResult<Position> {
        let sql = format!(
            "SELECT tx_id, id FROM events WHERE {} ORDER BY tx_id DESC, id DESC LIMIT 1",
            self.engine.visible_events()
        );
        let last: Option<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_optional(&self.reader)
            .await?;
        let floor: Option<(i64, i64)> = sqlx::query_as(
            "SELECT tx_id, id FROM event_type_floors ORDER BY tx_id DESC, id DESC LIMIT 1",
        )
        .fetch_optional(&self.reader)
        .await?;
        let at = |found: Option<(i64, i64)>| {
            found.map_or(Position::default(), |(tx, id)| Position { tx, id })
        };
        Ok(at(last).max(at(floor)))
    }

    /// Deletes up to `batch` events that occurred before `before`, in every practice, the
    /// oldest first, and raises the floors of their types past them; returns how many it
    /// deleted. The events are found by the index of their time, so a batch reads what it
    /// deletes rather than the whole log (which it did when it went in the order of positions,
    /// and found nothing old).
    pub async fn forget_events(&self, before: i64, batch: u32) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        let deleted: Vec<(String, String, i64, i64)> = sqlx::query_as(
            "DELETE FROM events WHERE (practice_id, id) IN (SELECT practice_id, id FROM events \
             WHERE occurred_at < $1 ORDER BY occurred_at, id LIMIT $2) \
             RETURNING practice_id, event_type, tx_id, id",
        )
        .bind(before)
        .bind(i64::from(batch))
        .fetch_all(&mut *tx)
        .await?;
        // Each type's floor is the highest position of the practice's events of that type
        // deleted (the practice's, the highest of its types'): a cursor at or after it has
        // missed nothing of that type. Events go by time, not by position, so a floor only
        // ever rises.
        let mut floors: BTreeMap<(&str, &str), (i64, i64)> = BTreeMap::new();
        for (practice, event_type, tx_id, id) in &deleted {
            let at = (*tx_id, *id);
            let floor = floors
                .entry((practice.as_str(), event_type.as_str()))
                .or_insert(at);
            *floor = (*floor).max(at);
        }
        for ((practice, event_type), (floor_tx, floor_id)) in floors {
            sqlx::query(
                "INSERT INTO event_type_floors (practice_id, event_type, tx_id, id) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (practice_id, event_type) DO UPDATE SET tx_id = excluded.tx_id, \
                 id = excluded.id WHERE excluded.tx_id > event_type_floors.tx_id \
                 OR (excluded.tx_id = event_type_floors.tx_id \
                 AND excluded.id > event_type_floors.id)",
            )
            .bind(practice)
            .bind(event_type)
            .bind(floor_tx)
            .bind(floor_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(deleted.len() as u64)
    }

    /// Puts the events of a PostgreSQL database restored into another server (`pg_restore`)
    /// back in reach. Their `tx_id`s are the old server's transaction ids, which the new
    /// server's do not reach for a long while: readers, who see the events of transactions
    /// older than the oldest still running, would not see them, and the new events, of
    /// smaller ids, would come before them, behind the hub's start and every cursor. Found
    /// at start, when the log holds events of transactions later than any this server has
    /// begun (which a database that was not restored cannot hold), every event then in the
    /// log is moved to transaction 0, in the order of its id (the order of the old server's
    /// commits, but for transactions that committed at the same moment), and so is every
    /// practice's floor: the new server's events come after them all. Their ids change with
    /// their place (a webhook delivery keeps the `eventId` it was made with). A cursor from
    /// before the restore is then past the end of the log, and said to be (`CURSOR_EXPIRED`),
    /// until the new server's transaction ids pass it: integrations start again without one.
    /// Nothing on SQLite, whose events all have `tx_id` 0. Returns how many it moved.
    pub(super) async fn rebase_restored_events(&self) -> StoreResult<u64> {
        if self.engine != Engine::Postgres {
            return Ok(0);
        }
        // Whether the log holds a position at or past the transaction id `next`.
        let ahead = |next: &str| {
            format!(
                "SELECT EXISTS (SELECT 1 FROM events WHERE tx_id >= {next}) \
                 OR EXISTS (SELECT 1 FROM event_type_floors WHERE tx_id >= {next})"
            )
        };
        let next = "pg_snapshot_xmax(pg_current_snapshot())::text::bigint";
        let restored: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(ahead(next)))
            .fetch_one(&self.write)
            .await?;
        if !restored {
            return Ok(0);
        }
        // Once, whichever instance starts first: the others wait for the lock, then find
        // nothing ahead (their own transaction's id is past every event's).
        let mut tx = self.write.begin().await?;
        sqlx::query("LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await?;
        let own = "pg_current_xact_id()::text::bigint";
        let still: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(ahead(own)))
            .fetch_one(&mut *tx)
            .await?;
        if !still {
            return Ok(0);
        }
        let moved = sqlx::query("UPDATE events SET tx_id = 0 WHERE tx_id <> 0")
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("UPDATE event_type_floors SET tx_id = 0 WHERE tx_id <> 0")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        tracing::warn!(
            moved,
            "the event log held events of transactions later than this database server's: \
             restored from a backup into another server, it seems. They now come before the \
             new events, in order, with new ids; integrations should start their feeds and \
             subscriptions again without a cursor"
        );
        Ok(moved)
    }
}

/// The events of every practice after the position `($1, $2)`, at most `$3`.
fn all_events_after(engine: Engine) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE {} AND {} ORDER BY tx_id, id LIMIT $3",
        engine.after_position("$1", "$2"),
        engine.visible_events()
    )
}

/// The events of practice `$1` after the position `($2, $3)`, of the types in the list `$4`,
/// at most `$5`, with the condition `hidden` besides.
fn practice_events_after(engine: Engine, hidden: &str) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE practice_id = $1 AND {} \
         AND event_type {} AND {}{hidden} ORDER BY tx_id, id LIMIT $5",
        engine.after_position("$2", "$3"),
        engine.in_list(4),
        engine.visible_events()
    )
}

impl Engine {
    /// A condition on `events` that holds for the events every reader can see for good: on
    /// PostgreSQL, those of transactions older than the oldest still running.
    fn visible_events(self) -> &'static str {
        match self {
            Engine::Sqlite => "1 = 1",
            Engine::Postgres => "tx_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
        }
    }

    /// A condition on `events` that holds for the events after the position whose `tx` and
    /// `id` are the parameters named, as [`Engine::seek`] gives it: one the index on
    /// `(tx_id, id)` seeks to. (`tx_id > $a OR (tx_id = $a AND id > $b)`, the same in
    /// words, is read by both engines as a range on `tx_id` alone: every event before the
    /// position was read and passed over, at every read of the log.)
    fn after_position(self, tx: &str, id: &str) -> String {
        match self {
            Engine::Sqlite => format!("tx_id = {tx} AND id > {id}"),
            Engine::Postgres => format!("(tx_id, id) > ({tx}, {id})"),
        }
    }

    /// `after` as [`Engine::after_position`] takes it. On SQLite, whose events all have
    /// `tx_id` 0, a position of another transaction is put before or after all of them.
    fn seek(self, after: Position) -> Position {
        match (self, after.tx.cmp(&0)) {
            (Engine::Postgres, _) | (Engine::Sqlite, std::cmp::Ordering::Equal) => after,
            (Engine::Sqlite, std::cmp::Ordering::Less) => Position {
                tx: 0,
                id: i64::MIN,
            },
            (Engine::Sqlite, std::cmp::Ordering::Greater) => Position {
                tx: 0,
                id: i64::MAX,
            },
        }
    }
}

/// PostgreSQL's notifications of events committed through any instance (the `events_notify`
/// trigger); nothing on SQLite. See [`Store::event_notifications`].
pub struct EventNotifications {
    listener: Option<sqlx::postgres::PgListener>,
}

/// The channel the trigger notifies.
const EVENTS_CHANNEL: &str = "practice_events";

impl Store {
    /// Listens for the events committed through any instance: on PostgreSQL, a connection of
    /// its own; on SQLite, or when it cannot listen (said in the log), nothing ever comes,
    /// and the reader polls.
    pub async fn event_notifications(&self) -> EventNotifications {
        if self.engine() != Engine::Postgres {
            return EventNotifications { listener: None };
        }
        // sqlx connects it again by itself when it is lost; the poll covers the gap.
        let listener = match super::listen(self.url(), EVENTS_CHANNEL, true).await {
            Ok(listener) => Some(listener),
            Err(error) => {
                tracing::warn!(%error, "could not listen for events; polling instead");
                None
            }
        };
        EventNotifications { listener }
    }
}

impl EventNotifications {
    /// Completes at the next notification (or never, without a listener). A connection lost
    /// is reconnected by sqlx on the next call, a second later; meanwhile the poll goes on.
    pub async fn next(&mut self) {
        match &mut self.listener {
            Some(listener) => {
                if let Err(error) = listener.recv().await {
                    tracing::warn!(%error, "lost the event notifications; reconnecting");
                    tokio::time::sleep(super::RELISTEN_AFTER).await;
                }
                // One read covers every commit notified so far.
                while listener.next_buffered().is_some() {}
            }
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{PoolSettings, Store};

    /// On SQLite every event has `tx_id` 0: a position of another transaction is before or
    /// after all of them, as it is by the order of positions.
    #[test]
    fn a_position_is_sought_where_it_falls() {
        let at = |tx, id| Position { tx, id };
        assert_eq!(Engine::Sqlite.seek(at(0, 41)), at(0, 41));
        assert_eq!(Engine::Sqlite.seek(at(-1, -1)), at(0, i64::MIN));
        assert_eq!(Engine::Sqlite.seek(at(3, 1)), at(0, i64::MAX));
        assert_eq!(Engine::Postgres.seek(at(-1, -1)), at(-1, -1));
        assert_eq!(Engine::Postgres.seek(at(7, 2)), at(7, 2));
    }

    /// The plans of the reads after a position on `store` (EXPLAIN's lines): the hub's, then
    /// a practice's, with sequential scans ruled out on PostgreSQL, whose planner would read
    /// a table this small whole whatever its indexes.
    async fn plans(store: &Store) -> [String; 2] {
        let engine = store.engine;
        let mut tx = store.read.begin().await.expect("begin");
        let explain = match engine {
            Engine::Sqlite => "EXPLAIN QUERY PLAN",
            Engine::Postgres => {
                sqlx::query("SET LOCAL enable_seqscan = off")
                    .execute(&mut *tx)
                    .await
                    .expect("set");
                "EXPLAIN"
            }
        };
        let after = engine.seek(Position { tx: 0, id: 5 });
        let all = format!("{explain} {}", all_events_after(engine));
        let all = sqlx::query(sqlx::AssertSqlSafe(all))
            .bind(after.tx)
            .bind(after.id)
            .bind(100_i64)
            .fetch_all(&mut *tx)
            .await
            .expect("plan");
        let practice = format!("{explain} {}", practice_events_after(engine, ""));
        let practice = sqlx::query(sqlx::AssertSqlSafe(practice))
            .bind("p")
            .bind(after.tx)
            .bind(after.id)
            .bind("[\"label.created\"]")
            .bind(100_i64)
            .fetch_all(&mut *tx)
            .await
            .expect("plan");
        let column = usize::from(engine == Engine::Sqlite) * 3;
        [all, practice].map(|rows| {
            rows.iter()
                .map(|row| sqlx::Row::get::<String, _>(row, column))
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    /// The reads of the log after a position (the hub's, after every commit while anyone
    /// listens, and a subscription's catch-up) seek to it through an index on `(tx_id, id)`
    /// on both engines, rather than reading every event before it again.
    #[tokio::test]
    async fn the_log_is_read_from_a_position_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sqlite = format!("sqlite://{}", dir.path().join("events.db").display());
        let postgres = crate::store::tests::postgres_database().await;
        let urls =
            std::iter::once(sqlite.as_str()).chain(postgres.as_ref().map(|p| p.url.as_str()));
        for url in urls {
            let store = Store::open(url, &PoolSettings::default())
                .await
                .expect("open");
            let [all, practice] = plans(&store).await;
            let (all_seeks, practice_seeks) = match store.engine {
                Engine::Sqlite => (
                    all.contains("events_by_position (tx_id=? AND id>?)"),
                    practice.contains("events_by_practice (practice_id=? AND tx_id=? AND id>?)"),
                ),
                Engine::Postgres => {
                    let seeks = |plan: &str| {
                        plan.lines().any(|line| {
                            line.contains("Index Cond:") && line.contains("ROW(tx_id, id) > ROW(")
                        })
                    };
                    (seeks(&all), seeks(&practice))
                }
            };
            assert!(all_seeks, "{all}");
            assert!(practice_seeks, "{practice}");
            store.close().await;
        }
    }

    #[test]
    fn positions_read_back_and_sort_as_their_ids() {
        let a = Position { tx: 7, id: 12 };
        let b = Position { tx: 8, id: 11 };
        assert_eq!(Position::decode(&a.encode()), Some(a));
        assert!(a < b);
        assert!(a.encode() < b.encode());
        assert_eq!(Position::decode("nope"), None);
        assert_eq!(Position::decode(&"g".repeat(32)), None);
    }

    /// A webhook's body names the catalogue's record under the key of its kind, and only that.
    #[test]
    fn a_catalogue_event_names_its_record_by_kind() {
        let event = |event_type: &str| StoredEvent {
            id: 1,
            tx_id: 1,
            practice_id: "p".into(),
            event_type: event_type.into(),
            occurred_at: 0,
            patient_id: None,
            booking_id: None,
            label_id: None,
            token_id: None,
            user_id: None,
            record_id: Some("r1".into()),
        };
        assert_eq!(
            event("product.updated").identifiers(),
            json!({ "productId": "r1" })
        );
        assert_eq!(
            event("location.created").identifiers(),
            json!({ "locationId": "r1" })
        );
        assert_eq!(
            event("accessGroup.created").identifiers(),
            json!({ "accessGroupId": "r1" })
        );
        assert_eq!(
            event("practiceNumber.created").identifiers(),
            json!({ "practiceNumberId": "r1" })
        );
        assert!(event("practiceNumber.created").is_public());
    }
}
