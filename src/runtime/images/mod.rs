//! Image store of the sbxd runtime: pulls OCI images from registries, imports OCI image-layout
//! archives, and keeps every layer unpacked once, content-addressed by its diff id, as a
//! read-only overlayfs lower dir shared by all sandboxes.
//!
//! Layout under the store root (`<data-dir>/images`):
//!
//! | path | what |
//! |---|---|
//! | `index.json` | the known images and the unpacked size of each layer; replaced atomically |
//! | `layers/<diff-id hex>/` | one unpacked layer, overlay-ready (whiteouts are `0/0` char devices, opaque dirs carry `trusted.overlay.opaque=y`) |
//! | `tmp/` | downloads, uploads and half-unpacked layers; emptied when the store opens |
//!
//! Compressed blobs are not kept: a layer is downloaded (or read from an archive), verified
//! against its digest and its diff id, unpacked into `tmp/` and renamed into `layers/`, so a
//! layer directory either is complete or does not exist.
//!
//! Layers come from anyone who can push an image, so unpacking is bounded ([`ImageLimits`]):
//! one image's unpacked bytes, the store's, and each tar extension header (64 KiB, see
//! [`crate::shared::tar_guard`]); device nodes in a layer are not made.
//!
//! Images imported from an archive are named by the manifest's `io.containerd.image.name`
//! annotation, else by `org.opencontainers.image.ref.name`. When that annotation holds only a
//! tag (`latest`, as `skopeo copy … oci-archive:FILE:TAG` writes it), the repository name is
//! derived from the archive's file name (`busybox.tar` → `busybox:latest`, which normalizes to
//! `docker.io/library/busybox:latest`); with no annotation at all the tag is `latest`.
mod archive;
mod distribution;
mod oci;
mod registry;
mod unpack;

use oci_client::Reference;
use oci_client::manifest::OciDescriptor;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::shared::image_ref::{self, clip};
use crate::shared::timestamp::now_unix;

use archive::*;
use oci::*;
use unpack::*;

/// Annotation with an image's full name (containerd, buildkit, sbx's `scripts/mkimage.py`).
pub const ANNOTATION_IMAGE_NAME: &str = "io.containerd.image.name";
/// OCI annotation with an image's reference: a full name or only a tag.
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";

const INDEX_FILE: &str = "index.json";
const LAYERS_DIR: &str = "layers";
const TMP_DIR: &str = "tmp";
const INDEX_VERSION: u32 = 1;
/// Largest JSON document (index, manifest, config) read from an archive or a registry.
const MAX_JSON_BYTES: u64 = 16 * 1024 * 1024;
/// Layers downloaded at once by one pull.
const PARALLEL_LAYERS: usize = 3;
/// Overlay whiteout marker prefix and opaque-directory marker of the OCI layer format.
const WHITEOUT_PREFIX: &str = ".wh.";
const WHITEOUT_OPAQUE: &str = ".wh..wh..opq";
const XATTR_OPAQUE: &str = "trusted.overlay.opaque";

/// Why an image operation failed. [`ImageError::is_caller_error`] tells the service layer
/// whether it is the caller's problem (400) or the host's (500).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The reference does not parse (400).
    #[error("{0}")]
    InvalidReference(String),
    /// The registry has no such repository, tag, digest or platform (400).
    #[error("{0}")]
    NotFound(String),
    /// The registry could not be reached, refused access or sent bad content (400).
    #[error("{0}")]
    Registry(String),
    /// A host of the pull (the registry, its token service, a redirect) is on a loopback,
    /// private or link-local address and not a listed private registry (403).
    #[error("{0}")]
    Refused(String),
    /// An uploaded or local archive is not a usable OCI image layout (400).
    #[error("{0}")]
    InvalidArchive(String),
    /// The image uses something this store does not handle, e.g. zstd layers (400).
    #[error("{0}")]
    Unsupported(String),
    /// A layer passes a bound: a tar extension header over 64 KiB, or the image unpacks to
    /// more than [`ImageLimits::max_image_bytes`] (400).
    #[error("{0}")]
    TooLarge(String),
    /// The store would hold more than [`ImageLimits::max_store_bytes`] (the host's problem).
    #[error("{0}")]
    StoreFull(String),
    /// The store's own files are inconsistent (500).
    #[error("{0}")]
    Corrupt(String),
    /// The store's filesystem failed (500).
    #[error("{context}: {source}")]
    Io {
        /// What the store was doing.
        context: String,
        /// The OS error.
        source: io::Error,
    },
}

