//! Pulling from a registry: the manifest for this host's platform, the config, and each
//! layer streamed, verified and unpacked (layers the store has are not fetched again); a
//! registry's refusals turned into short messages that say what to do. Nothing a registry
//! wrote (bodies, error messages, host names it chose) reaches the caller: the status, a
//! fixed phrase, and the details in the log.
use std::fs;
use std::io;
use std::path::Path;

use futures_util::{StreamExt, TryStreamExt};

use super::distribution::{Hop, PullError, phrase};
use super::*;

impl ImageStore {
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
            .pull_manifest_and_config(&parsed)
            .await
            .map_err(fail)?;
        if let Some(existing) = self.get(&normalized) {
            if existing.digest == digest && self.layers_present(&existing) {
                tracing::debug!(reference = %normalized, %digest, "image unchanged; nothing to pull");
                return Ok(existing);
            }
        }
        let config = parse_config(&config_text).map_err(|reason| {
            tracing::warn!(reference = %normalized, %reason, "a registry sent an invalid image config");
            ImageError::Registry(format!(
                "registry {registry} sent an invalid image config for {normalized}"
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
        let budget = self.budget(&normalized);
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
                    &budget,
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

    pub(super) async fn fetch_layer(
        &self,
        diff_id: &str,
        hex: &str,
        dir: &Path,
        source: LayerSource<'_>,
        budget: Arc<Budget>,
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
                budget,
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
        self.record_layer_size(hex, size);
        tracing::debug!(%diff_id, size_bytes = size, "layer unpacked");
        Ok(size)
    }

    /// Maps a pull's failure to a short message a user can act on: the status or a fixed
    /// phrase, never the registry's own text (logged here instead).
    pub(super) fn registry_error(
        &self,
        reference: &str,
        registry: &str,
        error: PullError,
    ) -> ImageError {
        tracing::warn!(%reference, %registry, error = ?error, "pull failed");
        match error {
            PullError::Refused(hop, refused) => {
                let what = match hop {
                    Hop::Registry => format!("registry {registry} is at"),
                    Hop::Named => format!(
                        "registry {registry} sends the pull (a token service or a redirect) to"
                    ),
                };
                ImageError::Refused(format!(
                    "pulling {reference} is refused: {what} a {} address; sbx pulls only from \
                     public addresses, except registries an admin lists under [images] \
                     privateRegistries",
                    refused.kind
                ))
            }
            PullError::Status { status, codes } => {
                let missing = status == 404
                    || codes.iter().any(|c| {
                        matches!(
                            c.as_str(),
                            "MANIFEST_UNKNOWN" | "NAME_UNKNOWN" | "BLOB_UNKNOWN" | "NOT_FOUND"
                        )
                    });
                if missing {
                    ImageError::NotFound(format!(
                        "image {reference} not found: registry {registry} has no such \
                         repository, tag or digest (HTTP {status})"
                    ))
                } else if status == 401 || status == 403 {
                    ImageError::Registry(format!(
                        "registry {registry} denied access to {reference} (HTTP {status}); sbx \
                         pulls anonymously, so the image must be public"
                    ))
                } else {
                    ImageError::Registry(format!(
                        "registry {registry} answered HTTP {status} for {reference}"
                    ))
                }
            }
            PullError::Token(why) => ImageError::Registry(format!(
                "registry {registry} requires a token for {reference} and {why}; sbx pulls \
                 anonymously, so the image must be public"
            )),
            PullError::NoPlatform => ImageError::NotFound(format!(
                "image {reference} not found for {}: the registry's index has no such platform",
                host_platform()
            )),
            PullError::Network(e) => {
                let phrase = phrase(&e);
                // A TLS failure against a registry we reach over HTTPS is most often a
                // plain-HTTP registry; refused connections and DNS failures are not.
                let hint = if matches!(phrase, "TLS failed" | "the connection failed")
                    && !self.client.is_insecure(registry)
                {
                    format!(
                        " (sbx uses HTTPS for {registry}; a plain-HTTP registry must be listed \
                         under [images] insecureRegistries in the daemon's config file)"
                    )
                } else {
                    String::new()
                };
                ImageError::Registry(format!(
                    "cannot reach registry {registry} for {reference}: {phrase}{hint}"
                ))
            }
            PullError::Digest { expected, actual } => ImageError::Registry(format!(
                "registry {registry} sent content for {reference} that does not match its \
                 digest (expected {}, got {actual})",
                clip(&expected, 80)
            )),
            PullError::Invalid(why) => ImageError::Registry(format!(
                "registry {registry} sent unusable content for {reference}: {why}"
            )),
            PullError::Unsupported(what) => {
                ImageError::Unsupported(format!("image {reference} uses an unsupported {what}"))
            }
            PullError::Io(e) => ImageError::Io {
                context: format!("cannot store a blob of {reference}"),
                source: e,
            },
        }
    }
}
