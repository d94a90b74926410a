//! Where CRIU works fast on this host, for warm forks:
//!
//! - the checkpoint images go to a tmpfs of sbx's own: a dump writes the sandbox's memory
//!   there and the restore reads it back, and none of it is ever written back to disk; a
//!   sandbox whose memory would not fit comfortably is dumped to a dir on disk instead;
//! - CRIU probes the kernel (~35 ms here) at every run unless it can keep what it found in
//!   `/run/criu.kdat`, which it does only when `/run` is a tmpfs. Where it is not (this
//!   project's VMs), `runc checkpoint` and `runc restore` run in a mount namespace of their own
//!   whose `/run` is a dir of that tmpfs, so the probe is made once per boot.
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::runtime::RuntimeError;

/// The dir of the tmpfs that stands in for `/run` (CRIU's kernel-probe cache).
const RUN_DIR: &str = ".criu-run";

/// Where a warm fork's checkpoint images are made.
#[derive(Debug)]
pub struct CheckpointStore {
    /// The images' dir: a tmpfs where one could be mounted.
    memory: PathBuf,
    /// The dir on disk for a sandbox whose memory would not fit in `memory`.
    disk: PathBuf,
    /// Whether `memory` is a tmpfs.
    on_tmpfs: bool,
    /// CRIU's `/run`, where the host's is no tmpfs.
    run: Option<PrivateRun>,
}

fn is_tmpfs(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
}

/// Removes everything in `dir` (not `dir` itself: it may be a mount point).
fn clear(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

fn make_dir(dir: &Path, mode: u32) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::set_permissions(dir, PermissionsExt::from_mode(mode)))
        .map_err(|e| RuntimeError::io(&format!("create {}", dir.display()), e))
}

impl CheckpointStore {
    /// Prepares `memory` (a tmpfs mounted there unless one is, or a plain dir where mounting
    /// fails) and `disk`, both emptied and of mode `mode`. Call it once no checkpoint or
    /// restore of a previous daemon runs.
    pub fn prepare(memory: &Path, disk: &Path, mode: u32) -> Result<CheckpointStore, RuntimeError> {
        make_dir(memory, mode)?;
        // Before any mount: what a daemon without the tmpfs left would be hidden under it.
        clear(memory).map_err(|e| RuntimeError::io("empty the checkpoints dir", e))?;
        if !is_tmpfs(memory) {
            let options = format!("mode={mode:o}");
            let mounted = nix::mount::mount(
                Some("tmpfs"),
                memory,
                Some("tmpfs"),
                nix::mount::MsFlags::MS_NOSUID
                    | nix::mount::MsFlags::MS_NODEV
                    | nix::mount::MsFlags::MS_NOEXEC,
                Some(options.as_str()),
            );
            if let Err(e) = mounted {
                tracing::warn!(dir = %memory.display(), error = %e, "cannot mount a tmpfs for warm-fork checkpoints; they are written to disk");
            }
        }
        let on_tmpfs = is_tmpfs(memory);
        let _ = std::fs::remove_dir_all(disk);
        make_dir(disk, mode)?;
        let run = if on_tmpfs && !is_tmpfs(Path::new("/run")) {
            let run = memory.join(RUN_DIR);
            make_dir(&run, 0o700)?;
            PrivateRun::new(&run)
        } else {
            None
        };
        Ok(CheckpointStore {
            memory: memory.to_path_buf(),
            disk: disk.to_path_buf(),
            on_tmpfs,
            run,
        })
    }

    /// The dir to make the images of a sandbox using `memory_bytes` in: the tmpfs when it has
    /// room for them twice over and the host has four times them available, disk otherwise.
    pub fn dir_for(&self, memory_bytes: u64) -> &Path {
        let fits = self.on_tmpfs && {
            let room = nix::sys::statvfs::statvfs(&self.memory)
                .map(|s| s.blocks_available() * s.fragment_size())
                .unwrap_or(0);
            let need = memory_bytes.saturating_mul(2);
            need <= room && need.saturating_mul(2) <= available_memory()
        };
        if fits { &self.memory } else { &self.disk }
    }

    /// Whether `path` is one of this store's checkpoint dirs (or under one).
    pub fn holds(&self, path: &Path) -> bool {
        (path.starts_with(&self.memory) && !path.starts_with(self.memory.join(RUN_DIR)))
            || path.starts_with(&self.disk)
    }

    /// Whether a previous daemon left checkpoint images behind.
    pub fn has_leftovers(memory: &Path, disk: &Path) -> bool {
        let non_empty = |dir: &Path| {
            std::fs::read_dir(dir).is_ok_and(|d| {
                d.flatten()
                    .any(|e| e.file_name() != std::ffi::OsStr::new(RUN_DIR))
            })
        };
        non_empty(memory) || non_empty(disk)
    }

    /// What a runtime command that runs CRIU enters before its exec, where the host's `/run`
    /// is no tmpfs.
    pub fn private_run(&self) -> Option<&PrivateRun> {
        self.run.as_ref()
    }
}

