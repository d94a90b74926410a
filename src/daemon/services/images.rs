//! Images (an sbx extension of the contract): the rules of listing, pulling and importing,
//! over the platform's image store where it has one (404 where the cluster's nodes pull).
use std::path::Path;
use std::sync::Arc;

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::images::{ImageBackend, UploadFile};
use crate::shared::image_ref::parse_reference;
use crate::shared::models::identity::Role;
use crate::shared::models::image::{ImageRecord, PullImageRequest};

/// Issue 43 point 14: the registries a caller may make the service pull from. A tenant's
/// caller (a `user`, an unscoped development key) names images only from `[images]
/// allowedRegistries`, in a pull, a create or a restore's override; operators and admins from
/// any. Decided here, for every platform (on Kubernetes the kubelet pulls, but what it pulls
/// comes from these requests).
#[derive(Debug, Clone)]
pub struct RegistryPolicy {
    allowed: Vec<String>,
}

impl RegistryPolicy {
    /// A policy over `allowedRegistries` (lowercase names; `*` is any).
    pub fn new(allowed: Vec<String>) -> RegistryPolicy {
        RegistryPolicy { allowed }
    }

    /// 403 naming the setting unless `principal` may pull `image` (400 for a reference that
    /// does not parse).
    pub fn check(&self, principal: &Principal, image: &str) -> ServiceResult<()> {
        if principal.require_cluster_role(Role::Operator).is_ok() {
            return Ok(());
        }
        let reference = parse_reference(image).map_err(ServiceError::bad_request)?;
        let registry = reference.registry().to_ascii_lowercase();
        if self.allowed.iter().any(|a| a == "*" || *a == registry) {
            return Ok(());
        }
        let allowed = if self.allowed.is_empty() {
            "none".to_string()
        } else {
            self.allowed.join(", ")
        };
        Err(ServiceError::forbidden(format!(
            "registry {registry} is not in [images] allowedRegistries ({allowed}): tenant users \
             pull only from those; an admin may add it to the daemon's config, or an operator \
             may pull the image"
        )))
    }
}

/// The image service.
pub struct ImageService {
    store: Option<Arc<dyn ImageBackend>>,
    registries: Arc<RegistryPolicy>,
}

impl ImageService {
    /// A service over the platform's image store, if it has one.
    pub fn new(
        store: Option<Arc<dyn ImageBackend>>,
        registries: Arc<RegistryPolicy>,
    ) -> ImageService {
        ImageService { store, registries }
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

    /// `POST /images/pull`: `reference` is required, and from an allowed registry.
    pub async fn pull(
        &self,
        principal: &Principal,
        request: &PullImageRequest,
    ) -> ServiceResult<ImageRecord> {
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
        self.registries.check(principal, reference)?;
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
