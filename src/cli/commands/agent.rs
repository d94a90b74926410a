//! `sbx agent`: run the per-node agent in this process.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use crate::runtime::storage::{DEFAULT_DISK_POOL, HostView, Pools};

/// Run the per-node agent (Kubernetes: a DaemonSet on the nodes that run sandboxes)
///
/// Reports the node's storage pools to `sbx serve` (`GET /api/v1/nodes/storage`). Every call
/// must carry a ServiceAccount token for the audience `sbx-agent` of an allowed service
/// account; the agent checks it with a TokenReview (its own service account needs
/// `tokenreviews` create, as `deploy/agent.yaml` grants). See docs/operations.md.
#[derive(Debug, Clone, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Example (what deploy/agent.yaml runs):\n  \
    sbx agent --node-name \"$NODE_NAME\" --host-root /host"
)]
pub struct AgentArgs {
    /// The installer's steps instead of the agent (deploy/installer.yaml runs them)
    #[command(subcommand)]
    pub action: Option<AgentAction>,

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

/// The remote installer's steps on a node.
#[derive(Debug, Clone, Subcommand)]
pub enum AgentAction {
    /// Check this node's prerequisites for sbxd and install sbx on it (remote install)
    ///
    /// Checks the kernel (version, overlay, cgroup controllers cpu/memory/pids, network
    /// namespaces) and the host (an OCI runtime, runc or crun; nft), then copies this binary to
    /// PREFIX/bin/sbx on the host and records PREFIX/install.json. Exits 1 with one line on
    /// stderr and in the termination log when a check fails: the failure line `GET
    /// /api/v1/install/{operation}` reports. See docs/operations.md, "Remote install".
    #[command(
        after_help = "Example (the init container of deploy/installer.yaml):\n  \
        sbx agent install --host-root /host --node-name \"$NODE_NAME\""
    )]
    Install(InstallArgs),
    /// Wait until terminated (the installer Pod's container once the install has run)
    Idle,
}

/// `sbx agent install`.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// Where the host's root file system is mounted (only PREFIX under it must be writable)
    /// [default: this is the host]
    #[arg(long, env = "SBX_AGENT_HOST_ROOT", value_name = "DIR")]
    pub host_root: Option<PathBuf>,

    /// Where sbx goes on the host
    #[arg(
        long,
        env = "SBX_INSTALL_PREFIX",
        default_value = "/opt/sbx",
        value_name = "DIR"
    )]
    pub prefix: PathBuf,

    /// The oldest kernel accepted
    #[arg(long, env = "SBX_INSTALL_MIN_KERNEL", default_value = "5.4", value_name = "MAJOR.MINOR",
        value_parser = crate::agent::install::parse_min_kernel)]
    pub min_kernel: (u32, u32),

    /// Name of this node [default: the host name]
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,

    /// Where the failure line is also written, for the Pod's status
    #[arg(long, default_value = "/dev/termination-log", value_name = "FILE")]
    pub termination_log: PathBuf,
}

fn node_name(given: &Option<String>) -> Result<String> {
    Ok(match given {
        Some(n) => n.clone(),
        None => nix::unistd::gethostname()
            .context("the host name")?
            .to_string_lossy()
            .into_owned(),
    })
}

/// `sbx agent install`: 0 when installed, 1 with the failure line.
fn install(args: &InstallArgs) -> Result<ExitCode> {
    anyhow::ensure!(
        args.prefix.is_absolute(),
        "--prefix {}: expected an absolute path on the host",
        args.prefix.display()
    );
    let plan = crate::agent::install::InstallPlan {
        host_root: args.host_root.clone().unwrap_or_else(|| PathBuf::from("/")),
        prefix: args.prefix.clone(),
        min_kernel: args.min_kernel,
        node: node_name(&args.node_name)?,
    };
    match crate::agent::install::install(&plan) {
        Ok(line) => {
            println!("{line}");
            Ok(ExitCode::SUCCESS)
        }
        Err(line) => {
            eprintln!("{line}");
            // Absent outside a container: stderr is enough there.
            let _ = std::fs::write(&args.termination_log, format!("{line}\n"));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Serves until SIGTERM/SIGINT.
pub async fn run(args: &AgentArgs) -> Result<ExitCode> {
    match &args.action {
        Some(AgentAction::Install(install_args)) => return install(install_args),
        Some(AgentAction::Idle) => {
            crate::shared::signals::terminated().await;
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    for caller in &args.callers {
        let valid = caller
            .split_once('/')
            .is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'));
        anyhow::ensure!(valid, "--caller {caller:?}: expected NAMESPACE/NAME");
    }
    let node = node_name(&args.node_name)?;
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