impl ImageError {
    /// Whether the request was at fault (answer 400) rather than the host (answer 500).
    pub fn is_caller_error(&self) -> bool {
        !matches!(
            self,
            ImageError::Corrupt(_) | ImageError::Io { .. } | ImageError::StoreFull(_)
        )
    }

    fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> ImageError {
        let context = context.into();
        move |source| ImageError::Io { context, source }
    }
}

/// What the store may hold (`[images] maxImageBytes` and `maxStoreBytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// The most one image may unpack to: its layers' uncompressed tar bytes together.
    pub max_image_bytes: u64,
    /// The most the store's layers may take together (recorded sizes, and the tar bytes of
    /// layers being unpacked).
    pub max_store_bytes: u64,
}

/// Default of [`ImageLimits::max_image_bytes`]: 16 GiB, which the largest common images (CUDA
/// and ML toolchains) fit in.
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 16 << 30;
/// Default of [`ImageLimits::max_store_bytes`]: 100 GiB.
pub const DEFAULT_MAX_STORE_BYTES: u64 = 100 << 30;

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits {
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
        }
    }
}

/// The store's size: what its index records for its layers, and the bytes being unpacked.
#[derive(Debug, Default)]
struct StoreSize {
    recorded: AtomicU64,
    unpacking: AtomicU64,
}

/// The runtime settings an image carries (from its config's `config` object).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `Entrypoint`.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    #[serde(default)]
    pub cmd: Vec<String>,
    /// `Env`, as `KEY=value` strings.
    #[serde(default)]
    pub env: Vec<String>,
    /// `WorkingDir`, when set.
    #[serde(default)]
    pub working_dir: Option<String>,
    /// `User` (`uid`, `uid:gid` or a name), when set.
    #[serde(default)]
    pub user: Option<String>,
}

/// An image known to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// Normalized reference, e.g. `docker.io/library/busybox:latest`.
    pub reference: String,
    /// Digest of the image manifest (the platform manifest, not an index).
    pub digest: String,
    /// Layer diff ids (`sha256:…` of the uncompressed tar), lowest first.
    pub layers: Vec<String>,
    /// Runtime settings.
    pub config: ImageConfig,
    /// Unpacked size of its distinct layers, in bytes.
    pub size_bytes: u64,
    /// When the store recorded it (unix seconds).
    pub created: i64,
}

/// The persisted state of the store.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreIndex {
    #[serde(default)]
    version: u32,
    /// Images by normalized reference.
    #[serde(default)]
    images: BTreeMap<String, Image>,
    /// Unpacked size per layer, by diff-id hex.
    #[serde(default)]
    layers: BTreeMap<String, u64>,
}

/// A path under the store's `tmp/` removed (file or tree) when dropped, so cancelled or failed
/// work leaves nothing behind.
#[derive(Debug)]
struct TempPath(PathBuf);

impl Drop for TempPath {
    fn drop(&mut self) {
        match fs::symlink_metadata(&self.0) {
            Ok(meta) if meta.is_dir() => {
                let _ = fs::remove_dir_all(&self.0);
            }
            Ok(_) => {
                let _ = fs::remove_file(&self.0);
            }
            Err(_) => {}
        }
    }
}

/// A place for an uploaded archive inside the store's temp dir (same filesystem as the
/// layers); the file is removed when this is dropped.
#[derive(Debug)]
pub struct Upload(TempPath);

impl Upload {
    /// Where to write the upload. The file does not exist yet.
    pub fn path(&self) -> &Path {
        &self.0.0
    }
}

