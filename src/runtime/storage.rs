//! A node's storage pools as `GET /api/v1/nodes/storage` reports them: the kata thin-pool
//! (an LVM thin pool, read with `lvs`) and the k7d disk pool (an XFS mount, read with
//! `statvfs`). A missing pool is an error entry saying what is missing.
//!
//! Read from this process's own view of the host (the embedded default), or, for `sbx agent`
//! in a container, through the host's root file system mounted into it (a hostPath volume
//! with mount propagation from the host): its paths under that root, `lvs` run chrooted there.
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::shared::models::node::{
    DiskPool, DiskPoolResult, NodeStorageEntry, PoolError, ThinPool, ThinPoolResult,
};

/// How long `lvs` may take (it waits on LVM's locks).
const LVS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where the k7d disk pool is mounted unless configured otherwise.
pub const DEFAULT_DISK_POOL: &str = "/var/lib/k7d/disks";

fn pool_error(message: impl Into<String>) -> PoolError {
    PoolError {
        error: message.into(),
    }
}

/// Which view of the host the pools are read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostView {
    /// This process's own mounts and commands.
    Own,
    /// The host's root file system mounted at this path (e.g. `/host`), its mounts below it
    /// propagated from the host.
    Root(PathBuf),
}

impl HostView {
    /// Where this process reaches the host's `path`.
    fn reach(&self, path: &Path) -> PathBuf {
        match self {
            HostView::Own => path.to_path_buf(),
            HostView::Root(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
        }
    }
}

/// The pools of one node and where they are looked for.
#[derive(Debug, Clone)]
pub struct Pools {
    /// Where the k7d disk pool is mounted (a path on the host).
    pub disk_pool: PathBuf,
    /// The thin pool to report, `VG/LV`; `None` reports the first one `lvs` lists.
    pub thin_pool: Option<String>,
    /// How the host is seen.
    pub view: HostView,
}

impl Pools {
    /// The pools of this process's own host view: the embedded default.
    pub fn own(disk_pool: &Path) -> Pools {
        Pools {
            disk_pool: disk_pool.to_path_buf(),
            thin_pool: None,
            view: HostView::Own,
        }
    }

    /// Both pools.
    pub async fn entry(&self) -> NodeStorageEntry {
        NodeStorageEntry::Pools {
            kata_thinpool: thin_pool(&self.view, self.thin_pool.as_deref()).await,
            k7d_disks: disk_pool(&self.view, &self.disk_pool),
        }
    }
}

/// The LVM thin pool `wanted` (`VG/LV`), or the first one `lvs` reports.
pub async fn thin_pool(view: &HostView, wanted: Option<&str>) -> ThinPoolResult {
    let command = match view {
        HostView::Own => std::process::Command::new("lvs"),
        HostView::Root(root) => {
            // The host's lvs, with the host's /dev, /etc/lvm and /run/lvm.
            let found = ["/usr/sbin/lvs", "/sbin/lvs", "/usr/bin/lvs"]
                .into_iter()
                .find(|p| view.reach(Path::new(p)).exists());
            let Some(lvs) = found else {
                return ThinPoolResult::Err(pool_error(
                    "no kata thin-pool: LVM tools are not installed on the host (no lvs)",
                ));
            };
            let mut command = std::process::Command::new(lvs);
            let root = root.clone();
            // SAFETY: between fork and exec the child only calls chroot(2) and chdir(2),
            // async-signal-safe.
            unsafe {
                command.pre_exec(move || {
                    nix::unistd::chroot(&root)?;
                    nix::unistd::chdir("/")?;
                    Ok(())
                });
            }
            command
        }
    };
    let mut command = tokio::process::Command::from(command);
    // --readonly --nolocking: the report from the on-disk metadata, without LVM's lock files
    // (which need a writable /run, not in the agent's read-only view of the host); a report
    // must never wait for or block a change.
    command
        .kill_on_drop(true)
        .env("LVM_SUPPRESS_FD_WARNINGS", "1")
        .args([
            "--readonly",
            "--nolocking",
            "--reportformat",
            "json",
            "--units",
            "b",
            "--nosuffix",
            "-o",
            "vg_name,lv_name,lv_attr,lv_size,data_percent,metadata_percent",
        ]);
    let output = match tokio::time::timeout(LVS_TIMEOUT, command.output()).await {
        Ok(output) => output,
        Err(_) => {
            return ThinPoolResult::Err(pool_error(format!(
                "lvs did not answer in {} s",
                LVS_TIMEOUT.as_secs()
            )));
        }
    };
    let output = match output {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return ThinPoolResult::Err(pool_error(format!(
                "lvs failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ThinPoolResult::Err(pool_error(format!(
                "no kata thin-pool: LVM tools are not installed (lvs: {e})"
            )));
        }
        Err(e) => return ThinPoolResult::Err(pool_error(format!("lvs could not run: {e}"))),
    };
    read_report(&output.stdout, wanted)
}

