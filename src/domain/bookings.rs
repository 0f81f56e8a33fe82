//! The rules of a booking's own times.

use super::Invalid;

/// Longest booking: a day.
pub const MAX_BOOKING_MS: i64 = 24 * 3600 * 1000;

/// A booking ends after it starts, at most a day later (times in milliseconds).
pub fn check_booking_times(start: i64, end: i64) -> Result<(), Invalid> {
    if end <= start {
        return Err(Invalid::BookingEndsBeforeStart);
    }
    if end - start > MAX_BOOKING_MS {
        return Err(Invalid::BookingTooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_booking_ends_after_it_starts_within_a_day() {
        assert_eq!(check_booking_times(0, 1), Ok(()));
        assert_eq!(check_booking_times(0, MAX_BOOKING_MS), Ok(()));
        assert_eq!(
            check_booking_times(5, 5),
            Err(Invalid::BookingEndsBeforeStart)
        );
        assert_eq!(
            check_booking_times(0, MAX_BOOKING_MS + 1),
            Err(Invalid::BookingTooLong)
        );
    }
}