impl AsRef<Path> for Upload {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

/// Where the bytes of a layer come from.
enum LayerSource<'a> {
    /// A registry blob of this image.
    Registry {
        reference: &'a Reference,
        descriptor: &'a OciDescriptor,
    },
    /// A blob file of an extracted archive, verified against `digest` while unpacking.
    File {
        path: PathBuf,
        media_type: String,
        digest: String,
    },
}

/// The content-addressed image store. Share it behind an `Arc`; every method takes `&self`.
pub struct ImageStore {
    root: PathBuf,
    insecure_registries: Vec<String>,
    client: distribution::Distribution,
    index: Mutex<StoreIndex>,
    layer_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    temp_counter: AtomicU64,
    limits: Mutex<ImageLimits>,
    size: Arc<StoreSize>,
}

impl std::fmt::Debug for ImageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageStore")
            .field("root", &self.root)
            .field("insecure_registries", &self.insecure_registries)
            .finish_non_exhaustive()
    }
}

impl ImageStore {
    /// Opens (creating if needed) the store at `root`. `insecure_registries` (`host:port`) are
    /// pulled from over plain HTTP; every other registry over HTTPS.
    pub fn open(root: &Path, insecure_registries: Vec<String>) -> Result<ImageStore, ImageError> {
        for dir in [root.to_path_buf(), root.join(LAYERS_DIR)] {
            fs::create_dir_all(&dir)
                .map_err(ImageError::io(format!("cannot create {}", dir.display())))?;
        }
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(ImageError::io(format!("cannot chmod {}", root.display())))?;
        let tmp = root.join(TMP_DIR);
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(ImageError::io(format!(
                "cannot clear leftovers in {}",
                tmp.display()
            )))?;
        }
        fs::create_dir(&tmp).map_err(ImageError::io(format!("cannot create {}", tmp.display())))?;
        let index_path = root.join(INDEX_FILE);
        let index = match fs::read(&index_path) {
            Ok(bytes) => serde_json::from_slice::<StoreIndex>(&bytes).map_err(|e| {
                ImageError::Corrupt(format!(
                    "image index {} is not valid: {e}; move it aside to start with an empty \
                     store (unpacked layers are reused)",
                    index_path.display()
                ))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => StoreIndex::default(),
            Err(e) => {
                return Err(ImageError::Io {
                    context: format!("cannot read {}", index_path.display()),
                    source: e,
                });
            }
        };
        if index.version > INDEX_VERSION {
            return Err(ImageError::Corrupt(format!(
                "image index {} was written by a newer sbx (version {}); this one reads {}",
                index_path.display(),
                index.version,
                INDEX_VERSION
            )));
        }
        let client = distribution::Distribution::new(insecure_registries.clone());
        let size = StoreSize {
            recorded: AtomicU64::new(index.layers.values().sum()),
            unpacking: AtomicU64::new(0),
        };
        Ok(ImageStore {
            root: root.to_path_buf(),
            insecure_registries,
            client,
            index: Mutex::new(index),
            layer_locks: Mutex::new(HashMap::new()),
            temp_counter: AtomicU64::new(0),
            limits: Mutex::new(ImageLimits::default()),
            size: Arc::new(size),
        })
    }

    /// Sets the bounds of later pulls and imports (the defaults until then).
    pub fn set_limits(&self, limits: ImageLimits) {
        *self.limits.lock().unwrap_or_else(PoisonError::into_inner) = limits;
    }

    /// Sets the registries (`host[:port]`, `[images] privateRegistries`) that may be on
    /// loopback, private or link-local addresses; every other host a pull contacts must be
    /// public (none until then).
    pub fn set_private_registries(&self, registries: Vec<String>) {
        self.client.guard().set_private(registries);
    }

    /// What one pull or import of `reference` may unpack.
    fn budget(&self, reference: &str) -> Arc<Budget> {
        let limits = *self.limits.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::new(Budget::new(reference, limits, self.size.clone()))
    }

    /// Records the unpacked size of a layer (and the store's total with it).
    fn record_layer_size(&self, hex: &str, size: u64) {
        let old = self.lock_index().layers.insert(hex.to_string(), size);
        self.size.recorded.fetch_add(size, Ordering::Relaxed);
        if let Some(old) = old {
            self.size.recorded.fetch_sub(old, Ordering::Relaxed);
        }
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The image of `reference` if the store has it with all its layers, else pulls it.
    pub async fn ensure(&self, reference: &str) -> Result<Image, ImageError> {
        let normalized = normalize_reference(reference)?;
        let known = self.lock_index().images.get(&normalized).cloned();
        match known {
            Some(image) if self.layers_present(&image) => Ok(image),
            _ => self.pull(&normalized).await,
        }
    }

    /// Imports every image of an OCI image-layout archive (plain or gzip-compressed tar). A
    /// manifest named only by a tag is named after the archive's file name.
    pub async fn import_archive(&self, path: &Path) -> Result<Vec<Image>, ImageError> {
        let fallback = path
            .file_name()
            .and_then(OsStr::to_str)
            .and_then(repository_from_file_name);
        self.import_archive_as(path, fallback.as_deref()).await
    }

    /// Imports an archive like [`ImageStore::import_archive`], with `fallback_name` (a
    /// repository such as `busybox`, see [`repository_from_file_name`]) for manifests that
    /// carry only a tag.
    pub async fn import_archive_as(
        &self,
        path: &Path,
        fallback_name: Option<&str>,
    ) -> Result<Vec<Image>, ImageError> {
        let (archive, layout) = (path.to_path_buf(), self.temp_path("import"));
        let layout = tokio::task::spawn_blocking(move || {
            extract_layout(&archive, &layout.0).map(|()| layout)
        })
        .await
        .map_err(|e| ImageError::Io {
            context: "archive extraction task failed".into(),
            source: io::Error::other(e),
        })??;
        let candidates = archive_manifests(&layout.0, fallback_name)?;
        let mut images = Vec::new();
        for (reference, descriptor) in candidates {
            let manifest: ManifestDoc = read_json_blob(&layout.0, &descriptor.digest)?;
            let config_bytes = read_blob(&layout.0, &manifest.config.digest)?;
            let config = parse_config(&config_bytes).map_err(|reason| {
                ImageError::InvalidArchive(format!(
                    "the config of {reference} in the archive is invalid: {reason}"
                ))
            })?;
            if !config.platform_matches_host() {
                tracing::warn!(%reference, os = %config.os, architecture = %config.architecture,
                    "skipping an image for another platform");
                continue;
            }
            if config.rootfs.diff_ids.len() != manifest.layers.len() {
                return Err(ImageError::InvalidArchive(format!(
                    "image {reference} in the archive is malformed: its manifest lists {} layers \
                     but its config {} diff ids",
                    manifest.layers.len(),
                    config.rootfs.diff_ids.len()
                )));
            }
            let mut sizes = Vec::new();
            let budget = self.budget(&reference);
            for (layer, diff_id) in manifest.layers.iter().zip(&config.rootfs.diff_ids) {
                check_layer_media_type(&layer.media_type)?;
                let path = blob_path(&layout.0, &layer.digest)?;
                let source = LayerSource::File {
                    path,
                    media_type: layer.media_type.clone(),
                    digest: layer.digest.clone(),
                };
                sizes.push(self.ensure_layer(diff_id, source, &budget).await?);
            }
            let image = self.record(reference, descriptor.digest.clone(), config, &sizes)?;
            tracing::info!(reference = %image.reference, digest = %image.digest,
                layers = image.layers.len(), "image imported");
            images.push(image);
        }
        if images.is_empty() {
            return Err(ImageError::Unsupported(format!(
                "the archive holds no {} image",
                host_platform()
            )));
        }
        Ok(images)
    }

    /// Every known image, ordered by reference.
    pub fn list(&self) -> Vec<Image> {
        self.lock_index().images.values().cloned().collect()
    }

    /// The image of a reference (normalized first), if known.
    pub fn get(&self, reference: &str) -> Option<Image> {
        let normalized = normalize_reference(reference).ok()?;
        self.lock_index().images.get(&normalized).cloned()
    }

    /// The directory holding every layer (`layer_dirs` are under it).
    pub fn layers_root(&self) -> PathBuf {
        self.root.join(LAYERS_DIR)
    }

    /// The unpacked layer directories of an image, lowest first, as overlayfs lower dirs
    /// (overlayfs's `lowerdir=` wants them highest first). A layer that occurs twice is listed
    /// once, at its highest position, which gives the same merged tree.
    pub fn layer_dirs(&self, image: &Image) -> Vec<PathBuf> {
        let mut seen = HashSet::new();
        let mut dirs: Vec<PathBuf> = image
            .layers
            .iter()
            .rev()
            .filter(|diff_id| seen.insert(diff_id.as_str()))
            .filter_map(|diff_id| digest_hex(diff_id).ok())
            .map(|hex| self.root.join(LAYERS_DIR).join(hex))
            .collect();
        dirs.reverse();
        dirs
    }

    /// Forgets an image. Its layers stay on disk: running sandboxes may use them as lower dirs.
    pub fn remove(&self, reference: &str) -> Result<Option<Image>, ImageError> {
        let normalized = normalize_reference(reference)?;
        let mut index = self.lock_index();
        let removed = index.images.remove(&normalized);
        if removed.is_some() {
            self.persist(&index)?;
        }
        Ok(removed)
    }

    /// A temp file location for an uploaded archive, removed when the [`Upload`] is dropped.
    pub fn new_upload(&self) -> Upload {
        Upload(self.temp_path("upload"))
    }

    fn lock_index(&self) -> MutexGuard<'_, StoreIndex> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn temp_path(&self, kind: &str) -> TempPath {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        TempPath(
            self.root
                .join(TMP_DIR)
                .join(format!("{kind}-{}-{n}", std::process::id())),
        )
    }

