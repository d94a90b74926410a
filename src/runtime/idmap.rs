//! User namespaces for sandboxes: one id mapping shared by every sandbox (container ids
//! `0..size` are host ids `host_base..host_base+size`), and an idmapped view of the image
//! layer store so that the store stays owned by the ids its tarballs name while sandboxes see
//! it through their mapping (no chowned copies of layers).
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sched::CloneFlags;

use crate::runtime::RuntimeError;

/// Ids a sandbox can use: 0..65535 inside, like an image expects.
pub const ID_MAP_SIZE: u32 = 65536;

/// The id mapping of sandbox user namespaces.
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

    /// Host id of the sandbox's id `id`.
    pub fn host_id(&self, id: u32) -> u32 {
        self.host_base + id.min(self.size - 1)
    }

    /// The line of `/proc/PID/uid_map` (and `gid_map`).
    fn map_line(&self) -> String {
        format!("0 {} {}\n", self.host_base, self.size)
    }
}

/// A process parked in a fresh user namespace with `map`, killed and reaped on drop.
struct UsernsHolder {
    child: std::process::Child,
}

impl UsernsHolder {
    fn spawn(map: IdMap) -> io::Result<UsernsHolder> {
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
        std::fs::write(format!("/proc/{pid}/uid_map"), map.map_line())?;
        std::fs::write(format!("/proc/{pid}/setgroups"), "deny\n")?;
        std::fs::write(format!("/proc/{pid}/gid_map"), map.map_line())?;
        Ok(holder)
    }

    fn userns(&self) -> io::Result<std::fs::File> {
        std::fs::File::open(format!("/proc/{}/ns/user", self.child.id()))
    }
}

impl Drop for UsernsHolder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// Mounts an idmapped view of `source` at `target` (created if missing): files owned by id
/// `n` in `source` appear owned by `map.host_base + n` under `target`. A no-op when `target`
/// is a mount point already (a daemon restart).
pub fn mount_view(source: &Path, target: &Path, map: IdMap) -> Result<(), RuntimeError> {
    if crate::runtime::overlay::is_mount_point(target) {
        return Ok(());
    }
    let fail = |what: &str, e: io::Error| RuntimeError::io(&format!("idmapped view: {what}"), e);
    std::fs::create_dir_all(target).map_err(|e| fail("create the mount point", e))?;
    let holder = UsernsHolder::spawn(map).map_err(|e| fail("user namespace", e))?;
    let userns = holder
        .userns()
        .map_err(|e| fail("open the user namespace", e))?;
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

/// Unmounts a view made by [`mount_view`]; overlays already mounted over it keep working.
pub fn unmount_view(target: &Path) {
    if crate::runtime::overlay::is_mount_point(target) {
        let _ = nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH);
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
        assert_eq!(map.map_line(), "0 100000 65536\n");
    }
}
