//! This host's storage pools as `GET /api/v1/nodes/storage` reports them: the kata thin-pool
//! (an LVM thin pool, read with `lvs`) and the k7d disk pool (an XFS mount, read with
//! `statvfs`). A missing pool is an error entry saying what is missing.
use std::path::Path;

use crate::shared::models::node::{
    DiskPool, DiskPoolResult, NodeStorageEntry, PoolError, ThinPool, ThinPoolResult,
};

/// Where the k7d disk pool is mounted unless configured otherwise.
pub const DEFAULT_DISK_POOL: &str = "/var/lib/k7d/disks";

fn pool_error(message: impl Into<String>) -> PoolError {
    PoolError {
        error: message.into(),
    }
}

/// The first LVM thin pool `lvs` reports.
pub async fn thin_pool() -> ThinPoolResult {
    let output = tokio::process::Command::new("lvs")
        .args([
            "--reportformat",
            "json",
            "--units",
            "b",
            "--nosuffix",
            "-o",
            "vg_name,lv_name,lv_attr,lv_size,data_percent,metadata_percent",
        ])
        .output()
        .await;
    let output = match output {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return ThinPoolResult::Err(pool_error(format!(
                "lvs failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Err(e) => {
            return ThinPoolResult::Err(pool_error(format!(
                "no kata thin-pool: LVM tools are not installed (lvs: {e})"
            )));
        }
    };
    let report: serde_json::Value = match serde_json::from_slice(&output.stdout) {
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
    match pools
        .iter()
        .find(|lv| lv["lv_attr"].as_str().is_some_and(|a| a.starts_with('t')))
    {
        Some(lv) => ThinPoolResult::Ok(ThinPool {
            vg: lv["vg_name"].as_str().unwrap_or_default().to_string(),
            lv: lv["lv_name"].as_str().unwrap_or_default().to_string(),
            size_bytes: number(&lv["lv_size"]) as u64,
            data_percent: number(&lv["data_percent"]),
            metadata_percent: number(&lv["metadata_percent"]),
        }),
        None => ThinPoolResult::Err(pool_error("no kata thin-pool: LVM has no thin pool here")),
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
pub fn disk_pool(path: &Path) -> DiskPoolResult {
    match mounted_fstype(path) {
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
    match nix::sys::statvfs::statvfs(path) {
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

/// Both pools of this host.
pub async fn entry(disk_pool_path: &Path) -> NodeStorageEntry {
    NodeStorageEntry::Pools {
        kata_thinpool: thin_pool().await,
        k7d_disks: disk_pool(disk_pool_path),
    }
}
