//! Bookings: the `booking` and `bookings` queries, the booking mutations and their inputs.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result};

use super::access::{authorize, authorize_write, reader};
use super::error::{OrFail, bad_input};
use super::input::{MAX_TEXT_CHARS, optional_lines, optional_text};
use super::objects::{Booking, BookingData, BookingStatus, ResponsePayload, envelope};
use super::options::{DateRange, QueryOptions};
use super::pagination::Pagination;
use super::scalars::{Date, DateTime};
use crate::auth::OperationKind;
use crate::domain::{self, Record, Refusal};
use crate::store::bookings::{BookingFields, BookingFilter, BookingPatch, Stage};
use crate::store::now_ms;
use chrono::NaiveTime;

/// A new booking. `patient`, `doctor` and `start` are required, and `end` unless
/// `bookingType` gives the duration.
#[derive(InputObject)]
pub struct BookingDataInput {
    /// The patient's id.
    pub patient: Option<ID>,
    /// The doctor's id: a staff user with isDoctor, whose account is not disabled.
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
    /// Where the booking stands; default confirmed. A failed booking holds no slot.
    pub status: Option<BookingStatus>,
    /// Which messages the booking is flagged to send (practice-api sends none: an
    /// integration that does reads these).
    pub send_patient_messages: Option<SendPatientMessagesInput>,
    /// A link to the video consultation (http or https).
    pub video_url: Option<String>,
    /// Whether the booking was billed. Default false.
    pub billed: Option<bool>,
    /// The online payment's status as the widget that took it reports it, e.g. "paid" (at
    /// most 40 characters).
    pub online_booking_payment_status: Option<String>,
}

/// Which messages a booking is flagged to send. Omitted flags are left as they are (false
/// on a new booking).
#[derive(InputObject)]
pub struct SendPatientMessagesInput {
    /// A confirmation when it is booked.
    pub confirmation: Option<bool>,
    /// A reminder before it.
    pub reminder: Option<bool>,
    /// A follow-up after it.
    pub followup: Option<bool>,
}

/// A stage of a patient's visit.
#[derive(async_graphql::Enum, Clone, Copy, Debug, PartialEq, Eq)]
#[graphql(rename_items = "lowercase")]
pub enum JourneyStage {
    /// The patient arrived.
    Arrived,
    /// The consultation began.
    Consultation,
    /// The patient left.
    Departed,
    /// The patient did not attend.
    Dna,
}

/// A stage of a patient's visit and when they reached it.
#[derive(InputObject)]
pub struct BookingJourneyInput {
    /// The stage reached.
    pub journey_stage: Option<JourneyStage>,
    /// When, as a day (midnight UTC); now when neither this nor `at` is given.
    pub date: Option<Date>,
    /// When, to the millisecond (ours, beside the contract's `date`).
    pub at: Option<DateTime>,
}

/// Bookings that match every filter given.
#[derive(InputObject, Default)]
pub struct BookingQueryFilters {
    /// Bookings with a metadata entry of this key (and this value, when given).
    pub metadata: Option<MetadataFilter>,
}

/// A metadata entry to look for.
#[derive(InputObject)]
pub struct MetadataFilter {
    /// The key, exactly.
    pub key: String,
    /// The value, exactly; any value when omitted.
    pub value: Option<String>,
}

/// Checks a video link: an absolute http or https URL of at most 2,000 characters.
fn video_url(value: Option<String>) -> Result<Option<String>> {
    let Some(text) = optional_text("bookingData.videoUrl", value, 2000)? else {
        return Ok(None);
    };
    match url::Url::parse(&text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(Some(text)),
        _ => Err(bad_input(format!(
            "bookingData.videoUrl must be an http or https URL, got {text:?}"
        ))),
    }
}

/// Checks a metadata key and value: against the rules of their input (a key, no control
/// characters), a mistake; past the contract's limits on their lengths, a business refusal,
/// answered in `error` as the 51st entry is ([`domain::metadata_entry_refusal`]).
fn metadata_entry(key: &str, value: Option<&str>) -> Result<Result<(), Refusal>> {
    crate::text::metadata_entry(key, value).map_err(bad_input)?;
    Ok(domain::metadata_entry_refusal(key, value).map_or(Ok(()), Err))
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
    /// A new status.
    pub status: Option<BookingStatus>,
    /// Which messages the booking is flagged to send.
    pub send_patient_messages: Option<SendPatientMessagesInput>,
    /// A new video link, or null for none.
    pub video_url: MaybeUndefined<String>,
    /// Whether the booking was billed.
    pub billed: Option<bool>,
    /// The online payment's status, or null for none.
    pub online_booking_payment_status: MaybeUndefined<String>,
}

