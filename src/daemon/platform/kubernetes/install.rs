//! Remote install on Kubernetes (`[kubernetes.install]`). An operation labels its nodes
//! `sbx.io/install=<operation>`; the installer DaemonSet (`deploy/installer.yaml`, its image
//! pinned by digest) selects the nodes with that label, and its Pod's init container `install`
//! (`sbx agent install`) checks the node and installs sbx there. What that container did is the
//! node's state: not started `pending`, started `running`, exited 0 `succeeded`, exited
//! otherwise `failed` with its termination message's last line. A node that finished is
//! unlabelled (its installer Pod goes); one that succeeded is labelled `sbx.io/agent=true`, so
//! that the agent DaemonSet starts there. Operations are kept in the ConfigMap
//! `kube-system/sbx-install` (one key each), so every replica reads them and they survive a
//! restart.
use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Node, Pod};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use serde::{Deserialize, Serialize};

use super::{SYSTEM_NAMESPACE, conflict, kube_error, replace_with_retry};
use crate::daemon::config::InstallSettings;
use crate::daemon::platform::install::InstallBackend;
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::shared::models::install::{
    InstallStartResponse, InstallState, InstallStatusResponse, NodeInstallStatus,
};

/// The ConfigMap of the operations.
pub const OPERATIONS_CONFIGMAP: &str = "sbx-install";
/// The node label that puts a node in the installer pool; its value is the operation.
pub const INSTALL_LABEL: &str = "sbx.io/install";
/// The node label the agent DaemonSet selects.
pub const AGENT_LABEL: &str = "sbx.io/agent";
/// The node annotation naming the operation that installed it.
pub const INSTALLED_ANNOTATION: &str = "sbx.io/installed-by";
/// The installer Pod's init container whose result is the node's.
pub const INSTALL_CONTAINER: &str = "install";
/// Labels of the `sbx serve` Pods (deploy/deployment.yaml).
const SERVER_SELECTOR: &str = "app.kubernetes.io/name=sbx,app.kubernetes.io/component=api";
/// Finished operations kept (the oldest beyond it are dropped).
const KEEP_OPERATIONS: usize = 100;
/// Waiting reasons of a container that will not start without a change: the node fails.
const STUCK: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// One operation as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Operation {
    /// Unix seconds of the start.
    created: i64,
    nodes: BTreeMap<String, NodeRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct NodeRecord {
    state: InstallState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// Installer Pods on the node when the operation started (of an earlier one): not ours.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    earlier_pods: Vec<String>,
}

impl Operation {
    fn finished(&self) -> bool {
        self.nodes.values().all(|n| final_state(n.state))
    }

    fn report(&self, id: &str) -> InstallStatusResponse {
        InstallStatusResponse {
            operation: id.to_string(),
            nodes: self
                .nodes
                .iter()
                .map(|(name, n)| {
                    let status = NodeInstallStatus {
                        state: n.state,
                        message: n.message.clone(),
                    };
                    (name.clone(), status)
                })
                .collect(),
        }
    }
}

fn final_state(state: InstallState) -> bool {
    matches!(state, InstallState::Succeeded | InstallState::Failed)
}

/// Remote install through the installer DaemonSet.
pub struct KubeInstaller {
    client: kube::Client,
    settings: InstallSettings,
}

