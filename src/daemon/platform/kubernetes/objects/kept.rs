//! What the watch caches keep of sandbox Deployments and Pods: the fields sbx reads of them.
//! At 10,000 sandboxes the rest was most of a replica's memory (docs/performance.md, "Scale").
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;

use crate::daemon::platform::kubernetes::cache::Kept;

/// A cached sandbox Deployment keeps what [`sandbox`](super::sandboxes::sandbox), [`size`](super::sandboxes::size), the recorded template and the
/// pause, resume and exec paths read: its metadata (annotations included: the template, the
/// backend, the lifetime), its replicas and status, and its first container's name, image and
/// limits. The rest of its Pod template (env, volumes, security context, a sidecar) is
/// written once and read by nothing: at 10,000 sandboxes it was most of a replica's memory.
impl Kept for Deployment {
    fn keep_read_fields(&mut self) {
        use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
        let template = &mut self.spec.template;
        template.metadata = None;
        if let Some(pod) = template.spec.take() {
            let main = pod.containers.into_iter().next().map(|c| Container {
                name: c.name,
                image: c.image,
                resources: c.resources.map(|r| ResourceRequirements {
                    limits: r.limits,
                    ..Default::default()
                }),
                ..Default::default()
            });
            template.spec = Some(PodSpec {
                containers: main.into_iter().collect(),
                ..Default::default()
            });
        }
    }
}

/// A cached NetworkPolicy keeps its metadata: the leader reads which exist
/// ([`keep_policies`](crate::daemon::platform::kubernetes::KubernetesPlatform)), not what they
/// allow.
impl Kept for k8s_openapi::api::networking::v1::NetworkPolicy {
    fn keep_read_fields(&mut self) {
        self.spec = None;
    }
}

/// A cached sandbox Pod keeps what [`pod_view`](super::sandboxes::pod_view), [`starting_too_long`](super::sandboxes::starting_too_long), the Pod choices of exec
/// and logs and the usage's egress read: its name, namespace, labels and timestamps, its
/// containers' names, and of its status the phase, message, conditions, host and Pod IPs and
/// its containers' names, restarts and states.
impl Kept for Pod {
    fn keep_read_fields(&mut self) {
        use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};
        self.metadata.annotations = None;
        self.metadata.owner_references = None;
        if let Some(spec) = self.spec.take() {
            self.spec = Some(PodSpec {
                containers: spec
                    .containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        ..Default::default()
                    })
                    .collect(),
                node_name: spec.node_name,
                ..Default::default()
            });
        }
        if let Some(status) = self.status.take() {
            self.status = Some(PodStatus {
                phase: status.phase,
                message: status.message,
                reason: status.reason,
                conditions: status.conditions,
                host_ip: status.host_ip,
                pod_ip: status.pod_ip,
                container_statuses: status.container_statuses.map(|all| {
                    all.into_iter()
                        .map(|c| ContainerStatus {
                            name: c.name,
                            ready: c.ready,
                            restart_count: c.restart_count,
                            started: c.started,
                            state: c.state,
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::config::KubernetesSettings;
    use crate::daemon::platform::kubernetes::objects::sandboxes::*;
    use serde_json::json;

    /// What the watch cache keeps of a Deployment and its Pod reads as the whole objects do,
    /// and is smaller.
    #[test]
    fn cached_objects_read_as_the_whole_ones() {
        let template = SandboxTemplate {
            image: "busybox".into(),
            backend: crate::daemon::platform::kubernetes::KQL_BACKEND.into(),
            cpu_millis: Some(500),
            memory_bytes: Some(256 << 20),
            ephemeral_bytes: Some(1 << 30),
            root_disk_bytes: Some(2 << 30),
            env: true,
            ..Default::default()
        };
        let mut object = deployment(
            "ns",
            "s",
            &template,
            Some("acme"),
            None,
            &KubernetesSettings::default(),
            false,
        );
        object["metadata"]["creationTimestamp"] = json!("2026-11-26T10:00:00Z");
        object["metadata"]["generation"] = json!(2);
        object["status"] = json!({
            "observedGeneration": 2, "readyReplicas": 1, "replicas": 1,
            "conditions": [{"type": "Available", "status": "True"}],
        });
        let whole: Deployment = serde_json::from_value(object).unwrap();
        let mut kept = whole.clone();
        kept.keep_read_fields();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "s-1", "namespace": "ns", "labels": {"sbx.io/sandbox": "s"},
                "annotations": {"a": "b"}, "creationTimestamp": "2026-11-26T10:00:00Z",
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": CONTAINER, "image": "busybox",
                    "env": [{"name": "A", "value": "1"}],
                    "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                "volumes": [{"name": "v", "emptyDir": {}}],
            },
            "status": {
                "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
                "conditions": [{"type": "PodScheduled", "status": "True",
                    "lastTransitionTime": "2026-11-26T10:00:00Z"}],
                "containerStatuses": [{"name": CONTAINER, "image": "busybox",
                    "imageID": "sha256:x", "ready": true, "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "m"}}}],
            },
        }))
        .unwrap();
        let mut kept_pod = pod.clone();
        kept_pod.keep_read_fields();

        let now = 1_795_687_260;
        let view = pod_view(&[&pod]);
        assert_eq!(pod_view(&[&kept_pod]).restarts, view.restarts);
        assert_eq!(pod_view(&[&kept_pod]).broken, view.broken);
        assert_eq!(
            sandbox(&kept, &pod_view(&[&kept_pod]), now),
            sandbox(&whole, &view, now)
        );
        assert_eq!(size(&kept), size(&whole));
        assert_eq!(
            SandboxTemplate::recorded(&kept).unwrap(),
            SandboxTemplate::recorded(&whole).unwrap()
        );
        assert_eq!(
            starting_too_long(&kept_pod, now),
            starting_too_long(&pod, now)
        );
        assert_eq!(
            kept_pod.spec.as_ref().unwrap().containers[0].name,
            CONTAINER
        );
        assert_eq!(
            kept_pod.status.as_ref().unwrap().host_ip,
            pod.status.as_ref().unwrap().host_ip
        );
        let pod_spec = |d: &Deployment| d.spec.template.spec.clone().unwrap();
        assert!(pod_spec(&kept).volumes.is_none() && pod_spec(&whole).volumes.is_some());
        assert!(kept_pod.spec.as_ref().unwrap().volumes.is_none());
        assert!(kept_pod.metadata.annotations.is_none());
    }
}
