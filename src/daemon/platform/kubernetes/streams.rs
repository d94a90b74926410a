//! Streamed execs on Kubernetes: a Deployment sandbox's through the API server's exec stream
//! (as `kubectl exec`), an sbxd sandbox's through its node's agent (the same WebSocket the
//! service serves, relayed frame by frame).
//!
//! The API server's exec has no signal channel: the command runs with a marker in its
//! environment (`SBX_EXEC=<nonce>`, inherited by whatever it starts), and a signal — or the
//! kill when the client leaves first — is a second exec that signals every process of the
//! sandbox carrying it.
use futures_util::SinkExt;
use kube::api::{AttachParams, TerminalSize};
use tokio::io::AsyncWriteExt;

use super::*;
use crate::shared::exec_stream::{
    ExecSession, ExecStatus, ExecStreamQuery, Frame, MAX_FRAME, pump,
};

/// The environment variable that marks a streamed exec's processes.
const MARKER: &str = "SBX_EXEC";

impl KubernetesPlatform {
    /// A streamed exec in an sbxd sandbox, on its node's agent.
    pub(super) async fn sbxd_exec_stream(
        &self,
        record: &objects::sbxd::SbxdSandboxObject,
        request: &ExecStreamQuery,
    ) -> PlatformResult<ExecSession> {
        let (namespace, name) = sbxd::names_of(record);
        let query = serde_urlencoded::to_string(ExecStreamQuery {
            namespace: None,
            timeout_seconds: None,
            ..request.clone()
        })
        .map_err(|e| PlatformError::Store(format!("an exec query: {e}")))?;
        self.agents
            .stream(
                &self.client,
                &record.spec.node,
                &format!("{}?{query}", sbxd::stream_path(&namespace, &name)),
            )
            .await
    }

    /// A streamed exec in a Deployment sandbox's container, through the API server.
    pub(super) async fn exec_stream(
        &self,
        namespace: &str,
        name: &str,
        request: &ExecStreamQuery,
    ) -> PlatformResult<ExecSession> {
        let pod = self.running_pod(namespace, name).await?;
        let mut nonce = [0u8; 8];
        let _ = getrandom::fill(&mut nonce);
        let nonce = hex::encode(nonce);
        let params = AttachParams::default()
            .container(objects::sandboxes::CONTAINER)
            .stdin(request.stdin || request.tty)
            .stdout(true)
            .stderr(!request.tty)
            .tty(request.tty)
            // kube's 1 KiB default makes a WebSocket message of every KiB (a file copy's
            // 100 MiB in 100,000 of them).
            .max_stdin_buf_size(MAX_FRAME)
            .max_stdout_buf_size(MAX_FRAME)
            .max_stderr_buf_size(MAX_FRAME);
        let command = request.command.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let mut process = api
            .exec(
                &pod,
                [
                    "/bin/sh".to_string(),
                    "-c".to_string(),
                    format!("export {MARKER}={nonce}; exec /bin/sh -c \"$0\""),
                    command,
                ],
                &params,
            )
            .await
            .map_err(|e| kube_error(&format!("exec in sandbox {name}"), e))?;
        let (session, mut input_rx, output) = ExecSession::channels();
        let mut readers = Vec::new();
        if let Some(stdout) = process.stdout() {
            readers.push(pump(stdout, output.clone(), Frame::Stdout));
        }
        if let Some(stderr) = process.stderr() {
            readers.push(pump(stderr, output.clone(), Frame::Stderr));
        }
        let mut stdin = process.stdin();
        let mut resize = process.terminal_size();
        if let (Some(size), Some(tx)) = (request.size(), resize.as_mut()) {
            let _ = tx
                .send(TerminalSize {
                    width: size.cols,
                    height: size.rows,
                })
                .await;
        }
        let status = process.take_status();
        let signaller = Signaller { api, pod, nonce };
        tokio::spawn(async move {
            let status = async move {
                match status {
                    Some(status) => status.await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(status);
            let ended = loop {
                tokio::select! {
                    status = &mut status => break Some(status),
                    frame = input_rx.recv() => match frame {
                        Some(Frame::Stdin(bytes)) => {
                            if let Some(w) = stdin.as_mut() {
                                let _ = w.write_all(&bytes).await;
                            }
                        }
                        Some(Frame::CloseStdin) => {
                            if let Some(mut w) = stdin.take() {
                                let _ = w.shutdown().await;
                            }
                        }
                        Some(Frame::Resize(size)) => {
                            if let Some(tx) = resize.as_mut() {
                                let _ = tx.send(TerminalSize { width: size.cols, height: size.rows }).await;
                            }
                        }
                        Some(Frame::Signal(name)) => {
                            if crate::shared::exec_stream::signal_number(&name).is_some() {
                                signaller.signal(name.trim_start_matches("SIG")).await;
                            }
                        }
                        Some(_) => {}
                        None => break None,
                    },
                    _ = output.closed() => break None,
                }
            };
            match ended {
                Some(status) => {
                    let drain = futures_util::future::join_all(readers);
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), drain).await;
                    let code = workloads::exit_code(status.as_ref());
                    let _ = output.send(Frame::Status(ExecStatus::exited(code))).await;
                }
                None => {
                    // The client left: the command and whatever it started go.
                    process.abort();
                    signaller.signal("KILL").await;
                }
            }
        });
        Ok(session)
    }
}

/// Signals a streamed exec's processes by their marker.
struct Signaller {
    api: Api<Pod>,
    pod: String,
    nonce: String,
}

impl Signaller {
    async fn signal(&self, signal: &str) {
        let script = format!(
            "for d in /proc/[0-9]*; do grep -qs {MARKER}=$0 $d/environ && kill -s $1 ${{d#/proc/}}; done; true"
        );
        // The API server wants at least one stream.
        let params = AttachParams::default()
            .container(objects::sandboxes::CONTAINER)
            .stdin(false)
            .stdout(true)
            .stderr(false);
        match self
            .api
            .exec(
                &self.pod,
                ["/bin/sh", "-c", &script, &self.nonce, signal],
                &params,
            )
            .await
        {
            Ok(mut process) => {
                let done = async {
                    if let Some(mut out) = process.stdout() {
                        let _ = tokio::io::copy(&mut out, &mut tokio::io::sink()).await;
                    }
                    process.join().await
                };
                let _ = tokio::time::timeout(std::time::Duration::from_secs(10), done).await;
            }
            Err(e) => tracing::warn!(pod = %self.pod, error = %e, "signalling a streamed exec"),
        }
    }
}
