//! Wire types of the image routes (an sbx extension of the contract): list, pull from a
//! registry, import an OCI archive.
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::shared::models::formats::ImageReference;

/// Content type of the body of `POST /api/v1/images/import`: an OCI image-layout tar.
pub const IMPORT_CONTENT_TYPE: &str = crate::shared::files::TAR;

/// The body of `POST /api/v1/images/import` as documented: the raw bytes of an OCI
/// image-layout tar (or tar.gz) file. Never built in memory; the route streams the body.
#[derive(Debug, Clone, ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct OciArchive(pub Vec<u8>);

/// An image in the host's image store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImageRecord {
    /// Normalized reference: `busybox` is stored as `docker.io/library/busybox:latest`.
    #[schema(example = "docker.io/library/busybox:latest")]
    pub reference: String,
    /// Digest of the image manifest (the platform manifest, not an index).
    #[schema(example = "sha256:8f75fc2882ce15acf2251d3e61b158ec476a9850bb7340ee012b5467c50d2cf6")]
    pub digest: String,
    /// Number of layers.
    pub layers: usize,
    /// Unpacked size of its distinct layers, in bytes; layers shared with other images are
    /// stored once.
    pub size_bytes: u64,
    /// When the store recorded the image, unix seconds.
    pub created: i64,
    /// The image's `Entrypoint`.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// The image's `Cmd`.
    #[serde(default)]
    pub cmd: Vec<String>,
}

/// `POST /api/v1/images/pull`: fetch an image from its registry into the host's store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PullImageRequest {
    /// Required. An OCI reference, `[REGISTRY/]REPOSITORY[:TAG][@DIGEST]`, e.g. `busybox` or
    /// `127.0.0.1:5000/team/app:1`. Registries are reached over HTTPS unless listed as
    /// insecure in the daemon's configuration.
    #[serde(default)]
    #[schema(example = "busybox:latest", value_type = ImageReference, required = true)]
    pub reference: Option<String>,
}

/// Query of `POST /api/v1/images/import`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ImportImagesQuery {
    /// The archive's file name. Images the archive names only by a tag (`latest`) are named
    /// after it: `busybox.tar` gives `busybox:latest`. The CLI sends it.
    #[serde(default)]
    pub file_name: Option<String>,
}

/// The images an archive import added or replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportImagesResponse {
    /// One record per image in the archive.
    pub images: Vec<ImageRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_requests_tolerate_missing_fields() {
        let record = ImageRecord {
            reference: "docker.io/library/busybox:latest".into(),
            digest: "sha256:00".into(),
            layers: 1,
            size_bytes: 2_140_160,
            created: 1_700_000_000,
            entrypoint: vec!["/bin/sh".into()],
            cmd: vec![],
        };
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["size_bytes"], 2_140_160);
        assert_eq!(serde_json::from_value::<ImageRecord>(json).unwrap(), record);
        let request: PullImageRequest = serde_json::from_str("{}").unwrap();
        assert_eq!(request.reference, None);
    }
}
