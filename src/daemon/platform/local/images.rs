//! The embedded default's image seam: the sbxd runtime's content-addressed image store.
use std::path::Path;

use async_trait::async_trait;

use crate::daemon::platform::images::{ImageBackend, UploadFile};
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::runtime::images::{Image, ImageError, ImageStore, repository_from_file_name};
use crate::shared::models::image::ImageRecord;

/// The API's record of a stored image.
fn record(image: &Image) -> ImageRecord {
    ImageRecord {
        reference: image.reference.clone(),
        digest: image.digest.clone(),
        layers: image.layers.len(),
        size_bytes: image.size_bytes,
        created: image.created,
        entrypoint: image.config.entrypoint.clone(),
        cmd: image.config.cmd.clone(),
    }
}

/// An image the registry does not have is `NotFound` (404), a registry that cannot be reached
/// or refuses and a full store are `Unavailable` (503), a host on a private address is
/// `Forbidden` (403), the caller's other mistakes (a bad reference or archive) are `Invalid`
/// (400); the rest is the store's own failure.
pub(super) fn platform_error(error: ImageError) -> PlatformError {
    match error {
        ImageError::NotFound(m) => PlatformError::NotFound(m),
        ImageError::Refused(m) => PlatformError::Forbidden(m),
        ImageError::Registry(m) | ImageError::StoreFull(m) => PlatformError::Unavailable(m),
        error if error.is_caller_error() => PlatformError::Invalid(error.to_string()),
        error => PlatformError::ImageStore(error.to_string()),
    }
}

#[async_trait]
impl ImageBackend for ImageStore {
    fn list_images(&self) -> Vec<ImageRecord> {
        self.list().iter().map(record).collect()
    }

    async fn pull_image(&self, reference: &str) -> PlatformResult<ImageRecord> {
        self.pull(reference)
            .await
            .map(|image| record(&image))
            .map_err(platform_error)
    }

    fn new_upload(&self) -> UploadFile {
        Box::new(ImageStore::new_upload(self))
    }

    async fn import_images(
        &self,
        archive: &Path,
        file_name: Option<&str>,
    ) -> PlatformResult<Vec<ImageRecord>> {
        let fallback = file_name.and_then(repository_from_file_name);
        self.import_archive_as(archive, fallback.as_deref())
            .await
            .map(|images| images.iter().map(record).collect())
            .map_err(platform_error)
    }
}
