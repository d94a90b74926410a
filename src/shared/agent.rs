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
/// one, and under it are `exec` (`POST` an [`ExecCall`]), `logs` (`GET ?tail=&since=`),
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
