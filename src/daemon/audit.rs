//! The audit trail: one JSON line per write (`POST`, `PUT`, `PATCH`, `DELETE`) an
//! authenticated principal made — who, what, which object, the outcome. Never a body, a query
//! beyond the namespace, a token or an environment value. Lines go to a file (appended, 0600)
//! through a channel, so a slow disk never holds a request.
use std::io::Write;
use std::path::{Path, PathBuf};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::daemon::auth::Principal;
use crate::daemon::state::AppState;
use crate::shared::envelope::ErrorCode;
use crate::shared::timestamp::{format_rfc3339_utc, now_unix};

/// Lines waiting for the writer before new ones are dropped (and counted in the log).
const BACKLOG: usize = 4096;

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// When the answer was sent (RFC 3339, UTC).
    pub time: String,
    /// Key id or OIDC `sub`.
    pub principal: String,
    /// `key` or `oidc`.
    pub principal_type: String,
    /// Method and route template, e.g. `POST /api/v1/sandboxes/{name}/exec`.
    pub action: String,
    /// The request's path: the object it names.
    pub path: String,
    /// The namespace the request named (query, or the created object's `Location`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The answer's status.
    pub status: u16,
    /// `ok`, or the error code of the answer.
    pub outcome: String,
}

/// Where audit lines go.
#[derive(Clone)]
pub struct Audit {
    lines: mpsc::Sender<String>,
}

impl Audit {
    /// Opens `path` for appending (`-`: standard output) and starts its writer (must run
    /// inside the runtime).
    pub fn open(path: &Path) -> std::io::Result<Audit> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file: Box<dyn Write + Send> = if path == Path::new(STDOUT) {
            Box::new(std::io::stdout())
        } else {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(path)?,
            )
        };
        let (lines, mut receiver) = mpsc::channel::<String>(BACKLOG);
        let shown = path.display().to_string();
        tokio::task::spawn_blocking(move || {
            while let Some(line) = receiver.blocking_recv() {
                if let Err(e) = writeln!(file, "{line}").and_then(|()| file.flush()) {
                    tracing::error!(file = %shown, error = %e, "cannot write the audit log");
                }
            }
        });
        Ok(Audit { lines })
    }

    /// Queues a record; a full backlog drops it with an error in the daemon's log.
    pub fn record(&self, record: &AuditRecord) {
        let Ok(line) = serde_json::to_string(record) else {
            return;
        };
        if self.lines.try_send(line).is_err() {
            tracing::error!(action = %record.action, "audit backlog full: a record was dropped");
        }
    }
}

/// `path = "-"`: the audit lines go to standard output (the log is on standard error).
pub const STDOUT: &str = "-";

/// The default: `<data dir>/audit.jsonl` on the embedded default; standard output on
/// Kubernetes, where the pod's root is read-only and the cluster collects container output.
pub fn default_path(config: &crate::daemon::config::Config) -> PathBuf {
    match config.platform {
        crate::daemon::config::PlatformKind::Kubernetes => PathBuf::from(STDOUT),
        _ => config.data_dir.join("audit.jsonl"),
    }
}

/// The `namespace` of a query string or a `Location`, if any.
fn namespace_of(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "namespace")
        .map(|(_, value)| value.to_string())
}

/// Middleware inside authentication: records every write once it is answered.
pub async fn audit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let write = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let (Some(audit), true) = (state.audit.as_ref(), write) else {
        return next.run(request).await;
    };
    let principal = request.extensions().get::<Principal>().map(|p| {
        let kind = match p.principal_type {
            crate::shared::models::identity::PrincipalType::Key => "key",
            crate::shared::models::identity::PrincipalType::Oidc => "oidc",
        };
        (p.subject.clone(), kind.to_string())
    });
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || request.uri().path().to_string(),
        |m| m.as_str().to_string(),
    );
    let action = format!("{} {route}", request.method());
    let path = request.uri().path().to_string();
    let mut namespace = namespace_of(request.uri().query());
    let response = next.run(request).await;
    if namespace.is_none() {
        namespace = response
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| namespace_of(v.split_once('?').map(|(_, q)| q)));
    }
    let status = response.status();
    let (principal, principal_type) = principal.unwrap_or_default();
    audit.record(&AuditRecord {
        time: format_rfc3339_utc(now_unix()),
        principal,
        principal_type,
        action,
        path,
        namespace,
        status: status.as_u16(),
        outcome: if status.is_success() {
            "ok".to_string()
        } else {
            // The envelope's code (e.g. `QuotaExceeded`, a 403), else the status's.
            response
                .extensions()
                .get::<ErrorCode>()
                .copied()
                .unwrap_or_else(|| ErrorCode::for_status(status.as_u16()))
                .as_str()
                .to_string()
        },
    });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_comes_from_the_query_only() {
        assert_eq!(
            namespace_of(Some("namespace=team-a&tail=5")),
            Some("team-a".into())
        );
        assert_eq!(namespace_of(Some("command=echo%20namespace=x")), None);
        assert_eq!(namespace_of(None), None);
    }
}
