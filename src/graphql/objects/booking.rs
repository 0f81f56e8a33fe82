//! `Booking`, its relations to patients, doctors, locations and appointment types, and the
//! ways a list of bookings is fetched: a page (the `bookings` query, `User.bookings`) or a
//! patient's (`Patient.bookings`).

use async_graphql::{Context, ID, Lookahead, Object, Result, SimpleObject};

use super::page::{PageInfo, items};
use super::{Appointment, Booking, Location, Patient, User};
use crate::auth::{Access, Principal, Resource};
use crate::graphql::access::{principal, reader, require};
use crate::graphql::error::{OrFail, bad_input};
use crate::graphql::loaders::{self, load_one};
use crate::graphql::options::QueryOptions;
use crate::graphql::pagination::Pagination;
use crate::graphql::read_log::note_read;
use crate::graphql::scalars::{Date, DateTime};
use crate::store::PageRequest;
use crate::store::bookings::{self as stored, BookingFields, BookingFilter};

/// Widest span of days `Patient.bookings` and `User.bookings` take.
const MAX_SPAN_DAYS: i64 = 366;
/// Most bookings `Patient.bookings` returns.
const MAX_PATIENT_BOOKINGS: u32 = 500;

/// Where a booking stands. A new booking is confirmed unless said otherwise; a failed one (its
/// online payment or confirmation failed) holds no slot, so the doctor can be booked again at
/// that time; pending and processing ones hold theirs, as confirmed ones do.
#[derive(async_graphql::Enum, Clone, Copy, Debug, PartialEq, Eq)]
#[graphql(rename_items = "lowercase")]
pub enum BookingStatus {
    /// Waiting for the patient or the practice to confirm.
    Pending,
    /// Being confirmed (a payment in progress).
    Processing,
    /// Booked.
    Confirmed,
    /// Not booked after all: it holds no slot.
    Failed,
}

impl BookingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BookingStatus::Pending => "pending",
            BookingStatus::Processing => "processing",
            BookingStatus::Confirmed => "confirmed",
            BookingStatus::Failed => "failed",
        }
    }

    /// The status as stored; an unknown value reads as confirmed.
    pub fn of(stored: &str) -> BookingStatus {
        match stored {
            "pending" => BookingStatus::Pending,
            "processing" => BookingStatus::Processing,
            "failed" => BookingStatus::Failed,
            _ => BookingStatus::Confirmed,
        }
    }
}

/// A metadata entry of a booking: a key and its value, set by an integration.
#[derive(SimpleObject)]
pub struct MetadataEntry {
    /// The key: at most 40 characters.
    pub key: String,
    /// The value: at most 500 characters.
    pub value: Option<String>,
}

/// When the patient reached each stage of their visit; null for a stage not reached.
#[derive(SimpleObject)]
pub struct Journey {
    /// When the patient arrived.
    pub arrived: Option<DateTime>,
    /// When the consultation began.
    pub consultation: Option<DateTime>,
    /// When the patient left.
    pub departed: Option<DateTime>,
    /// When the patient was recorded as not attending.
    pub dna: Option<DateTime>,
}

/// Which messages a booking was flagged to send (practice-api sends none itself).
#[derive(SimpleObject)]
pub struct SendPatientMessages {
    /// A confirmation when it was booked.
    pub confirmation: Option<bool>,
    /// A reminder before it.
    pub reminder: Option<bool>,
    /// A follow-up after it.
    pub followup: Option<bool>,
    /// A message when it was cancelled.
    pub cancellation: Option<bool>,
}

/// A page of bookings.
#[derive(SimpleObject)]
pub struct BookingData {
    /// The bookings on this page, by start time.
    pub data: Option<Vec<Option<Booking>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

impl Booking {
    /// A booking a query hands out, noted for the audit log under its patient.
    pub fn read(ctx: &Context<'_>, booking: stored::Booking) -> Booking {
        let patient_id = Some(booking.fields.patient_id.as_str());
        note_read(ctx, "booking", &booking.id, patient_id);
        Booking(booking)
    }

    /// A patient's bookings over a span of days, for `Patient.bookings`: a page when
    /// `pagination` is given, else the first 500.
    pub async fn of_patient(
        ctx: &Context<'_>,
        patient_id: &str,
        span: (Date, Date),
        options: Option<QueryOptions>,
        pagination: Option<Pagination>,
    ) -> Result<Option<Vec<Option<Booking>>>> {
        let principal = require(ctx, Resource::Bookings, Access::Read)?;
        let filter = patient_filter(patient_id, span, options)?;
        let page = match pagination {
            Some(p) => Pagination::request(Some(p))?,
            None => PageRequest {
                page: 1,
                page_size: MAX_PATIENT_BOOKINGS,
            },
        };
        let found = reader(ctx, principal)
            .list_bookings(&filter, page)
            .await
            .or_fail()?;
        Ok(items(found.items, |b| Booking::read(ctx, b)))
    }

