//! Bookings: a patient seeing a doctor, at a time, maybe at a location and for an appointment
//! type, and the rules of a booking: its times (see [`check_booking_times`]), the records it
//! names, and that a cancelled booking no longer changes. The database itself refuses two
//! active bookings of one doctor that overlap (a trigger on SQLite, an exclusion constraint on
//! PostgreSQL, both named bookings_no_overlap).

use std::collections::HashMap;

use std::sync::LazyLock;

use sqlx::{Any, FromRow, Transaction};

use super::audit::Event;
use super::{
    Args, Change, Columns, Page, PageRequest, PracticeStore, StoreResult, new_id, now_ms,
    time_filters,
};
use crate::domain::limits::MAX_METADATA_ENTRIES;
use crate::domain::{Bound, Busy, PatientState, Record, Refusal, check_booking_times};

/// The name the database gives the no-overlap rule in its errors.
const NO_OVERLAP: &str = "bookings_no_overlap";

/// A booking as stored. Times are milliseconds since the epoch, UTC.
#[derive(Clone, Debug, PartialEq, FromRow)]
pub struct Booking {
    pub id: String,
    #[sqlx(flatten)]
    pub fields: BookingFields,
    pub cancelled_at: Option<i64>,
    pub cancellation_reason: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    #[sqlx(flatten)]
    pub journey: Journey,
    /// Set when a cancellation asked for the patient to be told (practice-api sends nothing).
    pub send_cancellation: i64,
    /// A JSON array of [key, value] pairs, in the order they were first set: see
    /// [`Booking::metadata`].
    pub metadata: String,
}

impl Default for Booking {
    /// A booking of nothing, with no metadata: an empty list, as the column's default is,
    /// which the metadata filter reads as JSON (an empty text is not).
    fn default() -> Booking {
        Booking {
            id: String::new(),
            fields: BookingFields::default(),
            cancelled_at: None,
            cancellation_reason: None,
            created_at: 0,
            updated_at: 0,
            journey: Journey::default(),
            send_cancellation: 0,
            metadata: encode_metadata(Vec::new()),
        }
    }
}

/// When the patient reached each stage of their visit (milliseconds), if they did.
#[derive(Clone, Debug, Default, PartialEq, Eq, FromRow)]
pub struct Journey {
    pub arrived_at: Option<i64>,
    pub consultation_at: Option<i64>,
    pub departed_at: Option<i64>,
    /// Did not attend.
    pub dna_at: Option<i64>,
}

/// A stage of a patient's journey through a visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Arrived,
    Consultation,
    Departed,
    DidNotAttend,
}

impl Stage {
    /// The action the audit log records, and the event it makes.
    fn action(self) -> &'static str {
        match self {
            Stage::Arrived => "journey_arrived",
            Stage::Consultation => "journey_consultation",
            Stage::Departed => "journey_departed",
            Stage::DidNotAttend => "journey_dna",
        }
    }

    fn slot(self, journey: &mut Journey) -> &mut Option<i64> {
        match self {
            Stage::Arrived => &mut journey.arrived_at,
            Stage::Consultation => &mut journey.consultation_at,
            Stage::Departed => &mut journey.departed_at,
            Stage::DidNotAttend => &mut journey.dna_at,
        }
    }
}

/// What a booking's status may be. A failed booking holds no slot.
pub const STATUSES: [&str; 4] = ["pending", "processing", "confirmed", "failed"];

/// The fields of a booking that staff set.
#[derive(Clone, Debug, PartialEq, FromRow)]
pub struct BookingFields {
    pub patient_id: String,
    pub doctor_id: String,
    pub location_id: Option<String>,
    pub appointment_type_id: Option<String>,
    pub start_at: i64,
    pub end_at: i64,
    pub comments: Option<String>,
    /// One of [`STATUSES`].
    pub status: String,
    pub video_url: Option<String>,
    pub billed: i64,
    /// Messages the booking was flagged to send (practice-api sends none).
    pub send_confirmation: i64,
    pub send_reminder: i64,
    pub send_followup: i64,
    /// The online payment's status as the booking widget reports it ("paid", "refunded").
    pub online_payment_status: Option<String>,
}

