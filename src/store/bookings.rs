//! Bookings: a patient seeing a doctor, at a time, maybe at a location and for an appointment
//! type. The database itself refuses two active bookings of one doctor that overlap (a
//! trigger on SQLite, an exclusion constraint on PostgreSQL, both named bookings_no_overlap).

use chrono::{TimeZone, Utc};
use sqlx::{Any, FromRow, Transaction};

use super::audit::Event;
use super::{
    Args, Change, Page, PageRequest, PracticeStore, StoreResult, new_id, now_ms, time_filters,
};

const BOOKING_COLUMNS: &str = "id, patient_id, doctor_id, location_id, appointment_type_id, \
     start_at, end_at, comments, cancelled_at, cancellation_reason, created_at, updated_at";

/// The name the database gives the no-overlap rule in its errors.
const NO_OVERLAP: &str = "bookings_no_overlap";

/// A booking as stored. Times are milliseconds since the epoch, UTC.
#[derive(Clone, Debug, FromRow)]
pub struct Booking {
    pub id: String,
    #[sqlx(flatten)]
    pub fields: BookingFields,
    pub cancelled_at: Option<i64>,
    pub cancellation_reason: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The fields of a booking that staff set.
#[derive(Clone, Debug, Default, PartialEq, FromRow)]
pub struct BookingFields {
    pub patient_id: String,
    pub doctor_id: String,
    pub location_id: Option<String>,
    pub appointment_type_id: Option<String>,
    pub start_at: i64,
    pub end_at: i64,
    pub comments: Option<String>,
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
}

/// The outcome of a change to a booking.
pub type BookingChange = Change<Booking>;

/// What a change made under [`PracticeStore::modify_booking`] does with the booking.
pub type Modification = Result<(), String>;

impl PracticeStore<'_> {
    /// The booking with this id, cancelled ones included.
    pub async fn find_booking(&self, id: &str) -> StoreResult<Option<Booking>> {
        let sql =
            format!("SELECT {BOOKING_COLUMNS} FROM bookings WHERE practice_id = $1 AND id = $2");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(self.read())
            .await?)
    }

    /// A page of bookings, by start time.
    pub async fn list_bookings(
        &self,
        filter: &BookingFilter,
        page: PageRequest,
    ) -> StoreResult<Page<Booking>> {
        let mut args = Args::default();
        let mut sql = format!("SELECT {BOOKING_COLUMNS} FROM bookings WHERE practice_id = $1");
        if let Some(doctor) = &filter.doctor_id {
            sql += &format!(" AND doctor_id = {}", args.text(doctor));
        }
        if let Some(patient) = &filter.patient_id {
            sql += &format!(" AND patient_id = {}", args.text(patient));
        }
        if let Some((start, end)) = filter.range {
            let (a, b) = (args.int(start), args.int(end));
            sql += &format!(
                " AND ((start_at >= {a} AND start_at <= {b}) OR (end_at >= {a} AND end_at <= {b}))"
            );
        }
        if !filter.include_cancelled {
            sql += " AND cancelled_at IS NULL";
        }
        sql += &time_filters(&mut args, filter.created, filter.updated);
        let (limit, offset) = (args.int(page.limit()), args.int(page.offset()));
        sql += &format!(" ORDER BY start_at, id LIMIT {limit} OFFSET {offset}");
        let query = args.bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id));
        let rows = query.fetch_all(self.read()).await?;
        Ok(page.finish(rows))
    }

    /// Books a patient with a doctor. Refused, with nothing written, if a record it names is
    /// missing, the patient is archived or deleted, or the doctor is booked at that time.
    pub async fn create_booking(&self, fields: BookingFields) -> StoreResult<BookingChange> {
        let now = now_ms();
        let booking = Booking {
            id: new_id(),
            fields,
            cancelled_at: None,
            cancellation_reason: None,
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.begin_write().await?;
        if let Some(reason) = self
            .check_references(&mut tx, &booking.fields, None)
            .await?
        {
            return Ok(Change::Refused(reason));
        }
        let sql = format!(
            "INSERT INTO bookings (practice_id, {BOOKING_COLUMNS}) VALUES ($1, $2, $3, $4, $5, \
             $6, $7, $8, $9, $10, $11, $12, $13)"
        );
        let inserted = bind_booking(
            sqlx::query(sqlx::AssertSqlSafe(sql)),
            self.practice_id,
            &booking,
        )
        .execute(&mut *tx)
        .await;
        self.finish_write(tx, "create", inserted, booking).await
    }

    /// Reads the booking, applies `change` and writes it back in one transaction holding the
    /// booking's row. Records named anew are checked; the no-overlap rule is the database's.
    pub async fn modify_booking(
        &self,
        id: &str,
        action: &'static str,
        change: impl FnOnce(&mut Booking) -> Modification,
    ) -> StoreResult<BookingChange> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "UPDATE bookings SET updated_at = updated_at WHERE practice_id = $1 AND id = $2 \
             RETURNING {BOOKING_COLUMNS}"
        );
        let found: Option<Booking> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(mut booking) = found else {
            return Ok(Change::NotFound);
        };
        let before = booking.fields.clone();
        if let Err(reason) = change(&mut booking) {
            return Ok(Change::Refused(reason));
        }
        if booking.fields.end_at <= booking.fields.start_at {
            return Ok(Change::Refused(
                "The booking would end before it starts".into(),
            ));
        }
        if let Some(reason) = self
            .check_references(&mut tx, &booking.fields, Some(&before))
            .await?
        {
            return Ok(Change::Refused(reason));
        }
        booking.updated_at = now_ms().max(booking.updated_at);
        let updated = bind_booking(
            sqlx::query(
                "UPDATE bookings SET patient_id = $3, doctor_id = $4, location_id = $5, \
                 appointment_type_id = $6, start_at = $7, end_at = $8, comments = $9, \
                 cancelled_at = $10, cancellation_reason = $11, created_at = $12, \
                 updated_at = $13 WHERE practice_id = $1 AND id = $2",
            ),
            self.practice_id,
            &booking,
        )
        .execute(&mut *tx)
        .await;
        self.finish_write(tx, action, updated, booking).await
    }

    /// Records and commits a write, or turns the database's no-overlap refusal into a sentence that names
    /// the booking in the way.
    async fn finish_write(
        &self,
        tx: Transaction<'_, Any>,
        action: &'static str,
        written: Result<sqlx::any::AnyQueryResult, sqlx::Error>,
        booking: Booking,
    ) -> StoreResult<BookingChange> {
        match written {
            Ok(_) => {
                let event = Event {
                    action,
                    resource_type: "booking",
                    resource_id: &booking.id,
                    patient_id: Some(&booking.fields.patient_id),
                };
                self.commit(tx, event).await?;
                Ok(Change::Done(booking))
            }
            Err(err) if is_overlap(&err) => {
                drop(tx);
                Ok(Change::Refused(self.describe_conflict(&booking).await?))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Checks the records a booking names, those that differ from `before` (all of them for a
    /// new booking). Returns why the booking is refused, if it is.
    async fn check_references(
        &self,
        tx: &mut Transaction<'_, Any>,
        fields: &BookingFields,
        before: Option<&BookingFields>,
    ) -> StoreResult<Option<String>> {
        let changed =
            |now: &str, then: fn(&BookingFields) -> &str| before.is_none_or(|b| then(b) != now);
        if changed(&fields.patient_id, |b| &b.patient_id) {
            // A no-op update holds the patient's row to the end of the transaction, so that it
            // cannot be archived or deleted between this check and the booking's insert.
            let row: Option<(Option<i64>, Option<i64>)> = sqlx::query_as(
                "UPDATE patients SET updated_at = updated_at WHERE practice_id = $1 AND id = $2 \
                 RETURNING archived_at, deleted_at",
            )
            .bind(self.practice_id)
            .bind(&fields.patient_id)
            .fetch_optional(&mut **tx)
            .await?;
            match row {
                None => return Ok(Some(format!("No patient with id {}", fields.patient_id))),
                Some((_, Some(_))) => {
                    return Ok(Some(
                        "The patient has been deleted and cannot be booked".into(),
                    ));
                }
                Some((Some(_), None)) => {
                    return Ok(Some(
                        "The patient is archived: unarchive them before booking".into(),
                    ));
                }
                Some((None, None)) => {}
            }
        }
        if changed(&fields.doctor_id, |b| &b.doctor_id) {
            let row: Option<(i64, String, String)> = sqlx::query_as(
                "SELECT is_doctor, first_name, last_name FROM users \
                 WHERE practice_id = $1 AND id = $2",
            )
            .bind(self.practice_id)
            .bind(&fields.doctor_id)
            .fetch_optional(&mut **tx)
            .await?;
            match row {
                None => return Ok(Some(format!("No doctor with id {}", fields.doctor_id))),
                Some((0, first, last)) => {
                    return Ok(Some(format!(
                        "{first} {last} is not a doctor and cannot be booked"
                    )));
                }
                Some(_) => {}
            }
        }
        for (table, what, id, old) in [
            (
                "locations",
                "location",
                &fields.location_id,
                before.map(|b| &b.location_id),
            ),
            (
                "appointment_types",
                "appointment type",
                &fields.appointment_type_id,
                before.map(|b| &b.appointment_type_id),
            ),
        ] {
            let Some(id) = id else { continue };
            if old.is_some_and(|old| old.as_ref() == Some(id)) {
                continue;
            }
            let sql = format!("SELECT id FROM {table} WHERE practice_id = $1 AND id = $2");
            let found: Option<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(self.practice_id)
                .bind(id)
                .fetch_optional(&mut **tx)
                .await?;
            if found.is_none() {
                return Ok(Some(format!("No {what} with id {id}")));
            }
        }
        Ok(None)
    }

    /// "Dr Grace Hopper is already booked 09:15–09:45 on 2026-12-01 (UTC)".
    async fn describe_conflict(&self, booking: &Booking) -> StoreResult<String> {
        let f = &booking.fields;
        let row: Option<(i64, i64, Option<String>, String, String)> = sqlx::query_as(
            "SELECT b.start_at, b.end_at, u.title, u.first_name, u.last_name FROM bookings b \
             JOIN users u ON u.practice_id = b.practice_id AND u.id = b.doctor_id \
             WHERE b.practice_id = $1 AND b.doctor_id = $2 AND b.id <> $3 \
             AND b.cancelled_at IS NULL AND b.start_at < $5 AND $4 < b.end_at \
             ORDER BY b.start_at LIMIT 1",
        )
        .bind(self.practice_id)
        .bind(&f.doctor_id)
        .bind(&booking.id)
        .bind(f.start_at)
        .bind(f.end_at)
        .fetch_optional(self.read())
        .await?;
        let Some((start, end, title, first, last)) = row else {
            return Ok("The doctor is already booked at that time".into());
        };
        let name = match title {
            Some(title) => format!("{title} {first} {last}"),
            None => format!("{first} {last}"),
        };
        let at = |ms: i64| Utc.timestamp_millis_opt(ms).single().unwrap_or_default();
        Ok(format!(
            "{name} is already booked {}–{} on {} (UTC)",
            at(start).format("%H:%M"),
            at(end).format("%H:%M"),
            at(start).format("%Y-%m-%d")
        ))
    }
}

fn is_overlap(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db)
        if db.constraint() == Some(NO_OVERLAP) || db.message().contains(NO_OVERLAP))
}

/// Binds `$1` practice and `$2..$13` the columns of BOOKING_COLUMNS.
fn bind_booking<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
    practice_id: &str,
    b: &Booking,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
    let f = &b.fields;
    query
        .bind(practice_id.to_string())
        .bind(b.id.clone())
        .bind(f.patient_id.clone())
        .bind(f.doctor_id.clone())
        .bind(f.location_id.clone())
        .bind(f.appointment_type_id.clone())
        .bind(f.start_at)
        .bind(f.end_at)
        .bind(f.comments.clone())
        .bind(b.cancelled_at)
        .bind(b.cancellation_reason.clone())
        .bind(b.created_at)
        .bind(b.updated_at)
}
