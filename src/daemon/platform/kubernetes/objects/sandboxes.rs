//! Sandboxes as Deployments: the object a create becomes, and the sandbox record a
//! Deployment reads as.
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::names::{
    ACTIVITY_ANNOTATION, BACKEND_ANNOTATION, EXPIRES_ANNOTATION, IDLE_ANNOTATION, MANAGED_LABEL,
    SANDBOX_LABEL, TEMPLATE_ANNOTATION, TENANT_LABEL,
};
use super::names::{EGRESS_BANDWIDTH, HOSTNAME_LABEL, INGRESS_BANDWIDTH};
use crate::daemon::config::KubernetesSettings;
use crate::daemon::platform::{NewSandbox, Reservation};
use crate::shared::duration::format_age;
use crate::shared::egress::Egress;
use crate::shared::models::sandbox::{Sandbox, SandboxStatus};
use crate::shared::quantity::{Quantity, format_bytes_binary, format_cpu_millis};

/// The main container's name.
pub const CONTAINER: &str = "sandbox";
/// The file a passed `before_script` leaves; the readiness probe waits for it.
pub const READY_MARKER: &str = "/tmp/.sbx-ready";

/// Where the root PVC of a kql sandbox is mounted in its container.
pub const ROOT_MOUNT: &str = "/workspace";
/// The Docker-in-Docker sidecar's container name.
pub const DIND_CONTAINER: &str = "dind";

/// Name of the Secret holding a sandbox's env file.
pub fn env_secret(sandbox: &str) -> String {
    format!("{sandbox}-env")
}

/// Name of a sandbox's egress NetworkPolicy.
pub fn egress_policy(sandbox: &str) -> String {
    format!("{sandbox}-egress")
}

/// Name of a kql sandbox's root PVC.
pub fn root_pvc(sandbox: &str) -> String {
    format!("{sandbox}-root-lh")
}

/// What a sandbox is made of, apart from its name, namespace and env values: what a create
/// asked for, kept on the Deployment and carried by its snapshots into forks and restores.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SandboxTemplate {
    /// Image reference.
    pub image: String,
    /// Backend.
    pub backend: String,
    /// CPU limit, millicores.
    pub cpu_millis: Option<u64>,
    /// Memory limit, bytes.
    pub memory_bytes: Option<u64>,
    /// Ephemeral storage limit, bytes.
    pub ephemeral_bytes: Option<u64>,
    /// Size of the root PVC (kql), bytes.
    pub root_disk_bytes: Option<u64>,
    /// Run before the sandbox reads Ready.
    pub before_script: Option<String>,
    /// Entrypoint (the container's `command`), when not the image's.
    pub entrypoint: Option<Vec<String>>,
    /// Cmd (the container's `args`), when not the image's.
    pub cmd: Option<Vec<String>>,
    /// Egress allow-list (None: unrestricted; empty: none).
    pub egress: Option<Vec<String>>,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Supplementary groups (the first is the pod's fsGroup).
    pub additional_gids: Vec<u32>,
    /// Capabilities kept, `CAP_*` names.
    pub capabilities: Vec<String>,
    /// A sidecar (`dind`), if any.
    pub sidecar: Option<String>,
    /// Whether the sandbox has an env Secret.
    pub env: bool,
    /// Nodes it may run on (`None`: any).
    pub nodes: Option<Vec<String>>,
    /// The user's labels (on the Deployment beside sbx's own; a fork or restore has none).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Its lifetime (annotations of the Deployment, changed by a PATCH: not recorded in the
    /// template, so a fork or restore does not inherit it).
    #[serde(skip)]
    pub lifetime: crate::daemon::platform::Lifetime,
}

impl SandboxTemplate {
    /// The template of a validated create; kql sandboxes get a root disk of `root_disk`.
    pub fn of(new: &NewSandbox, root_disk: u64) -> SandboxTemplate {
        SandboxTemplate {
            image: new.image.clone(),
            backend: new.backend.clone(),
            cpu_millis: new.cpu_millis,
            memory_bytes: new.memory_bytes,
            ephemeral_bytes: new.ephemeral_bytes,
            root_disk_bytes: (new.backend == crate::daemon::platform::kubernetes::KQL_BACKEND)
                .then_some(root_disk),
            before_script: new.before_script.clone(),
            entrypoint: new.entrypoint.clone(),
            cmd: new.cmd.clone(),
            // As the shared parser reads it (a bare address as /32), so that the snapshots
            // carry what the policy holds; the launch refuses a list it cannot read.
            egress: Egress::from_whitelist(new.egress.as_deref())
                .map(|e| e.to_whitelist())
                .unwrap_or_else(|_| new.egress.clone()),
            uid: new.uid,
            gid: new.gid,
            additional_gids: new.additional_gids.clone(),
            capabilities: new.capabilities.clone(),
            sidecar: None,
            env: !new.env.is_empty(),
            nodes: new.nodes.clone(),
            labels: new.labels.clone(),
            lifetime: new.lifetime,
        }
    }