/// A flag of `SendPatientMessagesInput`, false when omitted.
fn flag(
    messages: &Option<SendPatientMessagesInput>,
    pick: fn(&SendPatientMessagesInput) -> Option<bool>,
) -> i64 {
    i64::from(messages.as_ref().and_then(pick).unwrap_or(false))
}

/// An online payment's status: a line of at most 40 characters.
fn payment_status(value: Option<String>) -> Result<Option<String>> {
    optional_text("bookingData.onlineBookingPaymentStatus", value, 40)
}

fn comments(value: Option<String>) -> Result<Option<String>> {
    optional_lines("bookingData.comments", value, MAX_TEXT_CHARS)
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
            status: self.status.map(|s| s.as_str().to_string()),
            video_url: clearable(self.video_url, |text| video_url(Some(text)))?,
            billed: self.billed,
            send_confirmation: self
                .send_patient_messages
                .as_ref()
                .and_then(|m| m.confirmation),
            send_reminder: self.send_patient_messages.as_ref().and_then(|m| m.reminder),
            send_followup: self.send_patient_messages.as_ref().and_then(|m| m.followup),
            online_payment_status: clearable(self.online_booking_payment_status, |text| {
                payment_status(Some(text))
            })?,
        })
    }
}

#[derive(Default)]
pub struct BookingQueries;

#[Object]
impl BookingQueries {
    /// One booking, by id; null if the practice has none with this id, or if its patient is
    /// hidden from the caller by access groups. Cancelled bookings are returned too, with
    /// `deleted` set. Needs `bookings:read` or `query:booking`.
    async fn booking(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking's id.")] id: ID,
    ) -> Result<Option<Booking>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let found = reader(ctx, principal).find_booking(&id).await.or_fail()?;
        Ok(found.map(|b| Booking::read(ctx, b)))
    }

    /// A page of bookings, by start time. Cancelled bookings are left out unless
    /// `options.includeDeleted`, and those of patients hidden from the caller by access groups
    /// always. Needs `bookings:read` or `query:bookings`.
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
        #[graphql(desc = "Only bookings with this metadata.")] filters: Option<BookingQueryFilters>,
    ) -> Result<Option<BookingData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let options = options.unwrap_or_default();
        let metadata = filters.unwrap_or_default().metadata;
        if let Some(m) = &metadata {
            // A query has no `error` to refuse in: a filter past the limits matches nothing
            // that could be stored, and is a mistake in the input.
            crate::text::metadata_entry(&m.key, m.value.as_deref()).map_err(bad_input)?;
        }
        let filter = BookingFilter {
            metadata: metadata.map(|m| (m.key, m.value)),
            range: date_range.map(DateRange::bounds).transpose()?,
            include_cancelled: options.include_deleted.unwrap_or(false),
            created: options.created_at.map(DateRange::bounds).transpose()?,
            updated: options.updated_at.map(DateRange::bounds).transpose()?,
            ..Default::default()
        };
        BookingData::fetch(ctx, principal, &filter, page).await
    }
}

#[derive(Default)]
pub struct BookingMutations;

