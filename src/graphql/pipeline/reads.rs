//! Records the reads of queries in the audit log before their data leaves: many requests'
//! reads to one commit (on SQLite, one flush of its journal of reads), so that a busy server
//! pays one for a batch of queries rather than one each, and every response still waits for
//! its own reads to be on disk. On SQLite, the journal is moved into the audit log and the
//! index of who read each patient brought up to date behind them, about once a second, many
//! requests at a time (see [`Store::record_reads`], [`Store::move_reads`] and
//! [`Store::index_reads`]).

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::store::Store;
use crate::store::audit::Reads;

/// Most requests whose reads share one commit (on SQLite, one flush of its journal).
const MAX_BATCH: usize = 256;

/// Requests waiting to have their reads recorded, at most.
const QUEUE: usize = 4096;

/// Rows of reads (each a batch's requests by one caller) whose patients go into the index in
/// one transaction, at most: more than two seconds of a busy server's reads of one record
/// each, so that a second's reads are one transaction. A transaction also stops at so many
/// pages' worth of entries, about 45,000 (see [`Store::index_reads`]), which rows of many
/// reads reach first. SQLite's one writer is held meanwhile, and with it every write; between
/// two transactions the indexer pauses as long as the last one took, so that writes get at
/// least half of it. The batch does not shrink when a transaction
/// is slow: on a busy machine every transaction is, and smaller ones made the index fall
/// behind the reads without end (at 5,000 requests a second, 16,000 behind after 8 s, in 135
/// commits a second). Each commit also empties every reading connection's cache of pages:
/// batches of 500 were 11 commits a second at 5,500 `patient` requests a second, and
/// `patient` served 5 to 20 % fewer requests than with 5,000; at 10,000 a second, batches of
/// 5,000 were two commits a second, and `patient` served 3 to 5 % fewer than with these
/// (alternated runs of 8 s), the `mix` as many.
const INDEX_BATCH: i64 = 20_000;

/// How often the journal of reads is moved into the audit log and the index of who read each
/// patient brought up to date: the reads of the last second are found by a look at each of
/// them instead.
const INDEX_EVERY: Duration = Duration::from_secs(1);

/// One request's reads, and where to say whether they were recorded.
struct Pending {
    reads: Reads,
    done: oneshot::Sender<bool>,
}

/// The writer of reads: a task that takes whatever has queued up, records it at once (one
/// transaction; on SQLite in a file, one append to its journal and one flush) and answers
/// each request.
#[derive(Clone, Debug)]
pub struct ReadAudit {
    queue: mpsc::Sender<Pending>,
}

impl ReadAudit {
    /// Starts the writer over `store`. It stops when the last handle is dropped.
    pub fn start(store: Store) -> ReadAudit {
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
        let indexing = store.indexes_reads_later().then(|| store.clone());
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while incoming.recv_many(&mut batch, MAX_BATCH).await > 0 {
                let (reads, answers): (Vec<Reads>, Vec<oneshot::Sender<bool>>) =
                    batch.drain(..).map(|p| (p.reads, p.done)).unzip();
                let recorded = match store.record_reads(&reads).await {
                    Ok(()) => true,
                    Err(error) => {
                        tracing::error!(%error, "could not record reads in the audit log");
                        false
                    }
                };
                for answer in answers {
                    // A request that gave up waiting (its time ran out) has no one to tell.
                    let _ = answer.send(recorded);
                }
            }
        });
        if let Some(store) = indexing {
            index(store, queue.downgrade());
        }
        ReadAudit { queue }
    }

    /// How many requests wait for their reads to be recorded.
    pub fn queued(&self) -> usize {
        self.queue.max_capacity() - self.queue.capacity()
    }

    /// Records one request's reads; true once they are on disk (committed, or flushed to
    /// SQLite's journal of reads), false if they could not be.
    pub async fn record(&self, reads: Reads) -> bool {
        if reads.reads.is_empty() {
            return true;
        }
        let (done, answer) = oneshot::channel();
        if self.queue.send(Pending { reads, done }).await.is_err() {
            return false;
        }
        answer.await.unwrap_or(false)
    }
}

/// Moves the journal of reads into the audit log and brings the index of who read each
/// patient up to date every [`INDEX_EVERY`] (the first time at once: what a server gone left
/// behind), while the writer of reads lives (`alive`), a batch at a time until it has caught
/// up, pausing between two batches as long as the last one took.
fn index(store: Store, alive: mpsc::WeakSender<Pending>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(INDEX_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if alive.upgrade().is_none() || store.is_closed() {
                return;
            }
            if let Err(error) = store.move_reads_making_the_next().await {
                tracing::warn!(%error, "could not move the journal of reads into the audit log");
            }
            loop {
                let started = std::time::Instant::now();
                let indexed = store.index_reads(INDEX_BATCH).await;
                let took = started.elapsed();
                match indexed {
                    Ok(indexed) if !indexed.more => break,
                    // More to do: the writes waiting meanwhile go first.
                    Ok(_) => tokio::time::sleep(took).await,
                    Err(_) if store.is_closed() => return,
                    Err(error) => {
                        tracing::warn!(%error, "could not index the reads of the audit log");
                        break;
                    }
                }
            }
        }
    });
}
