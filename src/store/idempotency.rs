//! Idempotency keys: the first response to a mutation sent with an `Idempotency-Key`, kept so
//! that a retry with the same key gets it again instead of writing twice. A key whose request
//! wrote anything is never taken over by a retry: every write marks it in its own transaction
//! (see [`PracticeStore::record_in`]).

use sqlx::{Any, FromRow, Transaction};

use super::{PracticeStore, Store, StoreError, StoreResult, now_ms};

/// A mutation's claim on a key, as the request that holds it carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub token_id: String,
    pub key: String,
    /// A hash of the request, to tell a retry from a different request under the same key.
    pub request_hash: String,
    /// When this claim was made (milliseconds): it tells this claim from a later one that took
    /// the key over, so that a request taken over can neither write nor keep a response.
    pub claimed_at: i64,
}

/// Which earlier claims a new one may take over (times in milliseconds).
#[derive(Clone, Copy, Debug)]
pub struct Reclaim {
    /// A finished claim made before this has expired: the key is free again.
    pub expired_before: i64,
    /// A claim still unfinished since before this, whose request wrote nothing, was abandoned
    /// (its request stopped before it ran): a retry of the same request may take it over.
    pub abandoned_before: i64,
}

/// A response as it was first made, and the reads of patient data it carries.
#[derive(Clone, Debug, PartialEq, Eq, FromRow)]
pub struct StoredResponse {
    pub status: i64,
    pub content_type: String,
    pub response: String,
    /// The reads (see `audit::Read`), as JSON.
    pub reads: Option<String>,
}

/// What became of a claim.
#[derive(Debug)]
pub enum Claimed {
    /// The key is this request's: run it, then [`PracticeStore::finish_idempotency_key`].
    Mine,
    /// The key's first request finished: here is its response.
    Done(StoredResponse),
    /// The key's first request is still being handled.
    Pending,
    /// The key's first request wrote, and its server stopped before its answer was kept: the
    /// outcome is in the data, not here.
    Lost,
    /// The key was used for a different request.
    OtherRequest,
}

#[derive(FromRow)]
struct Held {
    request_hash: String,
    created_at: i64,
    ran_at: Option<i64>,
    status: Option<i64>,
    content_type: Option<String>,
    response: Option<String>,
    reads: Option<String>,
}

impl PracticeStore<'_> {
    /// Claims `key` for this request (at its `claimed_at`), unless an earlier request holds
    /// it.
    pub async fn claim_idempotency_key(&self, key: &Key, reclaim: Reclaim) -> StoreResult<Claimed> {
        let taken: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO idempotency_keys \
             (practice_id, token_id, idempotency_key, request_hash, created_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (practice_id, token_id, idempotency_key) DO UPDATE SET \
             request_hash = excluded.request_hash, created_at = excluded.created_at, \
             status = NULL, content_type = NULL, response = NULL, reads = NULL, ran_at = NULL \
             WHERE idempotency_keys.created_at < $6 \
             OR (idempotency_keys.status IS NULL AND idempotency_keys.ran_at IS NULL \
             AND idempotency_keys.created_at < $7 \
             AND idempotency_keys.request_hash = excluded.request_hash) \
             RETURNING created_at",
        )
        .bind(self.practice_id)
        .bind(&key.token_id)
        .bind(&key.key)
        .bind(&key.request_hash)
        .bind(key.claimed_at)
        .bind(reclaim.expired_before)
        .bind(reclaim.abandoned_before)
        .fetch_optional(self.write())
        .await?;
        if taken.is_some() {
            return Ok(Claimed::Mine);
        }
        let held: Option<Held> = sqlx::query_as(
            "SELECT request_hash, created_at, ran_at, status, content_type, response, reads \
             FROM idempotency_keys \
             WHERE practice_id = $1 AND token_id = $2 AND idempotency_key = $3",
        )
        .bind(self.practice_id)
        .bind(&key.token_id)
        .bind(&key.key)
        .fetch_optional(self.write())
        .await?;
        Ok(match held {
            Some(held) if held.request_hash != key.request_hash => Claimed::OtherRequest,
            Some(Held {
                status: Some(status),
                content_type: Some(content_type),
                response: Some(response),
                reads,
                ..
            }) => Claimed::Done(StoredResponse {
                status,
                content_type,
                response,
                reads,
            }),
            Some(Held {
                ran_at: Some(_),
                created_at,
                ..
            }) if created_at < reclaim.abandoned_before => Claimed::Lost,
            // Unfinished, or swept away a moment ago: either way, the caller should retry.
            _ => Claimed::Pending,
        })
    }

    /// Keeps the response of the request that claimed the key, unless a retry took it over.
    pub async fn finish_idempotency_key(
        &self,
        key: &Key,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE idempotency_keys SET status = $5, content_type = $6, response = $7, \
             reads = $8 WHERE practice_id = $1 AND token_id = $2 AND idempotency_key = $3 \
             AND request_hash = $4 AND created_at = $9",
        )
        .bind(self.practice_id)
        .bind(&key.token_id)
        .bind(&key.key)
        .bind(&key.request_hash)
        .bind(response.status)
        .bind(&response.content_type)
        .bind(&response.response)
        .bind(&response.reads)
        .bind(key.claimed_at)
        .execute(self.write())
        .await?;
        Ok(())
    }

    /// Lets go of a key whose request wrote nothing, so that a retry runs it; true if it did.
    /// A key whose request wrote anything is kept (and false), and so is a retry's claim that
    /// took this one over.
    pub async fn release_idempotency_key(&self, key: &Key) -> StoreResult<bool> {
        let released = sqlx::query(
            "DELETE FROM idempotency_keys WHERE practice_id = $1 AND token_id = $2 \
             AND idempotency_key = $3 AND request_hash = $4 AND created_at = $5 \
             AND status IS NULL AND ran_at IS NULL",
        )
        .bind(self.practice_id)
        .bind(&key.token_id)
        .bind(&key.key)
        .bind(&key.request_hash)
        .bind(key.claimed_at)
        .execute(self.write())
        .await?;
        Ok(released.rows_affected() == 1)
    }

    /// Marks `key` as having written, in the transaction of a write it makes. A claim that a
    /// retry took over (its request ran past the time a retry waits for it) may not write:
    /// [`StoreError::TakenOver`], and the write is rolled back. The mark holds the key's row
    /// until the write commits, so that a retry cannot take it over in between.
    pub(super) async fn mark_key_ran(
        &self,
        tx: &mut Transaction<'_, Any>,
        key: &Key,
    ) -> StoreResult<()> {
        let marked = sqlx::query(
            "UPDATE idempotency_keys SET ran_at = COALESCE(ran_at, $5) WHERE practice_id = $1 \
             AND token_id = $2 AND idempotency_key = $3 AND request_hash = $4 \
             AND created_at = $6",
        )
        .bind(self.practice_id)
        .bind(&key.token_id)
        .bind(&key.key)
        .bind(&key.request_hash)
        .bind(now_ms())
        .bind(key.claimed_at)
        .execute(&mut **tx)
        .await?;
        match marked.rows_affected() {
            0 => Err(StoreError::TakenOver),
            _ => Ok(()),
        }
    }
}

impl Store {
    /// Forgets keys claimed before `before` (milliseconds), in every practice. Returns how
    /// many.
    pub async fn forget_idempotency_keys(&self, before: i64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(before)
            .execute(&self.write)
            .await?;
        Ok(done.rows_affected())
    }
}