    /// The template recorded on a sandbox's Deployment.
    pub fn recorded(deployment: &Deployment) -> Result<SandboxTemplate, String> {
        let name = deployment.metadata.name.clone().unwrap_or_default();
        let raw = deployment
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(TEMPLATE_ANNOTATION))
            .ok_or_else(|| format!("sandbox '{name}' has no {TEMPLATE_ANNOTATION} annotation"))?;
        serde_json::from_str(raw)
            .map_err(|e| format!("sandbox '{name}' has an unreadable {TEMPLATE_ANNOTATION}: {e}"))
    }

    /// Whether the sandbox has a root PVC.
    pub fn has_root_volume(&self) -> bool {
        self.backend == crate::daemon::platform::kubernetes::KQL_BACKEND
    }
}

/// The labels of every object made for a sandbox.
pub(super) fn labels(sandbox: &str) -> Value {
    json!({SANDBOX_LABEL: sandbox, MANAGED_LABEL: crate::daemon::platform::kubernetes::FIELD_MANAGER})
}

/// A sandbox's env Secret with these `KEY=VALUE` entries.
pub fn env_secret_object(namespace: &str, sandbox: &str, env: &[String]) -> Value {
    let data: serde_json::Map<String, Value> = env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": env_secret(sandbox), "namespace": namespace, "labels": labels(sandbox)},
        "type": "Opaque",
        "stringData": data,
    })
}

/// The root PVC of a kql sandbox (class `longhorn`), empty or cloned from a VolumeSnapshot.
pub fn root_pvc_object(
    namespace: &str,
    sandbox: &str,
    bytes: u64,
    from_snapshot: Option<&str>,
) -> Value {
    let mut spec = json!({
        "storageClassName": crate::daemon::platform::kubernetes::STORAGE_CLASS,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": format_bytes_binary(bytes)}},
    });
    if let Some(snapshot) = from_snapshot {
        spec["dataSource"] = json!({
            "apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snapshot,
        });
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": root_pvc(sandbox), "namespace": namespace, "labels": labels(sandbox)},
        "spec": spec,
    })
}

/// The RuntimeClass of a backend.
pub fn runtime_class(backend: &str) -> &'static str {
    match backend {
        crate::daemon::platform::kubernetes::KFD_BACKEND => "kata-fc",
        _ => "kata-qemu",
    }
}

/// The capabilities pod-security `baseline` lets a container add
/// (<https://kubernetes.io/docs/concepts/security/pod-security-standards/>): NET_RAW, which the
/// runtime's default set has, is not among them.
pub const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Pod-security level of namespaces whose Pods may be privileged or add any capability.
pub const PRIVILEGED: &str = "privileged";
/// Pod-security level of every other tenant namespace.
pub const BASELINE: &str = "baseline";

/// The pod-security level a tenant's namespaces are enforced at: `baseline`, unless the
/// tenant may run the privileged `dind` sidecar or an admin allowed it a capability outside
/// baseline's set (its sandboxes could not start otherwise).
pub fn pod_security_level(
    allowed_capabilities: Option<&[String]>,
    allow_dind: bool,
) -> &'static str {
    let beyond = allowed_capabilities.into_iter().flatten().any(|c| {
        let c = c.trim_start_matches("CAP_").to_ascii_uppercase();
        !BASELINE_CAPABILITIES.contains(&c.as_str())
    });
    if allow_dind || beyond {
        PRIVILEGED
    } else {
        BASELINE
    }
}

/// The pod-security labels of a tenant namespace: `enforce` at `level`, `warn` and `audit`
/// at baseline always (so a privileged tenant's namespaces still report what goes beyond).
pub fn pod_security_labels(level: &str) -> Value {
    json!({
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": BASELINE,
        "pod-security.kubernetes.io/warn-version": "latest",
        "pod-security.kubernetes.io/audit": BASELINE,
        "pod-security.kubernetes.io/audit-version": "latest",
    })
}

