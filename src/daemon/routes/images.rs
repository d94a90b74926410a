//! `/api/v1/images`: the host's image store (an sbx extension of the contract): list, pull
//! from a registry, import an OCI archive uploaded as the request body.
use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Json, Query};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorCode, ErrorEnvelope};
use crate::shared::models::identity::Role;
use crate::shared::models::image::{
    ImageRecord, ImportImagesQuery, ImportImagesResponse, OciArchive, PullImageRequest,
};

/// Largest archive `POST /api/v1/images/import` accepts.
pub const IMPORT_BODY_LIMIT_BYTES: u64 = 8 * 1024 * 1024 * 1024;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/images", get(list_images))
        .route("/api/v1/images/pull", post(pull_image))
        .route(
            "/api/v1/images/import",
            // The archive is streamed to disk, never buffered: the app's 1 MiB limit for
            // buffered bodies does not apply, and the handler enforces its own.
            post(import_images).layer(DefaultBodyLimit::disable()),
        )
}

/// Who may import, and whether the body is announced as an archive.
fn check_import(principal: &Principal, headers: &HeaderMap) -> ServiceResult<()> {
    principal.require_cluster_role(Role::Operator)?;
    crate::daemon::extract::require_tar_body(headers)?;
    Ok(())
}

/// Reads and drops the rest of a rejected upload, so the client, still sending, receives the
/// error instead of a broken pipe.
async fn discard(body: Body) {
    let mut stream = body.into_data_stream();
    let mut seen = 0u64;
    while let Some(Ok(chunk)) = stream.next().await {
        seen += chunk.len() as u64;
        if seen > IMPORT_BODY_LIMIT_BYTES {
            break;
        }
    }
}

/// Images in the host's store, by reference. A caller who sees every namespace (operators,
/// admins, an unscoped development key) sees them all; a tenant's caller only those that
/// sandboxes in its namespaces run, since what one tenant pulled tells what it runs.
#[utoipa::path(get, path = "/api/v1/images", tag = "images",
    responses((status = 200, description = "Image records: all of them for operators and admins, those the sandboxes of the caller's namespaces run for a tenant's caller", body = DataEnvelope<Vec<ImageRecord>>)))]
pub async fn list_images(
    State(state): State<AppState>,
    principal: Principal,
) -> ServiceResult<Json<Vec<ImageRecord>>> {
    let access = state.tenants.access(&principal).await?;
    let mut images = state.images.list()?;
    if !access.everywhere() {
        let used = state.sandboxes.images_in(&access.namespaces()).await?;
        images.retain(|image| used.contains(&image.reference));
    }
    Ok(Json(images))
}

/// Pull an image from its registry into the host's store (any role but `read-only`; a
/// tenant's caller only from `[images] allowedRegistries`). Every host the pull contacts (the
/// registry, its token service, each redirect) must be on a public address unless listed
/// under `[images] privateRegistries`. Layers already stored are reused; pulling an unchanged
/// image changes nothing.
#[utoipa::path(post, path = "/api/v1/images/pull", tag = "images",
    request_body = PullImageRequest,
    responses(
        (status = 201, description = "The stored image", body = DataEnvelope<ImageRecord>),
        (status = 400, description = "Missing or invalid reference, or content the store cannot use", body = ErrorEnvelope),
        (status = 403, description = "A read-only caller; a tenant's caller naming a registry outside `[images] allowedRegistries`; or a host of the pull on a loopback, private or link-local address (`Forbidden`)", body = ErrorEnvelope),
        (status = 404, description = "The registry has no such repository, tag, digest or platform", body = ErrorEnvelope),
        (status = 503, description = "The registry cannot be reached, refuses access or sends bad content (`ServiceUnavailable`)", body = ErrorEnvelope),
    ))]
pub async fn pull_image(
    State(state): State<AppState>,
    principal: Principal,
    Json(request): Json<PullImageRequest>,
) -> ServiceResult<(StatusCode, Json<ImageRecord>)> {
    principal.require_write()?;
    let image = state.images.pull(&principal, &request).await?;
    Ok((StatusCode::CREATED, Json(image)))
}

/// Import the images of an OCI image-layout archive sent as the body (`Content-Type:
/// application/x-tar`, up to 8 GiB, streamed to disk), as `skopeo copy … oci-archive:FILE` and
/// `podman save --format oci-archive` write them (operator or admin).
#[utoipa::path(post, path = "/api/v1/images/import", tag = "images",
    params(ImportImagesQuery),
    request_body(
        content(
            (OciArchive = "application/x-tar"),
            (OciArchive = "application/octet-stream")
        ),
        description = "An OCI image-layout archive (tar, optionally gzip-compressed)"
    ),
    responses(
        (status = 201, description = "The imported images", body = DataEnvelope<ImportImagesResponse>),
        (status = 400, description = "Empty body, not an OCI archive, a broken or unsupported image in it", body = ErrorEnvelope),
        (status = 413, description = "The archive exceeds 8 GiB", body = ErrorEnvelope),
        (status = 415, description = "The body was not sent as application/x-tar (or application/octet-stream)", body = ErrorEnvelope),
    ))]
pub async fn import_images(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<ImportImagesQuery>,
    headers: HeaderMap,
    body: Body,
) -> ServiceResult<(StatusCode, Json<ImportImagesResponse>)> {
    if let Err(rejection) = check_import(&principal, &headers) {
        discard(body).await;
        return Err(rejection);
    }
    let upload = state.images.new_upload()?;
    let path = (*upload).as_ref();
    let mut file = tokio::fs::File::create(path)
        .await
        .map_err(|e| ServiceError::internal(format!("cannot create {}: {e}", path.display())))?;
    let mut stream = body.into_data_stream();
    let mut received = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ServiceError::bad_request(format!("the archive upload was interrupted: {e}"))
        })?;
        received += chunk.len() as u64;
        if received > IMPORT_BODY_LIMIT_BYTES {
            return Err(ServiceError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the archive exceeds the import limit of {} GiB",
                    IMPORT_BODY_LIMIT_BYTES >> 30
                ),
            ));
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| ServiceError::internal(format!("cannot write the upload: {e}")))?;
    }
    file.flush()
        .await
        .map_err(|e| ServiceError::internal(format!("cannot write the upload: {e}")))?;
    drop(file);
    let images = state
        .images
        .import(path, received, query.file_name.as_deref())
        .await?;
    Ok((StatusCode::CREATED, Json(ImportImagesResponse { images })))
}
