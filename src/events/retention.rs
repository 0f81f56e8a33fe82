//! Events are kept for a while (`PRACTICE_EVENT_RETENTION`, default 7 days), then deleted in
//! small batches, so that no sweep holds the database for long; the webhook deliveries of the
//! same age go with them, those that waited paused as long among them.

use std::future::Future;
use std::time::Duration;

use crate::store::webhooks::Forgotten;
use crate::store::{Store, StoreResult, now_ms};

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
    in_batches("events", || async {
        let deleted = store.forget_events(before, BATCH).await?;
        Ok(Forgotten {
            deleted,
            given_up: 0,
        })
    })
    .await;
    let deliveries = in_batches("webhook deliveries", || {
        store.forget_deliveries(before, BATCH)
    })
    .await;
    if deliveries.given_up > 0 {
        tracing::warn!(
            count = deliveries.given_up,
            "webhook deliveries given up: their subscriptions stayed paused longer than the \
             events are kept"
        );
    }
}

/// Runs `batch` until one deletes fewer than [`BATCH`] (a batch of deliveries is up to BATCH
/// old ones and BATCH of deleted subscriptions) or fails (said in the log), a pause between
/// two; says in the log how many of `what` it deleted, and returns the sum.
async fn in_batches<F, B>(what: &str, mut batch: F) -> Forgotten
where
    F: FnMut() -> B,
    B: Future<Output = StoreResult<Forgotten>>,
{
    let mut swept = Forgotten::default();
    loop {
        match batch().await {
            Ok(done) => {
                swept.deleted += done.deleted;
                swept.given_up += done.given_up;
                if done.deleted < u64::from(BATCH) {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not delete old {what}");
                break;
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    if swept.deleted > 0 {
        tracing::info!(count = swept.deleted, "old {what} deleted");
    }
    swept
}
