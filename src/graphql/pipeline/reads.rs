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

/// How many times the writer of reads, woken by a request's reads, lets the runtime's other
/// ready tasks run before it records what has queued up, when recording is a flush of
/// SQLite's journal of reads. The request that wakes it finished an instant before the
/// others running beside it, and the runtime runs the writer next, on the same thread: taken
/// at once, a batch was that request and the two or three that had queued behind the last
/// flush. Yielding costs no time when nothing else is ready (a request alone waits no
/// longer), and lets the requests already running finish into the same batch. `patient` on
/// SQLite, 16 connections: 2.9 requests a flush with none, 7.3 with one, 9.4 to 10.5 with two
/// or three; more requests a second in 8 of 10 alternated runs (BENCHMARKS.md, sixteenth
/// round). On PostgreSQL, where a batch is a statement, not a flush, the same yields took 1
/// to 24 % more of the server's CPU a request, for fewer statements PostgreSQL did not
/// notice: none there.
const YIELDS: usize = 2;

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
        let yields = if store.flushes_reads() { YIELDS } else { 0 };
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while take(&mut incoming, &mut batch, yields).await {
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

/// Takes the next batch of requests' reads into `batch`: whatever has queued up once the
/// first has come and the tasks ready beside it have run, `yields` times (see [`YIELDS`]).
/// False when every handle is gone and nothing is left.
async fn take(
    incoming: &mut mpsc::Receiver<Pending>,
    batch: &mut Vec<Pending>,
    yields: usize,
) -> bool {
    if incoming.recv_many(batch, MAX_BATCH).await == 0 {
        return false;
    }
    for _ in 0..yields {
        if batch.len() >= MAX_BATCH {
            break;
        }
        tokio::task::yield_now().await;
        while batch.len() < MAX_BATCH {
            match incoming.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(_) => break,
            }
        }
    }
    true
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::audit::Actor;

    fn pending() -> (Pending, oneshot::Receiver<bool>) {
        let (done, answer) = oneshot::channel();
        let reads = Reads {
            practice_id: "practice".into(),
            actor: Actor::operator(),
            reads: Vec::new(),
        };
        (Pending { reads, done }, answer)
    }

    /// Requests woken together, as requests in flight finish together: the first one's reads
    /// wake the writer, which the runtime runs next on the same thread; the others' reads,
    /// sent an instant later, join its batch. (Taken at once, the batch was the first alone.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_batch_takes_the_reads_of_the_requests_running_beside_the_first() {
        const REQUESTS: usize = 8;
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
        let (sizes, mut sized) = mpsc::unbounded_channel();
        // The writer's loop, without the store: each batch's size.
        tokio::spawn(async move {
            let mut batch = Vec::new();
            while take(&mut incoming, &mut batch, YIELDS).await {
                let _ = sizes.send(batch.len());
                batch.clear();
            }
        });
        let go = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let mut answers = Vec::new();
        for _ in 0..REQUESTS {
            let (queue, go) = (queue.clone(), go.clone());
            let (pending, answer) = pending();
            answers.push(answer);
            tokio::spawn(async move {
                let _permit = go.acquire().await;
                let _ = queue.send(pending).await;
            });
        }
        // Woken from the runtime's thread, as requests are: all of them before any runs.
        tokio::spawn(async move { go.add_permits(REQUESTS) });
        let mut taken = Vec::new();
        while taken.iter().sum::<usize>() < REQUESTS {
            taken.extend(sized.recv().await);
        }
        assert_eq!(taken, vec![REQUESTS]);
        drop(answers);
    }

    #[tokio::test]
    async fn the_writer_stops_when_every_handle_is_gone() {
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
        let (first, _answer) = pending();
        queue.send(first).await.unwrap();
        drop(queue);
        let mut batch = Vec::new();
        assert!(take(&mut incoming, &mut batch, YIELDS).await);
        assert_eq!(batch.len(), 1);
        batch.clear();
        assert!(!take(&mut incoming, &mut batch, YIELDS).await);
    }
}
