//! `sbx serve` configuration: flags and `SBX_*` env (resolved by clap) over an optional TOML
//! file over defaults, in one place.
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use crate::daemon::oidc::OidcConfig;
use crate::runtime::engine::RuntimeConfig;
use crate::runtime::network::NetworkConfig;
use crate::shared::paths;

/// Development allows unscoped tenant-role keys (until a tenant exists); production requires
/// a tenant for tenant roles and CPU and memory on every sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The local default.
    #[default]
    Development,
    /// The Kubernetes manifests' default.
    Production,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "development" | "dev" => Ok(Mode::Development),
            "production" | "prod" => Ok(Mode::Production),
            _ => Err(format!(
                "unknown mode '{s}': expected development or production"
            )),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Development => "development",
            Mode::Production => "production",
        })
    }
}

/// Where sandboxes and state live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlatformKind {
    /// SQLite + the sbxd runtime on this host (the embedded default).
    #[default]
    Local,
    /// Objects in a Kubernetes cluster.
    Kubernetes,
}

impl FromStr for PlatformKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "local" => Ok(PlatformKind::Local),
            "kubernetes" | "k8s" => Ok(PlatformKind::Kubernetes),
            _ => Err(format!(
                "unknown platform '{s}': expected local or kubernetes"
            )),
        }
    }
}

impl std::fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PlatformKind::Local => "local",
            PlatformKind::Kubernetes => "kubernetes",
        })
    }
}

/// Values given on the command line or in `SBX_*` variables; `None` means "not given".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen` / `SBX_LISTEN`.
    pub listen: Option<String>,
    /// `--data-dir` / `SBX_DATA_DIR`.
    pub data_dir: Option<PathBuf>,
    /// `--mode` / `SBX_MODE`.
    pub mode: Option<Mode>,
    /// `--platform` / `SBX_PLATFORM`.
    pub platform: Option<PlatformKind>,
    /// `--config` / `SBX_CONFIG`: the TOML file to read.
    pub config_file: Option<PathBuf>,
    /// `--import`: OCI archives to import at start-up, added to the file's `images.preload`.
    pub preload: Vec<PathBuf>,
}

/// The configuration file's shape. Keys are camelCase, as the spec names them
/// (`metering.metricsUrl`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileConfig {
    /// Listen address, e.g. `127.0.0.1:8080`.
    pub listen: Option<String>,
    /// Data directory.
    pub data_dir: Option<PathBuf>,
    /// `development` or `production`.
    pub mode: Option<Mode>,
    /// `local` or `kubernetes`.
    pub platform: Option<PlatformKind>,
    /// `[runtime]`: the sbxd runtime (OCI runtime, log cap, exec limits).
    pub runtime: Option<RuntimeConfig>,
    /// `[network]`: sandbox networking on this host.
    pub network: Option<NetworkConfig>,
    /// `[images]`: image pulls.
    pub images: Option<ImagesConfig>,
    /// `[oidc]`: accept bearer JWTs from this issuer.
    pub oidc: Option<OidcConfig>,
    /// `[metering]`: usage showback.
    pub metering: Option<MeteringConfig>,
    /// `[rateLimit]`: requests per principal and per client address, streams per tenant.
    pub rate_limit: Option<RateLimitConfig>,
    /// `[sandboxDefaults]`: the size of a sbxd sandbox that neither its request nor its
    /// tenant sizes.
    pub sandbox_defaults: Option<SandboxDefaultsConfig>,
    /// `[audit]`: the audit trail of writes.
    pub audit: Option<AuditConfig>,
    /// `[http]`: how long a client may take to send a request.
    pub http: Option<HttpConfig>,
    /// `[nodes]`: this host as a node.
    pub nodes: Option<NodesConfig>,
    /// `[kubernetes]`: the Kubernetes platform.
    pub kubernetes: Option<KubernetesConfig>,
}

