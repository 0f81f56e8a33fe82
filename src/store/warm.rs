//! Reading connections kept warm between statements, and handed from one statement to the
//! next.
//!
//! sqlx checks every connection that goes back to its pool with a round trip (on PostgreSQL a
//! `Sync` to the server and its answer; on SQLite a message to the connection's thread and
//! back), so that a connection left half-way through a statement (its future dropped) is not
//! handed to the next caller. A statement that ran to its end leaves its connection ready for
//! the next one: the store's reads hold up to [`Warm::new`]'s `keep` connections of the pool
//! here and pass them from statement to statement without that check. A statement that ends
//! hands its connection to the first statement waiting for one, or keeps it warm
//! ([`Lent::done`]); one dropped any other way (an error, a cancelled request) goes back to
//! sqlx's pool, which checks it as before, and the first statement waiting takes one from the
//! pool in its place.
//!
//! Statements wait for a connection in the order they came, in a queue of their own: under
//! load every connection is lent and every new statement waits its turn here; a statement
//! never finds a warm connection while another waits, and waits its turn no longer than the
//! pool's time to wait for a connection (then it fails as it would have there; a turn that
//! sends it to the pool waits there again, as long). A connection that has lain warm a
//! second is checked before it is used again, as the pool does ([`super::CHECK_AFTER_IDLE`]).

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::any::{AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection, Either, Execute, Executor};
use tokio::sync::oneshot;

use super::CHECK_AFTER_IDLE;

/// A warm connection, and since when it has lain idle.
type Idle = (PoolConnection<Any>, Instant);

/// Connections taken from a pool, held between statements and handed from one to the next.
#[derive(Debug)]
pub(super) struct Warm {
    state: Mutex<State>,
    keep: usize,
    /// How long a statement waits for its turn at most, as it would for the pool's.
    wait: Duration,
}

#[derive(Debug)]
struct State {
    /// The connections held and not lent. None once the store closes: what comes back then
    /// goes to the pool, which is closing, and statements take theirs from the pool.
    idle: Option<Vec<Idle>>,
    /// Connections held, lent or idle (or being taken from the pool): at most `keep`.
    held: usize,
    /// Statements waiting for a connection, first come first served. Only while every one of
    /// the `keep` is held: a connection that comes back, and a place that frees up, goes to
    /// the first of them.
    queue: VecDeque<oneshot::Sender<Turn>>,
}

/// What a waiting statement is handed.
#[derive(Debug)]
enum Turn {
    /// A connection whose statement just ended.
    Connection(Lent),
    /// A place among the held connections, freed by one that went back to the pool: take one
    /// from the pool.
    FromPool(Slot),
}

/// Hands `turn` to the first waiting statement that still waits; gives it back if none does.
fn hand_on(queue: &mut VecDeque<oneshot::Sender<Turn>>, mut turn: Turn) -> Option<Turn> {
    while let Some(waiter) = queue.pop_front() {
        match waiter.send(turn) {
            Ok(()) => return None,
            // Gone (its request cancelled): the next one.
            Err(back) => turn = back,
        }
    }
    Some(turn)
}

/// One of the held places, taken by a statement: given up as it drops (the statement
/// cancelled, its connection gone back to the pool) unless [`Slot::keep`] said otherwise.
#[derive(Debug)]
struct Slot(Option<Arc<Warm>>);

impl Slot {
    /// A place of `warm`'s (None: a connection of the pool's, not held).
    fn of(warm: Option<&Arc<Warm>>) -> Slot {
        Slot(warm.cloned())
    }

    /// The place is not given up: its connection stays held (warm or handed on).
    fn keep(&mut self) -> Option<Arc<Warm>> {
        self.0.take()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(warm) = self.0.take() {
            warm.give_up_place();
        }
    }
}

