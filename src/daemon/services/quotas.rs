//! The quota check of a tenant (spec, Tenants, rule 4): what one more sandbox or snapshot
//! would take against what the tenant's sandboxes and snapshots hold now. Run by
//! [`super::tenants::TenantService::admit`] under the tenant's lock.
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::Reservation;
use crate::shared::envelope::ErrorCode;
use crate::shared::models::tenant::TenantQuotas;
use crate::shared::quantity::{Quantity, format_bytes_binary, format_cpu_millis};

/// A sandbox-to-be, as quotas see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ask {
    /// CPU limit, millicores.
    pub cpu_millis: Option<u64>,
    /// Memory limit, bytes.
    pub memory_bytes: Option<u64>,
    /// Disk limit, bytes.
    pub disk_bytes: Option<u64>,
    /// Whether the create also takes a volume snapshot (a fork: its intermediate snapshot),
    /// which the `snapshotStorage` quota is checked for as for any snapshot (rule 4).
    pub with_snapshot: bool,
}

impl Ask {
    /// What the sandbox will hold once made, as the usage counts it.
    pub fn reservation(&self) -> Reservation {
        Reservation {
            sandboxes: 1,
            cpu_millis: self.cpu_millis.unwrap_or(0),
            memory_bytes: self.memory_bytes.unwrap_or(0),
            disk_bytes: self.disk_bytes.unwrap_or(0),
            ..Reservation::default()
        }
    }
}

fn parse_quantity(text: &Option<String>) -> Option<Quantity> {
    text.as_deref().and_then(|t| Quantity::parse(t).ok())
}

/// 403 `QuotaExceeded` when `ask` (one more sandbox of that size; `None`: one more
/// snapshot) would take `tenant` above one of its quotas, with `used` in use now.
pub fn check_quotas(
    tenant: &str,
    quotas: &TenantQuotas,
    used: &Reservation,
    ask: Option<&Ask>,
) -> ServiceResult<()> {
    let exceeded = |what: &str, used: String, limit: String| {
        ServiceError::new(
            ErrorCode::QuotaExceeded,
            format!(
                "tenant '{tenant}' quota exceeded: {what} would be above its quota of {limit} \
                 ({used} in use)"
            ),
        )
    };
    if ask.is_none_or(|a| a.with_snapshot) {
        if let Some(max) = bytes(&quotas.snapshot_storage) {
            if used.snapshot_bytes >= max {
                return Err(exceeded(
                    "snapshotStorage",
                    format_bytes_binary(used.snapshot_bytes),
                    quotas.snapshot_storage.clone().unwrap_or_default(),
                ));
            }
        }
    }
    let Some(ask) = ask else {
        return Ok(());
    };
    if let Some(max) = quotas.sandboxes {
        if used.sandboxes + 1 > max {
            return Err(exceeded(
                "sandboxes",
                used.sandboxes.to_string(),
                max.to_string(),
            ));
        }
    }
    if let Some(max) = millis(&quotas.vcpu) {
        if used.cpu_millis + ask.cpu_millis.unwrap_or(0) > max {
            return Err(exceeded(
                "vcpu",
                format_cpu_millis(used.cpu_millis),
                quotas.vcpu.clone().unwrap_or_default(),
            ));
        }
    }
    for (what, in_use, asked, limit) in [
        (
            "memory",
            used.memory_bytes,
            ask.memory_bytes,
            &quotas.memory,
        ),
        ("disk", used.disk_bytes, ask.disk_bytes, &quotas.disk),
    ] {
        if bytes(limit).is_some_and(|max| in_use + asked.unwrap_or(0) > max) {
            return Err(exceeded(
                what,
                format_bytes_binary(in_use),
                limit.clone().unwrap_or_default(),
            ));
        }
    }
    Ok(())
}

fn millis(text: &Option<String>) -> Option<u64> {
    parse_quantity(text).map(|q| q.millis() as u64)
}

fn bytes(text: &Option<String>) -> Option<u64> {
    parse_quantity(text).map(|q| q.value_ceil() as u64)
}
