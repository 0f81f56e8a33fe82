//! The practice's locations: where bookings take place.

use std::collections::HashMap;

use sqlx::FromRow;

use super::audit::Event;
use super::{Change, Keyed, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::{Bound, Record, Refusal};

const LOCATION_COLUMNS: &str = "id, name, address, city, postcode, country";

/// A location of the practice.
#[derive(Clone, Debug, FromRow)]
pub struct Location {
    pub id: String,
    pub name: String,
    pub address: Option<String>,
    pub city: Option<String>,
    pub postcode: Option<String>,
    pub country: Option<String>,
}

impl Keyed for Location {
    fn key(&self) -> &str {
        &self.id
    }
}

impl PracticeStore<'_> {
    /// Every location of the practice, by name.
    pub async fn list_locations(&self) -> StoreResult<Vec<Location>> {
        let sql = format!(
            "SELECT {LOCATION_COLUMNS} FROM locations WHERE practice_id = $1 ORDER BY name, id"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .fetch_all(self.read())
            .await?)
    }

    /// The locations with these ids.
    pub async fn locations_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, Location>> {
        self.by_ids("locations", LOCATION_COLUMNS, ids).await
    }

    /// Adds a location, with a new id (whatever `new.id` holds). Refused if another location
    /// has the name.
    pub async fn create_location(&self, mut new: Location) -> StoreResult<Change<Location>> {
        new.id = new_id();
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        if self
            .at_bound(&mut tx, "locations", "", Bound::Locations)
            .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::Locations).into()));
        }
        let result = sqlx::query(
            "INSERT INTO locations (practice_id, id, name, address, city, postcode, country, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        )
        .bind(self.practice_id)
        .bind(&new.id)
        .bind(&new.name)
        .bind(&new.address)
        .bind(&new.city)
        .bind(&new.postcode)
        .bind(&new.country)
        .bind(now)
        .execute(&mut *tx)
        .await;
        let taken = Refusal::Taken(Record::Location, new.name.clone());
        self.finish_unique(
            tx,
            result.map(|_| new),
            |l| Event::of("create", "location", &l.id),
            || taken,
        )
        .await
    }
}
