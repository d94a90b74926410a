//! The image seam: the host's image store, where a platform has one (the embedded default
//! pulls and unpacks images itself; on Kubernetes the cluster's nodes do, and there is none).
use std::path::Path;

use async_trait::async_trait;

use crate::daemon::platform::PlatformResult;
use crate::shared::models::image::ImageRecord;

/// A file an uploaded archive is written to; removed when dropped.
pub type UploadFile = Box<dyn AsRef<Path> + Send + Sync>;

/// An image store: list, pull, import.
#[async_trait]
pub trait ImageBackend: Send + Sync {
    /// Every stored image.
    fn list_images(&self) -> Vec<ImageRecord>;
    /// Pulls an image from its registry (a bad reference, an unknown image or a registry that
    /// cannot be reached is `Invalid`).
    async fn pull_image(&self, reference: &str) -> PlatformResult<ImageRecord>;
    /// Where to write an uploaded archive before [`ImageBackend::import_images`].
    fn new_upload(&self) -> UploadFile;
    /// Imports the images of an OCI archive; `file_name` (the upload's) names the repository
    /// of images the archive names only by a tag.
    async fn import_images(
        &self,
        archive: &Path,
        file_name: Option<&str>,
    ) -> PlatformResult<Vec<ImageRecord>>;
}