/// Whether a tenant's namespace admits this sandbox's Pod: the `dind` sidecar only where the
/// tenant allows it; at `baseline`, only baseline's capabilities. Err names what is refused
/// and the setting an admin would change.
pub fn admitted(
    t: &SandboxTemplate,
    tenant: &str,
    allowed_capabilities: Option<&[String]>,
    allow_dind: bool,
) -> Result<(), String> {
    if t.sidecar.as_deref() == Some(crate::shared::models::snapshot::SIDECAR_DIND) && !allow_dind {
        return Err(format!(
            "the dind sidecar is a privileged container and tenant '{tenant}' may not run it: \
             an admin allows it with the tenant's limits.allowDind"
        ));
    }
    if pod_security_level(allowed_capabilities, allow_dind) == BASELINE {
        if let Some(cap) = t
            .capabilities
            .iter()
            .find(|c| !BASELINE_CAPABILITIES.contains(&c.trim_start_matches("CAP_")))
        {
            return Err(format!(
                "capability {} is outside pod-security baseline, which tenant '{tenant}''s \
                 namespaces enforce: an admin allows it by listing it in the tenant's \
                 limits.allowedCapabilities (its namespaces are then enforced at privileged)",
                cap.trim_start_matches("CAP_")
            ));
        }
    }
    Ok(())
}

