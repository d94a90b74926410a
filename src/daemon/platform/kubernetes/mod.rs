//! The Kubernetes platform: the service's state as Kubernetes objects, read and written
//! through the API server with kube-rs. API keys live in the Secret `sbx-api-keys` and the
//! first admin token in `sbx-bootstrap-admin` (both in `kube-system`), role bindings in the
//! ConfigMap `sbx-role-bindings`, tenants are `Tenant` objects (`tenants.sbx.io`, cluster
//! scoped) whose namespaces are created and labelled `sbx.io/tenant`, node dedication is a
//! node label plus a `NoSchedule` taint. Sandboxes are Deployments (with a root PVC
//! `<sandbox>-root-lh` on kql), snapshots VolumeSnapshots of that PVC (`workloads`); a leader
//! Lease picks the replica that runs the periodic work, per-tenant Leases serialise quota
//! checks across replicas (`lease`).
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ResourceQuota, Secret, Taint};
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};

mod agents;
mod cache;
mod identity;
pub mod install;
pub mod internal_tls;
mod kubelet;
mod launch;
mod lease;
mod lifetimes;
pub mod namespaces;
pub mod objects;
pub mod permissions;
mod policies;
use objects::names::TENANT_LABEL;
mod sandboxes;
mod sbxd;
mod sbxd_snapshots;
mod snapshots;
mod streams;
mod tenants;
mod volumes;
mod workloads;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::NetworkPolicy;

use crate::daemon::config::KubernetesSettings;
use crate::daemon::mirror::Mirror;
use crate::daemon::platform::{
    HeldLock, MeterSample, Metering, NewSandbox, Platform, PlatformError, PlatformResult,
    Reservation, RestorePlan, StoredKey, StoredTenant,
};
use crate::shared::models::identity::{ApiKey, RoleBindings};
use crate::shared::models::node::NodeStorage;
use crate::shared::models::sandbox::{ExecResponse, Sandbox, SandboxMetrics};
use crate::shared::models::snapshot::{GcResult, Snapshot, SnapshotKind};
use crate::shared::models::tenant::TenantStatus;

/// Namespace of the service's own objects.
pub const SYSTEM_NAMESPACE: &str = "kube-system";
/// Secret holding the API keys (hashes only).
pub const KEYS_SECRET: &str = "sbx-api-keys";
/// Secret holding the first admin token.
pub const BOOTSTRAP_SECRET: &str = "sbx-bootstrap-admin";
/// ConfigMap holding the role-binding document.
pub const BINDINGS_CONFIGMAP: &str = "sbx-role-bindings";
/// Kata QEMU with a Longhorn root volume: the default backend here.
pub const KQL_BACKEND: &str = "kata-qemu-longhorn";
/// Kata Firecracker with devmapper storage.
pub const KFD_BACKEND: &str = "kata-firecracker-devmapper";
/// sbxd, run by the sbx agent of a node.
pub const SBXD_BACKEND: &str = objects::sbxd::BACKEND;
/// Field manager of every write.
pub const FIELD_MANAGER: &str = "sbx";
/// StorageClass of a kql sandbox's root PVC.
pub const STORAGE_CLASS: &str = "longhorn";
/// VolumeSnapshotClass of every snapshot.
pub const SNAPSHOT_CLASS: &str = "longhorn";

const BINDINGS_KEY: &str = "bindings.json";
/// The backstop ResourceQuota of a single-namespace tenant (tenant rule 9).
pub const QUOTA_NAME: &str = "sbx-tenant-quota";
/// `last_used` is written back at most this often per key (every use would be a Secret write).
const TOUCH_EVERY: i64 = 60;

/// A key as kept in the Secret, one data entry per key id.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeyEntry {
    #[serde(flatten)]
    key: ApiKey,
    secret_sha256: String,
}

