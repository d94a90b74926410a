//! The typed API client: one method per endpoint, every non-2xx decoded into the shared
//! [`ApiError`].
mod files;

use std::time::{Duration, Instant};

use reqwest::{Method, RequestBuilder};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::shared::envelope::{ApiError, DataEnvelope};
use crate::shared::exec_stream::{ExecSession, ExecStreamQuery};
use crate::shared::models::health::{HealthResponse, RootInfo};
use crate::shared::models::identity::{
    ApiKey, CreateKeyRequest, RevokeKeysResponse, RoleBindings, WhoamiResponse,
};
use crate::shared::models::image::{
    IMPORT_CONTENT_TYPE, ImageRecord, ImportImagesResponse, PullImageRequest,
};
use crate::shared::models::install::{InstallRequest, InstallStartResponse, InstallStatusResponse};
use crate::shared::models::node::{DedicateRequest, NodeStorage};
use crate::shared::models::sandbox::{
    CreateSandboxRequest, CreateSandboxResponse, CreateSnapshotRequest, CreateSnapshotResponse,
    DeleteAllResponse, ExecRequest, ExecResponse, ForkRequest, ForkResponse, LogsQuery,
    LogsResponse, PauseRequest, ResumeRequest, Sandbox, SandboxMetrics,
};
use crate::shared::models::snapshot::{
    GcRequest, GcResponse, RestoreRequest, RestoreResponse, Snapshot, SnapshotListQuery,
};
use crate::shared::models::tenant::{CreateTenantRequest, DeleteTenantResponse, Tenant};
use crate::shared::models::usage::{UsageQuery, UsageResponse};
use crate::shared::models::{DEFAULT_NAMESPACE, MessageResponse};
use crate::shared::paths::API_KEY_HEADER;

/// Pauses before each new attempt at a request whose connection failed.
const CONNECT_RETRY_PAUSES: [Duration; 3] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
];

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error envelope.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The server could not be reached.
    #[error("cannot reach the sbx server at {server}: {reason}")]
    Connect {
        /// The server URL.
        server: String,
        /// What the transport said.
        reason: String,
    },
    /// The server answered 2xx with a body that is not the expected payload.
    #[error("unexpected response from {server}: {reason}")]
    Decode {
        /// The server URL.
        server: String,
        /// What did not match.
        reason: String,
    },
}

/// Result of a client call.
pub type ClientResult<T> = Result<T, ClientError>;

/// A client of one server with one (optional) API key.
#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    server: String,
    api_key: Option<String>,
}

fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text = format!("{text}: {inner}");
        source = inner.source();
    }
    text
}

