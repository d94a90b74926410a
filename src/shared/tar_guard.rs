//! A guard in front of the `tar` crate for archives from untrusted hands (uploads, image
//! layers). The crate reads a GNU long name or long link (`L`, `K`) and a PAX header (`x`)
//! whole into memory, as large as its header announces, before it hands out the entry they
//! describe; and it keeps a GNU sparse file's map of holes (blocks that follow the header) in
//! memory too. The guard follows the archive's 512-byte headers as the bytes pass, the way the
//! crate does (PAX `size` overrides and sparse map blocks included), and fails the read that
//! brings a header announcing more than [`MAX_EXTENSION_BYTES`] of such data, so the crate
//! never starts reading it.
use std::io::{self, Read};

/// The most an extension header (GNU long name or link, PAX `x` or `g`) may announce, and
/// the most sparse map blocks a GNU sparse entry may carry (64 KiB: a Linux path is at most
/// 4 KiB; PAX headers with extended attributes stay far below it).
pub const MAX_EXTENSION_BYTES: u64 = 64 * 1024;

/// A tar block.
const BLOCK: usize = 512;

/// Where the byte after an extension block of a GNU sparse map says another follows.
const SPARSE_EXT_FLAG: usize = 21 * 24;

/// The refusal of an archive by [`TarGuard`]: what the header announced, for the caller.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ExtensionTooLarge(String);

impl ExtensionTooLarge {
    /// The refusal an I/O error carries (anywhere in its chain), if it is one.
    pub fn find(error: &io::Error) -> Option<&ExtensionTooLarge> {
        let mut source: Option<&(dyn std::error::Error + 'static)> = error.get_ref().map(|e| {
            let e: &(dyn std::error::Error + 'static) = e;
            e
        });
        while let Some(e) = source {
            if let Some(found) = e.downcast_ref::<ExtensionTooLarge>() {
                return Some(found);
            }
            source = e.source();
        }
        None
    }

    /// The message, for an error of the caller's.
    pub fn message(&self) -> &str {
        &self.0
    }
}

/// What the next bytes of the archive are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A header (or a block of zeros, which the crate takes as the end).
    Header,
    /// A block of a GNU sparse entry's map (`n` read so far).
    SparseMap(u64),
    /// The data of an entry, padding included.
    Data,
    /// Nothing to follow: the crate fails on the last header (bad checksum or size field),
    /// so it reads no further entries.
    Done,
}

/// A reader that refuses oversized extension headers before the `tar` crate reads them; see
/// the module doc. Wrap the raw archive in it and hand it to `tar::Archive::new`.
pub struct TarGuard<R> {
    inner: R,
    expect: Expect,
    block: Box<[u8; BLOCK]>,
    filled: usize,
    /// Bytes of the current entry's data still to pass, padding included.
    data_left: u64,
    /// How many of them are content (not padding).
    content_left: u64,
    /// The data of a PAX `x` header the crate reads as one (bounded by the check).
    pax: Option<Vec<u8>>,
    /// Whether the data passing now is such a header's.
    capturing: bool,
    /// The entry after these headers is a GNU sparse entry with a map to follow.
    sparse_next: bool,
    /// Headers seen, for messages.
    headers: u64,
    /// Bytes passed, for messages.
    offset: u64,
    refused: Option<ExtensionTooLarge>,
}

impl<R: Read> TarGuard<R> {
    /// Guards `inner`, an archive read from its first byte.
    pub fn new(inner: R) -> TarGuard<R> {
        TarGuard {
            inner,
            expect: Expect::Header,
            block: Box::new([0; BLOCK]),
            filled: 0,
            data_left: 0,
            content_left: 0,
            pax: None,
            capturing: false,
            sparse_next: false,
            headers: 0,
            offset: 0,
            refused: None,
        }
    }

