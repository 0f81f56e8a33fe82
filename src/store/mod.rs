//! The only place with SQL. One module per resource; every query of a practice's data goes
//! through [`PracticeStore`], which carries the practice id into every statement, so that no
//! caller can forget the scope.
//!
//! The store talks to its engine through sqlx's `Any` driver with one SQL dialect (`$1`
//! placeholders, integer milliseconds for times, text ids) that SQLite and PostgreSQL both
//! speak; the engine is chosen by the database URL at start-up and nothing above this module
//! knows which one it is.

pub mod audit;
pub mod bookings;
pub mod catalogue;
mod error;
pub mod events;
pub mod idempotency;
mod journal;
pub mod labels;
pub mod locations;
pub mod patient_record;
pub mod patients;
pub mod practices;
pub mod products;
mod row;
mod sidecar;
pub mod sign_ins;
pub mod tokens;
pub mod users;
mod warm;
pub mod webhooks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, ConnectOptions, FromRow};

pub use crate::domain::Change;
use crate::domain::Refusal;
pub use error::StoreError;
use row::{Args, Columns};

/// How long a connection may lie idle in the pool before it is checked again on its way out
/// (a database restarted, a connection cut by a firewall): a busy server's connections go
/// from one statement to the next without a check of their own.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// Which database engine the store runs on, read from the URL's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl Engine {
    fn from_url(url: &str) -> Result<Engine, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Engine::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(Engine::Postgres)
        } else {
            Err(StoreError::Config(format!(
                "unsupported database URL {:?}: use sqlite://FILE or postgres://...",
                redact_url(url)
            )))
        }
    }

    /// A `FROM` item `r` with one column, `value`: the elements of the JSON array bound at
    /// `$param` (as text when `text`, else as JSON: on PostgreSQL `jsonb`, parsed once, where
    /// each `->>` of a `json` element parses its text again; the record of reads takes seven
    /// from each row). This is how a list travels to SQL: as
    /// one parameter, so that a statement's text does not change with the list's length (one
    /// prepared statement, reused) and it binds one value rather than hundreds (sqlx binds
    /// SQLite's parameters by looking each one up by name, which costs the square of their
    /// number).
    fn json_rows(self, param: usize, text: bool) -> String {
        match (self, text) {
            (Engine::Sqlite, _) => format!("json_each(${param}) AS r"),
            (Engine::Postgres, true) => {
                format!("json_array_elements_text(${param}::json) AS r(value)")
            }
            (Engine::Postgres, false) => {
                format!("jsonb_array_elements(${param}::jsonb) AS r(value)")
            }
        }
    }

    /// The elements of the JSON array in column (or expression) `of`, as rows named `alias`
    /// with a `value` column.
    fn json_rows_of(self, of: &str, alias: &str) -> String {
        match self {
            Engine::Sqlite => format!("json_each({of}) AS {alias}"),
            Engine::Postgres => format!("json_array_elements({of}::json) AS {alias}(value)"),
        }
    }

    /// What ends a SELECT that holds the rows it reads until the transaction ends: SQLite
    /// holds the whole database for a writing transaction already.
    fn for_update(self) -> &'static str {
        match self {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE",
        }
    }

    /// What ends a SELECT that keeps the rows it reads from changing until the transaction
    /// ends, while others may read them so too (SQLite's writing transaction holds the whole
    /// database already).
    fn for_share(self) -> &'static str {
        match self {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR SHARE",
        }
    }

    /// A condition on the column before it: one of the strings in the JSON array bound at
    /// `$param`. PostgreSQL gets an array, which it looks up through an index whatever it
    /// believes of the tables' sizes.
    fn in_list(self, param: usize) -> String {
        self.in_list_at(&format!("${param}"))
    }

    /// [`Engine::in_list`], for the placeholder `placeholder` (`$3`).
    fn in_list_at(self, placeholder: &str) -> String {
        let rows = match self {
            Engine::Sqlite => format!("json_each({placeholder}) AS r"),
            Engine::Postgres => {
                format!("json_array_elements_text({placeholder}::json) AS r(value)")
            }
        };
        let values = format!("SELECT r.value FROM {rows}");
        match self {
            Engine::Sqlite => format!("IN ({values})"),
            Engine::Postgres => format!("= ANY (ARRAY({values}))"),
        }
    }
}

