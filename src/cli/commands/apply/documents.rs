//! Reading what `sbx apply -f` and `sbx diff -f` are given: files, directories or stdin,
//! each a stream of YAML (or JSON) documents; a document is one object, a list of objects
//! (what `sbx tenant list -o yaml` prints) or a `kind: List` with `items`. Every object is
//! checked before anything is sent, and a bad one is named with its file, line and field.
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::shared::labels::validate_tenancy;
use crate::shared::models::identity::{Role, RoleBindings};
use crate::shared::models::tenant::{TENANT_API_VERSION, TenantSpec};
use crate::shared::names::{validate_dns_label, validate_key_name};

/// Where an object was read: file and line of its document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: String,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// An API key to exist: never its token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeySpec {
    pub role: Role,
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Days until a minted key expires.
    #[serde(default = "default_expiry")]
    pub expires_days: i64,
}

fn default_expiry() -> i64 {
    90
}

/// One object of the files.
#[derive(Debug, Clone)]
pub enum Object {
    /// A tenant: the spec sections the file names (absent: left as they are; null: removed),
    /// and the whole spec as it reads.
    Tenant {
        name: String,
        sections: Map<String, Value>,
        spec: Box<TenantSpec>,
        /// `metadata.labels`, when the file gives them (absent: left as they are).
        labels: Option<Labels>,
    },
    /// The role-binding document (one per server).
    RoleBindings(RoleBindings),
    /// An API key, by name, with the labels it is minted with.
    ApiKey {
        name: String,
        spec: KeySpec,
        labels: Labels,
    },
}

/// Labels of a tenant or key.
pub type Labels = std::collections::BTreeMap<String, String>;

impl Object {
    /// `kind/name`, as the lines of `apply` print it.
    pub fn id(&self) -> String {
        match self {
            Object::Tenant { name, .. } => format!("tenant/{name}"),
            Object::RoleBindings(_) => "rolebindings".to_string(),
            Object::ApiKey { name, .. } => format!("apikey/{name}"),
        }
    }
}

/// Reads every object of `sources` (files, directories of `*.yaml`/`*.yml`/`*.json`, `-`).
pub fn read(sources: &[String]) -> Result<Vec<(Origin, Object)>> {
    let mut objects = Vec::new();
    for source in sources {
        if source == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .context("reading standard input")?;
            parse("<stdin>", &text, &mut objects)?;
            continue;
        }
        let path = Path::new(source);
        let files = if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading the directory {source}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
                })
                .collect();
            files.sort();
            files
        } else {
            vec![path.to_path_buf()]
        };
        for file in files {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            parse(&file.display().to_string(), &text, &mut objects)?;
        }
    }
    check_together(&objects)?;
    Ok(objects)
}

/// The documents of one file, each with the line it starts on.
fn split(text: &str) -> Vec<(usize, String)> {
    let mut documents = vec![(1, String::new())];
    for (i, line) in text.lines().enumerate() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            documents.push((i + 2, String::new()));
            continue;
        }
        let current = &mut documents.last_mut().expect("one document").1;
        current.push_str(line);
        current.push('\n');
    }
    documents
        .into_iter()
        .filter(|(_, d)| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .collect()
}

/// Parses one file's documents into `objects`.
pub fn parse(file: &str, text: &str, objects: &mut Vec<(Origin, Object)>) -> Result<()> {
    for (line, document) in split(text) {
        let value: Value = serde_yaml_ng::from_str(&document).map_err(|e| {
            let at = e.location().map(|l| line + l.line() - 1).unwrap_or(line);
            anyhow::anyhow!("{file}:{at}: not YAML or JSON: {e}")
        })?;
        let origin = Origin {
            file: file.to_string(),
            line,
        };
        let items = match value {
            Value::Array(items) => items,
            Value::Object(ref o) if o.get("kind").and_then(Value::as_str) == Some("List") => o
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            other => vec![other],
        };
        for item in items {
            let object = object(&item).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
            objects.push((origin.clone(), object));
        }
    }
    Ok(())
}

