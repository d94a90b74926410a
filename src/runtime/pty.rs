//! A pseudo-terminal for a streamed exec: the master side read and written asynchronously,
//! resized with `TIOCSWINSZ`; the slave side is the controlling terminal of the runtime's
//! `exec`, which puts it in raw mode and relays it to the terminal it creates in the sandbox.
use std::os::fd::{AsRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

use crate::shared::exec_stream::TermSize;

/// The master side of a pseudo-terminal.
pub struct PtyMaster(AsyncFd<OwnedFd>);

/// A new pseudo-terminal of `size` (80×24 when none): its master and its slave.
pub fn open(size: Option<TermSize>) -> std::io::Result<(PtyMaster, OwnedFd)> {
    let size = size.unwrap_or(TermSize { cols: 80, rows: 24 });
    let winsize = nix::pty::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&winsize), None).map_err(std::io::Error::from)?;
    let flags = nix::fcntl::fcntl(pty.master.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map_err(std::io::Error::from)?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(pty.master.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))
        .map_err(std::io::Error::from)?;
    // SAFETY: the AsyncFd owns the master, which is closed only when the AsyncFd drops.
    let master = unsafe { AsyncFd::register(pty.master)? };
    Ok((PtyMaster(master), pty.slave))
}

impl PtyMaster {
    /// Reads output; `Ok(0)` once every slave holder has closed it.
    pub async fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let mut guard = self.0.readable().await?;
            match guard.try_io(|fd| {
                nix::unistd::read(fd.get_ref().as_raw_fd(), buf).map_err(std::io::Error::from)
            }) {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `bytes` (input typed on the terminal).
    pub async fn write_all(&self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let mut guard = self.0.writable().await?;
            match guard
                .try_io(|fd| nix::unistd::write(fd.get_ref(), bytes).map_err(std::io::Error::from))
            {
                Ok(Ok(n)) => bytes = &bytes[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }

    /// Sets the terminal's size (the foreground process group gets `SIGWINCH`).
    pub fn resize(&self, size: TermSize) -> std::io::Result<()> {
        let winsize = libc::winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads a winsize from the pointer, which outlives the call.
        let rc = unsafe {
            libc::ioctl(
                self.0.get_ref().as_raw_fd(),
                libc::TIOCSWINSZ,
                &winsize as *const libc::winsize,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Makes the slave on fd 0 the controlling terminal of a new session: for `pre_exec` of the
/// process given the slave as its stdio.
pub fn take_as_controlling_terminal() -> std::io::Result<()> {
    // SAFETY: setsid and ioctl(TIOCSCTTY) take no pointers; called between fork and exec.
    unsafe {
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_shell_on_the_terminal_sees_its_size() {
        let (master, slave) = open(Some(TermSize { cols: 91, rows: 17 })).unwrap();
        let stdio = |fd: &OwnedFd| std::process::Stdio::from(fd.try_clone().unwrap());
        let mut command = tokio::process::Command::new("sh");
        command
            .args(["-c", "read line; stty size; echo got:$line"])
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: take_as_controlling_terminal only makes async-signal-safe calls.
        unsafe {
            command.pre_exec(take_as_controlling_terminal);
        }
        let mut child = command.spawn().unwrap();
        // Every copy of the slave but the child's goes: its exit is the master's EOF.
        drop(command);
        drop(slave);
        master
            .resize(TermSize {
                cols: 100,
                rows: 30,
            })
            .unwrap();
        master.write_all(b"hello\n").await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let n = master.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&seen);
        assert!(text.contains("30 100"), "{text}");
        assert!(text.contains("got:hello"), "{text}");
        assert!(child.wait().await.unwrap().success());
    }
}
