//! The embedded default's sandboxes over time: provisioning (and the before_script), the
//! supervisor that restarts a main process that exits, reconciling the records with what runs
//! at start-up (orphans removed), and eviction over `ephemeral-storage`.
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::runtime::engine::SandboxSpec;
use crate::runtime::process;
use crate::shared::models::sandbox::SandboxStatus;

use super::sandboxes::*;

impl LocalSandboxes {
    /// Brings a sandbox from nothing to Running (and Ready after its before_script), or to
    /// Failed with the reason. Caller holds the sandbox's lock.
    pub(super) fn provision<'a>(self: &'a Arc<Self>, spec: &'a SandboxSpec) -> BoxFuture<'a, ()> {
        self.provision_from(spec, None)
    }

    /// [`LocalSandboxes::provision`]; with `checkpoint`, restoring the processes from those
    /// CRIU images (warm fork).
    pub(super) fn provision_from<'a>(
        self: &'a Arc<Self>,
        spec: &'a SandboxSpec,
        checkpoint: Option<&'a Path>,
    ) -> BoxFuture<'a, ()> {
        async move {
        let started = Instant::now();
        match self.sbxd.provision_from(spec, checkpoint).await {
            Ok(started_sandbox) => {
                let pid = started_sandbox.pid;
                let ready = spec.before_script.is_none();
                let _ = self
                    .update(spec, |r: &mut Record| {
                        r.status = SandboxStatus::Running;
                        r.pid = Some(pid);
                        r.ready = ready;
                        r.error_message.clear();
                    })
                    .await;
                tracing::info!(sandbox = %spec.id, pid, elapsed_ms = started.elapsed().as_millis() as u64, "sandbox started");
                self.clone().supervise(spec.clone(), pid);
                if let Some(script) = spec.before_script.as_deref() {
                    self.run_before_script(spec, script).await;
                }
            }
            Err(e) => {
                tracing::warn!(sandbox = %spec.id, error = %e, "sandbox failed to start");
                let message = format!("sandbox failed to start: {e}");
                let _ = self
                    .update(spec, |r: &mut Record| {
                        r.status = SandboxStatus::Failed;
                        r.ready = false;
                        r.pid = None;
                        r.error_message = message;
                    })
                    .await;
            }
        }
            }
        .boxed()
    }

    pub(super) fn run_before_script<'a>(
        self: &'a Arc<Self>,
        spec: &'a SandboxSpec,
        script: &'a str,
    ) -> BoxFuture<'a, ()> {
        async move {
            let timeout = Duration::from_secs(self.sbxd.config().max_exec_seconds);
            let result = self.sbxd.exec(&spec.id, script, timeout).await;
            let failure = match result {
                Ok(r) if r.exit_code == 0 => None,
                Ok(r) => {
                    let said: String = r
                        .stderr
                        .trim()
                        .chars()
                        .rev()
                        .take(400)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    Some(format!(
                        "before_script exited with code {}: {said}",
                        r.exit_code
                    ))
                }
                Err(e) => Some(format!("before_script could not run: {e}")),
            };
            match failure {
                None => {
                    let _ = self.update(spec, |r: &mut Record| r.ready = true).await;
                }
                Some(message) => {
                    self.stop_with(spec, SandboxStatus::Failed, message).await;
                }
            }
        }
        .boxed()
    }

    /// Stops the sandbox's runtime resources (files kept) and records a final state.
    pub(super) fn stop_with<'a>(
        &'a self,
        spec: &'a SandboxSpec,
        status: SandboxStatus,
        message: String,
    ) -> BoxFuture<'a, ()> {
        async move {
            let live = self.live(&spec.id, status);
            live.stopping.store(true, Ordering::SeqCst);
            if let Err(e) = self.sbxd.teardown(spec, false).await {
                tracing::warn!(sandbox = %spec.id, error = %e, "stopping sandbox");
            }
            let _ = self
                .update(spec, |r: &mut Record| {
                    r.status = status;
                    r.ready = false;
                    r.pid = None;
                    r.error_message = message;
                })
                .await;
        }
        .boxed()
    }

    /// Watches the main process; on an unintended exit, restarts it with back-off, or marks
    /// the sandbox Failed after [`MAX_QUICK_RESTARTS`] quick exits in a row.
    pub(super) fn supervise(self: Arc<Self>, spec: SandboxSpec, pid: i32) {
        // Taken now, not after the exit: a delete that ran meanwhile removed the entry (and
        // set `stopping` on this one); looking it up then would make a fresh entry and restart
        // a deleted sandbox.
        let live = self.live(&spec.id, SandboxStatus::Running);
        tokio::spawn(async move {
            let mut pid = pid;
            let mut quick_exits = 0u32;
            loop {
                let started = Instant::now();
                process::wait_exit(pid).await;
                // The exit's handling is a boxed future of its own: inline, its state (a
                // teardown, a restart) would size every waiting task, ~9 KiB per sandbox.
                match self
                    .after_exit(&spec, &live, started, &mut quick_exits)
                    .await
                {
                    Some(restarted) => pid = restarted,
                    None => return,
                }
            }
        });
    }

    /// What follows the exit of a supervised sandbox's main process (started at `started`):
    /// a restart (the new pid), or the end of supervision (None: deleted, or failed).
    fn after_exit<'a>(
        self: &'a Arc<Self>,
        spec: &'a SandboxSpec,
        live: &'a Live,
        started: Instant,
        quick_exits: &'a mut u32,
    ) -> BoxFuture<'a, Option<i32>> {
        async move {
            if live.stopping.load(Ordering::SeqCst) {
                return None;
            }
            let _guard = live.lock.lock().await;
            if live.stopping.load(Ordering::SeqCst) {
                return None;
            }
            let oom = self.sbxd.stats(&spec.id).is_some_and(|s| s.oom_kills > 0);
            // The shim writes the exit status right after the process ends.
            let mut exit = None;
            for _ in 0..50 {
                exit = self.sbxd.exit_record(&spec.id);
                if exit.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let code = exit.map(|e| e.exit_code).unwrap_or(-1);
            let reason = if oom {
                format!("main process was OOMKilled (exit code {code})")
            } else {
                format!("main process exited with code {code}")
            };
            *quick_exits = if started.elapsed() >= STABLE_AFTER {
                1
            } else {
                *quick_exits + 1
            };
            if *quick_exits > MAX_QUICK_RESTARTS {
                tracing::warn!(sandbox = %spec.id, %reason, "sandbox failed: crash loop");
                drop(_guard);
                self.stop_with(
                    spec,
                    SandboxStatus::Failed,
                    format!("{reason}; gave up after {MAX_QUICK_RESTARTS} restarts"),
                )
                .await;
                return None;
            }
            tracing::info!(sandbox = %spec.id, %reason, "restarting sandbox");
            let _ = self
                .update(spec, |r: &mut Record| {
                    r.ready = false;
                    r.error_message = reason.clone();
                })
                .await;
            if let Err(e) = self.sbxd.teardown(spec, false).await {
                tracing::warn!(sandbox = %spec.id, error = %e, "teardown before restart");
            }
            let backoff = Duration::from_millis(250 * 2u64.pow((*quick_exits).min(7)));
            tokio::time::sleep(backoff).await;
            match self.sbxd.provision(spec).await {
                Ok(started) => {
                    let _ = self
                        .update(spec, |r: &mut Record| {
                            r.status = SandboxStatus::Running;
                            r.ready = true;
                            r.pid = Some(started.pid);
                            r.restarts += 1;
                        })
                        .await;
                    Some(started.pid)
                }
                Err(e) => {
                    drop(_guard);
                    self.stop_with(
                        spec,
                        SandboxStatus::Failed,
                        format!("{reason}; restart failed: {e}"),
                    )
                    .await;
                    None
                }
            }
        }
        .boxed()
    }

    /// Makes the records and the host agree after a (re)start of the daemon.
    pub(super) async fn reconcile(self: &Arc<Self>) {
        let records: Vec<Record> = self.records.read().await.values().cloned().collect();
        // One runtime call for all containers, not one per sandbox; if it fails, ask per
        // sandbox rather than take every sandbox for dead.
        let listed = self.sbxd.runc().list().await;
        if let Err(e) = &listed {
            tracing::warn!(error = %e, "listing containers; asking for each sandbox instead");
        }
        let mut states: Option<HashMap<String, crate::runtime::runc::ContainerState>> = listed
            .ok()
            .map(|list| list.into_iter().map(|c| (c.id.clone(), c)).collect());
        for record in records {
            let spec = record.spec.clone();
            match record.status {
                SandboxStatus::Terminating => {
                    if let Err(e) = self.delete(&spec.namespace, &spec.name).await {
                        tracing::warn!(sandbox = %spec.id, error = %e, "finishing an interrupted delete");
                    }
                }
                SandboxStatus::Pending if self.unschedulable(&spec).is_some() => {}
                SandboxStatus::Pending => {
                    tracing::info!(sandbox = %spec.id, "resuming an interrupted create");
                    let _ = self.sbxd.teardown(&spec, false).await;
                    let live = self.live(&spec.id, SandboxStatus::Pending);
                    let manager = self.clone();
                    tokio::spawn(async move {
                        let _guard = live.lock.lock().await;
                        manager.provision(&spec).await;
                    });
                }
                SandboxStatus::Running | SandboxStatus::Paused => {
                    let state = match states.as_mut() {
                        Some(states) => states.remove(&spec.id),
                        None => self.sbxd.runc().state(&spec.id).await.ok().flatten(),
                    };
                    match state {
                        Some(s)
                            if s.status == "running"
                                && record.status == SandboxStatus::Running
                                && !record.ready
                                && spec.before_script.is_some() =>
                        {
                            // The before_script ran in the daemon that died: whether it
                            // finished is unknown, and running it twice may not be safe.
                            self.stop_with(
                                &spec,
                                SandboxStatus::Failed,
                                "before_script was interrupted by a restart of sbx serve; \
                                 delete the sandbox and create it again"
                                    .to_string(),
                            )
                            .await;
                        }
                        Some(s)
                            if (s.status == "running" || s.status == "paused")
                                && process::alive(s.pid) =>
                        {
                            let mut paused = s.status == "paused";
                            // Frozen but recorded Running: a snapshot's freeze that a crash
                            // interrupted. Thaw it; the user never paused it.
                            if paused && record.status == SandboxStatus::Running {
                                tracing::info!(sandbox = %spec.id, "thawing after an interrupted snapshot");
                                paused = self.sbxd.resume(&spec.id).await.is_err();
                            }
                            let _ = self
                                .update(&spec, |r: &mut Record| {
                                    r.pid = Some(s.pid);
                                    r.status = if paused {
                                        SandboxStatus::Paused
                                    } else {
                                        SandboxStatus::Running
                                    };
                                })
                                .await;
                            self.clone().supervise(spec.clone(), s.pid);
                        }
                        _ => {
                            let exit = self.sbxd.exit_record(&spec.id);
                            let message = match exit {
                                Some(e) => format!(
                                    "main process exited with code {} while sbx serve was not running",
                                    e.exit_code
                                ),
                                None => "main process is gone (it stopped while sbx serve was not running)".to_string(),
                            };
                            tracing::warn!(sandbox = %spec.id, %message, "sandbox found dead");
                            self.stop_with(&spec, SandboxStatus::Failed, message).await;
                        }
                    }
                }
                SandboxStatus::Failed => {
                    let _ = self.sbxd.teardown(&spec, false).await;
                }
            }
        }
        self.remove_orphans().await;
        self.remove_interrupted_fork_snapshots().await;
        self.remove_orphan_layers().await;
    }

    /// Removes runtime containers, sandbox dirs and network pieces that no record owns.
    pub(super) async fn remove_orphans(&self) {
        let (ids, keep): (Vec<String>, Vec<(String, u32)>) = {
            let records = self.records.read().await;
            (
                records.values().map(|r| r.spec.id.clone()).collect(),
                records
                    .values()
                    .filter(|r| r.status != SandboxStatus::Failed)
                    .map(|r| (r.spec.id.clone(), r.spec.slot))
                    .collect(),
            )
        };
        if let Ok(containers) = self.sbxd.runc().list().await {
            // The pool's prepared containers are no sandbox's and no orphans either.
            let pool = self.sbxd.pool();
            for c in containers
                .into_iter()
                .filter(|c| !ids.contains(&c.id) && !pool.owns(&c.id))
            {
                tracing::info!(container = %c.id, "removing an orphaned container");
                let _ = self.sbxd.runc().delete(&c.id, true).await;
            }
        }
        if let Ok(entries) = std::fs::read_dir(self.sbxd.sandboxes_dir()) {
            for entry in entries.flatten() {
                let id = entry.file_name().to_string_lossy().into_owned();
                if !ids.contains(&id) && !self.sbxd.pool().owns(&id) {
                    tracing::info!(sandbox = %id, "removing files of an orphaned sandbox");
                    for mount in crate::runtime::overlay::mounts_under(&entry.path()) {
                        let _ = nix::mount::umount2(&mount, nix::mount::MntFlags::MNT_DETACH);
                    }
                    let _ = std::fs::remove_dir_all(entry.path());
                    crate::runtime::cgroup::remove_dirs(&crate::runtime::cgroup::cgroups_path(&id))
                        .await;
                }
            }
        }
        // Without sandboxes, and before any was ever made, leave the host's network alone.
        if ids.is_empty()
            && !self.sbxd.network_started()
            && !self.sbxd.has_network_leftovers().await
        {
            return;
        }
        let network = match self.sbxd.network().await {
            Ok(network) => network,
            Err(e) => {
                tracing::warn!(error = %e, "network clean-up");
                return;
            }
        };
        match network.cleanup_stale(&keep).await {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(?removed, "removed stale sandbox networks")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "network clean-up"),
        }
    }

    /// Evicts sandboxes whose writable layer outgrew `ephemeral-storage`, as kubelet does.
    pub(super) async fn eviction_loop(self: Arc<Self>) {
        let every = Duration::from_secs(self.sbxd.config().eviction_check_seconds.max(1));
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let candidates: Vec<Record> = self
                .records
                .read()
                .await
                .values()
                .filter(|r| r.spec.ephemeral_bytes.is_some() && r.status == SandboxStatus::Running)
                .cloned()
                .collect();
            for record in candidates {
                let (Some(limit), sbxd, id) = (
                    record.spec.ephemeral_bytes,
                    self.sbxd.clone(),
                    record.spec.id.clone(),
                ) else {
                    continue;
                };
                let used = tokio::task::spawn_blocking(move || sbxd.writable_layer_bytes(&id))
                    .await
                    .unwrap_or(0);
                if used > limit {
                    let live = self.live(&record.spec.id, record.status);
                    let _guard = live.lock.lock().await;
                    tracing::warn!(sandbox = %record.spec.id, used, limit, "evicting: over ephemeral-storage");
                    self.stop_with(
                        &record.spec,
                        SandboxStatus::Failed,
                        format!(
                            "evicted: the writable layer uses {} bytes, over its ephemeral-storage limit of {limit} bytes",
                            used
                        ),
                    )
                    .await;
                }
            }
        }
    }
}
