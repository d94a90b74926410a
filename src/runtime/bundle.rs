//! OCI runtime configuration of a sandbox (`config.json`), generated with `oci-spec`:
//! user, capabilities, no-new-privileges, the default seccomp profile (`seccomp`), cgroup
//! limits and device rules, the sandbox's network namespace and its `/etc` files.
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxCapabilities, LinuxCapabilitiesBuilder, LinuxCpuBuilder,
    LinuxDeviceCgroup, LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxIdMappingBuilder,
    LinuxMemoryBuilder, LinuxNamespace, LinuxNamespaceBuilder, LinuxNamespaceType,
    LinuxPidsBuilder, LinuxResourcesBuilder, Mount, MountBuilder, PosixRlimitBuilder,
    PosixRlimitType, Process, ProcessBuilder, RootBuilder, Spec, UserBuilder,
};

use crate::runtime::RuntimeError;
use crate::runtime::idmap::IdMap;
use crate::runtime::seccomp;
pub use crate::shared::capabilities::{NON_ROOT_ID, parse_capability};

/// CFS period used for CPU quotas, microseconds.
pub const CPU_PERIOD_US: u64 = 100_000;
/// Default cap on processes in one sandbox.
pub const DEFAULT_PIDS_LIMIT: i64 = 4096;
/// Environment every sandbox gets unless the image or env file sets it.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Everything that shapes a sandbox's runtime configuration.
#[derive(Debug, Clone)]
pub struct BundleConfig {
    /// Hostname inside the sandbox (the sandbox name).
    pub hostname: String,
    /// The mounted root filesystem.
    pub rootfs: PathBuf,
    /// Main process arguments.
    pub args: Vec<String>,
    /// Environment (`KEY=VALUE`).
    pub env: Vec<String>,
    /// Working directory.
    pub cwd: String,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Supplementary groups (fsGroup).
    pub additional_gids: Vec<u32>,
    /// Capabilities kept.
    pub capabilities: Vec<Capability>,
    /// CPU limit in millicores.
    pub cpu_millis: Option<u64>,
    /// Memory limit in bytes.
    pub memory_bytes: Option<u64>,
    /// Path of a network namespace to join; `None`: the runtime makes a new one (inside the
    /// user namespace, so that the sandbox owns it; the network is plugged in after create).
    pub netns: Option<PathBuf>,
    /// The user namespace's id mapping; `None`: no user namespace.
    pub id_map: Option<IdMap>,
    /// cgroups path.
    pub cgroups_path: String,
    /// Files bind-mounted read-only into `/etc` (resolv.conf, hosts, hostname).
    pub etc_files: Vec<(String, PathBuf)>,
}

fn caps(set: &[Capability], non_root: bool) -> Result<LinuxCapabilities, RuntimeError> {
    let all: HashSet<Capability> = set.iter().copied().collect();
    // A non-root process keeps capabilities across exec only through the ambient set,
    // which needs them inheritable too.
    let carried: HashSet<Capability> = if non_root {
        all.clone()
    } else {
        HashSet::new()
    };
    LinuxCapabilitiesBuilder::default()
        .bounding(all.clone())
        .effective(all.clone())
        .permitted(all)
        .inheritable(carried.clone())
        .ambient(carried)
        .build()
        .map_err(RuntimeError::spec)
}

/// Open-file limit of sandbox processes: 65536, or the daemon's own hard limit when lower
/// (raising it needs CAP_SYS_RESOURCE, which hosts may withhold).
fn nofile_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let hard = if ok { limit.rlim_max } else { 1024 };
    hard.min(65536)
}

/// The process definition, shared by the main process and every exec.
pub fn process(config: &BundleConfig, args: Vec<String>) -> Result<Process, RuntimeError> {
    let mut user = UserBuilder::default().uid(config.uid).gid(config.gid);
    if !config.additional_gids.is_empty() {
        user = user.additional_gids(config.additional_gids.clone());
    }
    let nofile = nofile_limit();
    let rlimit = PosixRlimitBuilder::default()
        .typ(PosixRlimitType::RlimitNofile)
        .hard(nofile)
        .soft(nofile)
        .build()
        .map_err(RuntimeError::spec)?;
    ProcessBuilder::default()
        .terminal(false)
        .user(user.build().map_err(RuntimeError::spec)?)
        .args(args)
        .env(config.env.clone())
        .cwd(PathBuf::from(&config.cwd))
        .capabilities(caps(&config.capabilities, config.uid != 0)?)
        .rlimits(vec![rlimit])
        .no_new_privileges(true)
        .build()
        .map_err(RuntimeError::spec)
}

fn bind(destination: &str, source: &Path) -> Result<Mount, RuntimeError> {
    MountBuilder::default()
        .destination(PathBuf::from(destination))
        .typ("bind")
        .source(source.to_path_buf())
        .options(vec![
            "rbind".to_string(),
            "ro".to_string(),
            "nosuid".to_string(),
            "nodev".to_string(),
        ])
        .build()
        .map_err(RuntimeError::spec)
}