impl KubeInstaller {
    pub fn new(client: kube::Client, settings: InstallSettings) -> KubeInstaller {
        KubeInstaller { client, settings }
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), SYSTEM_NAMESPACE)
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// The installer DaemonSet, checked against the pinned image: 500 (`Misdeployed`) when it is
    /// missing or any of its containers runs another image.
    async fn installer(&self) -> PlatformResult<DaemonSet> {
        let (ns, name) = (&self.settings.namespace, &self.settings.daemon_set);
        let ds = self.installer_daemon_set().await?.ok_or_else(|| {
            PlatformError::Misdeployed(format!(
                "the installer DaemonSet {ns}/{name} does not exist: apply \
                 deploy/installer.yaml with the pinned image {}",
                self.settings.image
            ))
        })?;
        let pod = ds.spec.template.spec.as_ref();
        let containers = pod
            .into_iter()
            .flat_map(|p| p.init_containers.iter().flatten().chain(&p.containers));
        for c in containers {
            let image = c.image.as_deref().unwrap_or_default();
            if image != self.settings.image {
                return Err(PlatformError::Misdeployed(format!(
                    "installer image drift: container '{}' of DaemonSet {ns}/{name} runs \
                     {image:?}, not the pinned {}",
                    c.name, self.settings.image
                )));
            }
        }
        Ok(ds)
    }

    /// The installer's Pods by node.
    async fn installer_pods(&self, ds: &DaemonSet) -> PlatformResult<BTreeMap<String, Vec<Pod>>> {
        let selector = ds
            .spec
            .selector
            .match_labels
            .as_ref()
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let pods = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| kube_error("list the installer's Pods", e))?;
        let mut by_node: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for pod in pods.items {
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                by_node.entry(node).or_default().push(pod);
            }
        }
        Ok(by_node)
    }

    /// The operations as stored, with the ConfigMap's version (`None`: no ConfigMap yet).
    async fn read(&self) -> PlatformResult<(BTreeMap<String, Operation>, Option<ConfigMap>)> {
        let found = self
            .configmaps()
            .get_opt(OPERATIONS_CONFIGMAP)
            .await
            .map_err(|e| kube_error(&format!("ConfigMap {OPERATIONS_CONFIGMAP}"), e))?;
        let mut operations = BTreeMap::new();
        if let Some(cm) = &found {
            for (id, text) in cm.data.iter().flatten() {
                match serde_json::from_str::<Operation>(text) {
                    Ok(op) => {
                        operations.insert(id.clone(), op);
                    }
                    Err(e) => {
                        tracing::warn!(operation = %id, error = %e, "an unreadable install operation")
                    }
                }
            }
        }
        Ok((operations, found))
    }

    /// Writes the operations back (`Ok(false)`: another replica wrote in between).
    async fn write(
        &self,
        operations: &BTreeMap<String, Operation>,
        read: Option<ConfigMap>,
    ) -> PlatformResult<bool> {
        let mut data = BTreeMap::new();
        for (id, op) in operations {
            let text = serde_json::to_string(op)
                .map_err(|e| PlatformError::Store(format!("install operation {id}: {e}")))?;
            data.insert(id.clone(), text);
        }
        let api = self.configmaps();
        let written = match read {
            Some(mut cm) => {
                cm.data = Some(data);
                api.replace(OPERATIONS_CONFIGMAP, &PostParams::default(), &cm)
                    .await
            }
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(OPERATIONS_CONFIGMAP.into()),
                        namespace: Some(SYSTEM_NAMESPACE.into()),
                        labels: Some(BTreeMap::from([(
                            super::objects::names::MANAGED_LABEL.to_string(),
                            super::FIELD_MANAGER.to_string(),
                        )])),
                        ..Default::default()
                    },
                    data: Some(data),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await
            }
        };
        match written {
            Ok(_) => Ok(true),
            Err(e) if conflict(&e) => Ok(false),
            Err(e) => Err(kube_error(&format!("ConfigMap {OPERATIONS_CONFIGMAP}"), e)),
        }
    }

    /// What the installer says of one node now (`None`: nothing new).
    fn observe(
        &self,
        op: &Operation,
        node: &str,
        record: &NodeRecord,
        pods: &BTreeMap<String, Vec<Pod>>,
        now: i64,
    ) -> Option<(InstallState, Option<String>)> {
        // Any Pod but those of earlier operations, also one being deleted: its result stands.
        let pod = pods.get(node).into_iter().flatten().find(|p| {
            let uid = p.metadata.uid.as_deref().unwrap_or_default();
            !record.earlier_pods.iter().any(|e| e == uid)
        });
        let seen = pod
            .map(installer_state)
            .unwrap_or((InstallState::Pending, None));
        let overdue = now - op.created >= self.settings.timeout.as_secs() as i64;
        let seen = match seen {
            (InstallState::Pending | InstallState::Running, _) if overdue => (
                InstallState::Failed,
                Some(format!(
                    "the installer did not finish within {} s ({})",
                    self.settings.timeout.as_secs(),
                    match pod {
                        None =>
                            "no installer Pod on the node: is it Ready and schedulable?".to_string(),
                        Some(p) => format!(
                            "its Pod {} is {}",
                            p.metadata.name.as_deref().unwrap_or_default(),
                            p.status
                                .as_ref()
                                .and_then(|s| s.phase.as_deref())
                                .unwrap_or("Pending")
                        ),
                    }
                )),
            ),
            other => other,
        };
        (seen.0 != record.state || seen.1 != record.message).then_some(seen)
    }

    /// Records what the installers report, acts on the nodes that finished, and writes it
    /// all back; returns the operations as they now stand.
    async fn refresh(&self, only: Option<&str>) -> PlatformResult<BTreeMap<String, Operation>> {
        for _ in 0..8 {
            let (mut operations, read) = self.read().await?;
            let open = operations
                .iter()
                .any(|(id, op)| only.is_none_or(|o| o == id) && !op.finished());
            if !open {
                return Ok(operations);
            }
            let ds = self.installer_daemon_set().await?;
            let pods = match &ds {
                Some(ds) => self.installer_pods(ds).await?,
                None => BTreeMap::new(),
            };
            let now = crate::shared::timestamp::now_unix();
            let mut finished = Vec::new();
            for (id, op) in operations.iter_mut() {
                if only.is_some_and(|o| o != id) || op.finished() {
                    continue;
                }
                let snapshot = op.clone();
                for (node, record) in op.nodes.iter_mut() {
                    if final_state(record.state) {
                        continue;
                    }
                    if let Some((state, message)) =
                        self.observe(&snapshot, node, record, &pods, now)
                    {
                        record.state = state;
                        record.message = message;
                        if final_state(state) {
                            finished.push((id.clone(), node.clone(), state));
                        }
                    }
                }
            }
            // The node first: a result is recorded only once acted on.
            for (id, node, state) in &finished {
                self.finish_node(id, node, *state).await?;
            }
            prune(&mut operations);
            if self.write(&operations, read).await? {
                for (id, node, state) in finished {
                    tracing::info!(operation = %id, %node, ?state, "remote install finished on a node");
                }
                return Ok(operations);
            }
        }
        Err(kept_changing())
    }

    /// The installer DaemonSet if it exists (not checked: a status read still works while
    /// the image drifted).
    async fn installer_daemon_set(&self) -> PlatformResult<Option<DaemonSet>> {
        let (ns, name) = (&self.settings.namespace, &self.settings.daemon_set);
        let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
        api.get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("DaemonSet {ns}/{name}"), e))
    }

    /// A node whose install finished leaves the installer pool; a succeeded one joins the
    /// agents' (`sbx.io/agent=true`) and names the operation that installed it.
    async fn finish_node(
        &self,
        operation: &str,
        node: &str,
        state: InstallState,
    ) -> PlatformResult<()> {
        let done = replace_with_retry(&self.nodes(), node, &format!("node '{node}'"), |n| {
            let labels = n.metadata.labels.get_or_insert_with(Default::default);
            if labels.get(INSTALL_LABEL).map(String::as_str) == Some(operation) {
                labels.remove(INSTALL_LABEL);
            }
            if state == InstallState::Succeeded {
                labels.insert(AGENT_LABEL.into(), "true".into());
                n.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(INSTALLED_ANNOTATION.into(), operation.into());
            }
        })
        .await;
        match done {
            // A node deleted meanwhile has nothing left to change.
            Err(PlatformError::NotFound(_)) => Ok(()),
            other => other,
        }
    }
}