    /// A page of a patient's bookings with the total, for `Patient.bookingsWithPagination`.
    pub async fn page_of_patient(
        ctx: &Context<'_>,
        patient_id: &str,
        span: (Date, Date),
        options: Option<QueryOptions>,
        pagination: Option<Pagination>,
    ) -> Result<Option<PatientBookingsData>> {
        let principal = require(ctx, Resource::Bookings, Access::Read)?;
        let filter = patient_filter(patient_id, span, options)?;
        let request = Pagination::request(pagination)?;
        let practice = reader(ctx, principal);
        let page = practice.list_bookings(&filter, request).await.or_fail()?;
        let total = practice.count_bookings(&filter).await.or_fail()?;
        prime_relations(ctx, ctx.look_ahead().field("data"), &page.items).await?;
        let info = PageInfo::of(request, &page);
        Ok(Some(PatientBookingsData {
            meta: Some(PageInfoWithTotalCount {
                page: Some(info.page),
                page_size: Some(info.page_size),
                has_more: Some(info.has_more),
                total: Some(i32::try_from(total).unwrap_or(i32::MAX)),
            }),
            data: items(page.items, |b| Booking::read(ctx, b)),
        }))
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
        BookingData::fetch(ctx, principal, &filter, page).await
    }
}

impl BookingData {
    /// A page of the caller's practice's bookings, of the patients the caller sees, with the
    /// relations its selection asks for loaded ahead: one statement per kind of record,
    /// however long the page.
    pub async fn fetch(
        ctx: &Context<'_>,
        caller: &Principal,
        filter: &BookingFilter,
        request: PageRequest,
    ) -> Result<Option<BookingData>> {
        let page = reader(ctx, caller)
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

/// The bookings of a patient over a span of days, as `options` asks.
fn patient_filter(
    patient_id: &str,
    span: (Date, Date),
    options: Option<QueryOptions>,
) -> Result<BookingFilter> {
    let options = options.unwrap_or_default();
    Ok(BookingFilter {
        range: Some(day_span(span.0, span.1)?),
        patient_id: Some(patient_id.to_string()),
        include_cancelled: options.include_deleted.unwrap_or(false),
        created: options.created_at.map(|r| r.bounds()).transpose()?,
        updated: options.updated_at.map(|r| r.bounds()).transpose()?,
        ..Default::default()
    })
}

/// A page of a patient's bookings, with the total.
#[derive(SimpleObject)]
pub struct PatientBookingsData {
    /// The bookings on this page, by start time.
    pub data: Option<Vec<Option<Booking>>>,
    /// Where this page sits in the list, and how long the list is.
    pub meta: Option<PageInfoWithTotalCount>,
}

/// Where a page sits in its list, and the list's length.
#[derive(SimpleObject)]
pub struct PageInfoWithTotalCount {
    /// This page's number, from 1.
    pub page: Option<i32>,
    /// The page size used.
    pub page_size: Option<i32>,
    /// True when a later page has items.
    pub has_more: Option<bool>,
    /// How many items the whole list has.
    pub total: Option<i32>,
}

/// The range of a `start`/`end` pair of dates, whole days in UTC.
fn day_span(start: Date, end: Date) -> Result<(i64, i64)> {
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

/// Loads the records that the selected relations of `bookings` reach, a batch per kind.
async fn prime_relations(
    ctx: &Context<'_>,
    selection: Lookahead<'_>,
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
    let may_read_patients = principal(ctx)?
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
            loaders::prime::<loaders::Products>(ctx, type_ids).await?;
        }
        Ok(())
    };
    futures_util::try_join!(patients, doctors, locations, types)?;
    Ok(())
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
    /// Where the booking stands: pending, processing, confirmed (the default) or failed (it
    /// holds no slot).
    async fn status(&self) -> Option<BookingStatus> {
        Some(BookingStatus::of(&self.0.fields.status))
    }
    /// The booking's metadata entries, in the order they were first set (at most 50).
    async fn metadata(&self) -> Option<Vec<Option<MetadataEntry>>> {
        Some(
            self.0
                .metadata()
                .into_iter()
                .map(|(key, value)| {
                    Some(MetadataEntry {
                        key,
                        value: Some(value),
                    })
                })
                .collect(),
        )
    }
    /// When the patient reached each stage of their visit.
    async fn booking_journey(&self) -> Option<Journey> {
        let j = &self.0.journey;
        let at = |ms: Option<i64>| ms.map(DateTime::from_ms);
        Some(Journey {
            arrived: at(j.arrived_at),
            consultation: at(j.consultation_at),
            departed: at(j.departed_at),
            dna: at(j.dna_at),
        })
    }
    /// Which messages the booking was flagged to send.
    async fn patient_messages_sent(&self) -> Option<SendPatientMessages> {
        let f = &self.0.fields;
        Some(SendPatientMessages {
            confirmation: Some(f.send_confirmation != 0),
            reminder: Some(f.send_reminder != 0),
            followup: Some(f.send_followup != 0),
            cancellation: Some(self.0.send_cancellation != 0),
        })
    }
    /// A link to the video consultation, if it is one.
    async fn video_url(&self) -> Option<&str> {
        self.0.fields.video_url.as_deref()
    }
    /// Whether the booking was billed.
    async fn billed(&self) -> Option<bool> {
        Some(self.0.fields.billed != 0)
    }
    /// The online payment's status as the widget that took it reported it; null for none.
    async fn online_booking_payment_status(&self) -> Option<&str> {
        self.0.fields.online_payment_status.as_deref()
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
        Ok(load_one::<loaders::Products>(ctx, id)
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
