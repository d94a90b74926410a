//! Reading a sandbox's cgroup: CPU time, memory working set and OOM kills, on cgroup v1,
//! hybrid and v2 hosts.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The cgroups path given to the runtime for a sandbox (relative to each hierarchy).
pub fn cgroups_path(id: &str) -> String {
    format!("/sbx/{id}")
}

/// A point-in-time reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CgroupStats {
    /// Cumulative CPU time, nanoseconds.
    pub cpu_ns: u64,
    /// Memory in use minus reclaimable file cache, bytes (what kubectl top shows).
    pub memory_working_set: u64,
    /// OOM kills so far.
    pub oom_kills: u64,
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn keyed(path: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn unified_root() -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    root.join("cgroup.controllers")
        .exists()
        .then(|| root.to_path_buf())
}

/// Reads the stats of the cgroup at `cgroups_path`; `None` when it does not exist.
pub fn stats(cgroups_path: &str) -> Option<CgroupStats> {
    let rel = cgroups_path.trim_start_matches('/');
    if let Some(root) = unified_root() {
        let dir = root.join(rel);
        let cpu_us = keyed(&dir.join("cpu.stat"), "usage_usec")?;
        let current = read_u64(&dir.join("memory.current")).unwrap_or(0);
        let inactive = keyed(&dir.join("memory.stat"), "inactive_file").unwrap_or(0);
        return Some(CgroupStats {
            cpu_ns: cpu_us * 1000,
            memory_working_set: current.saturating_sub(inactive),
            oom_kills: keyed(&dir.join("memory.events"), "oom_kill").unwrap_or(0),
        });
    }
    let v1 = Path::new("/sys/fs/cgroup");
    let cpu_ns = read_u64(&v1.join("cpuacct").join(rel).join("cpuacct.usage"))?;
    let mem = v1.join("memory").join(rel);
    let usage = read_u64(&mem.join("memory.usage_in_bytes")).unwrap_or(0);
    let inactive = keyed(&mem.join("memory.stat"), "total_inactive_file").unwrap_or(0);
    Some(CgroupStats {
        cpu_ns,
        memory_working_set: usage.saturating_sub(inactive),
        oom_kills: keyed(&mem.join("memory.oom_control"), "oom_kill").unwrap_or(0),
    })
}

/// Whether the cgroup is frozen (paused).
pub fn is_frozen(cgroups_path: &str) -> bool {
    let rel = cgroups_path.trim_start_matches('/');
    if let Some(root) = unified_root() {
        return read_u64(&root.join(rel).join("cgroup.freeze")) == Some(1);
    }
    std::fs::read_to_string(
        Path::new("/sys/fs/cgroup/freezer")
            .join(rel)
            .join("freezer.state"),
    )
    .is_ok_and(|s| s.trim() != "THAWED")
}

/// Longest wait for the kernel to report a cgroup frozen or thawed.
const FREEZE_PATIENCE: Duration = Duration::from_secs(5);

/// On cgroup v1, tries (~0.2 ms apart) after which a freeze still FREEZING is thawed and
/// started anew.
const THAW_EVERY: u32 = 50;

