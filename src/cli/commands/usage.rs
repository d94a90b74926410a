//! `sbx usage`: showback over a time range, grouped by tenant, namespace, backend or state.
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;

use crate::cli::commands::Context;
use crate::cli::output::Row;
use crate::shared::duration::parse_duration;
use crate::shared::models::usage::{UsageQuery, UsageRow, parse_group_by};
use crate::shared::quantity::format_bytes_binary;
use crate::shared::timestamp::{now_unix, parse_timestamp};

/// Show usage (sandbox-seconds, vCPU-seconds, GiB-seconds, egress) over a time range
///
/// Times: unix seconds, RFC 3339 (2026-11-01T00:00:00Z), `now`, or `<duration> ago`
/// (`24h ago`, `90m ago`, `7d ago`).
///
/// Examples:
///   sbx usage                                   # the last 24 hours, one row
///   sbx usage --from "7d ago" --group-by tenant,state
///   sbx usage --tenant acme --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z -o json
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct UsageArgs {
    /// Start of the range
    #[arg(long, default_value = "24h ago", value_name = "TIME")]
    pub from: String,
    /// End of the range
    #[arg(long, default_value = "now", value_name = "TIME")]
    pub to: String,
    /// Only this tenant (a tenant-scoped key: its own, the default)
    #[arg(long)]
    pub tenant: Option<String>,
    /// Group rows by any of tenant, namespace, backend, state (comma-separated)
    #[arg(long, value_name = "KEYS")]
    pub group_by: Option<String>,
}

/// Parses a time as the API takes it, plus `now` and `<duration> ago`, into unix seconds.
pub fn parse_time(input: &str, now: i64) -> Result<i64> {
    let text = input.trim();
    if text == "now" {
        return Ok(now);
    }
    if let Some(ago) = text.strip_suffix("ago") {
        let span = parse_duration(ago.trim().replace(' ', "").as_str())
            .with_context(|| format!("'{input}': expected <duration> ago, e.g. 24h ago"))?;
        return Ok(now - span.as_secs() as i64);
    }
    parse_timestamp(text).with_context(|| {
        format!("'{input}': expected unix seconds, RFC 3339, now or <duration> ago")
    })
}

fn seconds(v: f64) -> String {
    format!("{v:.1}")
}

impl Row for UsageRow {
    fn headers(_wide: bool) -> Vec<&'static str> {
        vec![
            "TENANT",
            "NAMESPACE",
            "BACKEND",
            "STATE",
            "SANDBOX-S",
            "VCPU-S",
            "MEMORY-GIB-S",
            "DISK-GIB-S",
            "SNAPSHOT-GIB-S",
            "EGRESS",
        ]
    }

    fn cells(&self, _wide: bool) -> Vec<String> {
        let all = |v: &Option<String>| v.clone().unwrap_or_else(|| "*".into());
        vec![
            all(&self.tenant),
            all(&self.namespace),
            all(&self.backend),
            all(&self.state),
            seconds(self.sandbox_seconds),
            seconds(self.vcpu_seconds),
            seconds(self.memory_gib_seconds),
            seconds(self.disk_gib_seconds),
            seconds(self.snapshot_gib_seconds),
            format_bytes_binary(self.egress_bytes.round() as u64),
        ]
    }
}

/// Runs `sbx usage`.
pub async fn run(ctx: &Context, args: &UsageArgs) -> Result<ExitCode> {
    let now = now_unix();
    let from = parse_time(&args.from, now).context("--from")?;
    let to = parse_time(&args.to, now).context("--to")?;
    if from > to {
        bail!("--from is after --to");
    }
    if let Some(keys) = &args.group_by {
        parse_group_by(keys).map_err(anyhow::Error::msg)?;
    }
    let query = UsageQuery {
        from: Some(from.to_string()),
        to: Some(to.to_string()),
        tenant: args.tenant.clone(),
        group_by: args.group_by.clone(),
    };
    let usage = ctx.client.usage(&query).await?;
    if ctx.printer.is_table() {
        ctx.printer.list(&usage.rows)?;
    } else {
        ctx.printer.structured(&usage)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_absolute_times() {
        let now = 1_800_000_000;
        assert_eq!(parse_time("now", now).unwrap(), now);
        assert_eq!(parse_time("24h ago", now).unwrap(), now - 86_400);
        assert_eq!(parse_time("90m ago", now).unwrap(), now - 5_400);
        assert_eq!(parse_time("1700000000", now).unwrap(), 1_700_000_000);
        assert_eq!(
            parse_time("2026-11-01T00:00:00Z", now).unwrap(),
            parse_timestamp("2026-11-01T00:00:00Z").unwrap()
        );
        assert!(parse_time("yesterday", now).is_err());
        assert!(parse_time("soon ago", now).is_err());
    }
}
