//! `sbx tenant list|get|create|update|delete`: tenants (read: operator, admin; write: admin).
use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::cli::commands::Context;
use crate::cli::commands::sandbox::confirm;
use crate::cli::output::{Detail, Row};
use crate::shared::models::tenant::{CreateTenantRequest, Tenant, TenantSpec};

/// Create, read, update and delete tenants
#[derive(Debug, Clone, Subcommand)]
pub enum TenantCommand {
    #[command(visible_alias = "ls")]
    List(ListArgs),
    Get(GetArgs),
    Create(CreateArgs),
    Update(UpdateArgs),
    #[command(visible_alias = "rm")]
    Delete(DeleteArgs),
}

/// List tenants with their usage
#[derive(Debug, Clone, Args)]
pub struct ListArgs {}

/// Show one tenant: spec and usage
#[derive(Debug, Clone, Args)]
pub struct GetArgs {
    /// Tenant name
    pub name: String,
}

/// The sections a tenant's flags set (each replaces the whole section).
#[derive(Debug, Clone, Default, Args)]
pub struct SpecFlags {
    /// Namespace owned by the tenant, created if missing (repeatable; at least one)
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,

    /// Node the tenant's sandboxes are confined to (repeatable)
    #[arg(long = "node", value_name = "NODE")]
    pub nodes: Vec<String>,

    /// Size of sandboxes created without limits: cpu=1,memory=2Gi,disk=10Gi
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub default_size: Vec<String>,

    /// Tenant-wide quotas: sandboxes=10,vcpu=8,memory=16Gi,disk=100Gi,snapshotStorage=50Gi
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub quota: Vec<String>,

    /// Largest sandbox: cpu=2,memory=4Gi
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub max_size: Vec<String>,

    /// Spec from a YAML or JSON file (`spec:` or the spec itself); flags override its sections
    #[arg(long, short = 'f', value_name = "FILE")]
    pub file: Option<String>,
}

/// Create a tenant
///
/// Examples:
///   sbx tenant create acme -n acme-dev -n acme-prod --quota sandboxes=20,vcpu=16,memory=32Gi
///   sbx tenant create acme --default-size cpu=1,memory=1Gi --max-size cpu=4,memory=8Gi -n acme
///   sbx tenant create -f acme.yaml acme
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct CreateArgs {
    /// Tenant name (a DNS label)
    pub name: String,
    #[command(flatten)]
    pub spec: SpecFlags,
}

/// Update a tenant: each section given replaces the current one; --clear removes one
///
/// Examples:
///   sbx tenant update acme --quota sandboxes=50
///   sbx tenant update acme --clear quotas --clear limits
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct UpdateArgs {
    /// Tenant name
    pub name: String,
    #[command(flatten)]
    pub spec: SpecFlags,
    /// Remove a section: nodes, defaultSize, quotas or limits (repeatable)
    #[arg(long, value_name = "SECTION", value_parser = ["nodes", "defaultSize", "quotas", "limits"])]
    pub clear: Vec<String>,
}

