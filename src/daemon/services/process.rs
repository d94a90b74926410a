//! The process a create asks for: its environment (an env file on the API host, then the
//! `env` map over it) and its `entrypoint`/`cmd`. Errors name a variable or line, never a
//! value.
use std::path::Path;

/// Largest env file read.
pub const MAX_ENV_FILE_BYTES: u64 = 1024 * 1024;

/// Parses an env file: `KEY=VALUE` lines, `#` comments, blank lines, an optional `export `
/// prefix, values optionally in matching single or double quotes. Errors name the line,
/// never a value. Not `dotenvy`: it expands `$VAR` from the reading process's environment,
/// which here would copy the API server's own environment into a tenant's sandbox.
pub fn parse_env_file(text: &str) -> Result<Vec<String>, String> {
    let mut env = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: expected KEY=VALUE", index + 1));
        };
        let key = key.trim();
        if !valid_env_name(key) {
            return Err(format!(
                "line {}: '{key}' is not a valid variable name",
                index + 1
            ));
        }
        let value = value.trim();
        let value = match (value.chars().next(), value.chars().last()) {
            (Some(q @ ('"' | '\'')), Some(end)) if value.len() >= 2 && end == q => {
                &value[1..value.len() - 1]
            }
            _ => value,
        };
        env.push(format!("{key}={value}"));
    }
    Ok(env)
}

/// A variable name: letters, digits and `_`, not starting with a digit.
fn valid_env_name(key: &str) -> bool {
    !key.is_empty()
        && !key.as_bytes()[0].is_ascii_digit()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The environment of a create: the env file's, then the inline map's over it (a name in
/// both takes the map's value). Errors name a variable, never a value.
pub(super) fn create_env(
    file: Option<&str>,
    inline: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Vec<String>, String> {
    let mut env = match file {
        Some(path) => read_env_file(path)?,
        None => Vec::new(),
    };
    for (key, value) in inline.into_iter().flatten() {
        if !valid_env_name(key) {
            return Err(format!(
                "env: '{key}' is not a valid variable name (letters, digits and '_', not starting with a digit)"
            ));
        }
        if value.contains('\0') {
            return Err(format!("env: the value of '{key}' contains a NUL byte"));
        }
        env.retain(|e| e.split_once('=').map(|(k, _)| k) != Some(key.as_str()));
        env.push(format!("{key}={value}"));
    }
    Ok(env)
}

/// An `entrypoint` or `cmd` of a create: no word with a NUL, and an entrypoint that names
/// a program (a first word that is not empty).
pub(super) fn command_field(
    field: &str,
    value: Option<&Vec<String>>,
) -> Result<Option<Vec<String>>, String> {
    let Some(words) = value else {
        return Ok(None);
    };
    if field == "entrypoint" && words.first().is_none_or(|w| w.is_empty()) {
        return Err(
            "`entrypoint` must name a program: a non-empty list whose first word is not empty"
                .into(),
        );
    }
    if words.iter().any(|w| w.contains('\0')) {
        return Err(format!("`{field}` contains a NUL byte"));
    }
    Ok(Some(words.clone()))
}

/// Reads and parses the env file at `path` on the API host.
pub fn read_env_file(path: &str) -> Result<Vec<String>, String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(format!(
            "bad env file '{path}': give an absolute path on the API host"
        ));
    }
    let meta = std::fs::metadata(p).map_err(|e| format!("bad env file '{path}': {e}"))?;
    if !meta.is_file() {
        return Err(format!("bad env file '{path}': not a regular file"));
    }
    if meta.len() > MAX_ENV_FILE_BYTES {
        return Err(format!("bad env file '{path}': larger than 1 MiB"));
    }
    let text = std::fs::read_to_string(p).map_err(|e| format!("bad env file '{path}': {e}"))?;
    parse_env_file(&text).map_err(|e| format!("bad env file '{path}': {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_files() {
        let env =
            parse_env_file("# c\n\nA=1\nexport B = two words \nC=\"q v\"\nD='x'\nE=\nF=a=b\n")
                .unwrap();
        assert_eq!(env, ["A=1", "B=two words", "C=q v", "D=x", "E=", "F=a=b"]);
        let err = parse_env_file("A=1\nnot a pair\n").unwrap_err();
        assert_eq!(err, "line 2: expected KEY=VALUE");
        let err = parse_env_file("1A=secret\n").unwrap_err();
        assert!(err.contains("1A") && !err.contains("secret"), "{err}");
        assert!(
            read_env_file("relative.env")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(
            read_env_file("/nonexistent/x.env")
                .unwrap_err()
                .contains("bad env file")
        );
    }
}
