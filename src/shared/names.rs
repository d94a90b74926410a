//! Name rules of the contract: DNS-1123 labels for sandboxes, snapshots, tenants and
//! namespaces; DNS-1123 subdomains for nodes; key labels.

/// Checks a DNS-1123 label: 1–63 lowercase letters, digits and `-`, starting and ending
/// with a letter or digit. `what` names the field in the error message.
pub fn validate_dns_label(what: &str, value: &str) -> Result<(), String> {
    validate_label_with_max(what, value, 63)
}

/// Like [`validate_dns_label`] with a shorter maximum (a kql sandbox is at most 55 so that
/// `<name>-root-lh` fits).
pub fn validate_label_with_max(what: &str, value: &str, max: usize) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    if value.len() > max {
        return Err(format!(
            "{what} '{value}' is {} characters long; the maximum is {max}",
            value.len()
        ));
    }
    let ok_chars = value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends = value.as_bytes()[0].is_ascii_alphanumeric()
        && value.as_bytes()[value.len() - 1].is_ascii_alphanumeric();
    if !ok_chars || !ok_ends {
        return Err(format!(
            "{what} '{value}' is not a valid name: use lowercase letters, digits and '-', \
             starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Checks a DNS-1123 subdomain (node names): dot-separated labels, at most 253 characters.
pub fn validate_dns_subdomain(what: &str, value: &str) -> Result<(), String> {
    if value.len() > 253 {
        return Err(format!("{what} '{value}' is longer than 253 characters"));
    }
    value
        .split('.')
        .try_for_each(|part| validate_dns_label(what, part))
        .map_err(|_| {
            format!(
                "{what} '{value}' is not a valid node name: use lowercase letters, digits, \
                 '-' and '.'"
            )
        })
}

/// Checks an API key's label: 1–63 letters, digits, `-`, `_` or `.`.
pub fn validate_key_name(value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "key name '{value}' is not valid: use 1-63 letters, digits, '-', '_' or '.'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        for good in ["a", "default", "team-a", "x1", &"a".repeat(63)] {
            assert!(validate_dns_label("namespace", good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64), "é"] {
            assert!(validate_dns_label("namespace", bad).is_err(), "{bad}");
        }
        assert!(validate_label_with_max("sandbox name", &"a".repeat(56), 55).is_err());
        let msg = validate_dns_label("tenant name", "Bad").unwrap_err();
        assert!(msg.starts_with("tenant name 'Bad'"), "{msg}");
    }

    #[test]
    fn subdomains_and_key_names() {
        assert!(validate_dns_subdomain("node", "node-1.example.com").is_ok());
        assert!(validate_dns_subdomain("node", "node..1").is_err());
        assert!(validate_dns_subdomain("node", "Node").is_err());
        assert!(validate_key_name("ci-bot_2.prod").is_ok());
        assert!(validate_key_name("").is_err());
        assert!(validate_key_name("has space").is_err());
        assert!(validate_key_name("a/b").is_err());
    }
}
