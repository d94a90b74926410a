//! `sbx agent`: run the per-node agent in this process.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::runtime::storage::{DEFAULT_DISK_POOL, HostView, Pools};

/// Run the per-node agent (Kubernetes: a DaemonSet on the nodes that run sandboxes)
///
/// Reports the node's storage pools to `sbx serve` (`GET /api/v1/nodes/storage`). Every call
/// must carry a ServiceAccount token for the audience `sbx-agent` of an allowed service
/// account; the agent checks it with a TokenReview (its own service account needs
/// `tokenreviews` create, as `deploy/agent.yaml` grants). See docs/operations.md.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Example (what deploy/agent.yaml runs):\n  \
    sbx agent --node-name \"$NODE_NAME\" --host-root /host")]
pub struct AgentArgs {
    /// Address to listen on
    #[arg(
        long,
        env = "SBX_AGENT_LISTEN",
        default_value = "0.0.0.0:8091",
        value_name = "HOST:PORT"
    )]
    pub listen: SocketAddr,

    /// Name of this node (the DaemonSet passes spec.nodeName) [default: the host name]
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,

    /// Where the k7d XFS disk pool is mounted on the host
    #[arg(long, env = "SBX_AGENT_DISK_POOL", default_value = DEFAULT_DISK_POOL, value_name = "PATH")]
    pub disk_pool: PathBuf,

    /// The kata thin pool to report, as VG/LV [default: the first thin pool `lvs` lists]
    #[arg(long, env = "SBX_AGENT_THIN_POOL", value_name = "VG/LV")]
    pub thin_pool: Option<String>,

    /// Where the host's root file system is mounted when the agent runs in a container
    /// (deploy/agent.yaml: /host, with mount propagation from the host): pools are read
    /// under it and the host's `lvs` runs chrooted there [default: the agent runs on the
    /// host itself]
    #[arg(long, env = "SBX_AGENT_HOST_ROOT", value_name = "DIR")]
    pub host_root: Option<PathBuf>,

    /// Service account allowed to call, NAMESPACE/NAME (repeatable)
    #[arg(
        long = "caller",
        env = "SBX_AGENT_CALLERS",
        value_delimiter = ',',
        default_value = "sbx-system/sbx",
        value_name = "NAMESPACE/NAME"
    )]
    pub callers: Vec<String>,
}

/// Serves until SIGTERM/SIGINT.
pub async fn run(args: &AgentArgs) -> Result<ExitCode> {
    for caller in &args.callers {
        let valid = caller
            .split_once('/')
            .is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'));
        anyhow::ensure!(valid, "--caller {caller:?}: expected NAMESPACE/NAME");
    }
    let node = match &args.node_name {
        Some(n) => n.clone(),
        None => nix::unistd::gethostname()
            .context("the host name")?
            .to_string_lossy()
            .into_owned(),
    };
    let config = crate::agent::AgentConfig {
        listen: args.listen,
        node,
        pools: Pools {
            disk_pool: args.disk_pool.clone(),
            thin_pool: args.thin_pool.clone(),
            view: match &args.host_root {
                Some(root) => HostView::Root(root.clone()),
                None => HostView::Own,
            },
        },
        callers: args.callers.clone(),
    };
    crate::agent::run(config).await.context("sbx agent")?;
    Ok(ExitCode::SUCCESS)
}
