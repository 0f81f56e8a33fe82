//! Events: the feed (`events`, for clients that poll) and the subscription (`events`, over a
//! websocket or Server-Sent Events). Both show a caller only the events of its practice whose
//! resource it may read; a subscription checks that against the token as it is at each event,
//! and ends its connection when the token no longer works.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_graphql::futures_util::Stream;
use async_graphql::{Context, Error, ID, Object, Result, Subscription};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};

use super::access::{authorize, reader};
use super::error::{OrFail, bad_input, code, coded, forbidden};
use super::objects::{Event, EventFeed};
use super::store;
use crate::auth::{self, OperationKind, Principal};
use crate::events::Hub;
use crate::store::events::{EVENT_TYPES, Position, StoredEvent, TOKEN_REVOKED, USER_CHANGED};
use crate::store::{Store, StoreError, StoreResult, now_ms};

/// Events the feed returns when `limit` is not given.
pub const DEFAULT_FEED_LIMIT: u32 = 100;
/// Most events the feed returns at once.
pub const MAX_FEED_LIMIT: u32 = 500;
/// Events a subscription reads from the log at once while it catches up.
const REPLAY_BATCH: u32 = 200;
/// Most event types a request may name.
const MAX_EVENT_TYPES: usize = 50;

/// The event types a request names, checked; every type when it leaves them out. An empty
/// list is refused: it would match nothing, and the feed would hand out a cursor at the end
/// of the log, past every event the client meant to ask for.
pub fn checked_types(requested: Option<Vec<String>>) -> Result<Vec<String>> {
    let Some(requested) = requested else {
        return Ok(EVENT_TYPES.iter().map(|t| t.to_string()).collect());
    };
    if requested.is_empty() {
        return Err(bad_input(
            "eventTypes names no type: name at least one, or leave it out for every type",
        ));
    }
    if requested.len() > MAX_EVENT_TYPES {
        return Err(bad_input(format!(
            "eventTypes names at most {MAX_EVENT_TYPES} types"
        )));
    }
    if let Some(unknown) = requested
        .iter()
        .find(|t| !EVENT_TYPES.contains(&t.as_str()))
    {
        return Err(bad_input(format!(
            "{unknown:?} is not an event type: use one of {}",
            EVENT_TYPES.join(", ")
        )));
    }
    Ok(requested)
}

/// Reads a cursor (an event's id).
fn cursor(after: Option<ID>) -> Result<Option<Position>> {
    let Some(after) = after else {
        return Ok(None);
    };
    Position::decode(&after).map(Some).ok_or_else(|| {
        bad_input(format!(
            "after must be an event's id, as Event.id or EventFeed.cursor gives it, got {:?}",
            after.as_str()
        ))
    })
}

/// Whether events after `after` have been swept away: the floor (the last event the sweep
/// deleted, of the types followed) is past it.
fn swept(floor: Option<Position>, after: Position) -> bool {
    floor.is_some_and(|floor| after < floor)
}

/// [`swept`], for the events of `types`, with the floors as they are now. Asked after the
/// events are read (the sweep raises the floors in the transaction that deletes), so that a
/// sweep between the two cannot skip events unsaid.
async fn swept_after(
    store: &Store,
    practice_id: &str,
    types: &[String],
    after: Position,
) -> StoreResult<bool> {
    let floors = store.practice(practice_id).event_floors(types).await?;
    Ok(swept(floors.of_types, after))
}

/// Where the practice's log ends now ([`PracticeStore::last_event_position`]).
///
/// [`PracticeStore::last_event_position`]: crate::store::PracticeStore::last_event_position
async fn log_end(store: &Store, practice_id: &str) -> Result<Option<Position>> {
    store
        .practice(practice_id)
        .last_event_position()
        .await
        .or_fail()
}

