//! Rate limits: each token may make `PRACTICE_RATE_LIMIT` requests a minute (240 by default),
//! measured by a GCRA bucket per token (governor), so that one token's burst never slows
//! another. Requests without a token (signIn) are counted per client address. Every answer
//! says where the caller stands ([`RateStatus`]; HTTP sends it as the IETF `RateLimit` headers).
//!
//! The buckets live in each instance's memory: behind a load balancer that spreads a token's
//! requests over N instances, the token gets up to N times the limit.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

type Limiter =
    RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock, StateInformationMiddleware>;

/// Most buckets kept at once: past this, idle ones are forgotten at once, and if every one is
/// busy, new callers are refused until some are (a flood of fresh addresses cannot grow the
/// map without bound).
const MAX_BUCKETS: usize = 100_000;

/// The buckets of one instance, per token or per client address.
pub struct RateLimits {
    limiter: Limiter,
    per_minute: u32,
    /// What the buckets count by, as the `RateLimit-Policy` header names it.
    policy: &'static str,
}

/// Where a caller stands after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateStatus {
    /// What the limit counts by: "token", "address".
    pub policy: &'static str,
    /// Requests a minute.
    pub limit: u32,
    /// How many more requests may follow at once.
    pub remaining: u32,
    /// Seconds until the bucket is full again.
    pub reset: u64,
    /// When refused: the seconds to wait before trying again.
    pub retry_after: Option<u64>,
}

impl RateLimits {
    /// `per_minute` requests a minute per key (at least 1), counted by `policy`.
    pub fn new(per_minute: u32, policy: &'static str) -> RateLimits {
        let per_minute = per_minute.max(1);
        let quota = Quota::per_minute(NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN));
        RateLimits {
            limiter: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            per_minute,
            policy,
        }
    }

    /// Counts a request of `key` (a token id, or an address).
    pub fn check(&self, key: &str) -> RateStatus {
        let limit = self.per_minute;
        let policy = self.policy;
        if self.limiter.len() >= MAX_BUCKETS {
            self.limiter.retain_recent();
            if self.limiter.len() >= MAX_BUCKETS {
                return RateStatus {
                    policy,
                    limit,
                    remaining: 0,
                    reset: 60,
                    retry_after: Some(60),
                };
            }
        }
        match self.limiter.check_key(&key.to_string()) {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                // One request refills every 60/limit s.
                let used = u64::from(limit.saturating_sub(remaining));
                RateStatus {
                    policy,
                    limit,
                    remaining,
                    reset: (used * 60).div_ceil(u64::from(limit)),
                    retry_after: None,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                RateStatus {
                    policy,
                    limit,
                    remaining: 0,
                    reset: seconds,
                    retry_after: Some(seconds),
                }
            }
        }
    }

    /// Requests a minute per key.
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Forgets buckets that are full again; call now and then to bound memory.
    pub fn forget_idle(&self) {
        self.limiter.retain_recent();
    }

    /// How often [`RateLimits::forget_idle`] should run.
    pub const FORGET_EVERY: Duration = Duration::from_secs(60);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_key_on_its_own() {
        let limits = RateLimits::new(3, "token");
        for remaining in [2, 1, 0] {
            let status = limits.check("a");
            assert_eq!((status.remaining, status.retry_after), (remaining, None));
        }
        let Some(retry_after) = limits.check("a").retry_after else {
            panic!("the fourth request must be refused");
        };
        assert!((1..=20).contains(&retry_after), "{retry_after}");
        assert_eq!(limits.check("b").remaining, 2);
    }
}
