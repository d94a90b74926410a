//! Wire types of the usage (showback) route: query, grouping keys and rows.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::shared::models::formats::{DnsLabel, Timestamp};
use crate::shared::models::sandbox::require_field;
use crate::shared::timestamp::parse_timestamp;

/// A dimension usage rows can be grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupKey {
    /// Tenant name.
    Tenant,
    /// Namespace.
    Namespace,
    /// Backend (e.g. `kata-qemu-longhorn`).
    Backend,
    /// Sandbox state (e.g. running, paused).
    State,
}

impl GroupKey {
    /// Every key, in documentation order.
    pub const ALL: [GroupKey; 4] = [
        GroupKey::Tenant,
        GroupKey::Namespace,
        GroupKey::Backend,
        GroupKey::State,
    ];

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupKey::Tenant => "tenant",
            GroupKey::Namespace => "namespace",
            GroupKey::Backend => "backend",
            GroupKey::State => "state",
        }
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a comma-separated `group_by` list (`tenant,backend`); an empty string means no
/// grouping. Unknown, empty or repeated entries are a 400 message.
pub fn parse_group_by(input: &str) -> Result<Vec<GroupKey>, String> {
    if input.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut keys = Vec::new();
    for part in input.split(',') {
        let part = part.trim();
        let key = GroupKey::ALL
            .into_iter()
            .find(|key| key.as_str() == part)
            .ok_or_else(|| {
                format!(
                    "unknown group_by key `{part}` (allowed: tenant, namespace, backend, state)"
                )
            })?;
        if keys.contains(&key) {
            return Err(format!("group_by key `{part}` is given twice"));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// Query of `GET /api/v1/usage`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, utoipa::IntoParams,
)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// Start (required): unix seconds or RFC 3339 with an offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(example = "2026-11-01T00:00:00Z", value_type = Timestamp, required = true)]
    pub from: Option<String>,
    /// End (required, not before `from`): unix seconds or RFC 3339 with an offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(example = "1795600800", value_type = Timestamp, required = true)]
    pub to: Option<String>,
    /// Tenant; a tenant-scoped caller may name only its own, operator and admin may omit it for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(value_type = Option<DnsLabel>)]
    pub tenant: Option<String>,
    /// Comma-separated subset of `tenant`, `namespace`, `backend`, `state`, each at most once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(
        example = "tenant,backend",
        pattern = "^((tenant|namespace|backend|state)(,(tenant|namespace|backend|state))*)?$"
    )]
    pub group_by: Option<String>,
}

impl UsageQuery {
    /// The required `from` and `to` as unix seconds, or the 400 message (missing, unparseable,
    /// or `from` after `to`).
    pub fn range(&self) -> Result<(i64, i64), String> {
        let from = require_field("from", self.from.as_deref())?;
        let to = require_field("to", self.to.as_deref())?;
        let from = parse_timestamp(from).map_err(|e| format!("invalid `from`: {e}"))?;
        let to = parse_timestamp(to).map_err(|e| format!("invalid `to`: {e}"))?;
        if from > to {
            return Err("`from` must not be after `to`".to_string());
        }
        Ok((from, to))
    }

    /// The grouping keys, or the 400 message.
    pub fn group_keys(&self) -> Result<Vec<GroupKey>, String> {
        self.group_by
            .as_deref()
            .map_or(Ok(Vec::new()), parse_group_by)
    }
}

/// Consumption over the requested window for one group (or for everything when ungrouped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UsageRow {
    /// Sandbox-seconds of existence.
    pub sandbox_seconds: f64,
    /// vCPU-seconds reserved.
    pub vcpu_seconds: f64,
    /// Memory GiB-seconds reserved.
    pub memory_gib_seconds: f64,
    /// Egress bytes.
    pub egress_bytes: f64,
    /// Disk GiB-seconds reserved.
    pub disk_gib_seconds: f64,
    /// Snapshot GiB-seconds stored.
    pub snapshot_gib_seconds: f64,
    /// Tenant, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Namespace, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Backend, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// State, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// Data of `GET /api/v1/usage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UsageResponse {
    /// One row per group.
    pub rows: Vec<UsageRow>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_group_by_lists() {
        assert_eq!(parse_group_by("tenant"), Ok(vec![GroupKey::Tenant]));
        assert_eq!(
            parse_group_by("state,backend, namespace"),
            Ok(vec![
                GroupKey::State,
                GroupKey::Backend,
                GroupKey::Namespace
            ])
        );
        assert_eq!(parse_group_by(""), Ok(vec![]));
    }

    #[test]
    fn rejects_bad_group_by() {
        let err = parse_group_by("tenant,pod").expect_err("unknown");
        assert!(err.contains("`pod`") && err.contains("allowed"), "{err}");
        assert!(parse_group_by("tenant,,state").is_err());
        assert!(parse_group_by("Tenant").is_err());
        let err = parse_group_by("tenant,tenant").expect_err("duplicate");
        assert!(err.contains("twice"), "{err}");
    }

    #[test]
    fn query_range() {
        let query = UsageQuery {
            from: Some("1700000000".to_string()),
            to: Some("2026-11-25T10:00:00Z".to_string()),
            ..UsageQuery::default()
        };
        assert_eq!(query.range(), Ok((1_700_000_000, 1_795_600_800)));
        assert_eq!(query.group_keys(), Ok(vec![]));

        let missing = UsageQuery::default();
        assert!(missing.range().expect_err("missing").contains("`from`"));
        let reversed = UsageQuery {
            from: Some("200".to_string()),
            to: Some("100".to_string()),
            ..UsageQuery::default()
        };
        assert!(reversed.range().is_err());
        let bad = UsageQuery {
            from: Some("2026-11-25T10:00:00".to_string()),
            to: Some("100".to_string()),
            ..UsageQuery::default()
        };
        assert!(
            bad.range()
                .expect_err("no offset")
                .contains("invalid `from`")
        );
    }

    #[test]
    fn row_skips_absent_group_keys() {
        let row = UsageRow {
            sandbox_seconds: 3600.0,
            tenant: Some("acme".to_string()),
            ..UsageRow::default()
        };
        let value = serde_json::to_value(&row).expect("serialize");
        assert_eq!(value["tenant"], "acme");
        assert!(value.get("namespace").is_none());
        let back: UsageRow = serde_json::from_value(value).expect("decodes");
        assert_eq!(back, row);
    }
}