/// Character devices a sandbox may use (major, minor; `None`: any minor), the set every
/// container runtime grants: null, zero, full, random, urandom, tty, ptmx and the ptys.
const ALLOWED_DEVICES: &[(i64, Option<i64>)] = &[
    (1, Some(3)),
    (1, Some(5)),
    (1, Some(7)),
    (1, Some(8)),
    (1, Some(9)),
    (5, Some(0)),
    (5, Some(2)),
    (136, None),
];

/// The device cgroup rules: deny every device, then allow [`ALLOWED_DEVICES`]. A device node
/// that reaches the sandbox some other way (an image layer, a mknod without a user
/// namespace) cannot be opened: the rootfs is `nodev` too, this covers `/dev`.
fn device_rules() -> Result<Vec<LinuxDeviceCgroup>, RuntimeError> {
    let deny_all = LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .typ(LinuxDeviceType::A)
        .access("rwm")
        .build()
        .map_err(RuntimeError::spec)?;
    let mut rules = vec![deny_all];
    for (major, minor) in ALLOWED_DEVICES {
        let mut rule = LinuxDeviceCgroupBuilder::default()
            .allow(true)
            .typ(LinuxDeviceType::C)
            .major(*major)
            .access("rwm");
        if let Some(minor) = minor {
            rule = rule.minor(*minor);
        }
        rules.push(rule.build().map_err(RuntimeError::spec)?);
    }
    Ok(rules)
}

/// The runtime's default mounts, with `/proc` as restrictive as the others (`nosuid`,
/// `noexec`, `nodev`; the defaults give it no options).
fn default_mounts(defaults: Vec<Mount>) -> Vec<Mount> {
    defaults
        .into_iter()
        .map(|mut mount| {
            if mount.destination() == Path::new("/proc") && mount.options().is_none() {
                mount.set_options(Some(
                    ["nosuid", "noexec", "nodev"].map(String::from).to_vec(),
                ));
            }
            mount
        })
        .collect()
}

/// The whole runtime configuration.
pub fn spec(config: &BundleConfig) -> Result<Spec, RuntimeError> {
    let mut spec = Spec::default();
    spec.set_hostname(Some(config.hostname.clone()));
    spec.set_process(Some(process(config, config.args.clone())?));
    spec.set_root(Some(
        RootBuilder::default()
            .path(config.rootfs.clone())
            .readonly(false)
            .build()
            .map_err(RuntimeError::spec)?,
    ));
    let mut mounts = default_mounts(spec.mounts().clone().unwrap_or_default());
    for (name, source) in &config.etc_files {
        mounts.push(bind(&format!("/etc/{name}"), source)?);
    }
    spec.set_mounts(Some(mounts));

    let mut resources = LinuxResourcesBuilder::default()
        .devices(device_rules()?)
        .pids(
            LinuxPidsBuilder::default()
                .limit(DEFAULT_PIDS_LIMIT)
                .build()
                .map_err(RuntimeError::spec)?,
        );
    if let Some(millis) = config.cpu_millis {
        // Saturating: a limit of more CPUs than any host has (the API takes any quantity)
        // is no limit, not an overflow.
        let quota = i64::try_from((millis.saturating_mul(CPU_PERIOD_US) / 1000).max(1000))
            .unwrap_or(i64::MAX);
        resources = resources.cpu(
            LinuxCpuBuilder::default()
                .quota(quota)
                .period(CPU_PERIOD_US)
                .build()
                .map_err(RuntimeError::spec)?,
        );
    }
    if let Some(bytes) = config.memory_bytes {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        resources = resources.memory(
            LinuxMemoryBuilder::default()
                .limit(bytes)
                .swap(bytes)
                .build()
                .map_err(RuntimeError::spec)?,
        );
    }
    let mut types = vec![
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Cgroup,
    ];
    if config.id_map.is_some() {
        types.push(LinuxNamespaceType::User);
    }
    let network = match &config.netns {
        Some(path) => LinuxNamespaceBuilder::default()
            .typ(LinuxNamespaceType::Network)
            .path(path.clone())
            .build(),
        None => LinuxNamespaceBuilder::default()
            .typ(LinuxNamespaceType::Network)
            .build(),
    };
    let namespaces: Vec<LinuxNamespace> = types
        .into_iter()
        .map(|typ| LinuxNamespaceBuilder::default().typ(typ).build())
        .chain([network])
        .collect::<Result<_, _>>()
        .map_err(RuntimeError::spec)?;
    let mappings = match config.id_map {
        Some(map) => vec![
            LinuxIdMappingBuilder::default()
                .container_id(0u32)
                .host_id(map.host_base)
                .size(map.size)
                .build()
                .map_err(RuntimeError::spec)?,
        ],
        None => Vec::new(),
    };
    let defaults = oci_spec::runtime::Linux::default();
    let linux = LinuxBuilder::default()
        .resources(resources.build().map_err(RuntimeError::spec)?)
        .namespaces(namespaces)
        .uid_mappings(mappings.clone())
        .gid_mappings(mappings)
        .cgroups_path(PathBuf::from(&config.cgroups_path))
        .masked_paths(defaults.masked_paths().clone().unwrap_or_default())
        .readonly_paths(defaults.readonly_paths().clone().unwrap_or_default())
        .seccomp(seccomp::default_seccomp(&config.capabilities)?)
        .build()
        .map_err(RuntimeError::spec)?;
    spec.set_linux(Some(linux));
    Ok(spec)
}

