//! Lifetimes on Kubernetes: annotations of the sandbox's object (its Deployment, or its
//! SbxdSandbox record), which every replica's watch sees and the leader acts on. A patch of a
//! Deployment's own annotations changes nothing in its Pods.
use super::objects::names::ACTIVITY_ANNOTATION;
use super::objects::sandboxes::{last_activity, lifetime_annotations, lifetime_of};
use super::*;
use crate::daemon::platform::Lifetime;
use crate::shared::timestamp::now_unix;

/// The least time, seconds, between two writes of one sandbox's activity by one replica.
const ACTIVITY_EVERY: i64 = 3;

impl KubernetesPlatform {
    /// Merges `annotations` (a `null` value removes one) into the sandbox's object.
    async fn annotate(
        &self,
        namespace: &str,
        name: &str,
        annotations: serde_json::Map<String, serde_json::Value>,
    ) -> PlatformResult<()> {
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        let what = format!("sandbox '{name}' in namespace '{namespace}'");
        // Read-your-writes: the records come from this replica's watch, which waits to show
        // the patched object (a PATCH answers with the record, and the next reads it).
        if self.sbxd_record(namespace, name).await?.is_some() {
            let patched = self
                .sbxd_api(namespace)
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| kube_error(&what, e))?;
            let version = patched.metadata.resource_version;
            self.sbxd_cache
                .settled(namespace, name, version.as_deref())
                .await;
        } else {
            let patched = self
                .deployments(Some(namespace))
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| kube_error(&what, e))?;
            let version = patched.metadata.resource_version;
            self.deployment_cache
                .settled(namespace, name, version.as_deref())
                .await;
        }
        Ok(())
    }

    /// Sets a sandbox's lifetime annotations.
    pub(super) async fn set_lifetime_annotations(
        &self,
        namespace: &str,
        name: &str,
        lifetime: Lifetime,
    ) -> PlatformResult<()> {
        let annotations = lifetime_annotations(&lifetime)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        self.annotate(namespace, name, annotations).await
    }

    /// Writes the sandbox's activity annotation, unless this replica did a moment ago.
    pub(super) async fn write_activity(&self, namespace: &str, name: &str) {
        let now = now_unix();
        {
            let key = (namespace.to_string(), name.to_string());
            let mut written = self
                .activity_written
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if written.get(&key).is_some_and(|t| now - t < ACTIVITY_EVERY) {
                return;
            }
            if written.len() > 10_000 {
                written.clear();
            }
            written.insert(key, now);
        }
        let annotations = [(ACTIVITY_ANNOTATION.to_string(), now.to_string().into())]
            .into_iter()
            .collect();
        if let Err(e) = self.annotate(namespace, name, annotations).await {
            tracing::debug!(%namespace, %name, error = %e, "recording a sandbox's activity");
        }
    }
}

impl KubernetesPlatform {
    /// The sandboxes due for the leader's lifetime check, from the objects alone: only a ready
    /// Deployment not scaled to zero (paused) can be idle; one being deleted is not due.
    pub(super) async fn due(&self, now: i64) -> PlatformResult<Vec<(String, String)>> {
        let mut due = Vec::new();
        let mut check = |meta: &kube::api::ObjectMeta, may_run: bool| {
            let lifetime = lifetime_of(meta);
            if meta.deletion_timestamp.is_some() || lifetime == Lifetime::default() {
                return;
            }
            let created = objects::sbxd::created(meta, now);
            if lifetime.due(last_activity(meta, created), may_run, now) {
                due.push((
                    meta.namespace.clone().unwrap_or_default(),
                    meta.name.clone().unwrap_or_default(),
                ));
            }
        };
        for d in self.sandbox_deployments(None).await? {
            let scaled_up = d.spec.replicas != Some(0);
            let ready = d.status.as_ref().and_then(|s| s.ready_replicas) >= Some(1);
            check(&d.metadata, scaled_up && ready);
        }
        for r in self.sbxd_records(None).await? {
            check(
                &r.metadata,
                r.status.as_ref().is_some_and(|s| s.phase == "Running"),
            );
        }
        Ok(due)
    }
}
