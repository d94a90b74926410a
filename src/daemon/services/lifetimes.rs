//! Sandbox lifetimes: a TTL (deleted at the deadline) and an idle timeout (paused once no exec,
//! stream or file transfer happened for that long), set on create and by a PATCH, kept by the
//! platform with the sandbox (so they survive restarts) and enforced by the leader replica.
use std::time::Duration;

use tokio::sync::mpsc;

use super::sandboxes::SandboxService;
use super::tenants::Owner;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::{Lifetime, PlatformError};
use crate::shared::exec_stream::{ExecSession, Frame};
use crate::shared::models::sandbox::{
    CreateSandboxRequest, MAX_LIFETIME_SECONDS, MIN_LIFETIME_SECONDS, Sandbox, SandboxPatch,
    SandboxStatus,
};
use crate::shared::timestamp::now_unix;

/// How often the leader looks at the sandboxes' deadlines and idle times.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How often an open stream counts as activity.
const STREAM_ACTIVITY_EVERY: Duration = Duration::from_secs(5);

/// A `ttl_seconds` or `idle_timeout_seconds` between the minimum and the maximum.
fn at_least_minimum(field: &str, seconds: u64) -> ServiceResult<u64> {
    if !(MIN_LIFETIME_SECONDS..=MAX_LIFETIME_SECONDS).contains(&seconds) {
        return Err(ServiceError::bad_request(format!(
            "{field} must be at least {MIN_LIFETIME_SECONDS} seconds and at most \
             {MAX_LIFETIME_SECONDS} (ten years)"
        )));
    }
    Ok(seconds)
}

/// A TTL within the tenant's maximum: the maximum when none is asked for.
fn ttl_within(ttl: Option<u64>, owner: Option<&Owner>) -> ServiceResult<Option<u64>> {
    let max = owner
        .and_then(|o| o.spec.limits.as_ref())
        .and_then(|l| l.max_ttl_seconds);
    match (ttl, max) {
        (Some(t), Some(max)) if t > max => Err(ServiceError::bad_request(format!(
            "ttl_seconds {t} is above the tenant's limits.maxTtlSeconds of {max}"
        ))),
        (Some(t), _) => Ok(Some(at_least_minimum("ttl_seconds", t)?)),
        (None, max) => Ok(max),
    }
}

/// The lifetime of a create, counted from now.
pub fn create_lifetime(
    request: &CreateSandboxRequest,
    owner: Option<&Owner>,
) -> ServiceResult<Lifetime> {
    let ttl = ttl_within(request.ttl_seconds, owner)?;
    let idle = request
        .idle_timeout_seconds
        .map(|t| at_least_minimum("idle_timeout_seconds", t))
        .transpose()?;
    Ok(Lifetime {
        expires_at: ttl.map(|t| now_unix() + t as i64),
        idle_timeout_seconds: idle,
    })
}

/// A sandbox a fork or restore made gets its tenant's maximum TTL, when it sets one.
pub async fn apply_tenant_ttl(
    sandboxes: &dyn crate::daemon::platform::SandboxBackend,
    owner: Option<&Owner>,
    namespace: &str,
    name: &str,
) -> ServiceResult<()> {
    if let Some(max) = ttl_within(None, owner)? {
        let lifetime = Lifetime {
            expires_at: Some(now_unix() + max as i64),
            idle_timeout_seconds: None,
        };
        sandboxes.set_lifetime(namespace, name, lifetime).await?;
    }
    Ok(())
}

