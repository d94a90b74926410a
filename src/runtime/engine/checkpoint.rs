//! Warm forks: a sandbox's processes checkpointed with CRIU (left running) for a clone to be
//! restored from; whether CRIU can do it here.
use super::*;

/// Checks that `criu` runs and is version 4 or later (3.x fails on current kernels).
pub(super) async fn check_criu(criu: &Path) -> Result<(), String> {
    let output = tokio::process::Command::new(criu)
        .arg("--version")
        .output()
        .await
        .map_err(|e| {
            format!(
                "warm fork needs CRIU 4 and `{}` cannot run ({e}); install it with \
                 scripts/install-criu or set [runtime] criu",
                criu.display()
            )
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 4 {
        return Err(format!(
            "warm fork needs CRIU 4 or later; `{}` is version {:?}",
            criu.display(),
            version
        ));
    }
    Ok(())
}

/// Sets the hostname in the UTS namespace of `pid` (a restored sandbox comes back with its
/// source's).
pub(super) async fn set_hostname(pid: i32, name: &str) -> Result<(), RuntimeError> {
    let name = name.to_string();
    let set = std::thread::spawn(move || -> std::io::Result<()> {
        let uts = std::fs::File::open(format!("/proc/{pid}/ns/uts"))?;
        // The namespace switch is this thread's alone, and the thread ends right after.
        nix::sched::setns(&uts, nix::sched::CloneFlags::CLONE_NEWUTS)?;
        nix::unistd::sethostname(&name)?;
        Ok(())
    });
    tokio::task::spawn_blocking(move || set.join())
        .await
        .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
        .map_err(|_| RuntimeError::Unavailable("setting the hostname panicked".into()))?
        .map_err(|e| RuntimeError::io("set the restored sandbox's hostname", e))
}

impl Sbxd {
    /// Why a warm fork of the sandbox `spec` cannot be done here, if it cannot: CRIU 4 must
    /// run, the runtime must be runc, and the sandbox must have its own user namespace.
    pub async fn warm_fork_unsupported(&self, spec: &SandboxSpec) -> Option<String> {
        if self.runc.kind() != RuntimeKind::Runc {
            return Some(format!(
                "warm fork needs runc with CRIU; this daemon runs sandboxes with {}",
                self.runc.kind().binary()
            ));
        }
        let config = tokio::fs::read(self.dir(&spec.id).join("bundle").join("config.json"))
            .await
            .ok()
            .and_then(|b| serde_json::from_slice::<oci_spec::runtime::Spec>(&b).ok());
        let has_userns = config
            .as_ref()
            .and_then(|c| c.linux().as_ref())
            .and_then(|l| l.namespaces().clone())
            .is_some_and(|ns| {
                ns.iter().any(|n| {
                    n.typ() == oci_spec::runtime::LinuxNamespaceType::User && n.path().is_none()
                })
            });
        if !has_userns {
            return Some(
                "warm fork needs the sandbox to run in its own user namespace \
                 ([runtime] userNamespace = true when it was created)"
                    .to_string(),
            );
        }
        let criu = self.config.criu.clone();
        self.criu_check
            .get_or_init(|| async move { check_criu(&criu).await })
            .await
            .clone()
            .err()
    }

    /// Warm-fork capture: with the sandbox frozen, dumps its processes with CRIU into a new
    /// checkpoint dir (leaving them running) and copies its writable layer, so memory and
    /// files are of the same instant; thaws it. Returns the checkpoint dir, layer id and size.
    pub async fn capture_warm(
        &self,
        spec: &SandboxSpec,
    ) -> Result<(PathBuf, String, u64), RuntimeError> {
        let id = spec.id.as_str();
        let cgroup_path = cgroup::cgroups_path(id);
        let memory = cgroup::stats(&cgroup_path).map_or(0, |s| s.memory_working_set);
        let images = self
            .checkpoints
            .dir_for(memory)
            .join(format!("{:016x}", rand_u64()));
        mkdir_private(&images)?;
        // Given to the clone's range at its restore ([`open_to_restored_task`]).
        std::fs::set_permissions(&images, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| RuntimeError::io("chmod the checkpoint dir", e))?;
        let freeze = !cgroup::is_frozen(&cgroup_path);
        if freeze {
            self.pause(id).await?;
        }
        let frozen = Instant::now();
        // Both read what the freeze holds still: the processes, and the writable layer.
        let (dumped, copied) = tokio::join!(
            self.runc.checkpoint(
                id,
                &self.config.criu,
                &images,
                self.checkpoints.private_run().cloned(),
            ),
            self.copy_upper(spec)
        );
        if freeze {
            if let Err(e) = self.resume(id).await {
                tracing::error!(sandbox = %id, error = %e, "thawing after a warm-fork checkpoint");
            }
            tracing::info!(
                sandbox = %id,
                frozen_ms = frozen.elapsed().as_secs_f64() * 1000.0,
                memory_bytes = memory,
                images = %images.display(),
                "warm-fork checkpoint: the source was frozen"
            );
        }
        let captured = match (dumped, copied) {
            (Ok(()), copied) => copied,
            (Err(e), copied) => {
                if let Ok((layer, _)) = copied {
                    self.remove_layers(&[layer]).await;
                }
                Err(e)
            }
        };
        match captured {
            Ok((layer, size)) => Ok((images, layer, size)),
            Err(e) => {
                self.remove_checkpoint(&images).await;
                Err(e)
            }
        }
    }

    /// Removes a checkpoint dir made by [`Sbxd::capture_warm`].
    pub async fn remove_checkpoint(&self, images: &Path) {
        if self.checkpoints.holds(images) {
            let _ = tokio::fs::remove_dir_all(images).await;
        }
    }
}

/// Prepares the CRIU images in `images` for a restore as a sandbox mapped by `map`: the user
/// namespace CRIU recreates gets `map` (CRIU would restore the source's, in the source's
/// range), and the dir becomes readable by the clone's root. CRIU's restored task reads some
/// images from inside the new user namespace: before CRIU has written its id maps (still
/// host root, but with no capability over unmapped files: the owner bits) and after (the
/// clone's root: the group bits). Owner root, group the clone's root, 0750, serves both; the
/// images hold the source's memory, so nobody else gets in. (Owned by the sandbox's root
/// alone, a restore failed now and then with "Unable to open timens-0.img: Permission
/// denied", when the task read it before the maps.)
pub(super) fn open_to_restored_task(images: &Path, map: IdMap) -> Result<(), RuntimeError> {
    crate::runtime::criu::remap_userns_images(images, map)
        .map_err(|e| RuntimeError::io("give the checkpoint the clone's id range", e))?;
    nix::unistd::chown(
        images,
        None,
        Some(nix::unistd::Gid::from_raw(map.host_id(0))),
    )
    .map_err(|e| RuntimeError::io("chown the checkpoint dir", e.into()))?;
    std::fs::set_permissions(images, std::os::unix::fs::PermissionsExt::from_mode(0o750))
        .map_err(|e| RuntimeError::io("chmod the checkpoint dir", e))
}

/// Waits for the checkpoints and restores that a daemon killed mid-warm-fork left running
/// (`runc checkpoint` and its CRIU outlive it; a clone's shim goes on restoring) before the
/// new daemon removes their images and looks at their sandboxes: CRIU leaves a sandbox
/// frozen, as it found it, when a dump ends, so a thaw made meanwhile would be undone (the
/// sandbox then recorded Running while frozen), and a restore recreates its work dir. Killed
/// after `patience`.
pub(super) async fn wait_for_orphaned_checkpoints(runc_root: &Path, patience: Duration) {
    let started = std::time::Instant::now();
    loop {
        let orphans = orphaned_checkpoints(runc_root);
        if orphans.is_empty() {
            return;
        }
        if started.elapsed() >= patience {
            for pid in orphans {
                tracing::warn!(
                    pid,
                    "killing a checkpoint or restore left by a previous sbx serve"
                );
                crate::runtime::process::kill_tree(pid);
            }
            return;
        }
        tracing::info!(
            count = orphans.len(),
            "waiting for checkpoints and restores left by a previous sbx serve"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// PIDs of `runc checkpoint` and `runc restore` processes on the runtime root `root` (the
/// root is this data dir's own: another daemon's are never touched).
fn orphaned_checkpoints(root: &Path) -> Vec<i32> {
    let root = root.to_string_lossy();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let has = |word: &[u8]| args.contains(&word);
            (has(b"checkpoint") || has(b"restore"))
                && args
                    .windows(2)
                    .any(|w| w[0] == b"--root" && w[1] == root.as_bytes())
        })
        .collect()
}
