//! Layer unpacking: a layer tar (verified against its digest while it streams) written into a
//! directory the way overlayfs reads it, whiteouts and opaque directories included. What a
//! layer may cost is bounded: extension headers by [`TarGuard`], the bytes unpacked by the
//! image's and the store's [`Budget`]; device nodes are not unpacked (a layer may carry
//! `/dev/mem`; only overlay whiteouts, `0/0` character devices, are made).
use super::*;
use crate::shared::tar_guard::{ExtensionTooLarge, TarGuard};

/// Where a layer came from, for error messages.
pub(super) enum Origin {
    Registry(String),
    Archive,
}

/// Why a layer could not be unpacked.
#[derive(Debug)]
pub(super) enum UnpackError {
    /// The layer's content is not a valid or safe layer.
    Invalid(String),
    /// The unsupported compression, or the like.
    Unsupported(String),
    /// Past a bound: an extension header too large, or the image's size limit.
    TooLarge(String),
    /// The store's size limit.
    StoreFull(String),
    /// The store's filesystem failed.
    Io(String, io::Error),
}

impl UnpackError {
    pub(super) fn into_image_error(self, diff_id: &str, origin: &Origin) -> ImageError {
        match (self, origin) {
            (UnpackError::Invalid(reason), Origin::Registry(reference)) => ImageError::Registry(
                format!("layer {diff_id} of {reference} is not a valid layer: {reason}"),
            ),
            (UnpackError::Invalid(reason), Origin::Archive) => ImageError::InvalidArchive(format!(
                "layer {diff_id} in the archive is not a valid layer: {reason}"
            )),
            (UnpackError::Unsupported(reason), _) => ImageError::Unsupported(reason),
            (UnpackError::TooLarge(reason), Origin::Registry(reference)) => ImageError::TooLarge(
                format!("layer {diff_id} of {reference} is refused: {reason}"),
            ),
            (UnpackError::TooLarge(reason), Origin::Archive) => ImageError::TooLarge(format!(
                "layer {diff_id} in the archive is refused: {reason}"
            )),
            (UnpackError::StoreFull(reason), _) => ImageError::StoreFull(reason),
            (UnpackError::Io(context, source), _) => ImageError::Io { context, source },
        }
    }

    /// A failed read of the layer: a bound it passed, else `otherwise`'s error.
    pub(super) fn from_read(
        e: io::Error,
        otherwise: impl FnOnce(io::Error) -> UnpackError,
    ) -> Self {
        if let Some(refused) = ExtensionTooLarge::find(&e) {
            return UnpackError::TooLarge(refused.message().to_string());
        }
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<OverBudget>())
        {
            Some(OverBudget::Image(reason)) => UnpackError::TooLarge(reason.clone()),
            Some(OverBudget::Store(reason)) => UnpackError::StoreFull(reason.clone()),
            None => otherwise(e),
        }
    }
}

/// Why a [`Budget`] refused more bytes.
#[derive(Debug, thiserror::Error)]
pub(super) enum OverBudget {
    /// The image's limit (`[images] maxImageBytes`).
    #[error("{0}")]
    Image(String),
    /// The store's (`[images] maxStoreBytes`).
    #[error("{0}")]
    Store(String),
}

/// What one pull or import may unpack: the image's limit, and the store's room, counted in
/// bytes of uncompressed layer tar (files, their metadata and the archive's headers: what an
/// attacker cannot shrink by writing no file content) as they are read.
#[derive(Debug)]
pub(super) struct Budget {
    /// The image, for messages.
    pub(super) reference: String,
    pub(super) limits: ImageLimits,
    /// Bytes of this image so far (layers the store had count with their size).
    pub(super) used: AtomicU64,
    /// Layers counted, each once.
    counted: Mutex<HashSet<String>>,
    pub(super) store: Arc<StoreSize>,
}