/// How long a listener of PostgreSQL's notifications that lost its connection waits before
/// it listens again.
const RELISTEN_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A connection of its own listening on PostgreSQL's `channel`; `reconnect`: whether sqlx
/// connects it again by itself once it is lost (what was notified meanwhile is missed).
async fn listen(
    url: &str,
    channel: &str,
    reconnect: bool,
) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    listener.eager_reconnect(reconnect);
    listener.listen(channel).await?;
    Ok(listener)
}

/// A list of ids as the JSON array [`Engine::in_list`] reads.
fn json_list(ids: &[String]) -> String {
    serde_json::Value::from(ids).to_string()
}

/// The file of an SQLite URL; None for a database in memory.
fn sqlite_file(url: &str) -> StoreResult<Option<std::path::PathBuf>> {
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("bad database URL: {e}")))?;
    let in_memory = url.contains(":memory:") || url.contains("mode=memory");
    Ok((!in_memory).then(|| options.get_filename().to_path_buf()))
}

/// How far ahead of the last event's number a backup numbers its next events: more events
/// than a database writes between two backups.
const BACKUP_EVENT_GAP: i64 = 1 << 40;

/// Numbers the events of the SQLite backup at `path` on from [`BACKUP_EVENT_GAP`] past its
/// last: restored in place of a database that went on writing after the backup, its new
/// events come after every cursor that database handed out, rather than under the numbers of
/// events it had and the restored one lost, which a client holding such a cursor would pass
/// over without a word. (Until its first new event, such a cursor is past the end of the
/// log, and CURSOR_EXPIRED.)
async fn number_events_on_from_far_ahead(path: &str) -> StoreResult<()> {
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut copy = options.connect().await?;
    sqlx::query(
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'events', 0 \
         WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events')",
    )
    .execute(&mut copy)
    .await?;
    sqlx::query("UPDATE sqlite_sequence SET seq = seq + $1 WHERE name = 'events'")
        .bind(BACKUP_EVENT_GAP)
        .execute(&mut copy)
        .await?;
    sqlx::Connection::close(copy).await?;
    Ok(())
}

/// The SQLite database's canonical path, and the file `<database><suffix>` beside it: a
/// server and a command that reach the database through different links name one file.
fn beside_database(database: &std::path::Path, suffix: &str) -> (PathBuf, PathBuf) {
    let database = std::fs::canonicalize(database).unwrap_or_else(|_| database.to_owned());
    let mut path = database.as_os_str().to_owned();
    path.push(suffix);
    (database, path.into())
}

/// Gives `file`, made beside the SQLite `database`, the database's owner, as SQLite does with
/// its `-wal` file: a command run as root then leaves a file the server can still write.
/// Allowed to root only; anyone else made it as theirs already. Nothing to do without the
/// database.
fn owned_as(file: &std::fs::File, database: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(owner) = std::fs::metadata(database) {
        let mine = file.metadata()?;
        if (mine.uid(), mine.gid()) != (owner.uid(), owner.gid()) {
            let _ = std::os::unix::fs::fchown(file, Some(owner.uid()), Some(owner.gid()));
        }
    }
    Ok(())
}

/// Runs `work`, which blocks (files), on a blocking thread, off the runtime's.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> StoreResult<T> {
    Ok(tokio::task::spawn_blocking(work)
        .await
        .map_err(std::io::Error::other)??)
}

/// How the store connects: pool size and how long to wait for a connection. The defaults
/// are those of the command line (`config::DatabaseConfig`).
#[derive(Clone, Debug)]
pub struct PoolSettings {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
}

/// Handle on the database. Cheap to clone: one reference-counted pointer to [`Handles`]
/// (the pipeline, every request's schema data and the background tasks each hold one).
#[derive(Clone, Debug)]
pub struct Store(std::sync::Arc<Handles>);

impl std::ops::Deref for Store {
    type Target = Handles;

    fn deref(&self) -> &Handles {
        &self.0
    }
}

/// The pools and what goes with them, behind [`Store`].
#[derive(Debug)]
pub struct Handles {
    /// Pool for reads.
    read: AnyPool,
    /// Pool for writes. On SQLite it holds a single connection: SQLite has one writer at a time,
    /// and queueing writers here rather than in SQLite's busy handler means a transaction never
    /// fails half-way to upgrade its lock. On PostgreSQL it is the same pool as `read`.
    write: AnyPool,
    engine: Engine,
    /// Notified after every commit that wrote events.
    committed: std::sync::Arc<tokio::sync::Notify>,
    /// The database's URL, for what needs a connection of its own (PostgreSQL's LISTEN).
    url: String,
    /// Changes to tokens and staff users, for a cache of them.
    credentials: std::sync::Arc<tokens::CredentialWatch>,
    /// The reading pool as reads use it: on connections kept warm between statements (see
    /// [`warm`]).
    reader: warm::Reader,
    /// The reader's warm connections, given back to the pool as it closes.
    warm: std::sync::Arc<warm::Warm>,
    /// SQLite in a file: the journals of reads not yet moved into the audit log (see
    /// [`journal`]).
    journal: Option<std::sync::Arc<journal::Journal>>,
}