/// Delete a tenant; refused while it has sandboxes unless --cascade
#[derive(Debug, Clone, Args)]
pub struct DeleteArgs {
    /// Tenant name
    pub name: String,
    /// Delete the tenant's sandboxes too
    #[arg(long)]
    pub cascade: bool,
    /// Do not ask for confirmation (--cascade asks on a terminal)
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// Parses `key=value,...` flags into a JSON object; `integers` are sent as numbers.
fn pairs(flag: &str, values: &[String], keys: &[&str], integers: &[&str]) -> Result<Value> {
    let mut out = Map::new();
    for pair in values.iter().flat_map(|v| v.split(',')) {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--{flag} '{pair}': expected KEY=VALUE"))?;
        let (key, value) = (key.trim(), value.trim());
        if !keys.contains(&key) {
            bail!("--{flag}: unknown key '{key}' (use {})", keys.join(", "));
        }
        let value = if integers.contains(&key) {
            json!(
                value
                    .parse::<u64>()
                    .with_context(|| format!("--{flag} {key}: '{value}' is not a whole number"))?
            )
        } else {
            json!(value)
        };
        out.insert(key.to_string(), value);
    }
    Ok(Value::Object(out))
}

/// The spec sections the flags (and file) name, as a JSON object.
fn sections(flags: &SpecFlags) -> Result<Map<String, Value>> {
    let mut spec = match &flags.file {
        None => Map::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            let value: Value =
                serde_yaml_ng::from_str(&text).with_context(|| format!("parsing {path}"))?;
            let value = value.get("spec").cloned().unwrap_or(value);
            match value {
                Value::Object(map) => map,
                _ => bail!("{path}: expected a tenant spec (a mapping)"),
            }
        }
    };
    if !flags.namespaces.is_empty() {
        spec.insert("namespaces".into(), json!(flags.namespaces));
    }
    if !flags.nodes.is_empty() {
        spec.insert("nodes".into(), json!(flags.nodes));
    }
    if !flags.default_size.is_empty() {
        let size = pairs(
            "default-size",
            &flags.default_size,
            &["cpu", "memory", "disk"],
            &[],
        )?;
        spec.insert("defaultSize".into(), size);
    }
    if !flags.quota.is_empty() {
        let keys = ["sandboxes", "vcpu", "memory", "disk", "snapshotStorage"];
        spec.insert(
            "quotas".into(),
            pairs("quota", &flags.quota, &keys, &["sandboxes"])?,
        );
    }
    if !flags.max_size.is_empty() {
        let max = pairs("max-size", &flags.max_size, &["cpu", "memory"], &[])?;
        let mut limits = spec
            .remove("limits")
            .and_then(|l| l.as_object().cloned())
            .unwrap_or_default();
        limits.insert("maxSandboxSize".into(), max);
        spec.insert("limits".into(), Value::Object(limits));
    }
    Ok(spec)
}

impl Row for Tenant {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "NAMESPACES", "SANDBOXES", "VCPU", "MEMORY"];
        if wide {
            headers.extend(["SNAPSHOTS", "NODES", "DEFAULT SIZE", "GENERATION"]);
        }
        headers
    }

    fn cells(&self, wide: bool) -> Vec<String> {
        let quotas = self.spec.quotas.clone().unwrap_or_default();
        let used = &self.status.usage;
        let of = |used: &str, quota: Option<String>| match quota {
            Some(q) => format!("{used}/{q}"),
            None => used.to_string(),
        };
        let mut cells = vec![
            self.metadata.name.clone(),
            self.spec.namespaces.join(","),
            of(&used.sandboxes, quotas.sandboxes.map(|n| n.to_string())),
            of(&used.vcpu, quotas.vcpu.clone()),
            of(&used.memory, quotas.memory.clone()),
        ];
        if wide {
            cells.extend([
                of(&used.snapshot_storage, quotas.snapshot_storage.clone()),
                self.spec
                    .nodes
                    .as_ref()
                    .map(|n| n.join(","))
                    .unwrap_or_else(|| "-".into()),
                size_text(&self.spec),
                self.status.observed_generation.to_string(),
            ]);
        }
        cells
    }
}

fn size_text(spec: &TenantSpec) -> String {
    let Some(size) = &spec.default_size else {
        return "-".into();
    };
    [
        ("cpu", &size.cpu),
        ("memory", &size.memory),
        ("disk", &size.disk),
    ]
    .iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
    .collect::<Vec<_>>()
    .join(",")
}