/// The practice's floor (of every type), read after the events (as [`swept_after`] does);
/// CURSOR_EXPIRED when events of `types` after the cursor `after` were swept away (events of
/// other types, which the caller does not follow, are no loss to it), or when it is past
/// `end`, where the practice's log ended when the read began, and past the floor: no event of
/// this log has it (a cursor kept from before the database was restored from a backup, whose
/// events after the backup are gone).
async fn cursor_kept(
    store: &Store,
    practice_id: &str,
    types: &[String],
    after: Option<Position>,
    end: Option<Position>,
) -> Result<Option<Position>> {
    let floors = store
        .practice(practice_id)
        .event_floors(types)
        .await
        .or_fail()?;
    let floor = floors.all;
    let Some(after) = after else {
        return Ok(floor);
    };
    if swept(floors.of_types, after) {
        return Err(expired());
    }
    if end.max(floor).is_none_or(|last| after > last) {
        return Err(coded(
            code::CURSOR_EXPIRED,
            "This cursor is past the end of the event log: no event has it (was the database \
             restored from a backup?). Start again without after, and catch up with the \
             queries",
        ));
    }
    Ok(floor)
}

/// What a cursor whose events were swept away gets.
fn expired() -> Error {
    coded(
        code::CURSOR_EXPIRED,
        "Events after this cursor are no longer kept: start again without after (and catch up \
         with the queries), or poll more often than the retention",
    )
}

/// The types of `types` the caller may read, and the read permissions the others need (each
/// once).
fn readable(principal: &Principal, types: Vec<String>) -> (Vec<String>, Vec<String>) {
    let mut needed: Vec<String> = Vec::new();
    let mut visible = Vec::new();
    for event_type in types {
        let Some(resource) = Event::resource(&event_type) else {
            continue;
        };
        if principal.permissions.allows(resource, auth::Access::Read) {
            visible.push(event_type);
        } else {
            let permission = auth::Permission::Resource(resource, auth::Access::Read).to_string();
            if !needed.contains(&permission) {
                needed.push(permission);
            }
        }
    }
    (visible, needed)
}

/// The types of `types` the caller may see; FORBIDDEN, naming the read permissions that would
/// do, when it may see none of them.
pub fn visible_types(principal: &Principal, types: Vec<String>) -> Result<Vec<String>> {
    let (visible, mut needed) = readable(principal, types);
    // A feed or a subscription that could carry no event at all is a token without the
    // permission it needs: said as FORBIDDEN, not as silence.
    if visible.is_empty() && !needed.is_empty() {
        let first = needed.remove(0);
        return Err(forbidden(first, &needed));
    }
    Ok(visible)
}

/// FORBIDDEN, naming the first read permission missing, unless the caller may read every one
/// of `types`: for a webhook subscription, which sends its events to its receiver whoever asks
/// later, so that `webhooks:write` alone does not read patients.
pub fn every_type_readable(principal: &Principal, types: &[String]) -> Result<()> {
    let (_, needed) = readable(principal, types.to_vec());
    match needed.first() {
        Some(first) => Err(forbidden(first, &[])),
        None => Ok(()),
    }
}

#[derive(Default)]
pub struct EventQueries;

