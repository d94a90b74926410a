//! Running `ip` and `nft`: a batch on stdin, in a given network namespace (joined between
//! fork and exec), bounded in time; a failed batch names its line.
use super::*;

/// `ip` and `nft` are looked up on `PATH` (Debian: iproute2, nftables).
pub(super) const IP: &str = "ip";

pub(super) const NFT: &str = "nft";

/// No `ip`/`nft` run comes near this; it only bounds a wedged one.
pub(super) const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs `program args` with `stdin` as its input, in the network namespace bind-mounted at
/// `netns` (joined with `setns` between fork and exec) or in the daemon's own.
pub(super) async fn run(
    program: &str,
    args: &[&str],
    netns: Option<&Path>,
    stdin: &str,
) -> Result<String, NetworkError> {
    let shown = match netns {
        Some(ns) => format!("{program} {} (in netns {})", args.join(" "), ns.display()),
        None => format!("{program} {}", args.join(" ")),
    };
    let ns_file = match netns {
        Some(ns) => Some(File::open(ns).map_err(io_error(format!("open {}", ns.display())))?),
        None => None,
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(file) = &ns_file {
        let fd = file.as_raw_fd();
        // SAFETY: the closure makes one system call, setns, which is async-signal-safe; `fd`
        // stays open until after `spawn` (the file is dropped below) and is O_CLOEXEC, so the
        // program never inherits it.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        }
    }
    let mut child = cmd.spawn().map_err(io_error(format!("run `{shown}`")))?;
    drop(ns_file);
    let mut input = child.stdin.take();
    let write = async {
        if let Some(pipe) = input.as_mut() {
            pipe.write_all(stdin.as_bytes()).await?;
        }
        drop(input);
        Ok::<(), io::Error>(())
    };
    let (written, output) = tokio::time::timeout(COMMAND_TIMEOUT, async {
        tokio::join!(write, child.wait_with_output())
    })
    .await
    .map_err(|_| NetworkError::Command {
        command: shown.clone(),
        status: "timed out".to_owned(),
        stderr: format!("no exit within {COMMAND_TIMEOUT:?}; killed"),
    })?;
    let output = output.map_err(io_error(format!("wait for `{shown}`")))?;
    if !output.status.success() {
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        if let Some(line) = failed_batch_line(&stderr, stdin) {
            stderr.push_str(&format!(" [batch line: {line}]"));
        }
        return Err(NetworkError::Command {
            command: shown,
            status: output.status.to_string(),
            stderr,
        });
    }
    written.map_err(io_error(format!("write the input of `{shown}`")))?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `ip -batch` reports `Command failed -:N`; returns that line of the batch.
pub(super) fn failed_batch_line<'a>(stderr: &str, batch: &'a str) -> Option<&'a str> {
    let n: usize = stderr
        .lines()
        .find_map(|l| l.strip_prefix("Command failed -:"))?
        .trim()
        .parse()
        .ok()?;
    batch.lines().nth(n.checked_sub(1)?)
}
