//! What runs in a sandbox of the embedded default and what it writes: exec (blocking and
//! streamed) and logs (a snapshot, or followed), over the sbxd runtime.
use std::time::{Duration, Instant};

use super::sandboxes::{LocalSandboxes, Record, runtime_error};
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::shared::models::sandbox::{ExecResponse, SandboxStatus};

impl LocalSandboxes {
    /// Runs a command in a Running sandbox (waiting for a Pending one to start).
    pub async fn exec(
        &self,
        namespace: &str,
        name: &str,
        command: &str,
        timeout: Duration,
    ) -> PlatformResult<ExecResponse> {
        let started = Instant::now();
        let record = self.runnable(namespace, name, timeout).await?;
        let remaining = timeout.saturating_sub(started.elapsed());
        let mut result = self
            .sbxd
            .exec(&record.spec.id, command, remaining)
            .await
            .map_err(runtime_error)?;
        result.duration_ms = started.elapsed().as_millis() as u64;
        Ok(result)
    }

    /// Starts a streamed exec of `request.command`: its session.
    pub async fn exec_stream(
        &self,
        namespace: &str,
        name: &str,
        request: &crate::runtime::engine::StreamRequest,
    ) -> PlatformResult<crate::shared::exec_stream::ExecSession> {
        let record = self
            .runnable(namespace, name, Duration::from_secs(60))
            .await?;
        self.sbxd
            .exec_stream(&record.spec.id, request)
            .await
            .map_err(runtime_error)
    }

    /// The record of a sandbox commands can run in (waiting up to `wait` for one being
    /// created): 409 when it is paused, failed or otherwise not running.
    async fn runnable(
        &self,
        namespace: &str,
        name: &str,
        wait: Duration,
    ) -> PlatformResult<Record> {
        let record = self.settled(namespace, name, wait).await?;
        match record.status {
            SandboxStatus::Running => {}
            SandboxStatus::Paused => {
                return Err(PlatformError::Conflict(format!(
                    "sandbox '{name}' is paused: resume it first"
                )));
            }
            SandboxStatus::Failed => {
                return Err(PlatformError::Conflict(format!(
                    "sandbox '{name}' has failed: {}",
                    record.error_message
                )));
            }
            other => {
                return Err(PlatformError::Conflict(format!(
                    "sandbox '{name}' is {}",
                    other.as_str()
                )));
            }
        }
        Ok(record)
    }

    /// A snapshot of the log.
    pub async fn logs(
        &self,
        namespace: &str,
        name: &str,
        tail: usize,
        since: u64,
    ) -> PlatformResult<String> {
        let record = self.record(namespace, name).await?;
        let sbxd = self.sbxd.clone();
        tokio::task::spawn_blocking(move || sbxd.logs(&record.spec.id, tail, since))
            .await
            .map_err(|e| PlatformError::Store(e.to_string()))
    }

    /// Follows the log: the lines there, then new ones as they are written, until the
    /// sandbox's main process ends, the sandbox goes or the receiver is dropped.
    pub async fn follow_logs(
        &self,
        namespace: &str,
        name: &str,
        tail: usize,
        since: u64,
    ) -> PlatformResult<tokio::sync::mpsc::Receiver<bytes::Bytes>> {
        let id = self.record(namespace, name).await?.spec.id;
        let sbxd = self.sbxd.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let (mut follower, first) = sbxd.follow_logs(&id, tail, since);
            if !first.is_empty() && tx.send(first.into()).await.is_err() {
                return;
            }
            loop {
                // Looked at before the read: what was written before the end is sent.
                let stopped = sbxd.stopped(&id);
                let text = follower.poll();
                if !text.is_empty() && tx.send(text.into()).await.is_err() {
                    return;
                }
                if stopped {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(LOG_POLL) => {}
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(rx)
    }
}

/// An sbxd sandbox is one container: `NotFound` for any other name.
pub(super) fn check_container(name: &str, container: &str) -> PlatformResult<()> {
    if container != crate::shared::models::sandbox::DEFAULT_LOG_CONTAINER {
        return Err(PlatformError::NotFound(format!(
            "sandbox '{name}' has no container '{container}'; its container is '{}'",
            crate::shared::models::sandbox::DEFAULT_LOG_CONTAINER
        )));
    }
    Ok(())
}

/// How often a followed log is read for new lines.
const LOG_POLL: Duration = Duration::from_millis(100);