/// How a PostgreSQL database is backed up.
const PG_DUMP: &str = "a PostgreSQL database is backed up with its own tool: pg_dump \
                       --format=custom --file=FILE DATABASE_URL (and restored with pg_restore)";

/// For `backup`, before the database is opened: an error unless `url` names an SQLite file
/// that is there (opening a mistyped name would make it, and the copy would be of an empty
/// database), and, for PostgreSQL, what backs it up instead.
pub fn backup_source(url: &str) -> StoreResult<()> {
    match Engine::from_url(url)? {
        Engine::Postgres => Err(StoreError::Config(PG_DUMP.into())),
        // The file as sqlx reads the URL (percent-decoded, its query left out).
        Engine::Sqlite => match sqlite_file(url)? {
            Some(path) if path.is_file() => Ok(()),
            Some(path) => Err(StoreError::Config(format!(
                "there is no SQLite database at {:?}: give the --database (or \
                 PRACTICE_DATABASE_URL) of the one to back up",
                path.display().to_string()
            ))),
            None => Err(StoreError::Config(
                "a database in memory is gone with its process: there is nothing to back up".into(),
            )),
        },
    }
}

impl Store {
    /// Connects to the database at `url`, creating an SQLite file if there is none, and applies
    /// pending migrations.
    pub async fn open(url: &str, pool: &PoolSettings) -> StoreResult<Store> {
        let store = Store::connect(url, pool).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without migrating.
    pub async fn connect(url: &str, pool: &PoolSettings) -> StoreResult<Store> {
        sqlx::any::install_default_drivers();
        let engine = Engine::from_url(url)?;
        let url = match engine {
            Engine::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_string(),
        };
        let options = AnyConnectOptions::from_str(&url)
            .map_err(|e| StoreError::Config(format!("bad database URL: {e}")))?
            .log_statements(tracing::log::LevelFilter::Trace);
        let pool_options = || {
            AnyPoolOptions::new()
                .acquire_timeout(pool.acquire_timeout)
                .max_connections(pool.max_connections)
                // No idle timeout and no lifetime, so that sqlx starts no task to reap
                // connections: in sqlx 0.9.0 (the latest release) that task can read the
                // pool's count of idle connections at the instant a connection given back is
                // taken again before it was counted, when the count has wrapped below zero,
                // and then loops about 2^64 times without yielding: a core spinning for good,
                // and a process that never exits (sqlx issue 3645, fixed by pull request 4289,
                // not yet released). A `practice-api` command hung so in CI. Nothing here
                // needs the reaping: the reads hold their connections warm anyway (see
                // [`warm`]), and a connection idle for a second is checked before it is used.
                .idle_timeout(None)
                .max_lifetime(None)
                // sqlx checks a connection (a round trip: on SQLite to its thread, on
                // PostgreSQL to the server) when it goes back to the pool, and by default again
                // when it is taken out, before every statement. Checked on its way back, a
                // connection needs checking on its way out only if it has lain idle since.
                .test_before_acquire(false)
                .before_acquire(|connection, meta| {
                    Box::pin(async move {
                        if meta.idle_for >= CHECK_AFTER_IDLE {
                            sqlx::Connection::ping(connection).await?;
                        }
                        Ok(true)
                    })
                })
        };
        let store = match engine {
            Engine::Sqlite => {
                let write = pool_options()
                    .max_connections(1)
                    .connect_with(options.clone())
                    .await
                    .map_err(StoreError::from_connect)?;
                // WAL lets readers go on while the one writer writes; it is a property of the
                // file, so setting it once on the write connection is enough.
                sqlx::query("PRAGMA journal_mode = WAL")
                    .execute(&write)
                    .await
                    .map_err(StoreError::from_connect)?;
                let read = pool_options()
                    .connect_with(options)
                    .await
                    .map_err(StoreError::from_connect)?;
                // The reading pool serves the store's reads alone: all of it is held.
                let keep = usize::try_from(pool.max_connections).unwrap_or(usize::MAX);
                let warm = std::sync::Arc::new(warm::Warm::new(keep, pool.acquire_timeout));
                let file = sqlite_file(&url)?;
                Store(std::sync::Arc::new(Handles {
                    reader: warm::Reader::new(read.clone(), warm.clone()),
                    warm,
                    read,
                    write,
                    engine,
                    committed: Default::default(),
                    url: url.clone(),
                    credentials: std::sync::Arc::new(tokens::CredentialWatch::sqlite(
                        file.as_deref(),
                    )),
                    journal: file
                        .as_deref()
                        .and_then(journal::Journal::beside)
                        .map(std::sync::Arc::new),
                }))
            }
            Engine::Postgres => {
                let shared = pool_options()
                    .after_connect(|connection, _| {
                        Box::pin(async move {
                            // A transaction left open by an instance that froze, or whose
                            // machine went away without closing its connection, holds back
                            // every reader of the event log (it reads only what is older than
                            // the oldest transaction still open) until PostgreSQL ends it:
                            // after a minute idle, where it waited for TCP's keepalive, two
                            // hours by default. No transaction of the server waits idle on
                            // anything but its own next statement.
                            sqlx::query(sqlx::AssertSqlSafe(format!(
                                "SET idle_in_transaction_session_timeout = '{}s'",
                                IDLE_IN_TRANSACTION.as_secs()
                            )))
                            .execute(connection)
                            .await?;
                            Ok(())
                        })
                    })
                    .connect_with(options)
                    .await
                    .map_err(StoreError::from_connect)?;
                // Reads and writes share the pool: the reads hold half of it, so that a
                // write always finds some (none held from a pool of one).
                let keep = usize::try_from(pool.max_connections / 2).unwrap_or(usize::MAX);
                let warm = std::sync::Arc::new(warm::Warm::new(keep, pool.acquire_timeout));
                Store(std::sync::Arc::new(Handles {
                    reader: warm::Reader::new(shared.clone(), warm.clone()),
                    warm,
                    read: shared.clone(),
                    write: shared,
                    engine,
                    committed: Default::default(),
                    url: url.clone(),
                    credentials: Default::default(),
                    journal: None,
                }))
            }
        };
        Ok(store)
    }

    /// The migrations of this engine, as this build knows them.
    fn migrator(&self) -> sqlx::migrate::Migrator {
        match self.engine {
            Engine::Sqlite => sqlx::migrate!("migrations/sqlite"),
            Engine::Postgres => sqlx::migrate!("migrations/postgres"),
        }
    }

    /// Whether the store can serve: the database answers, and every migration this build knows
    /// is applied. The reason, when it cannot.
    pub async fn readiness(&self) -> Result<(), String> {
        let applied: Vec<(i64,)> =
            sqlx::query_as("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&self.reader)
                .await
                .map_err(|e| format!("the database does not answer: {}", StoreError::from(e)))?;
        let missing: Vec<String> = self
            .migrator()
            .iter()
            .filter(|m| !applied.iter().any(|(v,)| *v == m.version))
            .map(|m| m.version.to_string())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("migrations not applied: {}", missing.join(", ")))
        }
    }

