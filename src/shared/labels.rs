//! Sandbox labels and the selectors that list by them, with Kubernetes' syntax (a label is a
//! Deployment label on Kubernetes, so it follows the same rules everywhere).
use std::collections::BTreeMap;

/// Labels a sandbox may carry.
pub const MAX_LABELS: usize = 64;

/// Key prefixes that belong to sbx or Kubernetes, refused on user labels.
const RESERVED: [&str; 3] = ["sbx.io", "kubernetes.io", "k8s.io"];

/// A label name or value part: at most 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn valid_segment(text: &str) -> bool {
    let bytes = text.as_bytes();
    !text.is_empty()
        && text.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// A label key's syntax, `[prefix/]name` with a DNS subdomain as the prefix: the prefix.
fn key_syntax(key: &str) -> Result<Option<&str>, String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if !valid_segment(name) {
        return Err(format!(
            "label key '{key}': the name is 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    if let Some(prefix) = prefix {
        crate::shared::names::validate_dns_subdomain("label key prefix", prefix)
            .map_err(|e| format!("label key '{key}': {e}"))?;
    }
    Ok(prefix)
}

/// A label key a sandbox may carry: the syntax, and a prefix outside the reserved ones.
pub fn validate_key(key: &str) -> Result<(), String> {
    key_syntax(key)?;
    {
        if is_reserved(key) {
            return Err(format!(
                "label key '{key}': the prefixes {} are reserved",
                RESERVED.join(", ")
            ));
        }
    }
    Ok(())
}

/// Whether `key` has a reserved prefix (sbx's own labels, Kubernetes').
pub fn is_reserved(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        RESERVED
            .iter()
            .any(|r| prefix == *r || prefix.ends_with(&format!(".{r}")))
    })
}

/// The user's labels among an object's: those without a reserved prefix.
pub fn user_labels(all: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    all.into_iter()
        .flatten()
        .filter(|(k, _)| !is_reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A label value: empty, or a name part.
pub fn validate_value(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || valid_segment(value) {
        Ok(())
    } else {
        Err(format!(
            "label '{key}': the value is at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ))
    }
}

/// The label `sbx apply --applyset` writes on the tenants and keys it applies: the one key of
/// a reserved prefix a client may set, on tenants and keys only.
pub const APPLY_SET: &str = "sbx.io/apply-set";

/// Every label of a tenant or key: a sandbox's rules, and [`APPLY_SET`].
pub fn validate_tenancy(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let others: BTreeMap<String, String> = labels
        .iter()
        .filter(|(k, _)| k.as_str() != APPLY_SET)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if labels.len() > MAX_LABELS {
        return Err(format!("at most {MAX_LABELS} labels"));
    }
    if let Some(set) = labels.get(APPLY_SET) {
        validate_value(APPLY_SET, set)?;
    }
    validate(&others)
}

/// Every label of a create.
pub fn validate(labels: &BTreeMap<String, String>) -> Result<(), String> {
    if labels.len() > MAX_LABELS {
        return Err(format!("at most {MAX_LABELS} labels"));
    }
    for (key, value) in labels {
        validate_key(key)?;
        validate_value(key, value)?;
    }
    Ok(())
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
}

/// A label selector: `key=value`, `key==value`, `key!=value`, `key` (has it) and `!key` (has
/// not), comma-separated, all of them to match — Kubernetes' equality-based selectors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses a selector; the error names the requirement it cannot read.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            // As in Kubernetes, the empty selector selects everything.
            return Ok(Selector(requirements));
        }
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(format!("label selector '{text}' has an empty requirement"));
            }
            let requirement = if let Some(key) = part.strip_prefix('!') {
                Requirement::Absent(key.trim().to_string())
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) =
                part.split_once("==").or_else(|| part.split_once('='))
            {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else {
                Requirement::Exists(part.to_string())
            };
            let (key, value) = match &requirement {
                Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => (k, Some(v)),
                Requirement::Exists(k) | Requirement::Absent(k) => (k, None),
            };
            key_syntax(key).map_err(|e| format!("label selector '{text}': {e}"))?;
            if let Some(value) = value {
                validate_value(key, value).map_err(|e| format!("label selector '{text}': {e}"))?;
            }
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_values_and_reserved_prefixes() {
        assert!(
            validate(&labels(&[
                ("team", "ml"),
                ("example.com/tier", ""),
                ("a.b_c-d", "x.y")
            ]))
            .is_ok()
        );
        for (k, v) in [
            ("", "x"),
            ("-a", "x"),
            ("a/", "x"),
            ("UPPER_prefix.com/x", "y"),
            ("t", "-bad"),
            ("t", &"v".repeat(64)),
        ] {
            assert!(validate(&labels(&[(k, v)])).is_err(), "{k}={v}");
        }
        for k in ["sbx.io/sandbox", "app.kubernetes.io/name", "node.k8s.io/x"] {
            assert!(
                validate(&labels(&[(k, "x")]))
                    .unwrap_err()
                    .contains("reserved"),
                "{k}"
            );
        }
    }

    #[test]
    fn selectors() {
        let ml = labels(&[("team", "ml"), ("tier", "gpu")]);
        let web = labels(&[("team", "web")]);
        let check = |s: &str| {
            let sel = Selector::parse(s).unwrap();
            (sel.matches(&ml), sel.matches(&web))
        };
        assert_eq!(check("team=ml"), (true, false));
        assert_eq!(check("team==web"), (false, true));
        assert_eq!(check("team!=ml"), (false, true));
        assert_eq!(check("tier"), (true, false));
        assert_eq!(check("!tier"), (false, true));
        assert_eq!(check("team=ml, tier=gpu"), (true, false));
        assert_eq!(check("team=ml,tier=cpu"), (false, false));
        assert_eq!(
            check(""),
            (true, true),
            "the empty selector selects everything"
        );
        for bad in ["team=ml,", "te am=x", "team=-x", "=x", ","] {
            assert!(Selector::parse(bad).is_err(), "{bad:?}");
        }
    }
}
