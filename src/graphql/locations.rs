//! Settings for bookings: the practice's locations and appointment types, their queries and
//! mutations.

use async_graphql::{Context, InputObject, Object, Result};

use super::access::{authorize, authorize_write};
use super::error::{OrFail, bad_input};
use super::input::{MAX_LINE_CHARS, optional_text, required_text};
use super::objects::{Appointment, Location, ResponsePayload, envelope, items};
use super::store;
use crate::auth::OperationKind;
use crate::store::locations::Location as StoredLocation;

/// Longest appointment: a day.
const MAX_DURATION_MINUTES: i32 = 24 * 60;

/// A postal address.
#[derive(InputObject, Default)]
pub struct AddressInput {
    /// Street and number.
    pub address: Option<String>,
    /// Town or city.
    pub city: Option<String>,
    /// Postal code.
    pub postcode: Option<String>,
    /// Country.
    pub country: Option<String>,
}

#[derive(Default)]
pub struct LocationQueries;

#[Object]
impl LocationQueries {
    /// The practice's locations, by name. Needs `bookings:read`.
    async fn locations(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<Location>>>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let found = store(ctx)
            .practice(&principal.practice_id)
            .list_locations()
            .await
            .or_fail()?;
        Ok(items(found, Location::from))
    }

    /// The practice's appointment types (what BookingDataInput.bookingType takes), by title.
    /// Needs `bookings:read`.
    async fn appointment_types(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Option<Vec<Option<Appointment>>>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let found = store(ctx)
            .practice(&principal.practice_id)
            .list_appointment_types()
            .await
            .or_fail()?;
        Ok(items(found, Appointment::from))
    }
}

#[derive(Default)]
pub struct LocationMutations;

#[Object]
impl LocationMutations {
    /// Adds a location. Refused if another has the name. Needs `settings`.
    async fn create_location(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The name, 1 to 200 characters, unique within the practice.")]
        name: String,
        #[graphql(desc = "The postal address.")] address: Option<AddressInput>,
    ) -> Result<Option<ResponsePayload<Location>>> {
        let practice = authorize_write(ctx)?;
        let name = required_text("name", name, MAX_LINE_CHARS)?;
        let a = address.unwrap_or_default();
        let line = |field: &str, v| optional_text(&format!("address.{field}"), v, MAX_LINE_CHARS);
        let new = StoredLocation {
            id: String::new(),
            name: name.clone(),
            address: line("address", a.address)?,
            city: line("city", a.city)?,
            postcode: line("postcode", a.postcode)?,
            country: line("country", a.country)?,
        };
        let made = practice.create_location(new).await.or_fail()?;
        envelope(ctx, made, Location::from)
    }

    /// Adds an appointment type. Refused if another has the title. Needs `settings`.
    async fn create_appointment_type(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The title, 1 to 200 characters, unique within the practice.")]
        title: String,
        #[graphql(desc = "How long it takes, in minutes: 1 to 1440.")] duration: i32,
        #[graphql(desc = "Its price; not negative.")] price: Option<f64>,
    ) -> Result<Option<ResponsePayload<Appointment>>> {
        let practice = authorize_write(ctx)?;
        let title = required_text("title", title, MAX_LINE_CHARS)?;
        if !(1..=MAX_DURATION_MINUTES).contains(&duration) {
            return Err(bad_input(format!(
                "duration must be between 1 and {MAX_DURATION_MINUTES} minutes, got {duration}"
            )));
        }
        if let Some(p) = price
            && !(p.is_finite() && p >= 0.0)
        {
            return Err(bad_input(format!("price must not be negative, got {p}")));
        }
        let made = practice
            .create_appointment_type(&title, i64::from(duration), price)
            .await
            .or_fail()?;
        envelope(ctx, made, Appointment::from)
    }
}