/// `[images]` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagesConfig {
    /// The most one image may unpack to, bytes: its layers' uncompressed tar streams together
    /// (files, their metadata and the archive's headers), counted as a pull or an import
    /// unpacks them; past it the image is refused (400). Default 16 GiB
    /// ([`crate::runtime::images::DEFAULT_MAX_IMAGE_BYTES`]), which the largest common images
    /// (CUDA and ML toolchains) fit in.
    #[serde(default)]
    pub max_image_bytes: Option<u64>,
    /// The most the image store's layers may take together, bytes (what it records for its
    /// layers, and what is being unpacked); a pull or import that would pass it is refused
    /// (503) until an operator raises it or clears the store. Default 100 GiB
    /// ([`crate::runtime::images::DEFAULT_MAX_STORE_BYTES`]).
    #[serde(default)]
    pub max_store_bytes: Option<u64>,
    /// Registries (`host:port`) reached over plain HTTP, e.g. a loopback test registry.
    #[serde(default)]
    pub insecure_registries: Vec<String>,
    /// Registries tenant users (and unscoped development keys) may pull from, by the name a
    /// reference gives them (`docker.io`, `ghcr.io`, `127.0.0.1:5000`); `"*"` is any. Pulls
    /// and sandbox images from elsewhere are 403 for them; operators and admins pull from
    /// any registry. Default [`DEFAULT_ALLOWED_REGISTRIES`].
    #[serde(default)]
    pub allowed_registries: Option<Vec<String>>,
    /// Registries (`host[:port]`) that may be on loopback, private (RFC 1918, 100.64.0.0/10,
    /// unique-local) or link-local addresses, with the token services and redirects on
    /// their host: an internal mirror, a loopback test registry. Every other host a pull
    /// contacts must be public, whoever pulls.
    #[serde(default)]
    pub private_registries: Vec<String>,
    /// OCI archives imported at start-up (for hosts with no registry).
    #[serde(default)]
    pub preload: Vec<PathBuf>,
}

/// The public registries tenant users may pull from when `[images] allowedRegistries` is not
/// set.
pub const DEFAULT_ALLOWED_REGISTRIES: [&str; 6] = [
    "docker.io",
    "ghcr.io",
    "quay.io",
    "registry.k8s.io",
    "public.ecr.aws",
    "mcr.microsoft.com",
];

impl ImagesConfig {
    /// `allowedRegistries`, or its default; lowercase.
    pub fn allowed_registries(&self) -> Vec<String> {
        match &self.allowed_registries {
            Some(list) => list.iter().map(|r| r.trim().to_ascii_lowercase()).collect(),
            None => DEFAULT_ALLOWED_REGISTRIES.map(str::to_string).to_vec(),
        }
    }

    /// The store's bounds (`maxImageBytes`, `maxStoreBytes`); errors name the key.
    pub fn limits(&self) -> Result<crate::runtime::images::ImageLimits, String> {
        let defaults = crate::runtime::images::ImageLimits::default();
        let limits = crate::runtime::images::ImageLimits {
            max_image_bytes: self.max_image_bytes.unwrap_or(defaults.max_image_bytes),
            max_store_bytes: self.max_store_bytes.unwrap_or(defaults.max_store_bytes),
        };
        if limits.max_image_bytes == 0 || limits.max_store_bytes == 0 {
            return Err("images.maxImageBytes and images.maxStoreBytes must be positive".into());
        }
        Ok(limits)
    }
}

/// The resolved configuration of one `sbx serve` process.
#[derive(Debug, Clone)]
pub struct Config {
    /// Socket address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Where the database, the admin token and sandbox files live.
    pub data_dir: PathBuf,
    /// Development or production.
    pub mode: Mode,
    /// Local or Kubernetes.
    pub platform: PlatformKind,
    /// The sbxd runtime.
    pub runtime: RuntimeConfig,
    /// Sandbox networking.
    pub network: NetworkConfig,
    /// Image pulls.
    pub images: ImagesConfig,
    /// OIDC bearer tokens (off when absent).
    pub oidc: Option<OidcConfig>,
    /// Usage showback.
    pub metering: MeteringConfig,
    /// Requests per principal and per client address, streams per tenant.
    pub rate_limit: RateLimitConfig,
    /// The size of a sbxd sandbox nothing else sizes.
    pub sandbox_defaults: SandboxDefaults,
    /// The audit trail.
    pub audit: AuditConfig,
    /// Client time limits.
    pub http: HttpSettings,
    /// This host as a node.
    pub nodes: NodesConfig,
    /// The Kubernetes platform.
    pub kubernetes: KubernetesSettings,
}

