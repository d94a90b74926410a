//! The agent's side of the cluster's records of its sandboxes (`SbxdSandbox` objects labelled
//! with its node): at once when its runtime's state changes, and every [`SYNC_EVERY`], it writes each record's status as its runtime sees the
//! sandbox, marks Failed a record whose sandbox it does not have (its files are gone), and
//! removes a sandbox whose record is gone (a delete it missed while it was down, or a create
//! the service undid). It also renews its heartbeat Lease (`sbx-agent-<node>`), by which the
//! leader replica tells a lost agent from a quiet one.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::daemon::platform::kubernetes::objects::names::NODE_LABEL;
use crate::daemon::platform::kubernetes::objects::sbxd::{
    self, SbxdSandboxObject, SbxdSnapshotObject,
};
use crate::daemon::platform::local::LocalPlatform;
use crate::daemon::platform::{SandboxBackend, SnapshotBackend};
use crate::shared::agent::heartbeat_lease;

/// How often records are brought in line with the runtime when nothing changed.
pub const SYNC_EVERY: Duration = Duration::from_secs(2);
/// How often the runtime's state is looked at for a change (an in-memory counter).
const CHANGE_POLL: Duration = Duration::from_millis(20);
/// How often the heartbeat Lease is renewed.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// A record younger than this with no sandbox is a create in flight, not a lost sandbox.
const CREATE_GRACE_SECS: i64 = 30;
/// Field manager of the agent's writes.
const FIELD_MANAGER: &str = "sbx-agent";

/// Who the agent is, for its records and its Lease.
pub struct Identity {
    /// The node.
    pub node: String,
    /// The agent's namespace (its Lease's).
    pub namespace: String,
    /// The agent's Pod (the Lease's holder).
    pub pod: String,
}

/// Runs until the process ends.
pub async fn run(client: kube::Client, sandboxes: Arc<LocalPlatform>, identity: Identity) {
    let mut last_beat: Option<Instant> = None;
    let mut last_sync: Option<(Instant, Option<u64>)> = None;
    loop {
        if last_beat.is_none_or(|t| t.elapsed() >= HEARTBEAT_EVERY) {
            match heartbeat(&client, &identity).await {
                Ok(()) => last_beat = Some(Instant::now()),
                Err(e) => tracing::warn!(error = %e, "cannot renew the agent's heartbeat Lease"),
            }
        }
        let version = sandboxes.sandboxes_version();
        let due = match last_sync {
            None => true,
            Some((at, seen)) => seen != version || at.elapsed() >= SYNC_EVERY,
        };
        if due {
            match sync(&client, &sandboxes, &identity.node).await {
                Ok(()) => last_sync = Some((Instant::now(), version)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot bring the sandbox records in line");
                    last_sync = Some((Instant::now(), None));
                }
            }
        }
        tokio::time::sleep(CHANGE_POLL).await;
    }
}

async fn heartbeat(client: &kube::Client, identity: &Identity) -> Result<(), kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &identity.namespace);
    let name = heartbeat_lease(&identity.node);
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let spec = LeaseSpec {
        holder_identity: Some(identity.pod.clone()),
        lease_duration_seconds: Some(HEARTBEAT_EVERY.as_secs() as i32 * 3),
        renew_time: Some(now),
        ..Default::default()
    };
    let patch = serde_json::json!({"spec": spec});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let lease = Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(name),
                    namespace: Some(identity.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await.map(drop)
        }
        Err(e) => Err(e),
    }
}

async fn sync(client: &kube::Client, sandboxes: &LocalPlatform, node: &str) -> Result<(), String> {
    let local = sandboxes
        .list_sandboxes(None)
        .await
        .map_err(|e| e.to_string())?;
    let api: Api<SbxdSandboxObject> = Api::all(client.clone());
    let records = api
        .list(&ListParams::default().labels(&format!("{NODE_LABEL}={node}")))
        .await
        .map_err(|e| format!("list the SbxdSandbox records of node {node}: {e}"))?;
    let mut running: HashMap<(String, String), _> = local
        .into_iter()
        .map(|s| ((s.namespace.clone(), s.name.clone()), s))
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    for record in &records.items {
        let namespace = record.metadata.namespace.clone().unwrap_or_default();
        let name = record.metadata.name.clone().unwrap_or_default();
        let reported = record.status.clone().unwrap_or_default();
        let status = match running.remove(&(namespace.clone(), name.clone())) {
            Some(sandbox) => sbxd::status_of(&sandbox),
            None => {
                if now - sbxd::created(&record.metadata, now) < CREATE_GRACE_SECS {
                    continue;
                }
                sbxd::SbxdSandboxStatus {
                    phase: "Failed".into(),
                    message: format!(
                        "the sandbox is gone from node {node}: its sbx agent has no record of it"
                    ),
                    ..Default::default()
                }
            }
        };
        if status == reported {
            continue;
        }
        let patch = serde_json::json!({"status": status});
        let namespaced: Api<SbxdSandboxObject> = Api::namespaced(client.clone(), &namespace);
        if let Err(e) = namespaced
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(&patch),
            )
            .await
        {
            tracing::warn!(%namespace, %name, error = %e, "cannot write a sandbox's status");
        }
    }
    // What is left has no record: deleted while this agent did not hear of it.
    for ((namespace, name), _) in running {
        tracing::info!(%namespace, %name, "removing a sandbox whose record is gone");
        if let Err(e) = sandboxes.delete_sandbox(&namespace, &name).await {
            tracing::warn!(%namespace, %name, error = %e, "cannot remove a sandbox without record");
        }
    }
    drop_unrecorded_snapshots(client, sandboxes, node, now).await
}

/// Removes the snapshots whose record is gone (the service records a snapshot right after
/// the agent took it: only those older than [`CREATE_GRACE_SECS`] count).
async fn drop_unrecorded_snapshots(
    client: &kube::Client,
    sandboxes: &LocalPlatform,
    node: &str,
    now: i64,
) -> Result<(), String> {
    let held = sandboxes
        .list_snapshots(None, None, None)
        .await
        .map_err(|e| e.to_string())?;
    if held.is_empty() {
        return Ok(());
    }
    let api: Api<SbxdSnapshotObject> = Api::all(client.clone());
    let records = api
        .list(&ListParams::default().labels(&format!("{NODE_LABEL}={node}")))
        .await
        .map_err(|e| format!("list the SbxdSnapshot records of node {node}: {e}"))?;
    for snapshot in held {
        let recorded = records.items.iter().any(|r| {
            r.metadata.namespace.as_deref() == Some(snapshot.namespace.as_str())
                && r.metadata.name.as_deref() == Some(snapshot.name.as_str())
        });
        let taken =
            crate::shared::timestamp::parse_timestamp(&snapshot.creation_timestamp).unwrap_or(now);
        if recorded || now - taken < CREATE_GRACE_SECS {
            continue;
        }
        let (namespace, name) = (snapshot.namespace, snapshot.name);
        tracing::info!(%namespace, %name, "removing a snapshot whose record is gone");
        if let Err(e) = sandboxes.delete_snapshot(&namespace, &name).await {
            tracing::warn!(%namespace, %name, error = %e, "cannot remove a snapshot without record");
        }
    }
    Ok(())
}
