//! What runs inside a sandbox and what it reports: exec, pause/resume, its exit record, logs,
//! cgroup stats, the size of its writable layer.
use super::*;

impl Sbxd {
    /// Runs `command` with `/bin/sh -c` in the sandbox as its user, in its namespaces and
    /// cgroup; kills the command's process tree on timeout; caps each stream.
    pub async fn exec(
        &self,
        id: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<ExecResponse, RuntimeError> {
        let started = Instant::now();
        let (process_path, pid_path) = self.exec_process(id, command, false).await?;
        let process_arg = process_path.display().to_string();
        let pid_arg = pid_path.display().to_string();
        let mut child = self
            .runc
            .command(&[
                "exec",
                "--process",
                &process_arg,
                "--pid-file",
                &pid_arg,
                id,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| RuntimeError::io("spawn runtime exec", e))?;
        let cap = self.config.exec_output_cap;
        let stdout = child
            .stdout
            .take()
            .map(|s| tokio::spawn(crate::shared::io::read_capped(s, cap)));
        let stderr = child
            .stderr
            .take()
            .map(|s| tokio::spawn(crate::shared::io::read_capped(s, cap)));
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (status.ok(), false),
            Err(_) => {
                if let Some(pid) = std::fs::read_to_string(&pid_path)
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                {
                    process::kill_tree(pid);
                }
                let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                (status.ok().and_then(Result::ok), true)
            }
        };
        let collect = |handle: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>| async move {
            match handle {
                // Descendants that outlive the command may hold the pipe: don't wait forever.
                Some(h) => tokio::time::timeout(
                    Duration::from_millis(if timed_out { 200 } else { 2000 }),
                    h,
                )
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default(),
                None => (Vec::new(), false),
            }
        };
        let (out, out_cut) = collect(stdout).await;
        let (err, err_cut) = collect(stderr).await;
        let _ = std::fs::remove_file(&process_path);
        let _ = std::fs::remove_file(&pid_path);
        let exit_code = if timed_out {
            124
        } else {
            match status {
                Some(s) => s.code().unwrap_or_else(|| {
                    128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(0)
                }),
                None => -1,
            }
        };
        // The cap bounds the answer too: a control byte counts as its six-byte escape, so each
        // stream's JSON form is at most twice `cap` whatever the command writes.
        let (stdout, out_long) = crate::shared::io::bounded_text(out, cap);
        let (stderr, err_long) = crate::shared::io::bounded_text(err, cap);
        Ok(ExecResponse {
            exit_code,
            stdout,
            stderr,
            duration_ms: started.elapsed().as_millis() as u64,
            timed_out,
            truncated: out_cut || err_cut || out_long || err_long,
        })
    }

    /// Writes the process of an exec of `command` (the sandbox's user, env and limits, with
    /// `/bin/sh -c`; on a terminal with `TERM` set when the image sets none): the paths of
    /// its process file and of the pid file `runc exec` is to write.
    pub(super) async fn exec_process(
        &self,
        id: &str,
        command: &str,
        terminal: bool,
    ) -> Result<(PathBuf, PathBuf), RuntimeError> {
        let dir = self.dir(id);
        let config_bytes = tokio::fs::read(dir.join("bundle").join("config.json"))
            .await
            .map_err(|e| RuntimeError::io("read sandbox config", e))?;
        let mut spec: oci_spec::runtime::Spec = serde_json::from_slice(&config_bytes)
            .map_err(|e| RuntimeError::Corrupt(format!("sandbox config: {e}")))?;
        let mut process = spec
            .process_mut()
            .take()
            .ok_or_else(|| RuntimeError::Corrupt("sandbox config has no process".into()))?;
        process.set_args(Some(vec!["/bin/sh".into(), "-c".into(), command.into()]));
        process.set_terminal(Some(terminal));
        if terminal {
            let mut env = process.env().clone().unwrap_or_default();
            if !env.iter().any(|e| e.starts_with("TERM=")) {
                env.push("TERM=xterm".into());
                process.set_env(Some(env));
            }
        }
        let nonce = format!("{:016x}", rand_u64());
        let process_path = dir.join(format!("exec-{nonce}.json"));
        let pid_path = dir.join(format!("exec-{nonce}.pid"));
        let json = serde_json::to_vec(&process).map_err(|e| RuntimeError::Spec(e.to_string()))?;
        write_private(&process_path, &json)?;
        Ok((process_path, pid_path))
    }

    /// Freezes the sandbox (its cgroup, directly: see [`cgroup::set_frozen`]).
    pub async fn pause(&self, id: &str) -> Result<(), RuntimeError> {
        cgroup::set_frozen(&cgroup::cgroups_path(id), true)
            .await
            .map_err(|e| RuntimeError::io("freeze the sandbox", e))
    }

    /// Thaws the sandbox.
    pub async fn resume(&self, id: &str) -> Result<(), RuntimeError> {
        cgroup::set_frozen(&cgroup::cgroups_path(id), false)
            .await
            .map_err(|e| RuntimeError::io("thaw the sandbox", e))
    }

    /// The recorded exit of the main process, if it ended.
    pub fn exit_record(&self, id: &str) -> Option<ExitRecord> {
        ExitRecord::read(&self.exit_path(id))
    }

    /// Pid of the sandbox's shim, if recorded and alive.
    pub fn shim_pid(&self, id: &str) -> Option<i32> {
        std::fs::read_to_string(self.dir(id).join("shim.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|&pid| process::alive(pid))
    }

    /// A snapshot of the sandbox's log.
    pub fn logs(&self, id: &str, tail: usize, since_secs: u64) -> String {
        logs::read(
            &self.log_path(id),
            tail,
            since_secs,
            time::OffsetDateTime::now_utc(),
        )
    }

    /// Follows the sandbox's log: the follower, and the last `tail` lines (of the last
    /// `since_secs` seconds) already there.
    pub fn follow_logs(&self, id: &str, tail: usize, since_secs: u64) -> (logs::Follower, String) {
        logs::Follower::open(
            &self.log_path(id),
            tail,
            since_secs,
            time::OffsetDateTime::now_utc(),
        )
    }

    /// The sandbox's main process has ended, or the sandbox is gone.
    pub fn stopped(&self, id: &str) -> bool {
        self.exit_record(id).is_some() || !self.dir(id).exists()
    }

    /// The sandbox's cgroup readings.
    pub fn stats(&self, id: &str) -> Option<cgroup::CgroupStats> {
        cgroup::stats(&cgroup::cgroups_path(id))
    }

    /// Bytes the writable layer uses.
    pub fn writable_layer_bytes(&self, id: &str) -> u64 {
        overlay::disk_usage(&RootFs::under(&self.dir(id)).upper)
    }
}