/// The `[kubernetes]` section, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesSettings {
    /// Size of a new kql sandbox's root PVC, bytes.
    pub root_disk_bytes: u64,
    /// How long a fork waits for its clone's PVC to be Bound.
    pub fork_timeout: std::time::Duration,
    /// How long a snapshot waits for the CSI driver to cut it.
    pub snapshot_timeout: std::time::Duration,
    /// Image of the `dind` sidecar.
    pub dind_image: String,
    /// CPU of the `dind` sidecar (its request and limit), millicores.
    pub dind_cpu_millis: u64,
    /// Memory of the `dind` sidecar (its request and limit), bytes.
    pub dind_memory_bytes: u64,
    /// Whether sandbox Pods get their own user namespace (`hostUsers: false`).
    pub user_namespaces: UserNamespaces,
    /// Labels a node must carry to run sandboxes (e.g. the nodes with the kata runtimes).
    pub sandbox_node_selector: std::collections::BTreeMap<String, String>,
    /// Taints sandboxes tolerate, beside their tenant's dedication taint.
    pub sandbox_tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// Where the nodes' agents are found and how they are called.
    pub agents: AgentSettings,
    /// Remote install (`[kubernetes.install]`); `None` when off.
    pub install: Option<InstallSettings>,
    /// The URL the other replicas reach this one at, when set (see
    /// [`KubernetesSettings::advertised`]).
    pub advertise_url: Option<String>,
    /// Whether replicas and agents talk TLS (`internalTls`, resolved with the mode: on in
    /// production, which refuses it off).
    pub internal_tls: bool,
    /// Where the replicas' internal TLS listener listens (`internalListen`), when
    /// [`KubernetesSettings::internal_tls`].
    pub internal_listen: std::net::SocketAddr,
    /// What no sandbox's egress NetworkPolicy allows, whatever its list says (`egressDeny`,
    /// plus the always-denied ranges), normalized.
    pub egress_deny: Vec<crate::shared::egress::Ipv4Net>,
}

impl KubernetesSettings {
    /// Where the other replicas reach this one, serving on `local` (the internal TLS
    /// listener's address when [`KubernetesSettings::internal_tls`], else the API's):
    /// `advertiseUrl`; else in a Pod, `SCHEME://$POD_IP:<port>` (deploy/ sets `POD_IP` from
    /// the Pod's status); else `SCHEME://<local>` when it listens on one address (not
    /// `0.0.0.0` or `::`); else none. SCHEME is `https` with internal TLS, else `http`.
    pub fn advertised(&self, local: std::net::SocketAddr) -> Option<String> {
        if let Some(url) = &self.advertise_url {
            return Some(url.clone());
        }
        let scheme = self.peer_scheme();
        let pod_ip = std::env::var("POD_IP")
            .ok()
            .and_then(|ip| ip.trim().parse::<std::net::IpAddr>().ok());
        match pod_ip {
            Some(ip) => Some(format!(
                "{scheme}://{}",
                std::net::SocketAddr::new(ip, local.port())
            )),
            None if !local.ip().is_unspecified() => Some(format!("{scheme}://{local}")),
            None => None,
        }
    }

    /// The scheme of the URLs replicas pass requests to and call agents at: `https` with
    /// internal TLS, else `http`.
    pub fn peer_scheme(&self) -> &'static str {
        if self.internal_tls { "https" } else { "http" }
    }
}

/// `[kubernetes] userNamespaces`: whether sandbox Pods get `hostUsers: false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UserNamespaces {
    /// When every node sandboxes may run on reports user-namespace support for the
    /// RuntimeClass's handler (`status.runtimeHandlers[].features.userNamespaces`).
    Auto,
    /// Always (a node whose runtime cannot fails the Pod, the reason in `error_message`).
    Always,
    /// Never.
    Never,
}

