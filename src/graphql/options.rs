//! Filters shared by the lists: which records beyond the active ones, and date ranges.

use async_graphql::{InputObject, Result};

use super::error::bad_input;
use super::scalars::DateTime;

/// Which records a list includes beyond the active ones, and when they were made or changed.
#[derive(InputObject, Clone, Copy, Debug, Default)]
pub struct QueryOptions {
    /// Include deleted (or, for bookings, cancelled) records. Default false.
    pub include_deleted: Option<bool>,
    /// Include archived patients. Default false.
    pub include_archived: Option<bool>,
    /// Only records created within this range.
    pub created_at: Option<DateRange>,
    /// Only records last changed within this range.
    pub updated_at: Option<DateRange>,
}

/// A span of time; both ends are included.
#[derive(InputObject, Clone, Copy, Debug)]
pub struct DateRange {
    /// The first instant of the range.
    pub start: DateTime,
    /// The last instant of the range; not before `start`.
    pub end: DateTime,
}

impl DateRange {
    /// The range as milliseconds, checked.
    pub fn bounds(self) -> Result<(i64, i64)> {
        if self.end < self.start {
            return Err(bad_input(format!(
                "a date range must not end before it starts: start {} is after end {}",
                self.start.0.to_rfc3339(),
                self.end.0.to_rfc3339()
            )));
        }
        Ok((self.start.ms(), self.end.ms()))
    }
}
