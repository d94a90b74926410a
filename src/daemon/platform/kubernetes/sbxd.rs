//! The `sbxd` backend on Kubernetes: a sandbox placed on a node whose sbx agent runs it with
//! the sbxd runtime (`crate::agent`). Its record is an `SbxdSandbox` object in its namespace
//! (`objects::sbxd`), read from a watch cache by every replica; the agent writes its status,
//! this replica writes it too right after a change it made (so that a read after a pause sees
//! it), and the leader marks Failed the sandboxes of a node whose agent stopped renewing its
//! heartbeat Lease. A call for a sandbox on a node whose agent does not answer is a 503
//! naming the node, after the agents' time limit at most.
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use reqwest::Method;

use super::objects::sbxd::{self as records, SbxdSandboxObject, SbxdSandboxStatus};
use super::*;
use crate::shared::agent::{ExecCall, METRICS_PATH, SANDBOXES_PATH, heartbeat_lease};
use crate::shared::models::sandbox::SandboxStatus;

fn sandbox_path(namespace: &str, name: &str) -> String {
    format!("{SANDBOXES_PATH}/{namespace}/{name}")
}

/// The agent's route of a streamed exec in a sandbox.
pub(super) fn stream_path(namespace: &str, name: &str) -> String {
    format!("{}/exec/stream", sandbox_path(namespace, name))
}

impl KubernetesPlatform {
    pub(super) fn sbxd_api(&self, namespace: &str) -> Api<SbxdSandboxObject> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The record of the sbxd sandbox `name`, when it is one (a miss is read again from the
    /// API server: another replica may have just made it).
    pub(super) async fn sbxd_record(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Option<SbxdSandboxObject>> {
        if let Some(cached) = self.sbxd_cache.get(namespace, name) {
            return Ok(Some(SbxdSandboxObject::clone(&cached)));
        }
        // A Deployment's sandbox, as this replica's watch shows it: every call for a kql or kfd
        // sandbox asks this first, and must not pay a read of the API server for it.
        if self.deployment_cache.get(namespace, name).is_some() {
            return Ok(None);
        }
        self.sbxd_api(namespace)
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("sandbox {name}"), e))
    }