/// One object from its document, checked on its own.
fn object(value: &Value) -> Result<Object> {
    let Value::Object(map) = value else {
        bail!("a document must be an object with `kind`")
    };
    let text = |field: &str| map.get(field).and_then(Value::as_str);
    match text("apiVersion") {
        Some(TENANT_API_VERSION) => {}
        Some(other) => bail!("`apiVersion` must be {TENANT_API_VERSION}, not `{other}`"),
        None => bail!("`apiVersion` is missing (must be {TENANT_API_VERSION})"),
    }
    let name = |key: bool| -> Result<String> {
        let name = map
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .context("`metadata.name` is missing")?;
        if key {
            validate_key_name(name)
        } else {
            validate_dns_label("`metadata.name`", name)
        }
        .map_err(anyhow::Error::msg)?;
        Ok(name.to_string())
    };
    let spec = map.get("spec").cloned().unwrap_or(Value::Null);
    let labels = || -> Result<Option<Labels>> {
        let Some(labels) = map.get("metadata").and_then(|m| m.get("labels")) else {
            return Ok(None);
        };
        let labels: Labels = serde_json::from_value(labels.clone())
            .map_err(|e| anyhow::anyhow!("`metadata.labels`: {e}"))?;
        validate_tenancy(&labels).map_err(|e| anyhow::anyhow!("`metadata.labels`: {e}"))?;
        Ok(Some(labels))
    };
    match text("kind") {
        Some("Tenant") => {
            let name = name(false)?;
            let Value::Object(sections) = spec else {
                bail!("`spec` of tenant {name} must be an object")
            };
            let spec: TenantSpec = serde_json::from_value(Value::Object(sections.clone()))
                .map_err(|e| anyhow::anyhow!("`spec` of tenant {name}: {e}"))?;
            spec.validate()
                .map_err(|e| anyhow::anyhow!("tenant {name}: {e}"))?;
            Ok(Object::Tenant {
                name,
                sections,
                spec: Box::new(spec),
                labels: labels()?,
            })
        }
        Some("RoleBindings") => {
            let document: RoleBindings = serde_json::from_value(spec)
                .map_err(|e| anyhow::anyhow!("`spec` of the role bindings: {e}"))?;
            Ok(Object::RoleBindings(document))
        }
        Some("ApiKey") => {
            let name = name(true)?;
            let spec: KeySpec = serde_json::from_value(spec)
                .map_err(|e| anyhow::anyhow!("`spec` of key {name}: {e}"))?;
            if spec.expires_days <= 0 {
                bail!("`spec.expiresDays` of key {name} must be positive");
            }
            let scoped = matches!(spec.role, Role::ReadOnly | Role::User);
            if !scoped && spec.tenant.is_some() {
                bail!(
                    "`spec.tenant` of key {name}: a {} key is cluster-wide, it has no tenant",
                    spec.role
                );
            }
            Ok(Object::ApiKey {
                name,
                spec,
                labels: labels()?.unwrap_or_default(),
            })
        }
        Some(other) => bail!("unknown `kind` {other} (Tenant, RoleBindings or ApiKey)"),
        None => bail!("`kind` is missing (Tenant, RoleBindings or ApiKey)"),
    }
}

