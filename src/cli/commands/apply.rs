//! `sbx apply -f` and `sbx diff -f`: make the server's tenants, role bindings and API keys
//! what a set of YAML files declares, idempotently, or show what that would change.
//!
//! A tenant's spec sections are compared one by one: a section the file names is made to
//! match (a `null` one is removed), a section it leaves out is left as the server has it
//! (e.g. nodes added by `sbx node dedicate`). The role-binding document is replaced only when
//! it differs. A key is minted when no key of its name exists; a key is never changed (that
//! would change its token): one that differs is reported and nothing is applied.
//!
//! With `--applyset NAME` every tenant and key applied carries the label
//! `sbx.io/apply-set=NAME`; `--prune` then removes the tenants and keys of that label that the
//! files no longer declare (after the other changes; keys before tenants).
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
use documents::{KeySpec, Labels, Object, Origin};

/// The label that names the set of files a tenant or key was applied from.
pub use crate::shared::labels::APPLY_SET as APPLY_SET_LABEL;

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
/// With --applyset NAME, what is applied is labelled sbx.io/apply-set=NAME, and --prune
/// deletes the tenants and revokes the keys of that set that the files no longer declare. A
/// tenant that still has sandboxes is not pruned (nothing is applied) unless --cascade.
///
/// Examples:
///   sbx apply -f tenancy/
///   sbx apply -f acme.yaml --dry-run
///   sbx apply -f keys.yaml --token-dir ./tokens
///   sbx tenant get acme -o yaml | sbx apply -f -
///   sbx apply -f tenancy/ --applyset tenancy --prune --token-dir ./tokens
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub files: Files,

    #[command(flatten)]
    pub set: SetArgs,

    /// With --prune: delete a pruned tenant's sandboxes too (without it, a tenant that has
    /// sandboxes is kept and nothing is applied)
    #[arg(long, requires = "prune")]
    pub cascade: bool,

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
///   sbx diff -f tenancy/ --applyset tenancy --prune
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct DiffArgs {
    #[command(flatten)]
    pub files: Files,

    #[command(flatten)]
    pub set: SetArgs,
}

/// The set of objects the files own, and whether what left the files is removed.
#[derive(Debug, Clone, Args)]
pub struct SetArgs {
    /// Label every tenant and key applied sbx.io/apply-set=NAME: the set these files own
    #[arg(long, value_name = "NAME")]
    pub applyset: Option<String>,

    /// Remove the tenants and keys labelled with --applyset that the files no longer declare
    #[arg(long, requires = "applyset")]
    pub prune: bool,
}

impl SetArgs {
    /// The label `--applyset` adds, checked.
    fn label(&self) -> Result<Option<(String, String)>> {
        let Some(set) = &self.applyset else {
            return Ok(None);
        };
        let label = (APPLY_SET_LABEL.to_string(), set.clone());
        crate::shared::labels::validate_tenancy(&Labels::from([label.clone()]))
            .map_err(|e| anyhow::anyhow!("--applyset: {e}"))?;
        Ok(Some(label))
    }
}

/// What `--prune` removes.
#[derive(Debug, Clone, PartialEq)]
enum Prune {
    /// A key name (every key of that name carries the set's label).
    Key(String),
    /// A tenant, and what the server had of it (for `diff`).
    Tenant { name: String, before: String },
}

impl Prune {
    fn id(&self) -> String {
        match self {
            Prune::Key(name) => format!("apikey/{name}"),
            Prune::Tenant { name, .. } => format!("tenant/{name}"),
        }
    }
}

