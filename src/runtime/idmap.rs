//! User namespaces for sandboxes: each sandbox gets a host id range of its own (container ids
//! `0..65536` are host ids `base + range * 65536 ..`), allocated like network slots (the
//! lowest free range, recorded in the sandbox's spec or the pool marker, taken back by the
//! allocator when the daemon starts). The image layer store and the snapshot layer store hold
//! container ids (the ids their tarballs name, or a sandbox's ids shifted back to 0): each
//! sandbox sees them through an idmapped view made for its range, and a snapshot of a
//! sandbox's writable layer is copied out through the inverse view, so that a restore or a
//! fork into any other range sees the same owners.
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use nix::sched::CloneFlags;

use crate::runtime::RuntimeError;

/// Ids a sandbox can use: 0..65535 inside, like an image expects.
pub const ID_MAP_SIZE: u32 = 65536;

/// Ranges by default: 32,000 sandboxes and prepared containers at once per host, host ids
/// `100000..2097252000` with the default base (below 2^31, which some tools take for
/// negative).
pub const DEFAULT_RANGES: u32 = 32_000;

/// The highest host id a range may reach: `u32::MAX` is `(uid_t) -1`, never an id.
const HIGHEST_HOST_ID: u64 = u32::MAX as u64 - 1;

/// The id mapping of one sandbox's user namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdMap {
    /// Host id of the sandbox's root.
    pub host_base: u32,
    /// Ids mapped.
    pub size: u32,
}

impl IdMap {
    /// The mapping starting at `host_base`.
    pub fn new(host_base: u32) -> IdMap {
        IdMap {
            host_base,
            size: ID_MAP_SIZE,
        }
    }

    /// The mapping of range `range` of the layout starting at `base` (checked by
    /// [`check_layout`], so the sum fits).
    pub fn of_range(base: u32, range: u32) -> IdMap {
        IdMap::new(base.saturating_add(range.saturating_mul(ID_MAP_SIZE)))
    }

    /// Host id of the sandbox's id `id`.
    pub fn host_id(&self, id: u32) -> u32 {
        self.host_base + id.min(self.size - 1)
    }

    /// The line of `/proc/PID/uid_map` (and `gid_map`): container ids to host ids, or with
    /// `inverse` host ids of the range to ids `0..size` (a view that shifts a sandbox's
    /// files back into container ids).
    fn map_line(&self, inverse: bool) -> String {
        if inverse {
            format!("{} 0 {}\n", self.host_base, self.size)
        } else {
            format!("0 {} {}\n", self.host_base, self.size)
        }
    }
}

/// Checks the `[runtime]` id layout: `ranges` ranges of [`ID_MAP_SIZE`] ids from `base`,
/// all host ids below `u32::MAX`.
pub fn check_layout(base: u32, ranges: u32) -> Result<(), String> {
    if base == 0 {
        return Err("[runtime] idMapBase must not be 0 (host root)".to_string());
    }
    if ranges == 0 {
        return Err("[runtime] idMapRanges must be at least 1".to_string());
    }
    let last = u64::from(base) + u64::from(ranges) * u64::from(ID_MAP_SIZE) - 1;
    if last > HIGHEST_HOST_ID {
        return Err(format!(
            "[runtime] idMapBase {base} with idMapRanges {ranges} reaches host id {last}, past \
             the highest id {HIGHEST_HOST_ID}: at most {} ranges fit above that base",
            (HIGHEST_HOST_ID + 1 - u64::from(base)) / u64::from(ID_MAP_SIZE)
        ));
    }
    Ok(())
}

/// Which id ranges are in use (by sandboxes and prepared containers), each with the number of
/// holders: one, except for the sandboxes of a daemon from before ranges, which all share
/// range 0.
#[derive(Debug)]
pub struct IdRanges {
    capacity: u32,
    used: Mutex<BTreeMap<u32, u32>>,
}

