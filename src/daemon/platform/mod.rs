//! The platform seam (DESIGN.md §2): what the services need from the place where state and
//! sandboxes live. `local` is SQLite + sbxd on this host; a Kubernetes implementation slots
//! in beside it.
pub mod local;

use async_trait::async_trait;

use crate::shared::models::identity::ApiKey;

/// A failure of the platform underneath a request; the message is for the log.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// The state store failed.
    #[error("state store: {0}")]
    Store(String),
    /// A file under the data dir could not be written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// Result of a platform call.
pub type PlatformResult<T> = Result<T, PlatformError>;

/// An API key as stored: the record without a token, and the SHA-256 of its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// The record (its `token` is always `None`).
    pub key: ApiKey,
    /// SHA-256 of the secret part of the token.
    pub secret_sha256: [u8; 32],
}

/// Everything the service layer asks of a platform.
#[async_trait]
pub trait Platform: Send + Sync + 'static {
    /// Short name for logs (`local`, `kubernetes`).
    fn name(&self) -> &'static str;

    /// Every stored key.
    async fn list_keys(&self) -> PlatformResult<Vec<StoredKey>>;
    /// Stores a new key.
    async fn insert_key(&self, key: &StoredKey) -> PlatformResult<()>;
    /// Deletes every key with this name, returning their ids.
    async fn delete_keys_named(&self, name: &str) -> PlatformResult<Vec<String>>;
    /// Records a successful authentication of a key.
    async fn touch_key(&self, id: &str, at: i64) -> PlatformResult<()>;

    /// Whether a tenant of this name exists.
    async fn tenant_exists(&self, name: &str) -> PlatformResult<bool>;

    /// Stores the first admin token where only the service's operator can read it; returns
    /// a description of where (for the log and `sbx login --bootstrap`).
    async fn store_bootstrap_token(&self, token: &str) -> PlatformResult<String>;
}
