//! Files in and out of a sandbox, on every platform alike: `tar` runs in the sandbox (as its
//! user, in its root, so no path it resolves can leave the sandbox) over the streamed exec;
//! the service checks every entry of an upload before the sandbox sees it (no absolute path,
//! no `..`, nothing written through a link the archive made, no devices, a size limit), and
//! bounds what reading it costs: the body's raw size, and extension headers (long names, PAX)
//! refused by their announced size before they are read ([`TarGuard`]).
use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::sandboxes::SandboxService;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::shared::envelope::ErrorCode;
use crate::shared::exec_stream::{ExecSession, ExecStatus, ExecStreamQuery, Frame, MAX_FRAME};
use crate::shared::files::{
    FileStat, FileType, FilesQuery, MAX_UPLOAD_BYTES, UploadResult, sandbox_path, split,
};
use crate::shared::tar_guard::{ExtensionTooLarge, TarGuard};

/// The most bytes an upload's body may carry: the content limit ([`MAX_UPLOAD_BYTES`]) and a
/// tenth more for the archive's headers and padding. Past it the upload is refused (413)
/// whatever its entries hold: headers alone (tiny files, PAX records) cost no content.
pub const MAX_UPLOAD_BODY_BYTES: u64 = MAX_UPLOAD_BYTES + MAX_UPLOAD_BYTES / 10;

/// Exit codes of the scripts below for what the service answers itself.
const NO_TAR: i32 = 90;
const MISSING: i32 = 91;
const NOT_A_DIRECTORY: i32 = 92;

/// Stderr kept for an error message.
const STDERR_KEPT: usize = 4096;

/// A download's body: the archive's bytes; an error ends it early (the client sees a broken
/// transfer, never a short archive that looks whole).
pub type Archive = std::pin::Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

impl SandboxService {
    /// What `query.path` is in the sandbox (404 when nothing is there).
    pub async fn stat_file(&self, name: &str, query: &FilesQuery) -> ServiceResult<FileStat> {
        let (namespace, path) = target(query)?;
        let q = quote(&path);
        let script = format!(
            "if [ -L {q} ]; then echo symlink; elif [ -d {q} ]; then echo directory; \
             elif [ -e {q} ]; then echo file; else exit {MISSING}; fi"
        );
        let result = self
            .exec(namespace, name, &script, Some(STAT_TIMEOUT.as_secs()))
            .await?;
        let status = ExecStatus::exited(result.exit_code);
        check_status(&status, result.stderr.as_bytes(), name, &path)?;
        let file_type = match result.stdout.trim() {
            "symlink" => FileType::Symlink,
            "directory" => FileType::Directory,
            _ => FileType::File,
        };
        Ok(FileStat { path, file_type })
    }

