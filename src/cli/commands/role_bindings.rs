//! `sbx role-bindings get|set`: the role-binding document (admin).
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};

use crate::cli::commands::Context;
use crate::cli::output::Row;
use crate::shared::models::identity::{RoleBinding, RoleBindings};

/// Show or replace the role bindings of OIDC identities (admin)
#[derive(Debug, Clone, Subcommand)]
pub enum RoleBindingsCommand {
    Get(GetArgs),
    Set(SetArgs),
}

/// Show the bindings (a table; -o yaml gives a document `set -f` takes back)
#[derive(Debug, Clone, Args)]
pub struct GetArgs {}

/// Replace the whole document from a YAML or JSON file
///
/// Example file:
///   bindings:
///     - {group: platform-team, role: operator}
///     - {group: acme-devs, role: user, tenant: acme}
///     - {user: alice@example.com, role: read-only, tenant: acme}
///   deny_subjects: [mallory]
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct SetArgs {
    /// The document (`-` for standard input)
    #[arg(long, short = 'f', value_name = "FILE")]
    pub file: String,
}

impl Row for RoleBinding {
    fn headers(_wide: bool) -> Vec<&'static str> {
        vec!["MATCHER", "VALUE", "ROLE", "TENANT"]
    }

    fn cells(&self, _wide: bool) -> Vec<String> {
        let (kind, value) = [
            ("group", &self.group),
            ("user", &self.user),
            ("subject", &self.subject),
        ]
        .into_iter()
        .find_map(|(k, v)| v.as_ref().map(|v| (k, v.clone())))
        .unwrap_or(("-", "-".into()));
        vec![
            kind.to_string(),
            value,
            self.role.clone(),
            self.tenant.clone().unwrap_or_else(|| "-".into()),
        ]
    }
}

fn show(ctx: &Context, document: &RoleBindings) -> Result<()> {
    if ctx.printer.is_table() {
        ctx.printer.list(&document.bindings)?;
        if !document.deny_subjects.is_empty() {
            println!("denied: {}", document.deny_subjects.join(", "));
        }
        Ok(())
    } else {
        ctx.printer.structured(document)
    }
}

/// Runs a role-bindings subcommand.
pub async fn run(ctx: &Context, command: &RoleBindingsCommand) -> Result<ExitCode> {
    match command {
        RoleBindingsCommand::Get(_) => {
            let document = ctx.client.role_bindings().await?;
            show(ctx, &document)?;
        }
        RoleBindingsCommand::Set(args) => {
            let text = if args.file == "-" {
                std::io::read_to_string(std::io::stdin()).context("reading standard input")?
            } else {
                std::fs::read_to_string(&args.file)
                    .with_context(|| format!("reading {}", args.file))?
            };
            let document: RoleBindings = serde_yaml_ng::from_str(&text)
                .with_context(|| format!("{}: not a role-binding document", args.file))?;
            let stored = ctx.client.put_role_bindings(&document).await?;
            show(ctx, &stored)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