/// What only the whole set can tell: one object per name, one role-binding document, no
/// namespace owned by two tenants.
fn check_together(objects: &[(Origin, Object)]) -> Result<()> {
    let mut seen: Vec<(String, &Origin)> = Vec::new();
    let mut owners: Vec<(&str, &str, &Origin)> = Vec::new();
    for (origin, object) in objects {
        let id = object.id();
        if let Some((_, first)) = seen.iter().find(|(s, _)| *s == id) {
            bail!("{origin}: {id} is declared twice (first at {first})");
        }
        seen.push((id, origin));
        if let Object::Tenant { name, spec, .. } = object {
            for ns in &spec.namespaces {
                if let Some((_, other, at)) = owners.iter().find(|(n, _, _)| n == ns) {
                    bail!(
                        "{origin}: `spec.namespaces` of tenant {name}: namespace {ns} is also \
                         tenant {other}'s ({at})"
                    );
                }
                owners.push((ns, name, origin));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Vec<(Origin, Object)>> {
        let mut objects = Vec::new();
        parse("t.yaml", text, &mut objects)?;
        check_together(&objects)?;
        Ok(objects)
    }

    #[test]
    fn a_stream_of_documents_and_lists_reads_with_lines() {
        let objects = read_text(
            "apiVersion: sbx.io/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\n\
             spec: {namespaces: [acme]}\n---\n# keys\n---\n\
             - apiVersion: sbx.io/v1alpha1\n  kind: ApiKey\n  metadata: {name: ci}\n  \
             spec: {role: user, tenant: acme}\n",
        )
        .unwrap();
        let ids: Vec<(usize, String)> = objects.iter().map(|(o, x)| (o.line, x.id())).collect();
        assert_eq!(
            ids,
            [(1, "tenant/acme".to_string()), (8, "apikey/ci".to_string())]
        );
    }

    #[test]
    fn the_operations_guide_examples_read() {
        let guide = include_str!("../../../../docs/operations.md");
        let section = guide
            .split("## Tenancy as code")
            .nth(1)
            .expect("the section");
        let yaml: Vec<&str> = section
            .split("```yaml\n")
            .skip(1)
            .map(|block| block.split("```").next().unwrap())
            .collect();
        assert_eq!(yaml.len(), 1);
        let ids: Vec<String> = read_text(yaml[0])
            .unwrap()
            .into_iter()
            .map(|(_, o)| o.id())
            .collect();
        assert_eq!(ids, ["tenant/acme", "rolebindings", "apikey/acme-ci"]);
    }

    #[test]
    fn bad_documents_are_named_with_their_line_and_field() {
        let doc = |spec: &str| {
            format!(
                "---\napiVersion: sbx.io/v1alpha1\nkind: Tenant\nmetadata: {{name: acme}}\nspec: {spec}\n"
            )
        };
        for (text, wanted) in [
            (doc("{}"), "t.yaml:2: tenant acme: `spec.namespaces`"),
            (doc("{namespaces: [a], quotas: {vcpu: lots}}"), "t.yaml:2: tenant acme"),
            (doc("{namespaces: [a]}").replace("Tenant", "Tenat"), "unknown `kind` Tenat"),
            (doc("{namespaces: [a]}").replace("name: acme", "name: Acme"), "`metadata.name`"),
            (doc("[a: b"), "t.yaml:"),
            (
                format!("{}{}", doc("{namespaces: [a]}"), doc("{namespaces: [b]}")),
                "tenant/acme is declared twice",
            ),
            (
                format!(
                    "{}{}",
                    doc("{namespaces: [a]}"),
                    doc("{namespaces: [a]}").replace("acme", "beta")
                ),
                "t.yaml:7: `spec.namespaces` of tenant beta: namespace a is also tenant acme's (t.yaml:2)",
            ),
            (
                "apiVersion: sbx.io/v1alpha1\nkind: ApiKey\nmetadata: {name: ci}\nspec: {role: admin, tenant: acme}\n".to_string(),
                "cluster-wide",
            ),
            (
                "apiVersion: sbx.io/v1alpha1\nkind: ApiKey\nmetadata: {name: ci}\nspec: {role: user, token: x}\n".to_string(),
                "unknown field `token`",
            ),
        ] {
            let error = read_text(&text).unwrap_err().to_string();
            assert!(error.contains(wanted), "{error}\n  wanted: {wanted}\n{text}");
        }
    }
}
