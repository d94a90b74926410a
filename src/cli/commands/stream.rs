//! `sbx sandbox exec` on the streamed route: output as it comes, stdin with `-i`, and with
//! `-t` a real terminal — the local one in raw mode, its size sent at start and on every
//! `SIGWINCH` — as `kubectl exec -it` does.
use std::io::{IsTerminal, Read, Write};
use std::os::fd::AsRawFd;
use std::process::ExitCode;

use anyhow::Result;
use bytes::Bytes;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::commands::Context;
use crate::shared::exec_stream::{ExecStatus, ExecStreamQuery, Frame, TermSize};

/// What the user asked for.
pub struct StreamArgs<'a> {
    /// Sandbox name.
    pub name: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// Shell command.
    pub command: String,
    /// `-i`: send stdin.
    pub stdin: bool,
    /// `-t`: on a terminal.
    pub tty: bool,
    /// `--timeout`.
    pub timeout: Option<u64>,
}

/// The local terminal in raw mode until dropped.
struct RawMode {
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    fn enter() -> Option<RawMode> {
        use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            std::io::stdin(),
            nix::sys::termios::SetArg::TCSANOW,
            &self.saved,
        );
    }
}

/// The local terminal's size.
fn terminal_size() -> Option<TermSize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    for fd in [std::io::stdout().as_raw_fd(), std::io::stdin().as_raw_fd()] {
        // SAFETY: TIOCGWINSZ writes a winsize into the pointer, which outlives the call.
        let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size as *mut libc::winsize) };
        if rc == 0 && size.ws_col > 0 && size.ws_row > 0 {
            return Some(TermSize {
                cols: size.ws_col,
                rows: size.ws_row,
            });
        }
    }
    None
}

/// Reads stdin on a thread of its own (a blocking read cannot be cancelled; the process
/// exits without waiting for it), as frames; its end as a close.
fn read_stdin(input: tokio::sync::mpsc::Sender<Frame>, tty: bool) {
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 16 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => {
                    // A terminal's end is the remote shell's (Ctrl-D is a byte on it).
                    if !tty {
                        let _ = input.blocking_send(Frame::CloseStdin);
                    }
                    break;
                }
                Ok(n) => {
                    if input
                        .blocking_send(Frame::Stdin(Bytes::copy_from_slice(&buf[..n])))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
}

/// Runs the command on the streamed route: its exit code.
pub async fn exec(ctx: &Context, args: StreamArgs<'_>) -> Result<ExitCode> {
    let mut tty = args.tty;
    if tty && !std::io::stdin().is_terminal() {
        ctx.printer
            .status("sbx: -t ignored: stdin is not a terminal");
        tty = false;
    }
    let size = if tty { terminal_size() } else { None };
    let query = ExecStreamQuery {
        namespace: Some(args.namespace.to_string()),
        command: Some(args.command),
        tty,
        stdin: args.stdin,
        cols: size.map(|s| s.cols),
        rows: size.map(|s| s.rows),
        timeout_seconds: args.timeout,
    };
    let mut session = ctx.client.exec_stream(args.name, &query).await?;
    let raw = if tty { RawMode::enter() } else { None };
    if args.stdin {
        read_stdin(session.input.clone(), tty);
    }
    let mut resized = signal(SignalKind::window_change())?;
    let mut interrupted = signal(SignalKind::interrupt())?;
    let mut interrupts = 0;
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let status = loop {
        tokio::select! {
            frame = session.output.recv() => match frame {
                Some(Frame::Stdout(bytes)) => {
                    let _ = stdout.write_all(&bytes);
                    let _ = stdout.flush();
                }
                Some(Frame::Stderr(bytes)) => {
                    let _ = stderr.write_all(&bytes);
                    let _ = stderr.flush();
                }
                Some(Frame::Status(status)) => break status,
                Some(_) => {}
                None => break ExecStatus::failed("ServiceUnavailable", "the exec stream ended"),
            },
            _ = resized.recv(), if tty => {
                if let Some(size) = terminal_size() {
                    let _ = session.input.send(Frame::Resize(size)).await;
                }
            }
            // Without a terminal Ctrl-C reaches sbx, not the command: the first is sent on,
            // the second leaves (and so ends the command).
            _ = interrupted.recv() => {
                interrupts += 1;
                if interrupts > 1 {
                    break ExecStatus::exited(130);
                }
                let _ = session.input.send(Frame::Signal("INT".into())).await;
            }
        }
    };
    drop(raw);
    if let Some(error) = status.error {
        anyhow::bail!("{} ({})", error.message, error.code);
    }
    if status.timed_out {
        ctx.printer.status(&format!(
            "sbx: command timed out after {} s",
            args.timeout.unwrap_or_default()
        ));
    }
    let code = status.exit_code.unwrap_or(1);
    Ok(ExitCode::from(if (0..=255).contains(&code) {
        code as u8
    } else {
        1
    }))
}