    /// Unpacks the tar archive `body` in the directory `query.path` of the sandbox (which
    /// must exist). Entries are checked as they stream; one refused ends the upload there (400,
    /// or 413 past [`MAX_UPLOAD_BYTES`] of content or [`MAX_UPLOAD_BODY_BYTES`] of body), the
    /// ones before it stay unpacked.
    pub async fn upload_files(
        &self,
        name: &str,
        query: &FilesQuery,
        body: impl Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    ) -> ServiceResult<UploadResult> {
        let (namespace, dir) = target(query)?;
        let q = quote(&dir);
        let script = format!(
            "command -v tar >/dev/null 2>&1 || exit {NO_TAR}; [ -e {q} ] || exit {MISSING}; \
             [ -d {q} ] || exit {NOT_A_DIRECTORY}; exec tar -x -o -f - -C {q}"
        );
        let session = self.start(namespace, name, script, true).await?;
        let ExecSession { input, mut output } = session;
        // Held until the status: a session whose input is dropped ends its command.
        let _held = input.clone();
        let body = capped(body, MAX_UPLOAD_BODY_BYTES);
        let reader =
            tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(Box::pin(body)));
        let mut checker =
            tokio::task::spawn_blocking(move || check_archive(reader, FrameWriter(input)));
        let mut stderr = Vec::new();
        let mut checked: Option<Result<UploadResult, Refusal>> = None;
        let status = loop {
            tokio::select! {
                frame = output.recv() => match frame {
                    Some(Frame::Status(status)) => break status,
                    Some(Frame::Stderr(bytes)) => keep(&mut stderr, &bytes),
                    Some(_) => {}
                    None => break ExecStatus::failed(
                        "ServiceUnavailable",
                        "the sandbox's stream ended before tar's exit status",
                    ),
                },
                done = &mut checker, if checked.is_none() => {
                    let done = done.map_err(ServiceError::internal)?;
                    if let Err(Refusal::Refused(e)) = done {
                        // Dropping the session ends tar: nothing after the refused entry.
                        return Err(e);
                    }
                    checked = Some(done);
                }
            }
        };
        check_status(&status, &stderr, name, &dir)?;
        let counted = match checked {
            Some(done) => done,
            None => checker.await.map_err(ServiceError::internal)?,
        };
        match counted {
            Ok(counted) => Ok(UploadResult {
                path: dir,
                ..counted
            }),
            Err(Refusal::Refused(e)) => Err(e),
            Err(Refusal::Closed) => Err(ServiceError::new(
                ErrorCode::ServiceUnavailable,
                "tar in the sandbox ended before the archive did",
            )),
        }
    }

    /// The tar archive of `query.path` in the sandbox (a file, or a directory with everything
    /// under it; a link is archived as a link), under its own name. The answer comes once the
    /// archive's first bytes do, so a missing path is a 404 and not an empty archive.
    pub async fn download_files(&self, name: &str, query: &FilesQuery) -> ServiceResult<Archive> {
        let (namespace, path) = target(query)?;
        let Some((parent, base)) = split(&path) else {
            return Err(ServiceError::bad_request(
                "path '/' is the whole sandbox: name a directory or file under it",
            ));
        };
        let (qp, qb) = (quote(parent), quote(base));
        let script = format!(
            "command -v tar >/dev/null 2>&1 || exit {NO_TAR}; cd {qp} 2>/dev/null || exit {MISSING}; \
             [ -e {qb} ] || [ -L {qb} ] || exit {MISSING}; exec tar -c -f - -- {qb}"
        );
        let mut session = self.start(namespace, name, script, false).await?;
        let mut stderr = Vec::new();
        let first = loop {
            match session.output.recv().await {
                Some(Frame::Stdout(bytes)) => break bytes,
                Some(Frame::Stderr(bytes)) => keep(&mut stderr, &bytes),
                Some(Frame::Status(status)) => {
                    check_status(&status, &stderr, name, &path)?;
                    return Err(ServiceError::unprocessable(format!(
                        "tar in sandbox '{name}' wrote no archive of '{path}'"
                    )));
                }
                Some(_) => {}
                None => {
                    return Err(ServiceError::new(
                        ErrorCode::ServiceUnavailable,
                        "the sandbox's stream ended before the archive",
                    ));
                }
            }
        };
        let stream = futures_util::stream::unfold(
            (Some(first), Some(session)),
            |(first, session)| async move {
                if let Some(bytes) = first {
                    return Some((Ok(bytes), (None, session)));
                }
                let mut session = session?;
                loop {
                    match session.output.recv().await {
                        Some(Frame::Stdout(bytes)) => {
                            return Some((Ok(bytes), (None, Some(session))));
                        }
                        Some(Frame::Status(status)) if status.exit_code == Some(0) => return None,
                        Some(Frame::Status(status)) => {
                            let e = std::io::Error::other(format!(
                                "tar in the sandbox failed: {status:?}"
                            ));
                            return Some((Err(e), (None, None)));
                        }
                        Some(_) => {}
                        None => {
                            let e = std::io::Error::other("the sandbox's stream ended early");
                            return Some((Err(e), (None, None)));
                        }
                    }
                }
            },
        );
        Ok(Box::pin(stream))
    }

    /// Starts `script` on the sandbox's streamed exec (without a time limit: a transfer takes
    /// as long as its bytes do; a client that leaves ends it).
    async fn start(
        &self,
        namespace: &str,
        name: &str,
        script: String,
        stdin: bool,
    ) -> ServiceResult<ExecSession> {
        let query = ExecStreamQuery {
            namespace: Some(namespace.to_string()),
            command: Some(script),
            stdin,
            ..Default::default()
        };
        Ok(self.exec_stream(namespace, name, &query).await?.0)
    }
}

/// How long a stat may take.
const STAT_TIMEOUT: Duration = Duration::from_secs(30);