/// The Deployment of a sandbox: one replica of the image under the backend's RuntimeClass,
/// the limits as resources, the user and capabilities of the create body (every other
/// capability dropped, no privilege escalation, the runtime's default seccomp profile, a user
/// namespace of its own when `user_namespaces`), no service-account token, the root PVC (kql)
/// at [`ROOT_MOUNT`], placement on the allowed nodes (tolerating their tenant's dedication
/// taint), bandwidth annotations for the tenant's network limits, the template recorded as an
/// annotation.
pub fn deployment(
    namespace: &str,
    name: &str,
    t: &SandboxTemplate,
    tenant: Option<&str>,
    network: Option<&crate::shared::models::tenant::NetworkLimits>,
    settings: &KubernetesSettings,
    user_namespaces: bool,
) -> Value {
    let mut limits = serde_json::Map::new();
    if let Some(m) = t.cpu_millis {
        limits.insert("cpu".into(), format_cpu_millis(m).into());
    }
    if let Some(b) = t.memory_bytes {
        limits.insert("memory".into(), format_bytes_binary(b).into());
    }
    if let Some(b) = t.ephemeral_bytes {
        limits.insert("ephemeral-storage".into(), format_bytes_binary(b).into());
    }
    let caps: Vec<String> = t
        .capabilities
        .iter()
        .map(|c| c.trim_start_matches("CAP_").to_string())
        .collect();
    // Neither non-root flag (uid and gid 0): the image's `USER` decides, as on sbxd.
    let mut pod_security = json!({"seccompProfile": {"type": "RuntimeDefault"}});
    if t.uid != 0 || t.gid != 0 {
        pod_security["runAsUser"] = json!(t.uid);
        pod_security["runAsGroup"] = json!(t.gid);
    }
    if !t.additional_gids.is_empty() {
        pod_security["fsGroup"] = json!(t.additional_gids[0]);
        pod_security["runAsNonRoot"] = json!(true);
    }
    let mut container = json!({
        "name": CONTAINER,
        "image": t.image,
        "resources": {"limits": limits, "requests": limits},
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"], "add": caps},
        },
    });
    if let Some(entrypoint) = &t.entrypoint {
        container["command"] = json!(entrypoint);
    }
    if let Some(cmd) = &t.cmd {
        container["args"] = json!(cmd);
    }
    if t.env {
        container["envFrom"] = json!([{"secretRef": {"name": env_secret(name)}}]);
    }
    if let Some(script) = &t.before_script {
        // The script runs as the container starts; the sandbox is Ready once it passed (a
        // failing script fails the start, and the kubelet restarts the container).
        container["lifecycle"] = json!({"postStart": {"exec": {"command": [
            "/bin/sh", "-c", format!("{script}\ntouch {READY_MARKER}"),
        ]}}});
        container["readinessProbe"] = json!({
            "exec": {"command": ["/bin/sh", "-c", format!("test -e {READY_MARKER}")]},
            "periodSeconds": 1,
        });
    }
    let mut containers = vec![];
    let mut volumes = vec![];
    if t.has_root_volume() {
        container["volumeMounts"] = json!([{"name": "root", "mountPath": ROOT_MOUNT}]);
        volumes
            .push(json!({"name": "root", "persistentVolumeClaim": {"claimName": root_pvc(name)}}));
    }
    if t.sidecar.as_deref() == Some(crate::shared::models::snapshot::SIDECAR_DIND) {
        // Docker in Docker beside the sandbox (privileged inside the sandbox's VM only),
        // reached over the pod's loopback.
        container["env"] = json!([{"name": "DOCKER_HOST", "value": "tcp://127.0.0.1:2375"}]);
        // Its own requests and limits: a namespace with a ResourceQuota on CPU or memory
        // refuses a Pod with a container that has none.
        let size = json!({
            "cpu": format_cpu_millis(settings.dind_cpu_millis),
            "memory": format_bytes_binary(settings.dind_memory_bytes),
        });
        containers.push(json!({
            "name": DIND_CONTAINER,
            "image": settings.dind_image,
            "securityContext": {"privileged": true, "runAsUser": 0},
            "env": [{"name": "DOCKER_TLS_CERTDIR", "value": ""}],
            "resources": {"limits": size, "requests": size},
        }));
    }
    containers.insert(0, container);
    let mut pod_spec = json!({
        "runtimeClassName": runtime_class(&t.backend),
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": pod_security,
        "containers": containers,
    });
    if user_namespaces && t.sidecar.is_none() {
        // A privileged container cannot run in a user namespace of its own.
        pod_spec["hostUsers"] = json!(false);
    }
    if !volumes.is_empty() {
        pod_spec["volumes"] = json!(volumes);
    }
    if let Some(nodes) = &t.nodes {
        pod_spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": HOSTNAME_LABEL, "operator": "In", "values": nodes,
            }]}],
        }}});
    }
    if !settings.sandbox_node_selector.is_empty() {
        pod_spec["nodeSelector"] = json!(settings.sandbox_node_selector);
    }
    let mut tolerations = vec![];
    if let Some(tenant) = tenant {
        tolerations.push(json!({
            "key": TENANT_LABEL, "operator": "Equal", "value": tenant, "effect": "NoSchedule",
        }));
    }
    tolerations.extend(settings.sandbox_tolerations.iter().map(|t| json!(t)));
    if !tolerations.is_empty() {
        pod_spec["tolerations"] = json!(tolerations);
    }
    let mut pod_annotations = serde_json::Map::new();
    if let Some(limits) = network {
        if let Some(bps) = &limits.egress_bps {
            pod_annotations.insert(EGRESS_BANDWIDTH.into(), bps.clone().into());
        }
        if let Some(bps) = &limits.ingress_bps {
            pod_annotations.insert(INGRESS_BANDWIDTH.into(), bps.clone().into());
        }
    }
    let mut user_and_own = labels(name);
    for (key, value) in &t.labels {
        user_and_own[key] = json!(value);
    }
    let mut annotations = json!({
        BACKEND_ANNOTATION: t.backend,
        TEMPLATE_ANNOTATION: serde_json::to_string(t).unwrap_or_default(),
    });
    for (key, value) in lifetime_annotations(&t.lifetime) {
        if !value.is_null() {
            annotations[key] = value;
        }
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": user_and_own,
            "annotations": annotations,
        },
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {SANDBOX_LABEL: name}},
            "template": {
                "metadata": {"labels": labels(name), "annotations": pod_annotations},
                "spec": pod_spec,
            },
        },
    })
}

/// Container waiting reasons that mean the sandbox cannot run as it is.
const BROKEN: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

/// What the sandbox's Pods add to its record: restarts, and why it is not running.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodView {
    /// Restarts of the main container.
    pub restarts: i32,
    /// A reason the sandbox cannot run (`Failed`).
    pub broken: Option<String>,
    /// A reason it waits (`Pending`, e.g. unschedulable).
    pub waiting: Option<String>,
}

