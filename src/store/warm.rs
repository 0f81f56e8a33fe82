//! Reading connections kept warm between statements.
//!
//! sqlx checks every connection that goes back to its pool with a round trip (on PostgreSQL a
//! `Sync` to the server and its answer; on SQLite a message to the connection's thread and
//! back), so that a connection left half-way through a statement (its future dropped) is not
//! handed to the next caller. A statement that ran to its end leaves its connection ready for
//! the next one: the store's hot reads take a connection from here and, once the statement has
//! ended, put it back here ([`Warm::done`]), skipping the check. A connection dropped any other
//! way (an error, a cancelled request) goes back to sqlx's pool, which checks it as before.
//!
//! At most half the pool is kept here, so that what still takes its connections from the pool
//! always finds some; a connection that has lain here a second is checked before it is used
//! again, as the pool does ([`super::CHECK_AFTER_IDLE`]).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::any::{AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection, Either, Execute, Executor};

use super::CHECK_AFTER_IDLE;

/// A warm connection, and since when it has lain idle.
type Idle = (PoolConnection<Any>, Instant);

/// Connections taken from a pool and kept between statements.
#[derive(Debug)]
pub(super) struct Warm {
    state: Mutex<State>,
    keep: usize,
}

#[derive(Debug)]
struct State {
    /// None once the store closes: what comes back then goes to the pool, which is closing.
    idle: Option<Vec<Idle>>,
    /// Statements waiting for the pool. While any waits, a connection whose statement ended
    /// goes back to the pool, and a new statement queues behind them there: one that found
    /// a warm connection would otherwise jump the pool's queue, and under load those waiting
    /// there waited seconds (a bare handler's p99 of 2.5 to 4 s, at a p50 of 15 ms). While
    /// any waits, no connection is warm (the one that found none started the wait).
    waiting: usize,
}

impl Warm {
    /// Keeps at most half of `pool_size` connections (at least one).
    pub(super) fn new(pool_size: u32) -> Warm {
        Warm {
            state: Mutex::new(State {
                idle: Some(Vec::new()),
                waiting: 0,
            }),
            keep: usize::try_from(pool_size / 2).unwrap_or(1).max(1),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives every warm connection back to the pool, and from now on every one that comes
    /// back: the pool waits for them as it closes.
    pub(super) fn close(&self) {
        let idle = self.state().idle.take();
        drop(idle);
    }

    /// How many connections are warm now.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.state().idle.as_ref().map_or(0, Vec::len)
    }

    /// A connection for one statement: a warm one while nobody waits for the pool, else one
    /// from `pool`, in its turn.
    pub(super) async fn take<'w>(&'w self, pool: &AnyPool) -> Result<Lent<'w>, sqlx::Error> {
        loop {
            let warm = {
                let mut state = self.state();
                let warm = match state.waiting {
                    0 => state.idle.as_mut().and_then(Vec::pop),
                    _ => None,
                };
                if warm.is_none() {
                    state.waiting += 1;
                }
                warm
            };
            let Some((mut connection, since)) = warm else {
                let waiting = Waiting(self);
                let connection = pool.acquire().await;
                drop(waiting);
                return Ok(Lent {
                    connection: connection?,
                    warm: self,
                });
            };
            if since.elapsed() >= CHECK_AFTER_IDLE && connection.ping().await.is_err() {
                // Broken while it lay here: the pool closes it (its own check fails too).
                continue;
            }
            return Ok(Lent {
                connection,
                warm: self,
            });
        }
    }
}

/// One statement waiting for the pool, counted until it has a connection or gives up (its
/// request cancelled).
struct Waiting<'w>(&'w Warm);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.state().waiting -= 1;
    }
}

/// A connection lent for one statement. [`Lent::done`] once the statement has ended keeps it
/// warm; dropped otherwise, it goes back to the pool, which checks it.
pub(super) struct Lent<'w> {
    connection: PoolConnection<Any>,
    warm: &'w Warm,
}

impl Lent<'_> {
    /// The statement ended: the connection is ready for the next one, kept warm unless
    /// enough are, a statement waits for the pool, or the store is closing.
    pub(super) fn done(self) {
        let Lent { connection, warm } = self;
        let mut state = warm.state();
        let waiting = state.waiting;
        if let Some(idle) = state
            .idle
            .as_mut()
            .filter(|idle| waiting == 0 && idle.len() < warm.keep)
        {
            idle.push((connection, Instant::now()));
            return;
        }
        drop(state);
        // Back to the pool as it drops.
    }
}

impl Deref for Lent<'_> {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.connection
    }
}

impl DerefMut for Lent<'_> {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.connection
    }
}

/// The reading pool, its statements on warm connections: what the store's reads run on, as
/// they would on the pool itself.
#[derive(Clone, Debug)]
pub(super) struct Reader {
    pool: AnyPool,
    warm: Arc<Warm>,
}

impl Reader {
    pub(super) fn new(pool: AnyPool, warm: Arc<Warm>) -> Reader {
        Reader { pool, warm }
    }
}

