//! The hub: one reader of the event log per instance, handing each new event to this
//! instance's live subscribers and webhook worker. It reads when woken by a commit through this
//! instance, by PostgreSQL's NOTIFY of a commit through another instance, or by a poll every
//! second (a missed notification, SQLite written by another process); the log itself is the
//! truth, so a wake-up lost costs at most a second.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, broadcast, watch};

use crate::store::Store;
use crate::store::events::{Position, StoredEvent};

/// Events a subscriber may fall behind the hub before it is told it lagged, by default.
pub const DEFAULT_CAPACITY: usize = 4096;
/// Events read from the log in one statement.
const BATCH: u32 = 500;
/// Longest the hub waits for a wake-up before it reads the log anyway.
const POLL: Duration = Duration::from_secs(1);
/// Shortest time between two reads of the log while this instance has no live subscriber.
const IDLE_PAUSE: Duration = Duration::from_millis(250);

/// This instance's live view of the event log. Cheap to clone.
#[derive(Clone)]
pub struct Hub {
    sender: broadcast::Sender<Arc<StoredEvent>>,
    /// The events about tokens and their users alone (`token.revoked`, `user.changed`), for
    /// the connections' guards: a connection that runs nothing is woken by these only, and
    /// does not make the hub read at every commit, as a subscriber does.
    changes: broadcast::Sender<Arc<StoredEvent>>,
    /// Notified each time the hub has read the log, whatever it found: the webhook worker
    /// waits on it.
    read: Arc<Notify>,
    /// True once the hub knows where the log ends, and hands on every event after that.
    ready: watch::Receiver<bool>,
    /// The last event handed on, held while events are handed on, so that a subscriber
    /// learns where its receiver starts.
    handed: Arc<Mutex<Position>>,
}

impl Hub {
    /// Starts the reader over `store`, from the last position the log has reached when it
    /// starts (its last event, or the last one swept if that is later);
    /// subscribers may fall `capacity` events behind it before they are told they lagged.
    pub fn start(store: Store, capacity: usize) -> Hub {
        let (sender, _) = broadcast::channel(capacity.max(1));
        let (changes, _) = broadcast::channel(capacity.max(1));
        let (ready_tx, ready) = watch::channel(false);
        let hub = Hub {
            sender,
            changes,
            read: Arc::default(),
            ready,
            handed: Arc::default(),
        };
        tokio::spawn(hub.clone().follow(store, ready_tx));
        hub
    }

    /// A receiver of every event the log gets from now on, in order of position: every event
    /// after any position a reader of the log can see now comes through it. (So a subscriber
    /// that subscribes, then reads the log until it is up to date, misses nothing in between.)
    /// With it, the position of the last event handed on before it: exactly the events after
    /// that one come through the receiver.
    pub async fn subscribe(&self) -> (broadcast::Receiver<Arc<StoredEvent>>, Position) {
        self.subscribe_to(&self.sender).await
    }

    /// A receiver of the events about tokens and their users from now on, as
    /// [`Hub::subscribe`]'s of every event: a change after any position a reader can see now
    /// comes through it. The hub reads for such receivers alone only as it does for nobody
    /// (every [`IDLE_PAUSE`] at most, and at each poll), so a change reaches them within a
    /// quarter of a second.
    pub async fn subscribe_to_changes(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.subscribe_to(&self.changes).await.0
    }

    /// A receiver of `channel` once the hub has found the end of the log, taken while no
    /// event is being handed on, and the position of the last event handed on before it.
    async fn subscribe_to(
        &self,
        channel: &broadcast::Sender<Arc<StoredEvent>>,
    ) -> (broadcast::Receiver<Arc<StoredEvent>>, Position) {
        let mut ready = self.ready.clone();
        // The hub's task is gone only with the runtime.
        let _ = ready.wait_for(|ready| *ready).await;
        let handed = self.handed.lock().unwrap_or_else(|e| e.into_inner());
        (channel.subscribe(), *handed)
    }

    /// Completes the next time the hub reads the log.
    pub fn wake_up(&self) -> Arc<Notify> {
        self.read.clone()
    }

    /// Finds where the log ends, then follows it.
    async fn follow(self, store: Store, ready: watch::Sender<bool>) {
        let from = loop {
            match store.last_position().await {
                Ok(last) => break last,
                Err(error) => {
                    tracing::warn!(%error, "could not find the end of the event log; retrying");
                    tokio::time::sleep(POLL).await;
                }
            }
        };
        *self.handed.lock().unwrap_or_else(|e| e.into_inner()) = from;
        let _ = ready.send(true);
        self.read_on(store, from).await;
    }

    /// Reads the log after `from` every time it is woken, until no clone of the hub is left.
    async fn read_on(self, store: Store, mut from: Position) {
        let committed = store.committed();
        let mut listener = store.event_notifications().await;
        loop {
            let notified = committed.notified();
            loop {
                match store.all_events_after(from, BATCH).await {
                    Ok(events) => {
                        let full = events.len() == BATCH as usize;
                        let mut handed = self.handed.lock().unwrap_or_else(|e| e.into_inner());
                        for event in events {
                            from = event.position();
                            let event = Arc::new(event);
                            if event.is_about_tokens() {
                                let _ = self.changes.send(event.clone());
                            }
                            // No subscriber is no error: nobody is listening right now.
                            let _ = self.sender.send(event);
                        }
                        *handed = from;
                        drop(handed);
                        if !full {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not read the event log");
                        break;
                    }
                }
            }
            self.read.notify_waiters();
            // Only the hub's own clones left: nobody can subscribe any more.
            if self.sender.receiver_count() == 0
                && self.changes.receiver_count() == 0
                && Arc::strong_count(&self.read) == 1
            {
                return;
            }
            // With no live subscriber, nothing waits on a commit but the webhook worker:
            // reading the log at every commit of a busy instance would cost writes a read each.
            // Commits meanwhile are not missed: `notified` fires at once for them.
            if self.sender.receiver_count() == 0 {
                tokio::time::sleep(IDLE_PAUSE).await;
            }
            tokio::select! {
                () = notified => {}
                () = listener.next() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }
}
