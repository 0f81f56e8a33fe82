//! The practice's locations: where bookings take place.

use std::collections::HashMap;

use sqlx::FromRow;

use super::audit::Event;
use super::{Change, Keyed, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::{Bound, Record, Refusal};

const LOCATION_COLUMNS: &str =
    "id, name, address, city, postcode, country, group_name, services_provided";

/// A location of the practice.
#[derive(Clone, Debug, PartialEq, FromRow)]
pub struct Location {
    pub id: String,
    pub name: String,
    pub address: Option<String>,
    pub city: Option<String>,
    pub postcode: Option<String>,
    pub country: Option<String>,
    /// The site the location (a room) belongs to; none: it is a site of its own.
    pub group_name: Option<String>,
    /// A JSON array of the ids of the appointment types offered here: see
    /// [`Location::service_ids`].
    pub services_provided: String,
}

impl Location {
    /// A location of this name, with nothing else set.
    pub fn named(name: &str) -> Location {
        Location {
            id: String::new(),
            name: name.to_string(),
            address: None,
            city: None,
            postcode: None,
            country: None,
            group_name: None,
            services_provided: "[]".into(),
        }
    }

    /// The ids of the appointment types offered here.
    pub fn service_ids(&self) -> Vec<String> {
        serde_json::from_str(&self.services_provided).unwrap_or_default()
    }

    /// The site's name: the group's, or the location's own when it has none.
    pub fn site(&self) -> &str {
        self.group_name.as_deref().unwrap_or(&self.name)
    }
}

/// A change to a location: each field set is written, the others kept; `Some(None)` clears
/// an optional one.
#[derive(Clone, Debug, Default)]
pub struct LocationPatch {
    pub name: Option<String>,
    pub address: Option<Option<String>>,
    pub city: Option<Option<String>>,
    pub postcode: Option<Option<String>>,
    pub country: Option<Option<String>>,
    pub group_name: Option<Option<String>>,
    /// The appointment types offered here become exactly these.
    pub services_provided: Option<Vec<String>>,
}

impl LocationPatch {
    fn apply(&self, l: &mut Location) {
        fn set<T: Clone>(field: &mut T, value: &Option<T>) {
            if let Some(value) = value {
                *field = value.clone();
            }
        }
        set(&mut l.name, &self.name);
        set(&mut l.address, &self.address);
        set(&mut l.city, &self.city);
        set(&mut l.postcode, &self.postcode);
        set(&mut l.country, &self.country);
        set(&mut l.group_name, &self.group_name);
        if let Some(ids) = &self.services_provided {
            l.services_provided = serde_json::Value::from(ids.clone()).to_string();
        }
    }
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
    /// has the name, or a service it provides is not an appointment type of the practice.
    pub async fn create_location(&self, mut new: Location) -> StoreResult<Change<Location>> {
        new.id = new_id();
        let mut tx = self.begin_write().await?;
        if self
            .at_bound(&mut tx, "locations", "", Bound::Locations)
            .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::Locations).into()));
        }
        if let Some(refusal) = self.check_services(&mut tx, &new.service_ids()).await? {
            return Ok(Err(refusal.into()));
        }
        let now = now_ms();
        let result = bind_location(
            sqlx::query(
                "INSERT INTO locations (practice_id, id, name, address, city, postcode, country, \
                 group_name, services_provided, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)",
            ),
            self.practice_id,
            &new,
        )
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

    /// Changes a location; refused as [`Self::create_location`] is.
    pub async fn update_location(
        &self,
        id: &str,
        patch: &LocationPatch,
    ) -> StoreResult<Change<Location>> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "SELECT {LOCATION_COLUMNS} FROM locations WHERE practice_id = $1 AND id = $2{}",
            self.store.engine.for_update()
        );
        let found: Option<Location> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(mut location) = found else {
            return Ok(Err(
                Refusal::NotFound(Record::Location, id.to_string()).into()
            ));
        };
        if let Some(ids) = &patch.services_provided
            && let Some(refusal) = self.check_services(&mut tx, ids).await?
        {
            return Ok(Err(refusal.into()));
        }
        let before = location.clone();
        patch.apply(&mut location);
        if location == before {
            let event = Event::of("update", "location", id);
            self.commit_unchanged(tx, event).await?;
            return Ok(Ok(location));
        }
        let result = bind_location(
            sqlx::query(
                "UPDATE locations SET (name, address, city, postcode, country, group_name, \
                 services_provided, updated_at) = ($3, $4, $5, $6, $7, $8, $9, $10) \
                 WHERE practice_id = $1 AND id = $2",
            ),
            self.practice_id,
            &location,
        )
        .bind(now_ms())
        .execute(&mut *tx)
        .await;
        let taken = Refusal::Taken(Record::Location, location.name.clone());
        self.finish_unique(
            tx,
            result.map(|_| location),
            |l| Event::of("update", "location", &l.id),
            || taken,
        )
        .await
    }

    /// Why a location or a practitioner cannot provide these services: too many, or one that
    /// is not an appointment type of the practice.
    pub(super) async fn check_services(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        ids: &[String],
    ) -> StoreResult<Option<Refusal>> {
        if ids.len() > Bound::ServicesProvided.max() {
            return Ok(Some(Refusal::TooMany(Bound::ServicesProvided)));
        }
        Ok(self
            .unknown_service(tx, ids)
            .await?
            .map(|id| Refusal::NotFound(Record::AppointmentType, id)))
    }
}

/// Binds the practice as `$1` and the location's columns as `$2` to `$9`.
fn bind_location<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    practice_id: &'q str,
    l: &'q Location,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    query
        .bind(practice_id)
        .bind(&l.id)
        .bind(&l.name)
        .bind(&l.address)
        .bind(&l.city)
        .bind(&l.postcode)
        .bind(&l.country)
        .bind(&l.group_name)
        .bind(&l.services_provided)
}
