//! Settings for bookings: the practice's locations and appointment types, their queries and
//! mutations.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result};

use super::access::{authorize, authorize_write};
use super::catalogue::MAX_DURATION_MINUTES;
use super::error::{OrFail, bad_input};
use super::input::{MAX_LINE_CHARS, optional_lines, optional_text, required_text};
use super::objects::{Appointment, Location, PracticeLocation, ResponsePayload, envelope, items};
use super::store;
use crate::auth::OperationKind;
use crate::domain::limits::MAX_SERVICES_PROVIDED;
use crate::store::locations::{Location as StoredLocation, LocationPatch};

/// A postal address. In updateLocation, a line left out is kept and a line given as null
/// is cleared.
#[derive(InputObject, Default)]
pub struct AddressInput {
    /// Street and number; it may take several lines.
    pub address: MaybeUndefined<String>,
    /// Town or city.
    pub city: MaybeUndefined<String>,
    /// Postal code.
    pub postcode: MaybeUndefined<String>,
    /// Country.
    pub country: MaybeUndefined<String>,
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

    /// The practice's active, bookable appointment types (what BookingDataInput.bookingType
    /// takes), by title: the products of type "appointment". Needs `bookings:read`.
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

/// The appointment types offered at a location, as the input gives them.
fn services(field: &str, ids: Vec<ID>) -> Result<Vec<String>> {
    let ids: Vec<String> = ids.into_iter().map(|id| id.0).collect();
    crate::text::id_list(field, &ids, MAX_SERVICES_PROVIDED).map_err(bad_input)
}

/// The street address, as the input gives it: it may take several lines.
fn street(value: Option<String>) -> Result<Option<String>> {
    optional_lines("address.address", value, MAX_LINE_CHARS)
}

/// The city, postcode or country of an address, as the input gives it: one line.
fn address_line(field: &str, value: Option<String>) -> Result<Option<String>> {
    optional_text(&format!("address.{field}"), value, MAX_LINE_CHARS)
}

#[derive(Default)]
pub struct LocationMutations;

#[Object]
impl LocationMutations {
    /// Adds a location: a site, or a room of a site (`groupName`). Refused if another has the
    /// name, or a service is not an appointment type of the practice. Needs `settings`.
    async fn create_location(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The name, 1 to 200 characters, unique within the practice.")]
        name: String,
        #[graphql(desc = "The postal address.")] address: Option<AddressInput>,
        #[graphql(
            desc = "The site it belongs to (1 to 200 characters), e.g. \"Main surgery\" for \
                    \"Room 2\"; none makes it a site of its own."
        )]
        group_name: Option<String>,
        #[graphql(desc = "The ids of the appointment types offered there, at most 30.")]
        services_provided: Option<Vec<ID>>,
    ) -> Result<Option<ResponsePayload<Location>>> {
        let practice = authorize_write(ctx)?;
        let name = required_text("name", name, MAX_LINE_CHARS)?;
        let a = address.unwrap_or_default();
        let mut new = StoredLocation::named(&name);
        new.address = street(a.address.take())?;
        new.city = address_line("city", a.city.take())?;
        new.postcode = address_line("postcode", a.postcode.take())?;
        new.country = address_line("country", a.country.take())?;
        new.group_name = optional_text("groupName", group_name, MAX_LINE_CHARS)?;
        let ids = services("servicesProvided", services_provided.unwrap_or_default())?;
        new.services_provided = serde_json::Value::from(ids).to_string();
        let made = practice.create_location(new).await.or_fail()?;
        envelope(ctx, made, Location::from)
    }

    /// Changes a location: the arguments given, the others kept; null clears `groupName`, the
    /// address's lines, or the address whole. Refused as createLocation is. Needs `settings`.
    async fn update_location(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The location's id.")] id: ID,
        #[graphql(desc = "The name, 1 to 200 characters, unique within the practice.")]
        name: Option<String>,
        #[graphql(
            desc = "The postal address: the lines given change, a line given as null \
                          is cleared, the lines left out are kept; null clears them all."
        )]
        address: MaybeUndefined<AddressInput>,
        #[graphql(desc = "The site it belongs to; null makes it a site of its own.")]
        group_name: MaybeUndefined<String>,
        #[graphql(desc = "The appointment types offered there become exactly these.")]
        services_provided: Option<Vec<ID>>,
    ) -> Result<Option<ResponsePayload<PracticeLocation>>> {
        let practice = authorize_write(ctx)?;
        let mut patch = LocationPatch {
            name: name
                .map(|n| required_text("name", n, MAX_LINE_CHARS))
                .transpose()?,
            ..Default::default()
        };
        if address.is_null() {
            (patch.address, patch.city, patch.postcode, patch.country) =
                (Some(None), Some(None), Some(None), Some(None));
        }
        if let MaybeUndefined::Value(a) = address {
            // Left out: kept; null: cleared; given: checked.
            fn given(
                v: MaybeUndefined<String>,
                check: impl Fn(Option<String>) -> Result<Option<String>>,
            ) -> Result<Option<Option<String>>> {
                match v {
                    MaybeUndefined::Undefined => Ok(None),
                    MaybeUndefined::Null => Ok(Some(None)),
                    MaybeUndefined::Value(v) => check(Some(v)).map(Some),
                }
            }
            patch.address = given(a.address, street)?;
            patch.city = given(a.city, |v| address_line("city", v))?;
            patch.postcode = given(a.postcode, |v| address_line("postcode", v))?;
            patch.country = given(a.country, |v| address_line("country", v))?;
        }
        patch.group_name = match group_name {
            MaybeUndefined::Undefined => None,
            MaybeUndefined::Null => Some(None),
            MaybeUndefined::Value(v) => Some(optional_text("groupName", Some(v), MAX_LINE_CHARS)?),
        };
        patch.services_provided = services_provided
            .map(|ids| services("servicesProvided", ids))
            .transpose()?;
        let changed = practice.update_location(&id, &patch).await.or_fail()?;
        envelope(ctx, changed, PracticeLocation)
    }

    /// Adds an appointment type: the shorthand of createProduct for a bookable product of
    /// type "appointment". Refused if another product has the title. Needs `settings`.
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