/// MemAvailable of /proc/meminfo, in bytes (0 when it cannot be read).
fn available_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// A mount namespace of its own for a process that runs CRIU, whose `/run` is a dir of sbx's
/// tmpfs, so that CRIU keeps its kernel probe there. Nothing else changes for it: the sandbox
/// dirs and runtime root are sbx's data dir, never under `/run`.
#[derive(Debug, Clone)]
pub struct PrivateRun {
    dir: CString,
}

impl PrivateRun {
    /// For the dir `dir`; none when `dir` lies under `/run` itself.
    pub fn new(dir: &Path) -> Option<PrivateRun> {
        if dir.starts_with("/run") {
            return None;
        }
        CString::new(dir.as_os_str().as_bytes())
            .ok()
            .map(|dir| PrivateRun { dir })
    }

    /// The dir that becomes `/run` (a restoring shim's `--criu-run`).
    pub fn dir(&self) -> &Path {
        Path::new(std::ffi::OsStr::from_bytes(self.dir.as_bytes()))
    }

    /// Enters the namespace: to be called between fork and exec (raw system calls only, no
    /// allocation). Mounts made in it do not reach the host's (`/` is made a slave first).
    pub fn enter(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on NUL-terminated strings that outlive them.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                ) != 0
                || libc::mount(
                    self.dir.as_ptr(),
                    c"/run".as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Gives the user namespace that CRIU restores from the images in `dir` the mapping `map`:
/// CRIU records the source's uid and gid maps (`userns-*.img`) and writes them back at the
/// restore, which would put a fork in its source's host id range. Each extent `first → lower`
/// becomes `first → map.host_id(first)` (sbx's maps are one extent from container id 0).
/// Returns how many images were rewritten.
pub fn remap_userns_images(
    dir: &Path,
    map: crate::runtime::idmap::IdMap,
) -> std::io::Result<usize> {
    let mut rewritten = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !(name.starts_with("userns-") && name.ends_with(".img")) {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let remapped = userns_image::remap(&bytes, map.host_base).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        std::fs::write(&path, remapped)?;
        rewritten += 1;
    }
    Ok(rewritten)
}

/// CRIU's `userns-*.img`: two magic words, then entries (a little-endian u32 length and a
/// protobuf `userns_entry { repeated uid_gid_extent uid_map = 1; repeated gid_map = 2; }`,
/// `uid_gid_extent { uint32 first = 1; uint32 lower_first = 2; uint32 count = 3; }`).
mod userns_image {
    fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *bytes.get(*at).ok_or("truncated varint")?;
            *at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn put_varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    /// One protobuf field: its number, wire type and raw payload (varint value or bytes).
    enum Field<'a> {
        Varint(u32, u64),
        Bytes(u32, &'a [u8]),
        Fixed(u32, u8, &'a [u8]),
    }

    fn fields(msg: &[u8]) -> Result<Vec<Field<'_>>, String> {
        let mut at = 0;
        let mut out = Vec::new();
        while at < msg.len() {
            let key = varint(msg, &mut at)?;
            let (number, wire) = ((key >> 3) as u32, (key & 7) as u8);
            match wire {
                0 => out.push(Field::Varint(number, varint(msg, &mut at)?)),
                2 => {
                    let len = varint(msg, &mut at)? as usize;
                    let body = msg.get(at..at + len).ok_or("truncated field")?;
                    at += len;
                    out.push(Field::Bytes(number, body));
                }
                1 | 5 => {
                    let len = if wire == 1 { 8 } else { 4 };
                    let body = msg.get(at..at + len).ok_or("truncated field")?;
                    at += len;
                    out.push(Field::Fixed(number, wire, body));
                }
                other => return Err(format!("unexpected wire type {other}")),
            }
        }
        Ok(out)
    }

    fn encode(fields: &[Field<'_>], out: &mut Vec<u8>) {
        for field in fields {
            match field {
                Field::Varint(n, v) => {
                    put_varint(out, u64::from(*n) << 3);
                    put_varint(out, *v);
                }
                Field::Bytes(n, b) => {
                    put_varint(out, (u64::from(*n) << 3) | 2);
                    put_varint(out, b.len() as u64);
                    out.extend_from_slice(b);
                }
                Field::Fixed(n, wire, b) => {
                    put_varint(out, (u64::from(*n) << 3) | u64::from(*wire));
                    out.extend_from_slice(b);
                }
            }
        }
    }

    fn remap_extent(extent: &[u8], host_base: u32) -> Result<Vec<u8>, String> {
        let mut parsed = fields(extent)?;
        let first = parsed
            .iter()
            .find_map(|f| match f {
                Field::Varint(1, v) => Some(*v),
                _ => None,
            })
            .unwrap_or(0);
        let lower = u64::from(host_base) + first;
        if lower > u64::from(u32::MAX) {
            return Err(format!(
                "extent from {first} does not fit above {host_base}"
            ));
        }
        for field in parsed.iter_mut() {
            if let Field::Varint(2, v) = field {
                *v = lower;
            }
        }
        let mut out = Vec::new();
        encode(&parsed, &mut out);
        Ok(out)
    }

    fn remap_entry(entry: &[u8], host_base: u32) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        for field in fields(entry)? {
            match field {
                Field::Bytes(n @ (1 | 2), extent) => {
                    let extent = remap_extent(extent, host_base)?;
                    encode(&[Field::Bytes(n, &extent)], &mut out);
                }
                other => encode(&[other], &mut out),
            }
        }
        Ok(out)
    }

    /// The image with every extent's lower id rebased on `host_base`.
    pub(super) fn remap(image: &[u8], host_base: u32) -> Result<Vec<u8>, String> {
        let magic = image.get(..8).ok_or("no image header")?;
        let mut out = magic.to_vec();
        let mut at = 8;
        while at < image.len() {
            let len = image.get(at..at + 4).ok_or("truncated entry size")?;
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            at += 4;
            let entry = image.get(at..at + len).ok_or("truncated entry")?;
            at += len;
            let entry = remap_entry(entry, host_base)?;
            out.extend_from_slice(&(entry.len() as u32).to_le_bytes());
            out.extend_from_slice(&entry);
        }
        Ok(out)
    }

    #[cfg(test)]
    pub(super) fn extents(image: &[u8]) -> Vec<(u32, u64, u64, u64)> {
        let mut out = Vec::new();
        let mut at = 8;
        while at < image.len() {
            let len = u32::from_le_bytes(image[at..at + 4].try_into().unwrap()) as usize;
            at += 4;
            for field in fields(&image[at..at + len]).unwrap() {
                if let Field::Bytes(n, extent) = field {
                    let mut v = [0u64; 3];
                    for f in fields(extent).unwrap() {
                        if let Field::Varint(k @ 1..=3, x) = f {
                            v[k as usize - 1] = x;
                        }
                    }
                    out.push((n, v[0], v[1], v[2]));
                }
            }
            at += len;
        }
        out
    }

    #[cfg(test)]
    pub(super) fn image(maps: &[(u32, u64, u64, u64)]) -> Vec<u8> {
        let mut entry = Vec::new();
        for (n, first, lower, count) in maps {
            let mut extent = Vec::new();
            encode(
                &[
                    Field::Varint(1, *first),
                    Field::Varint(2, *lower),
                    Field::Varint(3, *count),
                ],
                &mut extent,
            );
            encode(&[Field::Bytes(*n, &extent)], &mut entry);
        }
        let mut out = vec![0x19, 0x43, 0x56, 0x54, 0x06, 0x49, 0x47, 0x55];
        out.extend_from_slice(&(entry.len() as u32).to_le_bytes());
        out.extend_from_slice(&entry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userns_images_are_rebased_on_the_new_range() {
        let image = userns_image::image(&[(1, 0, 100_000, 65536), (2, 0, 100_000, 65536)]);
        let out = userns_image::remap(&image, 231_072).unwrap();
        assert_eq!(&out[..8], &image[..8], "the magic is kept");
        assert_eq!(
            userns_image::extents(&out),
            vec![(1, 0, 231_072, 65536), (2, 0, 231_072, 65536)]
        );
        assert!(userns_image::remap(&image[..image.len() - 1], 231_072).is_err());
    }

    #[test]
    fn a_run_dir_under_run_is_refused() {
        assert!(PrivateRun::new(Path::new("/run/sbx/.criu-run")).is_none());
        assert!(PrivateRun::new(Path::new("/var/lib/sbx/checkpoints/.criu-run")).is_some());
    }

    /// As root: the store mounts its tmpfs, sends a sandbox too big for it to disk, and
    /// knows its own dirs; the tmpfs is unmounted again.
    #[test]
    fn images_go_to_the_tmpfs_unless_they_would_not_fit() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (memory, disk) = (dir.path().join("checkpoints"), dir.path().join("disk"));
        std::fs::create_dir_all(memory.join("left-by-a-crash")).unwrap();
        assert!(CheckpointStore::has_leftovers(&memory, &disk));
        let store = CheckpointStore::prepare(&memory, &disk, 0o711).unwrap();
        let mounted = is_tmpfs(&memory);
        let checks = std::panic::catch_unwind(|| {
            assert!(mounted, "no tmpfs at {}", memory.display());
            assert!(!CheckpointStore::has_leftovers(&memory, &disk));
            assert_eq!(store.dir_for(50 << 20), memory.as_path());
            assert_eq!(store.dir_for(u64::MAX / 4), disk.as_path());
            assert!(store.holds(&memory.join("0123")) && store.holds(&disk.join("0123")));
            assert!(!store.holds(&memory.join(RUN_DIR)) && !store.holds(dir.path()));
            assert_eq!(
                store.private_run().is_some(),
                !is_tmpfs(Path::new("/run")),
                "CRIU's /run is needed where /run is no tmpfs"
            );
        });
        if mounted {
            nix::mount::umount2(&memory, nix::mount::MntFlags::MNT_DETACH).unwrap();
        }
        checks.unwrap();
    }
}