impl IdRanges {
    /// No range in use, `capacity` of them.
    pub fn new(capacity: u32) -> IdRanges {
        IdRanges {
            capacity,
            used: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, u32>> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lowest free range, now in use.
    pub fn allocate(&self) -> Result<u32, RuntimeError> {
        let mut used = self.lock();
        let mut free = 0u32;
        for range in used.keys() {
            if *range != free {
                break;
            }
            free += 1;
        }
        if free >= self.capacity {
            return Err(RuntimeError::Unavailable(format!(
                "every host id range is in use ({} sandboxes and prepared sandboxes on this \
                 host; [runtime] idMapRanges)",
                self.capacity
            )));
        }
        used.insert(free, 1);
        Ok(free)
    }

    /// Counts one more holder of `range` (a sandbox or prepared container found at start-up).
    pub fn adopt(&self, range: u32) {
        *self.lock().entry(range).or_insert(0) += 1;
    }

    /// One holder of `range` is gone: its processes are dead and its files removed.
    pub fn release(&self, range: u32) {
        let mut used = self.lock();
        if let Some(count) = used.get_mut(&range) {
            *count -= 1;
            if *count == 0 {
                used.remove(&range);
            }
        }
    }

    /// Ranges in use now.
    pub fn in_use(&self) -> Vec<u32> {
        self.lock().keys().copied().collect()
    }
}

/// A process parked in a fresh user namespace with `map`, killed and reaped on drop.
struct UsernsHolder {
    child: std::process::Child,
}

impl UsernsHolder {
    fn spawn(map: IdMap, inverse: bool) -> io::Result<UsernsHolder> {
        let mut cmd = Command::new("/bin/sleep");
        cmd.arg("60")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: unshare is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                nix::sched::unshare(CloneFlags::CLONE_NEWUSER).map_err(io::Error::from)
            });
        }
        let child = cmd.spawn()?;
        let holder = UsernsHolder { child };
        let pid = holder.child.id();
        // The child is in its namespace once exec'd; the map files accept one write.
        let line = map.map_line(inverse);
        std::fs::write(format!("/proc/{pid}/uid_map"), &line)?;
        std::fs::write(format!("/proc/{pid}/setgroups"), "deny\n")?;
        std::fs::write(format!("/proc/{pid}/gid_map"), &line)?;
        Ok(holder)
    }

    fn userns(&self) -> io::Result<File> {
        File::open(format!("/proc/{}/ns/user", self.child.id()))
    }
}

impl Drop for UsernsHolder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// User namespaces with the mappings of ranges, for idmapped mounts: made once per range
/// and direction (a process, its maps written, its namespace kept open, the process
/// killed), so that a create spends no process on its views.
#[derive(Debug, Default)]
pub struct Namespaces {
    open: Mutex<HashMap<(u32, bool), Arc<File>>>,
}

impl Namespaces {
    /// The user namespace of `map` (`inverse`: host ids of the range to `0..size`).
    fn get(&self, map: IdMap, inverse: bool) -> io::Result<Arc<File>> {
        let key = (map.host_base, inverse);
        if let Some(ns) = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(ns.clone());
        }
        let holder = UsernsHolder::spawn(map, inverse)?;
        let ns = Arc::new(holder.userns()?);
        drop(holder);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, ns.clone());
        Ok(ns)
    }

    /// Mounts an idmapped view of `source` at `target` (created if missing): files owned by
    /// id `n` in `source` appear owned by `map.host_id(n)` under `target` (with `inverse`,
    /// files owned by `map.host_id(n)` appear owned by `n`, others by the overflow id).
    pub fn mount_view(
        &self,
        source: &Path,
        target: &Path,
        map: IdMap,
        inverse: bool,
    ) -> Result<(), RuntimeError> {
        let fail =
            |what: &str, e: io::Error| RuntimeError::io(&format!("idmapped view: {what}"), e);
        std::fs::create_dir_all(target).map_err(|e| fail("create the mount point", e))?;
        let userns = self
            .get(map, inverse)
            .map_err(|e| fail("user namespace", e))?;
        let source_c = cstring(source).map_err(|e| fail("source", e))?;
        let target_c = cstring(target).map_err(|e| fail("target", e))?;
        // SAFETY: plain syscalls with valid NUL-terminated paths and a properly sized struct.
        let tree = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                source_c.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
            )
        };
        if tree < 0 {
            return Err(fail("open_tree", io::Error::last_os_error()));
        }
        // SAFETY: open_tree returned a new file descriptor we own.
        let tree = unsafe { OwnedFd::from_raw_fd(tree as i32) };
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_IDMAP,
            attr_clr: 0,
            propagation: 0,
            userns_fd: userns.as_raw_fd() as u64,
        };
        let empty = c"";
        // SAFETY: as above; `attr` outlives the call.
        let set = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                empty.as_ptr(),
                libc::AT_EMPTY_PATH,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        if set < 0 {
            return Err(fail("mount_setattr", io::Error::last_os_error()));
        }
        // SAFETY: as above.
        let moved = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree.as_raw_fd(),
                empty.as_ptr(),
                libc::AT_FDCWD,
                target_c.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        if moved < 0 {
            return Err(fail("move_mount", io::Error::last_os_error()));
        }
        Ok(())
    }
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn cstring(path: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))
}

