//! `sbx apply -f` and `sbx diff -f`: make the server's tenants, role bindings and API keys
//! what a set of YAML files declares, idempotently, or show what that would change.
//!
//! A tenant's spec sections are compared one by one: a section the file names is made to
//! match (a `null` one is removed), a section it leaves out is left as the server has it
//! (e.g. nodes added by `sbx node dedicate`). The role-binding document is replaced only when
//! it differs. A key is minted when no key of its name exists; a key is never changed (that
//! would change its token): one that differs is reported and nothing is applied.
pub mod documents;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use serde_json::{Map, Value, json};

use crate::cli::commands::Context;
use crate::cli::commands::key::tokens::Destinations;
use crate::shared::models::identity::{ApiKey, CreateKeyRequest, RoleBindings};
use crate::shared::models::tenant::{CreateTenantRequest, Tenant};
use crate::shared::timestamp::now_unix;
use documents::{KeySpec, Object, Origin};

/// Make the server's tenants, role bindings and keys what the files declare
///
/// Each file holds YAML (or JSON) documents of kind `Tenant` (the shape `sbx tenant get -o
/// yaml` prints), `RoleBindings` (`spec`: the document `sbx role-bindings get -o yaml`
/// prints) and `ApiKey` (`metadata.name`; `spec`: role, tenant, namespaces, nodes,
/// expiresDays — never a token). What is missing is created, what differs is updated, what
/// is equal is left alone; one line per object says which. Everything is read and checked
/// before the first write. Running it twice changes nothing the second time.
///
/// A tenant's spec section left out of the file is left as it is; `null` removes it. A key
/// minted by apply has its token written to `--token-dir`/<name>.token (mode 0600); a key
/// that exists with other settings is not changed (revoke it first).
///
/// Examples:
///   sbx apply -f tenancy/
///   sbx apply -f acme.yaml --dry-run
///   sbx apply -f keys.yaml --token-dir ./tokens
///   sbx tenant get acme -o yaml | sbx apply -f -
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub files: Files,

    /// Print what would change; change nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Directory for the tokens of keys minted (<name>.token, mode 0600)
    #[arg(long, value_name = "DIR")]
    pub token_dir: Option<PathBuf>,

    /// Replace a token file that exists
    #[arg(long)]
    pub overwrite: bool,
}

/// Show what `sbx apply -f` would change; exit 1 when something differs
///
/// Exit status: 0 when the server matches the files, 1 when something differs, 2 or more
/// when the diff itself failed (as `kubectl diff`).
///
/// Examples:
///   sbx diff -f tenancy/
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct DiffArgs {
    #[command(flatten)]
    pub files: Files,
}

/// The files `apply` and `diff` read.
#[derive(Debug, Clone, Args)]
pub struct Files {
    /// A file, a directory of *.yaml/*.yml/*.json, or - for standard input (repeatable)
    #[arg(
        short = 'f',
        long = "filename",
        required = true,
        value_name = "FILE|DIR|-"
    )]
    pub paths: Vec<String>,
}

/// What applying one object does.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Create,
    /// The body of the update (a tenant's PATCH, or the role-binding document).
    Configure(Value),
    Unchanged,
}

/// One object, what the server has of it (as the file sees it) and what applying does.
struct Step {
    origin: Origin,
    object: Object,
    change: Change,
    /// The server's side and the file's, as YAML, for `diff`.
    before: String,
    after: String,
}

/// The server's state that the objects are compared with.
struct Server {
    tenants: Vec<Tenant>,
    bindings: Option<RoleBindings>,
    keys: Vec<ApiKey>,
}

fn yaml(value: &Value) -> String {
    if value.is_null() {
        String::new()
    } else {
        serde_yaml_ng::to_string(value).unwrap_or_default()
    }
}

/// Reads what the server has of the objects' kinds.
async fn server(ctx: &Context, objects: &[(Origin, Object)]) -> Result<Server> {
    let wants = |f: fn(&Object) -> bool| objects.iter().any(|(_, o)| f(o));
    let tenants = ctx.client.list_tenants().await?;
    let bindings = if wants(|o| matches!(o, Object::RoleBindings(_))) {
        Some(ctx.client.role_bindings().await?)
    } else {
        None
    };
    let keys = if wants(|o| matches!(o, Object::ApiKey { .. })) {
        ctx.client.list_keys().await?
    } else {
        Vec::new()
    };
    Ok(Server {
        tenants,
        bindings,
        keys,
    })
}

