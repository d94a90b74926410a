//! The file routes: a path's stat, a tar archive up, a tar archive down.
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::Method;

use super::{ApiClient, ClientResult, describe, encode_segment};
use crate::shared::files::{FileStat, TAR, UploadResult};

impl ApiClient {
    fn files_path(name: &str, suffix: &str, namespace: &str, path: &str) -> String {
        format!(
            "{}&path={}",
            Self::sandbox_path(name, suffix, namespace),
            encode_segment(path)
        )
    }

    /// `GET /api/v1/sandboxes/{name}/files/stat`.
    pub async fn stat_file(
        &self,
        name: &str,
        namespace: &str,
        path: &str,
    ) -> ClientResult<FileStat> {
        let path = Self::files_path(name, "/files/stat", namespace, path);
        self.send(self.request(Method::GET, &path)).await
    }

    /// `PUT /api/v1/sandboxes/{name}/files`: unpacks the tar archive `body` in the directory
    /// `dir` of the sandbox.
    pub async fn upload_files(
        &self,
        name: &str,
        namespace: &str,
        dir: &str,
        body: reqwest::Body,
    ) -> ClientResult<UploadResult> {
        let path = Self::files_path(name, "/files", namespace, dir);
        let builder = self
            .request(Method::PUT, &path)
            .header(reqwest::header::CONTENT_TYPE, TAR)
            .body(body);
        self.send(builder).await
    }

    /// `GET /api/v1/sandboxes/{name}/files`: the tar archive of `path` as it streams (an error
    /// item when the transfer breaks).
    pub async fn download_files(
        &self,
        name: &str,
        namespace: &str,
        path: &str,
    ) -> ClientResult<impl Stream<Item = std::io::Result<Bytes>> + Send + 'static> {
        let path = Self::files_path(name, "/files", namespace, path);
        let response = self.open_stream(&path).await?;
        Ok(response
            .bytes_stream()
            .map(|chunk| chunk.map_err(|e| std::io::Error::other(describe(&e)))))
    }
}