impl Default for BookingFields {
    fn default() -> Self {
        BookingFields {
            patient_id: String::new(),
            doctor_id: String::new(),
            location_id: None,
            appointment_type_id: None,
            start_at: 0,
            end_at: 0,
            comments: None,
            status: "confirmed".into(),
            video_url: None,
            billed: 0,
            send_confirmation: 0,
            send_reminder: 0,
            send_followup: 0,
            online_payment_status: None,
        }
    }
}

impl Booking {
    /// The event of a change to the booking, which is its patient's too.
    fn event(&self, action: &'static str) -> Event<'_> {
        Event {
            action,
            resource_type: "booking",
            resource_id: &self.id,
            patient_id: Some(&self.fields.patient_id),
        }
    }

    /// The booking's metadata, as (key, value) pairs in the order they were first set.
    pub fn metadata(&self) -> Vec<(String, String)> {
        serde_json::from_str(&self.metadata).unwrap_or_default()
    }

    /// Every column of a booking's row, one line each: what is inserted, updated and read.
    fn columns(&self) -> Columns {
        let f = &self.fields;
        Columns::default()
            .with("id", &self.id)
            .with("patient_id", &f.patient_id)
            .with("doctor_id", &f.doctor_id)
            .with("location_id", &f.location_id)
            .with("appointment_type_id", &f.appointment_type_id)
            .with("start_at", f.start_at)
            .with("end_at", f.end_at)
            .with("comments", &f.comments)
            .with("status", &f.status)
            .with("video_url", &f.video_url)
            .with("billed", f.billed)
            .with("send_confirmation", f.send_confirmation)
            .with("send_reminder", f.send_reminder)
            .with("send_followup", f.send_followup)
            .with("online_payment_status", &f.online_payment_status)
            .with("send_cancellation", self.send_cancellation)
            .with("arrived_at", self.journey.arrived_at)
            .with("consultation_at", self.journey.consultation_at)
            .with("departed_at", self.journey.departed_at)
            .with("dna_at", self.journey.dna_at)
            .with("metadata", &self.metadata)
            .with("cancelled_at", self.cancelled_at)
            .with("cancellation_reason", &self.cancellation_reason)
            .with("created_at", self.created_at)
            .with("updated_at", self.updated_at)
    }

    /// A cancelled booking no longer changes.
    fn check_changeable(&self) -> Result<(), Refusal> {
        match self.cancelled_at {
            Some(_) => Err(Refusal::BookingCancelled),
            None => Ok(()),
        }
    }
}

/// The columns a booking is read with.
static BOOKING_COLUMNS: LazyLock<String> = LazyLock::new(|| Booking::default().columns().names());

/// Changes to a booking's fields: `None` leaves a field as it is; for the optional ones,
/// `Some(None)` clears it.
#[derive(Clone, Debug, Default)]
pub struct BookingPatch {
    pub patient_id: Option<String>,
    pub doctor_id: Option<String>,
    pub location_id: Option<Option<String>>,
    pub appointment_type_id: Option<Option<String>>,
    pub start_at: Option<i64>,
    pub end_at: Option<i64>,
    pub comments: Option<Option<String>>,
    pub status: Option<String>,
    pub video_url: Option<Option<String>>,
    pub billed: Option<bool>,
    pub send_confirmation: Option<bool>,
    pub send_reminder: Option<bool>,
    pub send_followup: Option<bool>,
    pub online_payment_status: Option<Option<String>>,
}

impl BookingPatch {
    fn apply(self, f: &mut BookingFields) {
        fn set<T>(field: &mut T, value: Option<T>) {
            if let Some(value) = value {
                *field = value;
            }
        }
        set(&mut f.patient_id, self.patient_id);
        set(&mut f.doctor_id, self.doctor_id);
        set(&mut f.location_id, self.location_id);
        set(&mut f.appointment_type_id, self.appointment_type_id);
        set(&mut f.start_at, self.start_at);
        set(&mut f.end_at, self.end_at);
        set(&mut f.comments, self.comments);
        set(&mut f.status, self.status);
        set(&mut f.video_url, self.video_url);
        set(&mut f.billed, self.billed.map(i64::from));
        set(
            &mut f.send_confirmation,
            self.send_confirmation.map(i64::from),
        );
        set(&mut f.send_reminder, self.send_reminder.map(i64::from));
        set(&mut f.send_followup, self.send_followup.map(i64::from));
        set(&mut f.online_payment_status, self.online_payment_status);
    }
}

/// Which bookings a list holds.
#[derive(Clone, Debug, Default)]
pub struct BookingFilter {
    /// Bookings that start or end inside this range (inclusive, milliseconds).
    pub range: Option<(i64, i64)>,
    pub include_cancelled: bool,
    pub created: Option<(i64, i64)>,
    pub updated: Option<(i64, i64)>,
    pub doctor_id: Option<String>,
    pub patient_id: Option<String>,
    /// Bookings with this metadata key, and this value when given.
    pub metadata: Option<(String, Option<String>)>,
}

impl super::Keyed for Booking {
    fn key(&self) -> &str {
        &self.id
    }
}

impl PracticeStore<'_> {
    /// The bookings with these ids that the viewer sees, by id, cancelled ones included.
    pub async fn bookings_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, Booking>> {
        self.by_ids_seen("bookings", &BOOKING_COLUMNS, ids, |args| {
            self.visible_bookings(args)
        })
        .await
    }