#[Object]
impl EventQueries {
    /// The feed of the practice's changes, oldest first, after a cursor: for clients that
    /// poll. Shows only the events the caller may read (`patient.*` needs `patients:read`,
    /// `booking.*` `bookings:read`, `label.*` `labels:read`); FORBIDDEN when it may read
    /// none of the types asked for. Events are kept for a while (7 days by default); a
    /// cursor after which events of the types read were deleted since, or past the end of
    /// the log (kept from before a restore of the database), is CURSOR_EXPIRED.
    async fn events(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Resume after this event (Event.id or a feed's cursor); from the \
                          oldest event kept when omitted."
        )]
        after: Option<ID>,
        #[graphql(
            desc = "Only events of these types, e.g. [\"booking.created\"]; all when \
                          omitted (an empty list is refused)."
        )]
        event_types: Option<Vec<String>>,
        #[graphql(desc = "Most events to return, 1 to 500; default 100.")] limit: Option<i32>,
    ) -> Result<Option<EventFeed>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let limit = match limit {
            None => DEFAULT_FEED_LIMIT,
            Some(n) if (1..=MAX_FEED_LIMIT as i32).contains(&n) => n as u32,
            Some(n) => {
                return Err(bad_input(format!(
                    "limit must be between 1 and {MAX_FEED_LIMIT}, got {n}"
                )));
            }
        };
        let types = visible_types(principal, checked_types(event_types)?)?;
        let after = cursor(after)?;
        // Where the log ends, read before its events: every event of the caller's up to
        // there is among those read next (later ones come after it), so a feed that reaches
        // it hands it out as its cursor, past the events the caller does not see. A client
        // polling for rare events then keeps a cursor as young as its last poll, which the
        // retention's sweep does not pass.
        let end = log_end(store(ctx), &principal.practice_id).await?;
        let mut found = if types.is_empty() {
            Vec::new()
        } else {
            reader(ctx, principal)
                .events_after(after, &types, limit + 1)
                .await
                .or_fail()?
        };
        let floor = cursor_kept(store(ctx), &principal.practice_id, &types, after, end).await?;
        let reached = found
            .iter()
            .take_while(|e| end.is_some_and(|end| e.position() <= end))
            .count();
        let (has_more, cursor) = if reached > limit as usize {
            found.truncate(limit as usize);
            (true, found.last().map(StoredEvent::position))
        } else {
            // Every event of the caller's up to the end is here; those after it, which
            // became visible since, are the next poll's.
            let more = found.len() > reached;
            found.truncate(reached);
            (more, end.max(floor).max(after))
        };
        let cursor = cursor.map(|p| ID(p.encode()));
        Ok(Some(EventFeed {
            data: Some(found.into_iter().map(|e| Some(Event(e))).collect()),
            cursor,
            has_more,
        }))
    }
}

/// Why a token that worked when its connection began no longer does.
fn no_longer_valid(refused: &auth::AuthError) -> &'static str {
    match refused {
        auth::AuthError::Revoked => "The token has been revoked or signed out",
        auth::AuthError::Expired => "The token has expired",
        auth::AuthError::Disabled => "The token's staff account has been disabled",
        _ => "The token is no longer valid",
    }
}

/// Why a connection must end before its subscriptions hand out another event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// The token no longer works (revoked, signed out, expired), or its permissions or access
    /// groups changed.
    Forbidden(String),
    /// A subscription fell too far behind the events: it may resume with `after`.
    TooSlow(String),
    /// The database could not be read (the events, an event's patient, the token again): the
    /// client may connect again, and resume with `after`, in a moment.
    Unavailable(String),
}

impl Cut {
    /// The reason of a cut for a token that now reads other things than before.
    pub const CHANGED: &'static str =
        "The token's permissions or access groups changed: connect again";
}

/// The connection a subscription runs on, as the transport (websocket, Server-Sent Events)
/// hands it to the schema: the token it authenticated with, what that token allows now, and
/// where to say that the connection must end.
pub struct Connection {
    token: String,
    principal: Mutex<Principal>,
    cut: watch::Sender<Option<Cut>>,
}

impl Connection {
    /// A connection authenticated as `principal` with `token`, and the receiver the transport
    /// watches for a cut.
    pub fn new(
        token: String,
        principal: Principal,
    ) -> (Arc<Connection>, watch::Receiver<Option<Cut>>) {
        let (cut, cuts) = watch::channel(None);
        let connection = Connection {
            token,
            principal: Mutex::new(principal),
            cut,
        };
        (Arc::new(connection), cuts)
    }

