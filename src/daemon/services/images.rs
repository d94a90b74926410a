//! Images (an sbx extension of the contract): the rules of listing, pulling and importing,
//! over the platform's image store where it has one (404 where the cluster's nodes pull).
use std::path::Path;
use std::sync::Arc;

use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::images::{ImageBackend, UploadFile};
use crate::shared::models::image::{ImageRecord, PullImageRequest};

/// The image service.
pub struct ImageService {
    store: Option<Arc<dyn ImageBackend>>,
}

impl ImageService {
    /// A service over the platform's image store, if it has one.
    pub fn new(store: Option<Arc<dyn ImageBackend>>) -> ImageService {
        ImageService { store }
    }

    fn store(&self) -> ServiceResult<&Arc<dyn ImageBackend>> {
        self.store.as_ref().ok_or_else(|| {
            ServiceError::not_found(
                "this platform has no image store: the cluster's nodes pull images",
            )
        })
    }

    /// `GET /images`.
    pub fn list(&self) -> ServiceResult<Vec<ImageRecord>> {
        Ok(self.store()?.list_images())
    }

    /// `POST /images/pull`: `reference` is required.
    pub async fn pull(&self, request: &PullImageRequest) -> ServiceResult<ImageRecord> {
        let reference = request
            .reference
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                ServiceError::bad_request(
                    "missing required field `reference`: the image to pull, e.g. busybox:latest",
                )
            })?;
        Ok(self.store()?.pull_image(reference).await?)
    }

    /// Where to write an archive being uploaded for [`ImageService::import`].
    pub fn new_upload(&self) -> ServiceResult<UploadFile> {
        Ok(self.store()?.new_upload())
    }

    /// `POST /images/import`: the images of an uploaded archive of `received` bytes.
    pub async fn import(
        &self,
        archive: &Path,
        received: u64,
        file_name: Option<&str>,
    ) -> ServiceResult<Vec<ImageRecord>> {
        if received == 0 {
            return Err(ServiceError::bad_request(
                "the request body is empty: send an OCI image archive (e.g. `sbx image import FILE`)",
            ));
        }
        Ok(self.store()?.import_images(archive, file_name).await?)
    }
}