impl SandboxService {
    /// Changes a sandbox's lifetime: a TTL counts from now; `null` removes a setting (the
    /// TTL only when its tenant sets no maximum). The sandbox as it is then.
    pub async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &SandboxPatch,
    ) -> ServiceResult<Sandbox> {
        let current = self.get(namespace, name).await?;
        let owner = self.tenants.owner(namespace).await?;
        let (mut lifetime, _) = Lifetime::of_record(&current);
        match patch.ttl_seconds {
            None => {}
            Some(None) => {
                if ttl_within(None, owner.as_ref())?.is_some() {
                    return Err(ServiceError::bad_request(
                        "the tenant sets limits.maxTtlSeconds: its sandboxes keep a TTL",
                    ));
                }
                lifetime.expires_at = None;
            }
            Some(Some(ttl)) => {
                let ttl = ttl_within(Some(ttl), owner.as_ref())?.unwrap_or(ttl);
                lifetime.expires_at = Some(now_unix() + ttl as i64);
            }
        }
        match patch.idle_timeout_seconds {
            None => {}
            Some(None) => lifetime.idle_timeout_seconds = None,
            Some(Some(idle)) => {
                lifetime.idle_timeout_seconds =
                    Some(at_least_minimum("idle_timeout_seconds", idle)?);
            }
        }
        self.sandboxes
            .set_lifetime(namespace, name, lifetime)
            .await?;
        self.get(namespace, name).await
    }

    /// On the leader, every second: deletes the sandboxes past their deadline and pauses the
    /// running ones idle for longer than their idle timeout (forever). Only the sandboxes the
    /// platform names as due are read.
    pub async fn lifetimes_loop(self: std::sync::Arc<Self>) {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if !self.tenancy.is_leader() {
                continue;
            }
            let now = now_unix();
            let due = match self.sandboxes.due_sandboxes(now).await {
                Ok(due) => due,
                Err(e) => {
                    tracing::warn!(error = %e, "listing sandboxes for their lifetimes");
                    continue;
                }
            };
            for (namespace, name) in due {
                self.end_of_lifetime(&namespace, &name, now).await;
            }
        }
    }

    /// Deletes a sandbox past its deadline, or pauses it when it runs and was idle for longer
    /// than its idle timeout, as its record says now.
    async fn end_of_lifetime(&self, namespace: &str, name: &str, now: i64) {
        let s = match self.sandboxes.get_sandbox(namespace, name).await {
            Ok(s) => s,
            Err(PlatformError::NotFound(_)) => return,
            Err(e) => {
                tracing::warn!(%namespace, %name, error = %e, "reading a sandbox for its lifetime");
                return;
            }
        };
        let (lifetime, last) = Lifetime::of_record(&s);
        if s.status == SandboxStatus::Terminating {
            return;
        }
        if lifetime.expired(now) {
            tracing::info!(%namespace, %name, "the sandbox's TTL passed: deleting it");
            if let Err(e) = self.sandboxes.delete_sandbox(namespace, name).await {
                tracing::warn!(%namespace, %name, error = %e, "deleting an expired sandbox");
            }
            return;
        }
        if s.status == SandboxStatus::Running && last.is_some_and(|l| lifetime.idle(l, now)) {
            tracing::info!(%namespace, %name, idle = ?lifetime.idle_timeout_seconds, "the sandbox was idle: pausing it");
            if let Err(e) = self.sandboxes.pause_sandbox(namespace, name).await {
                tracing::warn!(%namespace, %name, error = %e, "pausing an idle sandbox");
            }
        }
    }

    /// Records activity in the background: the exec it belongs to does not wait for it.
    pub(super) fn touch_later(&self, namespace: &str, name: &str) {
        let backend = self.sandboxes.clone();
        let (namespace, name) = (namespace.to_string(), name.to_string());
        tokio::spawn(async move { backend.touch_sandbox(&namespace, &name).await });
    }

    /// `session` with its activity recorded while it is open (at its start, every few
    /// seconds, and at its end): a long shell is not idle.
    pub(super) fn keep_touching(
        &self,
        namespace: &str,
        name: &str,
        session: ExecSession,
    ) -> ExecSession {
        let ExecSession { input, mut output } = session;
        let (tx, rx) = mpsc::channel(64);
        let backend = self.sandboxes.clone();
        let (namespace, name) = (namespace.to_string(), name.to_string());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(STREAM_ACTIVITY_EVERY);
            loop {
                tokio::select! {
                    frame = output.recv() => {
                        let Some(frame) = frame else { break };
                        let last = matches!(frame, Frame::Status(_));
                        if tx.send(frame).await.is_err() || last {
                            break;
                        }
                    }
                    _ = tick.tick() => {
                        // Frames do not wait for the write.
                        let (backend, namespace, name) =
                            (backend.clone(), namespace.clone(), name.clone());
                        tokio::spawn(async move { backend.touch_sandbox(&namespace, &name).await });
                    }
                    _ = tx.closed() => break,
                }
            }
            backend.touch_sandbox(&namespace, &name).await;
        });
        ExecSession { input, output: rx }
    }
}