impl Budget {
    pub(super) fn new(reference: &str, limits: ImageLimits, store: Arc<StoreSize>) -> Budget {
        Budget {
            reference: reference.to_string(),
            limits,
            used: AtomicU64::new(0),
            counted: Mutex::new(HashSet::new()),
            store,
        }
    }

    /// Whether the layer `hex` is counted for the first time (it is from now on).
    pub(super) fn first_time(&self, hex: &str) -> bool {
        self.counted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(hex.to_string())
    }

    /// Counts a layer the store has, of `size` bytes, to the image.
    pub(super) fn reuse(&self, hex: &str, size: u64) -> Result<(), ImageError> {
        if !self.first_time(hex) {
            return Ok(());
        }
        let used = self.used.fetch_add(size, Ordering::Relaxed) + size;
        if used > self.limits.max_image_bytes {
            return Err(ImageError::TooLarge(self.image_message()));
        }
        Ok(())
    }

    /// Counts `n` more unpacked bytes to the image and the store.
    fn charge(&self, n: u64) -> Result<(), OverBudget> {
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        let unpacking = self.store.unpacking.fetch_add(n, Ordering::Relaxed) + n;
        if used > self.limits.max_image_bytes {
            return Err(OverBudget::Image(self.image_message()));
        }
        let total = self.store.recorded.load(Ordering::Relaxed) + unpacking;
        if total > self.limits.max_store_bytes {
            return Err(OverBudget::Store(format!(
                "the image store is full: {} would take it past its limit of {} bytes \
                 ([images] maxStoreBytes in the daemon's config)",
                self.reference, self.limits.max_store_bytes
            )));
        }
        Ok(())
    }

    fn image_message(&self) -> String {
        format!(
            "image {} unpacks to more than {} bytes, the limit of one image ([images] \
             maxImageBytes in the daemon's config)",
            self.reference, self.limits.max_image_bytes
        )
    }
}

/// A reader that charges what passes through it to a [`Budget`]; the store's count of bytes
/// being unpacked drops by as much when it is dropped (the layer is recorded by then, or gone).
pub(super) struct Metered<R> {
    inner: R,
    budget: Arc<Budget>,
    charged: u64,
}

impl<R> Metered<R> {
    pub(super) fn new(inner: R, budget: Arc<Budget>) -> Self {
        Metered {
            inner,
            budget,
            charged: 0,
        }
    }
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.charged += n as u64;
        self.budget.charge(n as u64).map_err(io::Error::other)?;
        Ok(n)
    }
}

impl<R> Drop for Metered<R> {
    fn drop(&mut self) {
        self.budget
            .store
            .unpacking
            .fetch_sub(self.charged, Ordering::Relaxed);
    }
}

pub(super) fn io_err(context: impl std::fmt::Display) -> impl FnOnce(io::Error) -> UnpackError {
    move |e| UnpackError::Io(context.to_string(), e)
}

/// A reader that hashes what passes through it.
pub(super) struct HashingReader<R> {
    pub(super) inner: R,
    pub(super) hasher: Sha256,
}

impl<R: Read> HashingReader<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
        }
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

pub(super) enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

/// Copies a reader to a writer, telling read failures (bad input) from write failures (host).
pub(super) fn copy_checked(
    reader: &mut impl Read,
    writer: &mut impl Write,
) -> Result<u64, CopyError> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        writer.write_all(&buffer[..n]).map_err(CopyError::Write)?;
        total += n as u64;
    }
}

/// Reads the rest of a stream so its hash covers every byte (tar stops at its end marker).
pub(super) fn drain(reader: &mut impl Read) -> Result<(), UnpackError> {
    copy_checked(reader, &mut io::sink())
        .map(drop)
        .map_err(|e| match e {
            CopyError::Read(e) | CopyError::Write(e) => UnpackError::from_read(e, |e| {
                UnpackError::Invalid(format!("cannot read the layer to its end: {e}"))
            }),
        })
}

