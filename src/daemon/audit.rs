//! The audit trail: one JSON line per write (`POST`, `PUT`, `PATCH`, `DELETE`) an
//! authenticated principal made, and per read that runs something in a sandbox or takes data
//! out of it (a streamed exec, a file download, a file stat) — who, what, which object, the
//! outcome. Failed authentications are recorded per client address, at most one line per
//! address and status per `[audit] authFailureInterval` with the count of the interval, so
//! that a flood of bad tokens cannot fill the trail. Never a body, a query beyond the
//! namespace, a token or an environment value. Lines go to a file (appended, 0600) through a
//! channel, so a slow disk never holds a request.
use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Reads that are audited like writes (route templates, `GET`): they run something in a
/// sandbox or take data out of it.
const AUDITED_READS: [&str; 3] = [
    "/api/v1/sandboxes/{name}/exec/stream",
    "/api/v1/sandboxes/{name}/files",
    "/api/v1/sandboxes/{name}/files/stat",
];

/// Addresses whose failed authentications are counted apart; past it, the others are
/// counted together under the address `*`.
const MAX_FAILING_ADDRESSES: usize = 10_000;

/// A response's extension: the namespace a request named in its body (pause, resume), for
/// the audit record.
#[derive(Debug, Clone)]
pub struct AuditNamespace(pub String);

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
    /// The client's address (failed authentications).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// How many requests the record stands for (failed authentications of one address in
    /// one interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// Failed authentications of one address and status in the current interval.
struct Failures {
    /// When the interval began (its first failure was recorded then).
    since: Instant,
    /// Failures since, not yet recorded.
    pending: u64,
    /// The path of the last one.
    path: String,
}

type FailureKey = (String, u16);

/// Where audit lines go.
#[derive(Clone)]
pub struct Audit {
    lines: mpsc::Sender<String>,
    failures: Arc<Mutex<HashMap<FailureKey, Failures>>>,
    interval: Duration,
}

impl Audit {
    /// Opens `path` for appending (`-`: standard output) and starts its writer and the
    /// recorder of failed authentications, one line per address per `interval` (must run
    /// inside the runtime).
    pub fn open(path: &Path, interval: Duration) -> std::io::Result<Audit> {
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
        let audit = Audit {
            lines,
            failures: Arc::new(Mutex::new(HashMap::new())),
            interval,
        };
        let flusher = audit.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                flusher.flush_failures(false);
                // The writer is gone (the daemon stops): so is the point of flushing.
                if flusher.lines.is_closed() {
                    return;
                }
            }
        });
        Ok(audit)
    }

    /// A failed authentication from `address` (`status` 401, or 429 for an address refused
    /// for its failures): the first of an interval is recorded at once, the rest as one line
    /// with their count when the interval ends.
    pub fn auth_failure(&self, address: IpAddr, path: &str, status: u16) {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let mut key = (address.to_canonical().to_string(), status);
        if !failures.contains_key(&key) && failures.len() >= MAX_FAILING_ADDRESSES {
            key.0 = "*".to_string();
        }
        match failures.get_mut(&key) {
            Some(entry) => {
                entry.pending += 1;
                entry.path = path.to_string();
            }
            None => {
                failures.insert(
                    key.clone(),
                    Failures {
                        since: now,
                        pending: 0,
                        path: path.to_string(),
                    },
                );
                drop(failures);
                self.record(&failure_record(&key, path, 1));
            }
        }
    }

    /// Records the counts of the intervals that ended (all of them with `all`) and forgets
    /// the addresses that had nothing more in theirs.
    pub fn flush_failures(&self, all: bool) {
        let now = Instant::now();
        let mut records = Vec::new();
        {
            let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
            failures.retain(|key, entry| {
                if !all && now.saturating_duration_since(entry.since) < self.interval {
                    return true;
                }
                if entry.pending == 0 {
                    return false;
                }
                records.push(failure_record(key, &entry.path, entry.pending));
                entry.pending = 0;
                entry.since = now;
                true
            });
        }
        for record in records {
            self.record(&record);
        }
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

/// The record of `count` failed authentications of one address and status.
fn failure_record(key: &FailureKey, path: &str, count: u64) -> AuditRecord {
    let (address, status) = key;
    AuditRecord {
        time: format_rfc3339_utc(now_unix()),
        principal: String::new(),
        principal_type: String::new(),
        action: "authenticate".to_string(),
        path: path.to_string(),
        namespace: None,
        status: *status,
        outcome: ErrorCode::for_status(*status).as_str().to_string(),
        address: Some(address.clone()),
        count: Some(count),
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

/// Middleware inside authentication: records every write, and the reads of
/// [`AUDITED_READS`], once it is answered.
pub async fn audit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let write = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let audited_read = *request.method() == Method::GET
        && request
            .extensions()
            .get::<MatchedPath>()
            .is_some_and(|m| AUDITED_READS.contains(&m.as_str()));
    let (Some(audit), true) = (state.audit.as_ref(), write || audited_read) else {
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
            .extensions()
            .get::<AuditNamespace>()
            .map(|n| n.0.clone());
    }
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
        // A WebSocket's 101 is its success.
        outcome: if status.is_success() || status.is_informational() {
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
        address: None,
        count: None,
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
