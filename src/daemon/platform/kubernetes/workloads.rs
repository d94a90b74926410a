//! What the Kubernetes platform does with a sandbox's objects: launching one (Deployment,
//! root PVC, env Secret, egress NetworkPolicy) and taking it apart, exec and logs through the
//! API server, metrics from `metrics.k8s.io`, and its snapshots (VolumeSnapshots of the root
//! PVC), forks and restores.
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ApiResource, AttachParams, DynamicObject, LogParams, ObjectMeta, PostParams};

use super::objects::sandboxes::{self, CONTAINER, SandboxTemplate};
use super::objects::snapshots;
use super::{
    FIELD_MANAGER, KQL_BACKEND, KubernetesPlatform, TENANT_LABEL, conflict, kube_error, managed,
    missing, read_managed,
};
use crate::daemon::platform::{PlatformError, PlatformResult, RestorePlan, SandboxBackend};
use crate::shared::models::sandbox::{ExecResponse, SandboxMetrics, SandboxStatus};
use crate::shared::models::snapshot::{GcResult, Snapshot, SnapshotKind};
use crate::shared::quantity::{Quantity, format_cpu_millis, format_mebibytes};

/// The most of each exec stream kept (the rest is cut and `truncated` set).
const EXEC_OUTPUT_CAP: usize = 16 << 20;
/// How long a pause with a snapshot waits for the sandbox's Pod to be gone before it
/// snapshots anyway.
const POD_GONE_WAIT: Duration = Duration::from_secs(60);
/// How often a fork reports the clone PVC's progress in the log.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long undoing a fork waits for its clone PVC to be gone.
const PVC_GONE_WAIT: Duration = Duration::from_secs(10);

/// Every create and replace names sbx as the field manager (as the server-side applies do).
fn writer() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// Where a launched sandbox's root PVC comes from.
pub enum Root<'a> {
    /// A new, empty volume (kql) or none (kfd).
    Fresh,
    /// Already made by the caller (a fork waited for it to bind).
    Made,
    /// Cloned from this VolumeSnapshot.
    FromSnapshot(&'a str),
}

