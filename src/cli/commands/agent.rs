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

    /// Address to listen on (see --listen-ip)
    #[arg(
        long,
        env = "SBX_AGENT_LISTEN",
        default_value = "0.0.0.0:8091",
        value_name = "HOST:PORT"
    )]
    pub listen: SocketAddr,

    /// Listen on this address instead of --listen's (its port kept): deploy/agent.yaml passes
    /// the Pod's status.hostIP, the node's internal address (IPv4 or IPv6)
    #[arg(long, env = "SBX_AGENT_LISTEN_IP", value_name = "IP")]
    pub listen_ip: Option<std::net::IpAddr>,

    /// Serve HTTPS with DIR/tls.crt and DIR/tls.key, only to clients with a certificate of
    /// the CA DIR/ca.crt (deploy/agent.yaml mounts the Secret sbx-agent-tls that sbx serve
    /// makes) [default: plain HTTP]
    #[arg(long, env = "SBX_AGENT_TLS_DIR", value_name = "DIR")]
    pub tls_dir: Option<PathBuf>,

    /// Calls with a token that is refused (or not reviewed yet) allowed per client address
    /// and minute; beyond, 429 without asking the API server
    #[arg(
        long,
        env = "SBX_AGENT_REVIEWS_PER_MINUTE",
        default_value_t = crate::agent::auth::REVIEWS_PER_MINUTE,
        value_parser = clap::value_parser!(u32).range(1..),
        value_name = "N"
    )]
    pub reviews_per_minute: u32,

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

    /// Leave the container for the host before starting: join PID 1's mount and cgroup
    /// namespaces (the Pod needs hostPID and privileges), copy sbx to DATA_DIR/bin and run
    /// that copy, out of the Pod's cgroup, so that sandboxes outlive the agent's Pod
    #[arg(long, env = "SBX_AGENT_ENTER_HOST", requires = "data_dir")]
    pub enter_host: bool,

    /// Run the node's sandboxes of the `sbxd` backend, with their state in this directory
    /// on the host [default: the agent runs no sandboxes]
    #[arg(long, env = "SBX_AGENT_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// OCI runtime of the sandboxes
    #[arg(
        long,
        env = "SBX_AGENT_OCI_RUNTIME",
        default_value = "runc",
        value_name = "runc|crun"
    )]
    pub oci_runtime: String,

    /// Sandboxes kept prepared ahead of creates, per shape (image, command, limits) asked
    /// for recently; 0 turns the pool off
    #[arg(
        long,
        env = "SBX_AGENT_PREPARED",
        default_value_t = crate::runtime::engine::pool::PoolConfig::default().size,
        value_name = "N"
    )]
    pub prepared: usize,

    /// Address pool of the sandboxes (each gets a /30)
    #[arg(
        long,
        env = "SBX_AGENT_NETWORK_POOL",
        default_value = "10.89.0.0/16",
        value_name = "CIDR"
    )]
    pub network_pool: String,

    /// Prefix of the sandboxes' network namespaces under /run/netns
    #[arg(
        long,
        env = "SBX_AGENT_NETNS_PREFIX",
        default_value = "sbxa-",
        value_name = "PREFIX"
    )]
    pub netns_prefix: String,

    /// An existing network namespace to route the sandboxes through instead of the host's
    #[arg(long, env = "SBX_AGENT_HOST_NETNS", value_name = "NAME")]
    pub host_netns: Option<String>,

    /// Destinations no sandbox may reach whatever its egress list says (repeatable; default:
    /// RFC 1918, 100.64.0.0/10, 169.254.0.0/16, 168.63.129.16). The sandbox pool, the node's
    /// own addresses and link-local are refused in any case
    #[arg(
        long = "egress-deny",
        env = "SBX_AGENT_EGRESS_DENY",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    pub egress_deny: Option<Vec<String>>,

    /// Registry (HOST:PORT) to pull images from over plain HTTP (repeatable)
    #[arg(
        long = "insecure-registry",
        env = "SBX_AGENT_INSECURE_REGISTRIES",
        value_delimiter = ',',
        value_name = "HOST:PORT"
    )]
    pub insecure_registries: Vec<String>,

    /// Registry (HOST[:PORT]) that may be on a loopback, private or link-local address
    /// (repeatable); every other host a pull contacts must be public
    #[arg(
        long = "private-registry",
        env = "SBX_AGENT_PRIVATE_REGISTRIES",
        value_delimiter = ',',
        value_name = "HOST[:PORT]"
    )]
    pub private_registries: Vec<String>,

    /// Namespace of the agent's Pod, where its heartbeat Lease is renewed
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "sbx-agent",
        value_name = "NAMESPACE"
    )]
    pub pod_namespace: String,

    /// Name of the agent's Pod (the heartbeat Lease's holder) [default: the host name]
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub pod_name: Option<String>,

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

