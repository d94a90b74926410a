//! A node's storage pools, real, on loop devices: the k7d XFS disk pool and an LVM volume
//! group for the kata thin pool. Each is removed when dropped. Needs root, xfsprogs and lvm2.
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .env("LVM_SUPPRESS_FD_WARNINGS", "1")
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}

fn must(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A 320 MiB XFS file system on a loop file, mounted; unmounted on drop.
pub struct XfsPool {
    /// Where it is mounted.
    pub mount_point: PathBuf,
    _dir: tempfile::TempDir,
}

impl XfsPool {
    /// Mounted in a new temporary directory.
    pub fn new() -> XfsPool {
        let dir = tempfile::tempdir().unwrap();
        let mount_point = dir.path().join("disks");
        XfsPool::mount(dir, mount_point)
    }

    /// Mounted at `mount_point` (made if missing).
    pub fn at(mount_point: &Path) -> XfsPool {
        XfsPool::mount(tempfile::tempdir().unwrap(), mount_point.to_path_buf())
    }

    fn mount(dir: tempfile::TempDir, mount_point: PathBuf) -> XfsPool {
        let image = dir.path().join("pool.img");
        let file = std::fs::File::create(&image).unwrap();
        file.set_len(320 << 20).unwrap();
        must("mkfs.xfs", &["-q", image.to_str().unwrap()]);
        std::fs::create_dir_all(&mount_point).unwrap();
        must(
            "mount",
            &[
                "-o",
                "loop",
                image.to_str().unwrap(),
                mount_point.to_str().unwrap(),
            ],
        );
        XfsPool {
            mount_point,
            _dir: dir,
        }
    }
}

impl Drop for XfsPool {
    fn drop(&mut self) {
        let _ = run("umount", &[self.mount_point.to_str().unwrap()]);
    }
}

/// An LVM volume group on a 256 MiB loop device, with a 128 MiB thin pool `pool` when this
/// kernel has device-mapper (some VMs' kernels do not: then the group has no pool). Removed,
/// with its loop device, on drop.
pub struct LvmGroup {
    /// The volume group's name.
    pub vg: String,
    /// Whether the thin pool `pool` exists.
    pub has_thin_pool: bool,
    device: String,
    _dir: tempfile::TempDir,
}

impl LvmGroup {
    /// A group named `vg`.
    pub fn new(vg: &str) -> LvmGroup {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("pv.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        let device = must("losetup", &["--show", "-f", image.to_str().unwrap()]);
        let mut group = LvmGroup {
            vg: vg.to_string(),
            has_thin_pool: false,
            device: device.clone(),
            _dir: dir,
        };
        must("pvcreate", &["-q", &device]);
        must("vgcreate", &["-q", vg, &device]);
        group.has_thin_pool = Path::new("/dev/mapper/control").exists()
            && run(
                "lvcreate",
                &["-q", "--type", "thin-pool", "-L", "128M", "-n", "pool", vg],
            )
            .status
            .success();
        group
    }
}

impl Drop for LvmGroup {
    fn drop(&mut self) {
        let _ = run("vgremove", &["-q", "-f", &self.vg]);
        let _ = run("pvremove", &["-q", &self.device]);
        let _ = run("losetup", &["-d", &self.device]);
    }
}
