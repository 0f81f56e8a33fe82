//! Practices: the clinics that own everything else.

use sqlx::FromRow;

use super::{Store, StoreError, StoreResult, new_id, now_ms};

/// A practice (a clinic): the tenant that owns its patients, labels, staff, tokens and bookings.
#[derive(Clone, Debug, FromRow)]
pub struct Practice {
    pub id: String,
    pub name: String,
}

impl Store {
    /// Adds a practice.
    pub async fn create_practice(&self, name: &str) -> StoreResult<Practice> {
        let id = new_id();
        sqlx::query(
            "INSERT INTO practices (id, name, is_default, created_at) VALUES ($1, $2, 0, $3)",
        )
        .bind(&id)
        .bind(name)
        .bind(now_ms())
        .execute(&self.write)
        .await?;
        Ok(Practice {
            id,
            name: name.to_string(),
        })
    }

    /// The practice with this id, if there is one.
    pub async fn find_practice(&self, id: &str) -> StoreResult<Option<Practice>> {
        Ok(
            sqlx::query_as("SELECT id, name FROM practices WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.read)
                .await?,
        )
    }

    /// The default practice, made on first use, so that a single clinic never has to name one.
    pub async fn default_practice(&self) -> StoreResult<Practice> {
        let find = || async {
            sqlx::query_as::<_, Practice>("SELECT id, name FROM practices WHERE is_default = 1")
                .fetch_optional(&self.write)
                .await
        };
        if let Some(practice) = find().await? {
            return Ok(practice);
        }
        let inserted = sqlx::query(
            "INSERT INTO practices (id, name, is_default, created_at) VALUES ($1, $2, 1, $3)",
        )
        .bind(new_id())
        .bind("My practice")
        .bind(now_ms())
        .execute(&self.write)
        .await;
        match inserted {
            // Another process made it first: the unique index on is_default keeps it to one.
            Err(err) if !StoreError::is_unique_violation(&err) => return Err(err.into()),
            _ => {}
        }
        find().await?.ok_or_else(|| {
            StoreError::Internal(sqlx::Error::Protocol(
                "default practice vanished after insert".into(),
            ))
        })
    }
}
