//! Flattening of snapshot layer chains: diff layers in overlayfs format (whiteouts as 0/0
//! character devices, opaque directories by the `trusted.overlay.opaque` xattr) merged into
//! one equivalent diff layer, so that repeated forks do not stack layers without bound.
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

/// Whether `path` is an overlay whiteout (a 0/0 character device).
pub fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Whether the directory at `path` is opaque (hides everything below it).
pub fn is_opaque(path: &Path) -> bool {
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let Ok(name) = CString::new(OPAQUE_XATTR) else {
        return false;
    };
    let mut value = [0u8; 4];
    // SAFETY: both strings are NUL-terminated and live for the call; the buffer is ours.
    let n = unsafe {
        libc::lgetxattr(
            cpath.as_ptr(),
            name.as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        )
    };
    n == 1 && value[0] == b'y'
}

fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// `cp -a` of one entry (file, link, device, or a whole tree) to a path that does not exist:
/// owners, modes, hard links, xattrs (opaque dirs) and whiteouts kept; reflinks where the
/// filesystem has them.
pub fn copy_entry(from: &Path, to: &Path) -> io::Result<()> {
    let mut cp = Command::new("cp");
    cp.arg("-a")
        .arg("--reflink=auto")
        .arg("--no-target-directory")
        .arg(from)
        .arg(to)
        .stdin(Stdio::null());
    // A copy must not outlive a daemon that dies: the next start removes half-made copies,
    // and a `cp` still writing would make them again.
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cp.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
    let output = cp.output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "cp -a {}: {}",
            from.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// Applies diff layer `upper` onto the merged diff in `merged`, in place.
fn apply(upper: &Path, merged: &Path) -> io::Result<()> {
    for entry in fs::read_dir(upper)? {
        let entry = entry?;
        let from = entry.path();
        let to = merged.join(entry.file_name());
        let meta = fs::symlink_metadata(&from)?;
        let below = fs::symlink_metadata(&to).ok();
        let merge_into_dir =
            meta.is_dir() && !is_opaque(&from) && below.as_ref().is_some_and(|b| b.is_dir());
        if merge_into_dir {
            // A directory present in both: take the upper's metadata, merge its entries.
            fs::set_permissions(&to, fs::Permissions::from_mode(meta.mode()))?;
            nix::unistd::chown(
                &to,
                Some(nix::unistd::Uid::from_raw(meta.uid())),
                Some(nix::unistd::Gid::from_raw(meta.gid())),
            )
            .map_err(io::Error::from)?;
            apply(&from, &to)?;
        } else {
            // Whiteouts, opaque dirs, files, links: the upper entry replaces what was below
            // (a whiteout is kept: it may hide a file of the image's layers).
            remove_any(&to)?;
            copy_entry(&from, &to)?;
        }
    }
    Ok(())
}

/// Merges `layers` (lowest first) into a new diff layer at `target`, which must not exist.
pub fn merge_layers(layers: &[impl AsRef<Path>], target: &Path) -> io::Result<()> {
    let Some((first, rest)) = layers.split_first() else {
        return fs::create_dir_all(target);
    };
    copy_entry(first.as_ref(), target)?;
    for layer in rest {
        apply(layer.as_ref(), target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whiteout(path: &Path) {
        nix::sys::stat::mknod(
            path,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap();
    }

    fn opaque(path: &Path) {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        let name = CString::new(OPAQUE_XATTR).unwrap();
        // SAFETY: valid NUL-terminated strings and a 1-byte value.
        let rc = unsafe { libc::lsetxattr(c.as_ptr(), name.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
        assert_eq!(rc, 0, "setxattr (needs root)");
    }

    #[test]
    fn merged_layers_behave_like_the_stack() {
        let dir = tempfile::tempdir().unwrap();
        let (l1, l2, l3) = (
            dir.path().join("l1"),
            dir.path().join("l2"),
            dir.path().join("l3"),
        );
        for d in [&l1, &l2, &l3] {
            fs::create_dir_all(d).unwrap();
        }
        // l1: files and a dir.
        fs::write(l1.join("keep"), "1").unwrap();
        fs::write(l1.join("changed"), "old").unwrap();
        fs::write(l1.join("deleted"), "x").unwrap();
        fs::create_dir_all(l1.join("d/sub")).unwrap();
        fs::write(l1.join("d/a"), "a").unwrap();
        fs::create_dir_all(l1.join("o")).unwrap();
        fs::write(l1.join("o/old"), "o").unwrap();
        // l2: change a file, delete one, add into d, replace o opaquely, hide an image file.
        fs::write(l2.join("changed"), "new").unwrap();
        whiteout(&l2.join("deleted"));
        whiteout(&l2.join("from-image"));
        fs::create_dir_all(l2.join("d")).unwrap();
        fs::write(l2.join("d/b"), "b").unwrap();
        fs::create_dir_all(l2.join("o")).unwrap();
        opaque(&l2.join("o"));
        fs::write(l2.join("o/new"), "n").unwrap();
        // l3: re-create a deleted file.
        fs::write(l3.join("deleted"), "back").unwrap();

        let target = dir.path().join("flat");
        merge_layers(&[&l1, &l2, &l3], &target).unwrap();
        assert_eq!(fs::read_to_string(target.join("keep")).unwrap(), "1");
        assert_eq!(fs::read_to_string(target.join("changed")).unwrap(), "new");
        assert_eq!(fs::read_to_string(target.join("deleted")).unwrap(), "back");
        assert!(is_whiteout(
            &fs::symlink_metadata(target.join("from-image")).unwrap()
        ));
        assert_eq!(fs::read_to_string(target.join("d/a")).unwrap(), "a");
        assert_eq!(fs::read_to_string(target.join("d/b")).unwrap(), "b");
        assert!(target.join("d/sub").is_dir());
        assert!(is_opaque(&target.join("o")));
        assert!(!target.join("o/old").exists());
        assert_eq!(fs::read_to_string(target.join("o/new")).unwrap(), "n");
        // The inputs are untouched.
        assert_eq!(fs::read_to_string(l1.join("changed")).unwrap(), "old");
    }
}
