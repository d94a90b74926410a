//! What `sbx serve` and `sbx agent` agree on: the agent's routes, its port and the audience of
//! the tokens the service sends it.

/// The port an agent listens on unless configured otherwise (on the node's address: the
/// DaemonSet runs in the host's network namespace).
pub const DEFAULT_PORT: u16 = 8091;

/// The audience of the ServiceAccount tokens the service calls agents with. A token for this
/// audience is good for nothing else: the API server refuses it, so an agent that saw one
/// cannot replay it against the cluster.
pub const AUDIENCE: &str = "sbx-agent";

/// `GET`: the node's storage pools, a [`crate::shared::models::node::NodeStorageEntry`].
pub const STORAGE_PATH: &str = "/v1/storage";

/// The sandboxes the agent runs with sbxd on its node: `POST` creates one (a
/// `NewSandbox`), `GET` lists them; `/{namespace}/{name}` reads (`GET`) or deletes (`DELETE`)
/// one, and under it are `exec` (`POST` an [`ExecCall`]), `exec/stream` (the streamed exec's
/// WebSocket, [`crate::shared::exec_stream`]), `logs` (`GET ?tail=&since=`),
/// `pause` and `resume` (`POST`).
pub const SANDBOXES_PATH: &str = "/v1/sandboxes";

/// `GET`: CPU and memory of the sandboxes on the node (`?namespace=` narrows).
pub const METRICS_PATH: &str = "/v1/metrics";

/// An exec the service asks an agent for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecCall {
    /// The shell command.
    pub command: String,
    /// Its time limit, seconds.
    pub timeout_seconds: u64,
}

/// Why an agent refused or failed a call (the body of every non-2xx answer of the sandbox
/// routes): the kind of the platform error behind it and its message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AgentFault {
    /// `not_found`, `already_exists`, `invalid`, `conflict`, `quota_exceeded`,
    /// `unavailable`, `timeout` or `internal`.
    pub kind: String,
    /// What went wrong, for the caller.
    pub message: String,
}

/// The Lease an agent renews while it runs (in its own namespace), one per node: the leader
/// replica marks the sandboxes of a node whose Lease went stale Failed.
pub fn heartbeat_lease(node: &str) -> String {
    format!("sbx-agent-{node}")
}

/// The snapshots of the node's sbxd sandboxes: `GET` lists them (`?namespace=` narrows);
/// `/{namespace}/{name}` reads (`GET`) or deletes (`DELETE`) one; under it `source` (`GET`, a
/// [`SnapshotSource`]) and `restore` (`POST` a `RestorePlan`). Snapshots are taken under a
/// sandbox: `POST {SANDBOXES_PATH}/{namespace}/{name}/snapshot` (a [`SnapshotCall`]) and
/// `…/fork` (a [`ForkCall`]).
pub const SNAPSHOTS_PATH: &str = "/v1/snapshots";

/// `POST`: deletes `fork` snapshots older than a bound (a [`GcCall`]); the results.
pub const GC_PATH: &str = "/v1/gc";

/// A snapshot the service asks an agent to take.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotCall {
    /// The snapshot's name.
    pub snapshot: String,
    /// `pause` (the sandbox is paused and snapshotted while frozen), `fork` or `named`.
    pub kind: crate::shared::models::snapshot::SnapshotKind,
}

/// A fork the service asks an agent for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ForkCall {
    /// The clone's name.
    pub new_name: String,
    /// The snapshot to keep (`None`: an intermediate `fork` snapshot).
    pub snapshot: Option<String>,
    /// Keep the running processes (CRIU).
    pub warm: bool,
}

/// A GC sweep the service asks an agent for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GcCall {
    /// Only this namespace (`None`: all).
    pub namespace: Option<String>,
    /// `fork` snapshots older than this go, seconds.
    pub keep_for_seconds: u64,
    /// Report only.
    pub dry_run: bool,
}

/// What the sandbox a snapshot was taken of was (`GET {SNAPSHOTS_PATH}/{namespace}/{name}/source`):
/// what a restore of it starts from and reserves.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotSource {
    /// Image reference.
    pub image: String,
    /// CPU limit, millicores.
    pub cpu_millis: Option<u64>,
    /// Memory limit, bytes.
    pub memory_bytes: Option<u64>,
    /// Writable-layer limit, bytes.
    pub ephemeral_bytes: Option<u64>,
}
