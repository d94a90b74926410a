//! `sbx node storage|dedicate|undedicate` (operator, admin).
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::cli::commands::Context;
use crate::shared::models::node::{DiskPoolResult, NodeStorageEntry, ThinPoolResult};
use crate::shared::quantity::format_bytes_binary;

/// Node storage pools and dedication to tenants
#[derive(Debug, Clone, Subcommand)]
pub enum NodeCommand {
    Storage(StorageArgs),
    Dedicate(DedicateArgs),
    Undedicate(UndedicateArgs),
}

/// Storage pools of every node (kata thin-pool, k7d disk pool)
#[derive(Debug, Clone, Args)]
pub struct StorageArgs {}

/// Dedicate a node to a tenant: only its sandboxes run there, and it joins the tenant's nodes
#[derive(Debug, Clone, Args)]
pub struct DedicateArgs {
    /// Node name
    pub node: String,
    /// The tenant
    #[arg(long)]
    pub tenant: String,
}

/// Undo a dedication
#[derive(Debug, Clone, Args)]
pub struct UndedicateArgs {
    /// Node name
    pub node: String,
}

fn thin_text(pool: &ThinPoolResult) -> String {
    match pool {
        ThinPoolResult::Ok(p) => format!(
            "{}/{} {} data {:.1}% metadata {:.1}%",
            p.vg,
            p.lv,
            format_bytes_binary(p.size_bytes),
            p.data_percent,
            p.metadata_percent
        ),
        ThinPoolResult::Err(e) => format!("error: {}", e.error),
    }
}

fn disk_text(pool: &DiskPoolResult) -> String {
    match pool {
        DiskPoolResult::Ok(p) => format!(
            "{} {} used of {} ({:.1}%)",
            p.path,
            format_bytes_binary(p.used_bytes),
            format_bytes_binary(p.size_bytes),
            p.used_percent
        ),
        DiskPoolResult::Err(e) => format!("error: {}", e.error),
    }
}

/// Runs a node subcommand.
pub async fn run(ctx: &Context, command: &NodeCommand) -> Result<ExitCode> {
    match command {
        NodeCommand::Storage(_) => {
            let storage = ctx.client.node_storage().await?;
            if !ctx.printer.is_table() {
                ctx.printer.structured(&storage)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut table = comfy_table::Table::new();
            table.load_preset(comfy_table::presets::NOTHING);
            table.set_header(["NODE", "KATA THIN-POOL", "K7D DISKS"]);
            for (node, entry) in &storage {
                match entry {
                    NodeStorageEntry::Pools {
                        kata_thinpool,
                        k7d_disks,
                    } => table.add_row([
                        node.clone(),
                        thin_text(kata_thinpool),
                        disk_text(k7d_disks),
                    ]),
                    NodeStorageEntry::Unreachable { error } => table.add_row([
                        node.clone(),
                        format!("unreachable: {error}"),
                        String::new(),
                    ]),
                };
            }
            println!("{}", table.trim_fmt());
        }
        NodeCommand::Dedicate(args) => {
            let done = ctx.client.dedicate_node(&args.node, &args.tenant).await?;
            println!("{}", done.message);
        }
        NodeCommand::Undedicate(args) => {
            let done = ctx.client.undedicate_node(&args.node).await?;
            println!("{}", done.message);
        }
    }
    Ok(ExitCode::SUCCESS)
}
