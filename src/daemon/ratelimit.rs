//! Per-principal request rates: a token bucket per key id or OIDC subject (governor's keyed
//! limiter, GCRA). Over the rate a request is refused with 429 `TooManyRequests` and a
//! `Retry-After` header, before any work is done for it.
use std::num::NonZeroU32;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::daemon::config::RateLimitConfig;
use crate::daemon::error::ServiceError;
use crate::shared::envelope::ErrorCode;

/// Principals tracked before idle ones are forgotten (a full bucket is as good as none).
const FORGET_ABOVE: usize = 10_000;

/// The limits of one daemon.
pub struct RateLimits {
    limiter: Option<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
}

impl RateLimits {
    /// Limits as configured; `perSecond = 0` turns them off.
    pub fn new(config: &RateLimitConfig) -> RateLimits {
        let limiter = NonZeroU32::new(config.per_second).map(|rate| {
            let burst = NonZeroU32::new(config.burst.max(config.per_second)).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        RateLimits {
            limiter,
            clock: DefaultClock::default(),
        }
    }

    /// Takes one request from `subject`'s bucket; the 429 to answer when it is empty.
    pub fn refusal(&self, subject: &str) -> Option<Response> {
        let limiter = self.limiter.as_ref()?;
        if limiter.len() > FORGET_ABOVE {
            limiter.retain_recent();
        }
        let key = subject.to_string();
        match limiter.check_key(&key) {
            Ok(()) => None,
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let mut response = ServiceError::new(
                    ErrorCode::TooManyRequests,
                    format!(
                        "{subject} is over its request rate: retry in {seconds} s (Retry-After)"
                    ),
                )
                .into_response();
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
                Some(response)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_429_with_retry_after_per_principal() {
        let limits = RateLimits::new(&RateLimitConfig {
            per_second: 1,
            burst: 3,
        });
        for _ in 0..3 {
            assert!(limits.refusal("a").is_none());
        }
        let refused = limits.refusal("a").unwrap();
        assert_eq!(refused.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
        let retry = refused.headers()[header::RETRY_AFTER].to_str().unwrap();
        assert!(retry.parse::<u64>().unwrap() >= 1, "{retry}");
        // Another principal has its own bucket.
        assert!(limits.refusal("b").is_none());
    }

    #[test]
    fn zero_turns_it_off() {
        let limits = RateLimits::new(&RateLimitConfig {
            per_second: 0,
            burst: 0,
        });
        for _ in 0..10_000 {
            assert!(limits.refusal("a").is_none());
        }
    }
}
