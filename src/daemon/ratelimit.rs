//! What one caller may take from the daemon, refused with 429 `TooManyRequests` and a
//! `Retry-After` header before any work is done for it:
//!
//! * requests per principal: a token bucket per key id or OIDC subject (governor's keyed
//!   limiter, GCRA);
//! * failed authentications per client address: a token bucket per address (per /64 for
//!   IPv6) that only failures draw from, and which, once empty, refuses the address's
//!   requests before their credentials are verified (`auth.rs` lets API keys of a known id
//!   through) — a flood of bad tokens costs neither hashing nor JWT verification, and a
//!   client whose requests authenticate draws nothing from it;
//! * concurrent execs, exec streams, log follows and file transfers per tenant: a count per
//!   tenant and kind, held by a [`Slot`] for as long as the request (or its stream) lives.
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::daemon::config::{ConcurrencyConfig, RateLimitConfig};
use crate::daemon::error::ServiceError;
use crate::shared::envelope::ErrorCode;

/// Principals or addresses tracked before idle ones are forgotten (a full bucket is as good
/// as none).
const FORGET_ABOVE: usize = 10_000;

/// How long a caller refused for concurrency is told to wait: streams end at their own pace,
/// so this is a polite poll interval, not a promise.
const CONCURRENCY_RETRY_SECONDS: u64 = 5;

/// The limits of one daemon.
pub struct RateLimits {
    principals: Option<DefaultKeyedRateLimiter<String>>,
    addresses: Option<AddressBuckets>,
    concurrency: Concurrency,
    clock: DefaultClock,
}

/// A 429 with `Retry-After: seconds` (at least 1).
pub fn too_many(message: String, seconds: u64) -> Response {
    let mut response = ServiceError::new(ErrorCode::TooManyRequests, message).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

/// Whole seconds to wait, rounded up.
fn ceil_seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

impl RateLimits {
    /// Limits as configured; a rate of 0 turns that limit off.
    pub fn new(config: &RateLimitConfig) -> RateLimits {
        let principals = NonZeroU32::new(config.per_second).map(|rate| {
            let burst = NonZeroU32::new(config.burst.max(config.per_second)).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        let addresses = (config.per_address_per_second > 0).then(|| AddressBuckets {
            rate: f64::from(config.per_address_per_second),
            burst: f64::from(config.per_address_burst.max(config.per_address_per_second)),
            buckets: Mutex::new(HashMap::new()),
        });
        RateLimits {
            principals,
            addresses,
            concurrency: Concurrency::new(config.per_tenant),
            clock: DefaultClock::default(),
        }
    }

    /// Takes one request from `subject`'s bucket; the 429 to answer when it is empty.
    pub fn refusal(&self, subject: &str) -> Option<Response> {
        let limiter = self.principals.as_ref()?;
        if limiter.len() > FORGET_ABOVE {
            limiter.retain_recent();
        }
        let key = subject.to_string();
        match limiter.check_key(&key) {
            Ok(()) => None,
            Err(not_until) => {
                let seconds = ceil_seconds(not_until.wait_time_from(self.clock.now()));
                Some(too_many(
                    format!(
                        "{subject} is over its request rate: retry in {seconds} s (Retry-After)"
                    ),
                    seconds,
                ))
            }
        }
    }

    /// Before authentication: the 429 for an address whose failed authentications used up
    /// its bucket (nothing is taken from it here).
    pub fn address_refusal(&self, address: IpAddr) -> Option<Response> {
        let wait = self.addresses.as_ref()?.wait(address)?;
        let seconds = ceil_seconds(wait);
        Some(too_many(
            format!(
                "too many failed authentications from this address: retry in {seconds} s \
                 (Retry-After) with valid credentials"
            ),
            seconds,
        ))
    }

    /// After a failed authentication: takes one from the address's bucket.
    pub fn charge_address(&self, address: IpAddr) {
        if let Some(addresses) = &self.addresses {
            addresses.charge(address);
        }
    }

    /// A slot for one more request of `kind` by `tenant`, or 429 when it has its cap in
    /// flight. The slot is given back when dropped.
    pub fn slot(&self, kind: Kind, tenant: &str) -> Result<Slot, ServiceError> {
        self.concurrency.acquire(kind, tenant)
    }
}

/// The key an address is counted under: itself for IPv4, its /64 for IPv6 (one host holds a
/// whole /64 as easily as one address).
fn address_key(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}

/// A token bucket per address that only failures draw from.
struct AddressBuckets {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl AddressBuckets {
    fn refill(&self, bucket: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.burst);
        bucket.updated = now;
    }

    /// How long until the address may try again, when its bucket is empty.
    fn wait(&self, address: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.get_mut(&address_key(address))?;
        self.refill(bucket, now);
        (bucket.tokens < 1.0).then(|| Duration::from_secs_f64((1.0 - bucket.tokens) / self.rate))
    }

    fn charge(&self, address: IpAddr) {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > FORGET_ABOVE {
            let burst = self.burst;
            let rate = self.rate;
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.updated).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(address_key(address)).or_insert(Bucket {
            tokens: self.burst,
            updated: now,
        });
        self.refill(bucket, now);
        bucket.tokens = (bucket.tokens - 1.0).max(0.0);
    }
}

/// What a tenant's concurrent requests are counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `POST /exec`, `GET /files/stat`.
    Exec,
    /// `GET /exec/stream`.
    ExecStream,
    /// `GET /logs?follow=true`.
    LogFollow,
    /// `PUT` / `GET /files`.
    FileTransfer,
}

impl Kind {
    fn cap(self, config: &ConcurrencyConfig) -> u32 {
        match self {
            Kind::Exec => config.execs,
            Kind::ExecStream => config.exec_streams,
            Kind::LogFollow => config.log_follows,
            Kind::FileTransfer => config.file_transfers,
        }
    }

    /// What it is called in messages, plural.
    fn plural(self) -> &'static str {
        match self {
            Kind::Exec => "execs",
            Kind::ExecStream => "exec streams",
            Kind::LogFollow => "log follows",
            Kind::FileTransfer => "file transfers",
        }
    }

    /// Its key in `[rateLimit.perTenant]`.
    fn setting(self) -> &'static str {
        match self {
            Kind::Exec => "execs",
            Kind::ExecStream => "execStreams",
            Kind::LogFollow => "logFollows",
            Kind::FileTransfer => "fileTransfers",
        }
    }
}

