//! The `Date` and `DateTime` scalars of the contract.

use async_graphql::{InputValueError, InputValueResult, Scalar, ScalarType, Value};
use chrono::{NaiveDate, SecondsFormat, TimeZone, Utc};

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
        chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| DateTime(t.with_timezone(&Utc)))
            .map_err(|_| {
                InputValueError::custom(format!(
                    "{text:?} is not an RFC 3339 timestamp with an offset, such as \
                     2026-04-12T09:15:00Z or 2026-04-12T10:15:00+01:00"
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
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map(Date)
            .map_err(|_| {
                InputValueError::custom(format!("{text:?} is not a date of the form YYYY-MM-DD"))
            })
    }

    fn to_value(&self) -> Value {
        Value::String(self.to_stored())
    }
}