/// Environment of the main process: defaults, then the image's, then the env file's
/// (later entries win per key).
pub fn merge_env(layers: &[&[String]]) -> Vec<String> {
    let mut merged: Vec<String> = vec![DEFAULT_PATH.to_string()];
    for layer in layers {
        for entry in layer.iter() {
            let key = entry.split('=').next().unwrap_or_default();
            merged.retain(|e| e.split('=').next().unwrap_or_default() != key);
            merged.push(entry.clone());
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::capabilities::capability_set;

    #[test]
    fn env_merges_by_key() {
        let image = vec!["PATH=/bin".to_string(), "A=1".to_string()];
        let file = vec!["A=2".to_string(), "B=3".to_string()];
        assert_eq!(merge_env(&[&image, &file]), ["PATH=/bin", "A=2", "B=3"]);
    }

    #[test]
    fn spec_carries_limits_user_caps_and_namespaces() {
        let config = BundleConfig {
            hostname: "demo".into(),
            rootfs: "/r".into(),
            args: vec!["sleep".into(), "1".into()],
            env: vec![DEFAULT_PATH.into()],
            cwd: "/".into(),
            uid: NON_ROOT_ID,
            gid: NON_ROOT_ID,
            additional_gids: vec![NON_ROOT_ID],
            capabilities: capability_set(None, Some(&["NET_BIND_SERVICE".to_string()])).unwrap(),
            cpu_millis: Some(500),
            memory_bytes: Some(64 << 20),
            netns: None,
            id_map: Some(IdMap::new(100_000)),
            cgroups_path: "/sbx/x".into(),
            etc_files: vec![("resolv.conf".into(), "/d/resolv.conf".into())],
        };
        let json = serde_json::to_value(spec(&config).unwrap()).unwrap();
        assert_eq!(json["process"]["user"]["uid"], 65532);
        assert_eq!(json["process"]["noNewPrivileges"], true);
        assert_eq!(
            json["process"]["capabilities"]["ambient"][0],
            "CAP_NET_BIND_SERVICE"
        );
        assert_eq!(json["linux"]["resources"]["cpu"]["quota"], 50000);
        // Limits beyond any host saturate (a schemathesis case once overflowed the quota).
        let huge = BundleConfig {
            cpu_millis: Some(u64::MAX / 7),
            memory_bytes: Some(u64::MAX),
            ..config.clone()
        };
        let json_huge = serde_json::to_value(spec(&huge).unwrap()).unwrap();
        assert_eq!(
            json_huge["linux"]["resources"]["cpu"]["quota"],
            (u64::MAX / 1000) as i64
        );
        assert_eq!(json_huge["linux"]["resources"]["memory"]["limit"], i64::MAX);
        assert_eq!(json["linux"]["resources"]["memory"]["limit"], 64 << 20);
        let ns = json["linux"]["namespaces"].as_array().unwrap();
        assert!(
            ns.iter()
                .any(|n| n["type"] == "network" && n.get("path").is_none())
        );
        assert!(ns.iter().any(|n| n["type"] == "user"));
        let map = &json["linux"]["uidMappings"][0];
        assert_eq!(
            (&map["containerID"], &map["hostID"], &map["size"]),
            (&0.into(), &100_000.into(), &65536.into())
        );
        assert_eq!(json["linux"]["gidMappings"][0]["hostID"], 100_000);
        // An allow-list: EPERM by default; mount is not allowed without SYS_ADMIN.
        let seccomp = &json["linux"]["seccomp"];
        assert_eq!(seccomp["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(seccomp["defaultErrnoRet"], libc::EPERM);
        let allowed = seccomp["syscalls"][0]["names"].as_array().unwrap();
        assert!(allowed.iter().any(|n| n == "read"));
        assert!(!allowed.iter().any(|n| n == "mount"));
        // Every device denied first, then the usual character devices.
        let devices = json["linux"]["resources"]["devices"].as_array().unwrap();
        assert_eq!(
            devices[0],
            serde_json::json!({"allow": false, "type": "a", "access": "rwm"})
        );
        assert!(
            devices[1..]
                .iter()
                .all(|d| d["allow"] == true && d["type"] == "c")
        );
        assert!(devices.iter().any(|d| d["major"] == 1 && d["minor"] == 3));
        assert!(!devices.iter().any(|d| d["major"] == 1 && d["minor"] == 1));
        let proc_mount = json["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["destination"] == "/proc")
            .unwrap();
        assert_eq!(
            proc_mount["options"],
            serde_json::json!(["nosuid", "noexec", "nodev"])
        );
        assert!(
            json["mounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["destination"] == "/etc/resolv.conf")
        );
    }
}