    /// The reader inside (e.g. to drain the rest of a refused upload).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Follows `bytes`, the next ones of the archive.
    fn follow(&mut self, mut bytes: &[u8]) -> Result<(), ExtensionTooLarge> {
        while !bytes.is_empty() {
            match self.expect {
                Expect::Done => return Ok(()),
                Expect::Header | Expect::SparseMap(_) => {
                    let n = (BLOCK - self.filled).min(bytes.len());
                    self.block[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
                    self.filled += n;
                    self.offset += n as u64;
                    bytes = &bytes[n..];
                    if self.filled == BLOCK {
                        self.filled = 0;
                        match self.expect {
                            Expect::Header => self.header()?,
                            Expect::SparseMap(n) => self.sparse_map_block(n)?,
                            _ => {}
                        }
                    }
                }
                Expect::Data => {
                    let n = (self.data_left.min(bytes.len() as u64)) as usize;
                    let content = (self.content_left.min(n as u64)) as usize;
                    if self.capturing {
                        if let Some(pax) = &mut self.pax {
                            pax.extend_from_slice(&bytes[..content]);
                        }
                    }
                    self.content_left -= content as u64;
                    self.data_left -= n as u64;
                    self.offset += n as u64;
                    bytes = &bytes[n..];
                    if self.data_left == 0 {
                        self.capturing = false;
                        self.expect = Expect::Header;
                    }
                }
            }
        }
        Ok(())
    }

    /// A whole header block: what follows it, as the crate reads it (`Archive::entries`).
    fn header(&mut self) -> Result<(), ExtensionTooLarge> {
        let header = tar::Header::from_byte_slice(&self.block[..]);
        if self.block.iter().all(|b| *b == 0) {
            // The crate ends the archive here; were it told to skip zeros, it would read the
            // next block as a header, as the guard does.
            return Ok(());
        }
        self.headers += 1;
        let sum = self.block[..148]
            .iter()
            .chain(&self.block[156..])
            .fold(0u32, |a, b| a + u32::from(*b))
            + 8 * 32;
        let Ok(size) = header.entry_size() else {
            self.expect = Expect::Done;
            return Ok(());
        };
        if header.cksum().ok() != Some(sum) {
            self.expect = Expect::Done;
            return Ok(());
        }
        let kind = header.entry_type();
        let what = match kind {
            tar::EntryType::GNULongName => Some("GNU long name"),
            tar::EntryType::GNULongLink => Some("GNU long link"),
            tar::EntryType::XHeader => Some("PAX extended header"),
            tar::EntryType::XGlobalHeader => Some("PAX global header"),
            _ => None,
        };
        if let Some(what) = what {
            if size > MAX_EXTENSION_BYTES {
                return Err(ExtensionTooLarge(format!(
                    "tar header {} (at byte {}) is a {what} ('{}') of {size} bytes; extension \
                     headers may hold at most {MAX_EXTENSION_BYTES} bytes",
                    self.headers,
                    self.offset - BLOCK as u64,
                    char::from(kind.as_byte()),
                )));
            }
        }
        // The crate reads `L`, `K` and `x` of a ustar or GNU header as part of the next entry
        // (and anything else, or those of an old-style header, as an entry of its own).
        let recognized = header.as_gnu().is_some() || header.as_ustar().is_some();
        let absorbed = recognized
            && matches!(
                kind,
                tar::EntryType::GNULongName | tar::EntryType::GNULongLink | tar::EntryType::XHeader
            );
        let mut data = size;
        if what.is_none() {
            // A PAX `size` replaces the header's for the entry it describes.
            if let Some(pax_size) = self.pax.as_deref().and_then(pax_size) {
                data = pax_size;
            }
        }
        if !absorbed {
            // The entry the crate hands out: the PAX header was its.
            self.pax = None;
            self.sparse_next =
                kind.is_gnu_sparse() && header.as_gnu().is_some_and(tar::GnuHeader::is_extended);
        } else if kind == tar::EntryType::XHeader {
            if self.pax.is_some() {
                // Two for one entry: the crate refuses the archive.
                self.expect = Expect::Done;
                return Ok(());
            }
            self.pax = Some(Vec::new());
            self.capturing = true;
        }
        let Some(padded) = data.checked_add(BLOCK as u64 - 1) else {
            self.expect = Expect::Done;
            return Ok(());
        };
        self.data_left = padded & !(BLOCK as u64 - 1);
        self.content_left = data;
        self.expect = if self.sparse_next && !absorbed {
            Expect::SparseMap(0)
        } else {
            self.after_header()
        };
        Ok(())
    }

    /// The data of the entry whose header (and sparse map) passed.
    fn after_header(&mut self) -> Expect {
        if self.data_left == 0 {
            self.capturing = false;
            Expect::Header
        } else {
            Expect::Data
        }
    }

    /// A whole block of a GNU sparse map, the `n`th.
    fn sparse_map_block(&mut self, n: u64) -> Result<(), ExtensionTooLarge> {
        let n = n + 1;
        if n * BLOCK as u64 > MAX_EXTENSION_BYTES {
            return Err(ExtensionTooLarge(format!(
                "tar header {} has a GNU sparse map of more than {MAX_EXTENSION_BYTES} bytes",
                self.headers
            )));
        }
        self.expect = if self.block[SPARSE_EXT_FLAG] == 1 {
            Expect::SparseMap(n)
        } else {
            self.sparse_next = false;
            self.after_header()
        };
        Ok(())
    }
}

/// The `size` record of PAX extensions, read as the crate reads it (the first one; none when
/// a record before it is malformed).
fn pax_size(pax: &[u8]) -> Option<u64> {
    for extension in tar::PaxExtensions::new(pax) {
        let extension = extension.ok()?;
        if extension.key() != Ok("size") {
            continue;
        }
        return extension.value().ok()?.parse().ok();
    }
    None
}

impl<R: Read> Read for TarGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(refused) = &self.refused {
            return Err(io::Error::new(io::ErrorKind::InvalidData, refused.clone()));
        }
        let n = self.inner.read(buf)?;
        if let Err(refused) = self.follow(&buf[..n]) {
            self.refused = Some(refused.clone());
            return Err(io::Error::new(io::ErrorKind::InvalidData, refused));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header block of `kind` announcing `size` bytes (GNU magic unless `old`).
    fn header(name: &str, kind: tar::EntryType, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
        h
    }

    fn padded(data: &[u8]) -> Vec<u8> {
        let mut v = data.to_vec();
        v.resize(data.len().div_ceil(BLOCK) * BLOCK, 0);
        v
    }

    /// Reads the archive through the guard with the crate: entry paths and sizes, or the error.
    fn entries(bytes: &[u8]) -> Result<Vec<(String, u64)>, io::Error> {
        let mut archive = tar::Archive::new(TarGuard::new(bytes));
        let mut seen = Vec::new();
        for entry in archive.entries()? {
            let mut entry = entry?;
            let path = entry.path()?.display().to_string();
            let mut data = Vec::new();
            entry.read_to_end(&mut data)?;
            seen.push((path, data.len() as u64));
        }
        Ok(seen)
    }

    #[test]
    fn long_names_and_pax_up_to_the_limit_pass() {
        let long = "d/".repeat(2000) + "f";
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(3);
        h.set_mode(0o644);
        b.append_data(&mut h, &long, &b"abc"[..]).unwrap();
        // A PAX header of exactly the limit, then a file whose size it replaces: a comment
        // record (its length counts its own digits) filling what `size=5` leaves.
        let mut pax = String::new();
        let room = MAX_EXTENSION_BYTES as usize - "9 size=5\n".len();
        for value in 0..room {
            let body = format!(" comment={}\n", "x".repeat(room - value));
            let total = body.len() + (body.len() + 5).to_string().len();
            if total == room {
                pax = format!("{total}{body}");
                break;
            }
        }
        pax.push_str("9 size=5\n");
        assert_eq!(pax.len() as u64, MAX_EXTENSION_BYTES, "{}", pax.len());
        let mut bytes = b.into_inner().unwrap();
        bytes.truncate(bytes.len() - 2 * BLOCK);
        bytes.extend(header("pax", tar::EntryType::XHeader, pax.len() as u64).as_bytes());
        bytes.extend(padded(pax.as_bytes()));
        // The header says 1 byte; the PAX size (5) is what the crate reads.
        bytes.extend(header("five", tar::EntryType::Regular, 1).as_bytes());
        bytes.extend(padded(b"12345"));
        // An `L` inside the data of the first file must not count: it is content.
        bytes.extend(header("inner", tar::EntryType::Regular, 512).as_bytes());
        bytes.extend(header("fake", tar::EntryType::GNULongName, 1 << 40).as_bytes());
        bytes.extend([0u8; 2 * BLOCK]);
        let seen = entries(&bytes).unwrap();
        assert_eq!(
            seen,
            vec![(long, 3), ("five".into(), 5), ("inner".into(), 512)]
        );
    }

    #[test]
    fn oversized_extension_headers_are_refused_before_their_data() {
        for kind in [
            tar::EntryType::GNULongName,
            tar::EntryType::GNULongLink,
            tar::EntryType::XHeader,
            tar::EntryType::XGlobalHeader,
        ] {
            let mut bytes = header("ok", tar::EntryType::Regular, 3).as_bytes().to_vec();
            bytes.extend(padded(b"abc"));
            bytes.extend(header("big", kind, MAX_EXTENSION_BYTES + 1).as_bytes());
            // What follows is never read: a reader that fails once past the header.
            let reader = bytes.as_slice().chain(FailingReader);
            let mut archive = tar::Archive::new(TarGuard::new(reader));
            let mut entries = archive.entries().unwrap();
            let first = entries.next().unwrap().unwrap();
            assert_eq!(first.path().unwrap().to_str(), Some("ok"));
            drop(first);
            let err = entries.next().unwrap().err().unwrap();
            let refused = ExtensionTooLarge::find(&err).unwrap_or_else(|| panic!("{err}"));
            assert!(
                refused.message().contains(&format!(
                    "of {} bytes; extension headers may hold at most 65536",
                    MAX_EXTENSION_BYTES + 1
                )),
                "{refused}"
            );
        }
        // 4 GiB announced in base-256, as a writer would for a large size.
        let mut h = header("huge", tar::EntryType::GNULongName, 0);
        h.as_old_mut().size = [0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        h.set_cksum();
        assert_eq!(h.entry_size().unwrap(), 1 << 32);
        let err = entries(&[h.as_bytes().as_slice(), &[b'a'; 4096]].concat()).unwrap_err();
        assert!(ExtensionTooLarge::find(&err).is_some(), "{err}");
    }

    #[test]
    fn sparse_maps_are_bounded() {
        let mut h = header("sparse", tar::EntryType::GNUSparse, 0);
        let gnu = h.as_gnu_mut().unwrap();
        gnu.isextended[0] = 1;
        gnu.realsize = *b"00000000000\0";
        h.set_cksum();
        let mut bytes = h.as_bytes().to_vec();
        let mut ext = [0u8; BLOCK];
        ext[SPARSE_EXT_FLAG] = 1;
        for _ in 0..200 {
            bytes.extend(ext);
        }
        let err = entries(&bytes).unwrap_err();
        assert!(
            ExtensionTooLarge::find(&err).is_some_and(|e| e.message().contains("sparse map")),
            "{err}"
        );
    }

    /// A reader that fails: the test's proof that nothing past a point was read.
    struct FailingReader;

    impl Read for FailingReader {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other("read past the refused header"))
        }
    }
}
