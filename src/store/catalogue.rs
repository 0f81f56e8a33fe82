//! The practice's definitions that a patient's record refers to: access groups (which staff
//! see which patients) and number definitions ("NHS number", "Insurance number").

use sqlx::FromRow;

use super::audit::Event;
use super::{Change, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::{Bound, Record, Refusal};

/// An access group of the practice.
#[derive(Clone, Debug, FromRow, PartialEq, Eq)]
pub struct AccessGroup {
    pub id: String,
    /// Its name, unique within the practice, e.g. "mental-health".
    pub name: String,
    /// What people read, e.g. "Mental health team".
    pub label: String,
}

/// A number the practice records of its patients.
#[derive(Clone, Debug, FromRow, PartialEq, Eq)]
pub struct NumberDefinition {
    pub id: String,
    pub name: String,
    /// 1 for the practice's main number (at most one is).
    pub is_primary: i64,
    pub deleted_at: Option<i64>,
}

impl PracticeStore<'_> {
    /// Every access group of the practice, by name.
    pub async fn list_access_groups(&self) -> StoreResult<Vec<AccessGroup>> {
        Ok(sqlx::query_as(
            "SELECT id, name, label FROM access_groups WHERE practice_id = $1 ORDER BY name, id",
        )
        .bind(self.practice_id)
        .fetch_all(self.read())
        .await?)
    }

    /// Adds an access group. Refused if another has the name, or past the practice's bound.
    pub async fn create_access_group(
        &self,
        name: &str,
        label: &str,
    ) -> StoreResult<Change<AccessGroup>> {
        let group = AccessGroup {
            id: new_id(),
            name: name.to_string(),
            label: label.to_string(),
        };
        let mut tx = self.begin_write().await?;
        if self
            .at_bound(&mut tx, "access_groups", "", Bound::AccessGroups)
            .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::AccessGroups).into()));
        }
        let result = sqlx::query(
            "INSERT INTO access_groups (practice_id, id, name, label, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(self.practice_id)
        .bind(&group.id)
        .bind(&group.name)
        .bind(&group.label)
        .bind(now_ms())
        .execute(&mut *tx)
        .await;
        self.finish_unique(
            tx,
            result.map(|_| group),
            |g| Event::of("create", "access_group", &g.id),
            || Refusal::Taken(Record::AccessGroup, name.to_string()),
        )
        .await
    }

    /// Every number definition of the practice, the primary one first, then by name.
    pub async fn list_number_definitions(&self) -> StoreResult<Vec<NumberDefinition>> {
        Ok(sqlx::query_as(
            "SELECT id, name, is_primary, deleted_at FROM practice_numbers \
             WHERE practice_id = $1 ORDER BY is_primary DESC, name, id",
        )
        .bind(self.practice_id)
        .fetch_all(self.read())
        .await?)
    }

    /// Adds a number definition; a primary one takes the place of the practice's primary
    /// number, if it had one. Refused if another has the name, or past the practice's bound.
    pub async fn create_number_definition(
        &self,
        name: &str,
        primary: bool,
    ) -> StoreResult<Change<NumberDefinition>> {
        let made = NumberDefinition {
            id: new_id(),
            name: name.to_string(),
            is_primary: i64::from(primary),
            deleted_at: None,
        };
        let mut tx = self.begin_write().await?;
        if self
            .at_bound(&mut tx, "practice_numbers", "", Bound::NumberDefinitions)
            .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::NumberDefinitions).into()));
        }
        if primary {
            sqlx::query("UPDATE practice_numbers SET is_primary = 0 WHERE practice_id = $1")
                .bind(self.practice_id)
                .execute(&mut *tx)
                .await?;
        }
        let result = sqlx::query(
            "INSERT INTO practice_numbers (practice_id, id, name, is_primary, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(self.practice_id)
        .bind(&made.id)
        .bind(&made.name)
        .bind(made.is_primary)
        .bind(now_ms())
        .execute(&mut *tx)
        .await;
        self.finish_unique(
            tx,
            result.map(|_| made),
            |n| Event::of("create", "number_definition", &n.id),
            || Refusal::Taken(Record::NumberDefinition, name.to_string()),
        )
        .await
    }
}
