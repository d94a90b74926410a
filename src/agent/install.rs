//! `sbx agent install`: what the installer DaemonSet (`deploy/installer.yaml`) runs on a node
//! that remote install put in its pool. It checks the kernel and host prerequisites of the
//! sbxd runtime, then installs this binary on the host; the service, seeing it exit 0, starts
//! the agent there (the `sbx.io/agent` label). A failed check exits 1 with one line — the
//! installer's failure line that `GET /api/v1/install/{operation}` reports.
use std::path::{Path, PathBuf};

/// What to check and where to install.
#[derive(Debug, Clone)]
pub struct InstallPlan {
    /// The host's root file system as this process sees it (`/` on the host itself).
    pub host_root: PathBuf,
    /// Where on the host sbx goes (`<prefix>/bin/sbx`).
    pub prefix: PathBuf,
    /// The oldest kernel accepted, `(major, minor)`.
    pub min_kernel: (u32, u32),
    /// The node's name (recorded with the install).
    pub node: String,
}

/// Where an OCI runtime or `nft` is looked for on the host.
const HOST_BIN_DIRS: &[&str] = &[
    "usr/local/sbin",
    "usr/local/bin",
    "usr/sbin",
    "usr/bin",
    "sbin",
    "bin",
];

/// Checks the node and installs; the success line, or the failure line.
pub fn install(plan: &InstallPlan) -> Result<String, String> {
    let runtime = check(plan)?;
    let bin = host_path(&plan.host_root, &plan.prefix.join("bin"));
    std::fs::create_dir_all(&bin).map_err(|e| format!("install failed: {}: {e}", bin.display()))?;
    let target = bin.join("sbx");
    let partial = bin.join(".sbx.partial");
    let copied = std::fs::copy("/proc/self/exe", &partial)
        .and_then(|_| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))
        })
        .and_then(|_| std::fs::rename(&partial, &target));
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(format!("install failed: {}: {e}", target.display()));
    }
    let version = env!("CARGO_PKG_VERSION");
    let record = serde_json::json!({
        "version": version,
        "node": plan.node,
        "installed_at": crate::shared::timestamp::format_rfc3339_utc(crate::shared::timestamp::now_unix()),
        "binary": plan.prefix.join("bin/sbx"),
        "runtime": runtime,
    });
    let record_path = host_path(&plan.host_root, &plan.prefix.join("install.json"));
    std::fs::write(&record_path, format!("{record:#}\n"))
        .map_err(|e| format!("install failed: {}: {e}", record_path.display()))?;
    Ok(format!(
        "installed sbx {version} at {} on {} (OCI runtime {})",
        plan.prefix.join("bin/sbx").display(),
        plan.node,
        runtime.display()
    ))
}

/// The prerequisites of the sbxd runtime; the host's OCI runtime when they hold.
fn check(plan: &InstallPlan) -> Result<PathBuf, String> {
    // The kernel is the host's: /proc describes it from any container.
    let release = read("/proc/sys/kernel/osrelease")?;
    let release = release.trim();
    let version = kernel_version(release).ok_or_else(|| {
        format!("prerequisite failed: cannot read the kernel version {release:?}")
    })?;
    if version < plan.min_kernel {
        return Err(format!(
            "prerequisite failed: kernel {release} is older than {}.{}, the oldest sbxd runs on",
            plan.min_kernel.0, plan.min_kernel.1
        ));
    }
    let filesystems = read("/proc/filesystems")?;
    if !filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"))
    {
        return Err(
            "prerequisite failed: the kernel has no overlay file system (sandbox root file \
             systems are overlays): load the overlay module"
                .into(),
        );
    }
    let cgroups = read("/proc/cgroups")?;
    for controller in ["cpu", "memory", "pids"] {
        let enabled = cgroups.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.first() == Some(&controller) && f.get(3) == Some(&"1")
        });
        if !enabled {
            return Err(format!(
                "prerequisite failed: the cgroup controller '{controller}' is not enabled \
                 (sandbox limits need cpu, memory and pids)"
            ));
        }
    }
    if !Path::new("/proc/self/ns/net").exists() {
        return Err("prerequisite failed: the kernel has no network namespaces".into());
    }
    let runtime = host_binary(&plan.host_root, &["runc", "crun"]).ok_or_else(|| {
        format!(
            "prerequisite failed: no OCI runtime (runc or crun) in {} on the host",
            HOST_BIN_DIRS.join(", ")
        )
    })?;
    if host_binary(&plan.host_root, &["nft"]).is_none() {
        return Err(
            "prerequisite failed: no nft on the host (sandbox egress rules are nftables)".into(),
        );
    }
    Ok(runtime)
}

/// `6.18.44-fc` → `(6, 18)`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `5.4` → `(5, 4)`.
pub fn parse_min_kernel(text: &str) -> Result<(u32, u32), String> {
    kernel_version(text).ok_or_else(|| format!("expected MAJOR.MINOR, not {text:?}"))
}

/// The first of `names` found in the host's binary directories, as a host path.
fn host_binary(host_root: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|name| {
        HOST_BIN_DIRS.iter().find_map(|dir| {
            let on_host = Path::new("/").join(dir).join(name);
            host_path(host_root, &on_host).is_file().then_some(on_host)
        })
    })
}

/// A host path as this process sees it.
fn host_path(host_root: &Path, path: &Path) -> PathBuf {
    host_root.join(path.strip_prefix("/").unwrap_or(path))
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|e| format!("prerequisite failed: cannot read {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_compare_by_major_and_minor() {
        assert_eq!(kernel_version("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(kernel_version("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(kernel_version("5.10"), Some((5, 10)));
        assert!(kernel_version("6.1.0") > Some((5, 10)));
        assert!(parse_min_kernel("x").is_err());
    }

    #[test]
    fn installs_itself_under_the_prefix_when_the_host_has_what_sbxd_needs() {
        let host = tempfile::tempdir().unwrap();
        for bin in ["usr/sbin/runc", "usr/sbin/nft"] {
            let path = host.path().join(bin);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "").unwrap();
        }
        let plan = InstallPlan {
            host_root: host.path().to_path_buf(),
            prefix: PathBuf::from("/opt/sbx"),
            min_kernel: (3, 0),
            node: "n1".into(),
        };
        let line = install(&plan).unwrap();
        assert!(
            line.contains("/opt/sbx/bin/sbx") && line.contains("/usr/sbin/runc"),
            "{line}"
        );
        assert!(host.path().join("opt/sbx/bin/sbx").is_file());
        let record = std::fs::read_to_string(host.path().join("opt/sbx/install.json")).unwrap();
        assert!(record.contains("\"node\": \"n1\""), "{record}");

        let old = InstallPlan {
            min_kernel: (99, 0),
            ..plan.clone()
        };
        let failed = install(&old).unwrap_err();
        assert!(
            failed.starts_with("prerequisite failed: kernel") && failed.contains("99.0"),
            "{failed}"
        );

        std::fs::remove_file(host.path().join("usr/sbin/runc")).unwrap();
        let failed = install(&plan).unwrap_err();
        assert!(failed.contains("no OCI runtime"), "{failed}");
    }
}