/// Remote install, when turned on: which DaemonSet runs the installer, the image it must run.
#[derive(Debug, Clone, PartialEq)]
pub struct InstallSettings {
    /// The installer's image, pinned by digest (`REPO@sha256:…`).
    pub image: String,
    /// Namespace of the installer DaemonSet.
    pub namespace: String,
    /// Name of the installer DaemonSet.
    pub daemon_set: String,
    /// Whether a node running `sbx serve` may be installed (the install may restart it).
    pub allow_server_nodes: bool,
    /// How long a node may stay pending or running before it is reported failed.
    pub timeout: std::time::Duration,
}

/// How `sbx serve` reaches the nodes' agents (`sbx agent`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    /// Namespace of the agents' Pods (only Pods there, labelled as agents, are called).
    pub namespace: String,
    /// The port they listen on, on their Pod's address.
    pub port: u16,
    /// The service's ServiceAccount token for the agents' audience (a projected volume),
    /// read again on every call: the kubelet rotates it.
    pub token_file: std::path::PathBuf,
    /// How long one agent may take to answer.
    pub timeout: std::time::Duration,
    /// How long an agent may go without renewing its heartbeat Lease before the leader marks
    /// its node's sbxd sandboxes Failed.
    pub lost_after: std::time::Duration,
}

/// A duration setting (`30s`, `2m`, …) that must be above zero; errors name `key`.
fn positive_duration(key: &str, text: &str) -> Result<std::time::Duration, String> {
    let value = crate::shared::duration::parse_duration(text).map_err(|e| format!("{key}: {e}"))?;
    if value.is_zero() {
        return Err(format!("{key} must be positive"));
    }
    Ok(value)
}

impl KubernetesConfig {
    /// Parses the section (errors name the key).
    pub fn parse(&self) -> Result<KubernetesSettings, String> {
        let root = crate::shared::quantity::Quantity::parse(&self.root_disk_size)
            .map_err(|e| format!("kubernetes.rootDiskSize: {e}"))?;
        if root.value_ceil() == 0 {
            return Err("kubernetes.rootDiskSize must be positive".into());
        }
        let fork_timeout = positive_duration("kubernetes.forkTimeout", &self.fork_timeout)?;
        let snapshot_timeout =
            positive_duration("kubernetes.snapshotTimeout", &self.snapshot_timeout)?;
        if self.dind_image.trim().is_empty() {
            return Err("kubernetes.dindImage must not be empty".into());
        }
        let dind_cpu = crate::shared::quantity::Quantity::parse(&self.dind_cpu)
            .map_err(|e| format!("kubernetes.dindCpu: {e}"))?;
        let dind_memory = crate::shared::quantity::Quantity::parse(&self.dind_memory)
            .map_err(|e| format!("kubernetes.dindMemory: {e}"))?;
        if dind_cpu.millis() == 0 || dind_memory.value_ceil() == 0 {
            return Err("kubernetes.dindCpu and kubernetes.dindMemory must be positive".into());
        }
        let agent_timeout = positive_duration("kubernetes.agentTimeout", &self.agent_timeout)?;
        let lost_after = positive_duration("kubernetes.agentLostAfter", &self.agent_lost_after)?;
        if self.agent_port == 0 {
            return Err("kubernetes.agentPort must be a port number".into());
        }
        crate::shared::names::validate_dns_label(
            "kubernetes.agentNamespace",
            &self.agent_namespace,
        )?;
        let install = self.install.parse()?;
        let advertise_url = match self.advertise_url.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(url) => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| format!("kubernetes.advertiseUrl {url:?}: {e}"))?;
                let scheme = if self.internal_tls == Some(true) {
                    "https"
                } else {
                    "http"
                };
                if parsed.scheme() != scheme || parsed.host().is_none() || parsed.path() != "/" {
                    return Err(format!(
                        "kubernetes.advertiseUrl must be {scheme}://HOST:PORT, not {url:?}{}",
                        if scheme == "https" {
                            " (internalTls is on: the internal listener's address)"
                        } else {
                            ""
                        }
                    ));
                }
                Some(url.trim_end_matches('/').to_string())
            }
        };
        let egress_deny = crate::shared::egress::denied_ranges(self.egress_deny.as_deref())
            .map_err(|e| format!("kubernetes.{e}"))?;
        Ok(KubernetesSettings {
            root_disk_bytes: root.value_ceil() as u64,
            fork_timeout,
            snapshot_timeout,
            dind_image: self.dind_image.trim().to_string(),
            dind_cpu_millis: dind_cpu.millis() as u64,
            dind_memory_bytes: dind_memory.value_ceil() as u64,
            user_namespaces: self.user_namespaces,
            sandbox_node_selector: self.sandbox_node_selector.clone(),
            sandbox_tolerations: self.sandbox_tolerations.clone(),
            agents: AgentSettings {
                namespace: self.agent_namespace.clone(),
                port: self.agent_port,
                token_file: self.agent_token_file.clone(),
                timeout: agent_timeout,
                lost_after,
            },
            install,
            advertise_url,
            internal_tls: self.internal_tls == Some(true),
            internal_listen: self.internal_listen.trim().parse().map_err(|_| {
                format!(
                    "kubernetes.internalListen {:?}: expected HOST:PORT such as 0.0.0.0:8443",
                    self.internal_listen
                )
            })?,
            egress_deny,
        })
    }
}