    /// The records of the sbxd sandboxes of a namespace (all when `None`).
    pub(super) async fn sbxd_records(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<SbxdSandboxObject>>> {
        match self.sbxd_cache.list(namespace) {
            Some(records) => Ok(records),
            None => self.read_sbxd_records(namespace).await,
        }
    }

    /// The records, read from the API server (quota decisions).
    pub(super) async fn read_sbxd_records(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<SbxdSandboxObject>>> {
        let api: Api<SbxdSandboxObject> = match namespace {
            Some(ns) => self.sbxd_api(ns),
            None => Api::all(self.client.clone()),
        };
        read_managed(api, "list sbxd sandboxes").await
    }

    /// The sandbox a record reads as.
    pub(super) fn sbxd_sandbox(record: &SbxdSandboxObject) -> Sandbox {
        records::record(record, crate::shared::timestamp::now_unix())
    }

    /// The node for a new sbxd sandbox: one whose agent runs, among the nodes the sandbox may
    /// use (its tenant's, narrowed by the key's) and not dedicated to another tenant; the one
    /// with the fewest sbxd sandboxes.
    async fn sbxd_place(&self, new: &NewSandbox) -> PlatformResult<String> {
        let agents = self.agents.running(&self.client).await?;
        let dedicated = crate::daemon::platform::TenantStore::node_dedications(self).await?;
        // Made on first use, as for every backend; its tenant label says whose it is.
        let tenant = self.ensure_namespace(&new.namespace).await?;
        let candidates: Vec<&String> = agents
            .iter()
            .filter(|node| {
                new.nodes
                    .as_ref()
                    .is_none_or(|allowed| allowed.contains(node))
            })
            .filter(|node| {
                dedicated
                    .get(*node)
                    .is_none_or(|owner| tenant.as_ref() == Some(owner))
            })
            .collect();
        if candidates.is_empty() {
            let agents = if agents.is_empty() {
                "none".to_string()
            } else {
                agents.join(", ")
            };
            let allowed = match &new.nodes {
                Some(nodes) => format!("the nodes it may use ({})", nodes.join(", ")),
                None => "the nodes not dedicated to another tenant".to_string(),
            };
            return Err(PlatformError::Unavailable(format!(
                "no node can run this sbxd sandbox: an sbx agent must run on one of {allowed}; \
                 agents run on: {agents}"
            )));
        }
        let records = self.sbxd_records(None).await?;
        let load = |node: &str| records.iter().filter(|r| r.spec.node == node).count();
        let node = candidates
            .into_iter()
            .min_by_key(|node| (load(node), node.to_string()))
            .cloned()
            .unwrap_or_default();
        Ok(node)
    }

    /// Creates an sbxd sandbox: its record, then the agent's sandbox; a refusal of the agent
    /// removes the record again.
    pub(super) async fn sbxd_create(&self, new: NewSandbox) -> PlatformResult<()> {
        // The name may be a Deployment's sandbox: the watch cache answers when in step (see
        // `create_sandbox`), else the API server.
        let taken = if self.deployment_cache.in_step() {
            self.deployment_cache
                .get(&new.namespace, &new.name)
                .is_some()
        } else {
            self.sandbox_deployment(&new.namespace, &new.name)
                .await
                .is_ok()
        };
        if taken {
            return Err(PlatformError::AlreadyExists(format!(
                "sandbox '{}' already exists in namespace '{}'",
                new.name, new.namespace
            )));
        }
        self.bind_daemon(&new.namespace).await?;
        let node = self.sbxd_place(&new).await?;
        let object = records::object(&new, &node);
        let api = self.sbxd_api(&new.namespace);
        let version = match api.create(&PostParams::default(), &object).await {
            Ok(written) => written.metadata.resource_version,
            Err(e) if conflict(&e) => {
                return Err(PlatformError::AlreadyExists(format!(
                    "sandbox '{}' already exists in namespace '{}'",
                    new.name, new.namespace
                )));
            }
            Err(e) => return Err(kube_error("create the sandbox's SbxdSandbox record", e)),
        };
        let created = self
            .agents
            .call::<serde_json::Value>(
                &self.client,
                &node,
                Method::POST,
                SANDBOXES_PATH,
                Some(serde_json::to_value(&new).unwrap_or_default()),
                None,
            )
            .await;
        if let Err(error) = created {
            if let Err(e) = api.delete(&new.name, &DeleteParams::default()).await {
                tracing::warn!(namespace = %new.namespace, name = %new.name, error = %e,
                    "cannot remove the record of a sandbox its agent refused");
            }
            return Err(error);
        }
        // A list on this replica right after shows it (Pending until the agent reports it
        // started: its status write, within milliseconds).
        self.sbxd_cache
            .settled(&new.namespace, &new.name, version.as_deref())
            .await;
        Ok(())
    }

    /// Writes the sandbox's status as its agent reports it now and waits until this replica's
    /// cache shows it (best effort: the agent writes it too).
    pub(super) async fn sbxd_refresh(&self, namespace: &str, name: &str, node: &str) {
        let reported = self
            .agents
            .call::<Sandbox>(
                &self.client,
                node,
                Method::GET,
                &sandbox_path(namespace, name),
                None,
                None,
            )
            .await;
        let Ok(sandbox) = reported else {
            return;
        };
        let patch = serde_json::json!({"status": records::status_of(&sandbox)});
        match self
            .sbxd_api(namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                self.sbxd_cache
                    .settled(
                        namespace,
                        name,
                        written.metadata.resource_version.as_deref(),
                    )
                    .await
            }
            Err(e) => {
                tracing::warn!(%namespace, %name, error = %e, "cannot write a sandbox's status")
            }
        }
    }

    /// Deletes an sbxd sandbox: the agent's first (a node that does not answer is a 503 and
    /// nothing changes, unless its agent is lost: then the record goes alone), then its record.
    pub(super) async fn sbxd_delete(&self, record: &SbxdSandboxObject) -> PlatformResult<()> {
        let namespace = record.metadata.namespace.clone().unwrap_or_default();
        let name = record.metadata.name.clone().unwrap_or_default();
        let removed = self
            .agents
            .call::<serde_json::Value>(
                &self.client,
                &record.spec.node,
                Method::DELETE,
                &sandbox_path(&namespace, &name),
                None,
                None,
            )
            .await;
        match removed {
            Ok(_) | Err(PlatformError::NotFound(_)) => {}
            Err(e) if self.may_forget(&record.spec.node, &e).await => {}
            Err(e) => return Err(e),
        }
        match self
            .sbxd_api(&namespace)
            .delete(&name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if missing(&e) => {}
            Err(e) => {
                return Err(kube_error(
                    &format!("delete the record of sandbox {name}"),
                    e,
                ));
            }
        }
        // A read after the delete, on this replica, no longer finds it.
        self.sbxd_cache.settled(&namespace, &name, None).await;
        // The agent may have dropped snapshots with it.
        if let Err(e) = self
            .sbxd_sync_snapshots(&record.spec.node, Some(&namespace))
            .await
        {
            tracing::debug!(%namespace, %name, error = %e, "snapshot records not brought in line");
        }
        Ok(())
    }

    /// Runs a command in an sbxd sandbox.
    pub(super) async fn sbxd_exec(
        &self,
        record: &SbxdSandboxObject,
        command: &str,
        timeout: Duration,
    ) -> PlatformResult<ExecResponse> {
        let (namespace, name) = names_of(record);
        self.agents
            .call(
                &self.client,
                &record.spec.node,
                Method::POST,
                &format!("{}/exec", sandbox_path(&namespace, &name)),
                Some(serde_json::json!(ExecCall {
                    command: command.to_string(),
                    timeout_seconds: timeout.as_secs().max(1),
                })),
                // The command's own time, then the agents' limit for the answer.
                Some(timeout + self.settings.agents.timeout),
            )
            .await
    }

    /// The log of an sbxd sandbox.
    /// Follows the log of an sbxd sandbox, from its node's agent.
    pub(super) async fn sbxd_follow_logs(
        &self,
        record: &SbxdSandboxObject,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<tokio::sync::mpsc::Receiver<bytes::Bytes>> {
        let (namespace, name) = names_of(record);
        if container != "sandbox" {
            return Err(PlatformError::NotFound(format!(
                "sandbox '{name}' has no container '{container}': an sbxd sandbox has one, `sandbox`"
            )));
        }
        self.agents
            .follow(
                &self.client,
                &record.spec.node,
                &format!(
                    "{}/logs?tail={tail}&since={since_secs}&follow=true",
                    sandbox_path(&namespace, &name)
                ),
            )
            .await
    }

    pub(super) async fn sbxd_logs(
        &self,
        record: &SbxdSandboxObject,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String> {
        let (namespace, name) = names_of(record);
        if container != "sandbox" {
            return Err(PlatformError::NotFound(format!(
                "sandbox '{name}' has no container '{container}': an sbxd sandbox has one, `sandbox`"
            )));
        }
        self.agents
            .call(
                &self.client,
                &record.spec.node,
                Method::GET,
                &format!(
                    "{}/logs?tail={tail}&since={since_secs}",
                    sandbox_path(&namespace, &name)
                ),
                None,
                None,
            )
            .await
    }

    /// Pauses (`pause`) or resumes an sbxd sandbox and records its new state.
    pub(super) async fn sbxd_pause(
        &self,
        record: &SbxdSandboxObject,
        pause: bool,
    ) -> PlatformResult<()> {
        let (namespace, name) = names_of(record);
        let verb = if pause { "pause" } else { "resume" };
        self.agents
            .call::<serde_json::Value>(
                &self.client,
                &record.spec.node,
                Method::POST,
                &format!("{}/{verb}", sandbox_path(&namespace, &name)),
                None,
                None,
            )
            .await?;
        self.sbxd_refresh(&namespace, &name, &record.spec.node)
            .await;
        Ok(())
    }

    /// CPU and memory of the sbxd sandboxes of a namespace (all when `None`), from the agents
    /// of the nodes they run on; a node whose agent does not answer is left out (logged).
    pub(super) async fn sbxd_metrics(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<SandboxMetrics>> {
        let records = self.sbxd_records(namespace).await?;
        let nodes: std::collections::BTreeSet<String> =
            records.iter().map(|r| r.spec.node.clone()).collect();
        let query = namespace
            .map(|ns| format!("?namespace={ns}"))
            .unwrap_or_default();
        let path = format!("{METRICS_PATH}{query}");
        let calls = nodes.iter().map(|node| {
            let path = path.clone();
            async move {
                let answer = self
                    .agents
                    .call::<Vec<SandboxMetrics>>(&self.client, node, Method::GET, &path, None, None)
                    .await;
                (node, answer)
            }
        });
        let mut out = Vec::new();
        for (node, answer) in futures_util::future::join_all(calls).await {
            match answer {
                Ok(metrics) => out.extend(metrics),
                Err(e) => tracing::warn!(%node, error = %e, "no metrics from a node's agent"),
            }
        }
        Ok(out)
    }

    /// Why `node`'s agent counts as lost (no heartbeat for `agentLostAfter`), or `None`.
    pub(super) async fn agent_lost(&self, node: &str) -> PlatformResult<Option<String>> {
        let leases: Api<Lease> =
            Api::namespaced(self.client.clone(), &self.settings.agents.namespace);
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let lost_after = self.settings.agents.lost_after.as_secs() as i64;
        let renewed = leases
            .get_opt(&heartbeat_lease(node))
            .await
            .map_err(|e| kube_error("read an agent's heartbeat Lease", e))?
            .and_then(|l| l.spec?.renew_time)
            .map(|t| t.0.as_second());
        Ok(match renewed {
            Some(at) if now - at <= lost_after => None,
            Some(at) => Some(format!(
                "node {node} is unreachable: its sbx agent has not reported since {}",
                crate::shared::timestamp::format_rfc3339_utc(at)
            )),
            None => Some(format!(
                "node {node} is unreachable: no sbx agent has reported from it"
            )),
        })
    }

    /// Whether a call's failure to reach `node` may be passed over by a delete: its agent is
    /// lost (its sandboxes already read Failed), so the record goes now and the agent, if it
    /// ever returns, removes what has no record any more.
    pub(super) async fn may_forget(&self, node: &str, error: &PlatformError) -> bool {
        if !matches!(error, PlatformError::Unavailable(_)) {
            return false;
        }
        match self.agent_lost(node).await {
            Ok(Some(why)) => {
                tracing::warn!(%node, %why, "deleting the record of a lost node's sandbox or snapshot");
                true
            }
            _ => false,
        }
    }

    /// The leader's check: the sbxd sandboxes of a node whose agent has not renewed its
    /// heartbeat Lease for `[kubernetes.agents] lostAfter` read Failed, saying since when; the
    /// agent's own report puts them back when it returns.
    pub async fn mark_lost_agents(&self) -> PlatformResult<()> {
        let records = self.sbxd_records(None).await?;
        if records.is_empty() {
            return Ok(());
        }
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let lost_after = self.settings.agents.lost_after.as_secs() as i64;
        let mut verdicts: HashMap<String, Option<String>> = HashMap::new();
        for record in records {
            let node = record.spec.node.clone();
            if !verdicts.contains_key(&node) {
                let verdict = self.agent_lost(&node).await?;
                verdicts.insert(node.clone(), verdict);
            }
            let Some(Some(message)) = verdicts.get(&node) else {
                continue;
            };
            let status = record.status.clone().unwrap_or_default();
            if now - records::created(&record.metadata, now) <= lost_after
                || status.phase == SandboxStatus::Failed.as_str()
            {
                continue;
            }
            let (namespace, name) = names_of(&record);
            let failed = SbxdSandboxStatus {
                phase: SandboxStatus::Failed.as_str().to_string(),
                ready: false,
                restarts: status.restarts,
                message: message.clone(),
            };
            tracing::warn!(%namespace, %name, %node, "{message}");
            if let Err(e) = self
                .sbxd_api(&namespace)
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&serde_json::json!({"status": failed})),
                )
                .await
            {
                tracing::warn!(%namespace, %name, error = %e, "cannot mark a sandbox Failed");
            }
        }
        Ok(())
    }
}

/// A record's namespace and name.
pub(super) fn names_of(record: &SbxdSandboxObject) -> (String, String) {
    (
        record.metadata.namespace.clone().unwrap_or_default(),
        record.metadata.name.clone().unwrap_or_default(),
    )
}
