//! Records the reads of queries in the audit log before their data leaves: many requests'
//! reads to one transaction, so that a busy server pays one commit for a batch of queries
//! rather than one each, and every response still waits for its own reads to be on disk.

use tokio::sync::{mpsc, oneshot};

use crate::store::Store;
use crate::store::audit::Reads;

/// Most requests whose reads share one commit.
const MAX_BATCH: usize = 256;

/// Requests waiting to have their reads recorded, at most.
const QUEUE: usize = 4096;

/// One request's reads, and where to say whether they were recorded.
struct Pending {
    reads: Reads,
    done: oneshot::Sender<bool>,
}

/// The writer of reads: a task that takes whatever has queued up, records it in one
/// transaction and answers each request.
#[derive(Clone, Debug)]
pub struct ReadAudit {
    queue: mpsc::Sender<Pending>,
}

impl ReadAudit {
    /// Starts the writer over `store`. It stops when the last handle is dropped.
    pub fn start(store: Store) -> ReadAudit {
        let (queue, mut incoming) = mpsc::channel::<Pending>(QUEUE);
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
        ReadAudit { queue }
    }

    /// How many requests wait for their reads to be recorded.
    pub fn queued(&self) -> usize {
        self.queue.max_capacity() - self.queue.capacity()
    }

    /// Records one request's reads; true once they are committed, false if they could not
    /// be.
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
