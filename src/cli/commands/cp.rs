//! `sbx sandbox cp`: files in and out of a sandbox as `docker cp` copies them — a tar archive
//! built or unpacked here, streamed through the file routes, with a progress bar on a terminal.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use clap::Args;
use futures_util::{Stream, StreamExt};
use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use tokio::sync::mpsc;

use super::sandbox::NamespaceArg;
use crate::cli::client::ClientError;
use crate::cli::commands::Context;
use crate::shared::files::{FileType, sandbox_path, split};

/// Copy files and directories into or out of a sandbox
///
/// One side is NAME:PATH (PATH absolute in the sandbox), the other a local path, or `-` for
/// a tar archive on stdin or stdout. As with `cp -r` and `docker cp`: into an existing
/// directory the source goes under its own name, anything else is created or replaced under
/// the name given. Modes and times are kept; in the sandbox the files belong to its user.
/// The sandbox's image needs `tar` and `/bin/sh`.
///
/// Examples:
///   sbx sandbox cp ./src demo:/work              # → /work/src when /work is a directory
///   sbx sandbox cp ./build.sh demo:/work/run.sh  # → /work/run.sh
///   sbx sandbox cp demo:/work/out ./out          # → ./out (or ./out/out if ./out is a directory)
///   sbx sandbox cp demo:/etc/hosts - | tar t     # the archive on stdout
///   tar c data | sbx sandbox cp - demo:/work     # an archive from stdin, unpacked in /work
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct CpArgs {
    /// What to copy: a local path, NAME:PATH, or - (a tar archive on stdin)
    pub source: String,
    /// Where to: NAME:PATH, a local path, or - (a tar archive on stdout)
    pub destination: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
}

/// One side of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    Local(PathBuf),
    /// `-`: a tar archive on stdin or stdout.
    Stdio,
    Sandbox {
        name: String,
        path: String,
    },
}

impl Place {
    /// `NAME:PATH` when what comes before the first `:` is a sandbox name; write `./a:b` for a
    /// local file with a colon.
    fn parse(arg: &str) -> Place {
        if arg == "-" {
            return Place::Stdio;
        }
        if let Some((name, path)) = arg.split_once(':') {
            if crate::shared::names::validate_dns_label("sandbox name", name).is_ok() {
                return Place::Sandbox {
                    name: name.to_string(),
                    path: path.to_string(),
                };
            }
        }
        Place::Local(PathBuf::from(arg))
    }
}

/// Runs `sbx sandbox cp`.
pub async fn run(ctx: &Context, args: &CpArgs) -> Result<ExitCode> {
    let namespace = &args.ns.namespace;
    match (Place::parse(&args.source), Place::parse(&args.destination)) {
        (Place::Sandbox { .. }, Place::Sandbox { .. }) => {
            bail!("copy between two sandboxes through a local directory: one side is local")
        }
        (source, Place::Sandbox { name, path }) => {
            let dest = sandbox_path(&path).map_err(anyhow::Error::msg)?;
            upload(ctx, namespace, source, &name, &dest, path.ends_with('/')).await
        }
        (Place::Sandbox { name, path }, dest) => {
            let source = sandbox_path(&path).map_err(anyhow::Error::msg)?;
            download(ctx, namespace, &name, &source, dest).await
        }
        _ => bail!("one side of a copy is NAME:PATH, a path in a sandbox"),
    }
}