    /// The token's holder as of the last check.
    pub fn principal(&self) -> Principal {
        self.principal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ends the connection: its transport closes it.
    pub fn cut(&self, why: Cut) {
        self.cut.send_if_modified(|cut| {
            if cut.is_none() {
                *cut = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// Takes the token's holder as it was just authenticated (by a new operation on the
    /// connection, or [`Connection::recheck`]). When it may now read other things than
    /// before (its permissions, or the access groups that decide which patients it sees),
    /// the connection is cut instead: the operations running on it read with the holder they
    /// started with, and would go on reading as before. True while it reads as before.
    pub fn refresh(&self, now: Principal) -> bool {
        let mut held = self.principal.lock().unwrap_or_else(|e| e.into_inner());
        if now.permissions == held.permissions && now.patient_groups == held.patient_groups {
            *held = now;
            return true;
        }
        drop(held);
        self.cut(Cut::Forbidden(Cut::CHANGED.into()));
        false
    }

    /// Takes the token's holder as it was just authenticated, whatever it may now read: for a
    /// connection that runs no subscription, where nothing reads by the holder it had.
    pub fn replace(&self, now: Principal) {
        *self.principal.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }

    /// Checks the token again, in the database (an event about it may come before this
    /// instance's cache hears of the change); cuts the connection when it no longer works, or
    /// reads other things than before (see [`Connection::refresh`]). True while it works as
    /// before.
    pub async fn recheck(&self, store: &Store) -> bool {
        match self.authenticate_again(store).await {
            Some(now) => self.refresh(now),
            None => false,
        }
    }

    /// The token's holder as the database has it now, or None with the connection cut: when
    /// the token no longer works (4403), or cannot be checked (1013). Not known to be refused,
    /// nor allowed, the connection ends to be made again in a moment, rather than stay open
    /// on a token that may have been revoked: no later event would check it again.
    async fn authenticate_again(&self, store: &Store) -> Option<Principal> {
        match auth::authenticate(store, None, &self.token).await {
            Ok(now) => Some(now),
            Err(auth::AuthError::Store(error)) => {
                tracing::warn!(%error, "could not check a connection's token again");
                self.cut(Cut::Unavailable(
                    "The token could not be checked again: connect again in a moment".into(),
                ));
                None
            }
            Err(refused) => {
                self.cut(Cut::Forbidden(no_longer_valid(&refused).into()));
                None
            }
        }
    }

    /// Whether `event` is about the connection's token or its user: a revocation or sign-out
    /// of the token, a change of the user (disabled, demoted, moved between access groups).
    fn is_about_token(&self, event: &StoredEvent) -> bool {
        let principal = self.principal();
        match event.event_type.as_str() {
            TOKEN_REVOKED => event.token_id.as_deref() == Some(principal.token_id.as_str()),
            USER_CHANGED => {
                event.user_id.is_some() && event.user_id.as_deref() == principal.user_id()
            }
            _ => false,
        }
    }

    /// Follows the events about the connection's token and its user from `events` (the
    /// hub's [`Hub::subscribe_to_changes`], subscribed to before the token was authenticated
    /// for the connection, so that no change falls between the two), and cuts the connection
    /// once the token no longer works (revoked, signed out, its user disabled) or cannot be
    /// checked ([`Connection::authenticate_again`]): one that runs no subscription, which no
    /// event would otherwise reach, is closed then too (4403 on a websocket). A change
    /// that leaves the token working is the next operation's to take
    /// ([`Connection::refresh`], [`Connection::replace`]). Ends with the cut, or with the
    /// hub; the transport aborts it when the connection ends.
    pub async fn guard(
        self: Arc<Self>,
        mut events: broadcast::Receiver<Arc<StoredEvent>>,
        store: Store,
    ) {
        loop {
            let looked_at = match events.recv().await {
                Ok(event) => self.is_about_token(&event),
                // Fell behind the hub: what it passed over may have been about the token.
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => return,
            };
            if !looked_at {
                continue;
            }
            if self.authenticate_again(&store).await.is_none() {
                return;
            }
        }
    }

    /// Cuts the connection if its token has expired; true while it has not.
    pub fn check_expiry(&self) -> bool {
        let expired = self.principal().expires_at.is_some_and(|at| at <= now_ms());
        if expired {
            self.cut(Cut::Forbidden("The token has expired".into()));
        }
        !expired
    }
}

#[derive(Default)]
pub struct EventSubscription;

#[Subscription]
impl EventSubscription {
    /// The practice's changes as they happen, those the caller may read (see Query.events).
    /// With `after`, the events kept after that cursor come first, in order, then live ones,
    /// with no gap and none twice. The connection is closed (4403 on a websocket) when its
    /// token is revoked, signed out or expires, or its permissions or access groups change,
    /// before another event is sent. A subscriber that falls behind catches up from the log;
    /// one that falls behind again and again is closed (1008 on a websocket), and resumes with
    /// `after`. A catch-up whose events the retention's sweep deletes as it reads ends the
    /// subscription with CURSOR_EXPIRED.
    async fn events(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Only events of these types; all when omitted (an empty list is \
                          refused)."
        )]
        event_types: Option<Vec<String>>,
        #[graphql(desc = "Only events that name this patient.")] patient_id: Option<ID>,
        #[graphql(
            desc = "Resume after this event (Event.id): the events kept after it come \
                          first."
        )]
        after: Option<ID>,
    ) -> Result<impl Stream<Item = Result<Event>> + use<>> {
        let principal = authorize(ctx, OperationKind::Subscription)?;
        let connection = ctx.data::<Arc<Connection>>().map_err(|_| {
            coded(
                code::BAD_REQUEST,
                "Subscriptions are served over a websocket (graphql-transport-ws) or \
                 Server-Sent Events on /graphql",
            )
        })?;
        let types = checked_types(event_types)?;
        // Each event is looked at as it comes (the token's permissions may change); a token
        // that may read none of them is refused at once. Those it may read are those whose
        // sweep can make it miss an event (a change of its permissions cuts the connection).
        let followed = visible_types(principal, types.clone())?;
        let store = store(ctx).clone();
        let after = cursor(after)?;
        // Said at once, where it can be; the replay asks again after each of its reads.
        if after.is_some() {
            let end = log_end(&store, &principal.practice_id).await?;
            cursor_kept(&store, &principal.practice_id, &followed, after, end).await?;
        }
        // Without a cursor, it follows from the last event the hub handed on before it
        // subscribed: a catch-up after falling behind starts there, not at the log's first
        // event.
        let (receiver, handed) = ctx.data::<Hub>()?.subscribe().await;
        let last = after.unwrap_or(handed);
        let follower = Follower {
            store,
            connection: connection.clone(),
            practice_id: principal.practice_id.clone(),
            types,
            followed,
            patient_id: patient_id.map(|id| id.0),
            receiver,
            last,
            replaying: after.is_some(),
            waiting: VecDeque::new(),
            lags: Vec::new(),
        };
        // An error (the events after the cursor were swept away meanwhile) is the last item.
        Ok(async_graphql::futures_util::stream::unfold(
            Some(follower),
            |follower| async move {
                let mut follower = follower?;
                match follower.next().await? {
                    Ok(event) => Some((Ok(Event(event)), Some(follower))),
                    Err(error) => Some((Err(error), None)),
                }
            },
        ))
    }
}

/// One subscription following the events: first those kept after its cursor, read from the
/// log, then those the hub hands on, each once.
struct Follower {
    store: Store,
    connection: Arc<Connection>,
    practice_id: String,
    types: Vec<String>,
    /// The types of `types` it may read, when it began: what the sweep may take from it.
    followed: Vec<String>,
    patient_id: Option<String>,
    /// Subscribed before the replay is read: nothing falls between the two.
    receiver: broadcast::Receiver<Arc<StoredEvent>>,
    /// The last event looked at.
    last: Position,
    /// Still reading the events kept after the cursor.
    replaying: bool,
    waiting: VecDeque<StoredEvent>,
    /// When it last fell behind the hub.
    lags: Vec<std::time::Instant>,
}

/// How often a subscription may fall behind the hub within [`LAG_WINDOW`] and catch up from
/// the log; once more, and it is too slow, and its connection is closed.
const MAX_LAGS: usize = 3;
const LAG_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

impl Follower {
    /// The next event to send; None when the subscription ends, an error when it cannot go
    /// on.
    async fn next(&mut self) -> Option<Result<StoredEvent>> {
        loop {
            if let Some(event) = self.waiting.pop_front() {
                // Looked at before the position: the hub's copy of a revocation the catch-up
                // passed (it reads the client's own types only) is the only copy there is.
                if !self.allowed(&event).await {
                    // The connection is cut: its transport closes it (4403), and the
                    // subscription must not look as if it ended by itself meanwhile.
                    return std::future::pending().await;
                }
                if event.position() <= self.last {
                    continue;
                }
                let sent = self.wanted(&event)
                    && match self.sees_patient(&event).await {
                        Ok(sees) => sees,
                        Err(error) => {
                            // Passed over, the event would be lost to this subscriber without
                            // a word: it resumes from the one before.
                            self.unreadable(&error, "could not read an event's patient");
                            return std::future::pending().await;
                        }
                    };
                self.last = event.position();
                if sent {
                    return Some(Ok(event));
                }
                continue;
            }
            if self.replaying {
                match self.replay_batch().await {
                    Ok((_, true)) => return Some(Err(expired())),
                    Ok((events, false)) if events.is_empty() => {
                        self.replaying = false;
                        // The catch-up reads the client's own types, not the revocations, and
                        // falling behind the hub dropped what it held: the token is looked at
                        // again before the hub is followed.
                        if !self.connection.recheck(&self.store).await {
                            return std::future::pending().await;
                        }
                    }
                    Ok((events, false)) => self.waiting.extend(events),
                    Err(error) => {
                        self.unreadable(&error, "could not read the events to replay");
                        return std::future::pending().await;
                    }
                }
                continue;
            }
            match self.receiver.recv().await {
                Ok(event) => {
                    if event.practice_id == self.practice_id {
                        self.waiting.push_back((*event).clone());
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    // Fell behind the hub: by a burst (a label taken off thousands of patients
                    // at once), or by being slow. Either way the log has every event: catch up
                    // from it, reading a batch at a time, and follow the hub again from where
                    // it is now (the receiver is subscribed before the log is read, so nothing
                    // falls in between). Falling behind again and again is being too slow.
                    let now = std::time::Instant::now();
                    self.lags.retain(|at| now.duration_since(*at) < LAG_WINDOW);
                    self.lags.push(now);
                    if self.lags.len() > MAX_LAGS {
                        self.connection.cut(Cut::TooSlow(format!(
                            "Too slow to keep up with the events: resume with after: {}",
                            self.last
                        )));
                        return std::future::pending().await;
                    }
                    self.receiver = self.receiver.resubscribe();
                    self.replaying = true;
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// Ends the connection on a read that failed (said in the log as `what`): the client
    /// resumes after the last event looked at, which nothing after it was sent past.
    fn unreadable(&self, error: &StoreError, what: &str) {
        tracing::warn!(%error, "{what}");
        self.connection.cut(Cut::Unavailable(format!(
            "The events could not be read: resume with after: {}",
            self.last
        )));
    }

    /// The next batch of events kept after the last one looked at, and whether events after
    /// it were swept away as they were read (then they are missed, and the subscription ends
    /// as a cursor too old does).
    async fn replay_batch(&self) -> StoreResult<(Vec<StoredEvent>, bool)> {
        let groups = self.connection.principal().patient_groups.clone();
        let events = self
            .store
            .practice(&self.practice_id)
            .seen_by(groups.as_deref())
            .events_after(Some(self.last), &self.types, REPLAY_BATCH)
            .await?;
        let swept = swept_after(&self.store, &self.practice_id, &self.followed, self.last).await?;
        Ok((events, swept))
    }

    /// Whether the connection's token still allows anything to be sent: false (and the
    /// connection cut) once it is revoked, signed out, changed or expired.
    async fn allowed(&self, event: &StoredEvent) -> bool {
        if self.connection.is_about_token(event) && !self.connection.recheck(&self.store).await {
            return false;
        }
        self.connection.check_expiry()
    }

    /// Whether the subscriber sees the event's patient: a staff user kept to their access
    /// groups sees no event of a patient outside them. One read per such event and such
    /// subscriber.
    async fn sees_patient(&self, event: &StoredEvent) -> StoreResult<bool> {
        let principal = self.connection.principal();
        let (Some(groups), Some(patient_id)) = (&principal.patient_groups, &event.patient_id)
        else {
            return Ok(true);
        };
        let found = self
            .store
            .practice(&self.practice_id)
            .seen_by(Some(groups))
            .find_patient(patient_id)
            .await?;
        Ok(found.is_some())
    }

    /// Whether the subscriber asked for the event, and may read it.
    fn wanted(&self, event: &StoredEvent) -> bool {
        let principal = self.connection.principal();
        self.types.contains(&event.event_type)
            && (self.patient_id.is_none() || event.patient_id == self.patient_id)
            && Event::visible_to(event, &principal.permissions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PoolSettings;
    use crate::store::audit::{Actor, Author};
    use crate::store::tokens::TokenKind;

    /// A token's revocation as the hub hands it on, at `id` in the log.
    fn revoked(practice_id: &str, token_id: &str, id: i64) -> StoredEvent {
        StoredEvent {
            id,
            tx_id: 0,
            practice_id: practice_id.to_string(),
            event_type: TOKEN_REVOKED.to_string(),
            occurred_at: now_ms(),
            patient_id: None,
            booking_id: None,
            label_id: None,
            token_id: Some(token_id.to_string()),
            user_id: None,
            record_id: None,
        }
    }

    fn label_created(practice_id: &str, id: i64) -> StoredEvent {
        StoredEvent {
            event_type: "label.created".to_string(),
            token_id: None,
            label_id: Some(format!("label-{id}")),
            ..revoked(practice_id, "", id)
        }
    }

    /// A subscription's token is revoked where the hub's copy of the revocation is all that
    /// says so and the follower does not look at it in its turn: dropped with the rest of what
    /// the hub held when the subscription fell behind, or at a position the catch-up from a
    /// cursor had already passed. Either way the connection is cut (4403) before anything
    /// more is sent.
    #[tokio::test]
    async fn a_revocation_the_follower_passes_by_still_cuts_the_connection() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("follow.db").display());
        let store = Store::open(&url, &PoolSettings::default())
            .await
            .expect("open");
        let practice = store.create_practice("Follow").await.expect("practice");
        let operator = Actor::operator();
        let author = || Author {
            actor: &operator,
            operation: None,
            key: None,
        };
        let everything = auth::parse_permissions(&["*".to_string()]).expect("permissions");

        for fell_behind in [true, false] {
            let (token, secret) = auth::issue_api_token(
                store.practice(&practice.id).by(author()),
                "follower",
                &everything,
                None,
                None,
            )
            .await
            .expect("token");
            let principal = auth::authenticate(&store, None, &secret)
                .await
                .expect("authenticated");
            let (connection, cut) = Connection::new(secret, principal);
            // Room for two events: four at once and the first two are dropped.
            let (hub, receiver) = broadcast::channel(2);
            let mut follower = Follower {
                store: store.clone(),
                connection,
                practice_id: practice.id.clone(),
                types: vec!["label.created".to_string()],
                followed: vec!["label.created".to_string()],
                patient_id: None,
                receiver,
                last: Position { tx: 0, id: 100 },
                replaying: false,
                waiting: VecDeque::new(),
                lags: Vec::new(),
            };
            store
                .practice(&practice.id)
                .by(author())
                .revoke_token(&token.id, TokenKind::Api)
                .await
                .expect("revoke")
                .expect("revoked");
            if fell_behind {
                hub.send(Arc::new(revoked(&practice.id, &token.id, 101)))
                    .expect("sent");
                for id in 102..105 {
                    hub.send(Arc::new(label_created(&practice.id, id)))
                        .expect("sent");
                }
            } else {
                // Before the cursor: as if the catch-up had read past it.
                hub.send(Arc::new(revoked(&practice.id, &token.id, 99)))
                    .expect("sent");
            }
            let next =
                tokio::time::timeout(std::time::Duration::from_millis(500), follower.next()).await;
            assert!(
                next.is_err(),
                "fell behind: {fell_behind}: an event was sent: {next:?}"
            );
            assert!(
                matches!(&*cut.borrow(), Some(Cut::Forbidden(_))),
                "fell behind: {fell_behind}: the connection was not cut"
            );
        }
    }
}