impl InstallConfig {
    /// The settings when remote install is on; errors name the key.
    pub fn parse(&self) -> Result<Option<InstallSettings>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let image = self.image.trim();
        let pinned = image.rsplit_once("@sha256:").is_some_and(|(repo, hex)| {
            !repo.is_empty()
                && hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if !pinned {
            return Err(format!(
                "kubernetes.install.image must be the installer's image pinned by digest \
                 (REPO@sha256:<64 hex digits>), not {image:?}"
            ));
        }
        crate::shared::names::validate_dns_label("kubernetes.install.namespace", &self.namespace)?;
        crate::shared::names::validate_dns_label("kubernetes.install.daemonSet", &self.daemon_set)?;
        let timeout = positive_duration("kubernetes.install.timeout", &self.timeout)?;
        Ok(Some(InstallSettings {
            image: image.to_string(),
            namespace: self.namespace.clone(),
            daemon_set: self.daemon_set.clone(),
            allow_server_nodes: self.allow_server_nodes,
            timeout,
        }))
    }
}

/// `[kubernetes.install]`: remote node install (spec, Remote install). Off by default.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InstallConfig {
    /// Turns the two install routes on (default false: both answer 404).
    pub enabled: bool,
    /// The installer's image pinned by digest, `REPO@sha256:…` (required when enabled): an
    /// install answers 500 while the installer DaemonSet runs any other.
    pub image: String,
    /// Namespace of the installer DaemonSet (default `sbx-agent`, as `deploy/installer.yaml`).
    pub namespace: String,
    /// Name of the installer DaemonSet (default `sbx-installer`).
    pub daemon_set: String,
    /// Whether nodes running `sbx serve` may be installed (default false: 409).
    pub allow_server_nodes: bool,
    /// How long a node may stay pending or running before it is failed (default `10m`).
    pub timeout: String,
}

impl Default for InstallConfig {
    fn default() -> Self {
        InstallConfig {
            enabled: false,
            image: String::new(),
            namespace: "sbx-agent".into(),
            daemon_set: crate::daemon::platform::kubernetes::permissions::INSTALLER_DAEMONSET
                .into(),
            allow_server_nodes: false,
            timeout: "10m".into(),
        }
    }
}

impl Default for KubernetesSettings {
    fn default() -> Self {
        KubernetesConfig::default()
            .parse()
            .expect("the default [kubernetes] section parses")
    }
}

