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
//! Images imported from an archive are named by the manifest's `io.containerd.image.name`
//! annotation, else by `org.opencontainers.image.ref.name`. When that annotation holds only a
//! tag (`latest`, as `skopeo copy … oci-archive:FILE:TAG` writes it), the repository name is
//! derived from the archive's file name (`busybox.tar` → `busybox:latest`, which normalizes to
//! `docker.io/library/busybox:latest`); with no annotation at all the tag is `latest`.
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use oci_client::client::{ClientConfig, ClientProtocol, current_platform_resolver};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::shared::image_ref;
use crate::shared::timestamp::now_unix;

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
    /// An uploaded or local archive is not a usable OCI image layout (400).
    #[error("{0}")]
    InvalidArchive(String),
    /// The image uses something this store does not handle, e.g. zstd layers (400).
    #[error("{0}")]
    Unsupported(String),
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
        !matches!(self, ImageError::Corrupt(_) | ImageError::Io { .. })
    }

    fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> ImageError {
        let context = context.into();
        move |source| ImageError::Io { context, source }
    }
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
    client: Client,
    index: Mutex<StoreIndex>,
    layer_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    temp_counter: AtomicU64,
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
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure_registries.clone()),
            platform_resolver: Some(Box::new(current_platform_resolver)),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(120)),
            user_agent: concat!("sbx/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        });
        Ok(ImageStore {
            root: root.to_path_buf(),
            insecure_registries,
            client,
            index: Mutex::new(index),
            layer_locks: Mutex::new(HashMap::new()),
            temp_counter: AtomicU64::new(0),
        })
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

    /// Pulls `reference` from its registry (the host's platform from a multi-platform index),
    /// reusing every layer already unpacked. Pulling an unchanged image is a no-op that returns
    /// the stored record.
    pub async fn pull(&self, reference: &str) -> Result<Image, ImageError> {
        let parsed = parse_reference(reference)?;
        let normalized = parsed.whole();
        let registry = parsed.resolve_registry().to_string();
        let fail = |e| self.registry_error(&normalized, &registry, e);
        let (manifest, digest, config_text) = self
            .client
            .pull_manifest_and_config(&parsed, &RegistryAuth::Anonymous)
            .await
            .map_err(fail)?;
        if let Some(existing) = self.get(&normalized) {
            if existing.digest == digest && self.layers_present(&existing) {
                tracing::debug!(reference = %normalized, %digest, "image unchanged; nothing to pull");
                return Ok(existing);
            }
        }
        let config = parse_config(config_text.as_bytes()).map_err(|reason| {
            ImageError::Registry(format!(
                "registry {registry} sent an invalid image config for {normalized}: {reason}"
            ))
        })?;
        if config.rootfs.diff_ids.len() != manifest.layers.len() {
            return Err(ImageError::Registry(format!(
                "image {normalized} is malformed: its manifest lists {} layers but its config {} \
                 diff ids",
                manifest.layers.len(),
                config.rootfs.diff_ids.len()
            )));
        }
        for descriptor in &manifest.layers {
            check_layer_media_type(&descriptor.media_type)?;
        }
        // Futures collected first: a closure inside the stream type would make this future
        // not provably Send (rustc's higher-ranked lifetime inference), and it is spawned.
        let layer_pulls: Vec<_> = manifest
            .layers
            .iter()
            .zip(&config.rootfs.diff_ids)
            .map(|(descriptor, diff_id)| {
                self.ensure_layer(
                    diff_id,
                    LayerSource::Registry {
                        reference: &parsed,
                        descriptor,
                    },
                )
            })
            .collect();
        let sizes: Vec<u64> = futures_util::stream::iter(layer_pulls)
            .buffered(PARALLEL_LAYERS)
            .try_collect()
            .await?;
        let image = self.record(normalized, digest, config, &sizes)?;
        tracing::info!(reference = %image.reference, digest = %image.digest,
            layers = image.layers.len(), size_bytes = image.size_bytes, "image pulled");
        Ok(image)
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
            for (layer, diff_id) in manifest.layers.iter().zip(&config.rootfs.diff_ids) {
                check_layer_media_type(&layer.media_type)?;
                let path = blob_path(&layout.0, &layer.digest)?;
                let source = LayerSource::File {
                    path,
                    media_type: layer.media_type.clone(),
                    digest: layer.digest.clone(),
                };
                sizes.push(self.ensure_layer(diff_id, source).await?);
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
        self.lock_index().layers.insert(hex.to_string(), size);
        Ok(size)
    }

    /// Makes sure the layer `diff_id` is unpacked under `layers/`, fetching it from `source`
    /// if not; returns its unpacked size. Concurrent calls for one layer unpack it once.
    async fn ensure_layer(
        &self,
        diff_id: &str,
        source: LayerSource<'_>,
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
        if dir.is_dir() {
            return self.known_layer_size(hex, &dir);
        }
        let lock = self.layer_lock(hex);
        let result = {
            let _guard = lock.lock().await;
            if dir.is_dir() {
                self.known_layer_size(hex, &dir)
            } else {
                self.fetch_layer(diff_id, hex, &dir, source).await
            }
        };
        self.release_layer_lock(hex, lock);
        result
    }

    async fn fetch_layer(
        &self,
        diff_id: &str,
        hex: &str,
        dir: &Path,
        source: LayerSource<'_>,
    ) -> Result<u64, ImageError> {
        let mut download = None;
        let (blob, media_type, expected_blob, origin) = match source {
            LayerSource::Registry {
                reference,
                descriptor,
            } => {
                let temp = self.temp_path("blob");
                let file = tokio::fs::File::create(&temp.0)
                    .await
                    .map_err(ImageError::io(format!(
                        "cannot create {}",
                        temp.0.display()
                    )))?;
                let registry = reference.resolve_registry();
                let whole = reference.whole();
                self.client
                    .pull_blob(reference, descriptor, file)
                    .await
                    .map_err(|e| self.registry_error(&whole, registry, e))?;
                let path = temp.0.clone();
                download = Some(temp);
                (
                    path,
                    descriptor.media_type.clone(),
                    None,
                    Origin::Registry(whole),
                )
            }
            LayerSource::File {
                path,
                media_type,
                digest,
            } => (path, media_type, Some(digest), Origin::Archive),
        };
        // The blocking task owns the temp paths and moves the layer into place itself, so a
        // cancelled request neither pulls the floor from under it nor wastes its work.
        let unpack_dir = self.temp_path("layer");
        let (layer_dir, expected_diff) = (dir.to_path_buf(), diff_id.to_string());
        let size = tokio::task::spawn_blocking(move || {
            let size = unpack_blob(
                &blob,
                &media_type,
                expected_blob.as_deref(),
                &expected_diff,
                &unpack_dir.0,
            )?;
            drop(download);
            match fs::rename(&unpack_dir.0, &layer_dir) {
                Ok(()) => Ok(size),
                // Another process finished it first: theirs is as good as ours.
                Err(_) if layer_dir.is_dir() => Ok(size),
                Err(e) => Err(UnpackError::Io(
                    format!("cannot move the layer into {}", layer_dir.display()),
                    e,
                )),
            }
        })
        .await
        .map_err(|e| ImageError::Io {
            context: "layer unpack task failed".into(),
            source: io::Error::other(e),
        })?
        .map_err(|e| e.into_image_error(diff_id, &origin))?;
        self.lock_index().layers.insert(hex.to_string(), size);
        tracing::debug!(%diff_id, size_bytes = size, "layer unpacked");
        Ok(size)
    }

    /// Maps an oci-client error to a message a user can act on, without credentials.
    fn registry_error(
        &self,
        reference: &str,
        registry: &str,
        error: OciDistributionError,
    ) -> ImageError {
        use OciDistributionError as E;
        match error {
            E::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let missing = codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NotFound
                    )
                });
                let denied = codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied));
                let messages: Vec<String> = envelope
                    .errors
                    .iter()
                    .map(|e| clip(&e.message, 200))
                    .filter(|m| !m.is_empty())
                    .collect();
                if missing {
                    ImageError::NotFound(format!(
                        "image {reference} not found: registry {registry} has no such \
                         repository, tag or digest"
                    ))
                } else if denied {
                    ImageError::Registry(format!(
                        "registry {registry} denied access to {reference}; sbx pulls \
                         anonymously, so the image must be public"
                    ))
                } else {
                    ImageError::Registry(format!(
                        "registry {registry} refused {reference}: {}",
                        messages.join("; ")
                    ))
                }
            }
            E::ImageManifestNotFoundError(_) => ImageError::NotFound(format!(
                "image {reference} not found for {}: the registry's index has no such platform",
                host_platform()
            )),
            E::ServerError { code: 404, .. } => ImageError::NotFound(format!(
                "image {reference} not found: registry {registry} answered 404"
            )),
            E::ServerError { code, message, .. } => ImageError::Registry(format!(
                "registry {registry} answered HTTP {code} for {reference}: {}",
                clip(message.trim(), 200)
            )),
            E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => {
                ImageError::Registry(format!(
                    "registry {registry} requires authentication for {reference} (or it does \
                     not exist there); sbx pulls anonymously, so the image must be public"
                ))
            }
            E::RequestError(e) => {
                let cause = clip(&root_cause(&e), 300);
                // A TLS failure against a registry we reach over HTTPS is most often a
                // plain-HTTP registry; refused connections and DNS failures are not.
                let network = ["refused", "lookup", "timed out", "unreachable", "no route"];
                let lower = cause.to_ascii_lowercase();
                let hint = if self.insecure_registries.iter().any(|r| r == registry)
                    || network.iter().any(|n| lower.contains(n))
                {
                    String::new()
                } else {
                    format!(
                        " (sbx uses HTTPS for {registry}; a plain-HTTP registry must be listed \
                         under [images] insecureRegistries in the daemon's config file)"
                    )
                };
                ImageError::Registry(format!(
                    "cannot reach registry {registry} for {reference}: {cause}{hint}"
                ))
            }
            E::DigestError(e) => ImageError::Registry(format!(
                "registry {registry} sent content for {reference} that does not match its \
                 digest: {e}"
            )),
            E::UnsupportedMediaTypeError(media_type) => ImageError::Unsupported(format!(
                "image {reference} has an unsupported manifest type {media_type}"
            )),
            E::UnsupportedSchemaVersionError(version) => ImageError::Unsupported(format!(
                "image {reference} uses manifest schema version {version}; only version 2 \
                 is supported"
            )),
            E::IoError(e) => ImageError::Io {
                context: format!("cannot store a blob of {reference}"),
                source: e,
            },
            other => ImageError::Registry(format!(
                "pulling {reference} from {registry} failed: {}",
                clip(&other.to_string(), 300)
            )),
        }
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