/// The namespace and the canonical path of a query (400 for a bad or missing path).
fn target(query: &FilesQuery) -> ServiceResult<(&str, String)> {
    let path = crate::shared::models::sandbox::require_field("path", query.path.as_deref())
        .and_then(sandbox_path)
        .map_err(ServiceError::bad_request)?;
    Ok((
        crate::shared::models::sandbox::namespace_or_default(query.namespace.as_deref()),
        path,
    ))
}

/// `s` as one shell word.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Appends to a bounded stderr buffer.
fn keep(kept: &mut Vec<u8>, bytes: &[u8]) {
    let room = STDERR_KEPT.saturating_sub(kept.len());
    kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// The error a script's status means, if it failed.
fn check_status(status: &ExecStatus, stderr: &[u8], name: &str, path: &str) -> ServiceResult<()> {
    if let Some(e) = &status.error {
        let code = match e.code.as_str() {
            "NotFound" => ErrorCode::NotFound,
            "Conflict" => ErrorCode::Conflict,
            "BadRequest" => ErrorCode::BadRequest,
            _ => ErrorCode::ServiceUnavailable,
        };
        return Err(ServiceError::new(code, e.message.clone()));
    }
    let stderr = String::from_utf8_lossy(stderr);
    let stderr = stderr.trim();
    match status.exit_code {
        Some(0) => Ok(()),
        Some(MISSING) => Err(ServiceError::not_found(format!(
            "no file or directory '{path}' in sandbox '{name}'"
        ))),
        Some(NOT_A_DIRECTORY) => Err(ServiceError::bad_request(format!(
            "'{path}' in sandbox '{name}' is not a directory: an upload unpacks in a directory"
        ))),
        Some(NO_TAR) => Err(ServiceError::unprocessable(format!(
            "the image of sandbox '{name}' has no `tar`, which copying files runs in the sandbox"
        ))),
        Some(126 | 127) => Err(ServiceError::unprocessable(format!(
            "the image of sandbox '{name}' has no /bin/sh, which copying files runs in the sandbox"
        ))),
        Some(code) => Err(ServiceError::unprocessable(format!(
            "tar in sandbox '{name}' failed (exit {code}) on '{path}': {stderr}"
        ))),
        None => Err(ServiceError::new(
            ErrorCode::ServiceUnavailable,
            "the sandbox's stream ended without tar's exit status",
        )),
    }
}

/// The body past [`MAX_UPLOAD_BODY_BYTES`]: the error the archive check reads.
#[derive(Debug, thiserror::Error)]
#[error("the request body is larger than {MAX_UPLOAD_BODY_BYTES} bytes")]
struct BodyTooLarge;

/// `body`, which yields one [`BodyTooLarge`] error in place of the chunk that takes it past
/// `limit` bytes. The check stops at that error; the chunks after it pass, for the bounded
/// drain of a refused upload ([`check_archive`]).
fn capped(
    body: impl Stream<Item = io::Result<Bytes>> + Send + 'static,
    limit: u64,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    let mut seen = 0u64;
    body.map(move |chunk| {
        let chunk = chunk?;
        let before = seen;
        seen = seen.saturating_add(chunk.len() as u64);
        if seen > limit && before <= limit {
            return Err(io::Error::other(BodyTooLarge));
        }
        Ok(chunk)
    })
}

/// The refusal a failed read of the archive means, if the guards caused it: 413 for a body
/// over its limit, 400 (with what the header announced) for an oversized extension header.
fn read_refusal(e: &io::Error) -> Option<Refusal> {
    if let Some(refused) = ExtensionTooLarge::find(e) {
        return Some(Refusal::Refused(ServiceError::bad_request(format!(
            "the archive is refused: {}",
            refused.message()
        ))));
    }
    let too_large = e
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<BodyTooLarge>().is_some());
    too_large.then(|| {
        Refusal::Refused(ServiceError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the request body is larger than {MAX_UPLOAD_BODY_BYTES} bytes (an upload \
                 unpacks to {MAX_UPLOAD_BYTES} bytes at most, and its headers may add a tenth)"
            ),
        ))
    })
}

/// Why the archive check stopped before the end.
enum Refusal {
    /// The archive is refused: the error to answer.
    Refused(ServiceError),
    /// The command stopped reading (its status tells why).
    Closed,
}