/// Reads the Pods of one sandbox.
pub fn pod_view(pods: &[&Pod]) -> PodView {
    let mut view = PodView::default();
    for pod in pods {
        let Some(status) = &pod.status else { continue };
        for c in status.container_statuses.iter().flatten() {
            if c.name != CONTAINER {
                continue;
            }
            view.restarts += c.restart_count;
            if let Some(w) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) {
                let reason = w.reason.clone().unwrap_or_default();
                if BROKEN.contains(&reason.as_str()) {
                    view.broken = Some(match &w.message {
                        Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                        _ => reason,
                    });
                }
            }
        }
        if status.phase.as_deref() == Some("Failed") && view.broken.is_none() {
            view.broken = Some(
                status
                    .message
                    .clone()
                    .unwrap_or_else(|| "the sandbox's pod failed".into()),
            );
        }
        for c in status.conditions.iter().flatten() {
            if c.type_ == "PodScheduled" && c.status == "False" {
                view.waiting = Some(format!(
                    "not scheduled: {}",
                    c.message
                        .clone()
                        .unwrap_or_else(|| c.reason.clone().unwrap_or_default())
                ));
            }
        }
    }
    view
}

/// How long a scheduled Pod may take to start before its events are read for a reason.
pub const STARTING_GRACE: i64 = 2;

/// Whether a Pod was scheduled to a node at least [`STARTING_GRACE`] seconds before `now`
/// (unix seconds) and still has no running container.
pub fn starting_too_long(pod: &Pod, now: i64) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    let scheduled_at = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_second());
    let running = status
        .container_statuses
        .iter()
        .flatten()
        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
    scheduled_at.is_some_and(|at| now - at >= STARTING_GRACE) && !running
}

/// Why a scheduled Pod does not start, from its Warning events (newest first wins), e.g.
/// `FailedCreatePodSandBox: … no runtime for "kata-fc" is configured`: what a kubelet knows
/// and the Pod's status does not say.
pub fn pending_reason(events: &[k8s_openapi::api::core::v1::Event]) -> Option<String> {
    let when = |e: &k8s_openapi::api::core::v1::Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .or_else(|| e.event_time.as_ref().map(|t| t.0.as_second()))
            .unwrap_or(0)
    };
    let latest = events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .max_by_key(|e| when(e))?;
    let reason = latest.reason.clone().unwrap_or_else(|| "Warning".into());
    Some(match latest.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => format!("{reason}: {m}"),
        _ => reason,
    })
}

/// A sandbox Deployment's state (and what its Pods say): its status, whether it is ready, and
/// why it fails or waits.
pub fn state(deployment: &Deployment, pods: &PodView) -> (SandboxStatus, bool, String) {
    let meta = &deployment.metadata;
    let spec = &deployment.spec;
    let status = deployment.status.as_ref();
    let wanted = spec.replicas.unwrap_or(1);
    // A status the controller has not yet written for the current spec (e.g. just after a
    // resume) says nothing about it.
    let observed =
        status.and_then(|s| s.observed_generation).unwrap_or(0) >= meta.generation.unwrap_or(0);
    let ready_replicas = status
        .filter(|_| observed)
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let failed = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter().find(|c| {
                c.type_.as_deref() == Some("Progressing")
                    && c.status.as_deref() == Some("False")
                    && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
            })
        })
        .map(|c| c.message.clone().unwrap_or_default());
    // The ReplicaSet cannot make the Pod (a ResourceQuota or pod-security admission refused
    // it): the controller retries, but nothing starts until what refused it changes.
    let refused = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter().find(|c| {
                c.type_.as_deref() == Some("ReplicaFailure") && c.status.as_deref() == Some("True")
            })
        })
        .map(|c| {
            format!(
                "the sandbox's Pod cannot be created: {}",
                c.message.clone().unwrap_or_default()
            )
        });
    let failed = failed.or(refused);
    if meta.deletion_timestamp.is_some() {
        (SandboxStatus::Terminating, false, String::new())
    } else if wanted == 0 {
        (SandboxStatus::Paused, false, String::new())
    } else if let Some(message) = failed.or_else(|| pods.broken.clone()) {
        (SandboxStatus::Failed, false, message)
    } else if ready_replicas >= 1 {
        (SandboxStatus::Running, true, String::new())
    } else {
        (
            SandboxStatus::Pending,
            false,
            pods.waiting.clone().unwrap_or_default(),
        )
    }
}

/// The backend a sandbox Deployment runs on (its annotation).
pub fn backend_of(deployment: &Deployment) -> String {
    deployment
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BACKEND_ANNOTATION).cloned())
        .unwrap_or_default()
}