impl ApiClient {
    /// A client of `server` (e.g. `http://127.0.0.1:8080`).
    pub fn new(server: &str, api_key: Option<String>) -> ClientResult<ApiClient> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("sbx/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ClientError::Connect {
                server: server.to_string(),
                reason: describe(&e),
            })?;
        Ok(ApiClient {
            http,
            server: server.trim_end_matches('/').to_string(),
            api_key,
        })
    }

    /// The server URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.server));
        match &self.api_key {
            Some(key) => builder.header(API_KEY_HEADER, key),
            None => builder,
        }
    }

    async fn send_raw(&self, builder: RequestBuilder) -> ClientResult<(u16, Vec<u8>)> {
        let started = Instant::now();
        let request = builder.build().map_err(|e| ClientError::Connect {
            server: self.server.clone(),
            reason: describe(&e),
        })?;
        let (method, url) = (request.method().clone(), request.url().path().to_string());
        let response = self
            .execute(request)
            .await
            .map_err(|e| ClientError::Connect {
                server: self.server.clone(),
                reason: describe(&e),
            })?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| ClientError::Connect {
            server: self.server.clone(),
            reason: describe(&e),
        })?;
        tracing::debug!(%method, path = %url, status, elapsed_ms = started.elapsed().as_millis() as u64, "request");
        Ok((status, body.to_vec()))
    }

    /// Sends a request, again after a pause when no connection could be made: the server
    /// never saw it, so any method is safe to repeat. This carries a call over a replica that
    /// has just gone (a Service still routing to its address: no route to host) or is
    /// restarting (refused). A request whose body is a stream is sent once.
    async fn execute(&self, request: reqwest::Request) -> reqwest::Result<reqwest::Response> {
        let mut request = request;
        let mut pauses = CONNECT_RETRY_PAUSES.iter();
        loop {
            let again = request.try_clone();
            match self.http.execute(request).await {
                Err(error) if error.is_connect() => match (again, pauses.next()) {
                    (Some(next), Some(pause)) => {
                        tracing::debug!(error = %describe(&error), "connect failed; trying again");
                        tokio::time::sleep(*pause).await;
                        request = next;
                    }
                    _ => return Err(error),
                },
                outcome => return outcome,
            }
        }
    }

    /// Sends a request and decodes a bare (non-envelope) JSON body.
    async fn send_bare<T: DeserializeOwned>(&self, builder: RequestBuilder) -> ClientResult<T> {
        let (status, body) = self.send_raw(builder).await?;
        if !(200..300).contains(&status) {
            return Err(ApiError::from_body(status, &body).into());
        }
        serde_json::from_slice(&body).map_err(|e| ClientError::Decode {
            server: self.server.clone(),
            reason: e.to_string(),
        })
    }

    /// Sends a request and unwraps the `data` of the envelope.
    async fn send<T: DeserializeOwned>(&self, builder: RequestBuilder) -> ClientResult<T> {
        self.send_bare::<DataEnvelope<T>>(builder)
            .await
            .map(|envelope| envelope.data)
    }

    async fn send_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> ClientResult<T> {
        self.send(self.request(method, path).json(body)).await
    }

    /// `GET /`.
    pub async fn root(&self) -> ClientResult<RootInfo> {
        self.send_bare(self.request(Method::GET, "/")).await
    }

    /// `GET /health`.
    pub async fn health(&self) -> ClientResult<HealthResponse> {
        self.send_bare(self.request(Method::GET, "/health")).await
    }

    /// `GET /api/v1/auth/whoami`.
    pub async fn whoami(&self) -> ClientResult<WhoamiResponse> {
        self.send(self.request(Method::GET, "/api/v1/auth/whoami"))
            .await
    }

    /// `POST /api/v1/keys`.
    pub async fn create_key(&self, request: &CreateKeyRequest) -> ClientResult<ApiKey> {
        self.send_json(Method::POST, "/api/v1/keys", request).await
    }

    /// `GET /api/v1/keys`.
    pub async fn list_keys(&self) -> ClientResult<Vec<ApiKey>> {
        self.send(self.request(Method::GET, "/api/v1/keys")).await
    }

    /// `DELETE /api/v1/keys/{name}`.
    pub async fn revoke_keys(&self, name: &str) -> ClientResult<RevokeKeysResponse> {
        let path = format!("/api/v1/keys/{}", encode_segment(name));
        self.send(self.request(Method::DELETE, &path)).await
    }

    /// `GET /api/v1/role-bindings`.
    pub async fn role_bindings(&self) -> ClientResult<RoleBindings> {
        self.send(self.request(Method::GET, "/api/v1/role-bindings"))
            .await
    }

    /// `PUT /api/v1/role-bindings`.
    pub async fn put_role_bindings(&self, document: &RoleBindings) -> ClientResult<RoleBindings> {
        self.send_json(Method::PUT, "/api/v1/role-bindings", document)
            .await
    }

    /// `POST /api/v1/install` (202).
    pub async fn start_install(&self, nodes: &[String]) -> ClientResult<InstallStartResponse> {
        let body = InstallRequest {
            nodes: Some(nodes.to_vec()),
            ..Default::default()
        };
        self.send_json(Method::POST, "/api/v1/install", &body).await
    }

    /// `GET /api/v1/install/{operation}`.
    pub async fn install_status(&self, operation: &str) -> ClientResult<InstallStatusResponse> {
        let path = format!("/api/v1/install/{}", encode_segment(operation));
        self.send(self.request(Method::GET, &path)).await
    }

    /// `GET /api/v1/nodes/storage`.
    pub async fn node_storage(&self) -> ClientResult<NodeStorage> {
        self.send(self.request(Method::GET, "/api/v1/nodes/storage"))
            .await
    }

    /// `POST /api/v1/nodes/{node}/dedicate`.
    pub async fn dedicate_node(&self, node: &str, tenant: &str) -> ClientResult<MessageResponse> {
        let path = format!("/api/v1/nodes/{}/dedicate", encode_segment(node));
        let body = DedicateRequest {
            tenant: Some(tenant.to_string()),
        };
        self.send_json(Method::POST, &path, &body).await
    }

    /// `POST /api/v1/nodes/{node}/undedicate`.
    pub async fn undedicate_node(&self, node: &str) -> ClientResult<MessageResponse> {
        let path = format!("/api/v1/nodes/{}/undedicate", encode_segment(node));
        self.send(self.request(Method::POST, &path)).await
    }

    /// `GET /api/v1/usage`.
    pub async fn usage(&self, query: &UsageQuery) -> ClientResult<UsageResponse> {
        self.send(self.request(Method::GET, "/api/v1/usage").query(query))
            .await
    }

    /// `GET /api/v1/tenants`.
    pub async fn list_tenants(&self) -> ClientResult<Vec<Tenant>> {
        self.send(self.request(Method::GET, "/api/v1/tenants"))
            .await
    }

    /// `GET /api/v1/tenants/{name}`.
    pub async fn get_tenant(&self, name: &str) -> ClientResult<Tenant> {
        let path = format!("/api/v1/tenants/{}", encode_segment(name));
        self.send(self.request(Method::GET, &path)).await
    }

    /// `POST /api/v1/tenants`.
    pub async fn create_tenant(&self, request: &CreateTenantRequest) -> ClientResult<Tenant> {
        self.send_json(Method::POST, "/api/v1/tenants", request)
            .await
    }

    /// `PATCH /api/v1/tenants/{name}` with a raw JSON body (`null` removes a section).
    pub async fn patch_tenant(&self, name: &str, body: &serde_json::Value) -> ClientResult<Tenant> {
        let path = format!("/api/v1/tenants/{}", encode_segment(name));
        self.send_json(Method::PATCH, &path, body).await
    }

    /// `DELETE /api/v1/tenants/{name}[?cascade=true]`.
    pub async fn delete_tenant(
        &self,
        name: &str,
        cascade: bool,
    ) -> ClientResult<DeleteTenantResponse> {
        let mut path = format!("/api/v1/tenants/{}", encode_segment(name));
        if cascade {
            path.push_str("?cascade=true");
        }
        self.send(self.request(Method::DELETE, &path)).await
    }

    /// `GET /api/v1/images`.
    pub async fn list_images(&self) -> ClientResult<Vec<ImageRecord>> {
        self.send(self.request(Method::GET, "/api/v1/images")).await
    }

    /// `POST /api/v1/images/pull`.
    pub async fn pull_image(&self, request: &PullImageRequest) -> ClientResult<ImageRecord> {
        self.send_json(Method::POST, "/api/v1/images/pull", request)
            .await
    }

    /// `POST /api/v1/images/import`: streams an open archive as the body, never buffering it;
    /// `file_name` names images the archive names only by a tag.
    pub async fn import_images(
        &self,
        archive: tokio::fs::File,
        file_name: &str,
    ) -> ClientResult<ImportImagesResponse> {
        let path = format!(
            "/api/v1/images/import?file_name={}",
            encode_segment(file_name)
        );
        let builder = self
            .request(Method::POST, &path)
            .header(reqwest::header::CONTENT_TYPE, IMPORT_CONTENT_TYPE)
            .body(reqwest::Body::from(archive));
        self.send(builder).await
    }
}