/// `[kubernetes]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KubernetesConfig {
    /// Size of a new kql sandbox's root PVC (default `10Gi`).
    pub root_disk_size: String,
    /// How long a fork waits for its clone's PVC to be Bound (default `5m`).
    pub fork_timeout: String,
    /// How long a snapshot (named, pause, fork) waits for the CSI driver to cut it — the
    /// VolumeSnapshot's `status.creationTime` — before the request answers (default `2m`;
    /// then 504 and the snapshot is deleted).
    pub snapshot_timeout: String,
    /// Image of the `dind` sidecar a restore can add (default `docker:27-dind`).
    pub dind_image: String,
    /// CPU of the `dind` sidecar, its request and limit (default `1`): counted in the
    /// sandbox's size, so that the tenant's quotas and backstop ResourceQuota see it.
    pub dind_cpu: String,
    /// Memory of the `dind` sidecar, its request and limit (default `1Gi`).
    pub dind_memory: String,
    /// Whether sandbox Pods run in a user namespace of their own (`hostUsers: false`):
    /// `auto` (default: when every node sandboxes may run on reports user-namespace support
    /// for the RuntimeClass's handler, re-read every 30 s), `always` or `never`.
    pub user_namespaces: UserNamespaces,
    /// Node labels a sandbox's Pod requires (`nodeSelector`), e.g.
    /// `{ "katacontainers.io/kata-runtime" = "true" }`; none by default.
    pub sandbox_node_selector: std::collections::BTreeMap<String, String>,
    /// Tolerations of every sandbox's Pod, as Kubernetes writes them (`key`, `operator`,
    /// `value`, `effect`), e.g. for nodes tainted for sandboxes only; none by default.
    pub sandbox_tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// Namespace of the nodes' agents (default `sbx-agent`, as `deploy/agent.yaml`).
    pub agent_namespace: String,
    /// Port the agents listen on (default 8091).
    pub agent_port: u16,
    /// The service's token for the agents (default
    /// `/var/run/secrets/sbx.io/agent/token`, the projected volume of `deploy/`).
    pub agent_token_file: PathBuf,
    /// How long one agent may take to answer (default `3s`); a slower node is reported as
    /// an error entry, the others are not held up.
    pub agent_timeout: String,
    /// How long a node's agent may go without reporting (its heartbeat Lease) before the
    /// node's sbxd sandboxes read Failed, saying since when (default `60s`); its next report
    /// puts them back.
    pub agent_lost_after: String,
    /// `[kubernetes.install]`: remote node install.
    pub install: InstallConfig,
    /// The URL the other replicas reach this one at (`http://HOST:PORT`), to pass it the
    /// creates of a tenant whose quota Lease it holds. Default: `http://$POD_IP:<port>` in a
    /// Pod (deploy/ sets `POD_IP`), the listen address when it names one, else none (each
    /// quota check then takes and gives up the Lease itself).
    pub advertise_url: Option<String>,
    /// TLS between replicas and to the agents (default: on in production mode, where off
    /// is refused; off in development). On, the first replica to start makes a CA and two
    /// certificates (`kube-system/sbx-internal-tls`, the agents' pair also as
    /// `AGENT_NAMESPACE/sbx-agent-tls`); requests are passed between replicas over
    /// `internalListen` with both sides' certificates checked, and agents are called over
    /// HTTPS (they must run with `--tls-dir`, as `deploy/agent.yaml`).
    pub internal_tls: Option<bool>,
    /// Where the replicas' internal TLS listener listens (default `0.0.0.0:8443`); only
    /// clients with the replicas' certificate complete its handshake.
    pub internal_listen: String,
    /// IPv4 CIDRs no sandbox's egress NetworkPolicy allows, whatever its `egress_whitelist`
    /// says (the `except` of each allowed block). Default: RFC 1918, 100.64.0.0/10,
    /// 169.254.0.0/16 and 168.63.129.16/32; they cover the pod, Service and node ranges of most
    /// clusters: add yours when they lie outside. Link-local is denied in any case.
    pub egress_deny: Option<Vec<String>>,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            root_disk_size: "10Gi".into(),
            fork_timeout: "5m".into(),
            snapshot_timeout: "2m".into(),
            dind_image: "docker:27-dind".into(),
            dind_cpu: "1".into(),
            dind_memory: "1Gi".into(),
            user_namespaces: UserNamespaces::Auto,
            sandbox_node_selector: Default::default(),
            sandbox_tolerations: Vec::new(),
            agent_namespace: "sbx-agent".into(),
            agent_port: crate::shared::agent::DEFAULT_PORT,
            agent_token_file: PathBuf::from("/var/run/secrets/sbx.io/agent/token"),
            agent_timeout: "3s".into(),
            agent_lost_after: "60s".into(),
            install: InstallConfig::default(),
            advertise_url: None,
            internal_tls: None,
            internal_listen: "0.0.0.0:8443".into(),
            egress_deny: None,
        }
    }
}