/// Every change `apply` makes.
struct Plan {
    steps: Vec<Step>,
    prunes: Vec<Prune>,
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
    /// The labels a tenant is created with.
    labels: Option<Labels>,
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

/// Reads what the server has of the objects' kinds (every key with `prune`).
async fn server(ctx: &Context, objects: &[(Origin, Object)], prune: bool) -> Result<Server> {
    let wants = |f: fn(&Object) -> bool| objects.iter().any(|(_, o)| f(o));
    let tenants = ctx.client.list_tenants().await?;
    let bindings = if wants(|o| matches!(o, Object::RoleBindings(_))) {
        Some(ctx.client.role_bindings().await?)
    } else {
        None
    };
    let keys = if prune || wants(|o| matches!(o, Object::ApiKey { .. })) {
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

/// A tenant as `diff` shows it: the labels when they are managed, and the spec sections the
/// file names.
fn tenant_view(labels: Option<&Labels>, sections: Value) -> Value {
    match labels {
        Some(labels) => json!({"metadata": {"labels": labels}, "spec": sections}),
        None => json!({ "spec": sections }),
    }
}

/// Compares every object with the server; refuses (before any write) what cannot be applied.
fn plan(objects: Vec<(Origin, Object)>, server: &Server, set: &SetArgs) -> Result<Plan> {
    let now = now_unix();
    let set_label = set.label()?;
    // The labels an object is applied with: the file's (or, when it gives none, the server's)
    // and the set's; `None` when neither the file nor `--applyset` manages them.
    let wanted_labels = |declared: Option<&Labels>, current: Option<&Labels>| -> Option<Labels> {
        if declared.is_none() && set_label.is_none() {
            return None;
        }
        let mut labels = declared.or(current).cloned().unwrap_or_default();
        labels.extend(set_label.clone());
        Some(labels)
    };
    let mut steps = Vec::new();
    for (origin, object) in objects {
        let mut create_labels = None;
        let (change, before, after) = match &object {
            Object::Tenant {
                name,
                sections,
                spec,
                labels,
            } => {
                let declared = serde_json::to_value(spec)?;
                let pick = |spec: &Value| -> Value {
                    let picked: Map<String, Value> = sections
                        .keys()
                        .map(|k| (k.clone(), spec.get(k).cloned().unwrap_or(Value::Null)))
                        .collect();
                    Value::Object(picked)
                };
                let wanted = pick(&declared);
                match server.tenants.iter().find(|t| &t.metadata.name == name) {
                    None => {
                        create_labels = wanted_labels(labels.as_ref(), None);
                        let after = tenant_view(create_labels.as_ref(), wanted);
                        (Change::Create, Value::Null, after)
                    }
                    Some(current) => {
                        let now_labels = &current.metadata.labels;
                        let labels = wanted_labels(labels.as_ref(), Some(now_labels));
                        let had = pick(&serde_json::to_value(&current.spec)?);
                        let changed: Map<String, Value> = wanted
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter(|(k, v)| had.get(k.as_str()) != Some(v))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        let relabel = labels.as_ref().filter(|l| *l != now_labels);
                        let before = tenant_view(labels.as_ref().map(|_| now_labels), had);
                        let after = tenant_view(labels.as_ref(), wanted);
                        if changed.is_empty() && relabel.is_none() {
                            (Change::Unchanged, before, after)
                        } else {
                            let mut body = json!({ "spec": changed });
                            if let Some(labels) = relabel {
                                body["labels"] = json!(labels);
                            }
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
            // A key's labels are given when it is minted and are not compared: a key cannot
            // change, and one minted before its file named a set is simply not pruned.
            Object::ApiKey { name, spec, .. } => {
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
        let object = match object {
            Object::ApiKey { name, spec, labels } => Object::ApiKey {
                labels: wanted_labels(Some(&labels), None).unwrap_or(labels),
                name,
                spec,
            },
            other => other,
        };
        steps.push(Step {
            origin,
            object,
            change,
            before: yaml(&before),
            after: yaml(&after),
            labels: create_labels,
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
            ..
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
    let prunes = match (&set_label, set.prune) {
        (Some((_, set)), true) => prunes(&steps, server, set)?,
        _ => Vec::new(),
    };
    Ok(Plan { steps, prunes })
}

/// The keys and tenants of the set `set` that the files no longer declare (keys first).
fn prunes(steps: &[Step], server: &Server, set: &str) -> Result<Vec<Prune>> {
    let of_set = |labels: &Labels| labels.get(APPLY_SET_LABEL).is_some_and(|s| s == set);
    let declared = |id: String| steps.iter().any(|s| s.object.id() == id);
    let mut out = Vec::new();
    let mut names: Vec<&str> = server
        .keys
        .iter()
        .filter(|k| of_set(&k.labels) && !declared(format!("apikey/{}", k.name)))
        .map(|k| k.name.as_str())
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        // Keys are revoked by name: every key of the name must be the set's.
        if let Some(other) = server
            .keys
            .iter()
            .find(|k| k.name == name && !of_set(&k.labels))
        {
            bail!(
                "apikey/{name} would be pruned, but key {} of that name is not labelled \
                 {APPLY_SET_LABEL}={set} and a revoke takes every key of a name: revoke them \
                 yourself (`sbx key revoke {name}`) or declare the key; nothing was applied",
                other.id
            );
        }
        out.push(Prune::Key(name.to_string()));
    }
    for tenant in &server.tenants {
        let name = &tenant.metadata.name;
        if of_set(&tenant.metadata.labels) && !declared(format!("tenant/{name}")) {
            let view = tenant_view(
                Some(&tenant.metadata.labels),
                serde_json::to_value(&tenant.spec)?,
            );
            out.push(Prune::Tenant {
                name: name.clone(),
                before: yaml(&view),
            });
        }
    }
    Ok(out)
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
    let server = server(ctx, &objects, args.set.prune).await?;
    let Plan { steps, prunes } = plan(objects, &server, &args.set)?;
    // A tenant with sandboxes is pruned only with --cascade (the server refuses it too).
    for prune in prunes.iter().filter(|_| !args.cascade) {
        let Prune::Tenant { name, .. } = prune else {
            continue;
        };
        let tenant = server.tenants.iter().find(|t| &t.metadata.name == name);
        let mut sandboxes = 0;
        for ns in tenant
            .map(|t| t.spec.namespaces.as_slice())
            .unwrap_or_default()
        {
            sandboxes += ctx.client.list_sandboxes(Some(ns)).await?.len();
        }
        if sandboxes > 0 {
            bail!(
                "tenant/{name} would be pruned but has {sandboxes} sandbox(es): pass --cascade \
                 to delete them with it, or declare the tenant; nothing was applied"
            );
        }
    }
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
    for (i, prune) in prunes.iter().enumerate() {
        let id = prune.id();
        if !args.dry_run {
            let done = match prune {
                Prune::Key(name) => ctx.client.revoke_keys(name).await.map(drop),
                Prune::Tenant { name, .. } => {
                    ctx.client.delete_tenant(name, args.cascade).await.map(drop)
                }
            };
            if let Err(e) = done {
                let rest: Vec<String> = prunes[i..].iter().map(Prune::id).collect();
                bail!(
                    "{id}: {e:#}\napplied: every object of the files and {}\nnot pruned: {}",
                    if i == 0 {
                        "no prune".to_string()
                    } else {
                        prunes[..i]
                            .iter()
                            .map(Prune::id)
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                    rest.join(", ")
                );
            }
        }
        println!("{id} pruned{suffix}");
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
                labels: step.labels.clone(),
            };
            ctx.client.create_tenant(&request).await?;
        }
        (Object::Tenant { name, .. }, Change::Configure(body)) => {
            ctx.client.patch_tenant(name, body).await?;
        }
        (Object::RoleBindings(document), _) => {
            ctx.client.put_role_bindings(document).await?;
        }
        (Object::ApiKey { name, spec, labels }, Change::Create) => {
            let request = CreateKeyRequest {
                labels: (!labels.is_empty()).then(|| labels.clone()),
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
        let server = server(ctx, &objects, args.set.prune).await?;
        plan(objects, &server, &args.set)
    }
    .await;
    let Plan { steps, prunes } = match outcome {
        Ok(plan) => plan,
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
    for prune in prunes {
        differs = true;
        let id = prune.id();
        if let Prune::Tenant { before, .. } = &prune {
            let diff = similar::TextDiff::from_lines(before.as_str(), "");
            print!(
                "{}",
                diff.unified_diff()
                    .context_radius(3)
                    .header(&format!("{id} (server)"), &format!("{id} (pruned)"))
            );
        }
        println!("# {id} is no longer in the files: it would be pruned");
    }
    Ok(ExitCode::from(u8::from(differs)))
}
