//! Snapshot layers of sbxd: a sandbox's writable layer copied into a read-only layer while it
//! is frozen, layers merged (flattened) and removed.
use super::*;

/// Where, in a sandbox's dir, a snapshot mounts the view of its writable layer that shifts
/// the sandbox's ids back to container ids (detached when the copy is done, or at the next
/// start after a crash).
pub(super) const UPPER_VIEW: &str = ".view-upper";

impl Sbxd {
    /// Freezes the sandbox (unless it is paused already), flushes its writable layer to disk,
    /// copies it into a new read-only snapshot layer and thaws it again: a consistent copy of
    /// a running sandbox's files. Returns the layer id and its size on disk.
    pub async fn capture_layer(&self, spec: &SandboxSpec) -> Result<(String, u64), RuntimeError> {
        let id = spec.id.as_str();
        let cgroup_path = cgroup::cgroups_path(id);
        let freeze = !cgroup::is_frozen(&cgroup_path);
        if freeze {
            self.pause(id).await?;
        }
        let copied = self.copy_upper(spec).await;
        if freeze {
            if let Err(e) = self.resume(id).await {
                tracing::error!(sandbox = %id, error = %e, "thawing after a snapshot");
            }
        }
        copied
    }

    pub(super) async fn copy_upper(
        &self,
        spec: &SandboxSpec,
    ) -> Result<(String, u64), RuntimeError> {
        let upper = RootFs::under(&self.dir(&spec.id)).upper;
        let layer = format!("{:016x}", rand_u64());
        let tmp = self.layers_dir.join(format!(".tmp-{layer}"));
        let target = self.layer_dir(&layer);
        {
            let upper = upper.clone();
            tokio::task::spawn_blocking(move || {
                let dir = std::fs::File::open(&upper)?;
                // SAFETY: syncfs takes a valid open fd, held by `dir` for the call.
                let rc = unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
            .map_err(|e| RuntimeError::io("flush the writable layer", e))?;
        }
        // Layers hold container ids: the sandbox's files are read through a view of its
        // writable layer that shifts its host range back to 0, so that the copy is owned as
        // the files are inside, whatever range a restore or fork of it gets.
        let copied = {
            let (upper, tmp) = (upper.clone(), tmp.clone());
            let view = self.dir(&spec.id).join(UPPER_VIEW);
            let (map, namespaces) = (self.id_map(spec), self.namespaces.clone());
            tokio::task::spawn_blocking(move || {
                let Some(map) = map else {
                    return crate::runtime::flatten::copy_entry(&upper, &tmp)
                        .map_err(|e| RuntimeError::io("copy the writable layer", e));
                };
                let copied = namespaces
                    .mount_view(&upper, &view, map, true)
                    .and_then(|()| {
                        crate::runtime::flatten::copy_entry(&view, &tmp)
                            .map_err(|e| RuntimeError::io("copy the writable layer", e))
                    });
                idmap::detach_view(&view);
                copied
            })
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
        };
        if let Err(e) = copied {
            let _ = tokio::fs::remove_dir_all(&tmp).await;
            return Err(e);
        }
        tokio::fs::rename(&tmp, &target)
            .await
            .map_err(|e| RuntimeError::io("store the snapshot layer", e))?;
        let size = {
            let target = target.clone();
            tokio::task::spawn_blocking(move || overlay::disk_usage(&target))
                .await
                .unwrap_or(0)
        };
        Ok((layer, size))
    }

    /// Merges snapshot layers (lowest first) into one new equivalent layer; returns its id
    /// and size.
    pub async fn flatten_layers(&self, layers: &[String]) -> Result<(String, u64), RuntimeError> {
        let dirs: Vec<PathBuf> = layers.iter().map(|l| self.layer_dir(l)).collect();
        let layer = format!("{:016x}", rand_u64());
        let tmp = self.layers_dir.join(format!(".tmp-{layer}"));
        let target = self.layer_dir(&layer);
        let merged = {
            let tmp = tmp.clone();
            tokio::task::spawn_blocking(move || {
                crate::runtime::flatten::merge_layers(&dirs, &tmp)?;
                Ok::<u64, std::io::Error>(overlay::disk_usage(&tmp))
            })
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
        };
        let size = match merged {
            Ok(size) => size,
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&tmp).await;
                return Err(RuntimeError::io("flatten snapshot layers", e));
            }
        };
        tokio::fs::rename(&tmp, &target)
            .await
            .map_err(|e| RuntimeError::io("store the flattened layer", e))?;
        Ok((layer, size))
    }