    fn layers_present(&self, image: &Image) -> bool {
        self.layer_dirs(image).iter().all(|dir| dir.is_dir())
    }

    /// Stores an image record (replacing one of the same reference) and the index.
    fn record(
        &self,
        reference: String,
        digest: String,
        config: ConfigDoc,
        sizes: &[u64],
    ) -> Result<Image, ImageError> {
        let mut distinct = BTreeSet::new();
        let size_bytes = config
            .rootfs
            .diff_ids
            .iter()
            .zip(sizes)
            .filter(|(diff_id, _)| distinct.insert(diff_id.as_str()))
            .map(|(_, size)| size)
            .sum();
        let image = Image {
            reference: reference.clone(),
            digest,
            layers: config.rootfs.diff_ids.clone(),
            config: config.runtime_config(),
            size_bytes,
            created: now_unix(),
        };
        let mut index = self.lock_index();
        if let Some(existing) = index.images.get(&reference) {
            if existing.digest == image.digest && existing.layers == image.layers {
                // The same image again: keep its record and its time.
                let existing = existing.clone();
                self.persist(&index)?;
                return Ok(existing);
            }
        }
        index.images.insert(reference, image.clone());
        self.persist(&index)?;
        Ok(image)
    }

    /// Writes the index atomically: a temp file, fsync, rename.
    fn persist(&self, index: &StoreIndex) -> Result<(), ImageError> {
        let path = self.root.join(INDEX_FILE);
        let tmp = self
            .root
            .join(format!("{INDEX_FILE}.tmp-{}", std::process::id()));
        let doc = StoreIndex {
            version: INDEX_VERSION,
            images: index.images.clone(),
            layers: index.layers.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&doc).map_err(|e| ImageError::Io {
            context: "cannot encode the image index".into(),
            source: io::Error::other(e),
        })?;
        let write = || -> io::Result<()> {
            let mut file = File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&tmp, &path)
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            ImageError::Io {
                context: format!("cannot write {}", path.display()),
                source: e,
            }
        })
    }

    /// The lock serializing the unpack of one layer.
    fn layer_lock(&self, hex: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .layer_locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        locks.entry(hex.to_string()).or_default().clone()
    }

    fn release_layer_lock(&self, hex: &str, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut locks = self
            .layer_locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        drop(lock);
        // Only the map holds it now: nobody waits for this layer.
        if locks.get(hex).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(hex);
        }
    }

    /// Unpacked size of a layer already on disk: from the index, else measured.
    fn known_layer_size(&self, hex: &str, dir: &Path) -> Result<u64, ImageError> {
        if let Some(size) = self.lock_index().layers.get(hex) {
            return Ok(*size);
        }
        let size = tree_size(dir).map_err(ImageError::io(format!(
            "cannot measure layer {}",
            dir.display()
        )))?;
        self.record_layer_size(hex, size);
        Ok(size)
    }

    /// Makes sure the layer `diff_id` is unpacked under `layers/`, fetching it from `source`
    /// if not; returns its unpacked size, which it charges to `budget`. Concurrent calls for
    /// one layer unpack it once.
    async fn ensure_layer(
        &self,
        diff_id: &str,
        source: LayerSource<'_>,
        budget: &Arc<Budget>,
    ) -> Result<u64, ImageError> {
        let hex = digest_hex(diff_id).map_err(|reason| match &source {
            LayerSource::Registry { .. } => {
                ImageError::Registry(format!("the image config has a bad diff id: {reason}"))
            }
            LayerSource::File { .. } => {
                ImageError::InvalidArchive(format!("the image config has a bad diff id: {reason}"))
            }
        })?;
        let dir = self.root.join(LAYERS_DIR).join(hex);
        let reused = |size: u64| budget.reuse(hex, size).map(|()| size);
        if dir.is_dir() {
            return self.known_layer_size(hex, &dir).and_then(reused);
        }
        let lock = self.layer_lock(hex);
        let result = {
            let _guard = lock.lock().await;
            if dir.is_dir() {
                self.known_layer_size(hex, &dir).and_then(reused)
            } else {
                budget.first_time(hex);
                self.fetch_layer(diff_id, hex, &dir, source, budget.clone())
                    .await
            }
        };
        self.release_layer_lock(hex, lock);
        result
    }
}