    /// Applies pending migrations of this engine.
    pub async fn migrate(&self) -> StoreResult<()> {
        let migrator = self.migrator();
        // On PostgreSQL the migrator holds an advisory lock, so that instances starting
        // together apply each migration once; on SQLite, the file beside the database.
        let _turn = self.migration_turn().await?;
        migrator.run(&self.write).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(err) => StoreError::from(err),
            other => StoreError::Config(format!("migration failed: {other}")),
        })?;
        self.fill_product_search().await?;
        self.rebase_restored_events().await.map(drop)
    }

    /// On SQLite, this process's turn to migrate the database: the exclusive `flock` of
    /// `<database>-migrations-lock`, waited for on a blocking thread for as long as another
    /// process migrates. sqlx's migrator locks nothing on SQLite, so processes starting
    /// together on one file (two servers, a server and the command line) each read the same
    /// migrations as pending, and all but the first then failed on what the first had made
    /// ("table ... already exists"). Each migration is its own transaction, so nothing was
    /// applied twice; the process just did not start. None on PostgreSQL and in memory.
    async fn migration_turn(&self) -> StoreResult<Option<std::fs::File>> {
        if self.engine != Engine::Sqlite {
            return Ok(None);
        }
        let Some(database) = sqlite_file(&self.url)? else {
            return Ok(None);
        };
        let turn = blocking(move || {
            let (database, path) = beside_database(&database, "-migrations-lock");
            let file = std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false),
                0o600,
            )
            .open(&path)?;
            owned_as(&file, &database)?;
            file.lock()?;
            Ok(file)
        })
        .await?;
        Ok(Some(turn))
    }

    /// The store seen from one practice: every query it runs is scoped to `practice_id`.
    pub fn practice<'a>(&'a self, practice_id: &'a str) -> PracticeStore<'a> {
        PracticeStore {
            store: self,
            practice_id,
            author: None,
            viewer: None,
        }
    }

    /// Starts a transaction that will write. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so that a transaction that reads first never fails half-way when
    /// another process (a second instance, the command line) wrote in between; it waits
    /// for the lock instead, up to the busy timeout.
    async fn begin_write(&self) -> StoreResult<sqlx::Transaction<'static, sqlx::Any>> {
        Ok(match self.engine {
            Engine::Sqlite => self.write.begin_with("BEGIN IMMEDIATE").await?,
            Engine::Postgres => self.write.begin().await?,
        })
    }

    /// After a bulk import: has PostgreSQL count the tables again, so that its planner knows
    /// their new sizes now rather than whenever autovacuum comes round to them. (SQLite plans
    /// without statistics unless told to keep them, and is not told to.)
    pub async fn refresh_statistics(&self) -> StoreResult<()> {
        if self.engine == Engine::Postgres {
            sqlx::query("ANALYZE").execute(&self.write).await?;
        }
        Ok(())
    }

    /// Writes a consistent copy of the database, as it is now, to the new file `path`, while
    /// it serves: SQLite's `VACUUM INTO`, which reads one snapshot and leaves the database as
    /// it is. PostgreSQL has its own tool for this, and the error says which.
    pub async fn backup_to(&self, path: &str) -> StoreResult<()> {
        match self.engine {
            Engine::Sqlite => {
                // Reads left in the journals of servers gone go in first; a running
                // server's last second of them is in its own (see [`journal`]).
                self.move_reads().await?;
                sqlx::query("VACUUM INTO $1")
                    .bind(path)
                    .execute(&self.reader)
                    .await?;
                number_events_on_from_far_ahead(path).await
            }
            Engine::Postgres => Err(StoreError::Config(PG_DUMP.into())),
        }
    }

    /// How many connections each pool holds, and how many of them are idle: (read, write).
    /// The reads' warm connections are idle, though out of the pool (see [`warm`]); on
    /// PostgreSQL both are the one pool.
    pub fn pool_use(&self) -> ((u32, usize), (u32, usize)) {
        let warm = self.warm.kept();
        let shared = match self.engine {
            Engine::Postgres => warm,
            Engine::Sqlite => 0,
        };
        (
            (self.read.size(), self.read.num_idle() + warm),
            (self.write.size(), self.write.num_idle() + shared),
        )
    }

    /// The database engine behind the store.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The database's URL, for what needs a connection of its own (PostgreSQL's LISTEN).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Commits a transaction that wrote events, and tells this instance's readers of events
    /// (see [`Store::committed`]).
    async fn commit_events(&self, tx: sqlx::Transaction<'_, sqlx::Any>) -> StoreResult<()> {
        tx.commit().await?;
        self.committed.notify_waiters();
        Ok(())
    }

    /// Completes at the next commit of events through this store: a reader of events waits
    /// on it rather than poll (other processes' commits reach it by PostgreSQL's NOTIFY, or
    /// its polling).
    pub fn committed(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.committed.clone()
    }

    /// Whether [`Store::close`] has been called.
    pub fn is_closed(&self) -> bool {
        self.write.is_closed()
    }

    /// Closes the pools, waiting for connections in use to be returned.
    pub async fn close(&self) {
        if let Some(journal) = &self.journal {
            // The mover of every second, which may still run, makes no new journal now.
            journal.stop_making_ahead();
        }
        if let Err(error) = self.move_reads().await {
            tracing::warn!(%error, "could not move the journal of reads into the audit log: the next start will");
        }
        self.warm.close();
        self.write.close().await;
        self.read.close().await;
    }
}