/// Percent-encodes one path segment.
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Sandbox routes.
impl ApiClient {
    fn sandbox_path(name: &str, suffix: &str, namespace: &str) -> String {
        format!(
            "/api/v1/sandboxes/{}{suffix}?namespace={}",
            encode_segment(name),
            encode_segment(namespace)
        )
    }

    /// `POST /api/v1/sandboxes`.
    pub async fn create_sandbox(
        &self,
        request: &CreateSandboxRequest,
    ) -> ClientResult<CreateSandboxResponse> {
        self.send_json(Method::POST, "/api/v1/sandboxes", request)
            .await
    }

    /// `GET /api/v1/sandboxes` of a namespace, or of all namespaces when `None`.
    pub async fn list_sandboxes(&self, namespace: Option<&str>) -> ClientResult<Vec<Sandbox>> {
        self.list_sandboxes_selected(namespace, None).await
    }

    /// `GET /api/v1/sandboxes?label_selector=`: those whose labels match `selector`.
    pub async fn list_sandboxes_selected(
        &self,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> ClientResult<Vec<Sandbox>> {
        let mut path = match namespace {
            Some(ns) => format!("/api/v1/sandboxes?namespace={}", encode_segment(ns)),
            None => "/api/v1/sandboxes?all_namespaces=true".to_string(),
        };
        if let Some(selector) = selector {
            path.push_str(&format!("&label_selector={}", encode_segment(selector)));
        }
        self.send(self.request(Method::GET, &path)).await
    }

    /// `PATCH /api/v1/sandboxes/{name}`: a new lifetime.
    pub async fn patch_sandbox(
        &self,
        name: &str,
        namespace: &str,
        patch: &crate::shared::models::sandbox::SandboxPatch,
    ) -> ClientResult<Sandbox> {
        let path = Self::sandbox_path(name, "", namespace);
        self.send_json(Method::PATCH, &path, patch).await
    }

    /// `GET /api/v1/sandboxes/{name}`.
    pub async fn get_sandbox(&self, name: &str, namespace: &str) -> ClientResult<Sandbox> {
        self.send(self.request(Method::GET, &Self::sandbox_path(name, "", namespace)))
            .await
    }

    /// `DELETE /api/v1/sandboxes/{name}`.
    pub async fn delete_sandbox(
        &self,
        name: &str,
        namespace: &str,
    ) -> ClientResult<MessageResponse> {
        self.send(self.request(Method::DELETE, &Self::sandbox_path(name, "", namespace)))
            .await
    }

    /// `DELETE /api/v1/sandboxes` (every sandbox of a namespace).
    pub async fn delete_all_sandboxes(&self, namespace: &str) -> ClientResult<DeleteAllResponse> {
        let path = format!("/api/v1/sandboxes?namespace={}", encode_segment(namespace));
        self.send(self.request(Method::DELETE, &path)).await
    }

    /// `POST /api/v1/sandboxes/{name}/exec`.
    pub async fn exec_sandbox(
        &self,
        name: &str,
        namespace: &str,
        request: &ExecRequest,
    ) -> ClientResult<ExecResponse> {
        self.send_json(
            Method::POST,
            &Self::sandbox_path(name, "/exec", namespace),
            request,
        )
        .await
    }

    /// `GET /api/v1/sandboxes/{name}/exec/stream`: the WebSocket of a streamed exec, as a
    /// session (a refusal before the upgrade is the envelope's error).
    pub async fn exec_stream(
        &self,
        name: &str,
        query: &ExecStreamQuery,
    ) -> ClientResult<ExecSession> {
        // A stream outlives any request time limit, and upgrades only over HTTP/1.1.
        let http = reqwest::Client::builder()
            .user_agent(concat!("sbx/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .http1_only()
            .build()
            .map_err(|e| ClientError::Connect {
                server: self.server.clone(),
                reason: describe(&e),
            })?;
        let path = format!("/api/v1/sandboxes/{}/exec/stream", encode_segment(name));
        let mut request = http.get(format!("{}{path}", self.server)).query(query);
        if let Some(key) = &self.api_key {
            request = request.header(API_KEY_HEADER, key);
        }
        match crate::shared::exec_stream::connect(request).await {
            Ok(socket) => Ok(crate::shared::exec_stream::client_session(socket)),
            Err((0, reason)) => Err(ClientError::Connect {
                server: self.server.clone(),
                reason: String::from_utf8_lossy(&reason).into_owned(),
            }),
            Err((status, body)) => Err(ApiError::from_body(status, &body).into()),
        }
    }

    /// `GET /api/v1/sandboxes/{name}/logs`.
    pub async fn sandbox_logs(&self, name: &str, query: &LogsQuery) -> ClientResult<LogsResponse> {
        self.send(self.request(Method::GET, &Self::logs_path(name, query)))
            .await
    }

    /// `/api/v1/sandboxes/{name}/logs` with the query's namespace, container, tail and since.
    fn logs_path(name: &str, query: &LogsQuery) -> String {
        let namespace = query.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
        format!(
            "{}&container={}&tail={}&since={}",
            Self::sandbox_path(name, "/logs", namespace),
            encode_segment(&query.container),
            query.tail,
            query.since
        )
    }

    /// A GET whose body the caller streams: the response once its status is a success, the
    /// error it decodes to otherwise.
    async fn open_stream(&self, path: &str) -> ClientResult<reqwest::Response> {
        let connect = |e: reqwest::Error| ClientError::Connect {
            server: self.server.clone(),
            reason: describe(&e),
        };
        let response = self
            .request(Method::GET, path)
            .send()
            .await
            .map_err(connect)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let body = response.bytes().await.map_err(connect)?;
            return Err(ApiError::from_body(status, &body).into());
        }
        Ok(response)
    }

    /// `GET /api/v1/sandboxes/{name}/logs?follow=true`: the log's chunks as they come, until
    /// the sandbox stops (the receiver ends) or it is dropped.
    pub async fn follow_logs(
        &self,
        name: &str,
        query: &LogsQuery,
    ) -> ClientResult<tokio::sync::mpsc::Receiver<ClientResult<bytes::Bytes>>> {
        use futures_util::StreamExt;
        let path = format!("{}&follow=true", Self::logs_path(name, query));
        let response = self.open_stream(&path).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let server = self.server.clone();
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| ClientError::Connect {
                    server: server.clone(),
                    reason: format!("the log stream broke off: {}", describe(&e)),
                });
                let failed = chunk.is_err();
                if tx.send(chunk).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(rx)
    }

    /// `POST /api/v1/sandboxes/{name}/pause`.
    pub async fn pause_sandbox(
        &self,
        name: &str,
        request: &PauseRequest,
    ) -> ClientResult<MessageResponse> {
        let path = format!("/api/v1/sandboxes/{}/pause", encode_segment(name));
        self.send_json(Method::POST, &path, request).await
    }

    /// `POST /api/v1/sandboxes/{name}/resume`.
    pub async fn resume_sandbox(
        &self,
        name: &str,
        request: &ResumeRequest,
    ) -> ClientResult<MessageResponse> {
        let path = format!("/api/v1/sandboxes/{}/resume", encode_segment(name));
        self.send_json(Method::POST, &path, request).await
    }

    /// `GET /api/v1/sandboxes/metrics`.
    pub async fn sandbox_metrics(&self, namespace: &str) -> ClientResult<Vec<SandboxMetrics>> {
        let path = format!(
            "/api/v1/sandboxes/metrics?namespace={}",
            encode_segment(namespace)
        );
        self.send(self.request(Method::GET, &path)).await
    }
}

/// Snapshot routes (and the snapshot-related sandbox routes).
impl ApiClient {
    /// `POST /api/v1/sandboxes/{name}/snapshot`.
    pub async fn snapshot_sandbox(
        &self,
        name: &str,
        request: &CreateSnapshotRequest,
    ) -> ClientResult<CreateSnapshotResponse> {
        let path = format!("/api/v1/sandboxes/{}/snapshot", encode_segment(name));
        self.send_json(Method::POST, &path, request).await
    }

