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
