//! Records the reads of queries in the audit log before their data leaves: many requests'
//! reads to one commit (on SQLite, one flush of its journal of reads), so that a busy server
//! pays one for a batch of queries rather than one each, and every response still waits for
//! its own reads to be on disk. Behind them, about once a second, many requests at a time,
//! the index of who read each patient is brought up to date (on SQLite, after the journal is
//! moved into the audit log; on PostgreSQL, the GIN index's pending entries) (see
//! [`Store::record_reads`], [`Store::move_reads`] and [`Store::index_reads`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
/// SQLite's journal of reads, and only while more operations are running ([`Running`]) than
/// its batch holds. The request that wakes it finished an instant before the others running
/// beside it, and the runtime runs the writer next, on the same thread: taken at once, a
/// batch was that request and the two or three queued behind the last flush. `patient` on
/// SQLite, 16 connections: 2.9 requests a flush with no yield, 7.3 with one, 9.4 with two,
/// 10.5 with three; more requests a second in 11 of 13 alternated runs, p99 within the noise.
/// Yielding with nothing else running cost up to 9 % of the requests a second on one
/// connection; on PostgreSQL, where a batch is a statement, not a flush, 1 to 24 % more of
/// the server's CPU a request: neither yields (BENCHMARKS.md, sixteenth round).
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

/// How often the journal of reads is moved into the audit log (SQLite) and the index of who
/// read each patient brought up to date: the reads of the last second are found by a look at
/// each of them (SQLite) or through the GIN index's list of pending entries (PostgreSQL)
/// instead.
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
    /// Operations running, each counted by its [`Running`].
    running: Arc<AtomicUsize>,
}

/// An operation running whose reads the writer of reads may wait for (see [`YIELDS`]): held
/// from the start of its run until its reads are recorded, or it ends without.
#[derive(Debug)]
pub struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ReadAudit {
    /// Starts the writer over `store`. It stops when the last handle is dropped.
    pub fn start(store: Store) -> ReadAudit {
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
        let indexing = store.clone();
        let yields = if store.flushes_reads() { YIELDS } else { 0 };
        let running = Arc::new(AtomicUsize::new(0));
        let others = running.clone();
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while take(&mut incoming, &mut batch, yields, &others).await {
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
        index(indexing, queue.downgrade());
        ReadAudit { queue, running }
    }

    /// Counts an operation as running until the [`Running`] is dropped.
    pub fn running(&self) -> Running {
        self.running.fetch_add(1, Ordering::Relaxed);
        Running(self.running.clone())
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
/// first has come and the tasks ready beside it have run, up to `yields` times while more
/// operations are `running` than the batch holds (see [`YIELDS`]). False when every handle
/// is gone and nothing is left.
async fn take(
    incoming: &mut mpsc::Receiver<Pending>,
    batch: &mut Vec<Pending>,
    yields: usize,
    running: &AtomicUsize,
) -> bool {
    // recv_many's limit counts what it adds: a batch left over would make it take nothing.
    debug_assert!(batch.is_empty());
    if incoming.recv_many(batch, MAX_BATCH).await == 0 {
        return false;
    }
    for _ in 0..yields {
        if batch.len() >= MAX_BATCH || running.load(Ordering::Relaxed) <= batch.len() {
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
        let mut failed: Option<String> = None;
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
                    Ok(indexed) if !indexed.more => {
                        failed = None;
                        break;
                    }
                    // More to do: the writes waiting meanwhile go first.
                    Ok(_) => tokio::time::sleep(took).await,
                    Err(_) if store.is_closed() => return,
                    Err(error) => {
                        // The same failure each second is told once, until another comes.
                        let said = error.to_string();
                        if failed.as_ref() != Some(&said) {
                            tracing::warn!(%error, "could not index the reads of the audit log");
                            failed = Some(said);
                        }
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

    /// A request's reads; no one waits for the answer, which `take` does not give.
    fn pending() -> Pending {
        let (done, _) = oneshot::channel();
        let reads = Reads {
            practice_id: "practice".into(),
            actor: Actor::operator(),
            reads: Vec::new(),
        };
        Pending { reads, done }
    }

    /// Requests woken together, as requests in flight finish together: the first one's reads
    /// wake the writer, which the runtime runs next on the same thread; the others' reads,
    /// sent an instant later, join its batch. (Taken at once, the batch was the first alone.)
    async fn batches(running: usize) -> Vec<usize> {
        const REQUESTS: usize = 8;
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
        let (sizes, mut sized) = mpsc::unbounded_channel();
        // The writer's loop, without the store: each batch's size, with `running` operations
        // counted as running.
        tokio::spawn(async move {
            let running = AtomicUsize::new(running);
            let mut batch = Vec::new();
            while take(&mut incoming, &mut batch, YIELDS, &running).await {
                let _ = sizes.send(batch.len());
                batch.clear();
            }
        });
        let go = Arc::new(tokio::sync::Semaphore::new(0));
        for _ in 0..REQUESTS {
            let (queue, go) = (queue.clone(), go.clone());
            tokio::spawn(async move {
                let _permit = go.acquire().await;
                let _ = queue.send(pending()).await;
            });
        }
        // Woken together from the runtime's thread: all of them before any runs.
        tokio::spawn(async move { go.add_permits(REQUESTS) });
        let mut taken = Vec::new();
        while taken.iter().sum::<usize>() < REQUESTS {
            let size = tokio::time::timeout(Duration::from_secs(10), sized.recv())
                .await
                .expect("every request's reads taken within 10 s")
                .expect("the writer runs on");
            taken.push(size);
        }
        taken
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_batch_takes_the_reads_of_the_requests_running_beside_the_first() {
        assert_eq!(batches(8).await, vec![8]);
    }

    /// With no other operation running, the writer takes the first at once, as it would a
    /// request alone: the others here are not counted as running.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_writer_waits_for_no_one_when_nothing_else_runs() {
        assert_eq!(batches(1).await.first(), Some(&1));
    }

    #[tokio::test]
    async fn a_batch_holds_at_most_its_cap_of_requests() {
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
        for _ in 0..MAX_BATCH + 44 {
            queue.send(pending()).await.unwrap();
        }
        let running = AtomicUsize::new(MAX_BATCH + 44);
        let mut batch = Vec::new();
        assert!(take(&mut incoming, &mut batch, YIELDS, &running).await);
        assert_eq!(batch.len(), MAX_BATCH);
        batch.clear();
        assert!(take(&mut incoming, &mut batch, YIELDS, &running).await);
        assert_eq!(batch.len(), 44);
    }

    #[tokio::test]
    async fn the_writer_stops_when_every_handle_is_gone() {
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
        queue.send(pending()).await.unwrap();
        drop(queue);
        let mut batch = Vec::new();
        assert!(take(&mut incoming, &mut batch, YIELDS, &AtomicUsize::new(2)).await);
        assert_eq!(batch.len(), 1);
        batch.clear();
        assert!(!take(&mut incoming, &mut batch, YIELDS, &AtomicUsize::new(2)).await);
    }
}
