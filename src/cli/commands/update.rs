//! `sbx sandbox update`: a sandbox's lifetime (TTL and idle timeout).
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;

use super::sandbox::NamespaceArg;
use crate::cli::commands::Context;
use crate::shared::duration::parse_duration;
use crate::shared::models::sandbox::SandboxPatch;

/// Change a sandbox's lifetime: when it is deleted, and when it is paused for want of use
///
/// A TTL counts from now. The idle timeout pauses the sandbox once no exec, stream or file
/// copy happened for that long (`sbx sandbox resume` starts a new period). Both at least 10s.
///
/// Examples:
///   sbx sandbox update demo --ttl 2h                # deleted two hours from now
///   sbx sandbox update demo --idle-timeout 15m      # paused after 15 idle minutes
///   sbx sandbox update demo --no-ttl --no-idle-timeout
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct UpdateArgs {
    /// Sandbox name
    pub name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Delete the sandbox this long from now, e.g. 90s, 30m, 2h
    #[arg(long, value_name = "DURATION", conflicts_with = "no_ttl")]
    pub ttl: Option<String>,
    /// Never delete it on a timer (refused when its tenant sets a maximum TTL)
    #[arg(long)]
    pub no_ttl: bool,
    /// Pause it after this long without an exec, stream or file copy
    #[arg(long, value_name = "DURATION", conflicts_with = "no_idle_timeout")]
    pub idle_timeout: Option<String>,
    /// Never pause it for want of use
    #[arg(long)]
    pub no_idle_timeout: bool,
}

/// Seconds of a duration option.
pub fn seconds(option: &str, text: Option<&str>) -> Result<Option<u64>> {
    text.map(|t| {
        parse_duration(t)
            .map(|d| d.as_secs())
            .with_context(|| format!("{option} {t}"))
    })
    .transpose()
}

/// Runs `sbx sandbox update`.
pub async fn run(ctx: &Context, args: &UpdateArgs) -> Result<ExitCode> {
    let patch = SandboxPatch {
        ttl_seconds: match (seconds("--ttl", args.ttl.as_deref())?, args.no_ttl) {
            (Some(t), _) => Some(Some(t)),
            (None, true) => Some(None),
            (None, false) => None,
        },
        idle_timeout_seconds: match (
            seconds("--idle-timeout", args.idle_timeout.as_deref())?,
            args.no_idle_timeout,
        ) {
            (Some(t), _) => Some(Some(t)),
            (None, true) => Some(None),
            (None, false) => None,
        },
    };
    if patch == SandboxPatch::default() {
        bail!("nothing to change: give --ttl, --no-ttl, --idle-timeout or --no-idle-timeout");
    }
    let sandbox = ctx
        .client
        .patch_sandbox(&args.name, &args.ns.namespace, &patch)
        .await?;
    ctx.printer.detail(&sandbox)?;
    Ok(ExitCode::SUCCESS)
}
