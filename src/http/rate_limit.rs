//! Rate limits: each token may make `PRACTICE_RATE_LIMIT` requests a minute (240 by default),
//! measured by a GCRA bucket per token (governor), so that one token's burst never slows
//! another. Requests without a token (signIn) are counted per client address. Every response
//! says where the caller stands, in the IETF `RateLimit` / `RateLimit-Policy` headers and the
//! widespread `X-RateLimit-*` triple.
//!
//! The buckets live in each instance's memory: behind a load balancer that spreads a token's
//! requests over N instances, the token gets up to N times the limit.

use std::num::NonZeroU32;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

type Limiter =
    RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock, StateInformationMiddleware>;

/// The per-token buckets of one instance.
pub struct RateLimits {
    limiter: Limiter,
    per_minute: u32,
}

/// Where a caller stands after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Let through; `remaining` more requests may follow at once.
    Allowed { remaining: u32 },
    /// Refused; the caller may try again after this many seconds.
    Limited { retry_after: u64 },
}

impl RateLimits {
    /// `per_minute` requests a minute per key (at least 1).
    pub fn new(per_minute: u32) -> RateLimits {
        let per_minute = per_minute.max(1);
        let quota = Quota::per_minute(NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN));
        RateLimits {
            limiter: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            per_minute,
        }
    }

    /// Counts a request of `key` (a token id, or `ip:ADDRESS`).
    pub fn check(&self, key: &str) -> Decision {
        match self.limiter.check_key(&key.to_string()) {
            Ok(state) => Decision::Allowed {
                remaining: state.remaining_burst_capacity(),
            },
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Decision::Limited {
                    retry_after: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
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

    /// The headers that tell a caller where it stands.
    pub fn headers(&self, decision: Decision, headers: &mut HeaderMap) {
        let limit = self.per_minute;
        let (remaining, reset) = match decision {
            // Seconds until the bucket is full again: one request refills every 60/limit s.
            Decision::Allowed { remaining } => {
                let used = u64::from(limit.saturating_sub(remaining));
                (remaining, (used * 60).div_ceil(u64::from(limit)))
            }
            Decision::Limited { retry_after } => (0, retry_after),
        };
        let mut set = |name: &'static str, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        };
        set("ratelimit-policy", format!("\"token\";q={limit};w=60"));
        set("ratelimit", format!("\"token\";r={remaining};t={reset}"));
        set("x-ratelimit-limit", limit.to_string());
        set("x-ratelimit-remaining", remaining.to_string());
        set("x-ratelimit-reset", reset.to_string());
        if let Decision::Limited { retry_after } = decision {
            set("retry-after", retry_after.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_key_on_its_own() {
        let limits = RateLimits::new(3);
        for remaining in [2, 1, 0] {
            assert_eq!(limits.check("a"), Decision::Allowed { remaining });
        }
        let Decision::Limited { retry_after } = limits.check("a") else {
            panic!("the fourth request must be refused");
        };
        assert!((1..=20).contains(&retry_after), "{retry_after}");
        assert_eq!(limits.check("b"), Decision::Allowed { remaining: 2 });
    }
}