/// The thin pool `wanted` (or the first) in an `lvs --reportformat json` report.
fn read_report(report: &[u8], wanted: Option<&str>) -> ThinPoolResult {
    let report: serde_json::Value = match serde_json::from_slice(report) {
        Ok(v) => v,
        Err(e) => return ThinPoolResult::Err(pool_error(format!("unreadable lvs report: {e}"))),
    };
    let number = |v: &serde_json::Value| -> f64 {
        v.as_str()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let pools = report["report"][0]["lv"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let name = |lv: &serde_json::Value| {
        format!(
            "{}/{}",
            lv["vg_name"].as_str().unwrap_or_default(),
            lv["lv_name"].as_str().unwrap_or_default()
        )
    };
    match pools.iter().find(|lv| {
        lv["lv_attr"].as_str().is_some_and(|a| a.starts_with('t'))
            && wanted.is_none_or(|w| name(lv) == w)
    }) {
        Some(lv) => ThinPoolResult::Ok(ThinPool {
            vg: lv["vg_name"].as_str().unwrap_or_default().to_string(),
            lv: lv["lv_name"].as_str().unwrap_or_default().to_string(),
            size_bytes: number(&lv["lv_size"]) as u64,
            data_percent: number(&lv["data_percent"]),
            metadata_percent: number(&lv["metadata_percent"]),
        }),
        None => ThinPoolResult::Err(pool_error(match wanted {
            Some(w) => format!("no kata thin-pool: LVM has no thin pool {w} here"),
            None => "no kata thin-pool: LVM has no thin pool here".to_string(),
        })),
    }
}

/// The filesystem type mounted at `path`, if it is a mount point.
fn mounted_fstype(path: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let target = path.display().to_string();
    info.lines().rev().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount_point = left.split(' ').nth(4)?;
        (mount_point == target).then(|| right.split(' ').next().unwrap_or_default().to_string())
    })
}

/// The XFS disk pool mounted at `path`.
pub fn disk_pool(view: &HostView, path: &Path) -> DiskPoolResult {
    // The host's path as this process reaches it.
    let reached = view.reach(path);
    match mounted_fstype(&reached) {
        None => {
            return DiskPoolResult::Err(pool_error(format!(
                "no k7d disk pool: nothing is mounted at {}",
                path.display()
            )));
        }
        Some(fs) if fs != "xfs" => {
            return DiskPoolResult::Err(pool_error(format!(
                "no k7d disk pool: {} is {fs}, not XFS",
                path.display()
            )));
        }
        Some(_) => {}
    }
    match nix::sys::statvfs::statvfs(&reached) {
        Ok(st) => {
            let block = st.fragment_size();
            let size = st.blocks() * block;
            let avail = st.blocks_available() * block;
            let used = (st.blocks() - st.blocks_free()) * block;
            DiskPoolResult::Ok(DiskPool {
                path: path.display().to_string(),
                size_bytes: size,
                used_bytes: used,
                avail_bytes: avail,
                used_percent: if size == 0 {
                    0.0
                } else {
                    (used as f64 * 10000.0 / size as f64).round() / 100.0
                },
            })
        }
        Err(e) => DiskPoolResult::Err(pool_error(format!("statvfs {}: {e}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `lvs` 2.03 printed for a volume group with a thin pool and a thin volume in it.
    const REPORT: &str = r#"{
      "report": [
          {
              "lv": [
                  {"vg_name":"kata", "lv_name":"disk0", "lv_attr":"Vwi-a-tz--", "lv_size":"1073741824", "data_percent":"3.10", "metadata_percent":""},
                  {"vg_name":"kata", "lv_name":"pool", "lv_attr":"twi-aotz--", "lv_size":"134217728", "data_percent":"12.50", "metadata_percent":"10.84"}
              ]
          }
      ]
    }"#;

    #[test]
    fn the_thin_pool_is_read_from_the_report() {
        let expected = ThinPoolResult::Ok(ThinPool {
            vg: "kata".into(),
            lv: "pool".into(),
            size_bytes: 134217728,
            data_percent: 12.5,
            metadata_percent: 10.84,
        });
        assert_eq!(read_report(REPORT.as_bytes(), None), expected);
        assert_eq!(read_report(REPORT.as_bytes(), Some("kata/pool")), expected);
        let ThinPoolResult::Err(e) = read_report(REPORT.as_bytes(), Some("kata/disk0")) else {
            panic!("a thin volume is not a thin pool");
        };
        assert!(e.error.contains("no thin pool kata/disk0"), "{}", e.error);
    }
}
