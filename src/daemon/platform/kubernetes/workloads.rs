//! What the Kubernetes platform does with a sandbox's objects: launching one (Deployment,
//! root PVC, env Secret, egress NetworkPolicy) and taking it apart, exec and logs through the
//! API server, metrics from `metrics.k8s.io`. Snapshots, forks and restores are in `volumes`.
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{
    Api, ApiResource, AttachParams, DynamicObject, ListParams, LogParams, ObjectMeta, PostParams,
};

use super::objects::sandboxes::{self, CONTAINER};
use super::objects::{names, snapshots};
use super::{FIELD_MANAGER, KubernetesPlatform, conflict, kube_error, managed, missing};
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::shared::models::sandbox::{ExecResponse, SandboxMetrics};
use crate::shared::quantity::{Quantity, format_cpu_millis, format_mebibytes};

/// How long an exec waits for the Pod of a sandbox that wants one to run.
const POD_START_WAIT: Duration = Duration::from_secs(30);

/// The most of each exec stream kept (the rest is cut and `truncated` set).
pub(super) const EXEC_OUTPUT_CAP: usize = 16 << 20;
/// How long a pause with a snapshot waits for the sandbox's Pod to be gone before it
/// snapshots anyway.
pub(super) const POD_GONE_WAIT: Duration = Duration::from_secs(60);
/// How often a fork reports the clone PVC's progress in the log.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long undoing a fork waits for its clone PVC to be gone.
pub(super) const PVC_GONE_WAIT: Duration = Duration::from_secs(10);

