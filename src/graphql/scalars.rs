//! The `Date` and `DateTime` scalars of the contract.

use async_graphql::{InputValueError, InputValueResult, Scalar, ScalarType, Value};
use chrono::{Datelike, NaiveDate, SecondsFormat, TimeZone, Utc};

/// Whether a day falls in the years 0001 to 9999: the ones RFC 3339 and `YYYY-MM-DD` write,
/// with four digits and no sign. chrono reads `+200000-12-31` and `-5000-01-01` as dates;
/// a client could not read them back.
fn in_written_years(day: NaiveDate) -> bool {
    (1..=9999).contains(&day.year())
}

/// Whether an instant (milliseconds since 1970, UTC) can be written as a `DateTime`: its UTC
/// day is in the years [`in_written_years`] allows. For instants the server works out, such as
/// a booking's end from its start and its type's duration.
pub fn writable(ms: i64) -> bool {
    Utc.timestamp_millis_opt(ms)
        .single()
        .is_some_and(|t| in_written_years(t.date_naive()))
}

/// A timestamp as given, in UTC, if it is an RFC 3339 one whose UTC day is in the years
/// [`in_written_years`] allows.
fn timestamp(text: &str) -> Option<chrono::DateTime<Utc>> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
        .filter(|t| in_written_years(t.date_naive()))
}

/// A text that is not a date or a timestamp, as an error shows it: quoted when it is as short
/// as one could be, its length otherwise (it is not repeated back).
fn shown(text: &str) -> String {
    if text.len() <= 40 {
        format!("{text:?}")
    } else {
        format!("A text of {} characters", text.chars().count())
    }
}

/// A calendar date `YYYY-MM-DD`, if it is one, written so (four digits of year, no sign), in
/// the years [`in_written_years`] allows.
fn calendar_date(text: &str) -> Option<NaiveDate> {
    let written = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    written
        .then(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
        .flatten()
        .filter(|day| in_written_years(*day))
}

/// An RFC 3339 timestamp. Returned in UTC with milliseconds (`2026-04-12T09:15:00.000Z`);
/// accepted with any offset (`2026-04-12T10:15:00+01:00`), but an offset is required.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DateTime(pub chrono::DateTime<Utc>);

impl DateTime {
    /// From milliseconds since the Unix epoch.
    pub fn from_ms(ms: i64) -> DateTime {
        DateTime(Utc.timestamp_millis_opt(ms).single().unwrap_or_default())
    }

    /// Milliseconds since the Unix epoch.
    pub fn ms(self) -> i64 {
        self.0.timestamp_millis()
    }

    /// Optional milliseconds, as stored, to an optional timestamp.
    pub fn from_opt(ms: Option<i64>) -> Option<DateTime> {
        ms.map(DateTime::from_ms)
    }
}

#[Scalar(name = "DateTime")]
/// An RFC 3339 timestamp in UTC, e.g. `2026-04-12T09:15:00.000Z`. Input may carry any offset,
/// which is converted to UTC; a timestamp without an offset is refused.
impl ScalarType for DateTime {
    fn parse(value: Value) -> InputValueResult<Self> {
        let Value::String(text) = &value else {
            return Err(InputValueError::expected_type(value));
        };
        timestamp(text).map(DateTime).ok_or_else(|| {
            InputValueError::custom(format!(
                "{} is not an RFC 3339 timestamp with an offset in the years 0001 to 9999, \
                 such as 2026-04-12T09:15:00Z or 2026-04-12T10:15:00+01:00",
                shown(text)
            ))
        })
    }

    fn to_value(&self) -> Value {
        Value::String(self.0.to_rfc3339_opts(SecondsFormat::Millis, true))
    }
}

/// An ISO 8601 calendar date, e.g. `1990-04-12`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date(pub NaiveDate);

impl Date {
    /// The date as stored (`YYYY-MM-DD`), if it is one.
    pub fn from_stored(text: Option<&str>) -> Option<Date> {
        text.and_then(|t| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
            .map(Date)
    }

    /// The stored form, `YYYY-MM-DD`.
    pub fn to_stored(self) -> String {
        self.0.format("%Y-%m-%d").to_string()
    }
}

#[Scalar(name = "Date")]
/// An ISO 8601 calendar date, e.g. `1990-04-12`.
impl ScalarType for Date {
    fn parse(value: Value) -> InputValueResult<Self> {
        let Value::String(text) = &value else {
            return Err(InputValueError::expected_type(value));
        };
        calendar_date(text).map(Date).ok_or_else(|| {
            InputValueError::custom(format!(
                "{} is not a date of the form YYYY-MM-DD in the years 0001 to 9999",
                shown(text)
            ))
        })
    }

    fn to_value(&self) -> Value {
        Value::String(self.to_stored())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_timestamps_are_read_as_they_are_written_back() {
        assert!(calendar_date("1990-04-12").is_some());
        assert!(calendar_date("0001-01-01").is_some());
        assert!(calendar_date("9999-12-31").is_some());
        for not in [
            "0000-12-31",
            "+1000-01-01",
            "-5000-01-01",
            "+200000-12-31",
            "1990-4-12",
            "1990-13-01",
            "19900412",
        ] {
            assert!(calendar_date(not).is_none(), "{not}");
        }
        assert!(timestamp("2026-04-12T10:15:00+01:00").is_some());
        assert!(timestamp("9999-12-31T23:59:59Z").is_some());
        let last = timestamp("9999-12-31T23:59:59.999Z")
            .expect("last")
            .timestamp_millis();
        assert!(writable(last) && !writable(last + 1));
        assert!(writable(
            timestamp("0001-01-01T00:00:00Z")
                .expect("first")
                .timestamp_millis()
        ));
        assert!(!writable(i64::MAX) && !writable(i64::MIN));
        // In UTC, a day of the year 0 or of 10000.
        assert!(timestamp("0001-01-01T00:00:00+23:59").is_none());
        assert!(timestamp("9999-12-31T23:59:59-01:00").is_none());
        assert!(timestamp("2026-04-12T10:15:00").is_none());
    }
}
