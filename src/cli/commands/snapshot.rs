//! `sbx snapshot …`: list, get, delete, restore and GC snapshots.
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::cli::commands::Context;
use crate::cli::commands::sandbox::{NamespaceArg, parse_limits};
use crate::cli::output::{Detail, Row};
use crate::shared::duration::DurationValue;
use crate::shared::models::DEFAULT_NAMESPACE;
use crate::shared::models::snapshot::{
    GcRequest, GcResult, RestoreOverrides, RestoreRequest, Snapshot, SnapshotListQuery,
};

/// Manage snapshots: list, inspect, delete, restore into a new sandbox, sweep old forks
#[derive(Debug, Clone, Subcommand)]
pub enum SnapshotCommand {
    #[command(visible_alias = "ls")]
    List(ListArgs),
    Get(GetArgs),
    #[command(visible_alias = "rm")]
    Delete(GetArgs),
    Restore(RestoreArgs),
    Gc(GcArgs),
}

/// List snapshots
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Namespace to list
    #[arg(short = 'n', long, default_value = DEFAULT_NAMESPACE, conflicts_with = "all_namespaces")]
    pub namespace: String,
    /// List snapshots of every namespace
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only snapshots of this sandbox
    #[arg(long)]
    pub sandbox: Option<String>,
    /// Only snapshots of this kind
    #[arg(long, value_parser = ["pause", "fork", "named"])]
    pub kind: Option<String>,
}

/// Show one snapshot (or delete it)
#[derive(Debug, Clone, Args)]
pub struct GetArgs {
    /// Snapshot name
    pub name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
}

/// Create a new sandbox from a snapshot
///
/// Examples:
///   sbx snapshot restore before-upgrade demo-restored
///   sbx snapshot restore before-upgrade demo-big --limit memory=1Gi --delete-snapshot
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct RestoreArgs {
    /// Snapshot name
    pub snapshot: String,
    /// Name of the new sandbox
    pub new_name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Image instead of the snapshot's
    #[arg(long)]
    pub image: Option<String>,
    /// Limits instead of the snapshot's (KEY=VALUE,...; repeatable)
    #[arg(long = "limit", value_name = "KEY=VALUE,...")]
    pub limits: Vec<String>,
    /// before_script instead of the snapshot's
    #[arg(long)]
    pub before_script: Option<String>,
    /// Entrypoint instead of the image's (repeat for each word)
    #[arg(long, value_name = "WORD")]
    pub entrypoint: Vec<String>,
    /// Cmd instead of the image's (repeat for each word)
    #[arg(long, value_name = "WORD")]
    pub cmd: Vec<String>,
    /// Delete the snapshot once the new sandbox is Ready
    #[arg(long)]
    pub delete_snapshot: bool,
}

/// Delete `fork` snapshots older than a threshold (pause and named snapshots are kept)
#[derive(Debug, Clone, Args)]
pub struct GcArgs {
    /// Namespace to sweep
    #[arg(short = 'n', long, default_value = DEFAULT_NAMESPACE, conflicts_with = "all_namespaces")]
    pub namespace: String,
    /// Sweep every namespace
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Keep fork snapshots younger than this: 10m, 2h, 45s or seconds
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    pub keep_fork_for: String,
    /// Only report what would be deleted
    #[arg(long)]
    pub dry_run: bool,
}

fn kind_text(s: &Snapshot) -> &'static str {
    s.kind.as_str()
}

impl Row for Snapshot {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut h = vec!["NAMESPACE", "NAME", "KIND", "SANDBOX", "SIZE", "AGE"];
        if wide {
            h.extend(["READY", "CLASS", "CREATED"]);
        }
        h
    }

    fn cells(&self, wide: bool) -> Vec<String> {
        let mut c = vec![
            self.namespace.clone(),
            self.name.clone(),
            kind_text(self).to_string(),
            self.source_sandbox.clone(),
            crate::shared::quantity::format_bytes_binary(self.size_bytes),
            self.age.clone(),
        ];
        if wide {
            c.extend([
                self.ready_to_use.to_string(),
                self.snapshot_class.clone(),
                self.creation_timestamp.clone(),
            ]);
        }
        c
    }
}