impl Warm {
    /// Holds at most `keep` connections (0: none; every statement takes its connection from
    /// the pool and gives it back); a statement waits `wait` for its turn at most (the pool's
    /// own time to wait for a connection), then fails as it would have there.
    pub(super) fn new(keep: usize, wait: Duration) -> Warm {
        Warm {
            state: Mutex::new(State {
                idle: Some(Vec::new()),
                held: 0,
                queue: VecDeque::new(),
            }),
            keep,
            wait,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives every warm connection back to the pool, and from now on every one that comes
    /// back; statements waiting take theirs from the pool, which waits for them as it closes.
    pub(super) fn close(&self) {
        let (idle, queue) = {
            let mut state = self.state();
            let idle = state.idle.take();
            state.held -= idle.as_ref().map_or(0, Vec::len);
            (idle, std::mem::take(&mut state.queue))
        };
        drop(idle);
        drop(queue);
    }

    /// How many connections are warm now: idle, though out of the pool.
    pub(super) fn kept(&self) -> usize {
        self.state().idle.as_ref().map_or(0, Vec::len)
    }

    /// How many statements wait for a connection.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.state().queue.len()
    }

    /// A place freed (a held connection gone back to the pool, or a statement that had one
    /// gone): to the first statement waiting, to take a connection from the pool with.
    fn give_up_place(self: &Arc<Self>) {
        let mut state = self.state();
        match hand_on(&mut state.queue, Turn::FromPool(Slot::of(Some(self)))) {
            None => {}
            Some(Turn::FromPool(mut slot)) => {
                slot.keep();
                state.held -= 1;
            }
            Some(other) => {
                drop(state);
                drop(other);
            }
        }
    }

    /// A connection for one statement: a warm one while none waits, else one from `pool`
    /// while fewer than `keep` are held, else the next one handed on, in its turn.
    pub(super) async fn take(self: &Arc<Self>, pool: &AnyPool) -> Result<Lent, sqlx::Error> {
        enum Next {
            Warm(Idle),
            Pool(Slot),
            Wait(oneshot::Receiver<Turn>),
        }
        loop {
            let next = {
                let mut state = self.state();
                let waited = !state.queue.is_empty();
                if self.keep == 0 || state.idle.is_none() {
                    // Keeping none, or closing.
                    Next::Pool(Slot::of(None))
                } else if let Some(warm) =
                    state.idle.as_mut().filter(|_| !waited).and_then(Vec::pop)
                {
                    Next::Warm(warm)
                } else if state.held < self.keep {
                    state.held += 1;
                    Next::Pool(Slot::of(Some(self)))
                } else {
                    // Those that gave up waiting (cancelled, out of time) leave the queue
                    // here, not only when a turn comes: under statements slower than the
                    // wait, nothing else would sweep them.
                    state.queue.retain(|waiter| !waiter.is_closed());
                    let (turn, wait) = oneshot::channel();
                    state.queue.push_back(turn);
                    Next::Wait(wait)
                }
            };
            let slot = match next {
                Next::Warm((connection, since)) => {
                    let mut lent = Lent {
                        connection,
                        slot: Slot::of(Some(self)),
                    };
                    if since.elapsed() < CHECK_AFTER_IDLE || lent.connection.ping().await.is_ok() {
                        return Ok(lent);
                    }
                    // Broken while it lay here: the pool closes it (its own check fails too),
                    // and its place takes another.
                    let Lent { connection, slot } = lent;
                    drop(connection);
                    slot
                }
                Next::Pool(slot) => slot,
                // (Given up, its turn, if handed meanwhile, is dropped with the receiver: the
                // connection goes back to the pool and its place to the next.)
                Next::Wait(wait) => match tokio::time::timeout(self.wait, wait).await {
                    Ok(Ok(Turn::Connection(lent))) => return Ok(lent),
                    Ok(Ok(Turn::FromPool(slot))) => slot,
                    // The store closes: the pool, as it closes, says so.
                    Ok(Err(_)) => continue,
                    Err(_) => return Err(sqlx::Error::PoolTimedOut),
                },
            };
            // If this fails or the statement is cancelled meanwhile, the place is given up.
            let connection = pool.acquire().await?;
            return Ok(Lent { connection, slot });
        }
    }
}

/// A connection lent for one statement. [`Lent::done`] once the statement has ended hands it
/// on or keeps it warm; dropped otherwise, it goes back to the pool, which checks it.
#[derive(Debug)]
pub(super) struct Lent {
    // (Dropped first: the connection is back in the pool before its place is given up.)
    connection: PoolConnection<Any>,
    slot: Slot,
}

impl Lent {
    /// The statement ended: the connection is ready for the next one, handed to the first
    /// statement waiting, else kept warm; unless it is not one of the held, or the store is
    /// closing.
    pub(super) fn done(self) {
        let Lent {
            connection,
            mut slot,
        } = self;
        let Some(warm) = slot.keep() else {
            // Back to the pool as it drops.
            return;
        };
        let mut state = warm.state();
        if state.idle.is_none() {
            state.held -= 1;
            return;
        }
        let lent = Lent {
            connection,
            slot: Slot::of(Some(&warm)),
        };
        match hand_on(&mut state.queue, Turn::Connection(lent)) {
            None => {}
            Some(Turn::Connection(lent)) => {
                let Lent {
                    connection,
                    mut slot,
                } = lent;
                slot.keep();
                if let Some(idle) = state.idle.as_mut() {
                    idle.push((connection, Instant::now()));
                }
            }
            Some(other) => {
                drop(state);
                drop(other);
            }
        }
    }
}

impl Deref for Lent {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.connection
    }
}

