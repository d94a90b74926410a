//! Snapshot layers of sbxd: a sandbox's writable layer copied into a read-only layer while it
//! is frozen, layers merged (flattened) and removed.
use super::*;

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
            let view = self.dir(&spec.id).join(".view-upper");
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
                idmap::remove_view(&view);
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