/// The sandbox record of a Deployment (and what its Pods say) at `now` (unix seconds).
pub fn sandbox(deployment: &Deployment, pods: &PodView, now: i64) -> Sandbox {
    let meta = &deployment.metadata;
    let spec = &deployment.spec;
    let (state, ready, error) = state(deployment, pods);
    let created = meta
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(now);
    let container = spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first());
    let (expires_at, idle_timeout_seconds, last_activity_at) = lifetime_fields(meta, created);
    Sandbox {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        status: state,
        ready: if ready { "True" } else { "False" }.to_string(),
        restarts: pods.restarts,
        age: format_age((now - created).max(0) as u64),
        image: container.and_then(|c| c.image.clone()).unwrap_or_default(),
        error_message: error,
        backend: backend_of(deployment),
        labels: crate::shared::labels::user_labels(meta.labels.as_ref()),
        expires_at,
        idle_timeout_seconds,
        last_activity_at,
    }
}

/// The annotations of a lifetime (`null` for a setting it has not: a merge patch removes it).
pub fn lifetime_annotations(
    lifetime: &crate::daemon::platform::Lifetime,
) -> [(&'static str, Value); 2] {
    let text = |v: Option<String>| v.map(Value::String).unwrap_or(Value::Null);
    [
        (
            EXPIRES_ANNOTATION,
            text(lifetime.expires_at.map(|t| t.to_string())),
        ),
        (
            IDLE_ANNOTATION,
            text(lifetime.idle_timeout_seconds.map(|t| t.to_string())),
        ),
    ]
}

/// A sandbox object's lifetime, from its annotations.
pub fn lifetime_of(meta: &kube::api::ObjectMeta) -> crate::daemon::platform::Lifetime {
    let read = |key: &str| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(|v| v.parse::<i64>().ok())
    };
    crate::daemon::platform::Lifetime {
        expires_at: read(EXPIRES_ANNOTATION),
        idle_timeout_seconds: read(IDLE_ANNOTATION).map(|v| v.max(0) as u64),
    }
}

/// A sandbox object's last activity, Unix seconds: its annotation, or `created` until one is
/// written.
pub fn last_activity(meta: &kube::api::ObjectMeta, created: i64) -> i64 {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(ACTIVITY_ANNOTATION))
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(created)
}

/// The lifetime fields of a sandbox record (`expires_at`, `idle_timeout_seconds`,
/// `last_activity_at`): its object's annotations (the last activity is its creation until one
/// is written).
pub fn lifetime_fields(
    meta: &kube::api::ObjectMeta,
    created: i64,
) -> (Option<String>, Option<u64>, Option<String>) {
    let lifetime = lifetime_of(meta);
    let activity = last_activity(meta, created);
    let time = crate::shared::timestamp::format_rfc3339_utc;
    (
        lifetime.expires_at.map(time),
        lifetime.idle_timeout_seconds,
        Some(time(activity)),
    )
}

/// The root disk size its recorded template gives a sandbox Deployment, read alone: a quota
/// check sums a tenant's every Deployment, the usage accrual every sandbox's each 5 s, and the
/// whole template (strings, lists, a map) is built for nothing there.
fn recorded_root_disk(deployment: &Deployment) -> Option<u64> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct RootDisk {
        root_disk_bytes: Option<u64>,
    }
    let raw = deployment
        .metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_ANNOTATION)?;
    serde_json::from_str::<RootDisk>(raw).ok()?.root_disk_bytes
}

/// What a sandbox Deployment reserves: its container's limits, and its root volume (kql) as
/// disk beside the ephemeral-storage limit.
pub fn size(deployment: &Deployment) -> Reservation {
    let limits = deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.limits.clone())
        .unwrap_or_default();
    let parse = |key: &str| limits.get(key).and_then(|q| Quantity::parse(&q.0).ok());
    let root = recorded_root_disk(deployment).unwrap_or(0);
    let ephemeral = parse("ephemeral-storage")
        .map(|q| q.value_ceil() as u64)
        .unwrap_or(0);
    Reservation {
        sandboxes: 1,
        cpu_millis: parse("cpu").map(|q| q.millis() as u64).unwrap_or(0),
        memory_bytes: parse("memory").map(|q| q.value_ceil() as u64).unwrap_or(0),
        disk_bytes: ephemeral + root,
        root_disk_bytes: root,
        snapshot_bytes: 0,
    }
}

#[cfg(test)]
mod tests;