fn kube_error(what: &str, e: kube::Error) -> PlatformError {
    match &e {
        kube::Error::Api(status) if status.code == 404 => {
            PlatformError::NotFound(format!("{what}: not found"))
        }
        kube::Error::Api(status) if status.code == 409 => {
            PlatformError::AlreadyExists(format!("{what}: {}", status.message))
        }
        kube::Error::Api(status) if status.code == 422 || status.code == 400 => {
            PlatformError::Invalid(format!("{what}: {}", status.message))
        }
        // A ResourceQuota's admission refusal (e.g. a tenant's backstop `sbx-tenant-quota`):
        // its message names the quota, what was asked and what is used.
        kube::Error::Api(status)
            if status.code == 403 && status.message.contains("exceeded quota") =>
        {
            PlatformError::QuotaExceeded(format!("{what}: {}", status.message))
        }
        kube::Error::Api(_) => PlatformError::Store(format!("{what}: {e}")),
        _ => PlatformError::Unavailable(format!(
            "{what}: the Kubernetes API server is unreachable: {e}"
        )),
    }
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}

/// The label selector of everything sbx made (`app.kubernetes.io/managed-by=sbx`).
fn managed_selector() -> String {
    format!("{}={FIELD_MANAGER}", objects::names::MANAGED_LABEL)
}

/// A list of what sbx made.
fn managed() -> ListParams {
    ListParams::default().labels(&managed_selector())
}

/// The objects of sbx (by the managed-by label) `api` lists, read from the API server, shared
/// as the watch caches share theirs.
async fn read_managed<K>(api: Api<K>, what: &str) -> PlatformResult<Vec<Arc<K>>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list(&managed())
        .await
        .map_err(|e| kube_error(what, e))?
        .items
        .into_iter()
        .map(Arc::new)
        .collect())
}

/// The sandbox a Pod belongs to (its `sbx.io/sandbox` label).
fn sandbox_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(objects::names::SANDBOX_LABEL)
        .map(String::as_str)
}

fn missing(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 404)
}

/// Reads an object, changes it and writes it back, again from the read when another writer
/// got in between (409); 404 when it does not exist. `what` names it in errors.
async fn replace_with_retry<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    mut change: impl FnMut(&mut K),
) -> PlatformResult<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    for _ in 0..8 {
        let mut object = api
            .get_opt(name)
            .await
            .map_err(|e| kube_error(what, e))?
            .ok_or_else(|| PlatformError::NotFound(format!("{what} not found")))?;
        change(&mut object);
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(()),
            Err(e) if conflict(&e) => continue,
            Err(e) => return Err(kube_error(what, e)),
        }
    }
    Err(PlatformError::Store(format!(
        "{what} kept changing under a write"
    )))
}

/// `HOST:PORT` for an address the cluster reports (a node's or a Pod's; IPv6 in brackets).
fn host_port(address: &str, port: u16) -> String {
    match address.parse::<std::net::IpAddr>() {
        Ok(ip) => std::net::SocketAddr::new(ip, port).to_string(),
        Err(_) => format!("{address}:{port}"),
    }
}

