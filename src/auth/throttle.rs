//! Sign-in throttling against password guessing: after a few failures for one email, or many
//! from one client address, sign-in is refused for a delay that doubles with each further
//! failure (up to 15 minutes); a success clears the email's count. Unknown emails are counted
//! like known ones, so the throttle tells nothing about which emails exist.
//!
//! Kept in each instance's memory, like the rate limits.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures for one email before the delay starts.
pub const EMAIL_FREE_FAILURES: u32 = 5;
/// Failures from one address before the delay starts.
pub const ADDRESS_FREE_FAILURES: u32 = 20;
/// The first delay; each further failure doubles it.
const FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest delay.
const MAX_DELAY: Duration = Duration::from_secs(15 * 60);
/// A count is forgotten after this long without failures.
const FORGET_AFTER: Duration = Duration::from_secs(60 * 60);

#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    /// When the next attempt is allowed, given `free` failures before any delay.
    fn allowed_at(&self, free: u32) -> Instant {
        if self.count < free {
            return self.last;
        }
        let doublings = (self.count - free).min(20);
        let delay = FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY);
        self.last + delay
    }
}

/// The failure counts of one instance.
#[derive(Default)]
pub struct SignInThrottle {
    emails: Mutex<HashMap<String, Failures>>,
    addresses: Mutex<HashMap<IpAddr, Failures>>,
}

impl SignInThrottle {
    /// How long the caller must wait before trying `email` from `address`; None if it may now.
    pub fn wait(&self, email: &str, address: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let email = email.trim().to_lowercase();
        let by_email = lock(&self.emails)
            .get(&email)
            .map(|f| f.allowed_at(EMAIL_FREE_FAILURES));
        let by_address = address.and_then(|a| {
            lock(&self.addresses)
                .get(&a)
                .map(|f| f.allowed_at(ADDRESS_FREE_FAILURES))
        });
        let allowed_at = by_email.into_iter().chain(by_address).max()?;
        (allowed_at > now).then(|| allowed_at - now)
    }

    /// Records a failed attempt.
    pub fn failed(&self, email: &str, address: Option<IpAddr>, now: Instant) {
        let bump = |f: &mut Failures| {
            f.count = f.count.saturating_add(1);
            f.last = now;
        };
        let fresh = Failures {
            count: 0,
            last: now,
        };
        let mut emails = lock(&self.emails);
        emails.retain(|_, f| now.duration_since(f.last) < FORGET_AFTER);
        bump(emails.entry(email.trim().to_lowercase()).or_insert(fresh));
        drop(emails);
        if let Some(address) = address {
            let mut addresses = lock(&self.addresses);
            addresses.retain(|_, f| now.duration_since(f.last) < FORGET_AFTER);
            bump(addresses.entry(address).or_insert(fresh));
        }
    }

    /// Records a success: the email's failures are forgiven (the address's are not).
    pub fn succeeded(&self, email: &str) {
        lock(&self.emails).remove(&email.trim().to_lowercase());
    }
}

/// A poisoned lock only means another request panicked mid-update of a counter: the counts
/// are still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_after_the_free_failures_and_success_forgives() {
        let throttle = SignInThrottle::default();
        let t0 = Instant::now();
        for _ in 0..EMAIL_FREE_FAILURES - 1 {
            throttle.failed("Ada@x.org", None, t0);
        }
        assert_eq!(throttle.wait("ada@x.org", None, t0), None);
        throttle.failed("ada@x.org", None, t0);
        assert_eq!(
            throttle.wait("ada@x.org", None, t0),
            Some(Duration::from_secs(1))
        );
        throttle.failed("ada@x.org", None, t0);
        throttle.failed("ada@x.org", None, t0);
        assert_eq!(
            throttle.wait("ada@x.org", None, t0),
            Some(Duration::from_secs(4))
        );
        assert_eq!(throttle.wait("other@x.org", None, t0), None);
        throttle.succeeded("ADA@x.org");
        assert_eq!(throttle.wait("ada@x.org", None, t0), None);
    }

    #[test]
    fn many_emails_from_one_address_are_throttled_too() {
        let throttle = SignInThrottle::default();
        let t0 = Instant::now();
        let address: IpAddr = [10, 0, 0, 1].into();
        for i in 0..ADDRESS_FREE_FAILURES {
            throttle.failed(&format!("user{i}@x.org"), Some(address), t0);
        }
        assert!(throttle.wait("new@x.org", Some(address), t0).is_some());
        assert_eq!(
            throttle.wait("new@x.org", Some([10, 0, 0, 2].into()), t0),
            None
        );
    }

    #[test]
    fn delays_stop_at_fifteen_minutes() {
        let throttle = SignInThrottle::default();
        let t0 = Instant::now();
        for _ in 0..100 {
            throttle.failed("a@x.org", None, t0);
        }
        assert_eq!(throttle.wait("a@x.org", None, t0), Some(MAX_DELAY));
    }
}
