//! The certificates of sbx's internal TLS ([`crate::shared::tls`]) on the cluster: made by the
//! first replica that starts without them, kept in two Secrets. `kube-system/sbx-internal-tls`
//! (next to the keys Secret, under the same RBAC) holds the CA's certificate and both pairs;
//! every replica reads it at start. The agents' pair alone is copied to the agents' namespace
//! (`sbx-agent-tls`, which `deploy/agent.yaml` mounts): an agent never holds the replicas'
//! key. The CA's key is never stored. Two replicas starting at once race on the create: the
//! one that loses reads the winner's Secret, so all replicas agree.
use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use super::{SYSTEM_NAMESPACE, kube_error};
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::shared::tls::{Generated, Pair};

/// The replicas' Secret, in [`SYSTEM_NAMESPACE`].
pub const SECRET: &str = "sbx-internal-tls";
/// The agents' Secret, in the agents' namespace.
pub const AGENT_SECRET: &str = "sbx-agent-tls";

const CA: &str = "ca.crt";
const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";
const AGENT_CERT: &str = "agent.crt";
const AGENT_KEY: &str = "agent.key";

/// The material from the replicas' Secret (made when missing), with the agents' Secret in
/// `agent_namespace` brought in step with it.
pub async fn ensure(client: &kube::Client, agent_namespace: &str) -> PlatformResult<Generated> {
    let replicas: Api<Secret> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let material = match replicas
        .get_opt(SECRET)
        .await
        .map_err(|e| kube_error(&format!("read the Secret {SYSTEM_NAMESPACE}/{SECRET}"), e))?
    {
        Some(secret) => parse(&secret)?,
        None => {
            let made = crate::shared::tls::generate().map_err(PlatformError::Unavailable)?;
            let secret = object(
                SECRET,
                SYSTEM_NAMESPACE,
                "Opaque",
                [
                    (CA, &made.ca_pem),
                    (CERT, &made.replica.cert_pem),
                    (KEY, &made.replica.key_pem),
                    (AGENT_CERT, &made.agent.cert_pem),
                    (AGENT_KEY, &made.agent.key_pem),
                ],
            );
            match replicas.create(&PostParams::default(), &secret).await {
                Ok(_) => {
                    tracing::info!(secret = %format!("{SYSTEM_NAMESPACE}/{SECRET}"), "made the internal TLS certificates");
                    made
                }
                // Another replica made them first: theirs.
                Err(kube::Error::Api(e)) if e.code == 409 => parse(
                    &replicas
                        .get(SECRET)
                        .await
                        .map_err(|e| kube_error(&format!("read the Secret {SECRET}"), e))?,
                )?,
                Err(e) => {
                    return Err(kube_error(
                        &format!("create the Secret {SYSTEM_NAMESPACE}/{SECRET}"),
                        e,
                    ));
                }
            }
        }
    };
    agents_in_step(client, agent_namespace, &material).await?;
    Ok(material)
}

/// Writes the agents' Secret unless it already holds the agents' pair of `material`.
async fn agents_in_step(
    client: &kube::Client,
    namespace: &str,
    material: &Generated,
) -> PlatformResult<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let what = format!("the Secret {namespace}/{AGENT_SECRET}");
    let mut wanted = object(
        AGENT_SECRET,
        namespace,
        "kubernetes.io/tls",
        [
            (CA, &material.ca_pem),
            (CERT, &material.agent.cert_pem),
            (KEY, &material.agent.key_pem),
        ],
    );
    for _ in 0..4 {
        let current = api
            .get_opt(AGENT_SECRET)
            .await
            .map_err(|e| kube_error(&format!("read {what}"), e))?;
        let written = match current {
            Some(current) if current.data == wanted.data => return Ok(()),
            Some(current) => {
                // Made from another CA (the replicas' Secret was deleted to rotate them).
                wanted.metadata.resource_version = current.metadata.resource_version;
                api.replace(AGENT_SECRET, &PostParams::default(), &wanted)
                    .await
            }
            None => api.create(&PostParams::default(), &wanted).await,
        };
        match written {
            Ok(_) => {
                tracing::info!(secret = %format!("{namespace}/{AGENT_SECRET}"), "wrote the agents' TLS certificate");
                return Ok(());
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(kube_error(&format!("write {what}"), e)),
        }
    }
    Err(PlatformError::Unavailable(format!(
        "{what} kept changing while it was written"
    )))
}

fn object<'a>(
    name: &str,
    namespace: &str,
    type_: &str,
    entries: impl IntoIterator<Item = (&'a str, &'a String)>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "sbx".to_string(),
            )])),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

/// The material of the replicas' Secret; a 500 naming the key that is missing or unusable.
fn parse(secret: &Secret) -> PlatformResult<Generated> {
    let data = secret.data.clone().unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .ok_or_else(|| {
                PlatformError::Unavailable(format!(
                    "the Secret {SYSTEM_NAMESPACE}/{SECRET} has no {key} (delete it: the next start makes new certificates)"
                ))
            })
    };
    let material = Generated {
        ca_pem: text(CA)?,
        replica: Pair {
            cert_pem: text(CERT)?,
            key_pem: text(KEY)?,
        },
        agent: Pair {
            cert_pem: text(AGENT_CERT)?,
            key_pem: text(AGENT_KEY)?,
        },
    };
    // Unusable material is an error at start, not at the first passed request.
    crate::shared::tls::server_config(&material.replica, Some(&material.ca_pem))
        .map_err(|e| PlatformError::Unavailable(format!("{SYSTEM_NAMESPACE}/{SECRET}: {e}")))?;
    Ok(material)
}
