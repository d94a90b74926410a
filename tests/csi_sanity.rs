//! The test cluster's CSI driver (`testenv/csi-driver`, the stand-in for Longhorn behind
//! StorageClass and VolumeSnapshotClass `longhorn`) behaves like a real driver: the CSI
//! sanity suite (csi-sanity of github.com/kubernetes-csi/csi-test, built by
//! `scripts/k8s-testenv`) against a fresh instance of it, its controller and node services on
//! one socket in a temporary dir. Every spec that applies must pass. The suite skips by itself
//! what the driver does not offer, each for its reason:
//! * NodeStageVolume/NodeUnstageVolume: a volume is a directory, bind-mounted straight onto
//!   the target path (no STAGE_UNSTAGE_VOLUME);
//! * ControllerPublishVolume/-Unpublish: nothing to attach (its CSIDriver says
//!   attachRequired: false);
//! * GetCapacity, volume expansion, ModifyVolume, ListVolumes' published nodes, group
//!   snapshots, node attach limits: not offered (no capacity of its own, no resizer);
//! * block volumes: refused (InvalidArgument), as a directory is no block device.
//!
//! The binaries come from `SBX_TEST_CSI_DRIVER` and `SBX_TEST_CSI_SANITY`
//! (`eval "$(scripts/k8s-testenv csi-bins)"`, as `scripts/test` does). Root is needed for the
//! node service's bind mounts.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn binary(var: &str) -> PathBuf {
    let path = std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run scripts/test, or `eval \"$(scripts/k8s-testenv csi-bins)\"` \
             (it builds the test env's CSI driver and csi-sanity)"
        )
    });
    assert!(Path::new(&path).is_file(), "{var}={path}: no such file");
    PathBuf::from(path)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The mount points at or below `dir` (from /proc/self/mountinfo), deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(m.replace("\\040", " ")))
        .filter(|m| m.starts_with(dir))
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found
}

/// The driver and csi-sanity as they run, and their temporary dir: dropped (also when the test
/// fails), the processes are killed by PID, whatever is mounted below the dir is unmounted,
/// and the dir is removed.
struct Instance {
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for m in mounts_under(self.dir.path()) {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

#[test]
fn csi_sanity() {
    if !is_root() {
        eprintln!("skipped: the CSI driver's node service bind-mounts (needs root)");
        return;
    }
    let driver = binary("SBX_TEST_CSI_DRIVER");
    let sanity = binary("SBX_TEST_CSI_SANITY");
    let mut instance = Instance {
        dir: tempfile::Builder::new()
            .prefix("sbx-csi-")
            .tempdir()
            .unwrap(),
        children: vec![],
    };
    let dir = instance.dir.path().to_path_buf();
    let socket = dir.join("csi.sock");
    let state = dir.join("state");
    let log = std::fs::File::create(dir.join("driver.log")).unwrap();
    instance.children.push(
        Command::new(&driver)
            .arg("all")
            .arg("--endpoint")
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .args(["--node-id", "sanity-node"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", driver.display())),
    );
    let started = Instant::now();
    while !Command::new(&driver)
        .arg("probe")
        .arg("--endpoint")
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the driver does not answer on {}: {}",
            socket.display(),
            std::fs::read_to_string(dir.join("driver.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let out_path = dir.join("sanity.out");
    let out = std::fs::File::create(&out_path).unwrap();
    instance.children.push(
        Command::new(&sanity)
            .arg(format!("--csi.endpoint={}", socket.display()))
            .arg(format!("--csi.mountdir={}", dir.join("target").display()))
            .arg(format!(
                "--csi.stagingdir={}",
                dir.join("staging").display()
            ))
            .args(["--ginkgo.no-color", "--ginkgo.v", "--ginkgo.timeout=5m"])
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", sanity.display())),
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = instance.children[1].try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(360),
            "csi-sanity still runs after 6 min"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(&out_path).unwrap();
    let driver_log = std::fs::read_to_string(dir.join("driver.log")).unwrap_or_default();
    assert!(
        status.success(),
        "csi-sanity failed ({status}):\n{output}\n--- the driver's log:\n{driver_log}"
    );
    // The summary line, e.g. "SUCCESS! -- 54 Passed | 0 Failed | 1 Pending | 37 Skipped".
    let summary = output
        .lines()
        .rev()
        .find(|l| l.contains(" Passed | "))
        .unwrap_or_else(|| panic!("no summary in csi-sanity's output:\n{output}"));
    let passed: u32 = summary
        .split(" Passed")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of passed specs in {summary:?}"));
    assert!(summary.contains("| 0 Failed |"), "{summary}\n{output}");
    assert!(
        passed >= 50,
        "only {passed} specs passed: {summary}\n{output}"
    );
    // It skipped only what the driver does not offer (see the top of this file): a skip for
    // any other reason (say "Snapshot not supported") means a capability went missing.
    let allowed = [
        "NodeStageVolume not supported",
        "NodeUnstageVolume not supported",
        "Controller Publish, UnpublishVolume not supported",
        "ControllerPublishVolume not supported",
        "ControllerUnpublishVolume not supported",
        "GetCapacity not supported",
        "ControllerExpandVolume not supported",
        "NodeExpandVolume not supported",
        "ControllerModifyVolume not supported",
        "Modify Volume not supported",
        "Modify volume not supported",
        "GroupControllerService not supported",
    ];
    let unexpected: Vec<&str> = output
        .lines()
        .filter_map(|l| l.strip_prefix("  [SKIPPED] "))
        .filter(|reason| !reason.starts_with("in [") && !allowed.contains(reason))
        .collect();
    assert!(
        unexpected.is_empty(),
        "skipped for other reasons: {unexpected:?}\n{output}"
    );

    // Everything the suite made, it deleted: no directory of a volume or snapshot is left,
    // nothing stays mounted.
    for kind in ["volumes", "snapshots"] {
        let left: Vec<_> = std::fs::read_dir(state.join(kind))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{kind} left in the state dir: {left:?}");
    }
    assert!(
        mounts_under(&dir).is_empty(),
        "still mounted: {:?}",
        mounts_under(&dir)
    );
}