/// State in a Kubernetes cluster.
pub struct KubernetesPlatform {
    client: kube::Client,
    /// The internal TLS certificates, when `[kubernetes] internalTls` is on.
    internal_tls: Option<crate::shared::tls::Generated>,
    touched: Mutex<HashMap<String, i64>>,
    /// When this replica last wrote each sandbox's activity annotation, unix seconds.
    activity_written: Mutex<HashMap<(String, String), i64>>,
    /// Node dedications as last read: every create asks, and listing Nodes costs tens of
    /// milliseconds here. A dedication's write drops it once the Node has it.
    dedications: Mirror<BTreeMap<String, String>>,
    /// The `[kubernetes]` settings.
    settings: KubernetesSettings,
    /// This replica's name in Leases (host name, PID and a random part).
    identity: String,
    /// The quota and bootstrap Leases as this replica last wrote them and as watched.
    leases: lease::Known,
    /// This replica's claim on the leader Lease.
    leader: lease::Leader,
    /// When the API server last answered a readiness check (see [`SLOW_GRACE`]).
    answered: Mutex<Option<std::time::Instant>>,
    /// Sandbox Deployments as watched.
    deployment_cache: cache::Cache<Deployment>,
    /// Their Pods as watched.
    pod_cache: cache::Cache<Pod>,
    /// The records of sbxd sandboxes (`SbxdSandbox`) as watched.
    sbxd_cache: cache::Cache<objects::sbxd::SbxdSandboxObject>,
    /// The records of sbxd snapshots (`SbxdSnapshot`) as watched.
    sbxd_snapshot_cache: cache::Cache<objects::sbxd::SbxdSnapshotObject>,
    /// Sandbox VolumeSnapshots as watched.
    snapshot_cache: cache::Cache<DynamicObject>,
    /// sbx's NetworkPolicies (names only) as watched: the leader puts back a missing one.
    policy_cache: cache::Cache<NetworkPolicy>,
    /// The kubelets' stats summaries (bytes each sandbox sent).
    kubelets: kubelet::Kubelets,
    /// The nodes' agents (node storage).
    agents: agents::Agents,
    /// Remote install, when `[kubernetes.install]` turns it on.
    installer: Option<Arc<install::KubeInstaller>>,
    /// The watch of the keys Secret (RBAC: list and watch of that name only): a key made or
    /// revoked on one replica works or stops on every other within the watch's delay.
    key_changes: cache::Changes,
    /// The watch of the Tenant objects: a tenant made on one replica governs the others at
    /// once.
    tenant_changes: cache::Changes,
    /// Who the daemon is, as a RoleBinding subject (`namespaces`).
    subject: tokio::sync::OnceCell<serde_json::Value>,
    /// The namespaces where this process has bound the daemon's tenant rules.
    bound_namespaces: Mutex<std::collections::HashSet<String>>,
    /// Per runtime handler, whether every sandbox node takes user namespaces, and when read.
    userns_support: Mutex<Option<(std::time::Instant, HashMap<String, bool>)>>,
}

/// How long a readiness check waits for the API server's answer.
const ANSWER_WITHIN: Duration = Duration::from_millis(800);

/// How long after its last answer an API server that does not answer within [`ANSWER_WITHIN`]
/// still counts as answering: a saturated API server is slow, not lost, and every replica
/// leaving its Service at once would make slowness an outage. One that refuses or fails counts
/// as lost at once.
const SLOW_GRACE: Duration = Duration::from_secs(30);

/// How long a read of the node dedications is reused (another replica's change shows
/// within this).
const DEDICATIONS_TTL: Duration = Duration::from_secs(5);