impl DerefMut for Lent {
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
        let reader = self.clone();
        Box::pin(async move {
            let mut lent = reader.warm.take(&reader.pool).await?;
            let prepared = (&mut *lent).prepare_with(sql, parameters).await?;
            lent.done();
            Ok(prepared)
        })
    }

    fn describe<'e>(
        self,
        sql: sqlx::SqlStr,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Any>, sqlx::Error>> {
        let reader = self.clone();
        Box::pin(async move {
            let mut lent = reader.warm.take(&reader.pool).await?;
            let described = (&mut *lent).describe(sql).await?;
            lent.done();
            Ok(described)
        })
    }
}

#[cfg(test)]
mod tests {
    use sqlx::any::AnyPoolOptions;

    use super::*;

    /// Longer than any test waits for its turn.
    const WAIT: Duration = Duration::from_secs(30);

    async fn pool(size: u32) -> AnyPool {
        sqlx::any::install_default_drivers();
        AnyPoolOptions::new()
            .max_connections(size)
            .connect("sqlite::memory:")
            .await
            .expect("an SQLite pool in memory")
    }

    /// Takes a connection and runs a statement on it.
    async fn lent(warm: &Arc<Warm>, pool: &AnyPool) -> Lent {
        let mut lent = warm.take(pool).await.expect("take");
        sqlx::query("SELECT 1")
            .execute(&mut *lent)
            .await
            .expect("select");
        lent
    }

    /// A statement that waits for a connection, in a task; true once it has one.
    fn waiter(warm: &Arc<Warm>, pool: &AnyPool) -> tokio::task::JoinHandle<bool> {
        let (warm, pool) = (warm.clone(), pool.clone());
        tokio::spawn(async move { warm.take(&pool).await.map(Lent::done).is_ok() })
    }

    async fn until_waiting(warm: &Warm, count: usize) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while warm.waiting() != count {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("statements queue up");
    }

    async fn served(waiter: tokio::task::JoinHandle<bool>) -> bool {
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("served")
            .expect("join")
    }

    #[tokio::test]
    async fn a_statement_that_ends_keeps_its_connection_warm_for_the_next() {
        let pool = pool(4).await;
        let warm = Arc::new(Warm::new(2, WAIT));
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
        // Two at once: two connections held, both kept warm after.
        let (a, b) = tokio::join!(lent(&warm, &pool), lent(&warm, &pool));
        assert_eq!(pool.size(), 2);
        a.done();
        b.done();
        assert_eq!(warm.kept(), 2);
    }

    /// With every held connection lent, a statement waits for the next one to end and gets
    /// it, without another from the pool (nor its check); statements are served in the
    /// order they came, and one that gave up waiting is passed over.
    #[tokio::test]
    async fn statements_waiting_get_the_connections_that_end_in_their_turn() {
        let pool = pool(4).await;
        let warm = Arc::new(Warm::new(2, WAIT));
        let a = lent(&warm, &pool).await;
        let b = lent(&warm, &pool).await;
        let c = waiter(&warm, &pool);
        until_waiting(&warm, 1).await;
        let gone = waiter(&warm, &pool);
        until_waiting(&warm, 2).await;
        let d = waiter(&warm, &pool);
        until_waiting(&warm, 3).await;
        gone.abort();
        assert!(gone.await.is_err(), "cancelled");
        // a ends: c has it (not d, who came later, nor a warm place).
        a.done();
        assert!(served(c).await);
        // c's statement ended with d waiting (the cancelled one passed over): d has it.
        assert!(served(d).await);
        assert_eq!((warm.waiting(), warm.kept()), (0, 1));
        assert_eq!(pool.size(), 2, "no connection beyond the two held");
        b.done();
        assert_eq!(warm.kept(), 2);
        assert_eq!(pool.num_idle(), 0, "held warm, not back in the pool");
    }

    /// A statement that fails gives its connection back to the pool, which checks it; its
    /// place goes to the first statement waiting, which takes a connection from the pool.
    #[tokio::test]
    async fn a_statement_that_fails_gives_its_connection_back_and_its_place_on() {
        let pool = pool(2).await;
        let warm = Arc::new(Warm::new(1, WAIT));
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
        assert_eq!((warm.kept(), warm.state().held), (0, 0));
        // The one place taken; a statement waits; the first is dropped half-way.
        let a = lent(&warm, &pool).await;
        let b = waiter(&warm, &pool);
        until_waiting(&warm, 1).await;
        drop(a);
        assert!(served(b).await);
        assert_eq!((warm.kept(), warm.state().held), (1, 1));
    }