    /// `POST /api/v1/sandboxes/{name}/fork`.
    pub async fn fork_sandbox(
        &self,
        name: &str,
        request: &ForkRequest,
    ) -> ClientResult<ForkResponse> {
        let path = format!("/api/v1/sandboxes/{}/fork", encode_segment(name));
        self.send_json(Method::POST, &path, request).await
    }

    /// `GET /api/v1/snapshots`.
    pub async fn list_snapshots(&self, query: &SnapshotListQuery) -> ClientResult<Vec<Snapshot>> {
        let mut path = if query.all_namespaces {
            "/api/v1/snapshots?all_namespaces=true".to_string()
        } else {
            format!(
                "/api/v1/snapshots?namespace={}",
                encode_segment(query.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE))
            )
        };
        if let Some(sandbox) = &query.sandbox {
            path.push_str(&format!("&sandbox={}", encode_segment(sandbox)));
        }
        if let Some(kind) = &query.kind {
            path.push_str(&format!("&kind={}", encode_segment(kind)));
        }
        self.send(self.request(Method::GET, &path)).await
    }

    fn snapshot_path(name: &str, suffix: &str, namespace: &str) -> String {
        format!(
            "/api/v1/snapshots/{}{suffix}?namespace={}",
            encode_segment(name),
            encode_segment(namespace)
        )
    }