/// Where a launched sandbox's env Secret comes from.
pub enum Env<'a> {
    /// No env file.
    None,
    /// These `KEY=VALUE` entries.
    Values(&'a [String]),
    /// A copy of this Secret (a fork's source, a snapshot's copy).
    Copy(&'a str),
}

impl KubernetesPlatform {
    fn pvcs(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn volume_snapshots(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &snapshots::resource()),
            None => Api::all_with(self.client.clone(), &snapshots::resource()),
        }
    }

    /// The sandbox's namespace, created when missing; returns its tenant (label).
    async fn ensure_namespace(&self, namespace: &str) -> PlatformResult<Option<String>> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let what = format!("namespace {namespace}");
        if let Some(ns) = namespaces
            .get_opt(namespace)
            .await
            .map_err(|e| kube_error(&what, e))?
        {
            return Ok(ns
                .metadata
                .labels
                .and_then(|l| l.get(TENANT_LABEL).cloned()));
        }
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match namespaces.create(&writer(), &ns).await {
            Ok(_) => Ok(None),
            Err(e) if conflict(&e) => Ok(None),
            Err(e) => Err(kube_error(&what, e)),
        }
    }

    /// The network limits of a tenant (bandwidth annotations on its sandboxes' Pods).
    async fn tenant_network(
        &self,
        tenant: &str,
    ) -> PlatformResult<Option<crate::shared::models::tenant::NetworkLimits>> {
        let Some(object) = self
            .tenants()
            .get_opt(tenant)
            .await
            .map_err(|e| kube_error(&format!("tenant {tenant}"), e))?
        else {
            return Ok(None);
        };
        Ok(Self::stored_tenant(&object)?
            .spec
            .limits
            .and_then(|l| l.network))
    }

    /// Makes a sandbox: its Deployment first (the name is taken there: 409 when it exists),
    /// then its root PVC, env Secret and egress policy; when one of those fails, everything of
    /// the sandbox is taken back out.
    pub(super) async fn launch(
        &self,
        namespace: &str,
        name: &str,
        template: &SandboxTemplate,
        root: Root<'_>,
        env: Env<'_>,
    ) -> PlatformResult<()> {
        let tenant = self.ensure_namespace(namespace).await?;
        let network = match &tenant {
            Some(t) => self.tenant_network(t).await?,
            None => None,
        };
        let mut template = template.clone();
        template.env = !matches!(env, Env::None);
        let body = sandboxes::deployment(
            namespace,
            name,
            &template,
            tenant.as_deref(),
            network.as_ref(),
            &self.settings.dind_image,
        );
        let object: Deployment = serde_json::from_value(body)
            .map_err(|e| PlatformError::Store(format!("sandbox Deployment: {e}")))?;
        let created = self
            .deployments(Some(namespace))
            .create(&writer(), &object)
            .await
            .map_err(|e| create_error(e, "sandbox", namespace, name))?;
        let companions = async {
            if template.has_root_volume() {
                let bytes = template
                    .root_disk_bytes
                    .unwrap_or(self.settings.root_disk_bytes);
                match root {
                    Root::Fresh => self.create_root_pvc(namespace, name, bytes, None).await?,
                    Root::FromSnapshot(s) => {
                        self.create_root_pvc(namespace, name, bytes, Some(s))
                            .await?
                    }
                    Root::Made => {}
                }
            }
            match env {
                Env::None => {}
                Env::Values(values) => {
                    self.apply_in(
                        namespace,
                        sandboxes::env_secret_object(namespace, name, values),
                    )
                    .await?
                }
                Env::Copy(from) => {
                    self.copy_secret(namespace, from, &sandboxes::env_secret(name), name)
                        .await?
                }
            }
            if let Some(policy) =
                sandboxes::egress_policy_object(namespace, name, template.egress.as_deref())
            {
                self.apply_in(namespace, policy).await?;
            }
            Ok::<(), PlatformError>(())
        };
        if let Err(e) = companions.await {
            self.remove_sandbox_objects(namespace, name).await;
            return Err(e);
        }
        self.deployment_cache
            .settled(
                namespace,
                name,
                created.metadata.resource_version.as_deref(),
            )
            .await;
        Ok(())
    }

    async fn create_root_pvc(
        &self,
        namespace: &str,
        sandbox: &str,
        bytes: u64,
        from_snapshot: Option<&str>,
    ) -> PlatformResult<()> {
        let object: PersistentVolumeClaim = serde_json::from_value(sandboxes::root_pvc_object(
            namespace,
            sandbox,
            bytes,
            from_snapshot,
        ))
        .map_err(|e| PlatformError::Store(format!("root PVC: {e}")))?;
        self.pvcs(namespace)
            .create(&writer(), &object)
            .await
            .map(drop)
            .map_err(|e| kube_error(&format!("PVC {}", sandboxes::root_pvc(sandbox)), e))
    }

    /// Copies the data of Secret `from` into a new Secret `to` labelled for `sandbox`.
    async fn copy_secret(
        &self,
        namespace: &str,
        from: &str,
        to: &str,
        sandbox: &str,
    ) -> PlatformResult<()> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let source = api
            .get_opt(from)
            .await
            .map_err(|e| kube_error(&format!("Secret {from}"), e))?
            .ok_or_else(|| {
                PlatformError::NotFound(format!(
                    "the env Secret '{from}' to copy is missing in namespace '{namespace}'"
                ))
            })?;
        let labels = [
            (sandboxes::SANDBOX_LABEL.to_string(), sandbox.to_string()),
            (
                sandboxes::MANAGED_LABEL.to_string(),
                FIELD_MANAGER.to_string(),
            ),
        ];
        let copy = Secret {
            metadata: ObjectMeta {
                name: Some(to.to_string()),
                namespace: Some(namespace.to_string()),
                labels: Some(labels.into_iter().collect()),
                ..Default::default()
            },
            type_: source.type_,
            data: source.data,
            ..Default::default()
        };
        match api.create(&writer(), &copy).await {
            Ok(_) => Ok(()),
            Err(e) if conflict(&e) => api
                .replace(to, &writer(), &copy)
                .await
                .map(drop)
                .map_err(|e| kube_error(&format!("Secret {to}"), e)),
            Err(e) => Err(kube_error(&format!("Secret {to}"), e)),
        }
    }

    /// Deletes every object of a sandbox (Deployment, env Secret, egress policy, root PVC);
    /// returns the first failure other than a missing object.
    pub(super) async fn delete_sandbox_objects(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<()> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let policies: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), namespace);
        let outcomes = [
            self.deployments(Some(namespace))
                .delete(name, &Default::default())
                .await
                .map(drop),
            secrets
                .delete(&sandboxes::env_secret(name), &Default::default())
                .await
                .map(drop),
            policies
                .delete(&sandboxes::egress_policy(name), &Default::default())
                .await
                .map(drop),
            self.pvcs(namespace)
                .delete(&sandboxes::root_pvc(name), &Default::default())
                .await
                .map(drop),
        ];
        for outcome in outcomes {
            match outcome {
                Ok(()) => {}
                Err(e) if missing(&e) => {}
                Err(e) => return Err(kube_error(&format!("sandbox {name}"), e)),
            }
        }
        self.deployment_cache.settled(namespace, name, None).await;
        Ok(())
    }

    /// [`Self::delete_sandbox_objects`] on a failure path: a failure is logged.
    async fn remove_sandbox_objects(&self, namespace: &str, name: &str) {
        if let Err(e) = self.delete_sandbox_objects(namespace, name).await {
            tracing::warn!(%namespace, sandbox = %name, error = %e, "undoing a sandbox");
        }
    }

    /// The sandbox's Pods (from the watch cache when in step), newest first.
    async fn pods_of(&self, namespace: &str, name: &str) -> PlatformResult<Vec<Arc<Pod>>> {
        let mut pods = self
            .sandbox_pods(Some(namespace), Some(name))
            .await?
            .into_values()
            .flatten()
            .collect::<Vec<_>>();
        pods.sort_by(|a, b| {
            b.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .cmp(&a.metadata.creation_timestamp.as_ref().map(|t| t.0))
        });
        Ok(pods)
    }

    /// The name of the sandbox's running Pod: 404 without a sandbox or Pod, 409 when it is
    /// not running.
    async fn running_pod(&self, namespace: &str, name: &str) -> PlatformResult<String> {
        self.sandbox_deployment(namespace, name).await?;
        let pods = self.pods_of(namespace, name).await?;
        let running = pods.iter().find(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        match running {
            Some(pod) => Ok(pod.metadata.name.clone().unwrap_or_default()),
            None if pods.is_empty() => Err(PlatformError::NotFound(format!(
                "sandbox '{name}' has no pod in namespace '{namespace}'"
            ))),
            None => Err(PlatformError::Conflict(format!(
                "sandbox '{name}' is not running"
            ))),
        }
    }

    /// Runs `/bin/sh -c command` in the sandbox's container through the API server.
    pub(super) async fn exec(
        &self,
        namespace: &str,
        name: &str,
        command: &str,
        timeout: Duration,
    ) -> PlatformResult<ExecResponse> {
        let pod = self.running_pod(namespace, name).await?;
        let started = Instant::now();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = AttachParams::default()
            .container(CONTAINER)
            .stdin(false)
            .stdout(true)
            .stderr(true);
        let mut process = api
            .exec(&pod, ["/bin/sh", "-c", command], &params)
            .await
            .map_err(|e| kube_error(&format!("exec in sandbox {name}"), e))?;
        let stdout = process.stdout();
        let stderr = process.stderr();
        let status = process.take_status();
        let run = async {
            let read = |s| async move {
                match s {
                    Some(s) => crate::shared::io::read_capped(s, EXEC_OUTPUT_CAP).await,
                    None => (Vec::new(), false),
                }
            };
            let ((out, out_cut), (err, err_cut)) = tokio::join!(read(stdout), read(stderr));
            let status = match status {
                Some(s) => s.await,
                None => None,
            };
            (out, out_cut, err, err_cut, status)
        };
        let done = tokio::time::timeout(timeout, run).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        match done {
            Ok((out, out_cut, err, err_cut, status)) => Ok(ExecResponse {
                exit_code: exit_code(status.as_ref()),
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
                duration_ms,
                timed_out: false,
                truncated: out_cut || err_cut,
            }),
            Err(_) => {
                process.abort();
                Ok(ExecResponse {
                    exit_code: 124,
                    stdout: String::new(),
                    stderr: format!("timed out after {} s\n", timeout.as_secs()),
                    duration_ms,
                    timed_out: true,
                    truncated: false,
                })
            }
        }
    }

    /// The last `tail` lines (of the last `since_secs` seconds) of the sandbox's container.
    pub(super) async fn logs(
        &self,
        namespace: &str,
        name: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String> {
        let pods = self.pods_of(namespace, name).await?;
        let pod = pods
            .first()
            .and_then(|p| p.metadata.name.clone())
            .ok_or_else(|| {
                PlatformError::NotFound(format!(
                    "sandbox '{name}' has no pod in namespace '{namespace}'"
                ))
            })?;
        let params = LogParams {
            container: Some(CONTAINER.into()),
            tail_lines: Some(tail as i64),
            since_seconds: (since_secs > 0).then_some(since_secs as i64),
            ..Default::default()
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.logs(&pod, &params).await {
            Ok(text) => Ok(text),
            // A Pod whose container has not started has no log yet.
            Err(kube::Error::Api(status)) if status.code == 400 => Ok(String::new()),
            Err(e) => Err(kube_error(&format!("logs of sandbox {name}"), e)),
        }
    }

    /// CPU and memory of the sandboxes' Pods from `metrics.k8s.io`.
    pub(super) async fn metrics(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<SandboxMetrics>> {
        let resource = ApiResource {
            group: "metrics.k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "metrics.k8s.io/v1beta1".into(),
            kind: "PodMetrics".into(),
            plural: "pods".into(),
        };
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let items = match api.list(&managed()).await {
            Ok(list) => list.items,
            Err(kube::Error::Api(status)) if [404, 503].contains(&status.code) => {
                return Err(PlatformError::Unavailable(format!(
                    "metrics.k8s.io is not served by this cluster (is metrics-server running?): {}",
                    status.message
                )));
            }
            Err(e) => return Err(kube_error("pod metrics", e)),
        };
        let mut out: Vec<SandboxMetrics> = items
            .iter()
            .filter_map(|m| {
                let sandbox = m.metadata.labels.as_ref()?.get(sandboxes::SANDBOX_LABEL)?;
                let (mut cpu, mut memory) = (0u64, 0u64);
                for c in m.data["containers"].as_array().into_iter().flatten() {
                    let q = |k: &str| c["usage"][k].as_str().and_then(|v| Quantity::parse(v).ok());
                    cpu += q("cpu").map(|q| q.millis() as u64).unwrap_or(0);
                    memory += q("memory").map(|q| q.value_ceil() as u64).unwrap_or(0);
                }
                Some(SandboxMetrics {
                    name: sandbox.clone(),
                    namespace: m.metadata.namespace.clone().unwrap_or_default(),
                    cpu_usage: format_cpu_millis(cpu),
                    memory_usage: format_mebibytes(memory),
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Ok(out)
    }

    /// A sandbox's template and root PVC (404 when missing): what snapshots and forks start
    /// from. 400 on a backend without a root volume.
    async fn snapshot_source(
        &self,
        namespace: &str,
        sandbox: &str,
        what: &str,
    ) -> PlatformResult<(SandboxTemplate, PersistentVolumeClaim)> {
        let deployment = self.sandbox_deployment(namespace, sandbox).await?;
        let template = SandboxTemplate::recorded(&deployment).map_err(PlatformError::Store)?;
        if !template.has_root_volume() {
            return Err(PlatformError::Invalid(format!(
                "sandbox '{sandbox}' runs on {}, which has no root volume: {what} needs \
                 {KQL_BACKEND}",
                template.backend
            )));
        }
        let pvc = sandboxes::root_pvc(sandbox);
        let found = self
            .pvcs(namespace)
            .get_opt(&pvc)
            .await
            .map_err(|e| kube_error(&format!("PVC {pvc}"), e))?
            // One being deleted (held by its Pod until that goes) is as good as gone.
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .ok_or_else(|| {
                PlatformError::NotFound(format!(
                    "the root PVC '{pvc}' of sandbox '{sandbox}' is missing in namespace \
                     '{namespace}'"
                ))
            })?;
        Ok((template, found))
    }

    /// 409 when a root PVC for a new sandbox of this name is left over.
    async fn root_pvc_free(&self, namespace: &str, sandbox: &str) -> PlatformResult<()> {
        let pvc = sandboxes::root_pvc(sandbox);
        let left = self
            .pvcs(namespace)
            .get_opt(&pvc)
            .await
            .map_err(|e| kube_error(&format!("PVC {pvc}"), e))?
            .is_some();
        if left {
            return Err(taken("root PVC", namespace, &pvc));
        }
        Ok(())
    }

    /// Creates the VolumeSnapshot (and its copy of the env Secret); 409 when the name is taken.
    async fn create_snapshot(
        &self,
        namespace: &str,
        name: &str,
        sandbox: &str,
        kind: SnapshotKind,
        template: &SandboxTemplate,
    ) -> PlatformResult<()> {
        let body = snapshots::volume_snapshot(namespace, name, sandbox, kind, template);
        let object: DynamicObject = serde_json::from_value(body)
            .map_err(|e| PlatformError::Store(format!("VolumeSnapshot: {e}")))?;
        let written = self
            .volume_snapshots(Some(namespace))
            .create(&writer(), &object)
            .await
            .map_err(|e| create_error(e, "snapshot", namespace, name))?;
        if template.env {
            let copied = self
                .copy_secret(
                    namespace,
                    &sandboxes::env_secret(sandbox),
                    &snapshots::env_secret(name),
                    sandbox,
                )
                .await;
            if let Err(e) = copied {
                self.remove_snapshot(namespace, name).await;
                return Err(e);
            }
        }
        self.snapshot_cache
            .settled(
                namespace,
                name,
                written.metadata.resource_version.as_deref(),
            )
            .await;
        Ok(())
    }

    /// Deletes a VolumeSnapshot and its env copy (404 when the snapshot is missing).
    pub(super) async fn delete_snapshot_objects(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<()> {
        self.volume_snapshots(Some(namespace))
            .delete(name, &Default::default())
            .await
            .map_err(|e| match kube_error(&format!("snapshot {name}"), e) {
                PlatformError::NotFound(_) => not_found(namespace, name),
                other => other,
            })?;
        self.snapshot_cache.settled(namespace, name, None).await;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match secrets
            .delete(&snapshots::env_secret(name), &Default::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if missing(&e) => Ok(()),
            Err(e) => Err(kube_error(&format!("snapshot {name}"), e)),
        }
    }

    async fn remove_snapshot(&self, namespace: &str, name: &str) {
        if let Err(e) = self.delete_snapshot_objects(namespace, name).await {
            tracing::warn!(%namespace, snapshot = %name, error = %e, "undoing a snapshot");
        }
    }

    /// A `named` (or other kind of) snapshot of a sandbox's root PVC; the sandbox keeps running.
    pub(super) async fn snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        name: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<()> {
        let (template, _) = self
            .snapshot_source(namespace, sandbox, "a snapshot")
            .await?;
        self.create_snapshot(namespace, name, sandbox, kind, &template)
            .await
    }

    /// Scales the sandbox to 0, waits (bounded) for its Pod to be gone so that the volume is
    /// no longer written, then snapshots it (kind `pause`); a failed snapshot scales it back.
    pub(super) async fn pause_with_snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        name: &str,
    ) -> PlatformResult<()> {
        let record = self.get_sandbox(namespace, sandbox).await?;
        if record.status != SandboxStatus::Running {
            return Err(PlatformError::Conflict(format!(
                "sandbox '{sandbox}' is {}: only a running sandbox can be paused",
                record.status
            )));
        }
        let (template, _) = self
            .snapshot_source(namespace, sandbox, "pause with a snapshot")
            .await?;
        if self
            .volume_snapshots(Some(namespace))
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("snapshot {name}"), e))?
            .is_some()
        {
            return Err(taken("snapshot", namespace, name));
        }
        self.scale(namespace, sandbox, 0).await?;
        let deadline = Instant::now() + POD_GONE_WAIT;
        while !self.pods_of(namespace, sandbox).await?.is_empty() {
            if Instant::now() > deadline {
                tracing::warn!(%namespace, %sandbox, "pod still there after 60 s: snapshotting anyway");
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Err(e) = self
            .create_snapshot(namespace, name, sandbox, SnapshotKind::Pause, &template)
            .await
        {
            if let Err(undo) = self.scale(namespace, sandbox, 1).await {
                tracing::warn!(%sandbox, error = %undo, "resuming after a failed pause snapshot");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Fork: a VolumeSnapshot of the source's root PVC, a new PVC cloned from it, waited for
    /// until Bound (at most `[kubernetes] forkTimeout`, progress in the log), the `fork`
    /// snapshot deleted, then the new sandbox on that PVC. A clone that never binds is undone
    /// (PVC and snapshot deleted) and answered 504.
    pub(super) async fn fork(
        &self,
        namespace: &str,
        source: &str,
        new_name: &str,
        snapshot: Option<&str>,
    ) -> PlatformResult<()> {
        let (template, source_pvc) = self.snapshot_source(namespace, source, "fork").await?;
        if self
            .deployments(Some(namespace))
            .get_opt(new_name)
            .await
            .map_err(|e| kube_error(&format!("sandbox {new_name}"), e))?
            .is_some()
        {
            return Err(taken("sandbox", namespace, new_name));
        }
        self.root_pvc_free(namespace, new_name).await?;
        let new_pvc = sandboxes::root_pvc(new_name);
        let (snapshot, kind) = match snapshot {
            Some(name) => (name.to_string(), SnapshotKind::Named),
            None => (
                format!("{source}-fork-{}", crate::shared::timestamp::now_unix()),
                SnapshotKind::Fork,
            ),
        };
        self.create_snapshot(namespace, &snapshot, source, kind, &template)
            .await?;
        let size = source_pvc
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .and_then(|q| Quantity::parse(&q.0).ok())
            .map(|q| q.value_ceil() as u64)
            .or(template.root_disk_bytes)
            .unwrap_or(self.settings.root_disk_bytes);
        let (made_pvc, made_snapshot) = (&new_pvc, &snapshot);
        let undo = |pvc: bool| async move {
            if pvc {
                self.remove_pvc(namespace, made_pvc).await;
            }
            self.remove_snapshot(namespace, made_snapshot).await;
        };
        if let Err(e) = self
            .create_root_pvc(namespace, new_name, size, Some(&snapshot))
            .await
        {
            undo(false).await;
            return Err(e);
        }
        if let Err(e) = self.wait_bound(namespace, &new_pvc).await {
            undo(true).await;
            return Err(e);
        }
        if kind == SnapshotKind::Fork {
            self.remove_snapshot(namespace, &snapshot).await;
        }
        let env_copy = sandboxes::env_secret(source);
        let env = if template.env {
            Env::Copy(&env_copy)
        } else {
            Env::None
        };
        match self
            .launch(namespace, new_name, &template, Root::Made, env)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => {
                // A Deployment of that name that appeared meanwhile is not ours to delete.
                if matches!(e, PlatformError::AlreadyExists(_)) {
                    self.remove_pvc(namespace, &new_pvc).await;
                }
                if kind == SnapshotKind::Named {
                    tracing::info!(%snapshot, "fork failed; its named snapshot is kept");
                }
                Err(e)
            }
        }
    }

    /// Deletes a PVC this request made and waits (at most [`PVC_GONE_WAIT`]) until it is
    /// gone — its protection finalizer is lifted by the controller manager — so that the
    /// answer is only sent once a retry under the same name can make it again.
    async fn remove_pvc(&self, namespace: &str, pvc: &str) {
        let pvcs = self.pvcs(namespace);
        if let Err(e) = pvcs.delete(pvc, &Default::default()).await {
            if !missing(&e) {
                tracing::warn!(%pvc, error = %e, "undoing a fork");
            }
            return;
        }
        let deadline = Instant::now() + PVC_GONE_WAIT;
        while Instant::now() < deadline {
            match pvcs.get_opt(pvc).await {
                Ok(None) => return,
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => {
                    tracing::warn!(%pvc, error = %e, "waiting for an undone clone PVC to go");
                    return;
                }
            }
        }
        tracing::warn!(%pvc, "an undone clone PVC is still being deleted");
    }

    /// Waits until a PVC is Bound, at most `[kubernetes] forkTimeout`.
    async fn wait_bound(&self, namespace: &str, pvc: &str) -> PlatformResult<()> {
        let started = Instant::now();
        let mut reported = started;
        loop {
            let phase = self
                .pvcs(namespace)
                .get(pvc)
                .await
                .map_err(|e| kube_error(&format!("PVC {pvc}"), e))?
                .status
                .and_then(|s| s.phase)
                .unwrap_or_else(|| "Pending".into());
            if phase == "Bound" {
                tracing::info!(%namespace, %pvc, elapsed_ms = started.elapsed().as_millis() as u64, "clone PVC bound");
                return Ok(());
            }
            if phase == "Lost" {
                return Err(PlatformError::Store(format!(
                    "the clone PVC '{pvc}' was lost"
                )));
            }
            if started.elapsed() >= self.settings.fork_timeout {
                return Err(PlatformError::Timeout(format!(
                    "the clone PVC '{pvc}' was not Bound after {} s (phase {phase}); the fork \
                     was undone (PVC and snapshot deleted)",
                    self.settings.fork_timeout.as_secs()
                )));
            }
            if reported.elapsed() >= PROGRESS_EVERY {
                reported = Instant::now();
                tracing::info!(%namespace, %pvc, %phase, elapsed_s = started.elapsed().as_secs(), "waiting for the clone PVC to bind");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One VolumeSnapshot of ours (404 worded as for a missing snapshot).
    async fn volume_snapshot(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Arc<DynamicObject>> {
        // A miss is read again from the API server: a snapshot just made by another replica
        // (or by hand) may not have reached this replica's watch yet.
        let object = match self.snapshot_cache.get(namespace, name) {
            Some(cached) => Some(cached),
            None => self
                .volume_snapshots(Some(namespace))
                .get_opt(name)
                .await
                .map_err(|e| kube_error(&format!("snapshot {name}"), e))?
                .map(Arc::new),
        }
        .ok_or_else(|| not_found(namespace, name))?;
        if snapshots::kind_of(&object).is_none() {
            return Err(not_found(namespace, name));
        }
        Ok(object)
    }

    /// Snapshots of a namespace (all when `None`), by namespace then name.
    pub(super) async fn list_snapshot_records(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
        kind: Option<SnapshotKind>,
    ) -> PlatformResult<Vec<Snapshot>> {
        let items: Vec<Arc<DynamicObject>> = match self.snapshot_cache.store() {
            Some(store) => store.state_filter(|o| {
                namespace.is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns))
            }),
            None => self.read_snapshot_objects(namespace).await?,
        };
        Ok(snapshot_records(&items, sandbox, kind))
    }

    /// The VolumeSnapshots of sbx in a namespace (all when `None`), read from the API server.
    pub(super) async fn read_snapshot_objects(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<DynamicObject>>> {
        read_managed(self.volume_snapshots(namespace), "list snapshots").await
    }

    /// One snapshot record.
    pub(super) async fn snapshot_record(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Snapshot> {
        let object = self.volume_snapshot(namespace, name).await?;
        Ok(snapshots::record(
            &object,
            crate::shared::timestamp::now_unix(),
        ))
    }

    /// The template a snapshot's annotations record.
    pub(super) async fn snapshot_template(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<SandboxTemplate> {
        let object = self.volume_snapshot(namespace, name).await?;
        snapshots::template(&snapshots::annotations_of(&object)).map_err(|e| {
            PlatformError::Invalid(format!("snapshot '{name}' cannot be restored: {e}"))
        })
    }

    /// A new sandbox from a snapshot: the recorded template with the plan's overrides, its
    /// root PVC cloned from the snapshot.
    pub(super) async fn restore(&self, snapshot: &str, plan: RestorePlan) -> PlatformResult<()> {
        let namespace = plan.namespace.as_str();
        let mut t = self.snapshot_template(namespace, snapshot).await?;
        if let Some(image) = &plan.image {
            t.image = image.clone();
        }
        if t.image.trim().is_empty() {
            return Err(PlatformError::Invalid(format!(
                "snapshot '{snapshot}' records no image (annotation {}) and the overrides name \
                 none",
                snapshots::SOURCE_IMAGE
            )));
        }
        if t.backend != KQL_BACKEND {
            return Err(PlatformError::Invalid(format!(
                "snapshot '{snapshot}' was taken on {}: only {KQL_BACKEND} snapshots can be restored",
                t.backend
            )));
        }
        t.cpu_millis = plan.cpu_millis.or(t.cpu_millis);
        t.memory_bytes = plan.memory_bytes.or(t.memory_bytes);
        t.ephemeral_bytes = plan.ephemeral_bytes.or(t.ephemeral_bytes);
        t.root_disk_bytes = plan.root_disk_bytes.or(t.root_disk_bytes);
        if plan.entrypoint.is_some() {
            t.entrypoint = plan.entrypoint.clone();
        }
        if plan.cmd.is_some() {
            t.cmd = plan.cmd.clone();
        }
        if let Some(script) = &plan.before_script {
            t.before_script = script.clone();
        }
        if let Some(sidecar) = &plan.sidecar {
            t.sidecar =
                (sidecar != crate::shared::models::snapshot::SIDECAR_NONE).then(|| sidecar.clone());
        }
        if plan.nodes.is_some() {
            t.nodes = plan.nodes.clone();
        }
        let env_copy = snapshots::env_secret(snapshot);
        let env = if t.env {
            Env::Copy(&env_copy)
        } else {
            Env::None
        };
        self.root_pvc_free(namespace, &plan.new_name).await?;
        self.launch(
            namespace,
            &plan.new_name,
            &t,
            Root::FromSnapshot(snapshot),
            env,
        )
        .await
    }

    /// Deletes (or, dry, lists) the `fork` snapshots older than `keep_for`.
    pub(super) async fn gc(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>> {
        let now = crate::shared::timestamp::now_unix();
        let mut results = Vec::new();
        // What it deletes is read from the API server, not the watch cache: its ages must be
        // the current ones.
        let objects = self.read_snapshot_objects(namespace).await?;
        for s in snapshot_records(&objects, None, Some(SnapshotKind::Fork)) {
            let created =
                crate::shared::timestamp::parse_timestamp(&s.creation_timestamp).unwrap_or(now);
            if ((now - created).max(0) as u64) < keep_for.as_secs() {
                continue;
            }
            let deleted = !dry_run
                && match self.delete_snapshot_objects(&s.namespace, &s.name).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(snapshot = %s.name, error = %e, "snapshot GC");
                        false
                    }
                };
            results.push(GcResult {
                name: s.name,
                namespace: s.namespace,
                age: s.age,
                deleted,
            });
        }
        Ok(results)
    }
}

/// The records of these VolumeSnapshots (those of sbx), of one source sandbox and kind when
/// given, by namespace then name.
fn snapshot_records(
    objects: &[Arc<DynamicObject>],
    sandbox: Option<&str>,
    kind: Option<SnapshotKind>,
) -> Vec<Snapshot> {
    let now = crate::shared::timestamp::now_unix();
    let mut out: Vec<Snapshot> = objects
        .iter()
        .filter(|o| snapshots::kind_of(o).is_some())
        .map(|o| snapshots::record(o, now))
        .filter(|s| sandbox.is_none_or(|want| s.source_sandbox == want))
        .filter(|s| kind.is_none_or(|want| s.kind == want))
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// 409 for a `what` (sandbox, snapshot, root PVC) whose name is taken.
fn taken(what: &str, namespace: &str, name: &str) -> PlatformError {
    PlatformError::AlreadyExists(format!(
        "{what} '{name}' already exists in namespace '{namespace}'"
    ))
}

/// The error of creating a `what`: a taken name worded as [`taken`].
fn create_error(e: kube::Error, what: &str, namespace: &str, name: &str) -> PlatformError {
    match kube_error(&format!("{what} {name}"), e) {
        PlatformError::AlreadyExists(_) => taken(what, namespace, name),
        other => other,
    }
}

fn not_found(namespace: &str, name: &str) -> PlatformError {
    PlatformError::NotFound(format!(
        "snapshot '{name}' not found in namespace '{namespace}'"
    ))
}

/// The exit code an exec's final status reports (`NonZeroExitCode` carries it as a cause).
fn exit_code(status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>) -> i32 {
    let Some(status) = status else { return 1 };
    if status.status.as_deref() == Some("Success") {
        return 0;
    }
    status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|causes| {
            causes
                .iter()
                .find(|c| c.reason.as_deref() == Some("ExitCode"))
                .and_then(|c| c.message.as_deref()?.parse().ok())
        })
        .unwrap_or(1)
}