/// Every retry of a write of the operations lost to another writer.
fn kept_changing() -> PlatformError {
    PlatformError::Store(format!(
        "ConfigMap {OPERATIONS_CONFIGMAP} kept changing under a write"
    ))
}

/// Drops the oldest finished operations beyond [`KEEP_OPERATIONS`].
fn prune(operations: &mut BTreeMap<String, Operation>) {
    let mut done: Vec<(i64, String)> = operations
        .iter()
        .filter(|(_, op)| op.finished())
        .map(|(id, op)| (op.created, id.clone()))
        .collect();
    if done.len() <= KEEP_OPERATIONS {
        return;
    }
    done.sort();
    for (_, id) in done.iter().take(done.len() - KEEP_OPERATIONS) {
        operations.remove(id);
    }
}

/// The node's state by its installer Pod's `install` init container.
fn installer_state(pod: &Pod) -> (InstallState, Option<String>) {
    let status: Option<&ContainerStatus> = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .and_then(|all| all.iter().find(|c| c.name == INSTALL_CONTAINER));
    let Some(status) = status else {
        return (InstallState::Pending, None);
    };
    let state = status.state.as_ref();
    if let Some(done) = state.and_then(|s| s.terminated.as_ref()) {
        if done.exit_code == 0 {
            return (InstallState::Succeeded, None);
        }
        return (
            InstallState::Failed,
            Some(failure_line(done.exit_code, done.message.as_deref())),
        );
    }
    // Restarted after a failure (CrashLoopBackOff, or running again): the failure stands.
    if let Some(before) = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        && before.exit_code != 0
    {
        return (
            InstallState::Failed,
            Some(failure_line(before.exit_code, before.message.as_deref())),
        );
    }
    if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
        let reason = waiting.reason.as_deref().unwrap_or_default();
        if STUCK.contains(&reason) {
            return (
                InstallState::Failed,
                Some(format!(
                    "the installer cannot start: {reason}: {}",
                    waiting.message.as_deref().unwrap_or("no message")
                )),
            );
        }
        return (InstallState::Pending, None);
    }
    (InstallState::Running, None)
}