/// Unpacks a layer blob (tar or gzip'd tar, told apart by its magic bytes) into `dest`,
/// checking the blob against `blob_digest` (when given) and the tar against `diff_id`, and
/// charging its tar's bytes to `budget`. Returns the unpacked size.
pub(super) fn unpack_blob(
    blob: &Path,
    media_type: &str,
    blob_digest: Option<&str>,
    diff_id: &str,
    dest: &Path,
    budget: Arc<Budget>,
) -> Result<u64, UnpackError> {
    let file = File::open(blob).map_err(io_err(format_args!("cannot open {}", blob.display())))?;
    let mut compressed = BufReader::new(HashingReader::new(file));
    let magic = compressed
        .fill_buf()
        .map_err(io_err(format_args!("cannot read {}", blob.display())))?
        .to_vec();
    if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) || media_type.contains("zstd") {
        return Err(UnpackError::Unsupported(format!(
            "layer {diff_id} is zstd-compressed; sbx reads tar and gzip layers"
        )));
    }
    let size = {
        let decoder: Box<dyn Read + '_> = if magic.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::read::MultiGzDecoder::new(&mut compressed))
        } else {
            Box::new(&mut compressed)
        };
        let mut tar_stream = HashingReader::new(Metered::new(decoder, budget));
        let size = unpack_tar(&mut tar_stream, dest)?;
        drain(&mut tar_stream)?;
        let actual = sha256_digest(tar_stream.hasher);
        if actual != diff_id {
            return Err(UnpackError::Invalid(format!(
                "its content hashes to {actual}, not to its diff id"
            )));
        }
        size
    };
    if let Some(expected) = blob_digest {
        drain(&mut compressed)?;
        let actual = sha256_digest(compressed.into_inner().hasher);
        if actual != expected {
            return Err(UnpackError::Invalid(format!(
                "the blob hashes to {actual}, not to its digest {expected}"
            )));
        }
    }
    Ok(size)
}

/// An entry's path relative to the layer root, refusing absolute paths and `..`. `Ok(None)`
/// is the root itself.
pub(super) fn safe_relative(path: &Path) -> Result<Option<PathBuf>, String> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "entry '{}' escapes the layer with '..'",
                    clip(&path.to_string_lossy(), 200)
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "entry '{}' has an absolute path",
                    clip(&path.to_string_lossy(), 200)
                ));
            }
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

/// Makes sure every directory above `relative` exists inside `dest` as a real directory (never
/// through a symlink, which could point outside the layer).
pub(super) fn prepare_parents(dest: &Path, relative: &Path) -> Result<(), UnpackError> {
    let Some(parent) = relative.parent() else {
        return Ok(());
    };
    let mut current = dest.to_path_buf();
    for part in parent.components() {
        current.push(part);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(UnpackError::Invalid(format!(
                    "entry '{}' goes through the symlink '{}'",
                    relative.display(),
                    current.strip_prefix(dest).unwrap_or(&current).display()
                )));
            }
            Ok(_) => {
                return Err(UnpackError::Invalid(format!(
                    "entry '{}' is under '{}', which is not a directory",
                    relative.display(),
                    current.strip_prefix(dest).unwrap_or(&current).display()
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .mode(0o755)
                    .create(&current)
                    .map_err(io_err(format_args!("cannot create {}", current.display())))?;
            }
            Err(e) => {
                return Err(UnpackError::Io(
                    format!("cannot inspect {}", current.display()),
                    e,
                ));
            }
        }
    }
    Ok(())
}

/// Removes whatever is at `path` so a new entry can take its place; a directory is kept when
/// the new entry is a directory too. Returns whether a directory was kept.
pub(super) fn clear_path(path: &Path, keep_dir: bool) -> Result<bool, UnpackError> {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() && keep_dir => return Ok(true),
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => Err(e),
    };
    removed
        .map(|()| false)
        .map_err(io_err(format_args!("cannot replace {}", path.display())))
}