/// Writes stdin frames of at most [`MAX_FRAME`] bytes into a session.
struct FrameWriter(mpsc::Sender<Frame>);

impl Write for FrameWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(MAX_FRAME);
        self.0
            .blocking_send(Frame::Stdin(Bytes::copy_from_slice(&buf[..n])))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads the archive in `reader`, checks each entry and writes it again to `out` (then ends
/// the stdin): the entries and content bytes it passed.
fn check_archive(reader: impl Read, out: FrameWriter) -> Result<UploadResult, Refusal> {
    let mut archive = tar::Archive::new(TarGuard::new(reader));
    let result = pass_entries(&mut archive, out);
    if result.is_err() {
        // A client reads the answer once it has sent its body: the rest is read, to a bound.
        let _ = std::io::copy(
            &mut archive.into_inner().into_inner().take(DRAIN_BYTES),
            &mut std::io::sink(),
        );
    }
    result
}

/// The most of a refused upload read after the refusal.
const DRAIN_BYTES: u64 = 64 << 20;

/// [`check_archive`]'s pass over the entries.
fn pass_entries<R: Read>(
    archive: &mut tar::Archive<R>,
    out: FrameWriter,
) -> Result<UploadResult, Refusal> {
    let sender = out.0.clone();
    let mut builder = tar::Builder::new(std::io::BufWriter::with_capacity(MAX_FRAME, out));
    let mut links: HashSet<PathBuf> = HashSet::new();
    let mut counted = UploadResult::default();
    let refuse = |m: String| Refusal::Refused(ServiceError::bad_request(m));
    let unreadable = |e: io::Error| {
        read_refusal(&e).unwrap_or_else(|| refuse(format!("the body is not a tar archive: {e}")))
    };
    let entries = archive.entries().map_err(unreadable)?;
    for entry in entries {
        let mut entry = entry.map_err(unreadable)?;
        let path = entry
            .path()
            .map_err(|e| refuse(format!("an entry's path: {e}")))?
            .into_owned();
        check_entry_path(&path, &links).map_err(&refuse)?;
        let mut header = entry.header().clone();
        let kind = header.entry_type();
        counted.bytes += entry.size();
        if counted.bytes > MAX_UPLOAD_BYTES {
            return Err(Refusal::Refused(ServiceError::new(
                ErrorCode::PayloadTooLarge,
                format!("the archive unpacks to more than {MAX_UPLOAD_BYTES} bytes"),
            )));
        }
        let written = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Directory => {
                builder.append_data(&mut header, &path, &mut entry)
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(|e| refuse(format!("the link target of '{}': {e}", path.display())))?
                    .ok_or_else(|| refuse(format!("link '{}' has no target", path.display())))?
                    .into_owned();
                if kind == tar::EntryType::Link {
                    // A hard link names another entry of the archive.
                    check_entry_path(&target, &links).map_err(&refuse)?;
                } else {
                    links.insert(normal(&path));
                }
                builder.append_link(&mut header, &path, &target)
            }
            other => {
                return Err(refuse(format!(
                    "entry '{}' is a {other:?}: an upload takes files, directories and links",
                    path.display()
                )));
            }
        };
        written.map_err(|e| read_refusal(&e).unwrap_or(Refusal::Closed))?;
        counted.entries += 1;
    }
    builder
        .into_inner()
        .and_then(|mut w| w.flush())
        .map_err(|_| Refusal::Closed)?;
    let _ = sender.blocking_send(Frame::CloseStdin);
    Ok(counted)
}

/// An entry's path is relative, has no `..` and is under no link the archive made before it.
fn check_entry_path(path: &Path, links: &HashSet<PathBuf>) -> Result<(), String> {
    let shown = path.display();
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "entry '{shown}' has a '..': it would leave the directory"
        ));
    }
    if path.has_root() {
        return Err(format!(
            "entry '{shown}' is absolute: entries are relative to the directory"
        ));
    }
    let normal = normal(path);
    if normal.ancestors().skip(1).any(|a| links.contains(a)) {
        return Err(format!(
            "entry '{shown}' is under a link the archive made: it would be written through it"
        ));
    }
    Ok(())
}