    /// Keeping none (a pool too small to share), every statement takes its connection from
    /// the pool and gives it back.
    #[tokio::test]
    async fn keeping_none_every_statement_uses_the_pool() {
        let pool = pool(1).await;
        let warm = Arc::new(Warm::new(0, WAIT));
        let reader = Reader::new(pool.clone(), warm.clone());
        for _ in 0..3 {
            sqlx::query("SELECT 1")
                .execute(&reader)
                .await
                .expect("select");
            assert_eq!((warm.kept(), warm.state().held), (0, 0));
            assert_eq!(pool.size(), 1);
        }
    }

    #[tokio::test]
    async fn the_pool_closes_with_connections_warm_lent_and_awaited() {
        let pool = pool(4).await;
        let warm = Arc::new(Warm::new(2, WAIT));
        let reader = Reader::new(pool.clone(), warm.clone());
        sqlx::query("SELECT 1")
            .execute(&reader)
            .await
            .expect("select");
        let lent = lent(&warm, &pool).await;
        assert_eq!(warm.kept(), 0);
        let other = self::lent(&warm, &pool).await;
        let waiting = waiter(&warm, &pool);
        until_waiting(&warm, 1).await;
        drop(other);
        assert!(served(waiting).await);
        // Its place went to the one that waited, which kept its connection warm.
        assert_eq!((warm.kept(), warm.state().held), (1, 2));
        let waiting = {
            let other = self::lent(&warm, &pool).await;
            let waiting = waiter(&warm, &pool);
            until_waiting(&warm, 1).await;
            warm.close();
            drop(other);
            waiting
        };
        // The statement that waited takes its connection from the pool, not closed yet.
        assert!(served(waiting).await);
        let closing = tokio::spawn({
            let pool = pool.clone();
            async move { pool.close().await }
        });
        // A connection that comes back once the store closes goes to the pool, not warm.
        lent.done();
        assert_eq!((warm.kept(), warm.state().held), (0, 0));
        tokio::time::timeout(Duration::from_secs(5), closing)
            .await
            .expect("the pool closes")
            .expect("join");
        assert!(sqlx::query("SELECT 1").execute(&reader).await.is_err());
    }

    /// A statement that waits longer than the pool would have let it fails as it would have
    /// there, and the connection it was not given goes on to the next.
    #[tokio::test]
    async fn a_statement_waits_its_turn_no_longer_than_for_the_pool() {
        let pool = pool(2).await;
        let warm = Arc::new(Warm::new(1, Duration::from_millis(50)));
        let a = lent(&warm, &pool).await;
        let waited = warm.take(&pool).await;
        assert!(
            matches!(waited, Err(sqlx::Error::PoolTimedOut)),
            "{waited:?}"
        );
        assert_eq!(warm.waiting(), 1, "its place in the queue is left behind");
        // The next to queue sweeps it away: one left behind at a time, not one a request.
        let waited = warm.take(&pool).await;
        assert!(
            matches!(waited, Err(sqlx::Error::PoolTimedOut)),
            "{waited:?}"
        );
        assert_eq!(warm.waiting(), 1);
        // a ends: the one that gave up is passed over, and the connection stays warm.
        a.done();
        assert_eq!((warm.waiting(), warm.kept(), warm.state().held), (0, 1, 1));
        let b = lent(&warm, &pool).await;
        b.done();
        assert_eq!(warm.kept(), 1);
    }

    /// Preparing and describing a statement take their connection as statements do: with
    /// every connection held warm, they do not wait for the pool.
    #[tokio::test]
    async fn preparing_takes_a_held_connection_too() {
        let pool = pool(1).await;
        let warm = Arc::new(Warm::new(1, WAIT));
        let reader = Reader::new(pool.clone(), warm.clone());
        sqlx::query("SELECT 1")
            .execute(&reader)
            .await
            .expect("select");
        assert_eq!(warm.kept(), 1, "the pool's one connection is held");
        let prepared = tokio::time::timeout(
            Duration::from_secs(5),
            (&reader).prepare(sqlx::SqlSafeStr::into_sql_str("SELECT 2")),
        )
        .await
        .expect("not waiting for the pool");
        assert!(prepared.is_ok(), "{:?}", prepared.err());
        assert_eq!(warm.kept(), 1);
    }
}