impl Detail for Tenant {
    fn fields(&self) -> Vec<(&'static str, String)> {
        let quotas = self.spec.quotas.clone().unwrap_or_default();
        let used = &self.status.usage;
        let of = |used: &str, quota: Option<String>| match quota {
            Some(q) => format!("{used} of {q}"),
            None => format!("{used} (no quota)"),
        };
        let mut fields = vec![
            ("Name", self.metadata.name.clone()),
            ("Namespaces", self.spec.namespaces.join(", ")),
            (
                "Nodes",
                self.spec
                    .nodes
                    .as_ref()
                    .map(|n| n.join(", "))
                    .unwrap_or_else(|| "any".into()),
            ),
            ("Default size", size_text(&self.spec)),
        ];
        if let Some(max) = self
            .spec
            .limits
            .as_ref()
            .and_then(|l| l.max_sandbox_size.as_ref())
        {
            let text = [("cpu", &max.cpu), ("memory", &max.memory)]
                .iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
                .collect::<Vec<_>>()
                .join(",");
            fields.push(("Max sandbox", text));
        }
        fields.extend([
            (
                "Sandboxes",
                of(&used.sandboxes, quotas.sandboxes.map(|n| n.to_string())),
            ),
            ("vCPU", of(&used.vcpu, quotas.vcpu.clone())),
            ("Memory", of(&used.memory, quotas.memory.clone())),
            ("Disk", of(&used.disk, quotas.disk.clone())),
            (
                "Snapshots",
                of(&used.snapshot_storage, quotas.snapshot_storage.clone()),
            ),
            ("Generation", self.status.observed_generation.to_string()),
        ]);
        fields
    }
}

/// Runs a tenant subcommand.
pub async fn run(ctx: &Context, command: &TenantCommand) -> Result<ExitCode> {
    match command {
        TenantCommand::List(_) => {
            let tenants = ctx.client.list_tenants().await?;
            ctx.printer.list(&tenants)?;
        }
        TenantCommand::Get(args) => {
            let tenant = ctx.client.get_tenant(&args.name).await?;
            ctx.printer.detail(&tenant)?;
        }
        TenantCommand::Create(args) => {
            let spec: TenantSpec = serde_json::from_value(Value::Object(sections(&args.spec)?))
                .context("the tenant spec")?;
            let request = CreateTenantRequest {
                labels: None,
                name: Some(args.name.clone()),
                spec: Some(spec),
            };
            let tenant = ctx.client.create_tenant(&request).await?;
            ctx.printer.detail(&tenant)?;
        }
        TenantCommand::Update(args) => {
            let mut spec = sections(&args.spec)?;
            for section in &args.clear {
                if spec.contains_key(section) {
                    bail!("--clear {section} and a new {section} in the same update");
                }
                spec.insert(section.clone(), Value::Null);
            }
            if spec.is_empty() {
                bail!("nothing to update: give a section's flag, --clear or -f FILE");
            }
            let tenant = ctx
                .client
                .patch_tenant(&args.name, &json!({ "spec": spec }))
                .await?;
            ctx.printer.detail(&tenant)?;
        }
        TenantCommand::Delete(args) => {
            if args.cascade && !args.yes && std::io::stdin().is_terminal() {
                let question = format!(
                    "Delete tenant '{}' and every sandbox in its namespaces? This cannot be \
                     undone.",
                    args.name
                );
                if !confirm(&question)? {
                    bail!("cancelled");
                }
            }
            let done = ctx.client.delete_tenant(&args.name, args.cascade).await?;
            if ctx.printer.is_table() {
                for r in done.results.iter().flatten() {
                    match &r.error {
                        None => println!("deleted sandbox {}", r.name),
                        Some(e) => println!("failed  {}: {e}", r.name),
                    }
                }
                println!("{}", done.message);
            } else {
                ctx.printer.structured(&done)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_make_whole_sections() {
        let flags = SpecFlags {
            namespaces: vec!["a".into(), "b".into()],
            quota: vec!["sandboxes=10,vcpu=8".into(), "memory=16Gi".into()],
            max_size: vec!["cpu=2".into()],
            ..Default::default()
        };
        let spec = Value::Object(sections(&flags).unwrap());
        assert_eq!(
            spec,
            json!({
                "namespaces": ["a", "b"],
                "quotas": {"sandboxes": 10, "vcpu": "8", "memory": "16Gi"},
                "limits": {"maxSandboxSize": {"cpu": "2"}},
            })
        );
        let bad = SpecFlags {
            quota: vec!["pods=3".into()],
            ..Default::default()
        };
        assert!(
            sections(&bad)
                .unwrap_err()
                .to_string()
                .contains("unknown key 'pods'")
        );
        let bad = SpecFlags {
            quota: vec!["sandboxes=many".into()],
            ..Default::default()
        };
        assert!(
            sections(&bad)
                .unwrap_err()
                .to_string()
                .contains("whole number")
        );
    }
}