/// A relative path without `.` components.
fn normal(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        build(&mut b);
        b.into_inner().unwrap()
    }

    fn file(b: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8], mode: u32) {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_entry_type(tar::EntryType::Regular);
        // Raw names: the builder's own checks would refuse the bad ones the test needs.
        let name = h.as_old_mut().name.as_mut();
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    fn link(b: &mut tar::Builder<Vec<u8>>, path: &str, target: &str) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        b.append_link(&mut h, path, target).unwrap();
    }

    /// Runs the check: what it passed (re-read) or its refusal's message.
    /// An entry as the sandbox would see it: path, mode, content.
    type Seen = (String, u32, Vec<u8>);

    fn check(bytes: Vec<u8>) -> Result<(UploadResult, Vec<Seen>), String> {
        let (tx, mut rx) = mpsc::channel(1024);
        let result = check_archive(&bytes[..], FrameWriter(tx));
        let mut out = Vec::new();
        while let Ok(frame) = rx.try_recv() {
            if let Frame::Stdin(b) = frame {
                out.extend_from_slice(&b);
            }
        }
        match result {
            Ok(counted) => {
                let mut seen = Vec::new();
                for e in tar::Archive::new(&out[..]).entries().unwrap() {
                    let mut e = e.unwrap();
                    let mut data = Vec::new();
                    e.read_to_end(&mut data).unwrap();
                    let path = e.path().unwrap().display().to_string();
                    seen.push((path, e.header().mode().unwrap(), data));
                }
                Ok((counted, seen))
            }
            Err(Refusal::Refused(e)) => Err(e.message),
            Err(Refusal::Closed) => Err("closed".into()),
        }
    }

    #[test]
    fn archives_pass_with_modes_and_bad_entries_are_refused() {
        let long = format!("d/{}", "x".repeat(150));
        let good = archive(|b| {
            file(b, "run.sh", b"#!/bin/sh\n", 0o755);
            link(b, "latest", "/etc/hostname");
            let mut h = tar::Header::new_gnu();
            h.set_size(2);
            h.set_mode(0o600);
            b.append_data(&mut h, &long, &b"hi"[..]).unwrap();
        });
        let (counted, seen) = check(good).unwrap();
        assert_eq!((counted.entries, counted.bytes), (3, 12));
        assert_eq!(seen[0], ("run.sh".into(), 0o755, b"#!/bin/sh\n".to_vec()));
        assert_eq!(seen[1].0, "latest");
        assert_eq!(seen[2], (long.clone(), 0o600, b"hi".to_vec()));

        for (bad, wanted) in [
            (archive(|b| file(b, "../etc/passwd", b"x", 0o644)), "'..'"),
            (archive(|b| file(b, "/etc/passwd", b"x", 0o644)), "absolute"),
            (
                archive(|b| {
                    link(b, "out", "/");
                    file(b, "out/etc/passwd", b"x", 0o644);
                }),
                "under a link",
            ),
            (b"not a tar archive at all".repeat(40), "not a tar archive"),
        ] {
            let err = check(bad).unwrap_err();
            assert!(err.contains(wanted), "{err}");
        }
        let fifo = archive(|b| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Fifo);
            h.set_size(0);
            b.append_data(&mut h, "pipe", std::io::empty()).unwrap();
        });
        assert!(check(fifo).unwrap_err().contains("Fifo"));
    }

    #[test]
    fn oversized_extension_headers_are_refused_by_their_header() {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::GNULongName);
        h.set_size(4 << 30);
        h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        h.set_cksum();
        let mut bytes = h.as_bytes().to_vec();
        bytes.extend(vec![b'a'; 4096]);
        let err = check(bytes).unwrap_err();
        assert!(
            err.contains("GNU long name ('L') of 4294967296 bytes; extension headers may hold"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn bodies_past_the_limit_are_refused_once_then_drained() {
        use futures_util::StreamExt;
        let chunks = (0..3).map(|_| Ok(Bytes::from(vec![0u8; 10])));
        let seen: Vec<io::Result<Bytes>> = capped(futures_util::stream::iter(chunks), 15)
            .collect()
            .await;
        assert!(seen[0].is_ok() && seen[2].is_ok());
        let err = seen[1].as_ref().unwrap_err();
        match read_refusal(err) {
            Some(Refusal::Refused(e)) => assert_eq!(e.code, ErrorCode::PayloadTooLarge),
            _ => panic!("not a refusal: {err}"),
        }
        assert!(read_refusal(&io::Error::other("a client went away")).is_none());
    }
}
