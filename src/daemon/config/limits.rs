//! The sections that bound what one caller or one tenant can take from the daemon:
//! `[rateLimit]` (request rates per principal and per client address, concurrent streams per
//! tenant) and `[sandboxDefaults]` (the size of a sandbox that nothing else sizes).
use serde::Deserialize;

use crate::shared::quantity::Quantity;

/// `[rateLimit]` section. Every default is on: they are what one daemon on a small host
/// withstands while a tenant or an anonymous client misbehaves (docs/configuration.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Requests a principal (API key id, OIDC subject) may make per second, sustained; 0
    /// turns the per-principal limit off.
    pub per_second: u32,
    /// Requests it may make at once (the bucket's size; at least `perSecond`).
    pub burst: u32,
    /// Failed authentications (no, malformed, unknown, expired or revoked credentials) a
    /// client address may cause per second, sustained. An address over it is refused before
    /// its credentials are even looked at, so a flood of bad tokens costs no hashing or JWT
    /// verification (an API key whose id is known is still checked, so that clients behind a
    /// proxy keep working). IPv6 addresses count per /64. 0 turns it off.
    pub per_address_per_second: u32,
    /// Failed authentications an address may cause at once.
    pub per_address_burst: u32,
    /// `[rateLimit.perTenant]`: concurrent long or heavy requests per tenant.
    pub per_tenant: ConcurrencyConfig,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            // A backstop against a flood of cheap requests (the costly ones are capped per
            // tenant below), high enough for clients that poll many sandboxes at once:
            // sbx's own tests poll 20 sandboxes at 50 Hz with one key.
            per_second: 1000,
            burst: 2000,
            per_address_per_second: 2,
            per_address_burst: 20,
            per_tenant: ConcurrencyConfig::default(),
        }
    }
}

/// `[rateLimit.perTenant]`: how many of each kind of request one tenant (the tenant owning
/// the namespace; a namespace of no tenant counts on its own) may have in flight at once;
/// one more is answered 429 `TooManyRequests` with `Retry-After`. 0 turns a cap off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ConcurrencyConfig {
    /// `POST /exec` and `GET /files/stat` (each holds up to twice `runtime.execOutputCap` of
    /// output until it answers).
    pub execs: u32,
    /// Streamed execs (`GET /exec/stream`, WebSockets), for as long as each is open.
    pub exec_streams: u32,
    /// Followed logs (`GET /logs?follow=true`), for as long as each is open.
    pub log_follows: u32,
    /// File transfers (`PUT` and `GET /files`), for as long as each streams.
    pub file_transfers: u32,
}

impl Default for ConcurrencyConfig {
    fn default() -> Self {
        ConcurrencyConfig {
            execs: 32,
            exec_streams: 32,
            log_follows: 32,
            file_transfers: 8,
        }
    }
}

/// `[sandboxDefaults]` section: what a sandbox on the sbxd backends gets for each limit that
/// neither its request nor its tenant's `defaultSize` sets (a tenant's quota still asks for
/// explicit sizes). Quantities as in a create's `limits`; `""` turns one off. The number of
/// processes is always capped (4096, the bundle's `pids` limit).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SandboxDefaultsConfig {
    /// CPU (e.g. `2`, `500m`).
    pub cpu: String,
    /// Memory (e.g. `2Gi`).
    pub memory: String,
    /// The writable layer (`ephemeral-storage`, e.g. `10Gi`).
    pub disk: String,
}

impl Default for SandboxDefaultsConfig {
    fn default() -> Self {
        SandboxDefaultsConfig {
            cpu: "2".into(),
            memory: "2Gi".into(),
            disk: "10Gi".into(),
        }
    }
}

/// `[sandboxDefaults]`, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxDefaults {
    /// Millicores.
    pub cpu_millis: Option<u64>,
    /// Bytes.
    pub memory_bytes: Option<u64>,
    /// Bytes of writable layer.
    pub ephemeral_bytes: Option<u64>,
}

impl Default for SandboxDefaults {
    fn default() -> Self {
        SandboxDefaultsConfig::default()
            .parse()
            .expect("the defaults parse")
    }
}

impl SandboxDefaultsConfig {
    /// Parses the section; errors name the key. Each value must be positive (or `""`).
    pub fn parse(&self) -> Result<SandboxDefaults, String> {
        let parse = |key: &str, text: &str, value: fn(&Quantity) -> u128| {
            if text.trim().is_empty() {
                return Ok(None);
            }
            let quantity =
                Quantity::parse(text.trim()).map_err(|e| format!("sandboxDefaults.{key}: {e}"))?;
            match u64::try_from(value(&quantity)) {
                Ok(0) => Err(format!(
                    "sandboxDefaults.{key} must be positive (\"\" turns it off)"
                )),
                Ok(v) => Ok(Some(v)),
                Err(_) => Err(format!("sandboxDefaults.{key} is too large")),
            }
        };
        Ok(SandboxDefaults {
            cpu_millis: parse("cpu", &self.cpu, Quantity::millis)?,
            memory_bytes: parse("memory", &self.memory, Quantity::value_ceil)?,
            ephemeral_bytes: parse("disk", &self.disk, Quantity::value_ceil)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_defaults_parse_and_turn_off() {
        let defaults = SandboxDefaults::default();
        assert_eq!(defaults.cpu_millis, Some(2000));
        assert_eq!(defaults.memory_bytes, Some(2 << 30));
        assert_eq!(defaults.ephemeral_bytes, Some(10 << 30));
        let off = SandboxDefaultsConfig {
            cpu: String::new(),
            memory: "512Mi".into(),
            disk: " ".into(),
        }
        .parse()
        .unwrap();
        assert_eq!(
            (off.cpu_millis, off.memory_bytes, off.ephemeral_bytes),
            (None, Some(512 << 20), None)
        );
        for (bad, says) in [("lots", "sandboxDefaults.cpu"), ("0", "positive")] {
            let err = SandboxDefaultsConfig {
                cpu: bad.into(),
                ..Default::default()
            }
            .parse()
            .unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn rate_limit_sections_read_camel_case() {
        let config: RateLimitConfig =
            toml::from_str("perSecond = 5\nperAddressBurst = 3\n[perTenant]\nexecStreams = 1\n")
                .unwrap();
        assert_eq!(config.per_second, 5);
        assert_eq!(config.burst, 2000);
        assert_eq!(config.per_address_burst, 3);
        assert_eq!(config.per_tenant.exec_streams, 1);
        assert_eq!(config.per_tenant.execs, 32);
    }
}
