//! Bookings: the `booking` and `bookings` queries, the booking mutations and their inputs.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result};

use super::access::{authorize, authorize_write};
use super::error::{OrFail, bad_input};
use super::input::{MAX_TEXT_CHARS, optional_text};
use super::objects::{Booking, BookingData, ResponsePayload, envelope};
use super::options::{DateRange, QueryOptions};
use super::pagination::Pagination;
use super::scalars::DateTime;
use super::store;
use crate::auth::OperationKind;
use crate::domain::{Record, Refusal};
use crate::store::bookings::{BookingFields, BookingFilter, BookingPatch};

/// A new booking. `patient`, `doctor` and `start` are required, and `end` unless
/// `bookingType` gives the duration.
#[derive(InputObject)]
pub struct BookingDataInput {
    /// The patient's id.
    pub patient: Option<ID>,
    /// The doctor's id: a staff user with isDoctor.
    pub doctor: Option<ID>,
    /// The location's id.
    pub location: Option<ID>,
    /// The appointment type's id (Appointment.id).
    pub booking_type: Option<ID>,
    /// When it starts; an RFC 3339 timestamp with an offset.
    pub start: Option<DateTime>,
    /// When it ends: after start, at most 24 hours later. Default: start plus the appointment
    /// type's duration.
    pub end: Option<DateTime>,
    /// Free-text notes.
    pub comments: Option<String>,
}

/// Changes to a booking. An omitted field is left as it is; null clears location,
/// bookingType and comments.
#[derive(InputObject)]
pub struct BookingUpdateDataInput {
    /// Another patient.
    pub patient: Option<ID>,
    /// Another doctor.
    pub doctor: Option<ID>,
    /// Another location, or null for none.
    pub location: MaybeUndefined<ID>,
    /// Another appointment type, or null for none.
    pub booking_type: MaybeUndefined<ID>,
    /// A new start.
    pub start: Option<DateTime>,
    /// A new end.
    pub end: Option<DateTime>,
    /// New notes, or null for none.
    pub comments: MaybeUndefined<String>,
}

fn comments(value: Option<String>) -> Result<Option<String>> {
    optional_text("bookingData.comments", value, MAX_TEXT_CHARS)
}

/// An update's optional field: omitted leaves it (None), null clears it (Some(None)).
fn clearable<T, V>(
    update: MaybeUndefined<T>,
    check: impl FnOnce(T) -> Result<Option<V>>,
) -> Result<Option<Option<V>>> {
    Ok(match update {
        MaybeUndefined::Undefined => None,
        MaybeUndefined::Null => Some(None),
        MaybeUndefined::Value(v) => Some(check(v)?),
    })
}

impl BookingUpdateDataInput {
    fn into_patch(self) -> Result<BookingPatch> {
        Ok(BookingPatch {
            patient_id: self.patient.map(|id| id.0),
            doctor_id: self.doctor.map(|id| id.0),
            location_id: clearable(self.location, |id| Ok(Some(id.0)))?,
            appointment_type_id: clearable(self.booking_type, |id| Ok(Some(id.0)))?,
            start_at: self.start.map(DateTime::ms),
            end_at: self.end.map(DateTime::ms),
            comments: clearable(self.comments, |text| comments(Some(text)))?,
        })
    }
}

#[derive(Default)]
pub struct BookingQueries;

#[Object]
impl BookingQueries {
    /// One booking, by id; null if the practice has none with this id. Cancelled bookings are
    /// returned too, with `deleted` set. Needs `bookings:read` or `query:booking`.
    async fn booking(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking's id.")] id: ID,
    ) -> Result<Option<Booking>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let found = store(ctx)
            .practice(&principal.practice_id)
            .find_booking(&id)
            .await
            .or_fail()?;
        Ok(found.map(|b| Booking::read(ctx, b)))
    }

    /// A page of bookings, by start time. Cancelled bookings are left out unless
    /// `options.includeDeleted`. Needs `bookings:read` or `query:bookings`.
    async fn bookings(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
        #[graphql(
            desc = "includeDeleted for cancelled bookings; createdAt and updatedAt \
                          filters."
        )]
        options: Option<QueryOptions>,
        #[graphql(desc = "Only bookings that start or end inside this range (both ends \
                          included).")]
        date_range: Option<DateRange>,
    ) -> Result<Option<BookingData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let options = options.unwrap_or_default();
        let filter = BookingFilter {
            range: date_range.map(DateRange::bounds).transpose()?,
            include_cancelled: options.include_deleted.unwrap_or(false),
            created: options.created_at.map(DateRange::bounds).transpose()?,
            updated: options.updated_at.map(DateRange::bounds).transpose()?,
            ..Default::default()
        };
        BookingData::fetch(ctx, &principal.practice_id, &filter, page).await
    }
}

