//! sbxd, the local sandbox runtime: OCI bundles run by a runc-compatible CLI over overlayfs,
//! with cgroup limits, a network namespace per sandbox and a per-sandbox shim for stdio and
//! logs. The engine (`engine`) drives them; the local platform owns state and the lifecycle.
pub mod bundle;
pub mod cgroup;
pub mod criu;
pub mod engine;
pub mod flatten;
pub mod idmap;
pub mod images;
pub mod logs;
pub mod network;
pub mod overlay;
pub mod process;
pub mod pty;
pub mod runc;
pub mod seccomp;
pub mod shim;
pub mod storage;

/// A failure of the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Input the runtime cannot use (caller's fault: 400).
    #[error("{0}")]
    Invalid(String),
    /// A runtime command failed.
    #[error("{command}: {message}")]
    Command {
        /// The command.
        command: String,
        /// Its stderr.
        message: String,
    },
    /// A host operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        source: std::io::Error,
    },
    /// State on disk is not what the runtime wrote.
    #[error("{0}")]
    Corrupt(String),
    /// A prerequisite is missing on this host.
    #[error("{0}")]
    Unavailable(String),
    /// The OCI configuration could not be built.
    #[error("OCI spec: {0}")]
    Spec(String),
    /// The image could not be resolved.
    #[error(transparent)]
    Image(#[from] images::ImageError),
    /// The network could not be set up.
    #[error(transparent)]
    Network(#[from] network::NetworkError),
}

impl RuntimeError {
    /// An I/O failure with context.
    pub fn io(context: &str, source: std::io::Error) -> RuntimeError {
        RuntimeError::Io {
            context: context.to_string(),
            source,
        }
    }

    /// An oci-spec builder failure.
    pub fn spec(e: impl std::fmt::Display) -> RuntimeError {
        RuntimeError::Spec(e.to_string())
    }
}
