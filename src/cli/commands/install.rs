//! `sbx install start|status` (admin): remote install of cluster nodes.
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use crate::cli::commands::Context;
use crate::shared::models::install::{InstallState, InstallStatusResponse};

/// Install sbx on cluster nodes (admin; Kubernetes, when the service turns it on)
#[derive(Debug, Clone, Subcommand)]
pub enum InstallCommand {
    Start(StartArgs),
    Status(StatusArgs),
}

/// Start an install on nodes: the installer checks each node and installs sbx and its agent
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    sbx install start worker-1 worker-2 --wait\n  \
    sbx install status install-1764230000-a1b2c3")]
pub struct StartArgs {
    /// Node names
    #[arg(required = true, value_name = "NODE")]
    pub nodes: Vec<String>,
    /// Wait until every node succeeded or failed (exit 1 when one failed)
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits
    #[arg(long, default_value = "15m", value_name = "DURATION",
        value_parser = crate::shared::duration::parse_duration)]
    pub timeout: Duration,
}

/// Each node's state in an install operation: pending, running, succeeded or failed
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Operation id (from `sbx install start`)
    pub operation: String,
    /// Wait until every node succeeded or failed (exit 1 when one failed)
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits
    #[arg(long, default_value = "15m", value_name = "DURATION",
        value_parser = crate::shared::duration::parse_duration)]
    pub timeout: Duration,
}

fn finished(report: &InstallStatusResponse) -> bool {
    report
        .nodes
        .values()
        .all(|n| matches!(n.state, InstallState::Succeeded | InstallState::Failed))
}

fn counts(report: &InstallStatusResponse) -> String {
    let of = |state: InstallState| report.nodes.values().filter(|n| n.state == state).count();
    format!(
        "{} pending, {} running, {} succeeded, {} failed",
        of(InstallState::Pending),
        of(InstallState::Running),
        of(InstallState::Succeeded),
        of(InstallState::Failed)
    )
}

/// Polls until every node finished, with a spinner showing the counts.
async fn wait(ctx: &Context, operation: &str, timeout: Duration) -> Result<InstallStatusResponse> {
    let bar = ctx.printer.spinner(format!("installing ({operation})"));
    let started = Instant::now();
    let report = loop {
        let report = ctx.client.install_status(operation).await?;
        if let Some(bar) = &bar {
            bar.set_message(format!("installing ({operation}): {}", counts(&report)));
        }
        if finished(&report) {
            break report;
        }
        if started.elapsed() >= timeout {
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            bail!(
                "install {operation} unfinished after {} s ({}); `sbx install status {operation}` \
                 follows it",
                timeout.as_secs(),
                counts(&report)
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(report)
}

/// Prints a report; exit 1 when a node failed.
fn show(ctx: &Context, report: &InstallStatusResponse) -> Result<ExitCode> {
    if ctx.printer.is_table() {
        let mut table = comfy_table::Table::new();
        table.load_preset(comfy_table::presets::NOTHING);
        table.set_header(["NODE", "STATE", "MESSAGE"]);
        for (node, status) in &report.nodes {
            let state = serde_json::to_value(status.state)?;
            table.add_row([
                node.clone(),
                state.as_str().unwrap_or_default().to_string(),
                status.message.clone().unwrap_or_default(),
            ]);
        }
        println!("{}", table.trim_fmt());
    } else {
        ctx.printer.structured(report)?;
    }
    let failed = report
        .nodes
        .values()
        .any(|n| n.state == InstallState::Failed);
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs an install subcommand.
pub async fn run(ctx: &Context, command: &InstallCommand) -> Result<ExitCode> {
    match command {
        InstallCommand::Start(args) => {
            let started = ctx.client.start_install(&args.nodes).await?;
            if !args.wait {
                if ctx.printer.is_table() {
                    println!(
                        "install {} started on {}",
                        started.operation,
                        started.nodes.join(", ")
                    );
                } else {
                    ctx.printer.structured(&started)?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            ctx.printer.status(&format!(
                "install {} started on {}",
                started.operation,
                started.nodes.join(", ")
            ));
            let report = wait(ctx, &started.operation, args.timeout).await?;
            show(ctx, &report)
        }
        InstallCommand::Status(args) => {
            let report = if args.wait {
                wait(ctx, &args.operation, args.timeout).await?
            } else {
                ctx.client.install_status(&args.operation).await?
            };
            show(ctx, &report)
        }
    }
}
