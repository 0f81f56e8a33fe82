//! Bookings: the `booking` and `bookings` queries, the booking mutations and the `Booking`
//! type, with its relations to patients, doctors, locations and appointment types.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result, SimpleObject};

use super::access::{authorize, authorize_write, require};
use super::audit::note_read;
use super::error::{OrFail, bad_input};
use super::input::{MAX_TEXT_CHARS, optional_text};
use super::loaders::{self, load_one};
use super::locations::{Appointment, Location};
use super::options::{DateRange, QueryOptions};
use super::pagination::{PageInfo, Pagination, items};
use super::patients::Patient;
use super::payload::ResponsePayload;
use super::scalars::{Date, DateTime};
use super::store;
use super::users::User;
use crate::auth::{Access, OperationKind, Resource};
use crate::store::bookings::{self as stored, BookingChange, BookingFields, BookingFilter};
use crate::store::{PageRequest, now_ms};

/// Longest booking.
const MAX_BOOKING_MS: i64 = 24 * 3600 * 1000;
/// Widest span of days `Patient.bookings` and `User.bookings` take.
const MAX_SPAN_DAYS: i64 = 366;
/// Most bookings `Patient.bookings` returns.
const MAX_PATIENT_BOOKINGS: u32 = 500;

pub struct Booking(pub stored::Booking);

impl Booking {
    /// A booking a query hands out, noted for the audit log under its patient.
    pub fn read(ctx: &Context<'_>, booking: stored::Booking) -> Booking {
        let patient_id = Some(booking.fields.patient_id.as_str());
        note_read(ctx, "booking", &booking.id, patient_id);
        Booking(booking)
    }
}

/// A booking: a patient seeing a doctor at a time. Reading it needs `bookings:read`; its
/// patient needs `patients:read` too, and its doctor `users:read`.
#[Object]
impl Booking {
    /// The booking's id.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// When it starts (UTC).
    async fn start(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.fields.start_at))
    }
    /// When it ends (UTC); a booking that ends as another starts does not overlap it.
    async fn end(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.fields.end_at))
    }
    /// Free-text notes.
    async fn comments(&self) -> Option<&str> {
        self.0.fields.comments.as_deref()
    }
    /// A short reference to quote on the phone, e.g. "BK-3F9A1C2D".
    async fn reference(&self) -> Option<String> {
        let tail: String = self.0.id.chars().filter(char::is_ascii_hexdigit).collect();
        Some(format!(
            "BK-{}",
            tail[tail.len().saturating_sub(8)..].to_uppercase()
        ))
    }
    /// True once the booking is cancelled (deleteBooking); it is kept, and frees its slot.
    async fn deleted(&self) -> Option<bool> {
        Some(self.0.cancelled_at.is_some())
    }
    /// Why the booking was cancelled.
    async fn cancellation_reason(&self) -> Option<&str> {
        self.0.cancellation_reason.as_deref()
    }
    /// The patient's id.
    async fn patient_id(&self) -> Option<ID> {
        Some(ID(self.0.fields.patient_id.clone()))
    }
    /// The patient. Needs `patients:read`: without it, this field is null with a FORBIDDEN
    /// error and the rest of the booking is still returned.
    async fn patient(&self, ctx: &Context<'_>) -> Result<Option<Patient>> {
        require(ctx, Resource::Patients, Access::Read)?;
        let found = load_one::<loaders::Patients>(ctx, &self.0.fields.patient_id).await?;
        Ok(found.map(|p| Patient::read(ctx, p)))
    }
    /// The doctor. Needs `users:read`.
    async fn doctor(&self, ctx: &Context<'_>) -> Result<Option<User>> {
        require(ctx, Resource::Users, Access::Read)?;
        let found = load_one::<loaders::Users>(ctx, &self.0.fields.doctor_id).await?;
        Ok(found.map(User))
    }
    /// The doctor's name, with title, e.g. "Dr Grace Hopper".
    async fn doctor_name(&self, ctx: &Context<'_>) -> Result<Option<String>> {
        let found = load_one::<loaders::Users>(ctx, &self.0.fields.doctor_id).await?;
        Ok(found.map(|u| match &u.title {
            Some(title) => format!("{title} {}", u.full_name()),
            None => u.full_name(),
        }))
    }
    /// Where the booking takes place.
    async fn location(&self, ctx: &Context<'_>) -> Result<Option<Location>> {
        let Some(id) = &self.0.fields.location_id else {
            return Ok(None);
        };
        Ok(load_one::<loaders::Locations>(ctx, id)
            .await?
            .map(Location::from))
    }
    /// What the booking is for.
    async fn appointment(&self, ctx: &Context<'_>) -> Result<Option<Appointment>> {
        let Some(id) = &self.0.fields.appointment_type_id else {
            return Ok(None);
        };
        Ok(load_one::<loaders::AppointmentTypes>(ctx, id)
            .await?
            .map(Appointment::from))
    }
    /// When the booking was made.
    async fn created_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.created_at))
    }
    /// When the booking last changed.
    async fn updated_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.updated_at))
    }
}