impl<'p> Executor<'p> for &'_ Reader {
    type Database = Any;

    /// Runs the statement to its end and hands out its results (the store reads every result
    /// of its statements; none streams).
    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
    {
        let reader = self.clone();
        stream::once(async move {
            let mut lent = reader.warm.take(&reader.pool).await?;
            let results: Vec<_> = (&mut *lent).fetch_many(query).try_collect().await?;
            lent.done();
            Ok::<_, sqlx::Error>(stream::iter(results.into_iter().map(Ok)))
        })
        .try_flatten()
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
    {
        let reader = self.clone();
        Box::pin(async move {
            let mut lent = reader.warm.take(&reader.pool).await?;
            let row = (&mut *lent).fetch_optional(query).await?;
            lent.done();
            Ok(row)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.pool.clone();
        Box::pin(async move { pool.acquire().await?.prepare_with(sql, parameters).await })
    }

    fn describe<'e>(
        self,
        sql: sqlx::SqlStr,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Any>, sqlx::Error>> {
        let pool = self.pool.clone();
        Box::pin(async move { pool.acquire().await?.describe(sql).await })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::any::AnyPoolOptions;

    use super::*;

    async fn pool(size: u32) -> AnyPool {
        sqlx::any::install_default_drivers();
        AnyPoolOptions::new()
            .max_connections(size)
            .connect("sqlite::memory:")
            .await
            .expect("an SQLite pool in memory")
    }

    #[tokio::test]
    async fn a_statement_that_ends_keeps_its_connection_warm_up_to_half_the_pool() {
        let pool = pool(4).await;
        let warm = Arc::new(Warm::new(4));
        let reader = Reader::new(pool.clone(), warm.clone());
        let one: (i64,) = sqlx::query_as("SELECT 1")
            .fetch_one(&reader)
            .await
            .expect("select");
        assert_eq!(one, (1,));
        assert_eq!(warm.kept(), 1);
        assert_eq!(pool.num_idle(), 0, "held warm, not back in the pool");
        // The next statement takes the same one.
        let rows: Vec<(i64,)> = sqlx::query_as("SELECT 2 UNION ALL SELECT 3")
            .fetch_all(&reader)
            .await
            .expect("select");
        assert_eq!(rows, [(2,), (3,)]);
        assert_eq!((warm.kept(), pool.size()), (1, 1));
        // Four at once: two stay warm, the others go back to the pool.
        let four = (0..4).map(|_| {
            let (warm, pool) = (&warm, &pool);
            async move {
                let mut lent = warm.take(pool).await.expect("take");
                sqlx::query("SELECT 1")
                    .execute(&mut *lent)
                    .await
                    .expect("select");
                lent
            }
        });
        let lent = futures_util::future::join_all(four).await;
        assert_eq!(pool.size(), 4);
        lent.into_iter().for_each(Lent::done);
        assert_eq!(warm.kept(), 2);
    }

    /// A statement waiting for the pool gets the next connection whose statement ends: it
    /// is not kept warm for whoever comes next, and who comes next queues behind it.
    #[tokio::test]
    async fn a_statement_waiting_for_the_pool_is_served_before_newcomers() {
        let pool = pool(2).await;
        let warm = Arc::new(Warm::new(2));
        let a = warm.take(&pool).await.expect("a");
        let b = warm.take(&pool).await.expect("b");
        assert_eq!(pool.size(), 2);
        // The pool is spent: c waits for it.
        let c = tokio::spawn({
            let (warm, pool) = (warm.clone(), pool.clone());
            async move {
                let c = warm.take(&pool).await.map(|lent| lent.done());
                c.is_ok()
            }
        });
        while warm.state().waiting == 0 {
            tokio::task::yield_now().await;
        }
        // a's statement ends while c waits: a goes to c, not to the warm ones.
        a.done();
        assert_eq!(warm.kept(), 0);
        let served = tokio::time::timeout(Duration::from_secs(5), c)
            .await
            .expect("c is served while b is still lent")
            .expect("join");
        assert!(served);
        assert_eq!(warm.state().waiting, 0);
        // Nobody waits now: c's connection stayed warm (half the pool), and b goes back to
        // the pool.
        assert_eq!(warm.kept(), 1);
        b.done();
        assert_eq!(warm.kept(), 1);
    }

    #[tokio::test]
    async fn a_statement_that_fails_gives_its_connection_back_to_the_pool() {
        let pool = pool(2).await;
        let warm = Arc::new(Warm::new(2));
        let reader = Reader::new(pool.clone(), warm.clone());
        let failed = sqlx::query("SELECT * FROM nowhere")
            .fetch_all(&reader)
            .await;
        assert!(failed.is_err());
        assert_eq!(warm.kept(), 0);
        let failed = sqlx::query("SELECT * FROM nowhere")
            .fetch_optional(&reader)
            .await;
        assert!(failed.is_err());
        assert_eq!(warm.kept(), 0);
    }

    #[tokio::test]
    async fn the_pool_closes_with_connections_warm_and_lent() {
        let pool = pool(4).await;
        let warm = Arc::new(Warm::new(4));
        let reader = Reader::new(pool.clone(), warm.clone());
        sqlx::query("SELECT 1")
            .execute(&reader)
            .await
            .expect("select");
        let lent = warm.take(&pool).await.expect("take");
        assert_eq!(warm.kept(), 0);
        sqlx::query("SELECT 1")
            .execute(&reader)
            .await
            .expect("select");
        assert_eq!((warm.kept(), pool.size()), (1, 2));
        warm.close();
        let closing = tokio::spawn({
            let pool = pool.clone();
            async move { pool.close().await }
        });
        // A connection that comes back once the store closes goes to the pool, not warm.
        lent.done();
        assert_eq!(warm.kept(), 0);
        tokio::time::timeout(Duration::from_secs(5), closing)
            .await
            .expect("the pool closes")
            .expect("join");
        assert!(sqlx::query("SELECT 1").execute(&reader).await.is_err());
    }
}
