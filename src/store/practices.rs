//! Practices: the clinics that own everything else.

use sqlx::FromRow;

use super::audit::{Actor, Author, Event};
use super::{Change, PracticeStore, Store, StoreError, StoreResult, new_id, now_ms};
use crate::domain::{Record, Refusal};

/// A practice (a clinic): the tenant that owns its patients, labels, staff, tokens and bookings.
#[derive(Clone, Debug, FromRow)]
pub struct Practice {
    pub id: String,
    pub name: String,
    /// The IANA time zone the practice works in, e.g. "Europe/London".
    pub timezone: String,
}

impl Store {
    /// Adds a practice.
    pub async fn create_practice(&self, name: &str) -> StoreResult<Practice> {
        let id = new_id();
        self.insert_practice(&id, name, false).await?;
        Ok(Practice {
            id,
            name: name.to_string(),
            timezone: "UTC".to_string(),
        })
    }

    /// Inserts a practice, and the operator's event that made it, in one transaction. False
    /// when the practice is to be the default and another already is.
    async fn insert_practice(&self, id: &str, name: &str, is_default: bool) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let inserted = sqlx::query(
            "INSERT INTO practices (id, name, is_default, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(name)
        .bind(i64::from(is_default))
        .bind(now_ms())
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(err) if StoreError::is_unique_violation(&err) => return Ok(false),
            other => other?,
        };
        let operator = Actor::operator();
        let author = Author {
            actor: &operator,
            operation: Some("practice create"),
            key: None,
        };
        self.practice(id)
            .by(author)
            .commit(tx, Event::of("create", "practice", id))
            .await?;
        Ok(true)
    }

    /// The practice with this id, if there is one.
    pub async fn find_practice(&self, id: &str) -> StoreResult<Option<Practice>> {
        Ok(
            sqlx::query_as("SELECT id, name, timezone FROM practices WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.reader)
                .await?,
        )
    }

    /// The default practice, made on first use, so that a single clinic never has to name one.
    pub async fn default_practice(&self) -> StoreResult<Practice> {
        let find = || async {
            sqlx::query_as::<_, Practice>(
                "SELECT id, name, timezone FROM practices WHERE is_default = 1",
            )
            .fetch_optional(&self.write)
            .await
        };
        if let Some(practice) = find().await? {
            return Ok(practice);
        }
        // False when another process made it first: the unique index on is_default keeps it
        // to one. Either way, it is there now.
        self.insert_practice(&new_id(), "My practice", true).await?;
        find().await?.ok_or_else(|| {
            StoreError::Internal(sqlx::Error::Protocol(
                "default practice vanished after insert".into(),
            ))
        })
    }
}

impl PracticeStore<'_> {
    /// Renames the practice or changes its time zone; the values given are written, the
    /// others kept.
    pub async fn update_practice(
        &self,
        name: Option<&str>,
        timezone: Option<&str>,
    ) -> StoreResult<Change<Practice>> {
        let mut tx = self.begin_write().await?;
        let practice: Option<Practice> = sqlx::query_as(
            "UPDATE practices SET name = COALESCE($2, name), timezone = COALESCE($3, timezone) \
             WHERE id = $1 RETURNING id, name, timezone",
        )
        .bind(self.practice_id())
        .bind(name)
        .bind(timezone)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(practice) = practice else {
            return Ok(Err(Refusal::NotFound(
                Record::Practice,
                self.practice_id().into(),
            )
            .into()));
        };
        self.commit(tx, Event::of("update", "practice", &practice.id))
            .await?;
        Ok(Ok(practice))
    }
}