/// The installer's last non-empty line (its termination message), or its exit code.
fn failure_line(code: i32, message: Option<&str>) -> String {
    message
        .and_then(|m| m.lines().rev().map(str::trim).find(|l| !l.is_empty()))
        .map(str::to_string)
        .unwrap_or_else(|| format!("the installer exited with code {code} and said nothing"))
}

#[async_trait]
impl InstallBackend for KubeInstaller {
    async fn start_install(&self, nodes: &[String]) -> PlatformResult<InstallStartResponse> {
        let mut wanted: Vec<String> = Vec::new();
        for n in nodes {
            if !wanted.contains(n) {
                wanted.push(n.clone());
            }
        }
        for node in &wanted {
            let found = self
                .nodes()
                .get_opt(node)
                .await
                .map_err(|e| kube_error(&format!("node '{node}'"), e))?
                .ok_or_else(|| PlatformError::NotFound(format!("node '{node}' not found")))?;
            if let Some(op) = found
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(INSTALL_LABEL))
            {
                return Err(PlatformError::Conflict(format!(
                    "node '{node}' is being installed by operation '{op}'"
                )));
            }
        }
        if !self.settings.allow_server_nodes {
            let pods: Api<Pod> = Api::all(self.client.clone());
            let servers = pods
                .list(&ListParams::default().labels(SERVER_SELECTOR))
                .await
                .map_err(|e| kube_error("list the sbx serve Pods", e))?;
            for pod in servers.items {
                let running = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_none_or(|p| p != "Succeeded" && p != "Failed");
                let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
                if let Some(node) = node.filter(|n| running && wanted.iter().any(|w| w == n)) {
                    return Err(PlatformError::Conflict(format!(
                        "node '{node}' runs sbx serve (Pod {}/{}), which an install may \
                         restart: set [kubernetes.install] allowServerNodes = true to allow it",
                        pod.metadata.namespace.as_deref().unwrap_or_default(),
                        pod.metadata.name.as_deref().unwrap_or_default()
                    )));
                }
            }
        }
        let ds = self.installer().await?;
        let earlier = self.installer_pods(&ds).await?;
        let mut nonce = [0u8; 3];
        getrandom::fill(&mut nonce).map_err(|e| PlatformError::Store(format!("getrandom: {e}")))?;
        let created = crate::shared::timestamp::now_unix();
        let id = format!("install-{created}-{}", hex::encode(nonce));
        let op = Operation {
            created,
            nodes: wanted
                .iter()
                .map(|n| {
                    let earlier_pods = earlier
                        .get(n)
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p.metadata.uid.clone())
                        .collect();
                    let record = NodeRecord {
                        state: InstallState::Pending,
                        message: None,
                        earlier_pods,
                    };
                    (n.clone(), record)
                })
                .collect(),
        };
        // Recorded before any node is labelled, so that a reader never sees a labelled node
        // of an unknown operation.
        let mut stored = false;
        for _ in 0..8 {
            let (mut operations, read) = self.read().await?;
            operations.insert(id.clone(), op.clone());
            prune(&mut operations);
            if self.write(&operations, read).await? {
                stored = true;
                break;
            }
        }
        if !stored {
            return Err(kept_changing());
        }
        for node in &wanted {
            let labelled =
                replace_with_retry(&self.nodes(), node, &format!("node '{node}'"), |n| {
                    n.metadata
                        .labels
                        .get_or_insert_with(Default::default)
                        .insert(INSTALL_LABEL.into(), id.clone());
                })
                .await;
            if let Err(e) = labelled {
                tracing::warn!(operation = %id, %node, error = %e, "labelling a node into the installer pool");
                return Err(e);
            }
        }
        tracing::info!(operation = %id, nodes = ?wanted, "remote install started");
        Ok(InstallStartResponse {
            operation: id,
            nodes: wanted,
        })
    }

    async fn install_status(&self, operation: &str) -> PlatformResult<InstallStatusResponse> {
        let operations = self.refresh(Some(operation)).await?;
        operations
            .get(operation)
            .map(|op| op.report(operation))
            .ok_or_else(|| {
                PlatformError::NotFound(format!("install operation '{operation}' not found"))
            })
    }

    async fn reconcile_installs(&self) -> PlatformResult<()> {
        self.refresh(None).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "i"}, "status": status})).unwrap()
    }

    #[test]
    fn a_nodes_state_is_its_install_containers() {
        let s = |status| installer_state(&pod(status));
        assert_eq!(
            s(json!({"phase": "Pending"})),
            (InstallState::Pending, None)
        );
        assert_eq!(
            s(
                json!({"initContainerStatuses": [{"name": "install", "image": "x", "imageID": "",
                "ready": false, "restartCount": 0, "state": {"running": {}}}]})
            ),
            (InstallState::Running, None)
        );
        assert_eq!(
            s(
                json!({"initContainerStatuses": [{"name": "install", "image": "x", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0}}}]})
            ),
            (InstallState::Succeeded, None)
        );
        let failed = s(
            json!({"initContainerStatuses": [{"name": "install", "image": "x",
            "imageID": "", "ready": false, "restartCount": 1,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1,
                "message": "checking\nprerequisite failed: no overlay\n"}}}]}),
        );
        assert_eq!(
            failed,
            (
                InstallState::Failed,
                Some("prerequisite failed: no overlay".into())
            )
        );
        let pull = s(
            json!({"initContainerStatuses": [{"name": "install", "image": "x",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}}]}),
        );
        assert_eq!(pull.0, InstallState::Failed);
        assert!(pull.1.unwrap().contains("ImagePullBackOff: not found"));
    }
}
