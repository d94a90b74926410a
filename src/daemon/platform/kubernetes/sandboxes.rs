//! Sandboxes as Deployments: the object a create becomes, and the sandbox record a
//! Deployment reads as.
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::daemon::platform::{NewSandbox, Reservation};
use crate::shared::duration::format_age;
use crate::shared::models::sandbox::{Sandbox, SandboxStatus};
use crate::shared::quantity::{Quantity, format_bytes_binary, format_cpu_millis};

/// Label every sandbox Deployment (and its Pods) carries: the sandbox's name.
pub const SANDBOX_LABEL: &str = "sbx.io/sandbox";
/// Label marking objects sbx manages.
pub const MANAGED_LABEL: &str = "app.kubernetes.io/managed-by";
/// Annotation recording the backend.
pub const BACKEND_ANNOTATION: &str = "sbx.io/backend";
/// The main container's name.
pub const CONTAINER: &str = "sandbox";
/// The file a passed `before_script` leaves; the readiness probe waits for it.
pub const READY_MARKER: &str = "/tmp/.sbx-ready";

/// Name of the Secret holding a sandbox's env file.
pub fn env_secret(sandbox: &str) -> String {
    format!("{sandbox}-env")
}

/// Name of a sandbox's egress NetworkPolicy.
pub fn egress_policy(sandbox: &str) -> String {
    format!("{sandbox}-egress")
}

/// The env file as a Secret (`stringData`), when the create named one.
pub fn env_secret_object(new: &NewSandbox) -> Option<Value> {
    if new.env.is_empty() {
        return None;
    }
    let data: serde_json::Map<String, Value> = new
        .env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    Some(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": env_secret(&new.name),
            "namespace": new.namespace,
            "labels": {SANDBOX_LABEL: new.name, MANAGED_LABEL: super::FIELD_MANAGER},
        },
        "type": "Opaque",
        "stringData": data,
    }))
}

/// The egress allow-list as a NetworkPolicy (DESIGN §4): `[]` allows nothing out; a list
/// allows those CIDRs plus DNS to the cluster's resolver; no list, no policy.
pub fn egress_policy_object(new: &NewSandbox) -> Option<Value> {
    let list = new.egress.as_ref()?;
    let mut rules = Vec::new();
    if !list.is_empty() {
        let blocks: Vec<Value> = list
            .iter()
            .map(|c| json!({"ipBlock": {"cidr": c}}))
            .collect();
        rules.push(json!({"to": blocks}));
        rules.push(json!({
            "to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        }));
    }
    Some(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": egress_policy(&new.name),
            "namespace": new.namespace,
            "labels": {SANDBOX_LABEL: new.name, MANAGED_LABEL: super::FIELD_MANAGER},
        },
        "spec": {
            "podSelector": {"matchLabels": {SANDBOX_LABEL: new.name}},
            "policyTypes": ["Egress"],
            "egress": rules,
        },
    }))
}

/// The RuntimeClass of a backend.
pub fn runtime_class(backend: &str) -> &'static str {
    match backend {
        super::KFD_BACKEND => "kata-fc",
        _ => "kata-qemu",
    }
}

/// The Deployment (server-side apply body) of a new sandbox: one replica of the image under
/// the backend's RuntimeClass, the limits as resources, the user and capabilities of the
/// create body, no service-account token, placement on the allowed nodes (tolerating their
/// tenant's dedication taint).
pub fn deployment(new: &NewSandbox, tenant: Option<&str>) -> Value {
    let mut limits = serde_json::Map::new();
    if let Some(m) = new.cpu_millis {
        limits.insert("cpu".into(), format_cpu_millis(m).into());
    }
    if let Some(b) = new.memory_bytes {
        limits.insert("memory".into(), format_bytes_binary(b).into());
    }
    if let Some(b) = new.ephemeral_bytes {
        limits.insert("ephemeral-storage".into(), format_bytes_binary(b).into());
    }
    let caps: Vec<String> = new
        .capabilities
        .iter()
        .map(|c| c.trim_start_matches("CAP_").to_string())
        .collect();
    let mut pod_security = json!({"runAsUser": new.uid, "runAsGroup": new.gid});
    if !new.additional_gids.is_empty() {
        pod_security["fsGroup"] = json!(new.additional_gids[0]);
        pod_security["runAsNonRoot"] = json!(true);
    }
    let mut container = json!({
        "name": CONTAINER,
        "image": new.image,
        "resources": {"limits": limits, "requests": limits},
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"], "add": caps},
        },
    });
    if !new.env.is_empty() {
        container["envFrom"] = json!([{"secretRef": {"name": env_secret(&new.name)}}]);
    }
    if let Some(script) = &new.before_script {
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
    let mut pod_spec = json!({
        "runtimeClassName": runtime_class(&new.backend),
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": pod_security,
        "containers": [container],
    });
    if let Some(nodes) = &new.nodes {
        pod_spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": "kubernetes.io/hostname", "operator": "In", "values": nodes,
            }]}],
        }}});
    }
    if let Some(tenant) = tenant {
        pod_spec["tolerations"] = json!([{
            "key": super::TENANT_LABEL, "operator": "Equal", "value": tenant, "effect": "NoSchedule",
        }]);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": new.name,
            "namespace": new.namespace,
            "labels": {SANDBOX_LABEL: new.name, MANAGED_LABEL: super::FIELD_MANAGER},
            "annotations": {BACKEND_ANNOTATION: new.backend},
        },
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {SANDBOX_LABEL: new.name}},
            "template": {
                "metadata": {"labels": {SANDBOX_LABEL: new.name, MANAGED_LABEL: super::FIELD_MANAGER}},
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

/// The sandbox record of a Deployment (and what its Pods say) at `now` (unix seconds).
pub fn sandbox(deployment: &Deployment, pods: &PodView, now: i64) -> Sandbox {
    let meta = &deployment.metadata;
    let spec = &deployment.spec;
    let status = deployment.status.as_ref();
    let wanted = spec.replicas.unwrap_or(1);
    let ready_replicas = status.and_then(|s| s.ready_replicas).unwrap_or(0);
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
    let (state, ready, error) = if meta.deletion_timestamp.is_some() {
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
    };
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
    Sandbox {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        status: state,
        ready: if ready { "True" } else { "False" }.to_string(),
        restarts: pods.restarts,
        age: format_age((now - created).max(0) as u64),
        image: container.and_then(|c| c.image.clone()).unwrap_or_default(),
        error_message: error,
        backend: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(BACKEND_ANNOTATION).cloned())
            .unwrap_or_default(),
    }
}

/// What a sandbox Deployment reserves (its container's limits).
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
    Reservation {
        sandboxes: 1,
        cpu_millis: parse("cpu").map(|q| q.millis() as u64).unwrap_or(0),
        memory_bytes: parse("memory").map(|q| q.value_ceil() as u64).unwrap_or(0),
        disk_bytes: parse("ephemeral-storage")
            .map(|q| q.value_ceil() as u64)
            .unwrap_or(0),
        snapshot_bytes: 0,
    }
}