/// `[nodes]` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodesConfig {
    /// Where the k7d XFS disk pool is mounted (default `/var/lib/k7d/disks`).
    #[serde(default)]
    pub disk_pool_path: Option<PathBuf>,
}

/// `[metering]` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeteringConfig {
    /// The Prometheus-compatible server that scrapes `/metrics` (`metering.metricsUrl`),
    /// e.g. `http://127.0.0.1:9090`; `GET /api/v1/usage` answers 400 without it.
    #[serde(default)]
    pub metrics_url: Option<String>,
}

/// `[audit]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditConfig {
    /// The JSON-lines file every write is recorded in [default: `<dataDir>/audit.jsonl`].
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Failed authentications are recorded once per client address per this interval, with
    /// their count (a duration, e.g. `60s`; the default), so that a flood of bad tokens
    /// cannot fill the trail.
    #[serde(default)]
    pub auth_failure_interval: Option<String>,
}

impl AuditConfig {
    /// `authFailureInterval`, parsed (60 s when unset); errors name the key.
    pub fn auth_failure_interval(&self) -> Result<std::time::Duration, String> {
        match &self.auth_failure_interval {
            Some(text) => positive_duration("audit.authFailureInterval", text),
            None => Ok(std::time::Duration::from_secs(60)),
        }
    }
}

/// `[http]` section: how long a client may take to send a request, as durations (`30s`,
/// `2m`); slow or idle clients cannot hold connections longer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HttpConfig {
    /// To send a request's header, from connecting or from the previous response (an idle
    /// keep-alive connection is closed after it).
    pub header_read_timeout: String,
    /// Between two parts of a request body (a stalled upload gets a 400).
    pub body_read_timeout: String,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            header_read_timeout: "30s".into(),
            body_read_timeout: "30s".into(),
        }
    }
}

/// The parsed `[http]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpSettings {
    /// See [`HttpConfig::header_read_timeout`].
    pub header_read_timeout: std::time::Duration,
    /// See [`HttpConfig::body_read_timeout`].
    pub body_read_timeout: std::time::Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpConfig::default().parse().expect("the defaults parse")
    }
}

impl HttpConfig {
    /// Parses the section (errors name the key); both limits must be positive.
    pub fn parse(&self) -> Result<HttpSettings, String> {
        Ok(HttpSettings {
            header_read_timeout: positive_duration(
                "http.headerReadTimeout",
                &self.header_read_timeout,
            )?,
            body_read_timeout: positive_duration("http.bodyReadTimeout", &self.body_read_timeout)?,
        })
    }
}

/// A configuration that cannot be used, with the reason.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A section's values cannot be used.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// The listen address does not parse.
    #[error("invalid listen address '{0}': expected HOST:PORT such as 127.0.0.1:8080")]
    Listen(String),
}