/// Compares every object with the server; refuses (before any write) what cannot be applied.
fn plan(objects: Vec<(Origin, Object)>, server: &Server) -> Result<Vec<Step>> {
    let now = now_unix();
    let mut steps = Vec::new();
    for (origin, object) in objects {
        let (change, before, after) = match &object {
            Object::Tenant {
                name,
                sections,
                spec,
            } => {
                let declared = serde_json::to_value(spec)?;
                let pick = |spec: &Value| -> Value {
                    let picked: Map<String, Value> = sections
                        .keys()
                        .map(|k| (k.clone(), spec.get(k).cloned().unwrap_or(Value::Null)))
                        .collect();
                    Value::Object(picked)
                };
                let after = pick(&declared);
                match server.tenants.iter().find(|t| &t.metadata.name == name) {
                    None => (Change::Create, Value::Null, after),
                    Some(current) => {
                        let before = pick(&serde_json::to_value(&current.spec)?);
                        if before == after {
                            (Change::Unchanged, before, after)
                        } else {
                            let changed: Map<String, Value> = after
                                .as_object()
                                .into_iter()
                                .flatten()
                                .filter(|(k, v)| before.get(k.as_str()) != Some(v))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect();
                            let body = json!({ "spec": changed });
                            (Change::Configure(body), before, after)
                        }
                    }
                }
            }
            Object::RoleBindings(document) => {
                let after = serde_json::to_value(document)?;
                let before = serde_json::to_value(server.bindings.clone().unwrap_or_default())?;
                if before == after {
                    (Change::Unchanged, before, after)
                } else {
                    (Change::Configure(after.clone()), before, after)
                }
            }
            Object::ApiKey { name, spec } => {
                let after = key_view(spec);
                let live: Vec<&ApiKey> = server
                    .keys
                    .iter()
                    .filter(|k| &k.name == name && k.expires > now)
                    .collect();
                match live.iter().find(|k| key_matches(k, spec)) {
                    Some(k) => (Change::Unchanged, key_view(&spec_of(k)), after),
                    None if live.is_empty() => (Change::Create, Value::Null, after),
                    None => bail!(
                        "{origin}: apikey/{name}: a key of that name exists with other settings \
                         ({}); a key cannot be changed: revoke it (`sbx key revoke {name}`) or \
                         give the key another name; nothing was applied",
                        serde_json::to_string(&key_view(&spec_of(live[0])))?
                    ),
                }
            }
        };
        steps.push(Step {
            origin,
            object,
            change,
            before: yaml(&before),
            after: yaml(&after),
        });
    }
    // A key's or a binding's tenant must exist, on the server or in the files.
    let declared: Vec<&str> = steps
        .iter()
        .filter_map(|s| match &s.object {
            Object::Tenant { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    for step in &steps {
        if let Object::ApiKey {
            name,
            spec: KeySpec {
                tenant: Some(tenant),
                ..
            },
        } = &step.object
        {
            let known = declared.contains(&tenant.as_str())
                || server.tenants.iter().any(|t| &t.metadata.name == tenant);
            if !known {
                bail!(
                    "{}: `spec.tenant` of apikey/{name}: no tenant {tenant} on the server or in \
                     the files; nothing was applied",
                    step.origin
                );
            }
        }
    }
    Ok(steps)
}

/// A key's settings as a file declares them (expiry aside: it counts from the mint).
fn key_view(spec: &KeySpec) -> Value {
    json!({"role": spec.role, "tenant": spec.tenant, "namespaces": spec.namespaces, "nodes": spec.nodes})
}

fn spec_of(key: &ApiKey) -> KeySpec {
    KeySpec {
        role: key.role,
        tenant: key.tenant.clone(),
        namespaces: key.namespaces.clone(),
        nodes: key.nodes.clone(),
        expires_days: 0,
    }
}

fn key_matches(key: &ApiKey, spec: &KeySpec) -> bool {
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    key.role == spec.role
        && key.tenant == spec.tenant
        && sorted(&key.namespaces) == sorted(&spec.namespaces)
        && sorted(&key.nodes) == sorted(&spec.nodes)
}

/// Runs `sbx apply`.
pub async fn run_apply(ctx: &Context, args: &ApplyArgs) -> Result<ExitCode> {
    let objects = documents::read(&args.files.paths)?;
    let server = server(ctx, &objects).await?;
    let steps = plan(objects, &server)?;
    // Every token's file is checked before the first write.
    let mut tokens = Vec::new();
    for step in &steps {
        if let (Object::ApiKey { name, .. }, Change::Create) = (&step.object, &step.change) {
            if args.dry_run && args.token_dir.is_none() {
                continue;
            }
            let Some(dir) = &args.token_dir else {
                bail!(
                    "{}: apikey/{name} would be minted and its token has nowhere to go: pass \
                     --token-dir DIR; nothing was applied",
                    step.origin
                );
            };
            let file = dir.join(format!("{name}.token"));
            let destination = if args.dry_run {
                None
            } else {
                Some(Destinations::check(Some(&file), None, args.overwrite).await?)
            };
            tokens.push((name.clone(), file, destination));
        }
    }
    let suffix = if args.dry_run { " (dry run)" } else { "" };
    for (i, step) in steps.iter().enumerate() {
        let id = step.object.id();
        if !args.dry_run {
            if let Err(e) = write(ctx, step, &tokens).await {
                let ids = |steps: &[Step]| {
                    let ids: Vec<String> = steps.iter().map(|s| s.object.id()).collect();
                    if ids.is_empty() {
                        "nothing".to_string()
                    } else {
                        ids.join(", ")
                    }
                };
                bail!(
                    "{}: {id}: {e:#}\napplied: {}\nnot applied: {}",
                    step.origin,
                    ids(&steps[..i]),
                    ids(&steps[i..])
                );
            }
        }
        let word = match &step.change {
            Change::Create => "created",
            Change::Configure(_) => "configured",
            Change::Unchanged => "unchanged",
        };
        let token = tokens
            .iter()
            .find(|(n, _, _)| id == format!("apikey/{n}"))
            .map(|(_, file, _)| format!(" (token in {})", file.display()))
            .unwrap_or_default();
        println!("{id} {word}{suffix}{token}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Makes one object's change on the server.
async fn write(
    ctx: &Context,
    step: &Step,
    tokens: &[(String, PathBuf, Option<Destinations>)],
) -> Result<()> {
    match (&step.object, &step.change) {
        (_, Change::Unchanged) => {}
        (Object::Tenant { name, spec, .. }, Change::Create) => {
            let request = CreateTenantRequest {
                name: Some(name.clone()),
                spec: Some(spec.as_ref().clone()),
            };
            ctx.client.create_tenant(&request).await?;
        }
        (Object::Tenant { name, .. }, Change::Configure(body)) => {
            ctx.client.patch_tenant(name, body).await?;
        }
        (Object::RoleBindings(document), _) => {
            ctx.client.put_role_bindings(document).await?;
        }
        (Object::ApiKey { name, spec }, Change::Create) => {
            let request = CreateKeyRequest {
                name: Some(name.clone()),
                role: Some(spec.role.to_string()),
                tenant: spec.tenant.clone(),
                expires_days: Some(spec.expires_days),
                namespaces: (!spec.namespaces.is_empty()).then(|| spec.namespaces.clone()),
                nodes: (!spec.nodes.is_empty()).then(|| spec.nodes.clone()),
            };
            let key = ctx.client.create_key(&request).await?;
            if let Some((_, _, Some(destination))) = tokens.iter().find(|(n, _, _)| n == name) {
                destination
                    .deliver(key.token.as_deref().unwrap_or_default())
                    .await?;
            }
        }
        (Object::ApiKey { .. }, Change::Configure(_)) => {
            unreachable!("a key that differs is refused by the plan")
        }
    }
    Ok(())
}

/// Runs `sbx diff`: the exit status says whether anything differs.
pub async fn run_diff(ctx: &Context, args: &DiffArgs) -> Result<ExitCode> {
    let outcome = async {
        let objects = documents::read(&args.files.paths)?;
        let server = server(ctx, &objects).await?;
        plan(objects, &server)
    }
    .await;
    let steps = match outcome {
        Ok(steps) => steps,
        Err(e) => {
            crate::cli::report(&e);
            return Ok(ExitCode::from(2));
        }
    };
    let mut differs = false;
    for step in steps {
        if step.change == Change::Unchanged {
            continue;
        }
        differs = true;
        let id = step.object.id();
        let diff = similar::TextDiff::from_lines(&step.before, &step.after);
        print!(
            "{}",
            diff.unified_diff().context_radius(3).header(
                &format!("{id} (server)"),
                &format!("{id} ({})", step.origin)
            )
        );
        if step.before.is_empty() {
            println!("# {id} does not exist: it would be created");
        }
    }
    Ok(ExitCode::from(u8::from(differs)))
}