/// Every create and replace names sbx as the field manager (as the server-side applies do).
pub(super) fn writer() -> PostParams {
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
    pub(super) fn pvcs(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub(super) fn volume_snapshots(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &snapshots::resource()),
            None => Api::all_with(self.client.clone(), &snapshots::resource()),
        }
    }

    /// Copies the data of Secret `from` into a new Secret `to` labelled for `sandbox`.
    pub(super) async fn copy_secret(
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
            (names::SANDBOX_LABEL.to_string(), sandbox.to_string()),
            (names::MANAGED_LABEL.to_string(), FIELD_MANAGER.to_string()),
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
        let pvcs = self.pvcs(namespace);
        let deployments = self.deployments(Some(namespace));
        let (secret, policy) = (sandboxes::env_secret(name), sandboxes::egress_policy(name));
        let pvc = sandboxes::root_pvc(name);
        let none = Default::default();
        let outcomes: [Result<(), kube::Error>; 4] = tokio::join!(
            async { deployments.delete(name, &none).await.map(drop) },
            async { secrets.delete(&secret, &none).await.map(drop) },
            async { policies.delete(&policy, &none).await.map(drop) },
            async { pvcs.delete(&pvc, &none).await.map(drop) },
        )
        .into();
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
    pub(super) async fn remove_sandbox_objects(&self, namespace: &str, name: &str) {
        if let Err(e) = self.delete_sandbox_objects(namespace, name).await {
            tracing::warn!(%namespace, sandbox = %name, error = %e, "undoing a sandbox");
        }
    }

    /// The sandbox's Pods (from the watch cache when in step), newest first.
    pub(super) async fn pods_of(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Vec<Arc<Pod>>> {
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
    /// paused or not running.
    pub(super) async fn running_pod(&self, namespace: &str, name: &str) -> PlatformResult<String> {
        let running = |pods: &[Arc<Pod>]| {
            pods.iter()
                .find(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .map(|p| p.metadata.name.clone().unwrap_or_default())
        };
        let deployment = self.sandbox_deployment(namespace, name).await?;
        if deployment.spec.replicas != Some(0) {
            if let Some(pod) = running(&self.pods_of(namespace, name).await?) {
                return Ok(pod);
            }
        }
        // Not running as this replica's watches show it: they can lag behind a change made
        // through another replica (a resume), so the API server says whether it is paused.
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        let live = deployments
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("read sandbox {name}"), e))?
            .ok_or_else(|| {
                PlatformError::NotFound(format!(
                    "sandbox '{name}' not found in namespace '{namespace}'"
                ))
            })?;
        if live.spec.replicas == Some(0) {
            return Err(PlatformError::Conflict(format!(
                "sandbox '{name}' is paused: resume it first"
            )));
        }
        // It wants a replica: one being replaced or starting (just after a resume, when the
        // old Pod is still terminating) is waited for, as the embedded default waits for a
        // Pending sandbox.
        let started = Instant::now();
        let pods = loop {
            let pods = self.pods_of(namespace, name).await?;
            if running(&pods).is_some() || started.elapsed() >= POD_START_WAIT {
                break pods;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        match running(&pods) {
            Some(pod) => Ok(pod),
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
            Ok((out, out_cut, err, err_cut, status)) => {
                // Each stream's JSON form is at most twice the cap (a control byte counts six).
                let (stdout, out_long) = crate::shared::io::bounded_text(out, EXEC_OUTPUT_CAP);
                let (stderr, err_long) = crate::shared::io::bounded_text(err, EXEC_OUTPUT_CAP);
                Ok(ExecResponse {
                    exit_code: exit_code(status.as_ref()),
                    stdout,
                    stderr,
                    duration_ms,
                    timed_out: false,
                    truncated: out_cut || err_cut || out_long || err_long,
                })
            }
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

    /// The last `tail` lines (of the last `since_secs` seconds) of one of the sandbox Pod's
    /// containers (`sandbox`, or a sidecar such as `dind`).
    pub(super) async fn logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String> {
        let pod = self.log_pod(namespace, name, container).await?;
        let params = LogParams {
            container: Some(container.into()),
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

    /// Follows one of the sandbox Pod's containers' log through the API server, until the
    /// container stops or the receiver is dropped.
    pub(super) async fn follow_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<tokio::sync::mpsc::Receiver<bytes::Bytes>> {
        use futures_util::AsyncReadExt;
        let pod = self.log_pod(namespace, name, container).await?;
        let params = LogParams {
            container: Some(container.into()),
            tail_lines: Some(tail as i64),
            since_seconds: (since_secs > 0).then_some(since_secs as i64),
            follow: true,
            ..Default::default()
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let mut stream = api
            .log_stream(&pod, &params)
            .await
            .map_err(|e| kube_error(&format!("logs of sandbox {name}"), e))?;
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(n) if n > 0 => {
                            if tx.send(bytes::Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                                return;
                            }
                        }
                        _ => return,
                    },
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(rx)
    }

    /// The Pod whose log is read (the newest), after checking it has `container`.
    async fn log_pod(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
    ) -> PlatformResult<String> {
        let pods = self.pods_of(namespace, name).await?;
        let found = pods.first().ok_or_else(|| {
            PlatformError::NotFound(format!(
                "sandbox '{name}' has no pod in namespace '{namespace}'"
            ))
        })?;
        let pod = found.metadata.name.clone().unwrap_or_default();
        let containers: Vec<String> = found
            .spec
            .iter()
            .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
            .collect();
        if !containers.iter().any(|c| c == container) {
            return Err(PlatformError::NotFound(format!(
                "sandbox '{name}' has no container '{container}'; its containers: {}",
                containers.join(", ")
            )));
        }
        Ok(pod)
    }

    /// Why a pending sandbox's scheduled Pod does not start, from the Pod's Warning events
    /// (one sandbox's get, not lists: an API call per Pod).
    /// Only Pods scheduled for [`sandboxes::STARTING_GRACE`] are asked about: a client polls
    /// a starting sandbox many times a second, and a normal start needs no events read.
    pub(super) async fn pending_reason(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Option<String>> {
        let pods = self.sandbox_pods(Some(namespace), Some(name)).await?;
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let now = crate::shared::timestamp::now_unix();
        for pod in pods.values().flatten() {
            let (true, Some(pod_name)) = (
                sandboxes::starting_too_long(pod, now),
                pod.metadata.name.as_deref(),
            ) else {
                continue;
            };
            let selector =
                format!("involvedObject.kind=Pod,involvedObject.name={pod_name},type=Warning");
            let list = events
                .list(&ListParams::default().fields(&selector))
                .await
                .map_err(|e| kube_error(&format!("events of sandbox {name}"), e))?;
            if let Some(reason) = sandboxes::pending_reason(&list.items) {
                return Ok(Some(reason));
            }
        }
        Ok(None)
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
                let sandbox = m.metadata.labels.as_ref()?.get(names::SANDBOX_LABEL)?;
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
}

/// 409 for a `what` (sandbox, snapshot, root PVC) whose name is taken.
pub(super) fn taken(what: &str, namespace: &str, name: &str) -> PlatformError {
    PlatformError::AlreadyExists(format!(
        "{what} '{name}' already exists in namespace '{namespace}'"
    ))
}

/// The error of creating a `what`: a taken name worded as [`taken`].
pub(super) fn create_error(
    e: kube::Error,
    what: &str,
    namespace: &str,
    name: &str,
) -> PlatformError {
    match kube_error(&format!("{what} {name}"), e) {
        PlatformError::AlreadyExists(_) => taken(what, namespace, name),
        other => other,
    }
}

pub(super) fn not_found(namespace: &str, name: &str) -> PlatformError {
    PlatformError::NotFound(format!(
        "snapshot '{name}' not found in namespace '{namespace}'"
    ))
}

/// The exit code an exec's final status reports (`NonZeroExitCode` carries it as a cause).
pub(super) fn exit_code(
    status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
) -> i32 {
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