async fn upload(
    ctx: &Context,
    namespace: &str,
    source: Place,
    name: &str,
    dest: &str,
    want_directory: bool,
) -> Result<ExitCode> {
    let (dir, target, body, built) = match source {
        Place::Stdio => {
            let stdin = tokio_util::io::ReaderStream::new(tokio::io::stdin());
            let body = reqwest::Body::wrap_stream(stdin);
            (dest.to_string(), dest.to_string(), body, None)
        }
        Place::Local(local) => {
            let meta = std::fs::symlink_metadata(&local)
                .with_context(|| format!("cannot read {}", local.display()))?;
            let own_name = base_name(&local)?;
            let there = match ctx.client.stat_file(name, namespace, dest).await {
                Ok(stat) => Some(stat.file_type),
                Err(ClientError::Api(e)) if e.status == 404 && e.code == "NotFound" => {
                    // The sandbox exists (the stat ran): nothing at the path.
                    if e.message.contains("no file or directory") {
                        None
                    } else {
                        return Err(ClientError::Api(e).into());
                    }
                }
                Err(e) => return Err(e.into()),
            };
            let (dir, entry) = match (there, split(dest)) {
                (Some(FileType::Directory), _) => (dest.to_string(), own_name),
                (_, None) => bail!("{name}:/ is a directory"),
                (Some(_), _) if meta.is_dir() => {
                    bail!("cannot replace the file {name}:{dest} with a directory")
                }
                (Some(_), _) | (None, _) if want_directory => {
                    bail!("{name}:{dest}/ is not a directory")
                }
                (_, Some((parent, base))) => (parent.to_string(), base.to_string()),
            };
            let bar = ctx.printer.show_progress().then(|| {
                bar(
                    archive_size(&local),
                    "{bytes}/{total_bytes} {wide_bar} {bytes_per_sec} {eta}",
                )
            });
            let target = format!("{}/{entry}", dir.trim_end_matches('/'));
            let (chunks, built) = build_archive(local, entry, bar);
            (dir, target, reqwest::Body::wrap_stream(chunks), Some(built))
        }
        Place::Sandbox { .. } => unreachable!("checked by run"),
    };
    let uploaded = ctx.client.upload_files(name, namespace, &dir, body).await;
    let built = match built {
        Some(built) => Some(built.await.context("building the archive")?),
        None => None,
    };
    let result = match (uploaded, built) {
        (Ok(result), _) => result,
        (Err(e @ ClientError::Api(_)), _) => return Err(e.into()),
        // A local read error explains a broken upload better than the transfer's error.
        (Err(_), Some(Err(local))) => return Err(local),
        (Err(e), _) => return Err(e.into()),
    };
    if ctx.printer.is_table() {
        ctx.printer.status(&format!(
            "copied {name}:{target} ({} in {} {})",
            HumanBytes(result.bytes),
            result.entries,
            if result.entries == 1 {
                "entry"
            } else {
                "entries"
            }
        ));
    } else {
        ctx.printer.structured(&result)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn download(
    ctx: &Context,
    namespace: &str,
    name: &str,
    source: &str,
    dest: Place,
) -> Result<ExitCode> {
    let stream = ctx.client.download_files(name, namespace, source).await?;
    let bar = ctx
        .printer
        .show_progress()
        .then(|| bar(0, "{spinner} {bytes} {bytes_per_sec} {elapsed}"));
    let counted = {
        let bar = bar.clone();
        stream.inspect(move |chunk| {
            if let (Some(bar), Ok(chunk)) = (&bar, chunk) {
                bar.inc(chunk.len() as u64);
            }
        })
    };
    let place = match dest {
        Place::Stdio => {
            let mut stdout = std::io::stdout().lock();
            let mut counted = std::pin::pin!(counted);
            while let Some(chunk) = counted.next().await {
                stdout.write_all(&chunk.context("the download broke")?)?;
            }
            stdout.flush()?;
            None
        }
        Place::Local(local) => {
            let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(
                Box::pin(counted),
            ));
            let shown = local.display().to_string();
            tokio::task::spawn_blocking(move || unpack(reader, &local))
                .await
                .context("unpacking the archive")??;
            Some(shown)
        }
        Place::Sandbox { .. } => unreachable!("checked by run"),
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if let Some(place) = place {
        ctx.printer
            .status(&format!("copied {name}:{source} to {place}"));
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on stderr.
fn bar(length: u64, template: &str) -> ProgressBar {
    let bar = if length > 0 {
        ProgressBar::new(length)
    } else {
        ProgressBar::new_spinner()
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

/// The last component of a local path, `.` and `..` resolved.
fn base_name(local: &Path) -> Result<String> {
    let named = match local.file_name() {
        Some(name)
            if local
                .components()
                .next_back()
                .is_some_and(|c| matches!(c, std::path::Component::Normal(_))) =>
        {
            name.to_os_string()
        }
        _ => std::fs::canonicalize(local)
            .with_context(|| format!("cannot read {}", local.display()))?
            .file_name()
            .map(|n| n.to_os_string())
            .with_context(|| format!("{} has no name to copy under", local.display()))?,
    };
    named
        .into_string()
        .map_err(|n| anyhow::anyhow!("{} is not UTF-8", n.to_string_lossy()))
}

/// About how many bytes the archive of `local` takes: a header and padded content per entry.
fn archive_size(local: &Path) -> u64 {
    fn walk(path: &Path, total: &mut u64) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        *total += 512 + meta.len().div_ceil(512) * 512 * u64::from(meta.is_file());
        if meta.is_dir() {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                walk(&entry.path(), total);
            }
        }
    }
    let mut total = 1024;
    walk(local, &mut total);
    total
}

/// Chunks of the archive, in [`CHUNK`]-byte writes, for a request body.
struct ChunkWriter {
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    bar: Option<ProgressBar>,
}

const CHUNK: usize = 256 * 1024;

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tx
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        if let Some(bar) = &self.bar {
            bar.inc(buf.len() as u64);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Builds the archive of `local` (as `entry`; links kept as links) on a blocking thread: its
/// chunks, and the build's outcome.
fn build_archive(
    local: PathBuf,
    entry: String,
    bar: Option<ProgressBar>,
) -> (
    impl Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    tokio::task::JoinHandle<Result<()>>,
) {
    let (tx, rx) = mpsc::channel(8);
    let abort = tx.clone();
    let built = tokio::task::spawn_blocking(move || -> Result<()> {
        let writer = std::io::BufWriter::with_capacity(
            CHUNK,
            ChunkWriter {
                tx,
                bar: bar.clone(),
            },
        );
        let mut builder = tar::Builder::new(writer);
        builder.follow_symlinks(false);
        let meta = std::fs::symlink_metadata(&local)?;
        let outcome = if meta.is_dir() {
            builder.append_dir_all(&entry, &local)
        } else {
            builder.append_path_with_name(&local, &entry)
        };
        if let Err(e) = outcome
            .and_then(|()| builder.into_inner())
            .and_then(|mut w| w.flush())
        {
            // The body ends in an error, never as a short archive that looks whole.
            let _ = abort.blocking_send(Err(std::io::Error::other(e.to_string())));
            return Err(e).with_context(|| format!("reading {}", local.display()));
        }
        drop(abort);
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        Ok(())
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    (chunks, built)
}

/// Unpacks the archive of one entry at `local`: in it when it is a directory, else as it
/// (through a directory beside it, so a failure leaves nothing half-named).
fn unpack(reader: impl std::io::Read, local: &Path) -> Result<()> {
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(true);
    if local.is_dir() {
        return archive
            .unpack(local)
            .with_context(|| format!("unpacking into {}", local.display()));
    }
    let parent = match local.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        bail!("no directory {} to copy into", parent.display());
    }
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).context("random name")?;
    let staging = parent.join(format!(".sbx-cp-{}", hex::encode(nonce)));
    let outcome = (|| -> Result<()> {
        archive
            .unpack(&staging)
            .with_context(|| format!("unpacking into {}", parent.display()))?;
        let mut entries = std::fs::read_dir(&staging)?;
        let top = match (entries.next(), entries.next()) {
            (Some(top), None) => top?.path(),
            _ => bail!("the archive does not hold exactly one entry"),
        };
        if top.is_dir() && local.exists() {
            bail!(
                "cannot replace the file {} with a directory",
                local.display()
            );
        }
        std::fs::rename(&top, local)
            .with_context(|| format!("cannot write {}", local.display()))?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&staging);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places() {
        assert_eq!(
            Place::parse("demo:/work"),
            Place::Sandbox {
                name: "demo".into(),
                path: "/work".into()
            }
        );
        assert_eq!(Place::parse("-"), Place::Stdio);
        assert_eq!(Place::parse("./a:b"), Place::Local("./a:b".into()));
        assert_eq!(Place::parse("/tmp/x"), Place::Local("/tmp/x".into()));
        assert_eq!(base_name(Path::new("a/b/")).unwrap(), "b");
        assert!(!base_name(Path::new(".")).unwrap().is_empty());
    }
}
