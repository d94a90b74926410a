//! Network namespaces: made and removed in-process (unshare on a throwaway thread and a bind
//! mount under `/run/netns`, as `ip netns` does), and work run inside one.
use super::*;

/// Runs `f` on a new OS thread that has joined the network namespace bind-mounted at `netns`
/// (None: stays in the daemon's own). The thread ends with `f`, so nothing else ever runs in
/// that namespace by accident (a pooled thread would carry it over to unrelated work).
pub async fn in_netns<T, F>(netns: Option<PathBuf>, f: F) -> Result<T, NetworkError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let context = match &netns {
        Some(ns) => format!("join network namespace {}", ns.display()),
        None => "run on a helper thread".to_owned(),
    };
    std::thread::Builder::new()
        .name("sbx-netns".to_owned())
        .spawn(move || {
            let joined = match &netns {
                None => Ok(()),
                Some(path) => File::open(path).and_then(|ns| {
                    nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
                }),
            };
            let _ = tx.send(joined.map(|()| f()));
        })
        .map_err(io_error("start a helper thread"))?;
    match rx.await {
        Ok(result) => result.map_err(io_error(context)),
        Err(_) => Err(io_error(context)(io::Error::other(
            "the helper thread panicked",
        ))),
    }
}

/// Makes /run/netns exist and be a shared mount point, as `ip netns add` does, so a
/// namespace's bind mount removed here also leaves mount namespaces copied from this one.
pub(super) fn prepare_netns_dir() -> io::Result<()> {
    fs::create_dir_all(NETNS_DIR)?;
    let shared = MsFlags::MS_SHARED | MsFlags::MS_REC;
    let make_shared =
        || nix::mount::mount(None::<&str>, NETNS_DIR, None::<&str>, shared, None::<&str>);
    match make_shared() {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL) => {
            // Not a mount point yet: bind it onto itself, then mark it shared.
            let bind = MsFlags::MS_BIND | MsFlags::MS_REC;
            nix::mount::mount(Some(NETNS_DIR), NETNS_DIR, None::<&str>, bind, None::<&str>)?;
            Ok(make_shared()?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Bind-mounts a network namespace at `path`: the one of `source` (a `/proc/<pid>/ns/net`), or
/// a new one made by unsharing the calling thread (which must be a throwaway thread).
pub(super) fn create_netns(path: &Path, source: Option<&Path>) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)?;
    let mounted = (|| {
        let source = match source {
            Some(source) => source,
            None => {
                nix::sched::unshare(CloneFlags::CLONE_NEWNET)?;
                Path::new("/proc/thread-self/ns/net")
            }
        };
        nix::mount::mount(
            Some(source),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
    })();
    if let Err(e) = mounted {
        let _ = fs::remove_file(path);
        return Err(e.into());
    }
    Ok(())
}

/// Unmounts and removes a namespace's bind mount; returns whether there was one. The namespace
/// itself goes away once no process is left in it.
pub(super) fn delete_netns(path: &Path) -> io::Result<bool> {
    match nix::mount::umount2(path, MntFlags::MNT_DETACH) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
        Err(e) => return Err(e.into()),
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Interface names of the calling thread's network namespace.
pub(super) fn list_interfaces() -> io::Result<Vec<String>> {
    let dev = fs::read_to_string("/proc/thread-self/net/dev")?;
    Ok(parse_proc_net_dev(&dev))
}

pub(super) fn parse_proc_net_dev(dev: &str) -> Vec<String> {
    dev.lines()
        .skip(2)
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .collect()
}

/// The sandbox namespaces under `/run/netns`, as (key, path): the names with `prefix`, less the
/// host side's own (which may carry the prefix, e.g. `hostNetns = "sbx-router"`).
pub(super) fn sandbox_netns(
    prefix: &str,
    host_netns: Option<&Path>,
) -> io::Result<Vec<(String, PathBuf)>> {
    let entries = match fs::read_dir(NETNS_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(entries
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let key = entry
                .file_name()
                .to_string_lossy()
                .strip_prefix(prefix)?
                .to_string();
            (host_netns != Some(path.as_path())).then_some((key, path))
        })
        .collect())
}
