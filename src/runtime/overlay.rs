//! The sandbox root filesystem: overlayfs of the image's read-only layers under a
//! per-sandbox writable upper dir.
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use crate::runtime::RuntimeError;

/// Directories of one sandbox's root filesystem.
#[derive(Debug, Clone)]
pub struct RootFs {
    /// Writable layer.
    pub upper: PathBuf,
    /// overlayfs work dir (same filesystem as `upper`).
    pub work: PathBuf,
    /// Where the merged root is mounted (the bundle's `rootfs`).
    pub merged: PathBuf,
}

impl RootFs {
    /// The layout under a sandbox dir.
    pub fn under(dir: &Path) -> RootFs {
        RootFs {
            upper: dir.join("upper"),
            work: dir.join("work"),
            merged: dir.join("bundle").join("rootfs"),
        }
    }

    /// Creates the dirs (the upper owned by `owner` when given, so a non-root sandbox can
    /// write to `/`) and mounts the overlay. `lowers` are lowest first.
    pub fn mount(&self, lowers: &[PathBuf], owner: Option<(u32, u32)>) -> Result<(), RuntimeError> {
        if lowers.is_empty() {
            return Err(RuntimeError::Invalid("the image has no layers".into()));
        }
        for dir in [&self.upper, &self.work, &self.merged] {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io("create rootfs dirs", e))?;
        }
        if let Some((uid, gid)) = owner {
            nix::unistd::chown(
                &self.upper,
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .map_err(|e| RuntimeError::io("chown upper dir", e.into()))?;
        }
        // overlayfs lists lower dirs top first.
        let lower: Vec<String> = lowers
            .iter()
            .rev()
            .map(|p| p.display().to_string())
            .collect();
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.join(":"),
            self.upper.display(),
            self.work.display()
        );
        if options.len() >= 4000 {
            return Err(RuntimeError::Invalid(format!(
                "the image has too many layers ({}) for one overlay mount",
                lowers.len()
            )));
        }
        // nodev: a device node in the image or written by the sandbox is never a device
        // (the runtime's bind of the root keeps the flag, locked in the sandbox's user
        // namespace). /dev is the runtime's own tmpfs.
        nix::mount::mount(
            Some("overlay"),
            &self.merged,
            Some("overlay"),
            MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .map_err(|e| RuntimeError::io("mount overlay", e.into()))
    }

    /// Whether the merged dir is a mount point now.
    pub fn is_mounted(&self) -> bool {
        is_mount_point(&self.merged)
    }

    /// Unmounts the overlay; not mounted is fine.
    pub fn unmount(&self) -> Result<(), RuntimeError> {
        if !self.is_mounted() {
            return Ok(());
        }
        nix::mount::umount2(&self.merged, MntFlags::empty())
            .or_else(|_| nix::mount::umount2(&self.merged, MntFlags::MNT_DETACH))
            .map_err(|e| RuntimeError::io("unmount overlay", e.into()))
    }
}

/// Whether `path` is listed as a mount point in /proc/self/mountinfo.
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let target = path.display().to_string();
    info.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|mount_point| unescape_mountinfo(mount_point) == target)
}

/// Mount points at or below `dir`, deepest first (for leak checks and crash clean-up).
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_mountinfo(m)))
        .filter(|m| m.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found
}

fn unescape_mountinfo(field: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo octal.
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            if let Ok(v) = u8::from_str_radix(&field[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Total size in bytes of the regular files under `dir` (the writable layer's use).
pub fn disk_usage(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo("/a\\040b"), "/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        assert_eq!(unescape_mountinfo("/x\\"), "/x\\");
    }

    #[test]
    fn overlay_mounts_layers_in_order_and_unmounts() {
        let dir = tempfile::tempdir().unwrap();
        let low = dir.path().join("low");
        let high = dir.path().join("high");
        std::fs::create_dir_all(&low).unwrap();
        std::fs::create_dir_all(&high).unwrap();
        std::fs::write(low.join("f"), "low").unwrap();
        std::fs::write(low.join("only-low"), "x").unwrap();
        std::fs::write(high.join("f"), "high").unwrap();
        let root = RootFs::under(&dir.path().join("sb"));
        root.mount(&[low.clone(), high], Some((65532, 65532)))
            .unwrap();
        assert!(root.is_mounted());
        assert_eq!(
            std::fs::read_to_string(root.merged.join("f")).unwrap(),
            "high"
        );
        std::fs::write(root.merged.join("new"), "w").unwrap();
        assert!(root.upper.join("new").exists());
        assert!(!low.join("new").exists());
        assert_eq!(mounts_under(dir.path()), vec![root.merged.clone()]);
        root.unmount().unwrap();
        assert!(!root.is_mounted());
        root.unmount().unwrap();
        assert!(disk_usage(&root.upper) > 0);
    }
}
