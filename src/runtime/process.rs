//! Host-process helpers: waiting for a pid to exit without polling (pidfd), liveness, and
//! killing a process tree.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::unix::AsyncFd;

/// Whether a process with this pid exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

struct PidFd(OwnedFd);

impl AsRawFd for PidFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A pidfd for `pid`: it names that process even if the pid is reused later. `None` when
/// the process is gone or the kernel has no pidfds.
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is shared.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: the fd was just returned by the kernel and is owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Resolves when the pidfd's process has exited; `false` when it cannot be waited on.
async fn pidfd_wait(fd: OwnedFd) -> bool {
    // SAFETY: the AsyncFd owns the pidfd, which is closed only when the AsyncFd drops.
    match unsafe { AsyncFd::register(PidFd(fd)) } {
        Ok(async_fd) => {
            let _ = async_fd.readable().await;
            true
        }
        Err(_) => false,
    }
}

/// Resolves when the process exits. Falls back to polling when pidfd is unavailable.
pub async fn wait_exit(pid: i32) {
    if let Some(fd) = pidfd_open(pid) {
        if pidfd_wait(fd).await {
            return;
        }
    }
    while alive(pid) {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// SIGKILLs every process `members` lists and waits until each has exited, by pidfd: no
/// polling. A pid is signalled only through a pidfd opened while `members` still listed it,
/// so a pid reused by another process meanwhile is never hit. Repeats while `members` lists
/// new processes (a fork racing the kill), at most `rounds` times; returns whether none is
/// left.
pub async fn kill_members(members: impl Fn() -> Vec<i32>, rounds: usize) -> bool {
    for _ in 0..rounds {
        let opened: Vec<(i32, OwnedFd)> = members()
            .into_iter()
            .filter_map(|pid| pidfd_open(pid).map(|fd| (pid, fd)))
            .collect();
        if opened.is_empty() {
            return members().is_empty();
        }
        let still = members();
        let mut waits = Vec::new();
        for (pid, fd) in opened.into_iter().filter(|(pid, _)| still.contains(pid)) {
            // SAFETY: pidfd_send_signal takes the pidfd, a signal and no siginfo or flags.
            let sent = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            if sent == 0 {
                waits.push(pidfd_wait(fd));
            } else {
                tracing::debug!(pid, "SIGKILL through pidfd failed (gone already)");
            }
        }
        futures_util::future::join_all(waits).await;
    }
    members().is_empty()
}

/// Every descendant of `pid` (children first found by scanning /proc).
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                continue;
            };
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split(' ').nth(1))
                .and_then(|s| s.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parents.push((p, ppid));
            }
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(child, ppid) in &parents {
            if ppid == parent && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

/// SIGKILLs a process and all its descendants.
pub fn kill_tree(pid: i32) {
    let mut all = descendants(pid);
    all.push(pid);
    for p in all {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell with two `sleep` children, once they have started.
    async fn shell_with_two_children() -> (std::process::Child, i32) {
        let child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        (child, pid)
    }

    #[tokio::test]
    async fn kills_members_and_waits_for_their_exits() {
        let (mut child, pid) = shell_with_two_children().await;
        let members = || {
            let mut all = descendants(pid);
            all.push(pid);
            all.retain(|p| alive(*p));
            all
        };
        let kids = descendants(pid);
        assert_eq!(members().len(), 3);
        assert!(kill_members(members, 3).await);
        assert!(kids.iter().all(|k| !alive(*k)), "{kids:?}");
        // The shell is gone too (its exit status is not checked: it may have returned from
        // `wait` and exited between its children's SIGKILLs and its own).
        assert!(!alive(pid) || child.try_wait().unwrap().is_some());
        child.wait().unwrap();
        assert!(kill_members(Vec::new, 3).await);
    }

    #[tokio::test]
    async fn waits_for_exit_and_kills_trees() {
        let (mut child, pid) = shell_with_two_children().await;
        let kids = descendants(pid);
        assert_eq!(kids.len(), 2, "{kids:?}");
        assert!(alive(pid));
        kill_tree(pid);
        let _ = child.wait();
        for kid in kids {
            for _ in 0..50 {
                if !alive(kid) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert!(!alive(kid));
        }

        let child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let waiter = tokio::spawn(wait_exit(pid));
        let mut child = child;
        let _ = child.wait();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