    /// Removes snapshot layers that nothing references any more.
    pub async fn remove_layers(&self, layers: &[String]) {
        for layer in layers {
            if let Err(e) = tokio::fs::remove_dir_all(self.layer_dir(layer)).await {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(%layer, error = %e, "removing a snapshot layer");
                }
            }
        }
    }

    /// The directory of a snapshot layer.
    pub fn layer_dir(&self, layer: &str) -> PathBuf {
        self.layers_dir.join(layer)
    }

    /// Where every snapshot layer lives.
    pub fn layers_dir(&self) -> &Path {
        &self.layers_dir
    }
}

/// Marks (next to it) a snapshot layer store whose layers hold container ids.
const CONTAINER_IDS_MARKER: &str = "snapshot-layers.container-ids";

/// Snapshot layers made by a daemon from before per-sandbox id ranges hold the host ids of
/// the one range every sandbox shared (`base..base+65536`): shifted once to container ids,
/// as layers are stored now, so that restores and forks of old snapshots keep their owners.
/// Ids outside that range are left as they are. Done before any layer is read; a crash
/// midway does it again (with a base of 65536 or more, the default, a shifted id is below
/// it and never shifted twice).
pub(super) fn migrate_layers(layers_dir: &Path, base: u32) -> Result<(), RuntimeError> {
    let marker = layers_dir.with_file_name(CONTAINER_IDS_MARKER);
    if marker.exists() {
        return Ok(());
    }
    let fail =
        |e: std::io::Error| RuntimeError::io("shift old snapshot layers to container ids", e);
    let mut shifted = 0usize;
    for entry in std::fs::read_dir(layers_dir).map_err(fail)? {
        let path = entry.map_err(fail)?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
        if !hidden {
            shifted += shift_tree(&path, base).map_err(fail)?;
        }
    }
    if shifted > 0 {
        tracing::info!(
            entries = shifted,
            "snapshot layers of an older sbx shifted to container ids"
        );
    }
    std::fs::write(&marker, b"").map_err(fail)
}

/// Shifts the owners in `base..base+65536` of everything under `root` (itself included) down
/// by `base`; returns how many entries changed.
fn shift_tree(root: &Path, base: u32) -> std::io::Result<usize> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let in_range = |id: u32| id >= base && id - base < idmap::ID_MAP_SIZE;
    let mut changed = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
        let (uid, gid) = (meta.uid(), meta.gid());
        if !in_range(uid) && !in_range(gid) {
            continue;
        }
        let shift = |id: u32| if in_range(id) { id - base } else { id };
        std::os::unix::fs::lchown(&path, Some(shift(uid)), Some(shift(gid)))?;
        // A chown clears set-user-ID and set-group-ID bits: they are put back.
        let mode = meta.mode() & 0o7777;
        if !meta.file_type().is_symlink() && mode & 0o6000 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        }
        changed += 1;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// As root: old layers' files owned by the shared range come back in container ids,
    /// their set-user-ID bit kept; other ids are left; the second start does nothing.
    #[test]
    fn old_layers_are_shifted_to_container_ids_once() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("snapshot-layers");
        let layer = dir.join("0123456789abcdef");
        std::fs::create_dir_all(layer.join("d")).unwrap();
        let file = layer.join("d/f");
        std::fs::write(&file, "x").unwrap();
        std::os::unix::fs::lchown(&layer, Some(100_000), Some(100_000)).unwrap();
        std::os::unix::fs::lchown(&file, Some(101_000), Some(100_005)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let outside = layer.join("outside");
        std::fs::write(&outside, "y").unwrap();
        std::os::unix::fs::lchown(&outside, Some(42), Some(42)).unwrap();
        migrate_layers(&dir, 100_000).unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o7777),
            (1000, 5, 0o4755)
        );
        let meta = std::fs::metadata(&layer).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (0, 0));
        assert_eq!(std::fs::metadata(&outside).unwrap().uid(), 42);
        // Marked: a file of the shared range appearing now is not shifted again.
        std::os::unix::fs::lchown(&outside, Some(100_001), None).unwrap();
        migrate_layers(&dir, 100_000).unwrap();
        assert_eq!(std::fs::metadata(&outside).unwrap().uid(), 100_001);
    }
}
