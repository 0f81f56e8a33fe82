//! Labels: a practice's catalogue of tags (e.g. "VIP", "Allergy") that can be put on patients.

use std::collections::HashMap;

use sqlx::{Any, FromRow, Transaction};

use super::audit::Event;
use super::{Change, Page, PageRequest, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::{Record, Refusal};

/// A label of the practice's catalogue.
#[derive(Clone, Debug, PartialEq, FromRow)]
pub struct Label {
    pub id: String,
    pub title: String,
    pub color: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

const LABEL_COLUMNS: &str = "id, title, color, created_at, updated_at";

impl super::Keyed for Label {
    fn key(&self) -> &str {
        &self.id
    }
}

impl PracticeStore<'_> {
    /// The labels with these ids, by id.
    pub async fn labels_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, Label>> {
        self.by_ids("labels", LABEL_COLUMNS, ids).await
    }

    /// A page of labels, by title.
    pub async fn list_labels(&self, page: PageRequest) -> StoreResult<Page<Label>> {
        let sql = format!(
            "SELECT {LABEL_COLUMNS} FROM labels WHERE practice_id = $1 \
             ORDER BY title, id LIMIT $2 OFFSET $3"
        );
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(page.limit())
            .bind(page.offset())
            .fetch_all(self.read())
            .await?;
        Ok(page.finish(rows))
    }

    /// The label with this id, if the practice has one.
    pub async fn find_label(&self, id: &str) -> StoreResult<Option<Label>> {
        let sql = format!("SELECT {LABEL_COLUMNS} FROM labels WHERE practice_id = $1 AND id = $2");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(self.read())
            .await?)
    }

    /// Adds a label to the catalogue.
    pub async fn create_label(
        &self,
        title: &str,
        color: Option<&str>,
    ) -> StoreResult<Change<Label>> {
        let now = now_ms();
        let label = Label {
            id: new_id(),
            title: title.to_string(),
            color: color.map(str::to_string),
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.begin_write().await?;
        let result = sqlx::query(
            "INSERT INTO labels (practice_id, id, title, color, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $5)",
        )
        .bind(self.practice_id)
        .bind(&label.id)
        .bind(&label.title)
        .bind(&label.color)
        .bind(now)
        .execute(&mut *tx)
        .await;
        self.finish_label(tx, "create", result.map(|_| label), title)
            .await
    }

    /// Changes a label's title and/or colour; `None` leaves a field as it is. A change that
    /// leaves the label as it was writes its audit row alone, and no event.
    pub async fn update_label(
        &self,
        id: &str,
        title: Option<&str>,
        color: Option<&str>,
    ) -> StoreResult<Change<Label>> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "SELECT {LABEL_COLUMNS} FROM labels WHERE practice_id = $1 AND id = $2{}",
            self.store.engine.for_update()
        );
        let found: Option<Label> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(label) = found else {
            return Ok(Err(Refusal::NotFound(Record::Label, id.to_string()).into()));
        };
        let changed = Label {
            title: title.map_or(label.title.clone(), str::to_string),
            color: color.map(str::to_string).or(label.color.clone()),
            ..label.clone()
        };
        if changed == label {
            self.commit_unchanged(tx, Event::of("update", "label", id))
                .await?;
            return Ok(Ok(label));
        }
        let changed = Label {
            updated_at: now_ms(),
            ..changed
        };
        let result = sqlx::query(
            "UPDATE labels SET title = $3, color = $4, updated_at = $5 \
             WHERE practice_id = $1 AND id = $2",
        )
        .bind(self.practice_id)
        .bind(id)
        .bind(&changed.title)
        .bind(&changed.color)
        .bind(changed.updated_at)
        .execute(&mut *tx)
        .await;
        let title = changed.title.clone();
        self.finish_label(tx, "update", result.map(|_| changed), &title)
            .await
    }

    /// Removes a label from the catalogue and from every patient that has it. The label is
    /// held first, so that no one puts it on a patient meanwhile: every patient who loses it is
    /// in the record.
    pub async fn delete_label(&self, id: &str) -> StoreResult<Change<Label>> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "SELECT id FROM labels WHERE practice_id = $1 AND id = $2{}",
            self.store.engine.for_update()
        );
        let held: Option<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        if held.is_none() {
            return Ok(Err(Refusal::NotFound(Record::Label, id.to_string()).into()));
        }
        // The patients who lose the label, for their trails in the audit log.
        let on: Vec<(String,)> = sqlx::query_as(
            "DELETE FROM patient_labels WHERE practice_id = $1 AND label_id = $2 \
             RETURNING patient_id",
        )
        .bind(self.practice_id)
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        let sql = format!(
            "DELETE FROM labels WHERE practice_id = $1 AND id = $2 RETURNING {LABEL_COLUMNS}"
        );
        let label: Option<Label> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(label) = label else {
            return Ok(Err(Refusal::NotFound(Record::Label, id.to_string()).into()));
        };
        let products = self.take_label_off_products(&mut tx, id).await?;
        let mut events = vec![Event::of("delete", "label", &label.id)];
        events.extend(
            products
                .iter()
                .map(|product| Event::of("update", "product", product)),
        );
        events.extend(on.iter().map(|(patient_id,)| Event {
            action: "remove_label",
            resource_type: "label",
            resource_id: &label.id,
            patient_id: Some(patient_id),
        }));
        self.record_in(&mut tx, &events).await?;
        self.store.commit_events(tx).await?;
        Ok(Ok(label))
    }

    /// Finishes a label's write: a title in use is refused.
    async fn finish_label(
        &self,
        tx: Transaction<'static, Any>,
        action: &'static str,
        written: Result<Label, sqlx::Error>,
        title: &str,
    ) -> StoreResult<Change<Label>> {
        self.finish_unique(
            tx,
            written,
            |l| Event::of(action, "label", &l.id),
            || Refusal::Taken(Record::Label, title.to_string()),
        )
        .await
    }
}
