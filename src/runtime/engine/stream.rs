//! The streamed exec: `runc exec` in the foreground with its stdio on pipes, or on a
//! pseudo-terminal whose master the session reads and writes. Output goes out as it comes;
//! signals go to `runc exec`, which forwards them to the command; a session whose holder left
//! kills the command's process tree.
use std::os::fd::OwnedFd;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::*;
use crate::runtime::pty::{self, PtyMaster};
use crate::shared::exec_stream::{
    ExecSession, ExecStatus, Frame, MAX_FRAME, TermSize, pump, signal_number,
};

/// What a streamed exec asks the runtime for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    /// Shell command.
    pub command: String,
    /// On a terminal.
    pub tty: bool,
    /// With the client's stdin.
    pub stdin: bool,
    /// Initial terminal size.
    pub size: Option<TermSize>,
}

/// Where input goes: the command's stdin pipe, or the terminal.
enum Input {
    Pipe(mpsc::Sender<Bytes>),
    Tty(Arc<PtyMaster>),
    None,
}

impl Sbxd {
    /// Starts `request.command` in the sandbox; its session.
    pub async fn exec_stream(
        &self,
        id: &str,
        request: &StreamRequest,
    ) -> Result<ExecSession, RuntimeError> {
        let (process_path, pid_path) = self.exec_process(id, &request.command, request.tty).await?;
        let process_arg = process_path.display().to_string();
        let pid_arg = pid_path.display().to_string();
        let mut command = self.runc.command(&[
            "exec",
            "--process",
            &process_arg,
            "--pid-file",
            &pid_arg,
            id,
        ]);
        command.kill_on_drop(true);
        let (session, input_rx, output) = ExecSession::channels();
        let mut readers = Vec::new();
        let input = if request.tty {
            let (master, slave) =
                pty::open(request.size).map_err(|e| RuntimeError::io("open a terminal", e))?;
            let stdio = |fd: &OwnedFd| {
                fd.try_clone()
                    .map(Stdio::from)
                    .map_err(|e| RuntimeError::io("open a terminal", e))
            };
            command
                .stdin(stdio(&slave)?)
                .stdout(stdio(&slave)?)
                .stderr(stdio(&slave)?);
            // SAFETY: take_as_controlling_terminal only makes async-signal-safe calls.
            unsafe {
                command.pre_exec(pty::take_as_controlling_terminal);
            }
            let master = Arc::new(master);
            let reader = master.clone();
            let out = output.clone();
            readers.push(tokio::spawn(async move {
                let mut buf = vec![0u8; MAX_FRAME];
                while let Ok(n) = reader.read(&mut buf).await {
                    if n == 0
                        || out
                            .send(Frame::Stdout(Bytes::copy_from_slice(&buf[..n])))
                            .await
                            .is_err()
                    {
                        break;
                    }
                }
            }));
            Input::Tty(master)
        } else {
            command
                .stdin(if request.stdin {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            Input::None
        };
        let mut child = command.spawn().map_err(|e| {
            let _ = std::fs::remove_file(&process_path);
            RuntimeError::io("spawn runtime exec", e)
        })?;
        // The terminal's slave is the child's now: its end (EIO on the master) is the child's.
        drop(command);
        let input = match input {
            Input::None => match child.stdin.take() {
                Some(mut stdin) => {
                    let (tx, mut rx) = mpsc::channel::<Bytes>(16);
                    tokio::spawn(async move {
                        while let Some(bytes) = rx.recv().await {
                            if stdin.write_all(&bytes).await.is_err() {
                                break;
                            }
                        }
                    });
                    Input::Pipe(tx)
                }
                None => Input::None,
            },
            tty => tty,
        };
        if let Some(stdout) = child.stdout.take() {
            readers.push(pump(stdout, output.clone(), Frame::Stdout));
        }
        if let Some(stderr) = child.stderr.take() {
            readers.push(pump(stderr, output.clone(), Frame::Stderr));
        }
        tokio::spawn(run(
            child,
            input,
            input_rx,
            output,
            readers,
            process_path,
            pid_path,
        ));
        Ok(session)
    }
}

/// The command's host pid, from the file `runc exec` writes once it started it — which can
/// be after the command's first output: waited for (a while) while `runc exec` runs.
async fn exec_pid(pid_path: &Path, runtime_pid: Option<i32>) -> Option<i32> {
    let started = Instant::now();
    loop {
        let pid = std::fs::read_to_string(pid_path)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        if pid.is_some()
            || started.elapsed() > Duration::from_secs(5)
            || !runtime_pid.is_some_and(process::alive)
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The session's life: input to the command, then its status once it exits (or its end, when
/// the holder left).
async fn run(
    mut child: tokio::process::Child,
    mut input: Input,
    mut input_rx: mpsc::Receiver<Frame>,
    output: mpsc::Sender<Frame>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    process_path: PathBuf,
    pid_path: PathBuf,
) {
    let runtime_pid = child.id().map(|p| p as i32);
    let status = loop {
        tokio::select! {
            status = child.wait() => break Some(status),
            frame = input_rx.recv() => match frame {
                Some(Frame::Stdin(bytes)) => match &input {
                    Input::Pipe(tx) => {
                        let _ = tx.send(bytes).await;
                    }
                    Input::Tty(master) => {
                        let _ = master.write_all(&bytes).await;
                    }
                    Input::None => {}
                },
                Some(Frame::CloseStdin) => {
                    if let Input::Pipe(_) = input {
                        input = Input::None;
                    }
                }
                Some(Frame::Resize(size)) => {
                    if let Input::Tty(master) = &input {
                        let _ = master.resize(size);
                    }
                }
                Some(Frame::Signal(name)) => match signal_number(&name) {
                    // runc cannot forward SIGKILL: the command's tree is killed directly.
                    Some(libc::SIGKILL) => {
                        if let Some(pid) = exec_pid(&pid_path, runtime_pid).await {
                            process::kill_tree(pid);
                        }
                    }
                    Some(signal) => {
                        if let Some(pid) = runtime_pid {
                            // SAFETY: kill takes a pid and a signal number; no memory is shared.
                            unsafe { libc::kill(pid, signal) };
                        }
                    }
                    None => {}
                },
                Some(_) => {}
                None => break None,
            },
            _ = output.closed() => break None,
        }
    };
    match status {
        Some(status) => {
            // Output still in the pipes or on the terminal goes out before the status;
            // descendants that outlive the command may hold them, so not forever.
            let drain = futures_util::future::join_all(readers);
            let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
            let code = match status {
                Ok(s) => s.code().unwrap_or_else(|| {
                    128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(0)
                }),
                Err(_) => -1,
            };
            let _ = output.send(Frame::Status(ExecStatus::exited(code))).await;
        }
        None => {
            // The holder left: the command and whatever it started go; `runc exec` reaps
            // the command (killed first, it would leave a zombie in the sandbox).
            if let Some(pid) = exec_pid(&pid_path, runtime_pid).await {
                process::kill_tree(pid);
            }
            if tokio::time::timeout(Duration::from_secs(5), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
            for reader in readers {
                reader.abort();
            }
        }
    }
    let _ = std::fs::remove_file(&process_path);
    let _ = std::fs::remove_file(&pid_path);
}