/// The first `max` characters of `text`, marked when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The innermost cause of an error, which for transport errors is the useful part
/// ("Connection refused"), without the URL.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &(dyn std::error::Error + 'static) = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
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

// ---------------------------------------------------------------------------------------------
// OCI documents, read leniently: only the fields the store needs.

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescriptorDoc {
    #[serde(default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    platform: Option<PlatformDoc>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct PlatformDoc {
    #[serde(default)]
    os: String,
    #[serde(default)]
    architecture: String,
}

impl PlatformDoc {
    fn matches_host(&self) -> bool {
        self.os == "linux" && self.architecture == host_architecture()
    }
}

#[derive(Debug, Deserialize)]
struct IndexDoc {
    #[serde(default)]
    manifests: Vec<DescriptorDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestDoc {
    config: DescriptorDoc,
    #[serde(default)]
    layers: Vec<DescriptorDoc>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigDoc {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
    #[serde(default)]
    config: Option<RuntimeConfigDoc>,
    rootfs: RootFsDoc,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RuntimeConfigDoc {
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RootFsDoc {
    #[serde(default)]
    diff_ids: Vec<String>,
}

impl ConfigDoc {
    fn platform_matches_host(&self) -> bool {
        (self.os.is_empty() || self.os == "linux")
            && (self.architecture.is_empty() || self.architecture == host_architecture())
    }

    fn runtime_config(&self) -> ImageConfig {
        let Some(config) = &self.config else {
            return ImageConfig::default();
        };
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        ImageConfig {
            entrypoint: config.entrypoint.clone().unwrap_or_default(),
            cmd: config.cmd.clone().unwrap_or_default(),
            env: config.env.clone().unwrap_or_default(),
            working_dir: non_empty(&config.working_dir),
            user: non_empty(&config.user),
        }
    }
}

fn parse_config(bytes: &[u8]) -> Result<ConfigDoc, String> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Archives: an OCI image layout in a tar.

/// Extracts the parts of an OCI layout (`oci-layout`, `index.json`, `blobs/<alg>/<hex>`) from
/// a tar or tar.gz into `dest`; everything else in the archive is ignored.
fn extract_layout(archive: &Path, dest: &Path) -> Result<(), ImageError> {
    let file = File::open(archive).map_err(ImageError::io(format!(
        "cannot open archive {}",
        archive.display()
    )))?;
    let mut reader = BufReader::new(file);
    let gzip = reader
        .fill_buf()
        .map_err(ImageError::io("cannot read the archive"))?
        .starts_with(&[0x1f, 0x8b]);
    let input: Box<dyn Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    let not_tar = |e: io::Error| {
        ImageError::InvalidArchive(format!(
            "not an OCI image archive: cannot read it as a tar file ({e})"
        ))
    };
    fs::create_dir_all(dest.join("blobs"))
        .map_err(ImageError::io(format!("cannot create {}", dest.display())))?;
    let mut archive = tar::Archive::new(input);
    let mut entries_seen = 0usize;
    for entry in archive.entries().map_err(not_tar)? {
        let mut entry = entry.map_err(not_tar)?;
        entries_seen += 1;
        let path = entry.path().map_err(not_tar)?.into_owned();
        let Ok(Some(relative)) = safe_relative(&path) else {
            continue;
        };
        let parts: Vec<&str> = relative.iter().filter_map(OsStr::to_str).collect();
        let wanted = match parts.as_slice() {
            ["oci-layout"] | ["index.json"] => true,
            ["blobs", algorithm, hex] => {
                matches!(*algorithm, "sha256" | "sha512")
                    && !hex.is_empty()
                    && hex.bytes().all(|b| b.is_ascii_hexdigit())
            }
            _ => false,
        };
        if !wanted || !entry.header().entry_type().is_file() {
            continue;
        }
        let target = dest.join(&relative);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(ImageError::io(format!(
                "cannot create {}",
                parent.display()
            )))?;
        }
        let mut out = File::create(&target).map_err(ImageError::io(format!(
            "cannot create {}",
            target.display()
        )))?;
        copy_checked(&mut entry, &mut out).map_err(|e| match e {
            CopyError::Read(e) => not_tar(e),
            CopyError::Write(e) => ImageError::Io {
                context: format!("cannot write {}", target.display()),
                source: e,
            },
        })?;
    }
    if entries_seen == 0 || !dest.join("index.json").is_file() {
        return Err(ImageError::InvalidArchive(
            "not an OCI image archive: it has no index.json; make one with `skopeo copy \
             docker://IMAGE oci-archive:FILE:NAME:TAG` or `podman save --format oci-archive`"
                .into(),
        ));
    }
    Ok(())
}

/// The blob file of a digest in an extracted layout.
fn blob_path(layout: &Path, digest: &str) -> Result<PathBuf, ImageError> {
    let hex = digest_hex(digest).map_err(|reason| {
        ImageError::InvalidArchive(format!("the archive refers to a bad digest: {reason}"))
    })?;
    let path = layout.join("blobs").join("sha256").join(hex);
    if !path.is_file() {
        return Err(ImageError::InvalidArchive(format!(
            "the archive lacks blob {digest}"
        )));
    }
    Ok(path)
}

/// A small blob of an extracted layout, verified against its digest.
fn read_blob(layout: &Path, digest: &str) -> Result<Vec<u8>, ImageError> {
    let path = blob_path(layout, digest)?;
    let mut bytes = Vec::new();
    File::open(&path)
        .and_then(|f| f.take(MAX_JSON_BYTES + 1).read_to_end(&mut bytes))
        .map_err(ImageError::io(format!("cannot read {}", path.display())))?;
    if bytes.len() as u64 > MAX_JSON_BYTES {
        return Err(ImageError::InvalidArchive(format!(
            "blob {digest} is too large for a manifest or config"
        )));
    }
    let mut hasher = Sha256::new();
    hasher.update(&bytes);
    if sha256_digest(hasher) != digest {
        return Err(ImageError::InvalidArchive(format!(
            "blob {digest} in the archive does not match its digest"
        )));
    }
    Ok(bytes)
}

fn read_json_blob<T: serde::de::DeserializeOwned>(
    layout: &Path,
    digest: &str,
) -> Result<T, ImageError> {
    let bytes = read_blob(layout, digest)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ImageError::InvalidArchive(format!("blob {digest} is not a valid OCI document: {e}"))
    })
}

fn is_index_media_type(media_type: &str) -> bool {
    media_type == "application/vnd.oci.image.index.v1+json"
        || media_type == "application/vnd.docker.distribution.manifest.list.v2+json"
}

/// The images of an extracted layout: (normalized reference, manifest descriptor), with nested
/// indexes resolved to the host's platform.
fn archive_manifests(
    layout: &Path,
    fallback_name: Option<&str>,
) -> Result<Vec<(String, DescriptorDoc)>, ImageError> {
    let index_path = layout.join("index.json");
    let index_bytes = fs::read(&index_path).map_err(ImageError::io("cannot read index.json"))?;
    let index: IndexDoc = serde_json::from_slice(&index_bytes).map_err(|e| {
        ImageError::InvalidArchive(format!("the archive's index.json is not valid: {e}"))
    })?;
    if index.manifests.is_empty() {
        return Err(ImageError::InvalidArchive(
            "the archive's index.json lists no images".into(),
        ));
    }
    let mut found = Vec::new();
    for descriptor in index.manifests {
        let reference = archive_reference(&descriptor.annotations, fallback_name)?;
        if descriptor
            .platform
            .as_ref()
            .is_some_and(|p| !p.matches_host())
        {
            continue;
        }
        let manifest = if is_index_media_type(&descriptor.media_type) {
            let nested: IndexDoc = read_json_blob(layout, &descriptor.digest)?;
            let Some(chosen) = nested
                .manifests
                .into_iter()
                .find(|m| m.platform.as_ref().is_none_or(PlatformDoc::matches_host))
            else {
                continue;
            };
            chosen
        } else {
            descriptor
        };
        found.push((reference, manifest));
    }
    Ok(found)
}

/// The normalized reference of an archived manifest from its annotations.
fn archive_reference(
    annotations: &BTreeMap<String, String>,
    fallback_name: Option<&str>,
) -> Result<String, ImageError> {
    let invalid = |e: ImageError| {
        ImageError::InvalidArchive(format!("the archive names an image badly: {e}"))
    };
    if let Some(name) = annotations.get(ANNOTATION_IMAGE_NAME) {
        return normalize_reference(name).map_err(invalid);
    }
    let ref_name = annotations.get(ANNOTATION_REF_NAME).map(String::as_str);
    match ref_name {
        // A full name has a repository part before a tag, or a path.
        Some(name) if name.contains(['/', ':', '@']) => normalize_reference(name).map_err(invalid),
        tag => {
            let tag = tag.unwrap_or("latest");
            let Some(repository) = fallback_name else {
                return Err(ImageError::InvalidArchive(format!(
                    "an image in the archive is named only by the tag '{}' and no file name \
                     gives its repository; name the image when making the archive (NAME:TAG)",
                    clip(tag, 100)
                )));
            };
            normalize_reference(&format!("{repository}:{tag}")).map_err(invalid)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Layer unpacking.

/// Where a layer came from, for error messages.
enum Origin {
    Registry(String),
    Archive,
}

/// Why a layer could not be unpacked.
#[derive(Debug)]
enum UnpackError {
    /// The layer's content is not a valid or safe layer.
    Invalid(String),
    /// The unsupported compression, or the like.
    Unsupported(String),
    /// The store's filesystem failed.
    Io(String, io::Error),
}

impl UnpackError {
    fn into_image_error(self, diff_id: &str, origin: &Origin) -> ImageError {
        match (self, origin) {
            (UnpackError::Invalid(reason), Origin::Registry(reference)) => ImageError::Registry(
                format!("layer {diff_id} of {reference} is not a valid layer: {reason}"),
            ),
            (UnpackError::Invalid(reason), Origin::Archive) => ImageError::InvalidArchive(format!(
                "layer {diff_id} in the archive is not a valid layer: {reason}"
            )),
            (UnpackError::Unsupported(reason), _) => ImageError::Unsupported(reason),
            (UnpackError::Io(context, source), _) => ImageError::Io { context, source },
        }
    }
}

fn io_err(context: impl std::fmt::Display) -> impl FnOnce(io::Error) -> UnpackError {
    move |e| UnpackError::Io(context.to_string(), e)
}

/// A reader that hashes what passes through it.
struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> HashingReader<R> {
    fn new(inner: R) -> Self {
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

enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

/// Copies a reader to a writer, telling read failures (bad input) from write failures (host).
fn copy_checked(reader: &mut impl Read, writer: &mut impl Write) -> Result<u64, CopyError> {
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
fn drain(reader: &mut impl Read) -> Result<(), UnpackError> {
    copy_checked(reader, &mut io::sink())
        .map(drop)
        .map_err(|e| match e {
            CopyError::Read(e) | CopyError::Write(e) => {
                UnpackError::Invalid(format!("cannot read the layer to its end: {e}"))
            }
        })
}

/// Unpacks a layer blob (tar or gzip'd tar, told apart by its magic bytes) into `dest`,
/// checking the blob against `blob_digest` (when given) and the tar against `diff_id`.
/// Returns the unpacked size.
fn unpack_blob(
    blob: &Path,
    media_type: &str,
    blob_digest: Option<&str>,
    diff_id: &str,
    dest: &Path,
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
        let mut tar_stream = HashingReader::new(decoder);
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
fn safe_relative(path: &Path) -> Result<Option<PathBuf>, String> {
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
fn prepare_parents(dest: &Path, relative: &Path) -> Result<(), UnpackError> {
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
fn clear_path(path: &Path, keep_dir: bool) -> Result<bool, UnpackError> {
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

fn set_xattr(path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
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
struct EntryMeta {
    uid: u32,
    gid: u32,
    mode: u32,
    mtime: i64,
    xattrs: Vec<(String, Vec<u8>)>,
}

impl EntryMeta {
    fn read<R: Read>(entry: &mut tar::Entry<'_, R>) -> Result<EntryMeta, UnpackError> {
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
    fn apply(&self, path: &Path, is_symlink: bool) -> Result<(), UnpackError> {
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

    fn apply_time(&self, path: &Path) -> Result<(), UnpackError> {
        use nix::sys::stat::{UtimensatFlags, utimensat};
        use nix::sys::time::TimeSpec;
        let time = TimeSpec::new(self.mtime, 0);
        utimensat(None, path, &time, &time, UtimensatFlags::NoFollowSymlink).map_err(|e| {
            UnpackError::Io(format!("cannot set times of {}", path.display()), e.into())
        })
    }
}

/// Unpacks an uncompressed layer tar into `dest` (created if missing), turning OCI whiteouts
/// into overlayfs ones. Returns the size of the regular files written (hard links count once).
fn unpack_tar(reader: impl Read, dest: &Path) -> Result<u64, UnpackError> {
    use nix::sys::stat::{Mode, SFlag, makedev, mknod};

    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dest)
        .map_err(io_err(format_args!("cannot create {}", dest.display())))?;
    fs::set_permissions(dest, fs::Permissions::from_mode(0o755))
        .map_err(io_err(format_args!("cannot chmod {}", dest.display())))?;
    let bad = |e: io::Error| UnpackError::Invalid(format!("cannot read the tar stream: {e}"));
    let mut archive = tar::Archive::new(reader);
    let mut size = 0u64;
    let mut dirs: Vec<(PathBuf, EntryMeta)> = Vec::new();
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
fn tree_size(root: &Path) -> io::Result<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    /// A layer tar built in memory, entry by entry.
    struct LayerBuilder(tar::Builder<Vec<u8>>);

    impl LayerBuilder {
        fn new() -> Self {
            LayerBuilder(tar::Builder::new(Vec::new()))
        }

        fn header(kind: tar::EntryType, mode: u32) -> tar::Header {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_mode(mode);
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(1_700_000_000);
            header.set_size(0);
            header
        }

        fn dir(mut self, path: &str, mode: u32) -> Self {
            let mut header = Self::header(tar::EntryType::Directory, mode);
            self.0.append_data(&mut header, path, io::empty()).unwrap();
            self
        }

        fn file(self, path: &str, data: &[u8]) -> Self {
            self.file_owned(path, data, 0o644, 0)
        }

        fn file_owned(mut self, path: &str, data: &[u8], mode: u32, uid: u64) -> Self {
            let mut header = Self::header(tar::EntryType::Regular, mode);
            header.set_uid(uid);
            header.set_gid(uid);
            header.set_size(data.len() as u64);
            self.0.append_data(&mut header, path, data).unwrap();
            self
        }

        fn symlink(mut self, path: &str, target: &str) -> Self {
            let mut header = Self::header(tar::EntryType::Symlink, 0o777);
            self.0.append_link(&mut header, path, target).unwrap();
            self
        }

        fn hardlink(mut self, path: &str, target: &str) -> Self {
            let mut header = Self::header(tar::EntryType::Link, 0o644);
            self.0.append_link(&mut header, path, target).unwrap();
            self
        }

        /// An entry whose name is written raw, bypassing the builder's own path checks.
        fn raw(mut self, path: &str, kind: tar::EntryType, link: Option<&str>) -> Self {
            let mut header = Self::header(kind, 0o644);
            let gnu = header.as_gnu_mut().unwrap();
            gnu.name[..path.len()].copy_from_slice(path.as_bytes());
            if let Some(link) = link {
                gnu.linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            header.set_cksum();
            self.0.append(&header, io::empty()).unwrap();
            self
        }

        fn bytes(self) -> Vec<u8> {
            self.0.into_inner().unwrap()
        }
    }

    fn diff_id(bytes: &[u8]) -> String {
        let mut hasher = Sha256::new();
        hasher.update(bytes);
        sha256_digest(hasher)
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
        let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
        let c_name = CString::new(name).unwrap();
        let mut buffer = vec![0u8; 256];
        // SAFETY: valid C strings and a buffer of the given length.
        let n = unsafe {
            libc::lgetxattr(
                c_path.as_ptr(),
                c_name.as_ptr(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            )
        };
        (n >= 0).then(|| buffer[..n as usize].to_vec())
    }

    fn unpack_err(bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        match unpack_tar(bytes, &dir.path().join("layer")) {
            Err(UnpackError::Invalid(reason)) => reason,
            other => panic!("expected an invalid layer, got {other:?}"),
        }
    }

    #[test]
    fn references_normalize() {
        assert_eq!(
            normalize_reference("busybox").unwrap(),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            normalize_reference("127.0.0.1:5000/x/y:1").unwrap(),
            "127.0.0.1:5000/x/y:1"
        );
        assert_eq!(
            normalize_reference("library/debian:12").unwrap(),
            "docker.io/library/debian:12"
        );
        let digest = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            normalize_reference(&format!("quay.io/x/y@{digest}")).unwrap(),
            format!("quay.io/x/y@{digest}")
        );
        for bad in ["", "  ", "Busybox", "a b", "x:y:z", "x@sha256:12", "/abs"] {
            let err = normalize_reference(bad).unwrap_err();
            assert!(
                matches!(err, ImageError::InvalidReference(_)),
                "{bad}: {err}"
            );
            assert!(err.is_caller_error());
        }
        assert!(
            normalize_reference("Busybox")
                .unwrap_err()
                .to_string()
                .contains("e.g. busybox")
        );
    }

    #[test]
    fn unpacks_files_links_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("layer");
        let tar = LayerBuilder::new()
            .dir("etc", 0o755)
            .file("etc/hostname", b"sandbox\n")
            .file_owned("bin/tool", b"#!/bin/sh\n", 0o4755, 65532)
            .hardlink("bin/tool-again", "bin/tool")
            .symlink("bin/sh", "/bin/busybox")
            .dir("tmp", 0o1777)
            .bytes();
        let size = unpack_tar(&tar[..], &dest).unwrap();
        assert_eq!(size, 8 + 10, "hard links count once");
        assert_eq!(fs::read(dest.join("etc/hostname")).unwrap(), b"sandbox\n");
        let tool = fs::metadata(dest.join("bin/tool")).unwrap();
        assert_eq!((tool.uid(), tool.gid()), (65532, 65532));
        assert_eq!(tool.mode() & 0o7777, 0o4755, "set-uid survives chown");
        assert_eq!(
            fs::metadata(dest.join("bin/tool-again")).unwrap().ino(),
            tool.ino()
        );
        assert_eq!(
            fs::read_link(dest.join("bin/sh")).unwrap(),
            Path::new("/bin/busybox")
        );
        assert_eq!(
            fs::metadata(dest.join("tmp")).unwrap().mode() & 0o7777,
            0o1777
        );
        assert_eq!(
            fs::metadata(dest.join("etc")).unwrap().mtime(),
            1_700_000_000,
            "directory times are set after their children"
        );
        assert_eq!(fs::metadata(&dest).unwrap().mode() & 0o777, 0o755);
    }

    #[test]
    fn whiteouts_become_overlay_whiteouts() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("layer");
        let tar = LayerBuilder::new()
            .dir("etc", 0o755)
            .file("etc/.wh.motd", b"")
            .file(".wh.gone", b"")
            .dir("var/cache", 0o755)
            .file("var/cache/.wh..wh..opq", b"")
            .file("var/cache/new", b"x")
            .file("opaque-first/.wh..wh..opq", b"")
            .file(".wh..wh.plnk", b"")
            .bytes();
        unpack_tar(&tar[..], &dest).unwrap();
        for whiteout in ["etc/motd", "gone"] {
            let meta = fs::symlink_metadata(dest.join(whiteout)).unwrap();
            assert!(meta.file_type().is_char_device(), "{whiteout}");
            assert_eq!(meta.rdev(), 0, "{whiteout}");
        }
        assert!(!dest.join("etc/.wh.motd").exists());
        assert_eq!(
            get_xattr(&dest.join("var/cache"), XATTR_OPAQUE).as_deref(),
            Some(&b"y"[..])
        );
        assert_eq!(
            get_xattr(&dest.join("opaque-first"), XATTR_OPAQUE).as_deref(),
            Some(&b"y"[..]),
            "a marker before its directory's entry still marks it"
        );
        assert!(!dest.join("var/cache/.wh..wh..opq").exists());
        assert_eq!(fs::read(dest.join("var/cache/new")).unwrap(), b"x");
        assert!(get_xattr(&dest.join("etc"), XATTR_OPAQUE).is_none());
        assert!(!dest.join(".wh..wh.plnk").exists() && !dest.join("plnk").exists());
    }

    #[test]
    fn escapes_are_refused() {
        let tar = LayerBuilder::new()
            .raw("../evil", tar::EntryType::Regular, None)
            .bytes();
        assert!(unpack_err(&tar).contains("'..'"));

        let tar = LayerBuilder::new()
            .raw("/etc/passwd", tar::EntryType::Regular, None)
            .bytes();
        assert!(unpack_err(&tar).contains("absolute"));

        let outside = tempfile::tempdir().unwrap();
        let tar = LayerBuilder::new()
            .symlink("escape", outside.path().to_str().unwrap())
            .file("escape/pwned", b"x")
            .bytes();
        assert!(unpack_err(&tar).contains("symlink 'escape'"));
        assert!(!outside.path().join("pwned").exists());

        let tar = LayerBuilder::new()
            .raw("link", tar::EntryType::Link, Some("../../etc/passwd"))
            .bytes();
        assert!(unpack_err(&tar).contains("hard link"));

        let tar = LayerBuilder::new()
            .symlink("up", "/etc")
            .raw("stolen", tar::EntryType::Link, Some("up/passwd"))
            .bytes();
        assert!(unpack_err(&tar).contains("symlink 'up'"));

        let tar = LayerBuilder::new()
            .raw("dangling", tar::EntryType::Link, Some("missing"))
            .bytes();
        assert!(unpack_err(&tar).contains("not a file of this layer"));
    }

    #[test]
    fn blobs_are_verified_and_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let tar = LayerBuilder::new().file("hello", b"world").bytes();
        let gz = gzip(&tar);
        let blob = dir.path().join("blob");
        fs::write(&blob, &gz).unwrap();
        let blob_digest = diff_id(&gz);
        let dest = dir.path().join("a");
        let size = unpack_blob(&blob, "", Some(&blob_digest), &diff_id(&tar), &dest).unwrap();
        assert_eq!(size, 5);
        assert_eq!(fs::read(dest.join("hello")).unwrap(), b"world");

        let err = unpack_blob(&blob, "", None, &diff_id(b"other"), &dir.path().join("b"));
        assert!(matches!(err, Err(UnpackError::Invalid(m)) if m.contains("diff id")));
        let err = unpack_blob(
            &blob,
            "",
            Some(&diff_id(b"other")),
            &diff_id(&tar),
            &dir.path().join("c"),
        );
        assert!(matches!(err, Err(UnpackError::Invalid(m)) if m.contains("digest")));

        fs::write(&blob, [0x28, 0xb5, 0x2f, 0xfd, 0, 0]).unwrap();
        let err = unpack_blob(&blob, "", None, &diff_id(&tar), &dir.path().join("d"));
        assert!(matches!(err, Err(UnpackError::Unsupported(_))));
    }

    /// Writes an OCI layout archive of one single-layer image, as `scripts/mkimage.py` does.
    fn write_archive(
        path: &Path,
        layer_tar: &[u8],
        annotations: serde_json::Value,
        entrypoint: &[&str],
    ) -> String {
        let layer = gzip(layer_tar);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": host_architecture(), "os": "linux",
            "config": {"Entrypoint": entrypoint, "Env": ["PATH=/bin"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id(layer_tar)]},
        }))
        .unwrap();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": diff_id(&config), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": diff_id(&layer), "size": layer.len()}],
        }))
        .unwrap();
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "digest": diff_id(&manifest), "size": manifest.len(),
                           "annotations": annotations}],
        }))
        .unwrap();
        let mut builder = tar::Builder::new(File::create(path).unwrap());
        let mut add = |name: String, data: &[u8]| {
            let mut header = tar::Header::new_ustar();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            builder.append_data(&mut header, name, data).unwrap();
        };
        add("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#);
        add("index.json".into(), &index);
        for blob in [&layer, &config, &manifest] {
            add(format!("blobs/sha256/{}", &diff_id(blob)[7..]), blob);
        }
        builder.finish().unwrap();
        diff_id(&manifest)
    }

    #[tokio::test]
    async fn archives_import_share_layers_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("images");
        let layer = LayerBuilder::new()
            .dir("bin", 0o755)
            .file("bin/app", b"app")
            .bytes();
        let first = dir.path().join("first.tar");
        let digest = write_archive(
            &first,
            &layer,
            serde_json::json!({ANNOTATION_IMAGE_NAME: "127.0.0.1:5000/t/app:1",
                               ANNOTATION_REF_NAME: "1"}),
            &["/bin/app"],
        );
        let second = dir.path().join("My App.tar");
        write_archive(
            &second,
            &layer,
            serde_json::json!({ANNOTATION_REF_NAME: "v2"}),
            &["/bin/app", "--two"],
        );

        let store = ImageStore::open(&root, vec![]).unwrap();
        let images = store.import_archive(&first).await.unwrap();
        assert_eq!(images.len(), 1);
        let image = &images[0];
        assert_eq!(image.reference, "127.0.0.1:5000/t/app:1");
        assert_eq!(image.digest, digest);
        assert_eq!(image.layers, vec![diff_id(&layer)]);
        assert_eq!(image.config.entrypoint, vec!["/bin/app"]);
        assert_eq!(image.config.working_dir.as_deref(), Some("/"));
        assert_eq!(image.size_bytes, 3);
        let dirs = store.layer_dirs(image);
        assert_eq!(dirs, vec![root.join("layers").join(&diff_id(&layer)[7..])]);
        assert_eq!(fs::read(dirs[0].join("bin/app")).unwrap(), b"app");

        // A tag-only name takes its repository from the file name; the layer is shared.
        let images = store.import_archive(&second).await.unwrap();
        assert_eq!(images[0].reference, "docker.io/library/my-app:v2");
        assert_eq!(store.layer_dirs(&images[0]), dirs);
        assert_eq!(fs::read_dir(root.join("layers")).unwrap().count(), 1);
        // Importing again is idempotent: same record, same time, no new layer.
        let first_record = store.get("127.0.0.1:5000/t/app:1").unwrap();
        assert_eq!(
            store.import_archive(&first).await.unwrap(),
            vec![first_record]
        );
        assert_eq!(fs::read_dir(root.join("layers")).unwrap().count(), 1);
        assert_eq!(fs::read_dir(root.join("tmp")).unwrap().count(), 0);
        drop(store);

        let store = ImageStore::open(&root, vec![]).unwrap();
        let listed: Vec<String> = store.list().into_iter().map(|i| i.reference).collect();
        assert_eq!(
            listed,
            ["127.0.0.1:5000/t/app:1", "docker.io/library/my-app:v2"]
        );
        let known = store.ensure("127.0.0.1:5000/t/app:1").await.unwrap();
        assert_eq!(known.digest, digest, "ensure uses the local image");
        assert_eq!(
            store.get("my-app:v2").unwrap().config.cmd,
            Vec::<String>::new()
        );
        assert!(store.remove("my-app:v2").unwrap().is_some());
        assert_eq!(ImageStore::open(&root, vec![]).unwrap().list().len(), 1);
    }

    #[tokio::test]
    async fn bad_archives_are_caller_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(&dir.path().join("images"), vec![]).unwrap();
        let junk = dir.path().join("junk.tar");
        fs::write(&junk, b"this is not a tar archive at all").unwrap();
        let err = store.import_archive(&junk).await.unwrap_err();
        assert!(matches!(err, ImageError::InvalidArchive(_)), "{err}");

        let plain = dir.path().join("plain.tar");
        let mut builder = tar::Builder::new(File::create(&plain).unwrap());
        let mut header = tar::Header::new_ustar();
        header.set_size(2);
        builder
            .append_data(&mut header, "hello.txt", &b"hi"[..])
            .unwrap();
        builder.finish().unwrap();
        drop(builder);
        let err = store.import_archive(&plain).await.unwrap_err();
        assert!(err.to_string().contains("no index.json"), "{err}");
        assert!(err.is_caller_error());
    }

    #[tokio::test]
    async fn concurrent_imports_unpack_a_layer_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(ImageStore::open(&dir.path().join("images"), vec![]).unwrap());
        let layer = LayerBuilder::new().file("data", &[7u8; 100_000]).bytes();
        let mut tasks = Vec::new();
        for n in 0..4 {
            let archive = dir.path().join(format!("img{n}.tar"));
            write_archive(&archive, &layer, serde_json::json!({}), &["/data"]);
            let store = store.clone();
            tasks.push(tokio::spawn(
                async move { store.import_archive(&archive).await },
            ));
        }
        for task in tasks {
            let images = task.await.unwrap().unwrap();
            assert_eq!(images[0].size_bytes, 100_000);
        }
        assert_eq!(store.list().len(), 4);
        let layers: Vec<_> = fs::read_dir(dir.path().join("images/layers"))
            .unwrap()
            .collect();
        assert_eq!(layers.len(), 1);
        assert!(store.layer_locks.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn unreachable_registries_are_reported_plainly() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            ImageStore::open(&dir.path().join("images"), vec!["127.0.0.1:1".into()]).unwrap();
        let err = store.pull("127.0.0.1:1/x/y:1").await.unwrap_err();
        assert!(matches!(err, ImageError::Registry(_)), "{err}");
        assert!(
            err.to_string()
                .contains("cannot reach registry 127.0.0.1:1"),
            "{err}"
        );
    }

    #[test]
    fn duplicate_layers_are_listed_once_at_their_highest_position() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(dir.path(), vec![]).unwrap();
        let (a, b) = (
            format!("sha256:{}", "a".repeat(64)),
            format!("sha256:{}", "b".repeat(64)),
        );
        let image = Image {
            reference: "x".into(),
            digest: String::new(),
            layers: vec![a.clone(), b.clone(), a.clone()],
            config: ImageConfig::default(),
            size_bytes: 0,
            created: 0,
        };
        let names: Vec<String> = store
            .layer_dirs(&image)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["b".repeat(64), "a".repeat(64)]);
    }

    #[test]
    fn archive_names() {
        let none = BTreeMap::new();
        assert_eq!(
            archive_reference(&none, Some("busybox")).unwrap(),
            "docker.io/library/busybox:latest"
        );
        assert!(archive_reference(&none, None).is_err());
        let full = BTreeMap::from([(
            ANNOTATION_REF_NAME.to_string(),
            "localhost/sbx-test/busybox:latest".to_string(),
        )]);
        assert_eq!(
            archive_reference(&full, None).unwrap(),
            "localhost/sbx-test/busybox:latest"
        );
        assert_eq!(
            repository_from_file_name("/x/Busy Box.tar.gz").as_deref(),
            Some("busy-box")
        );
        assert_eq!(repository_from_file_name("---.tar"), None);
    }
}