/// Parses a reference ([`image_ref::parse_reference`]).
fn parse_reference(reference: &str) -> Result<Reference, ImageError> {
    image_ref::parse_reference(reference).map_err(ImageError::InvalidReference)
}

/// The canonical form of an image reference ([`image_ref::normalize_reference`]).
pub fn normalize_reference(reference: &str) -> Result<String, ImageError> {
    image_ref::normalize_reference(reference).map_err(ImageError::InvalidReference)
}

/// `os/architecture` of this host in OCI terms.
fn host_platform() -> String {
    format!("linux/{}", host_architecture())
}

fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// The hex part of a `sha256:` digest, validated so it can name a file.
fn digest_hex(digest: &str) -> Result<&str, String> {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Err(format!("'{}' is not a digest", clip(digest, 100)));
    };
    if algorithm != "sha256" {
        return Err(format!(
            "digest algorithm '{}' is not supported (only sha256)",
            clip(algorithm, 20)
        ));
    }
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!("'{}' is not a sha256 digest", clip(digest, 100)));
    }
    Ok(hex)
}

fn sha256_digest(hasher: Sha256) -> String {
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// Refuses layer formats the unpacker cannot read before anything is downloaded.
fn check_layer_media_type(media_type: &str) -> Result<(), ImageError> {
    if media_type.contains("zstd") {
        return Err(ImageError::Unsupported(format!(
            "layers of type {media_type} are not supported: sbx reads tar and gzip layers"
        )));
    }
    if media_type.contains("encrypted") || media_type.contains("wasm") {
        return Err(ImageError::Unsupported(format!(
            "layers of type {media_type} are not supported"
        )));
    }
    Ok(())
}

/// The repository name an archive's file name gives images it names only by a tag:
/// `busybox.tar` → `busybox`, `My App.tar.gz` → `my-app`; `None` when nothing usable is left.
pub fn repository_from_file_name(file_name: &str) -> Option<String> {
    let name = Path::new(file_name)
        .file_name()?
        .to_str()?
        .to_ascii_lowercase();
    let stem = [".tar.gz", ".tgz", ".tar", ".oci"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(&name);
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cleaned = cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    (!cleaned.is_empty()).then(|| cleaned.to_string())
}

#[cfg(test)]
mod tests;