/// Freezes or thaws the sandbox's cgroup as `runc pause`/`resume` do (v2 `cgroup.freeze`, v1
/// `freezer.state`; the runtime reads the state back from the same file), without starting
/// the runtime (~4 ms of Go start-up for ~0.1 ms of work); returns once the kernel reports the
/// cgroup frozen or thawed. `NotFound` when the sandbox has no cgroup.
pub async fn set_frozen(cgroups_path: &str, frozen: bool) -> std::io::Result<()> {
    let rel = cgroups_path.trim_start_matches('/');
    let deadline = Instant::now() + FREEZE_PATIENCE;
    let (write_to, value, read_from) = match unified_root() {
        Some(root) => {
            let dir = root.join(rel);
            let value = if frozen { "1" } else { "0" };
            (dir.join("cgroup.freeze"), value, dir.join("cgroup.events"))
        }
        None => {
            let state = Path::new("/sys/fs/cgroup/freezer")
                .join(rel)
                .join("freezer.state");
            let value = if frozen { "FROZEN" } else { "THAWED" };
            (state.clone(), value, state)
        }
    };
    let reached = |text: &str| match unified_root() {
        Some(_) => text.lines().any(|l| l.trim() == format!("frozen {value}")),
        None => text.trim() == value,
    };
    let v1 = write_to == read_from;
    let mut round = 0u32;
    loop {
        // On v1, thawed now and then and frozen anew, as runc does: its maintainers found a
        // v1 freeze that stalls in FREEZING (tasks that appear while it runs, a slow
        // machine) completes after a thaw, while writing FROZEN again is not always enough.
        if v1 && frozen && round > 0 && round % THAW_EVERY == 0 {
            std::fs::write(&write_to, "THAWED")?;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        round += 1;
        std::fs::write(&write_to, value)?;
        if reached(&std::fs::read_to_string(&read_from)?) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            // What the tasks were doing says why; read before the thaw changes it.
            let tasks =
                task_states(&read_from.with_file_name(if v1 { "tasks" } else { "cgroup.threads" }));
            if frozen {
                let _ = std::fs::write(&write_to, if v1 { "THAWED" } else { "0" });
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "cgroup {cgroups_path} not {} after {FREEZE_PATIENCE:?} ({round} tries); its tasks: {tasks}",
                    if frozen { "frozen" } else { "thawed" }
                ),
            ));
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// The first tasks listed in `list` (a cgroup's `tasks` or `cgroup.threads`) as `tid name
/// state wchan`, for an error that says what a freeze waited for.
fn task_states(list: &Path) -> String {
    let text = std::fs::read_to_string(list).unwrap_or_default();
    let described: Vec<String> = text
        .lines()
        .take(8)
        .map(|tid| {
            let tid = tid.trim();
            let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap_or_default();
            // `pid (comm) state ...`: the name may hold spaces and parentheses.
            let (name, state) = match (stat.find('('), stat.rfind(')')) {
                (Some(open), Some(close)) if open < close => (
                    &stat[open + 1..close],
                    stat[close + 1..].split_whitespace().next().unwrap_or("?"),
                ),
                _ => ("?", "?"),
            };
            let wchan = std::fs::read_to_string(format!("/proc/{tid}/wchan")).unwrap_or_default();
            format!("{tid} {name} {state} {}", wchan.trim())
        })
        .collect();
    if described.is_empty() {
        "none".to_string()
    } else {
        described.join(", ")
    }
}

/// The pids in the sandbox's cgroup (on cgroup v1, its `pids` hierarchy, which runc and
/// crun always join); none when it does not exist.
pub fn procs(cgroups_path: &str) -> Vec<i32> {
    let rel = cgroups_path.trim_start_matches('/');
    let dir = match unified_root() {
        Some(root) => root.join(rel),
        None => Path::new("/sys/fs/cgroup/pids").join(rel),
    };
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Every cgroup dir of a sandbox that still exists (for leak checks and crash clean-up).
pub fn existing_dirs(cgroups_path: &str) -> Vec<PathBuf> {
    let rel = cgroups_path.trim_start_matches('/');
    if let Some(root) = unified_root() {
        let dir = root.join(rel);
        return if dir.exists() { vec![dir] } else { vec![] };
    }
    let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") else {
        return vec![];
    };
    entries
        .flatten()
        .map(|e| e.path().join(rel))
        .filter(|p| p.is_dir())
        .collect()
}

/// Removes the (empty) cgroup dirs left behind by a crashed runtime. A cgroup whose last
/// process was just killed stays busy until the kernel has reaped it: the removal retries
/// for up to a second rather than leave the dir behind for good.
pub async fn remove_dirs(cgroups_path: &str) {
    for dir in existing_dirs(cgroups_path) {
        for _ in 0..40 {
            match std::fs::remove_dir(&dir) {
                Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) => {
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await
                }
                _ => break,
            }
        }
    }
}
