//! `/api/v1/sandboxes/{name}/files`: files in and out of a sandbox as tar archives (sbx
//! extension), and what a path in a sandbox is.
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{StreamExt, TryStreamExt};

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Json, Path, Query};
use crate::daemon::ratelimit::Kind;
use crate::daemon::services::files::MAX_UPLOAD_BODY_BYTES;
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorCode, ErrorEnvelope};
use crate::shared::files::{FileStat, FilesQuery, TAR, TarArchive, UploadResult};
use crate::shared::models::formats::DnsLabel;
use crate::shared::models::sandbox::namespace_or_default;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/sandboxes/{name}/files",
            // The archive streams through, never buffered: the app's 1 MiB body limit is for
            // JSON bodies.
            get(download_files).put(upload_files),
        )
        .route("/api/v1/sandboxes/{name}/files/stat", get(stat_file))
}

/// What a path in a sandbox is: a file, a directory or a link (not followed).
///
/// It runs a shell in the sandbox as its user (the sandbox must be running), so it needs the
/// write access an exec needs.
#[utoipa::path(get, path = "/api/v1/sandboxes/{name}/files/stat", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), FilesQuery),
    responses(
        (status = 200, description = "What the path is", body = DataEnvelope<FileStat>),
        (status = 400, description = "Missing `path`, not absolute, or with a `..`", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox, or nothing at the path", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is paused or has failed", body = ErrorEnvelope),
    ))]
pub async fn stat_file(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<FilesQuery>,
) -> ServiceResult<Json<FileStat>> {
    let namespace = namespace_or_default(query.namespace.as_deref());
    state.tenants.require_write(&principal, namespace).await?;
    let _slot = super::tenant_slot(&state, namespace, Kind::Exec).await?;
    Ok(Json(state.sandboxes.stat_file(&name, &query).await?))
}

/// Download a file or directory of a sandbox as a tar archive (sbx extension).
///
/// The archive holds `path` under its own name (`/etc/hosts` → `hosts`; a directory with
/// everything under it), with modes and times; a link is archived as a link, never followed.
/// `tar` runs in the sandbox as its user: the image needs `tar` and `/bin/sh` (422 otherwise).
/// The body streams as `tar` writes it; a failure after its first bytes breaks the transfer
/// (never a short archive that looks whole).
#[utoipa::path(get, path = "/api/v1/sandboxes/{name}/files", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), FilesQuery),
    responses(
        (status = 200, description = "The archive, streamed", body = TarArchive, content_type = "application/x-tar"),
        (status = 400, description = "Missing `path`, not absolute, `/`, or with a `..`", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox, or nothing at the path", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is paused or has failed", body = ErrorEnvelope),
        (status = 422, description = "The image has no `tar` or `/bin/sh`, or `tar` failed (a file it may not read)", body = ErrorEnvelope),
    ))]
pub async fn download_files(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<FilesQuery>,
) -> ServiceResult<Response> {
    let namespace = namespace_or_default(query.namespace.as_deref());
    state.tenants.require_write(&principal, namespace).await?;
    let slot = super::tenant_slot(&state, namespace, Kind::FileTransfer).await?;
    let archive = state.sandboxes.download_files(&name, &query).await?;
    // The slot is held for as long as the archive streams (the body holds the stream).
    let archive = archive.inspect(move |_| {
        let _ = &slot;
    });
    let mut response = Body::from_stream(archive).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TAR));
    Ok(response)
}

/// Upload files into a sandbox: a tar archive unpacked in a directory (sbx extension).
///
/// `path` names a directory that exists. Every entry is checked before the sandbox sees it:
/// relative, no `..`, not under a link the archive made, a file, directory or link (no devices
/// or FIFOs), 1 GiB of content at most, in a body of at most 1.1 GiB (headers and padding
/// included); a GNU long name or link or a PAX header may hold 64 KiB at most (refused by the
/// size its header announces, before it is read). Modes and times are kept; the files belong
/// to the sandbox's user (`tar` runs in the sandbox as that user, which the image must have,
/// with `/bin/sh`). A refused entry ends the upload there: the entries before it stay.
#[utoipa::path(put, path = "/api/v1/sandboxes/{name}/files", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), FilesQuery),
    request_body(
        content(
            (TarArchive = "application/x-tar"),
            (TarArchive = "application/octet-stream")
        ),
        description = "A tar archive"
    ),
    responses(
        (status = 200, description = "Unpacked", body = DataEnvelope<UploadResult>),
        (status = 400, description = "Missing or bad `path`, not a directory, not a tar archive, a refused entry (named), or an extension header (long name or link, PAX) of more than 64 KiB", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox, or no directory at the path", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is paused or has failed", body = ErrorEnvelope),
        (status = 413, description = "The archive unpacks to more than 1 GiB, or the body is larger than 1.1 GiB", body = ErrorEnvelope),
        (status = 415, description = "The body was not sent as application/x-tar (or application/octet-stream)", body = ErrorEnvelope),
        (status = 422, description = "The image has no `tar` or `/bin/sh`, or `tar` failed (no room, no permission)", body = ErrorEnvelope),
    ))]
pub async fn upload_files(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<FilesQuery>,
    headers: HeaderMap,
    body: Body,
) -> ServiceResult<Json<UploadResult>> {
    let namespace = namespace_or_default(query.namespace.as_deref());
    state.tenants.require_write(&principal, namespace).await?;
    crate::daemon::extract::require_tar_body(&headers)?;
    let _slot = super::tenant_slot(&state, namespace, Kind::FileTransfer).await?;
    // A body announced too large is refused before a byte of it is read (a client that
    // waits for `100 Continue` sends none); one that is not announced is counted as it comes.
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > MAX_UPLOAD_BODY_BYTES) {
        return Err(ServiceError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than {MAX_UPLOAD_BODY_BYTES} bytes"),
        ));
    }
    let body = body.into_data_stream().map_err(std::io::Error::other);
    Ok(Json(
        state.sandboxes.upload_files(&name, &query, body).await?,
    ))
}