impl Detail for Snapshot {
    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("Name", self.name.clone()),
            ("Namespace", self.namespace.clone()),
            ("Kind", kind_text(self).to_string()),
            ("Source sandbox", self.source_sandbox.clone()),
            ("Ready", self.ready_to_use.to_string()),
            ("Size", format!("{} bytes", self.size_bytes)),
            ("Created", self.creation_timestamp.clone()),
            ("Age", self.age.clone()),
            ("Class", self.snapshot_class.clone()),
        ]
    }
}

impl Row for GcResult {
    fn headers(_wide: bool) -> Vec<&'static str> {
        vec!["NAMESPACE", "NAME", "AGE", "DELETED"]
    }

    fn cells(&self, _wide: bool) -> Vec<String> {
        vec![
            self.namespace.clone(),
            self.name.clone(),
            self.age.clone(),
            self.deleted.to_string(),
        ]
    }
}

/// Runs a snapshot subcommand.
pub async fn run(ctx: &Context, command: &SnapshotCommand) -> Result<ExitCode> {
    match command {
        SnapshotCommand::List(args) => {
            let query = SnapshotListQuery {
                namespace: Some(args.namespace.clone()),
                all_namespaces: args.all_namespaces,
                sandbox: args.sandbox.clone(),
                kind: args.kind.clone(),
            };
            let snapshots = ctx.client.list_snapshots(&query).await?;
            ctx.printer.list(&snapshots)?;
        }
        SnapshotCommand::Get(args) => {
            let snapshot = ctx
                .client
                .get_snapshot(&args.name, &args.ns.namespace)
                .await?;
            ctx.printer.detail(&snapshot)?;
        }
        SnapshotCommand::Delete(args) => {
            let done = ctx
                .client
                .delete_snapshot(&args.name, &args.ns.namespace)
                .await?;
            if ctx.printer.is_table() {
                println!("{}", done.message);
            } else {
                ctx.printer.structured(&done)?;
            }
        }
        SnapshotCommand::Restore(args) => {
            let limits = parse_limits(&args.limits)?;
            let overrides = RestoreOverrides {
                image: args.image.clone(),
                limits,
                before_script: args.before_script.clone(),
                entrypoint: (!args.entrypoint.is_empty()).then(|| args.entrypoint.clone()),
                cmd: (!args.cmd.is_empty()).then(|| args.cmd.clone()),
                ..Default::default()
            };
            let request = RestoreRequest {
                new_sandbox_name: Some(args.new_name.clone()),
                namespace: Some(args.ns.namespace.clone()),
                overrides: Some(overrides),
                keep_snapshot: Some(!args.delete_snapshot),
            };
            let (restored, took) = ctx
                .printer
                .waiting(
                    format!("restoring {} into sandbox/{}", args.snapshot, args.new_name),
                    ctx.client.restore_snapshot(&args.snapshot, &request),
                )
                .await;
            let restored = restored?;
            ctx.printer.status(&format!(
                "{} in {:.1}s (it becomes Ready on its own: `sbx sandbox get {}`)",
                restored.message,
                took.as_secs_f64(),
                restored.name
            ));
            let sandbox = ctx
                .client
                .get_sandbox(&restored.name, &restored.namespace)
                .await?;
            ctx.printer.detail(&sandbox)?;
        }
        SnapshotCommand::Gc(args) => {
            let keep = match args.keep_fork_for.parse::<u64>() {
                Ok(secs) => DurationValue::Seconds(secs),
                Err(_) => DurationValue::Text(args.keep_fork_for.clone()),
            };
            let request = GcRequest {
                namespace: Some(args.namespace.clone()),
                all_namespaces: args.all_namespaces,
                keep_fork_for: Some(keep),
                dry_run: args.dry_run,
            };
            let done = ctx.client.gc_snapshots(&request).await?;
            if ctx.printer.is_table() {
                ctx.printer.list(&done.results)?;
                ctx.printer.status(&done.message);
            } else {
                ctx.printer.structured(&done)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