/// The store scoped to one practice. Every method of the resource modules lives here, and each
/// binds `practice_id` as `$1`. Writes need an author (see [`PracticeStore::by`]): each records
/// who made it in the audit log, in its own transaction.
#[derive(Clone, Copy, Debug)]
pub struct PracticeStore<'a> {
    store: &'a Store,
    practice_id: &'a str,
    author: Option<audit::Author<'a>>,
    /// The access groups of the staff user reading, when they see only the patients of their
    /// groups (and those in none); None sees every patient (admins, API tokens, the operator).
    viewer: Option<&'a [String]>,
}

impl<'a> PracticeStore<'a> {
    /// The store the practice's rows are in, for what is kept across practices (the sign-in
    /// throttle's counts).
    pub fn store(&self) -> &'a Store {
        self.store
    }

    /// The store as a staff user of these access groups sees it: a patient in other groups
    /// (and none of theirs) does not exist for them, in any read or write of patients. None
    /// sees every patient.
    pub fn seen_by(self, groups: Option<&'a [String]>) -> PracticeStore<'a> {
        PracticeStore {
            viewer: groups,
            ..self
        }
    }

    /// The condition that keeps the patients of `alias` (a table or alias of `patients`) to
    /// those the viewer sees, with its parameter added to `args`; empty for a viewer who sees
    /// every patient.
    fn visible_patients(&self, args: &mut Args, alias: &str) -> String {
        let Some(groups) = self.viewer else {
            return String::new();
        };
        let theirs = args.add(json_list(groups).as_str());
        self.visible_patients_at(alias, &theirs)
    }

    /// [`PracticeStore::visible_patients`] with the viewer's groups at placeholder `param`.
    pub(crate) fn visible_patients_at(&self, alias: &str, param: &str) -> String {
        let (of_patient, of_viewer) = match self.store.engine {
            Engine::Sqlite => (
                format!("json_each({alias}.access_groups) AS pg"),
                format!("SELECT value FROM json_each({param})"),
            ),
            Engine::Postgres => (
                format!("json_array_elements_text({alias}.access_groups::json) AS pg(value)"),
                format!("SELECT value FROM json_array_elements_text({param}::json) AS vg(value)"),
            ),
        };
        format!(
            " AND ({alias}.access_groups = '[]' OR EXISTS (SELECT 1 FROM {of_patient} \
             WHERE pg.value IN ({of_viewer})))"
        )
    }

    /// The practice this store is scoped to.
    pub fn practice_id(&self) -> &'a str {
        self.practice_id
    }

    fn read(&self) -> &'a warm::Reader {
        &self.store.reader
    }

    fn write(&self) -> &'a AnyPool {
        &self.store.write
    }

    /// Starts a transaction that will write (see [`Store::begin_write`]).
    async fn begin_write(&self) -> StoreResult<sqlx::Transaction<'static, sqlx::Any>> {
        self.store.begin_write().await
    }

    /// Finishes the write of one record in `tx`: records its event and commits, or refuses
    /// with `taken` when a unique key already holds the record's value, with nothing written.
    async fn finish_unique<T>(
        &self,
        tx: sqlx::Transaction<'static, sqlx::Any>,
        written: Result<T, sqlx::Error>,
        event: impl FnOnce(&T) -> audit::Event<'_>,
        taken: impl FnOnce() -> Refusal,
    ) -> StoreResult<Change<T>> {
        match written {
            Ok(record) => {
                self.commit(tx, event(&record)).await?;
                Ok(Ok(record))
            }
            Err(e) if StoreError::is_unique_violation(&e) => Ok(Err(taken().into())),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the practice is at `bound` for the records of `table` that match `condition`,
    /// counted in `tx` after taking the practice's row, so that concurrent writers of such
    /// records count one after the other.
    async fn at_bound(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        table: &str,
        condition: &str,
        bound: crate::domain::Bound,
    ) -> StoreResult<bool> {
        self.lock_practice(tx).await?;
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE practice_id = $1 {condition}");
        let (count,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .fetch_one(&mut **tx)
            .await?;
        Ok(count >= i64::try_from(bound.max()).unwrap_or(i64::MAX))
    }

    /// The first of `ids` that names no record of `table` (with `condition`, a fixed SQL
    /// condition such as `AND product_type = 'appointment'`) in the practice, read in `tx`.
    async fn first_unknown(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        table: &str,
        condition: &str,
        ids: &[String],
    ) -> StoreResult<Option<String>> {
        // Held until the write commits (PostgreSQL; SQLite's one writer holds all): a delete
        // of one of them waits for it, and then sees what it wrote (deleteLabel takes the
        // label off the products that have it).
        let sql = format!(
            "SELECT id FROM {table} WHERE practice_id = $1 AND id = $2 {condition}{}",
            self.store.engine.for_share()
        );
        for id in ids {
            let found: Option<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(self.practice_id)
                .bind(id)
                .fetch_optional(&mut **tx)
                .await?;
            if found.is_none() {
                return Ok(Some(id.clone()));
            }
        }
        Ok(None)
    }

    /// Takes the practice's row in `tx`, so that writers who count the practice's records
    /// (its admins, its live tokens) count one after the other.
    async fn lock_practice(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>) -> StoreResult<()> {
        sqlx::query("UPDATE practices SET id = id WHERE id = $1")
            .bind(self.practice_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The rows of `table` with these ids, by id: one statement for a whole batch (what the
    /// GraphQL layer's DataLoaders call). Ids the practice does not have are left out.
    async fn by_ids<T>(
        &self,
        table: &str,
        columns: &str,
        ids: &[String],
    ) -> StoreResult<HashMap<String, T>>
    where
        T: for<'r> FromRow<'r, AnyRow> + Keyed + Send + Unpin,
    {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT {columns} FROM {table} WHERE practice_id = $1 AND id {}",
            self.store.engine.in_list(2)
        );
        let rows: Vec<T> = self.read_for_ids(&sql, ids).await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.key().to_string(), row))
            .collect())
    }

    /// [`PracticeStore::by_ids`], keeping to the rows the viewer sees: `visible` gives the
    /// condition that does (beginning with AND), its parameters added to the arguments after
    /// the list of ids. For a viewer who sees every patient, `by_ids` as it is.
    async fn by_ids_seen<T>(
        &self,
        table: &str,
        columns: &str,
        ids: &[String],
        visible: impl FnOnce(&mut Args) -> String,
    ) -> StoreResult<HashMap<String, T>>
    where
        T: for<'r> FromRow<'r, AnyRow> + Keyed + Send + Unpin,
    {
        if self.viewer.is_none() || ids.is_empty() {
            return self.by_ids(table, columns, ids).await;
        }
        let mut args = Args::default();
        let list = args.add(json_list(ids).as_str());
        let sql = format!(
            "SELECT {columns} FROM {table} WHERE practice_id = $1 AND id {}{}",
            self.store.engine.in_list_at(&list),
            visible(&mut args)
        );
        let rows: Vec<T> = args
            .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
            .fetch_all(self.read())
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.key().to_string(), row))
            .collect())
    }

    /// Runs `sql`, a read whose `$1` is the practice and whose `$2` is a list of ids, read
    /// with [`Engine::in_list`].
    async fn read_for_ids<T>(&self, sql: &str, ids: &[String]) -> StoreResult<Vec<T>>
    where
        T: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(json_list(ids))
            .fetch_all(self.read())
            .await?)
    }
}

