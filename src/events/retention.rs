//! Events are kept for a while (`PRACTICE_EVENT_RETENTION`, default 7 days), then deleted in
//! small batches, so that no sweep holds the database for long; the webhook deliveries of the
//! same age go with them, those that waited paused as long among them.

use std::time::Duration;

use crate::store::webhooks::Forgotten;
use crate::store::{Store, now_ms};

/// Rows deleted in one statement.
const BATCH: u32 = 1000;
/// How often the sweep runs.
const EVERY: Duration = Duration::from_secs(600);
/// The pause between two batches of one sweep, for the writes waiting their turn.
const PAUSE: Duration = Duration::from_millis(50);

/// Starts the sweep: now, then every ten minutes, as long as the runtime runs.
pub fn start(store: Store, keep: Duration) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        loop {
            every.tick().await;
            sweep(&store, keep).await;
        }
    });
}

/// Deletes, in batches, the events and deliveries older than `keep`; deliveries that waited
/// paused that long are given up, and the log says how many.
pub async fn sweep(store: &Store, keep: Duration) {
    let before = now_ms() - i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
    let mut total = 0;
    loop {
        match store.forget_events(before, BATCH).await {
            Ok(count) => {
                total += count;
                if count < u64::from(BATCH) {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not delete old events");
                break;
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    if total > 0 {
        tracing::info!(count = total, "old events deleted");
    }
    let mut swept = Forgotten::default();
    loop {
        match store.forget_deliveries(before, BATCH).await {
            Ok(batch) => {
                swept.deleted += batch.deleted;
                swept.given_up += batch.given_up;
                // A batch is up to BATCH old ones and BATCH of deleted subscriptions; one that
                // deleted fewer than BATCH leaves the rest to the next sweep.
                if batch.deleted < u64::from(BATCH) {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not delete old webhook deliveries");
                break;
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    if swept.deleted > 0 {
        tracing::info!(count = swept.deleted, "old webhook deliveries deleted");
    }
    if swept.given_up > 0 {
        tracing::warn!(
            count = swept.given_up,
            "webhook deliveries given up: their subscriptions stayed paused longer than the \
             events are kept"
        );
    }
}
