//! Stopping a sandbox and removing what it made: processes, mounts, cgroups, files and its
//! network.
use super::*;

impl Sbxd {
    /// Stops the sandbox and removes its processes, mounts, cgroups and network; with
    /// `remove_files`, its directory too. Idempotent.
    pub async fn teardown(
        &self,
        spec: &SandboxSpec,
        remove_files: bool,
    ) -> Result<(), RuntimeError> {
        // Killing the container and removing its network are independent; the kernel's veth
        // removal is slow, so do both at once.
        let (stopped, detached) = tokio::join!(
            self.teardown_except_network(spec, remove_files),
            self.detach_network(spec)
        );
        stopped?;
        detached
    }

    /// Removes the sandbox's network (veth, netns, nftables rules). Idempotent.
    pub async fn detach_network(&self, spec: &SandboxSpec) -> Result<(), RuntimeError> {
        Ok(self.network().await?.detach(&spec.id, spec.slot).await?)
    }

    /// Whether sandbox network pieces may be left on the host side (to clean even when no
    /// sandbox record remains): see [`network::leftovers_exist`].
    pub async fn has_network_leftovers(&self) -> bool {
        network::leftovers_exist(&self.network_config).await
    }

    /// Stops the sandbox and removes its processes, mounts and cgroups (and with
    /// `remove_files` its directory), leaving its network for [`Sbxd::detach_network`].
    pub async fn teardown_except_network(
        &self,
        spec: &SandboxSpec,
        remove_files: bool,
    ) -> Result<(), RuntimeError> {
        self.teardown_id(&spec.id, remove_files).await
    }

    /// [`Sbxd::teardown_except_network`] by id.
    pub(super) async fn teardown_id(
        &self,
        id: &str,
        remove_files: bool,
    ) -> Result<(), RuntimeError> {
        // Frozen processes cannot die: thaw first (a file read, not a runtime call).
        if cgroup::is_frozen(&cgroup::cgroups_path(id)) {
            let _ = self.resume(id).await;
        }
        // Kill precisely and wait for the exits (pidfd), then let the runtime remove a stopped
        // container: its forced delete checks for the exit in 100 ms steps.
        let cgroup_path = cgroup::cgroups_path(id);
        let stopped = process::kill_members(|| cgroup::procs(&cgroup_path), 3).await;
        if !stopped || self.runc.delete(id, false).await.is_err() {
            self.runc.delete(id, true).await?;
        }
        if let Some(shim) = self.shim_pid(id) {
            let _ = tokio::time::timeout(Duration::from_secs(5), process::wait_exit(shim)).await;
            if process::alive(shim) {
                process::kill_tree(shim);
            }
        }
        let rootfs = RootFs::under(&self.dir(id));
        tokio::task::spawn_blocking(move || rootfs.unmount())
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))??;
        cgroup::remove_dirs(&cgroup::cgroups_path(id)).await;
        if remove_files {
            let dir = self.dir(id);
            for mount in overlay::mounts_under(&dir) {
                let _ = nix::mount::umount2(&mount, nix::mount::MntFlags::MNT_DETACH);
            }
            match tokio::fs::remove_dir_all(&dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(RuntimeError::io("remove sandbox files", e)),
            }
        }
        Ok(())
    }
}