    /// The booking with this id, cancelled ones included, if the viewer sees it.
    pub async fn find_booking(&self, id: &str) -> StoreResult<Option<Booking>> {
        let mut args = Args::default();
        let id_param = args.add(id);
        let sql = format!(
            "SELECT {} FROM bookings WHERE practice_id = $1 AND id = {id_param}{}",
            *BOOKING_COLUMNS,
            self.visible_bookings(&mut args)
        );
        Ok(args
            .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
            .fetch_optional(self.read())
            .await?)
    }

    /// The condition that keeps `bookings` to those of patients the viewer sees (a booking of
    /// a patient hidden from them does not exist for them either, as its events do not), with
    /// its parameter added to `args`; empty for a viewer who sees every patient.
    fn visible_bookings(&self, args: &mut Args) -> String {
        if self.viewer.is_none() {
            return String::new();
        }
        format!(
            " AND EXISTS (SELECT 1 FROM patients WHERE patients.practice_id = bookings.practice_id \
             AND patients.id = bookings.patient_id{})",
            self.visible_patients(args, "patients")
        )
    }

    /// A page of bookings, by start time.
    pub async fn list_bookings(
        &self,
        filter: &BookingFilter,
        page: PageRequest,
    ) -> StoreResult<Page<Booking>> {
        let mut args = Args::default();
        let mut sql = format!(
            "SELECT {} FROM bookings WHERE practice_id = $1{}",
            *BOOKING_COLUMNS,
            self.booking_conditions(filter, &mut args)
        );
        let (limit, offset) = (args.add(page.limit()), args.add(page.offset()));
        sql += &format!(" ORDER BY start_at, id LIMIT {limit} OFFSET {offset}");
        let query = args.bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id));
        let rows = query.fetch_all(self.read()).await?;
        Ok(page.finish(rows))
    }

    /// How many bookings match `filter`, for a page that tells its total.
    pub async fn count_bookings(&self, filter: &BookingFilter) -> StoreResult<i64> {
        let mut args = Args::default();
        let sql = format!(
            "SELECT COUNT(*) FROM bookings WHERE practice_id = $1{}",
            self.booking_conditions(filter, &mut args)
        );
        let (count,): (i64,) = args
            .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
            .fetch_one(self.read())
            .await?;
        Ok(count)
    }

    /// The conditions of `filter`, each beginning with AND, their values added to `args`.
    fn booking_conditions(&self, filter: &BookingFilter, args: &mut Args) -> String {
        let mut sql = String::new();
        if let Some(doctor) = &filter.doctor_id {
            sql += &format!(" AND doctor_id = {}", args.add(doctor));
        }
        if let Some(patient) = &filter.patient_id {
            sql += &format!(" AND patient_id = {}", args.add(patient));
        }
        if let Some((start, end)) = filter.range {
            let (a, b) = (args.add(start), args.add(end));
            sql += &format!(
                " AND ((start_at >= {a} AND start_at <= {b}) OR (end_at >= {a} AND end_at <= {b}))"
            );
        }
        if !filter.include_cancelled {
            sql += " AND cancelled_at IS NULL";
        }
        if let Some((key, value)) = &filter.metadata {
            let entries = self.store.engine.json_rows_of("bookings.metadata", "m");
            sql += &format!(
                " AND EXISTS (SELECT 1 FROM {entries} WHERE m.value ->> 0 = {}",
                args.add(key)
            );
            if let Some(value) = value {
                sql += &format!(" AND m.value ->> 1 = {}", args.add(value));
            }
            sql += ")";
        }
        sql += &time_filters(args, filter.created, filter.updated);
        sql += &self.visible_bookings(args);
        sql
    }

    /// Books a patient with a doctor. Denied, with nothing written, if its times are not a
    /// booking's, a record it names is missing, the patient is archived or deleted, or the
    /// doctor is booked at that time.
    pub async fn create_booking(&self, fields: BookingFields) -> StoreResult<Change<Booking>> {
        if let Err(invalid) = check_booking_times(fields.start_at, fields.end_at) {
            return Ok(Err(invalid.into()));
        }
        let now = now_ms();
        let booking = Booking {
            id: new_id(),
            fields,
            created_at: now,
            updated_at: now,
            ..Booking::default()
        };
        retried(move || self.insert_booking(booking.clone())).await
    }

    /// Inserts `booking` in a transaction of its own: see [`PracticeStore::create_booking`].
    async fn insert_booking(&self, booking: Booking) -> StoreResult<Change<Booking>> {
        let mut tx = self.begin_write().await?;
        if let Err(refusal) = self
            .check_references(&mut tx, &booking.fields, None)
            .await?
        {
            return Ok(Err(refusal.into()));
        }
        let columns = booking.columns();
        let inserted = columns
            .clone()
            .bind(
                sqlx::query(sqlx::AssertSqlSafe(columns.insert_sql("bookings", 1)))
                    .bind(self.practice_id),
            )
            .execute(&mut *tx)
            .await;
        self.finish_write(tx, "create", inserted, booking).await
    }

    /// Changes a booking, as [`BookingPatch`] says: denied like a new booking, and for a
    /// cancelled one.
    pub async fn update_booking(
        &self,
        id: &str,
        patch: BookingPatch,
    ) -> StoreResult<Change<Booking>> {
        self.modify_booking(id, "update", |b| {
            patch.clone().apply(&mut b.fields);
            Ok(())
        })
        .await
    }

    /// Cancels a booking, with why: it is kept, and frees its slot. Refused if it is cancelled
    /// already. `tell_patient` records that the patient was to be told.
    pub async fn cancel_booking(
        &self,
        id: &str,
        reason: Option<String>,
        tell_patient: bool,
    ) -> StoreResult<Change<Booking>> {
        self.modify_booking(id, "delete", |b| {
            if b.cancelled_at.is_some() {
                return Err(Refusal::BookingAlreadyCancelled);
            }
            b.cancelled_at = Some(now_ms());
            b.cancellation_reason = reason.clone();
            b.send_cancellation = i64::from(tell_patient);
            Ok(())
        })
        .await
    }

    /// Records that the patient reached `stage` at `at` (milliseconds).
    pub async fn set_journey(
        &self,
        id: &str,
        stage: Stage,
        at: i64,
    ) -> StoreResult<Change<Booking>> {
        self.modify_booking(id, stage.action(), |b| {
            *stage.slot(&mut b.journey) = Some(at);
            Ok(())
        })
        .await
    }

    /// Sets a metadata entry of a booking: a new key goes last, an existing one keeps its
    /// place. Refused past [`MAX_METADATA_ENTRIES`].
    pub async fn set_metadata(
        &self,
        id: &str,
        key: &str,
        value: &str,
    ) -> StoreResult<Change<Booking>> {
        self.modify_booking(id, "update_metadata", |b| {
            let mut entries = b.metadata();
            match entries.iter().position(|(k, _)| k == key) {
                Some(at) => entries[at].1 = value.to_string(),
                None if entries.len() >= MAX_METADATA_ENTRIES => {
                    return Err(Refusal::TooMany(Bound::MetadataEntries));
                }
                None => entries.push((key.to_string(), value.to_string())),
            }
            b.metadata = encode_metadata(entries);
            Ok(())
        })
        .await
    }

    /// Deletes a metadata entry of a booking. Refused when it has no such key.
    pub async fn delete_metadata(&self, id: &str, key: &str) -> StoreResult<Change<Booking>> {
        self.modify_booking(id, "delete_metadata", |b| {
            let mut entries = b.metadata();
            let before = entries.len();
            entries.retain(|(k, _)| k != key);
            if entries.len() == before {
                return Err(Refusal::NoMetadataKey(key.to_string()));
            }
            b.metadata = encode_metadata(entries);
            Ok(())
        })
        .await
    }

    /// Reads the booking, applies `change` and writes it back in one transaction holding the
    /// booking's row. Records named anew are checked; the no-overlap rule is the database's.
    /// A cancelled booking is refused, unless `change` refuses it first.
    async fn modify_booking(
        &self,
        id: &str,
        action: &'static str,
        change: impl Fn(&mut Booking) -> Result<(), Refusal>,
    ) -> StoreResult<Change<Booking>> {
        let change = &change;
        retried(move || self.modify_once(id, action, change)).await
    }

    /// One try of [`PracticeStore::modify_booking`], in a transaction of its own.
    async fn modify_once(
        &self,
        id: &str,
        action: &'static str,
        change: &impl Fn(&mut Booking) -> Result<(), Refusal>,
    ) -> StoreResult<Change<Booking>> {
        let mut tx = self.begin_write().await?;
        let mut args = Args::default();
        let id_param = args.add(id);
        let sql = format!(
            "UPDATE bookings SET updated_at = updated_at WHERE practice_id = $1 AND id = \
             {id_param}{} RETURNING {}",
            self.visible_bookings(&mut args),
            *BOOKING_COLUMNS
        );
        let found: Option<Booking> = args
            .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(mut booking) = found else {
            return Ok(Err(
                Refusal::NotFound(Record::Booking, id.to_string()).into()
            ));
        };
        let before = booking.clone();
        if let Err(refusal) = change(&mut booking).and_then(|()| before.check_changeable()) {
            return Ok(Err(refusal.into()));
        }
        if let Err(invalid) = check_booking_times(booking.fields.start_at, booking.fields.end_at) {
            return Ok(Err(invalid.into()));
        }
        if let Err(refusal) = self
            .check_references(&mut tx, &booking.fields, Some(&before.fields))
            .await?
        {
            return Ok(Err(refusal.into()));
        }
        if booking == before {
            let event = booking.event(action);
            self.commit_unchanged(tx, event).await?;
            return Ok(Ok(booking));
        }
        booking.updated_at = now_ms().max(booking.updated_at);
        let columns = booking.columns();
        let updated = columns
            .clone()
            .bind(
                sqlx::query(sqlx::AssertSqlSafe(columns.update_sql("bookings")))
                    .bind(self.practice_id),
            )
            .execute(&mut *tx)
            .await;
        self.finish_write(tx, action, updated, booking).await
    }

    /// Records and commits a write, or turns the database's no-overlap refusal into one that
    /// names the booking in the way.
    async fn finish_write(
        &self,
        tx: Transaction<'static, Any>,
        action: &'static str,
        written: Result<sqlx::any::AnyQueryResult, sqlx::Error>,
        booking: Booking,
    ) -> StoreResult<Change<Booking>> {
        match written {
            Ok(_) => {
                self.commit(tx, booking.event(action)).await?;
                Ok(Ok(booking))
            }
            Err(err) if is_overlap(&err) => {
                drop(tx);
                let busy = self.booking_in_the_way(&booking).await?;
                Ok(Err(Refusal::DoctorBusy(busy).into()))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Checks the records a booking names, those that differ from `before` (all of them for a
    /// new booking). A booking moved (to another time or doctor), or a failed one taking its
    /// slot again, is booked anew: its patient must be bookable then, and its doctor a doctor
    /// whose account is not disabled; a change of anything else (its journey, notes, metadata)
    /// leaves them be.
    async fn check_references(
        &self,
        tx: &mut Transaction<'_, Any>,
        fields: &BookingFields,
        before: Option<&BookingFields>,
    ) -> StoreResult<Result<(), Refusal>> {
        let moved = before.is_none_or(|b| {
            (b.start_at, b.end_at, &b.doctor_id)
                != (fields.start_at, fields.end_at, &fields.doctor_id)
                || (b.status == "failed" && fields.status != "failed")
        });
        let changed = |now: &str, then: fn(&BookingFields) -> &str| {
            moved || before.is_none_or(|b| then(b) != now)
        };
        if changed(&fields.patient_id, |b| &b.patient_id) {
            // A no-op update holds the patient's row to the end of the transaction, so that it
            // cannot be archived, deleted or hidden from the viewer between this check and the
            // booking's write. A patient the viewer does not see is not found.
            let mut args = Args::default();
            let sql = self.hold_patient(
                &mut args,
                &fields.patient_id,
                "updated_at = updated_at",
                "",
                " RETURNING archived_at, deleted_at, on_hold",
            );
            let row: Option<(Option<i64>, Option<i64>, i64)> = args
                .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
                .fetch_optional(&mut **tx)
                .await?;
            match row {
                None => {
                    return Ok(Err(Refusal::NotFound(
                        Record::Patient,
                        fields.patient_id.clone(),
                    )));
                }
                Some((_, Some(_), _)) => {
                    return Ok(Err(Refusal::PatientCannotBeBooked(PatientState::Deleted)));
                }
                Some((Some(_), None, _)) => {
                    return Ok(Err(Refusal::PatientCannotBeBooked(PatientState::Archived)));
                }
                Some((None, None, on_hold)) if on_hold != 0 => {
                    return Ok(Err(Refusal::PatientOnHold));
                }
                Some((None, None, _)) => {}
            }
        }
        if changed(&fields.doctor_id, |b| &b.doctor_id) {
            // Held to the end of the transaction, so that the doctor cannot be disabled or
            // made no doctor between this check and the booking's write.
            let sql = format!(
                "SELECT is_doctor, first_name, last_name, disabled_at FROM users \
                 WHERE practice_id = $1 AND id = $2{}",
                self.store.engine.for_share()
            );
            let row: Option<(i64, String, String, Option<i64>)> =
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(self.practice_id)
                    .bind(&fields.doctor_id)
                    .fetch_optional(&mut **tx)
                    .await?;
            match row {
                None => {
                    return Ok(Err(Refusal::NotFound(
                        Record::Doctor,
                        fields.doctor_id.clone(),
                    )));
                }
                Some((0, first, last, _)) => {
                    return Ok(Err(Refusal::NotADoctor {
                        id: fields.doctor_id.clone(),
                        name: format!("{first} {last}"),
                    }));
                }
                Some((_, first, last, Some(_))) => {
                    return Ok(Err(Refusal::DoctorDisabled {
                        id: fields.doctor_id.clone(),
                        name: format!("{first} {last}"),
                    }));
                }
                Some(_) => {}
            }
        }
        if let Some(id) = &fields.location_id
            && before.is_none_or(|b| b.location_id.as_ref() != Some(id))
        {
            let found: Option<(String,)> =
                sqlx::query_as("SELECT id FROM locations WHERE practice_id = $1 AND id = $2")
                    .bind(self.practice_id)
                    .bind(id)
                    .fetch_optional(&mut **tx)
                    .await?;
            if found.is_none() {
                return Ok(Err(Refusal::NotFound(Record::Location, id.clone())));
            }
        }
        // What a booking is for must be bookable when it is chosen; a booking keeps its
        // appointment type if that later stops being offered.
        if let Some(id) = &fields.appointment_type_id
            && before.is_none_or(|b| b.appointment_type_id.as_ref() != Some(id))
        {
            let found: Option<(String, String, String, i64)> = sqlx::query_as(
                "SELECT name, product_type, status, is_bookable FROM products \
                 WHERE practice_id = $1 AND id = $2",
            )
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
            match found {
                None => return Ok(Err(Refusal::NotFound(Record::AppointmentType, id.clone()))),
                Some((name, kind, status, bookable))
                    if kind != super::products::APPOINTMENT
                        || status != "active"
                        || bookable == 0 =>
                {
                    return Ok(Err(Refusal::NotBookable(name)));
                }
                Some(_) => {}
            }
        }
        Ok(Ok(()))
    }

    /// The active booking of the same doctor that overlaps `booking`, if it can still be found.
    async fn booking_in_the_way(&self, booking: &Booking) -> StoreResult<Option<Busy>> {
        let f = &booking.fields;
        let row: Option<(i64, i64, Option<String>, String, String)> = sqlx::query_as(
            "SELECT b.start_at, b.end_at, u.title, u.first_name, u.last_name FROM bookings b \
             JOIN users u ON u.practice_id = b.practice_id AND u.id = b.doctor_id \
             WHERE b.practice_id = $1 AND b.doctor_id = $2 AND b.id <> $3 \
             AND b.cancelled_at IS NULL AND b.status <> 'failed' \
             AND b.start_at < $5 AND $4 < b.end_at \
             ORDER BY b.start_at LIMIT 1",
        )
        .bind(self.practice_id)
        .bind(&f.doctor_id)
        .bind(&booking.id)
        .bind(f.start_at)
        .bind(f.end_at)
        .fetch_optional(self.read())
        .await?;
        Ok(row.map(|(start, end, title, first, last)| Busy {
            doctor: match title {
                Some(title) => format!("{title} {first} {last}"),
                None => format!("{first} {last}"),
            },
            start,
            end,
        }))
    }
}

/// Metadata as stored: a JSON array of [key, value] pairs.
fn encode_metadata(entries: Vec<(String, String)>) -> String {
    serde_json::Value::from(
        entries
            .into_iter()
            .map(|(k, v)| serde_json::json!([k, v]))
            .collect::<Vec<_>>(),
    )
    .to_string()
}

/// How many times a write of a booking is tried when PostgreSQL ends it as a deadlock.
const DEADLOCK_ATTEMPTS: u32 = 3;

/// Runs `write`, a whole transaction, again (up to [`DEADLOCK_ATTEMPTS`] times in all) when
/// PostgreSQL ends it as a deadlock (40P01). Two transactions writing overlapping bookings at
/// once may each find the other's row under the exclusion constraint and wait for it
/// (PostgreSQL's `execIndexing.c` tells of it); tried again, the one ended finds the other's
/// booking, and is refused as the doctor being busy.
async fn retried<F>(write: impl Fn() -> F) -> StoreResult<Change<Booking>>
where
    F: Future<Output = StoreResult<Change<Booking>>>,
{
    let mut attempt = 1;
    loop {
        match write().await {
            Err(error) if attempt < DEADLOCK_ATTEMPTS && error.is_deadlock() => attempt += 1,
            done => return done,
        }
    }
}

fn is_overlap(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db)
        if db.constraint() == Some(NO_OVERLAP) || db.message().contains(NO_OVERLAP))
}