impl KubernetesPlatform {
    /// Connects with the kubeconfig in `KUBECONFIG` (or `~/.kube/config`, or the pod's service
    /// account) and checks that the API server answers.
    pub async fn connect(settings: KubernetesSettings) -> PlatformResult<KubernetesPlatform> {
        let unconfigured = |e: String| {
            PlatformError::Unavailable(format!(
                "cannot configure a Kubernetes client (KUBECONFIG, ~/.kube/config or in-cluster): {e}"
            ))
        };
        let config = kube::Config::infer()
            .await
            .map_err(|e| unconfigured(e.to_string()))?;
        let kubelets = kubelet::Kubelets::new(&config);
        let client = kube::Client::try_from(config).map_err(|e| unconfigured(e.to_string()))?;
        let version = tokio::time::timeout(Duration::from_secs(15), client.apiserver_version())
            .await
            .map_err(|_| {
                PlatformError::Unavailable(
                    "the Kubernetes API server did not answer within 15 s".into(),
                )
            })?
            .map_err(|e| {
                PlatformError::Unavailable(format!("the Kubernetes API server is unreachable: {e}"))
            })?;
        tracing::info!(version = %version.git_version, "connected to the Kubernetes API server");
        let missing = permissions::missing(&client).await;
        if !missing.is_empty() {
            return Err(PlatformError::Unavailable(format!(
                "this cluster is not ready for sbx (apply deploy/, see docs/operations.md):\n  {}",
                missing.join("\n  ")
            )));
        }
        let mut nonce = [0u8; 4];
        getrandom::fill(&mut nonce)
            .map_err(|e| PlatformError::Unavailable(format!("getrandom: {e}")))?;
        let identity = format!(
            "{}-{}-{}",
            crate::daemon::platform::host_node_name(),
            std::process::id(),
            hex::encode(nonce)
        );
        let internal_tls = match settings.internal_tls {
            true => Some(internal_tls::ensure(&client, &settings.agents.namespace).await?),
            false => None,
        };
        let managed = managed_selector();
        Ok(KubernetesPlatform {
            agents: agents::Agents::new(&settings.agents, internal_tls.as_ref())?,
            internal_tls,
            leader: lease::Leader::start(client.clone(), identity.clone()),
            leases: lease::Known::watching(client.clone()),
            deployment_cache: cache::Cache::start(
                Api::all(client.clone()),
                &managed,
                "sandbox Deployments",
            ),
            pod_cache: cache::Cache::start(Api::all(client.clone()), &managed, "sandbox Pods"),
            sbxd_cache: cache::Cache::start(
                Api::all(client.clone()),
                &managed,
                "sbxd sandbox records",
            ),
            sbxd_snapshot_cache: cache::Cache::start(
                Api::all(client.clone()),
                &managed,
                "sbxd snapshot records",
            ),
            snapshot_cache: cache::Cache::start(
                Api::all_with(client.clone(), &objects::snapshots::resource()),
                &managed,
                "sandbox VolumeSnapshots",
            ),
            policy_cache: cache::Cache::start(
                Api::all(client.clone()),
                &managed,
                "sbx NetworkPolicies",
            ),
            kubelets,
            installer: settings
                .install
                .clone()
                .map(|i| Arc::new(install::KubeInstaller::new(client.clone(), i))),
            key_changes: cache::Changes::start(
                Api::<Secret>::namespaced(client.clone(), SYSTEM_NAMESPACE),
                kube::runtime::watcher::Config::default()
                    .fields(&format!("metadata.name={KEYS_SECRET}")),
                "the keys Secret",
            ),
            tenant_changes: cache::Changes::start(
                Api::<objects::tenants::TenantObject>::all(client.clone()),
                kube::runtime::watcher::Config::default(),
                "Tenants",
            ),
            subject: tokio::sync::OnceCell::new(),
            bound_namespaces: Mutex::new(Default::default()),
            userns_support: Mutex::new(None),
            client,
            touched: Mutex::new(HashMap::new()),
            answered: Mutex::new(Some(std::time::Instant::now())),
            activity_written: Mutex::new(HashMap::new()),
            dedications: Mirror::new(),
            settings,
            identity,
        })
    }

