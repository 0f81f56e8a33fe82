use thiserror::Error;

/// What can go wrong in the store. Business outcomes (a label already on a patient, a record
/// not found) are not errors: the resource modules return them as values.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database URL or its settings are wrong; the operator must fix them.
    #[error("{0}")]
    Config(String),
    /// The database cannot be reached or is overloaded; the request may succeed later.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// Another transaction held what this one needed: PostgreSQL broke a deadlock or could
    /// not serialize the transaction (40P01, 40001, 55P03), or SQLite stayed locked past its
    /// wait (another process writing). Tried again, the request may go through.
    #[error("the database was held by another change: {0}")]
    Contended(#[source] sqlx::Error),
    /// A mutation sent with an Idempotency-Key ran past the time a retry waits for it, and a
    /// retry took its key over: this request may not write, so that the mutation runs once.
    #[error("a retry with the same Idempotency-Key took this request's claim over")]
    TakenOver,
    /// Anything else: a bug or a corrupt database. Logged, never shown to clients.
    #[error("database error: {0}")]
    Internal(#[source] sqlx::Error),
}

impl StoreError {
    /// For errors while connecting: anything that is not a configuration problem means the
    /// database could not be reached.
    pub(super) fn from_connect(err: sqlx::Error) -> StoreError {
        match err {
            sqlx::Error::Configuration(e) => StoreError::Config(e.to_string()),
            other => StoreError::Unavailable(other.to_string()),
        }
    }

    /// True when the database refused a row because a unique index already holds its key.
    pub(super) fn is_unique_violation(err: &sqlx::Error) -> bool {
        matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
    }

    /// True when PostgreSQL ended the transaction to break a deadlock (40P01): tried again
    /// as a whole, it may go through.
    pub(super) fn is_deadlock(&self) -> bool {
        matches!(self, StoreError::Contended(sqlx::Error::Database(db))
            if db.code().as_deref() == Some("40P01"))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_) => StoreError::Unavailable(err.to_string()),
            sqlx::Error::Database(ref db) if contended(db.code().as_deref()) => {
                StoreError::Contended(err)
            }
            other => StoreError::Internal(other),
        }
    }
}

/// Whether a database error's code says another transaction was in the way: PostgreSQL's
/// deadlock, serialization failure and lock not available; SQLite's busy and locked, with their
/// extended codes.
fn contended(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("40P01" | "40001" | "55P03" | "5" | "6" | "261" | "262" | "517")
    )
}

/// A file of the store's own beside an SQLite database (the journal of reads) could not be
/// written or read: a full disk, a directory the server may not write to. It may do later.
impl From<std::io::Error> for StoreError {
    fn from(err: std::io::Error) -> Self {
        StoreError::Unavailable(format!("a file beside the database: {err}"))
    }
}