/// Detaches a view made by [`Namespaces::mount_view`]; overlays mounted over it keep their
/// layers (they hold them, not the path). Not a mount point, or missing: nothing to do.
pub fn detach_view(target: &Path) {
    let _ = nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH);
}

/// Detaches the views in `set` (a dir of views made for one mount) and removes the dirs. A
/// detach waits for the kernel's grace period (0.1 to 4 ms on a busy host here), so a create
/// leaves this to a task of its own once its overlay is mounted.
pub fn remove_view_set(set: &Path) {
    for view in std::fs::read_dir(set).into_iter().flatten().flatten() {
        detach_view(&view.path());
        let _ = std::fs::remove_dir(view.path());
    }
    let _ = std::fs::remove_dir(set);
}

/// Removes every view set under `views` (what a crash left there).
pub fn remove_view_sets(views: &Path) {
    for set in std::fs::read_dir(views).into_iter().flatten().flatten() {
        remove_view_set(&set.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ids_are_shifted_and_clamped() {
        let map = IdMap::new(100_000);
        assert_eq!(map.host_id(0), 100_000);
        assert_eq!(map.host_id(65532), 165_532);
        assert_eq!(map.host_id(70_000), 165_535);
        assert_eq!(map.map_line(false), "0 100000 65536\n");
        assert_eq!(map.map_line(true), "100000 0 65536\n");
        assert_eq!(IdMap::of_range(100_000, 2).host_base, 231_072);
    }

    #[test]
    fn a_layout_past_the_last_host_id_is_refused() {
        assert!(check_layout(100_000, DEFAULT_RANGES).is_ok());
        assert!(check_layout(0, 1).is_err());
        assert!(check_layout(100_000, 0).is_err());
        // 65535 ranges above 100000 end past u32::MAX.
        let e = check_layout(100_000, 65_535).unwrap_err();
        assert!(
            e.contains("idMapRanges") && e.contains("65534 ranges fit"),
            "{e}"
        );
        assert!(check_layout(100_000, 65_534).is_ok());
    }

    #[test]
    fn ranges_are_handed_out_lowest_first_and_taken_back() {
        let ranges = IdRanges::new(3);
        assert_eq!(ranges.allocate().unwrap(), 0);
        assert_eq!(ranges.allocate().unwrap(), 1);
        ranges.release(0);
        assert_eq!(ranges.allocate().unwrap(), 0, "a released range is reused");
        assert_eq!(ranges.allocate().unwrap(), 2);
        assert!(ranges.allocate().is_err(), "all three in use");
        // Ranges found at start-up, one of them shared by two sandboxes of an old daemon.
        let ranges = IdRanges::new(10);
        ranges.adopt(0);
        ranges.adopt(0);
        ranges.adopt(2);
        assert_eq!(ranges.allocate().unwrap(), 1);
        assert_eq!(ranges.allocate().unwrap(), 3);
        ranges.release(0);
        assert_eq!(ranges.allocate().unwrap(), 4, "range 0 still has a holder");
        ranges.release(0);
        assert_eq!(ranges.allocate().unwrap(), 0);
        assert_eq!(ranges.in_use(), vec![0, 1, 2, 3, 4]);
    }
}