/// A record with an id.
pub trait Keyed {
    fn key(&self) -> &str;
}

/// A page of a list: which rows to fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// 1-based page number.
    pub page: u32,
    pub page_size: u32,
}

impl PageRequest {
    fn limit(&self) -> i64 {
        // One more row than asked for tells whether there is a next page.
        i64::from(self.page_size) + 1
    }

    fn offset(&self) -> i64 {
        i64::from(self.page - 1) * i64::from(self.page_size)
    }

    /// Cuts the extra row fetched by `limit` and says whether there was one.
    fn finish<T>(&self, mut rows: Vec<T>) -> Page<T> {
        let has_more = rows.len() > self.page_size as usize;
        rows.truncate(self.page_size as usize);
        Page {
            items: rows,
            has_more,
        }
    }
}

/// One page of a list.
#[derive(Clone, Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub has_more: bool,
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A new opaque id: a UUIDv7, so that ids made later sort later and index pages stay warm.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The database URL with any password taken out (from the user info and from a `password`
/// parameter), for messages.
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut out = match (base.find("://"), base.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &base[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}://{}:***@{}", &base[..scheme_end], user, &base[at + 1..])
        }
        _ => base.to_string(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

/// The `createdAt` / `updatedAt` filters of a list, as SQL conditions.
fn time_filters(
    args: &mut Args,
    created: Option<(i64, i64)>,
    updated: Option<(i64, i64)>,
) -> String {
    let mut sql = String::new();
    for (range, column) in [(created, "created_at"), (updated, "updated_at")] {
        if let Some((start, end)) = range {
            let (a, b) = (args.add(start), args.add(end));
            sql += &format!(" AND {column} >= {a} AND {column} <= {b}");
        }
    }
    sql
}

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
pub(crate) fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Longest a PostgreSQL transaction of the server's may sit idle before PostgreSQL ends it
/// (see [`Store::connect`]).
const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(60);

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A PostgreSQL database made for one unit test, at `PRACTICE_TEST_POSTGRES_URL`'s
    /// server (by default the local one), as the API's tests make theirs; dropped with it,
    /// a test that failed included.
    pub(crate) struct Scratch {
        pub url: String,
        admin: String,
        name: String,
    }

    /// A fresh database; None, having said why, when the server cannot be reached (or will
    /// not make it), unless `CI=true`, where that fails the test.
    pub(crate) async fn postgres_database() -> Option<Scratch> {
        sqlx::any::install_default_drivers();
        let admin = std::env::var("PRACTICE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let name = format!("unit_{}", uuid::Uuid::now_v7().simple());
        let made = async {
            let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await?;
            sqlx::Connection::close(conn).await
        };
        match made.await {
            Ok(()) => Some(Scratch {
                url: format!(
                    "{}/{name}",
                    admin.rsplit_once('/').map_or("", |(server, _)| server)
                ),
                admin,
                name,
            }),
            Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
                panic!("no database made on PostgreSQL at {admin}, and CI=true: {e}")
            }
            Err(e) => {
                eprintln!("skipped on PostgreSQL: no database made at {admin}: {e}");
                None
            }
        }
    }

    impl Drop for Scratch {
        /// Drops the database, from a thread of its own: the test's runtime may be gone.
        fn drop(&mut self) {
            let (admin, name) = (self.admin.clone(), self.name.clone());
            let dropped = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime
                    .block_on(async {
                        let mut conn =
                            <sqlx::AnyConnection as sqlx::Connection>::connect(&admin).await?;
                        sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                        )))
                        .execute(&mut conn)
                        .await?;
                        sqlx::Connection::close(conn).await
                    })
                    .map_err(std::io::Error::other)
            })
            .join();
            if let Ok(Err(e)) = dropped {
                eprintln!("could not drop {}: {e}", self.name);
            }
        }
    }

    /// On PostgreSQL, every connection of the store ends a transaction left idle for a
    /// minute, so that a frozen instance's cannot hold back the event log's readers for hours.
    #[tokio::test]
    async fn postgres_ends_a_transaction_left_idle() {
        let Some(db) = postgres_database().await else {
            return;
        };
        let store = Store::open(&db.url, &PoolSettings::default())
            .await
            .expect("store");
        for _ in 0..3 {
            let mut tx = store.write.begin().await.expect("begin");
            let (timeout,): (String,) = sqlx::query_as("SHOW idle_in_transaction_session_timeout")
                .fetch_one(&mut *tx)
                .await
                .expect("show");
            assert_eq!(timeout, "1min");
        }
        store.close().await;
    }

    /// No pool of the store has a timeout or lifetime that would make sqlx start its task of
    /// reaping connections, which can spin for good (see `Store::connect`).
    #[tokio::test]
    async fn no_pool_reaps_its_connections() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("reap.db").display());
        let store = Store::connect(&url, &PoolSettings::default())
            .await
            .expect("store");
        for pool in [&store.read, &store.write] {
            assert_eq!(pool.options().get_idle_timeout(), None);
            assert_eq!(pool.options().get_max_lifetime(), None);
        }
        store.close().await;
    }

    #[test]
    fn redacts_password() {
        assert_eq!(
            redact_url("postgres://app:secret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redact_url("sqlite://practice.db"), "sqlite://practice.db");
        assert_eq!(
            redact_url("postgres://db/x?sslmode=require&password=secret"),
            "postgres://db/x?sslmode=require&password=***"
        );
    }

    #[test]
    fn escapes_like_wildcards() {
        assert_eq!(like_escape(r"50%_a\b"), r"50\%\_a\\b");
    }

    #[test]
    fn page_offsets() {
        let page = PageRequest {
            page: 3,
            page_size: 25,
        };
        assert_eq!(page.offset(), 50);
        assert_eq!(page.limit(), 26);
        let done = page.finish((0..26).collect::<Vec<_>>());
        assert!(done.has_more);
        assert_eq!(done.items.len(), 25);
    }
}
