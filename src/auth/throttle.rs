//! Sign-in throttling against password guessing: after a few failures for one email, or many
//! from one client address, sign-in is refused for a delay that doubles with each further
//! failure (up to 15 minutes); a success clears the email's count. Unknown emails are counted
//! like known ones, so the throttle tells nothing about which emails exist.
//!
//! The counts live in the database, so that every instance sharing it throttles together, and
//! an attempt is counted before its password is checked, so that guesses sent at once cannot
//! all pass the check before any of them has failed.

use std::net::IpAddr;
use std::time::Duration;

use crate::store::sign_ins::Subject;
use crate::store::{Store, StoreResult};

/// Failures for one email before the delay starts.
pub const EMAIL_FREE_FAILURES: i64 = 5;
/// Failures from one address before the delay starts.
pub const ADDRESS_FREE_FAILURES: i64 = 20;
/// The first delay, in milliseconds; each further failure doubles it.
const FIRST_DELAY_MS: i64 = 1000;
/// The longest delay, in milliseconds: 15 minutes.
const MAX_DELAY_MS: i64 = 15 * 60 * 1000;
/// A count is forgotten after this long without failures.
pub const FORGET_AFTER: Duration = Duration::from_secs(60 * 60);

/// How long a subject waits after its `n`-th failure beyond the free ones (from 0).
fn delay(n: i64) -> i64 {
    FIRST_DELAY_MS
        .saturating_mul(1 << n.clamp(0, 20))
        .min(MAX_DELAY_MS)
}

/// A sign-in attempt, counted as a failure until it succeeds.
#[derive(Clone, Debug)]
pub struct Attempt {
    email: String,
    address: Option<String>,
}

/// Counts an attempt to sign in as `email` from `address` (as the limits group it), or says
/// how long to wait before trying again.
pub async fn admit(
    store: &Store,
    email: &str,
    address: Option<IpAddr>,
    now_ms: i64,
) -> StoreResult<Result<Attempt, Duration>> {
    let attempt = Attempt {
        email: format!("email:{}", email.trim().to_lowercase()),
        address: address.map(|a| format!("address:{a}")),
    };
    let mut subjects = vec![Subject {
        key: &attempt.email,
        free_failures: EMAIL_FREE_FAILURES,
    }];
    if let Some(address) = &attempt.address {
        subjects.push(Subject {
            key: address,
            free_failures: ADDRESS_FREE_FAILURES,
        });
    }
    Ok(match store.count_sign_in(&subjects, now_ms, delay).await? {
        Ok(()) => Ok(attempt),
        Err(until) => {
            let wait = u64::try_from(until.saturating_sub(now_ms)).unwrap_or(0);
            Err(Duration::from_millis(wait.max(1)))
        }
    })
}

/// The attempt succeeded: the email's failures are forgiven, and the attempt is taken back
/// from the address's count.
pub async fn succeeded(store: &Store, attempt: &Attempt) -> StoreResult<()> {
    let address = attempt.address.as_deref().map(|key| Subject {
        key,
        free_failures: ADDRESS_FREE_FAILURES,
    });
    store.sign_in_succeeded(&attempt.email, address).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_fifteen_minutes() {
        assert_eq!(delay(0), 1000);
        assert_eq!(delay(2), 4000);
        assert_eq!(delay(9), 512_000);
        assert_eq!(delay(10), MAX_DELAY_MS);
        assert_eq!(delay(10_000), MAX_DELAY_MS);
    }
}