#[derive(Default)]
pub struct BookingMutations;

#[Object]
impl BookingMutations {
    /// Books a patient with a doctor. Refused, with `error` saying why and nothing written, if
    /// the doctor is already booked at that time (back to back is fine), or the patient is
    /// archived or deleted, or a record it names does not exist. Needs `bookings:write`.
    async fn create_booking(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking.")] booking_data: BookingDataInput,
    ) -> Result<Option<ResponsePayload<Booking>>> {
        let practice = authorize_write(ctx)?;
        let required = |value: Option<ID>, field: &str| {
            value
                .map(|id| id.0)
                .ok_or_else(|| bad_input(format!("bookingData.{field} is required")))
        };
        let patient_id = required(booking_data.patient, "patient")?;
        let doctor_id = required(booking_data.doctor, "doctor")?;
        let start = booking_data
            .start
            .ok_or_else(|| bad_input("bookingData.start is required"))?
            .ms();
        let appointment_type_id = booking_data.booking_type.map(|id| id.0);
        let end = match (booking_data.end, &appointment_type_id) {
            (Some(end), _) => end.ms(),
            (None, Some(type_id)) => {
                let types = practice
                    .appointment_types_by_ids(std::slice::from_ref(type_id))
                    .await
                    .or_fail()?;
                let Some(t) = types.get(type_id) else {
                    let missing = Refusal::NotFound(Record::AppointmentType, type_id.clone());
                    return Ok(Some(ResponsePayload::refused(ctx, &missing)));
                };
                start.saturating_add(t.duration.saturating_mul(60_000))
            }
            (None, None) => {
                return Err(bad_input(
                    "bookingData.end is required when bookingData.bookingType is not given",
                ));
            }
        };
        let fields = BookingFields {
            patient_id,
            doctor_id,
            location_id: booking_data.location.map(|id| id.0),
            appointment_type_id,
            start_at: start,
            end_at: end,
            comments: comments(booking_data.comments)?,
        };
        let change = practice.create_booking(fields).await.or_fail()?;
        envelope(ctx, change, Booking)
    }

    /// Changes a booking: move it, give it to another doctor, change its notes. Refused like
    /// createBooking, and for a cancelled booking. Needs `bookings:write`.
    async fn update_booking(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking's id.")] id: ID,
        #[graphql(desc = "The changes; omitted fields are left as they are.")]
        booking_data: BookingUpdateDataInput,
    ) -> Result<Option<ResponsePayload<Booking>>> {
        let practice = authorize_write(ctx)?;
        let patch = booking_data.into_patch()?;
        let change = practice.update_booking(&id, patch).await.or_fail()?;
        envelope(ctx, change, Booking)
    }

    /// Cancels a booking: it is kept, with `deleted: true` and its cancellation reason, and
    /// its slot is free again. Needs `bookings:write`.
    async fn delete_booking(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking's id.")] id: ID,
        #[graphql(desc = "Why the booking is cancelled.")] cancellation_reason: Option<String>,
        #[graphql(desc = "Accepted for compatibility; practice-api sends no messages.")]
        send_cancellation_messages: Option<bool>,
        #[graphql(desc = "Accepted for compatibility; practice-api sends no messages.")]
        notify_practice: Option<bool>,
    ) -> Result<Option<ResponsePayload<Booking>>> {
        let practice = authorize_write(ctx)?;
        let _ = (send_cancellation_messages, notify_practice);
        let reason = optional_text("cancellationReason", cancellation_reason, MAX_TEXT_CHARS)?;
        let change = practice.cancel_booking(&id, reason).await.or_fail()?;
        envelope(ctx, change, Booking)
    }
}