impl Config {
    /// Resolves flags/env over the config file over defaults.
    pub fn resolve(overrides: Overrides) -> Result<Config, ConfigError> {
        let file = match &overrides.config_file {
            Some(path) => load_file(path)?,
            None => FileConfig::default(),
        };
        let listen = overrides
            .listen
            .or(file.listen)
            .unwrap_or_else(|| paths::DEFAULT_LISTEN.to_string());
        let listen = listen
            .parse::<SocketAddr>()
            .map_err(|_| ConfigError::Listen(listen.clone()))?;
        let platform = overrides
            .platform
            .or(file.platform)
            // In a pod (the service account's API server in the environment) the default is
            // the cluster.
            .or_else(|| {
                std::env::var_os("KUBERNETES_SERVICE_HOST").map(|_| PlatformKind::Kubernetes)
            })
            .unwrap_or_default();
        if let Some(images) = &file.images {
            images.limits().map_err(ConfigError::Invalid)?;
        }
        let mode = overrides.mode.or(file.mode).unwrap_or_default();
        let mut kubernetes_file = file.kubernetes.unwrap_or_default();
        match (kubernetes_file.internal_tls, mode) {
            (Some(false), Mode::Production) if platform == PlatformKind::Kubernetes => {
                // Passed requests carry the clients' keys, agent calls the service's token.
                return Err(ConfigError::Invalid(
                    "[kubernetes] internalTls = false is refused in production mode: replicas \
                     would pass the clients' keys and call agents in clear; remove the setting \
                     (the default is on)"
                        .into(),
                ));
            }
            (None, Mode::Production) if platform == PlatformKind::Kubernetes => {
                kubernetes_file.internal_tls = Some(true)
            }
            _ => {}
        }
        let kubernetes = kubernetes_file.parse().map_err(ConfigError::Invalid)?;
        if platform == PlatformKind::Local && kubernetes.install.is_some() {
            return Err(ConfigError::Invalid(
                "kubernetes.install needs platform = \"kubernetes\": the embedded default runs \
                 on this host alone, with no other node to install"
                    .into(),
            ));
        }
        let runtime = file.runtime.unwrap_or_default();
        if mode == Mode::Production && !runtime.user_namespace {
            // Without a user namespace a sandbox's root is the host's root: one escape from
            // the container is the host. Development may trade that for plain runc's ids.
            return Err(ConfigError::Invalid(
                "[runtime] userNamespace = false is refused in production mode: sandboxes                  would run as the host's root; remove the setting (the default is true)"
                    .into(),
            ));
        }
        if runtime.user_namespace {
            // Each sandbox's range must be real host ids: a layout past u32 would wrap.
            crate::runtime::idmap::check_layout(runtime.id_map_base, runtime.id_map_ranges)
                .map_err(ConfigError::Invalid)?;
        }
        Ok(Config {
            listen,
            data_dir: overrides
                .data_dir
                .or(file.data_dir)
                .unwrap_or_else(paths::default_data_dir),
            mode,
            platform,
            runtime,
            network: file.network.unwrap_or_default(),
            images: {
                let mut images = file.images.unwrap_or_default();
                images.preload.extend(overrides.preload);
                images
            },
            metering: file.metering.unwrap_or_default(),
            rate_limit: file.rate_limit.unwrap_or_default(),
            sandbox_defaults: file
                .sandbox_defaults
                .unwrap_or_default()
                .parse()
                .map_err(ConfigError::Invalid)?,
            audit: {
                let audit = file.audit.unwrap_or_default();
                audit
                    .auth_failure_interval()
                    .map_err(ConfigError::Invalid)?;
                audit
            },
            http: file
                .http
                .unwrap_or_default()
                .parse()
                .map_err(ConfigError::Invalid)?,
            nodes: file.nodes.unwrap_or_default(),
            kubernetes,
            oidc: match file.oidc {
                Some(oidc) => {
                    oidc.validate().map_err(ConfigError::Invalid)?;
                    Some(oidc)
                }
                None => None,
            },
        })
    }

    /// A configuration for tests and embedding: loopback on a free port, the given data dir.
    pub fn for_data_dir(data_dir: &Path) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: data_dir.to_path_buf(),
            mode: Mode::Development,
            platform: PlatformKind::Local,
            runtime: RuntimeConfig::default(),
            network: NetworkConfig::default(),
            images: ImagesConfig::default(),
            oidc: None,
            metering: MeteringConfig::default(),
            rate_limit: RateLimitConfig::default(),
            sandbox_defaults: SandboxDefaults::default(),
            audit: AuditConfig::default(),
            http: HttpSettings::default(),
            nodes: NodesConfig::default(),
            kubernetes: KubernetesSettings::default(),
        }
    }
}

fn load_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })
}

mod limits;
pub use limits::{ConcurrencyConfig, RateLimitConfig, SandboxDefaults, SandboxDefaultsConfig};

#[cfg(test)]
mod tests;