    /// `GET /api/v1/snapshots/{name}`.
    pub async fn get_snapshot(&self, name: &str, namespace: &str) -> ClientResult<Snapshot> {
        self.send(self.request(Method::GET, &Self::snapshot_path(name, "", namespace)))
            .await
    }

    /// `DELETE /api/v1/snapshots/{name}`.
    pub async fn delete_snapshot(
        &self,
        name: &str,
        namespace: &str,
    ) -> ClientResult<MessageResponse> {
        self.send(self.request(Method::DELETE, &Self::snapshot_path(name, "", namespace)))
            .await
    }

    /// `POST /api/v1/snapshots/{name}/restore`.
    pub async fn restore_snapshot(
        &self,
        name: &str,
        request: &RestoreRequest,
    ) -> ClientResult<RestoreResponse> {
        let path = format!("/api/v1/snapshots/{}/restore", encode_segment(name));
        self.send_json(Method::POST, &path, request).await
    }

    /// `POST /api/v1/snapshots/gc`.
    pub async fn gc_snapshots(&self, request: &GcRequest) -> ClientResult<GcResponse> {
        self.send_json(Method::POST, "/api/v1/snapshots/gc", request)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that starts listening only after the first attempt was refused still gets
    /// the call; one that never listens is reported as unreachable.
    #[tokio::test]
    async fn a_refused_connection_is_tried_again() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .unwrap();
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let _ = stream.read(&mut request).await.unwrap();
            let body = r#"{"status":"healthy"}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).await.unwrap();
        });
        let client = ApiClient::new(&format!("http://127.0.0.1:{port}"), None).unwrap();
        assert_eq!(client.health().await.unwrap().status, "healthy");
        server.await.unwrap();

        let refused = client.health().await.unwrap_err();
        assert!(matches!(refused, ClientError::Connect { .. }), "{refused}");
    }
}