#[Object]
impl BookingMutations {
    /// Books a patient with a doctor. Refused, with `error` saying why and nothing written, if
    /// the doctor is already booked at that time (back to back is fine), the patient is
    /// archived, deleted or on hold, the doctor's account is disabled, or a record it names
    /// does not exist. Needs `bookings:write`.
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
                    .products_by_ids(std::slice::from_ref(type_id))
                    .await
                    .or_fail()?;
                let Some(t) = types.get(type_id) else {
                    let missing = Refusal::NotFound(Record::AppointmentType, type_id.clone());
                    return Ok(Some(ResponsePayload::refused(ctx, &missing)));
                };
                // A product with no duration is not an appointment type: the store refuses it.
                let end = start.saturating_add(t.duration.unwrap_or(1).saturating_mul(60_000));
                if !super::scalars::writable(end) {
                    return Err(bad_input(
                        "bookingData.start and the appointment type's duration end the booking \
                         after 9999-12-31T23:59:59Z, the last time a DateTime can write",
                    ));
                }
                end
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
            status: booking_data
                .status
                .unwrap_or(BookingStatus::Confirmed)
                .as_str()
                .to_string(),
            video_url: video_url(booking_data.video_url)?,
            billed: i64::from(booking_data.billed.unwrap_or(false)),
            send_confirmation: flag(&booking_data.send_patient_messages, |m| m.confirmation),
            send_reminder: flag(&booking_data.send_patient_messages, |m| m.reminder),
            send_followup: flag(&booking_data.send_patient_messages, |m| m.followup),
            online_payment_status: payment_status(booking_data.online_booking_payment_status)?,
        };
        let change = practice.create_booking(fields).await.or_fail()?;
        envelope(ctx, change, Booking)
    }

    /// Changes a booking: move it, give it to another doctor, change its notes. A booking
    /// moved (another time or doctor) or given another patient is refused as createBooking
    /// would refuse it; a cancelled booking is refused whatever the change. Needs
    /// `bookings:write`.
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
        #[graphql(desc = "Whether the patient is to be told (recorded in \
                          patientMessagesSent.cancellation; practice-api sends no messages).")]
        send_cancellation_messages: Option<bool>,
        #[graphql(desc = "Accepted for compatibility; practice-api sends no messages.")]
        notify_practice: Option<bool>,
    ) -> Result<Option<ResponsePayload<Booking>>> {
        let practice = authorize_write(ctx)?;
        let _ = notify_practice;
        let reason = optional_lines("cancellationReason", cancellation_reason, MAX_TEXT_CHARS)?;
        let tell = send_cancellation_messages.unwrap_or(false);
        let change = practice.cancel_booking(&id, reason, tell).await.or_fail()?;
        envelope(ctx, change, Booking)
    }

    /// Records that the patient reached a stage of their visit (arrived, in consultation,
    /// departed, did not attend), at `date` or now. Each is a `booking.patientJourney.*`
    /// event. Refused for a cancelled booking. Needs `bookings:write`.
    async fn update_booking_journey(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking's id.")] id: ID,
        #[graphql(desc = "The stage and when.")] booking_journey_input: BookingJourneyInput,
    ) -> Result<Option<ResponsePayload<Booking>>> {
        let practice = authorize_write(ctx)?;
        let stage = match booking_journey_input.journey_stage {
            Some(JourneyStage::Arrived) => Stage::Arrived,
            Some(JourneyStage::Consultation) => Stage::Consultation,
            Some(JourneyStage::Departed) => Stage::Departed,
            Some(JourneyStage::Dna) => Stage::DidNotAttend,
            None => return Err(bad_input("bookingJourneyInput.journeyStage is required")),
        };
        let at = match (booking_journey_input.date, booking_journey_input.at) {
            (None, None) => now_ms(),
            (Some(day), None) => day.0.and_time(NaiveTime::MIN).and_utc().timestamp_millis(),
            (None, Some(at)) => at.ms(),
            (Some(_), Some(_)) => {
                return Err(bad_input(
                    "bookingJourneyInput takes a date or an at, not both",
                ));
            }
        };
        let change = practice.set_journey(&id, stage, at).await.or_fail()?;
        envelope(ctx, change, Booking)
    }

    /// Sets a metadata entry of a booking (key at most 40 characters, value at most 500); a
    /// booking holds at most 50. Refused for a cancelled booking. Needs `bookings:write`.
    async fn update_booking_metadata(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking's id.")] booking_id: ID,
        #[graphql(desc = "The entry's key.")] key: String,
        #[graphql(desc = "The entry's value.")] value: String,
    ) -> Result<Option<ResponsePayload<Booking>>> {
        let practice = authorize_write(ctx)?;
        if let Err(refusal) = metadata_entry(&key, Some(&value))? {
            return envelope(ctx, Err(refusal.into()), Booking);
        }
        let change = practice
            .set_metadata(&booking_id, &key, &value)
            .await
            .or_fail()?;
        envelope(ctx, change, Booking)
    }

    /// Deletes a metadata entry of a booking. Refused when it has no such key. Needs
    /// `bookings:write`.
    async fn delete_booking_metadata(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The booking's id.")] booking_id: ID,
        #[graphql(desc = "The entry's key.")] key: String,
    ) -> Result<Option<ResponsePayload<Booking>>> {
        let practice = authorize_write(ctx)?;
        if let Err(refusal) = metadata_entry(&key, None)? {
            return envelope(ctx, Err(refusal.into()), Booking);
        }
        let change = practice
            .delete_metadata(&booking_id, &key)
            .await
            .or_fail()?;
        envelope(ctx, change, Booking)
    }
}
