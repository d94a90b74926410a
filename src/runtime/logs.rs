//! Per-sandbox log files in the CRI format (`<RFC 3339 nanos> <stream> <F|P> <text>`), written
//! by the shim with a size cap and one rotated file, read back as snapshots with `tail` and
//! `since`.
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Longest line written as one entry; longer output is split into partial (`P`) entries.
const MAX_ENTRY: usize = 16 * 1024;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Appends entries to `<path>`, rotating to `<path>.1` past `max_bytes`.
pub struct LogWriter {
    path: PathBuf,
    file: File,
    size: u64,
    max_bytes: u64,
    pending: [Vec<u8>; 2],
}

fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

impl LogWriter {
    /// Opens (appending) the log at `path`.
    pub fn open(path: &Path, max_bytes: u64) -> std::io::Result<LogWriter> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(LogWriter {
            path: path.to_path_buf(),
            file,
            size,
            max_bytes: max_bytes.max(4096),
            pending: [Vec::new(), Vec::new()],
        })
    }

    /// Feeds raw bytes read from a stream; complete lines are written at once.
    pub fn write(&mut self, stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
        let index = stream as usize;
        self.pending[index].extend_from_slice(bytes);
        loop {
            let buf = &self.pending[index];
            if let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf[..pos].to_vec();
                self.pending[index].drain(..=pos);
                self.entry(stream, b'F', &line)?;
            } else if buf.len() >= MAX_ENTRY {
                let chunk: Vec<u8> = buf[..MAX_ENTRY].to_vec();
                self.pending[index].drain(..MAX_ENTRY);
                self.entry(stream, b'P', &chunk)?;
            } else {
                return Ok(());
            }
        }
    }

    /// Writes what is left of a stream that ended without a newline.
    pub fn flush_stream(&mut self, stream: Stream) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.pending[stream as usize]);
        if rest.is_empty() {
            Ok(())
        } else {
            self.entry(stream, b'F', &rest)
        }
    }

    fn entry(&mut self, stream: Stream, tag: u8, text: &[u8]) -> std::io::Result<()> {
        let now = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string());
        let mut line = Vec::with_capacity(text.len() + 48);
        line.extend_from_slice(now.as_bytes());
        line.push(b' ');
        line.extend_from_slice(stream.as_str().as_bytes());
        line.push(b' ');
        line.push(tag);
        line.push(b' ');
        line.extend_from_slice(text);
        line.push(b'\n');
        if self.size + line.len() as u64 > self.max_bytes && self.size > 0 {
            self.rotate()?;
        }
        self.file.write_all(&line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        std::fs::rename(&self.path, rotated(&self.path))?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

/// Turns log file bytes into text lines: entries split on newlines (a trailing piece kept for
/// the next bytes), partial (`P`) entries joined to the entry that ends them.
#[derive(Default)]
struct Parser {
    raw: Vec<u8>,
    partial: [String; 2],
}

/// A complete line: its time and its text.
struct Line {
    at: String,
    text: String,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Line>) {
        self.raw.extend_from_slice(bytes);
        let Some(end) = self.raw.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let complete: Vec<u8> = self.raw.drain(..=end).collect();
        for raw in String::from_utf8_lossy(&complete).lines() {
            let mut parts = raw.splitn(4, ' ');
            let (Some(ts), Some(stream), Some(tag)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let index = usize::from(stream == "stderr");
            self.partial[index].push_str(parts.next().unwrap_or(""));
            if tag == "P" {
                continue;
            }
            out.push(Line {
                at: ts.to_string(),
                text: std::mem::take(&mut self.partial[index]),
            });
        }
    }
}

/// Lines as the API gives them: each text with a newline.
fn joined<'a>(lines: impl Iterator<Item = &'a Line>) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(&line.text);
        out.push('\n');
    }
    out
}

/// The last `tail` of `lines` whose time is at or after `now - since` (`since` 0: no filter).
fn last(lines: &[Line], tail: usize, since_secs: u64, now: OffsetDateTime) -> String {
    let cutoff = (since_secs > 0).then(|| now - time::Duration::seconds(since_secs as i64));
    let kept: Vec<&Line> = lines
        .iter()
        .filter(|line| match cutoff {
            Some(cutoff) => {
                matches!(OffsetDateTime::parse(&line.at, &Rfc3339), Ok(at) if at >= cutoff)
            }
            None => true,
        })
        .collect();
    joined(kept[kept.len().saturating_sub(tail)..].iter().copied())
}

/// Reads the log at `path` (and its rotated predecessor): the last `tail` lines whose time is
/// at or after `now - since` (`since` 0: no time filter), partial entries joined.
pub fn read(path: &Path, tail: usize, since_secs: u64, now: OffsetDateTime) -> String {
    let mut parser = Parser::default();
    let mut lines = Vec::new();
    for file in [rotated(path), path.to_path_buf()] {
        if let Ok(bytes) = std::fs::read(&file) {
            parser.feed(&bytes, &mut lines);
        }
    }
    last(&lines, tail, since_secs, now)
}

