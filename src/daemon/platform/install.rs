//! The remote-install seam: where a platform can install nodes other than the one it runs on
//! (Kubernetes, with `[kubernetes.install]` on). The embedded default has none: its routes
//! answer 404 as the contract says of a service with remote install off.
use async_trait::async_trait;

use crate::daemon::platform::PlatformResult;
use crate::shared::models::install::{InstallStartResponse, InstallStatusResponse};

/// Starts installs and reports them.
#[async_trait]
pub trait InstallBackend: Send + Sync {
    /// Labels the nodes into the installer pool under a new operation (the nodes are
    /// validated: `NotFound` for an unknown one, `Conflict` for a server node or one being
    /// installed, `Misdeployed` when the installer's image differs from the pinned one).
    async fn start_install(&self, nodes: &[String]) -> PlatformResult<InstallStartResponse>;

    /// Each node's state in an operation (`NotFound` for an unknown operation), brought up to
    /// date with what the installer reports.
    async fn install_status(&self, operation: &str) -> PlatformResult<InstallStatusResponse>;

    /// Brings every unfinished operation up to date (the leader, periodically): a node whose
    /// installer finished gets its result recorded and its agent started.
    async fn reconcile_installs(&self) -> PlatformResult<()>;
}
