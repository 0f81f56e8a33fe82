//! Sign-in throttling: failed sign-ins per subject (an email, a client address), shared by
//! every instance of the database. Not practice-scoped: signIn names no practice.

use super::{Store, StoreResult};

/// A subject of the throttle, and how many failures it has before delays start.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'s> {
    /// `email:...` or `address:...`.
    pub key: &'s str,
    pub free_failures: i64,
}

impl Store {
    /// Counts a sign-in attempt against every subject, before its password is checked, unless
    /// one of them is blocked: then nothing is counted, and the answer is when that subject
    /// is free again (milliseconds). `delay(n)` is how long a subject is blocked after its
    /// n-th failure beyond its free ones (n from 0).
    pub async fn count_sign_in(
        &self,
        subjects: &[Subject<'_>],
        now: i64,
        delay: impl Fn(i64) -> i64,
    ) -> StoreResult<Result<(), i64>> {
        let mut tx = self.begin_write().await?;
        for subject in subjects {
            let counted: Option<(i64,)> = sqlx::query_as(
                "INSERT INTO sign_in_failures (subject, failures, last_at) VALUES ($1, 1, $2) \
                 ON CONFLICT (subject) DO UPDATE SET failures = sign_in_failures.failures + 1, \
                 last_at = $2 WHERE sign_in_failures.blocked_until IS NULL \
                 OR sign_in_failures.blocked_until <= $2 RETURNING failures",
            )
            .bind(subject.key)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((failures,)) = counted else {
                // Blocked: the transaction is dropped, and what it counted with it.
                let (until,): (Option<i64>,) =
                    sqlx::query_as("SELECT blocked_until FROM sign_in_failures WHERE subject = $1")
                        .bind(subject.key)
                        .fetch_one(&mut *tx)
                        .await?;
                return Ok(Err(until.unwrap_or(now)));
            };
            if failures >= subject.free_failures {
                sqlx::query("UPDATE sign_in_failures SET blocked_until = $2 WHERE subject = $1")
                    .bind(subject.key)
                    .bind(now.saturating_add(delay(failures - subject.free_failures)))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// After a successful sign-in: its email's failures are forgiven; the attempt counted
    /// against its address is taken back.
    pub async fn sign_in_succeeded(
        &self,
        email: &str,
        address: Option<Subject<'_>>,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1")
            .bind(email)
            .execute(&mut *tx)
            .await?;
        if let Some(address) = address {
            sqlx::query(
                "UPDATE sign_in_failures SET failures = failures - 1, blocked_until = \
                 CASE WHEN failures - 1 < $2 THEN NULL ELSE blocked_until END \
                 WHERE subject = $1",
            )
            .bind(address.key)
            .bind(address.free_failures)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Forgets the subjects that last failed before `before` and are not blocked; returns
    /// how many.
    pub async fn forget_sign_in_failures(&self, before: i64, now: i64) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM sign_in_failures WHERE last_at < $1 \
             AND (blocked_until IS NULL OR blocked_until < $2)",
        )
        .bind(before)
        .bind(now)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected())
    }
}
