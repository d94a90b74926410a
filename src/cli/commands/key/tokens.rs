//! Where a minted key's token goes when it is not printed: a new file only its owner reads,
//! or a Kubernetes Secret. Both are checked before the key is minted, so that a taken
//! destination mints nothing; the token itself is never logged.
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

/// The key of the token in a Secret written by `--token-secret`.
pub const SECRET_KEY: &str = "token";

/// The destinations of one token, checked.
pub struct Destinations {
    file: Option<(PathBuf, bool)>,
    secret: Option<(Api<Secret>, String, String, bool)>,
}

impl Destinations {
    /// Checks that each destination can take the token: the file does not exist (or may be
    /// replaced) and its directory does; the Secret's name is `NAMESPACE/NAME`, the
    /// kubeconfig works and the Secret does not exist (or may be replaced).
    pub async fn check(
        file: Option<&Path>,
        secret: Option<&str>,
        overwrite: bool,
    ) -> Result<Destinations> {
        let file = match file {
            Some(path) => {
                if path.exists() && !overwrite {
                    bail!(
                        "{} exists: pass --overwrite to replace it (no key was minted)",
                        path.display()
                    );
                }
                let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
                if let Some(dir) = dir {
                    if !dir.is_dir() {
                        bail!(
                            "the directory of {} does not exist (no key was minted)",
                            path.display()
                        );
                    }
                }
                Some((path.to_path_buf(), overwrite))
            }
            None => None,
        };
        let secret = match secret {
            Some(target) => {
                let (namespace, name) = parse_secret(target)?;
                let client = kube::Client::try_default().await.context(
                    "--token-secret writes with your kubeconfig, which could not be loaded",
                )?;
                let api: Api<Secret> = Api::namespaced(client, &namespace);
                let found = api
                    .get_opt(&name)
                    .await
                    .with_context(|| format!("reading the Secret {target}"))?;
                if found.is_some() && !overwrite {
                    bail!(
                        "the Secret {target} exists: pass --overwrite to replace it (no key was minted)"
                    );
                }
                Some((api, namespace, name, found.is_some()))
            }
            None => None,
        };
        Ok(Destinations { file, secret })
    }

    /// Writes the token to each destination; returns where it went, for people.
    pub async fn deliver(&self, token: &str) -> Result<Vec<String>> {
        let mut places = Vec::new();
        if let Some((path, overwrite)) = &self.file {
            write_file(path, token, *overwrite).with_context(|| {
                format!(
                    "the key was minted but its token could not be written to {}; revoke it \
                     with `sbx key revoke`",
                    path.display()
                )
            })?;
            places.push(format!("{} (mode 0600)", path.display()));
        }
        if let Some((api, namespace, name, exists)) = &self.secret {
            write_secret(api, name, token, *exists)
                .await
                .with_context(|| {
                    format!(
                        "the key was minted but its token could not be written to the Secret \
                         {namespace}/{name}; revoke it with `sbx key revoke`"
                    )
                })?;
            places.push(format!(
                "the Secret {namespace}/{name} (key `{SECRET_KEY}`)"
            ));
        }
        Ok(places)
    }
}

/// `NAMESPACE/NAME` of a Secret.
fn parse_secret(target: &str) -> Result<(String, String)> {
    match target.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => bail!("--token-secret takes NAMESPACE/NAME, not `{target}`"),
    }
}

/// The token and a newline, in a file only its owner reads and writes.
fn write_file(path: &Path, token: &str, overwrite: bool) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(0o600);
    if overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path)?;
    // A replaced file keeps its old mode through `open`: set it.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(token.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

async fn write_secret(api: &Api<Secret>, name: &str, token: &str, exists: bool) -> Result<()> {
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [(
                    "app.kubernetes.io/created-by".to_string(),
                    "sbx".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        string_data: Some([(SECRET_KEY.to_string(), token.to_string())].into()),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    if exists {
        let current = api.get(name).await?;
        secret.metadata.resource_version = current.metadata.resource_version;
        api.replace(name, &PostParams::default(), &secret).await?;
    } else {
        api.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_named_namespace_slash_name() {
        assert_eq!(
            parse_secret("ci/sbx-token").unwrap(),
            ("ci".to_string(), "sbx-token".to_string())
        );
        for bad in ["sbx-token", "/x", "ci/", "a/b/c"] {
            assert!(parse_secret(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_token_file_is_new_and_private_unless_replaced() {
        let dir = std::env::temp_dir().join(format!("sbx-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t");
        write_file(&path, "id_secret", false).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "id_secret\n");
        assert!(write_file(&path, "other", false).is_err());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_file(&path, "other", true).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "other\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