pub(super) fn set_xattr(path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())?;
    let c_name = CString::new(name)?;
    // SAFETY: both strings are NUL-terminated and live across the call; `value` is a valid
    // slice of `value.len()` bytes. lsetxattr does not follow a final symlink.
    let rc = unsafe {
        libc::lsetxattr(
            c_path.as_ptr(),
            c_name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Ownership, mode, time and extended attributes of one entry.
pub(super) struct EntryMeta {
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) mode: u32,
    pub(super) mtime: i64,
    pub(super) xattrs: Vec<(String, Vec<u8>)>,
}

impl EntryMeta {
    pub(super) fn read<R: Read>(entry: &mut tar::Entry<'_, R>) -> Result<EntryMeta, UnpackError> {
        let header = entry.header();
        let bad = |e: io::Error| UnpackError::Invalid(format!("bad tar header: {e}"));
        let mut meta = EntryMeta {
            uid: header.uid().map_err(bad)? as u32,
            gid: header.gid().map_err(bad)? as u32,
            mode: header.mode().map_err(bad)? & 0o7777,
            mtime: header.mtime().map_err(bad)? as i64,
            xattrs: Vec::new(),
        };
        if let Some(extensions) = entry.pax_extensions().map_err(bad)? {
            for extension in extensions {
                let extension = extension.map_err(bad)?;
                let Ok(key) = extension.key() else { continue };
                let value = extension.value_bytes();
                let number = || {
                    std::str::from_utf8(value)
                        .ok()?
                        .split('.')
                        .next()?
                        .parse()
                        .ok()
                };
                match key {
                    "uid" => meta.uid = number().unwrap_or(meta.uid as i64) as u32,
                    "gid" => meta.gid = number().unwrap_or(meta.gid as i64) as u32,
                    "mtime" => meta.mtime = number().unwrap_or(meta.mtime),
                    _ => {
                        // File capabilities and user attributes travel with the file; overlay's
                        // own `trusted.overlay.*` must never come from layer content.
                        let kept = key.strip_prefix("SCHILY.xattr.").filter(|name| {
                            *name == "security.capability" || name.starts_with("user.")
                        });
                        if let Some(name) = kept {
                            meta.xattrs.push((name.to_string(), value.to_vec()));
                        }
                    }
                }
            }
        }
        Ok(meta)
    }

    /// Applies ownership, then mode (chown clears set-id bits), extended attributes and time.
    pub(super) fn apply(&self, path: &Path, is_symlink: bool) -> Result<(), UnpackError> {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
            .map_err(io_err(format_args!("cannot chown {}", path.display())))?;
        if !is_symlink {
            fs::set_permissions(path, fs::Permissions::from_mode(self.mode))
                .map_err(io_err(format_args!("cannot chmod {}", path.display())))?;
        }
        for (name, value) in &self.xattrs {
            set_xattr(path, name, value).map_err(io_err(format_args!(
                "cannot set {name} on {}",
                path.display()
            )))?;
        }
        self.apply_time(path)
    }

    pub(super) fn apply_time(&self, path: &Path) -> Result<(), UnpackError> {
        use nix::sys::stat::{UtimensatFlags, utimensat};
        use nix::sys::time::TimeSpec;
        let time = TimeSpec::new(self.mtime, 0);
        utimensat(None, path, &time, &time, UtimensatFlags::NoFollowSymlink).map_err(|e| {
            UnpackError::Io(format!("cannot set times of {}", path.display()), e.into())
        })
    }
}

/// Unpacks an uncompressed layer tar into `dest` (created if missing), turning OCI whiteouts
/// into overlayfs ones. Device nodes are dropped (a sandbox must not find `/dev/mem` in its
/// image; the rootfs is `nodev` too), but for `0/0` character devices, which are whiteouts
/// already; hard links to a dropped node are dropped with it. Returns the size of the regular
/// files written (hard links count once).
pub(super) fn unpack_tar(reader: impl Read, dest: &Path) -> Result<u64, UnpackError> {
    use nix::sys::stat::{Mode, SFlag, makedev, mknod};

    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dest)
        .map_err(io_err(format_args!("cannot create {}", dest.display())))?;
    fs::set_permissions(dest, fs::Permissions::from_mode(0o755))
        .map_err(io_err(format_args!("cannot chmod {}", dest.display())))?;
    let bad = |e: io::Error| {
        UnpackError::from_read(e, |e| {
            UnpackError::Invalid(format!("cannot read the tar stream: {e}"))
        })
    };
    let mut archive = tar::Archive::new(TarGuard::new(reader));
    let mut size = 0u64;
    let mut dirs: Vec<(PathBuf, EntryMeta)> = Vec::new();
    let mut dropped: HashSet<PathBuf> = HashSet::new();
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
        ) {
            continue;
        }
        let raw_path = entry.path().map_err(bad)?.into_owned();
        let relative = safe_relative(&raw_path).map_err(UnpackError::Invalid)?;
        let meta = EntryMeta::read(&mut entry)?;
        let Some(relative) = relative else {
            // The layer root: only a directory may describe it.
            if !kind.is_dir() {
                return Err(UnpackError::Invalid(
                    "the layer root is not a directory".into(),
                ));
            }
            dirs.push((dest.to_path_buf(), meta));
            continue;
        };
        prepare_parents(dest, &relative)?;
        let target = dest.join(&relative);
        let name = relative
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();

        if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
            let parent = target.parent().unwrap_or(dest);
            if name == WHITEOUT_OPAQUE {
                set_xattr(parent, XATTR_OPAQUE, b"y").map_err(io_err(format_args!(
                    "cannot mark {} opaque",
                    parent.display()
                )))?;
            } else if !hidden.starts_with(WHITEOUT_PREFIX) && !hidden.is_empty() {
                let whiteout = parent.join(hidden);
                clear_path(&whiteout, false)?;
                mknod(&whiteout, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0)).map_err(|e| {
                    UnpackError::Io(
                        format!("cannot create the whiteout {}", whiteout.display()),
                        e.into(),
                    )
                })?;
            }
            // Other `.wh..wh.*` names are aufs bookkeeping with no overlay meaning.
            continue;
        }

        match kind {
            tar::EntryType::Directory => {
                if !clear_path(&target, true)? {
                    fs::DirBuilder::new()
                        .mode(0o700)
                        .create(&target)
                        .map_err(io_err(format_args!("cannot create {}", target.display())))?;
                }
                // Ownership and mode now, times last: adding children changes a dir's mtime.
                std::os::unix::fs::lchown(&target, Some(meta.uid), Some(meta.gid))
                    .map_err(io_err(format_args!("cannot chown {}", target.display())))?;
                fs::set_permissions(&target, fs::Permissions::from_mode(meta.mode))
                    .map_err(io_err(format_args!("cannot chmod {}", target.display())))?;
                dirs.push((target, meta));
            }
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                clear_path(&target, false)?;
                let mut file = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)
                    .map_err(io_err(format_args!("cannot create {}", target.display())))?;
                size += copy_checked(&mut entry, &mut file).map_err(|e| match e {
                    CopyError::Read(e) => bad(e),
                    CopyError::Write(e) => {
                        UnpackError::Io(format!("cannot write {}", target.display()), e)
                    }
                })?;
                drop(file);
                meta.apply(&target, false)?;
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name_bytes()
                    .ok_or_else(|| {
                        UnpackError::Invalid(format!(
                            "symlink '{}' has no target",
                            relative.display()
                        ))
                    })?
                    .into_owned();
                clear_path(&target, false)?;
                std::os::unix::fs::symlink(OsStr::from_bytes(&link), &target)
                    .map_err(io_err(format_args!("cannot create {}", target.display())))?;
                meta.apply(&target, true)?;
            }
            tar::EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(bad)?
                    .ok_or_else(|| {
                        UnpackError::Invalid(format!(
                            "hard link '{}' has no target",
                            relative.display()
                        ))
                    })?
                    .into_owned();
                let Some(source) = safe_relative(&link).map_err(|reason| {
                    UnpackError::Invalid(format!("hard link '{}': {reason}", relative.display()))
                })?
                else {
                    return Err(UnpackError::Invalid(format!(
                        "hard link '{}' points at the layer root",
                        relative.display()
                    )));
                };
                if dropped.contains(&source) {
                    tracing::debug!(path = %relative.display(), source = %source.display(),
                        "dropping a hard link to a device node of an image layer");
                    dropped.insert(relative);
                    continue;
                }
                prepare_parents(dest, &source).map_err(|e| match e {
                    UnpackError::Invalid(reason) => UnpackError::Invalid(format!(
                        "hard link '{}' to '{}': {reason}",
                        relative.display(),
                        source.display()
                    )),
                    other => other,
                })?;
                let source_path = dest.join(&source);
                match fs::symlink_metadata(&source_path) {
                    Ok(meta) if !meta.is_dir() => {}
                    _ => {
                        return Err(UnpackError::Invalid(format!(
                            "hard link '{}' points at '{}', which is not a file of this layer",
                            relative.display(),
                            source.display()
                        )));
                    }
                }
                if source_path != target {
                    clear_path(&target, false)?;
                    // linkat without AT_SYMLINK_FOLLOW: a link to a symlink links the symlink.
                    fs::hard_link(&source_path, &target)
                        .map_err(io_err(format_args!("cannot link {}", target.display())))?;
                }
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                let header = entry.header();
                let number =
                    |n: io::Result<Option<u32>>| n.map_err(bad).map(Option::unwrap_or_default);
                let (major, minor) = (
                    number(header.device_major())?,
                    number(header.device_minor())?,
                );
                let node_kind = match kind {
                    tar::EntryType::Char => SFlag::S_IFCHR,
                    tar::EntryType::Block => SFlag::S_IFBLK,
                    _ => SFlag::S_IFIFO,
                };
                clear_path(&target, false)?;
                let whiteout = kind == tar::EntryType::Char && (major, minor) == (0, 0);
                if node_kind != SFlag::S_IFIFO && !whiteout {
                    tracing::debug!(path = %relative.display(), kind = ?kind, major, minor,
                        "dropping a device node of an image layer");
                    dropped.insert(relative);
                    continue;
                }
                mknod(
                    &target,
                    node_kind,
                    Mode::from_bits_truncate(meta.mode),
                    makedev(u64::from(major), u64::from(minor)),
                )
                .map_err(|e| {
                    UnpackError::Io(format!("cannot create {}", target.display()), e.into())
                })?;
                meta.apply(&target, false)?;
            }
            other => {
                tracing::debug!(path = %relative.display(), kind = ?other, "skipping a tar entry of an unhandled type");
            }
        }
    }
    // Deepest first, so setting a child's time does not disturb its parent's.
    dirs.sort_by_key(|(path, _)| std::cmp::Reverse(path.components().count()));
    for (path, meta) in &dirs {
        if path.as_path() == dest {
            meta.apply(path, false)?;
        } else {
            meta.apply_time(path)?;
            for (name, value) in &meta.xattrs {
                set_xattr(path, name, value).map_err(io_err(format_args!(
                    "cannot set {name} on {}",
                    path.display()
                )))?;
            }
        }
    }
    Ok(size)
}

/// Size of the regular files of a tree, each inode counted once.
pub(super) fn tree_size(root: &Path) -> io::Result<u64> {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() && (meta.nlink() == 1 || seen.insert(meta.ino())) {
                total += meta.len();
            }
        }
    }
    Ok(total)
}