    fn deployments(&self, namespace: Option<&str>) -> Api<Deployment> {
        match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// The sandbox Deployments of a namespace (all when `None`), by namespace then name;
    /// shared with the watch cache (no copies of 1,000 objects for a list).
    async fn sandbox_deployments(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<Deployment>>> {
        match self.deployment_cache.list(namespace) {
            Some(list) => Ok(list),
            None => {
                let mut list = self.read_sandbox_deployments(namespace).await?;
                list.sort_by(|a, b| {
                    (&a.metadata.namespace, &a.metadata.name)
                        .cmp(&(&b.metadata.namespace, &b.metadata.name))
                });
                Ok(list)
            }
        }
    }

    /// The sandbox Deployments of a namespace (all when `None`), read from the API server.
    async fn read_sandbox_deployments(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<Deployment>>> {
        read_managed(self.deployments(namespace), "list sandboxes").await
    }

    /// The sandboxes' Pods of a namespace (all when `None`; of one sandbox with `sandbox`),
    /// by (namespace, sandbox).
    async fn sandbox_pods(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
    ) -> PlatformResult<HashMap<(String, String), Vec<Arc<Pod>>>> {
        let cached = self.pod_cache.list_where(namespace, |p| {
            sandbox.is_none_or(|s| sandbox_of(p) == Some(s))
        });
        let pods: Vec<Arc<Pod>> = match cached {
            Some(pods) => pods,
            None => {
                let api: Api<Pod> = match namespace {
                    Some(ns) => Api::namespaced(self.client.clone(), ns),
                    None => Api::all(self.client.clone()),
                };
                let selector = match sandbox {
                    Some(s) => format!(
                        "{},{}={s}",
                        managed_selector(),
                        objects::names::SANDBOX_LABEL
                    ),
                    None => managed_selector(),
                };
                api.list(&ListParams::default().labels(&selector))
                    .await
                    .map_err(|e| kube_error("list sandbox pods", e))?
                    .items
                    .into_iter()
                    .map(Arc::new)
                    .collect()
            }
        };
        let mut by_sandbox: HashMap<(String, String), Vec<Arc<Pod>>> = HashMap::new();
        for pod in pods {
            if let (Some(ns), Some(sandbox)) = (pod.metadata.namespace.clone(), sandbox_of(&pod)) {
                let sandbox = sandbox.to_string();
                by_sandbox.entry((ns, sandbox)).or_default().push(pod);
            }
        }
        Ok(by_sandbox)
    }

    /// The records of these Deployments, with what their Pods say.
    async fn records(
        &self,
        namespace: Option<&str>,
        deployments: &[Arc<Deployment>],
    ) -> PlatformResult<Vec<Sandbox>> {
        // One sandbox: its own Pods only.
        let only = match deployments {
            [one] => one.metadata.name.as_deref(),
            _ => None,
        };
        let pods = self.sandbox_pods(namespace, only).await?;
        let now = crate::shared::timestamp::now_unix();
        Ok(deployments
            .iter()
            .map(|d| {
                let key = (
                    d.metadata.namespace.clone().unwrap_or_default(),
                    d.metadata.name.clone().unwrap_or_default(),
                );
                let own: Vec<&Pod> = pods
                    .get(&key)
                    .map(|p| p.iter().map(|p| p.as_ref()).collect())
                    .unwrap_or_default();
                objects::sandboxes::sandbox(d, &objects::sandboxes::pod_view(&own), now)
            })
            .collect())
    }

    /// One sandbox's Deployment (404 worded as for a missing sandbox).
    async fn sandbox_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Arc<Deployment>> {
        let missing = || {
            PlatformError::NotFound(format!(
                "sandbox '{name}' not found in namespace '{namespace}'"
            ))
        };
        // A miss is read again from the API server: a sandbox just made by another replica
        // may not have reached this replica's watch yet.
        let found = match self.deployment_cache.get(namespace, name) {
            Some(cached) => Some(cached),
            None => self
                .deployments(Some(namespace))
                .get_opt(name)
                .await
                .map_err(|e| kube_error(&format!("sandbox {name}"), e))?
                .map(Arc::new),
        }
        .ok_or_else(missing)?;
        let managed = found
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(objects::names::MANAGED_LABEL))
            .is_some_and(|v| v == FIELD_MANAGER);
        if managed { Ok(found) } else { Err(missing()) }
    }

    async fn scale(&self, namespace: &str, name: &str, replicas: i32) -> PlatformResult<()> {
        let patch = serde_json::json!({"spec": {"replicas": replicas}});
        let written = self
            .deployments(Some(namespace))
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| kube_error(&format!("sandbox {name}"), e))?;
        self.deployment_cache
            .settled(
                namespace,
                name,
                written.metadata.resource_version.as_deref(),
            )
            .await;
        Ok(())
    }

    /// Server-side applies a namespaced object given as JSON.
    async fn apply_in(&self, namespace: &str, object: serde_json::Value) -> PlatformResult<()> {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let outcome = match kind.as_str() {
            "Secret" => Api::<Secret>::namespaced(self.client.clone(), namespace)
                .patch(&name, &params, &Patch::Apply(&object))
                .await
                .map(drop),
            _ => Api::<NetworkPolicy>::namespaced(self.client.clone(), namespace)
                .patch(&name, &params, &Patch::Apply(&object))
                .await
                .map(drop),
        };
        outcome.map_err(|e| kube_error(&format!("{kind} {name}"), e))
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), SYSTEM_NAMESPACE)
    }

    fn tenants(&self) -> Api<objects::tenants::TenantObject> {
        Api::all(self.client.clone())
    }

    /// Reads, changes and writes the keys Secret, retrying on a concurrent write.
    async fn update_keys<T>(
        &self,
        mut change: impl FnMut(&mut BTreeMap<String, ByteString>) -> PlatformResult<T>,
    ) -> PlatformResult<T> {
        let api = self.secrets();
        for _ in 0..8 {
            let current = api
                .get_opt(KEYS_SECRET)
                .await
                .map_err(|e| kube_error("read the keys Secret", e))?;
            let exists = current.is_some();
            let mut secret = current.unwrap_or_else(|| Secret {
                metadata: ObjectMeta {
                    name: Some(KEYS_SECRET.into()),
                    namespace: Some(SYSTEM_NAMESPACE.into()),
                    ..Default::default()
                },
                type_: Some("Opaque".into()),
                ..Default::default()
            });
            let mut data = secret.data.take().unwrap_or_default();
            let outcome = change(&mut data)?;
            secret.data = Some(data);
            let written = if exists {
                api.replace(KEYS_SECRET, &PostParams::default(), &secret)
                    .await
            } else {
                api.create(&PostParams::default(), &secret).await
            };
            match written {
                Ok(_) => return Ok(outcome),
                Err(e) if conflict(&e) => continue,
                Err(e) => return Err(kube_error("write the keys Secret", e)),
            }
        }
        Err(PlatformError::Store(
            "the keys Secret kept changing under a write".into(),
        ))
    }

    /// Removes the backstop ResourceQuota from these namespaces (where there is one).
    async fn drop_backstop_quotas(&self, namespaces: &[String]) -> PlatformResult<()> {
        for namespace in namespaces {
            let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), namespace);
            match api.delete(QUOTA_NAME, &Default::default()).await {
                Ok(_) => {}
                Err(e) if missing(&e) => {}
                Err(e) => return Err(kube_error("delete the tenant's ResourceQuota", e)),
            }
        }
        Ok(())
    }

    /// Takes the tenant's label off its namespaces (the namespaces stay).
    async fn release_namespaces(&self, tenant: &str, namespaces: &[String]) -> PlatformResult<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        for ns in namespaces {
            let labelled = api
                .get_opt(ns)
                .await
                .map_err(|e| kube_error(&format!("namespace {ns}"), e))?
                .and_then(|n| n.metadata.labels)
                .and_then(|l| l.get(TENANT_LABEL).cloned());
            if labelled.as_deref() != Some(tenant) {
                continue;
            }
            let patch = serde_json::json!({"metadata": {"labels": {TENANT_LABEL: null}}});
            api.patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| kube_error(&format!("namespace {ns}"), e))?;
        }
        Ok(())
    }

    /// Tenant rule 9: a tenant with exactly one namespace gets the ResourceQuota
    /// `sbx-tenant-quota` there as a backstop of its quotas; with several it gets none.
    async fn backstop_quota(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        let [namespace] = tenant.spec.namespaces.as_slice() else {
            // Grown to several namespaces: the quota of its single one goes.
            return self.drop_backstop_quotas(&tenant.spec.namespaces).await;
        };
        let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), namespace);
        let quotas = tenant.spec.quotas.clone().unwrap_or_default();
        let mut hard = serde_json::Map::new();
        if let Some(n) = quotas.sandboxes {
            hard.insert("count/deployments.apps".into(), n.to_string().into());
        }
        if let Some(v) = &quotas.vcpu {
            hard.insert("limits.cpu".into(), v.clone().into());
        }
        if let Some(v) = &quotas.memory {
            hard.insert("limits.memory".into(), v.clone().into());
        }
        if let Some(v) = &quotas.disk {
            hard.insert("requests.storage".into(), v.clone().into());
        }
        if hard.is_empty() {
            match api.delete(QUOTA_NAME, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(kube_error("delete the tenant's ResourceQuota", e)),
            }
            return Ok(());
        }
        let patch = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": QUOTA_NAME, "namespace": namespace, "labels": {TENANT_LABEL: tenant.name}},
            "spec": {"hard": hard},
        });
        api.patch(
            QUOTA_NAME,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map(drop)
        .map_err(|e| kube_error("the tenant's ResourceQuota", e))
    }

    /// Creates each namespace that is missing, labels each with the tenant and its
    /// pod-security level (`baseline`, or `privileged` when the tenant may run `dind` or a
    /// capability beyond baseline), binds the daemon's tenant rules there and puts its
    /// default-deny NetworkPolicy there (kept by the leader, `policies`).
    async fn claim_namespaces(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let limits = tenant.spec.limits.clone().unwrap_or_default();
        let level = objects::sandboxes::pod_security_level(
            limits.allowed_capabilities.as_deref(),
            limits.allow_dind,
        );
        let name = tenant.name.as_str();
        for ns in &tenant.spec.namespaces {
            if let Some(why) = namespaces::refused(ns, true) {
                return Err(PlatformError::Invalid(why));
            }
            let mut labels = objects::sandboxes::pod_security_labels(level);
            labels[TENANT_LABEL] = serde_json::json!(name);
            let patch = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": labels},
            });
            api.patch(
                ns,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|e| kube_error(&format!("namespace {ns}"), e))?;
            // Applied again on every claim: the namespace may have been made by the apply
            // above, under the name of one bound and deleted since.
            self.forget_bound(ns);
            self.bind_daemon(ns).await?;
            self.apply_in(ns, objects::network::default_deny_object(ns, name))
                .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Platform for KubernetesPlatform {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn installer(&self) -> Option<Arc<dyn crate::daemon::platform::install::InstallBackend>> {
        self.installer
            .clone()
            .map(|i| i as Arc<dyn crate::daemon::platform::install::InstallBackend>)
    }

    fn internal_tls(&self) -> Option<crate::shared::tls::Generated> {
        self.internal_tls.clone()
    }

    /// Keeps quota Leases between checks once the other replicas can pass this one the
    /// requests they are for (`lease.rs`).
    fn listening(&self, local: std::net::SocketAddr) {
        match self.settings.advertised(local) {
            Some(url) => {
                tracing::info!(%url, "quota Leases kept between checks; other replicas pass their requests here");
                self.leases.keep_held(url);
            }
            None => tracing::info!(
                "no URL for the other replicas to reach this one ([kubernetes] advertiseUrl, POD_IP): each quota check takes and gives up its Lease"
            ),
        }
    }

    /// Gives up the quota Leases this replica keeps, so that the other replicas need not
    /// wait for their claims to run out.
    async fn shutdown(&self) {
        lease::release_kept(
            &self.client,
            &self.leases,
            &self.identity,
            Duration::from_secs(5),
        )
        .await;
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.leases.checks.register(registry);
    }

    /// Ready while the API server answers (within [`ANSWER_WITHIN`], or slower for no longer
    /// than [`SLOW_GRACE`]) and every watch cache is in step. The kubelet's probe waits 1 s.
    async fn ready(&self) -> Result<(), String> {
        let answered = || self.answered.lock().unwrap_or_else(|e| e.into_inner());
        match tokio::time::timeout(ANSWER_WITHIN, self.client.apiserver_version()).await {
            Ok(Ok(_)) => *answered() = Some(std::time::Instant::now()),
            Ok(Err(e)) => {
                *answered() = None;
                return Err(format!("the Kubernetes API server is unreachable: {e}"));
            }
            Err(_) => {
                let last = *answered();
                if last.is_none_or(|at| at.elapsed() > SLOW_GRACE) {
                    return Err(format!(
                        "the Kubernetes API server has not answered for {} s (a check waits {} ms)",
                        SLOW_GRACE.as_secs(),
                        ANSWER_WITHIN.as_millis()
                    ));
                }
                tracing::debug!("the API server is slow to answer the readiness check");
            }
        }
        let caches = [
            ("sandbox Deployments", self.deployment_cache.in_step()),
            ("sandbox Pods", self.pod_cache.in_step()),
            ("sandbox VolumeSnapshots", self.snapshot_cache.in_step()),
        ];
        let behind: Vec<&str> = caches
            .iter()
            .filter(|(_, in_step)| !in_step)
            .map(|(what, _)| *what)
            .collect();
        if behind.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the watch of {} is not in step yet",
                behind.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses_take_their_port_as_urls_need() {
        assert_eq!(super::host_port("10.234.7.1", 8091), "10.234.7.1:8091");
        assert_eq!(super::host_port("fd00::1", 10250), "[fd00::1]:10250");
        assert_eq!(super::host_port("node-1", 10250), "node-1:10250");
    }
}