/// The sandbox runtime's settings from the flags.
fn runtime_setup(
    args: &AgentArgs,
    data_dir: &std::path::Path,
) -> Result<crate::agent::RuntimeSetup> {
    use crate::daemon::platform::local::RuntimeSettings;
    use crate::runtime::engine::RuntimeConfig;
    use crate::runtime::network::NetworkConfig;
    anyhow::ensure!(
        data_dir.is_absolute(),
        "--data-dir {}: expected an absolute path",
        data_dir.display()
    );
    let oci_runtime = args
        .oci_runtime
        .parse()
        .map_err(|e| anyhow::anyhow!("--oci-runtime {}: {e}", args.oci_runtime))?;
    Ok(crate::agent::RuntimeSetup {
        data_dir: data_dir.to_path_buf(),
        settings: RuntimeSettings {
            runtime: RuntimeConfig {
                oci_runtime,
                pool: crate::runtime::engine::pool::PoolConfig {
                    size: args.prepared,
                    ..Default::default()
                },
                ..RuntimeConfig::default()
            },
            network: NetworkConfig {
                host_netns: args.host_netns.clone(),
                pool: args.network_pool.clone(),
                netns_prefix: args.netns_prefix.clone(),
                egress_deny: args.egress_deny.clone(),
                ..NetworkConfig::default()
            },
        },
        insecure_registries: args.insecure_registries.clone(),
        private_registries: args.private_registries.clone(),
        namespace: args.pod_namespace.clone(),
        pod: match &args.pod_name {
            Some(pod) => pod.clone(),
            None => node_name(&None)?,
        },
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

/// `--enter-host`, before any thread starts: executes the agent on the host and returns only
/// with the exit status of a failure to. `None`: carry on (asked not to, or already there).
pub fn enter_host_first(args: &AgentArgs) -> Option<ExitCode> {
    if args.action.is_some() || !args.enter_host || crate::agent::host::on_host() {
        return None;
    }
    let data_dir = args.data_dir.as_deref()?;
    let Err(error) = crate::agent::host::enter(data_dir);
    eprintln!("error: sbx agent --enter-host: {error:#}");
    Some(ExitCode::FAILURE)
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
        listen: match args.listen_ip {
            Some(ip) => SocketAddr::new(ip, args.listen.port()),
            None => args.listen,
        },
        node,
        pools: Pools {
            disk_pool: args.disk_pool.clone(),
            thin_pool: args.thin_pool.clone(),
            // Entered, the agent is on the host itself.
            view: match &args.host_root {
                Some(root) if !args.enter_host => HostView::Root(root.clone()),
                _ => HostView::Own,
            },
        },
        callers: args.callers.clone(),
        tls_dir: args.tls_dir.clone(),
        reviews_per_minute: args.reviews_per_minute,
        runtime: match &args.data_dir {
            Some(dir) => Some(runtime_setup(args, dir)?),
            None => None,
        },
    };
    crate::agent::run(config).await.context("sbx agent")?;
    Ok(ExitCode::SUCCESS)
}
