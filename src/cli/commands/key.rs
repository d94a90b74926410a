//! `sbx key create|list|revoke`: API keys (admin).
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::cli::commands::Context;
use crate::cli::output::{Detail, OutputFormat, Row};
use crate::shared::duration::format_age;
use crate::shared::models::identity::{ApiKey, CreateKeyRequest, Role};
use crate::shared::timestamp::{format_rfc3339_utc, now_unix};

pub mod tokens;

/// Mint, list and revoke API keys (admin).
#[derive(Debug, Clone, Subcommand)]
pub enum KeyCommand {
    Create(CreateArgs),
    #[command(visible_alias = "ls")]
    List(ListArgs),
    #[command(visible_alias = "rm")]
    Revoke(RevokeArgs),
}

/// Mint a key; its token is shown once: print it, or write it to a file or a Secret
///
/// Without a destination the key is printed with its token. For scripts, `--token-file`
/// writes the token to a new file readable by you alone (0600), `--token-secret` to a
/// Kubernetes Secret (key `token`, with your kubeconfig), and `-o token` prints the token
/// alone; nothing is minted when the destination is taken (unless `--overwrite`).
///
/// Examples:
///   sbx key create ci --role operator --expires-days 30
///   sbx key create alice --role user --tenant acme --namespace acme-dev
///   sbx key create ci --role operator --token-file ~/.config/sbx/ci.token
///   sbx key create runner --role user --tenant acme --token-secret ci/sbx-token
///   TOKEN=$(sbx key create ci --role operator -o token)
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct CreateArgs {
    /// Human label; several keys may share it (revocation is by name)
    pub name: String,

    /// read-only and user are scoped to a tenant; operator and admin are cluster-wide
    #[arg(long, value_parser = ["read-only", "user", "operator", "admin"])]
    pub role: String,

    /// Tenant of a read-only or user key (required in production mode)
    #[arg(long)]
    pub tenant: Option<String>,

    /// Days until the key expires
    #[arg(long, default_value_t = 90, value_name = "DAYS")]
    pub expires_days: i64,

    /// Narrow the key to a namespace of its tenant (repeatable)
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,

    /// Node where the key may place sandboxes (repeatable)
    #[arg(long = "node", value_name = "NODE")]
    pub nodes: Vec<String>,

    /// Write the token to this new file (mode 0600) instead of printing it
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<std::path::PathBuf>,

    /// Write the token to this Kubernetes Secret (key `token`), with your kubeconfig
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub token_secret: Option<String>,

    /// Replace the token file or Secret when it exists
    #[arg(long)]
    pub overwrite: bool,
}

/// List every key, with when it was last used (never its secret)
#[derive(Debug, Clone, Args)]
pub struct ListArgs {}

/// Revoke every key with this name
#[derive(Debug, Clone, Args)]
pub struct RevokeArgs {
    /// The key name (label)
    pub name: String,
}

fn ago(unix: i64, now: i64) -> String {
    format!("{} ago", format_age((now - unix).max(0) as u64))
}

fn expiry(unix: i64, now: i64) -> String {
    if unix <= now {
        format!("expired {}", format_rfc3339_utc(unix))
    } else {
        format_rfc3339_utc(unix)
    }
}

impl Row for ApiKey {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["ID", "NAME", "ROLE", "TENANT", "EXPIRES", "LAST USED"];
        if wide {
            headers.extend(["NAMESPACES", "NODES", "CREATED"]);
        }
        headers
    }

    fn cells(&self, wide: bool) -> Vec<String> {
        let now = now_unix();
        let dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
        let mut cells = vec![
            self.id.clone(),
            self.name.clone(),
            self.role.to_string(),
            dash(self.tenant.clone().unwrap_or_default()),
            expiry(self.expires, now),
            self.last_used
                .map(|t| ago(t, now))
                .unwrap_or_else(|| "never".to_string()),
        ];
        if wide {
            cells.extend([
                dash(self.namespaces.join(",")),
                dash(self.nodes.join(",")),
                format_rfc3339_utc(self.created),
            ]);
        }
        cells
    }
}

impl Detail for ApiKey {
    fn fields(&self) -> Vec<(&'static str, String)> {
        let now = now_unix();
        let mut fields = vec![
            ("ID", self.id.clone()),
            ("Name", self.name.clone()),
            ("Role", self.role.to_string()),
        ];
        if let Some(tenant) = &self.tenant {
            fields.push(("Tenant", tenant.clone()));
        }
        if !self.namespaces.is_empty() {
            fields.push(("Namespaces", self.namespaces.join(", ")));
        }
        if !self.nodes.is_empty() {
            fields.push(("Nodes", self.nodes.join(", ")));
        }
        fields.push(("Created", format_rfc3339_utc(self.created)));
        fields.push(("Expires", expiry(self.expires, now)));
        if let Some(token) = &self.token {
            fields.push(("Token", token.clone()));
        }
        fields
    }
}

/// Runs a key subcommand.
pub async fn run(ctx: &Context, command: &KeyCommand) -> Result<ExitCode> {
    match command {
        KeyCommand::Create(args) => {
            let role: Role = args.role.parse().map_err(anyhow::Error::msg)?;
            let request = CreateKeyRequest {
                labels: None,
                name: Some(args.name.clone()),
                role: Some(role.to_string()),
                tenant: args.tenant.clone(),
                expires_days: Some(args.expires_days),
                namespaces: (!args.namespaces.is_empty()).then(|| args.namespaces.clone()),
                nodes: (!args.nodes.is_empty()).then(|| args.nodes.clone()),
            };
            let destinations = tokens::Destinations::check(
                args.token_file.as_deref(),
                args.token_secret.as_deref(),
                args.overwrite,
            )
            .await?;
            let mut key = ctx.client.create_key(&request).await?;
            let token = key.token.take().unwrap_or_default();
            let delivered = destinations.deliver(&token).await?;
            if ctx.printer.format == OutputFormat::Token {
                println!("{token}");
            } else if delivered.is_empty() {
                key.token = Some(token);
                ctx.printer.detail(&key)?;
                ctx.printer
                    .status("The token is shown only once: store it now (e.g. `sbx login`).");
            } else {
                ctx.printer.detail(&key)?;
                for place in delivered {
                    ctx.printer.status(&format!("The token is in {place}."));
                }
            }
        }
        KeyCommand::List(_) => {
            let keys = ctx.client.list_keys().await?;
            ctx.printer.list(&keys)?;
        }
        KeyCommand::Revoke(args) => {
            let revoked = ctx.client.revoke_keys(&args.name).await?;
            if ctx.printer.is_table() {
                println!("revoked {}", revoked.revoked.join(", "));
            } else {
                ctx.printer.structured(&revoked)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