type Counts = Arc<Mutex<HashMap<(Kind, String), u32>>>;

/// Requests in flight per tenant and kind.
struct Concurrency {
    config: ConcurrencyConfig,
    counts: Counts,
}

impl Concurrency {
    fn new(config: ConcurrencyConfig) -> Concurrency {
        Concurrency {
            config,
            counts: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn acquire(&self, kind: Kind, tenant: &str) -> Result<Slot, ServiceError> {
        let cap = kind.cap(&self.config);
        let key = (kind, tenant.to_string());
        if cap > 0 {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            let count = counts.entry(key.clone()).or_insert(0);
            if *count >= cap {
                return Err(ServiceError::new(
                    ErrorCode::TooManyRequests,
                    format!(
                        "{tenant} has {cap} {} in flight, its most \
                         ([rateLimit.perTenant] {}): retry when one ends",
                        kind.plural(),
                        kind.setting()
                    ),
                )
                .retry_after(CONCURRENCY_RETRY_SECONDS));
            }
            *count += 1;
        }
        Ok(Slot {
            counts: (cap > 0).then(|| self.counts.clone()),
            key,
        })
    }
}

/// One request of a tenant in flight; dropping it ends it.
pub struct Slot {
    counts: Option<Counts>,
    key: (Kind, String),
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(counts) = &self.counts else {
            return;
        };
        let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = counts.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(per_second: u32, burst: u32) -> RateLimitConfig {
        RateLimitConfig {
            per_second,
            burst,
            ..RateLimitConfig::default()
        }
    }

    #[test]
    fn a_burst_then_429_with_retry_after_per_principal() {
        let limits = RateLimits::new(&config(1, 3));
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
            per_address_per_second: 0,
            ..RateLimitConfig::default()
        });
        let address: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..10_000 {
            assert!(limits.refusal("a").is_none());
            limits.charge_address(address);
        }
        assert!(limits.address_refusal(address).is_none());
    }

    #[test]
    fn only_failures_empty_an_address_and_v6_counts_per_64() {
        let limits = RateLimits::new(&RateLimitConfig {
            per_address_per_second: 1,
            per_address_burst: 3,
            ..RateLimitConfig::default()
        });
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8::ffff:1".parse().unwrap();
        let other: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        assert!(limits.address_refusal(a).is_none());
        for _ in 0..3 {
            limits.charge_address(a);
        }
        let refused = limits.address_refusal(same_64).unwrap();
        assert_eq!(refused.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
        assert!(refused.headers().contains_key(header::RETRY_AFTER));
        assert!(limits.address_refusal(other).is_none());
    }

    #[test]
    fn a_tenant_over_its_cap_waits_for_a_slot_others_do_not() {
        let limits = RateLimits::new(&RateLimitConfig {
            per_tenant: ConcurrencyConfig {
                exec_streams: 2,
                ..ConcurrencyConfig::default()
            },
            ..RateLimitConfig::default()
        });
        let first = limits.slot(Kind::ExecStream, "acme").unwrap();
        let _second = limits.slot(Kind::ExecStream, "acme").unwrap();
        let refused = limits.slot(Kind::ExecStream, "acme").err().unwrap();
        assert_eq!(refused.code, ErrorCode::TooManyRequests);
        assert!(
            refused.message.contains("execStreams"),
            "{}",
            refused.message
        );
        assert!(limits.slot(Kind::ExecStream, "globex").is_ok());
        assert!(limits.slot(Kind::LogFollow, "acme").is_ok());
        drop(first);
        assert!(limits.slot(Kind::ExecStream, "acme").is_ok());
    }
}