/// A page of bookings.
#[derive(SimpleObject)]
pub struct BookingData {
    /// The bookings on this page, by start time.
    pub data: Option<Vec<Option<Booking>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

impl BookingData {
    /// A page of the caller's practice's bookings, with the relations its selection asks for
    /// loaded ahead: one statement per kind of record, however long the page.
    async fn fetch(
        ctx: &Context<'_>,
        practice_id: &str,
        filter: &BookingFilter,
        request: PageRequest,
    ) -> Result<Option<BookingData>> {
        let page = store(ctx)
            .practice(practice_id)
            .list_bookings(filter, request)
            .await
            .or_fail()?;
        prime_relations(ctx, ctx.look_ahead().field("data"), &page.items).await?;
        Ok(Some(BookingData {
            page_info: Some(PageInfo::of(request, &page)),
            data: items(page.items, |b| Booking::read(ctx, b)),
        }))
    }
}

/// Loads the records that the selected relations of `bookings` reach, a batch per kind.
async fn prime_relations(
    ctx: &Context<'_>,
    selection: async_graphql::Lookahead<'_>,
    bookings: &[stored::Booking],
) -> Result<()> {
    let ids = |pick: fn(&BookingFields) -> Option<&String>| -> Vec<String> {
        let mut ids: Vec<String> = bookings
            .iter()
            .filter_map(|b| pick(&b.fields))
            .cloned()
            .collect();
        ids.sort();
        ids.dedup();
        ids
    };
    // Nothing is loaded that the caller may not read anyway.
    let may_read_patients = super::access::principal(ctx)?
        .permissions
        .allows(Resource::Patients, Access::Read);
    let patient = selection.field("patient");
    let patients = async {
        if patient.exists() && may_read_patients {
            let ids = ids(|f| Some(&f.patient_id));
            if patient.field("labels").exists() {
                loaders::prime::<loaders::PatientLabels>(ctx, ids.clone()).await?;
            }
            loaders::prime::<loaders::Patients>(ctx, ids).await?;
        }
        Ok::<(), async_graphql::Error>(())
    };
    let doctors = async {
        if selection.field("doctor").exists() || selection.field("doctorName").exists() {
            loaders::prime::<loaders::Users>(ctx, ids(|f| Some(&f.doctor_id))).await?;
        }
        Ok(())
    };
    let locations = async {
        if selection.field("location").exists() {
            loaders::prime::<loaders::Locations>(ctx, ids(|f| f.location_id.as_ref())).await?;
        }
        Ok(())
    };
    let types = async {
        if selection.field("appointment").exists() {
            let type_ids = ids(|f| f.appointment_type_id.as_ref());
            loaders::prime::<loaders::AppointmentTypes>(ctx, type_ids).await?;
        }
        Ok(())
    };
    futures_util::try_join!(patients, doctors, locations, types)?;
    Ok(())
}

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

fn check_times(start: i64, end: i64) -> Result<()> {
    if end <= start {
        return Err(bad_input("bookingData.end must be after bookingData.start"));
    }
    if end - start > MAX_BOOKING_MS {
        return Err(bad_input("a booking must not be longer than 24 hours"));
    }
    Ok(())
}

fn respond(id: &str, change: BookingChange) -> Option<ResponsePayload<Booking>> {
    ResponsePayload::of(change, "booking", id, Booking)
}

fn refuse_if_cancelled(b: &stored::Booking) -> Result<(), String> {
    match b.cancelled_at {
        Some(_) => Err("This booking has been cancelled and can no longer be changed".into()),
        None => Ok(()),
    }
}

/// The range of a `start`/`end` pair of dates, whole days in UTC.
pub fn day_span(start: Date, end: Date) -> Result<(i64, i64)> {
    if end.0 < start.0 {
        return Err(bad_input("end must not be before start"));
    }
    if (end.0 - start.0).num_days() >= MAX_SPAN_DAYS {
        return Err(bad_input(format!(
            "the span from start to end must be less than {MAX_SPAN_DAYS} days"
        )));
    }
    let ms = |d: Date| {
        d.0.and_hms_opt(0, 0, 0)
            .unwrap_or_default()
            .and_utc()
            .timestamp_millis()
    };
    Ok((ms(start), ms(end) + 24 * 3600 * 1000 - 1))
}

/// A patient's bookings over a span of days, for `Patient.bookings`.
pub async fn of_patient(
    ctx: &Context<'_>,
    patient_id: &str,
    start: Date,
    end: Date,
) -> Result<Option<Vec<Option<Booking>>>> {
    let principal = require(ctx, Resource::Bookings, Access::Read)?;
    let filter = BookingFilter {
        range: Some(day_span(start, end)?),
        patient_id: Some(patient_id.to_string()),
        ..Default::default()
    };
    let page = PageRequest {
        page: 1,
        page_size: MAX_PATIENT_BOOKINGS,
    };
    let found = store(ctx)
        .practice(&principal.practice_id)
        .list_bookings(&filter, page)
        .await
        .or_fail()?;
    Ok(items(found.items, |b| Booking::read(ctx, b)))
}

/// A doctor's bookings over a span of days, paged, for `User.bookings`.
pub async fn of_doctor(
    ctx: &Context<'_>,
    doctor_id: &str,
    span: (Date, Date),
    pagination: Pagination,
) -> Result<Option<BookingData>> {
    let principal = require(ctx, Resource::Bookings, Access::Read)?;
    let page = Pagination::request(Some(pagination))?;
    let filter = BookingFilter {
        range: Some(day_span(span.0, span.1)?),
        doctor_id: Some(doctor_id.to_string()),
        ..Default::default()
    };
    BookingData::fetch(ctx, &principal.practice_id, &filter, page).await
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
                    return Ok(Some(ResponsePayload::refused(format!(
                        "No appointment type with id {type_id}"
                    ))));
                };
                start.saturating_add(t.duration.saturating_mul(60_000))
            }
            (None, None) => {
                return Err(bad_input(
                    "bookingData.end is required when bookingData.bookingType is not given",
                ));
            }
        };
        check_times(start, end)?;
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
        Ok(respond("", change))
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
        let new_comments = match booking_data.comments {
            MaybeUndefined::Undefined => None,
            MaybeUndefined::Null => Some(None),
            MaybeUndefined::Value(text) => Some(comments(Some(text))?),
        };
        let mut times_ok = Ok(());
        let change = practice
            .modify_booking(&id, "update", |b| {
                refuse_if_cancelled(b)?;
                let f = &mut b.fields;
                if let Some(patient) = booking_data.patient {
                    f.patient_id = patient.0;
                }
                if let Some(doctor) = booking_data.doctor {
                    f.doctor_id = doctor.0;
                }
                match booking_data.location {
                    MaybeUndefined::Undefined => {}
                    MaybeUndefined::Null => f.location_id = None,
                    MaybeUndefined::Value(id) => f.location_id = Some(id.0),
                }
                match booking_data.booking_type {
                    MaybeUndefined::Undefined => {}
                    MaybeUndefined::Null => f.appointment_type_id = None,
                    MaybeUndefined::Value(id) => f.appointment_type_id = Some(id.0),
                }
                if let Some(start) = booking_data.start {
                    f.start_at = start.ms();
                }
                if let Some(end) = booking_data.end {
                    f.end_at = end.ms();
                }
                if let Some(text) = new_comments {
                    f.comments = text;
                }
                // Bad times are the caller's mistake, not a refusal: report them as such.
                times_ok = check_times(f.start_at, f.end_at);
                times_ok.as_ref().map(|_| ()).map_err(|e| e.message.clone())
            })
            .await
            .or_fail()?;
        times_ok?;
        Ok(respond(&id, change))
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
        let change = practice
            .modify_booking(&id, "delete", |b| {
                if b.cancelled_at.is_some() {
                    return Err("This booking is already cancelled".into());
                }
                b.cancelled_at = Some(now_ms());
                b.cancellation_reason = reason;
                Ok(())
            })
            .await
            .or_fail()?;
        Ok(respond(&id, change))
    }
}