/// Follows a log as it grows, across rotations: the file being read is held open, so what
/// was written to it before it was rotated away is read to its end before the new file is
/// opened — no line is lost or read twice (unless the log rotates twice between two polls).
pub struct Follower {
    path: PathBuf,
    file: Option<File>,
    parser: Parser,
}

impl Follower {
    /// Starts following the log at `path`: the follower, and the lines already there as
    /// [`read`] gives them.
    pub fn open(
        path: &Path,
        tail: usize,
        since_secs: u64,
        now: OffsetDateTime,
    ) -> (Follower, String) {
        let mut follower = Follower {
            path: path.to_path_buf(),
            file: File::open(path).ok(),
            parser: Parser::default(),
        };
        let mut lines = Vec::new();
        // The predecessor first (when this file was opened, it was complete), then this one.
        if follower.file.is_some() {
            if let Ok(bytes) = std::fs::read(rotated(path)) {
                follower.parser.feed(&bytes, &mut lines);
            }
        }
        follower.read_to_end(&mut lines);
        let text = last(&lines, tail, since_secs, now);
        (follower, text)
    }

    fn read_to_end(&mut self, lines: &mut Vec<Line>) {
        use std::io::Read;
        if let Some(file) = self.file.as_mut() {
            let mut bytes = Vec::new();
            if file.read_to_end(&mut bytes).is_ok() {
                self.parser.feed(&bytes, lines);
            }
        }
    }

    /// The lines written since the last call.
    pub fn poll(&mut self) -> String {
        use std::os::unix::fs::MetadataExt;
        let mut lines = Vec::new();
        // Which file the path names is looked at first: once it names another, the held one
        // gets no more writes, and reading it to its end below reads all of it.
        let current = std::fs::metadata(&self.path).ok().map(|m| m.ino());
        let held = self
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| m.ino());
        self.read_to_end(&mut lines);
        if current.is_some() && current != held {
            self.file = File::open(&self.path).ok();
            self.read_to_end(&mut lines);
        }
        joined(lines.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_with_tail_partials_and_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sandbox.log");
        let mut writer = LogWriter::open(&path, 4096).unwrap();
        writer.write(Stream::Stdout, b"one\ntw").unwrap();
        writer.write(Stream::Stderr, b"err\n").unwrap();
        writer.write(Stream::Stdout, b"o\n").unwrap();
        writer.write(Stream::Stdout, b"no newline").unwrap();
        writer.flush_stream(Stream::Stdout).unwrap();
        let now = OffsetDateTime::now_utc();
        assert_eq!(read(&path, 200, 0, now), "one\nerr\ntwo\nno newline\n");
        assert_eq!(read(&path, 2, 0, now), "two\nno newline\n");
        assert_eq!(read(&path, 200, 60, now), "one\nerr\ntwo\nno newline\n");
        let later = now + time::Duration::seconds(3600);
        assert_eq!(read(&path, 200, 60, later), "");

        let long = vec![b'x'; MAX_ENTRY + 10];
        writer.write(Stream::Stdout, &long).unwrap();
        writer.write(Stream::Stdout, b"\n").unwrap();
        let text = read(&path, 1, 0, now);
        assert_eq!(text.trim_end().len(), MAX_ENTRY + 10);

        for i in 0..200 {
            writer
                .write(Stream::Stdout, format!("line {i}\n").as_bytes())
                .unwrap();
        }
        let size = std::fs::metadata(&path).unwrap().len()
            + std::fs::metadata(rotated(&path)).unwrap().len();
        assert!(size <= 2 * 4096 + 64, "capped: {size}");
        assert!(read(&path, 1, 0, now).contains("line 199"));
        assert!(read(&path, 0, 0, now).is_empty());
    }

    #[test]
    fn a_follower_reads_every_line_once_across_rotations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sandbox.log");
        let mut writer = LogWriter::open(&path, 4096).unwrap();
        writer
            .write(Stream::Stdout, b"before 1\nbefore 2\n")
            .unwrap();
        let now = OffsetDateTime::now_utc();
        let (mut follower, first) = Follower::open(&path, 1, 0, now);
        assert_eq!(first, "before 2\n");
        let mut seen = String::new();
        for i in 0..2000 {
            writer
                .write(Stream::Stdout, format!("line {i}\n").as_bytes())
                .unwrap();
            if i % 7 == 0 {
                writer.write(Stream::Stderr, b"half ").unwrap();
            }
            if i % 7 == 3 {
                writer.write(Stream::Stderr, b"done\n").unwrap();
            }
            if i % 13 == 0 {
                seen.push_str(&follower.poll());
            }
        }
        seen.push_str(&follower.poll());
        let lines: Vec<&str> = seen.lines().filter(|l| l.starts_with("line ")).collect();
        let wanted: Vec<String> = (0..2000).map(|i| format!("line {i}")).collect();
        assert_eq!(lines, wanted);
        assert_eq!(seen.lines().filter(|l| *l == "half done").count(), 286);
        assert!(std::fs::metadata(rotated(&path)).is_ok(), "the log rotated");
    }
}
