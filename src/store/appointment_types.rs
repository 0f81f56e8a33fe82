//! Appointment types: what a booking is for, how long it takes and what it costs.

use std::collections::HashMap;

use sqlx::FromRow;

use super::audit::Event;
use super::{Change, Keyed, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::{Bound, Record, Refusal};

const APPOINTMENT_TYPE_COLUMNS: &str = "id, title, duration, price";

/// An appointment type of the practice.
#[derive(Clone, Debug, FromRow)]
pub struct AppointmentType {
    pub id: String,
    pub title: String,
    /// Minutes.
    pub duration: i64,
    pub price: Option<f64>,
}

impl Keyed for AppointmentType {
    fn key(&self) -> &str {
        &self.id
    }
}

impl PracticeStore<'_> {
    /// Every appointment type of the practice, by title.
    pub async fn list_appointment_types(&self) -> StoreResult<Vec<AppointmentType>> {
        let sql = format!(
            "SELECT {APPOINTMENT_TYPE_COLUMNS} FROM appointment_types WHERE practice_id = $1 \
             ORDER BY title, id"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .fetch_all(self.read())
            .await?)
    }

    /// The appointment types with these ids.
    pub async fn appointment_types_by_ids(
        &self,
        ids: &[String],
    ) -> StoreResult<HashMap<String, AppointmentType>> {
        self.by_ids("appointment_types", APPOINTMENT_TYPE_COLUMNS, ids)
            .await
    }

    /// Adds an appointment type. Refused if another has the title.
    pub async fn create_appointment_type(
        &self,
        title: &str,
        duration: i64,
        price: Option<f64>,
    ) -> StoreResult<Change<AppointmentType>> {
        let made = AppointmentType {
            id: new_id(),
            title: title.to_string(),
            duration,
            price,
        };
        let mut tx = self.begin_write().await?;
        if self
            .at_bound(&mut tx, "appointment_types", "", Bound::AppointmentTypes)
            .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::AppointmentTypes).into()));
        }
        let result = sqlx::query(
            "INSERT INTO appointment_types (practice_id, id, title, duration, price, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)",
        )
        .bind(self.practice_id)
        .bind(&made.id)
        .bind(&made.title)
        .bind(made.duration)
        .bind(made.price)
        .bind(now_ms())
        .execute(&mut *tx)
        .await;
        self.finish_unique(
            tx,
            result.map(|_| made),
            |a| Event::of("create", "appointment_type", &a.id),
            || Refusal::Taken(Record::AppointmentType, title.to_string()),
        )
        .await
    }
}
