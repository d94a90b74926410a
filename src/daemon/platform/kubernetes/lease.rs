//! Leases (coordination.k8s.io/v1) in `kube-system`: the leader Lease (`sbx-leader`) that
//! picks the one replica running the scheduled GC sweep and the tenant status refresh, and
//! the per-tenant quota Leases (`sbx-quota-<tenant>`) that serialise quota checks across
//! replicas.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};

use super::{SYSTEM_NAMESPACE, conflict, kube_error};
use crate::daemon::platform::{HeldLock, PlatformError, PlatformResult};

/// The leader Lease's name.
pub const LEADER_LEASE: &str = "sbx-leader";
/// How long a leader's claim lasts without renewal.
const LEADER_DURATION: i32 = 15;
/// How often the leader renews (and a follower retries).
const LEADER_RENEW: Duration = Duration::from_secs(5);
/// How long a quota Lease lasts when its holder dies without releasing it.
const QUOTA_DURATION: i32 = 10;
/// How long a quota check waits for another replica's Lease.
const QUOTA_WAIT: Duration = Duration::from_secs(15);

/// The name of a tenant's quota Lease.
pub fn quota_lease(tenant: &str) -> String {
    format!("sbx-quota-{tenant}")
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Whether a Lease is held by someone other than `me` whose claim has not run out.
fn held_by_other(lease: &Lease, me: &str) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    let Some(holder) = spec.holder_identity.as_deref().filter(|h| !h.is_empty()) else {
        return false;
    };
    if holder == me {
        return false;
    }
    let renewed = spec
        .renew_time
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(0);
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    renewed + duration > k8s_openapi::jiff::Timestamp::now().as_second()
}

/// Takes or renews a Lease for `me`; `Ok(false)` when another holder's claim stands.
async fn claim(api: &Api<Lease>, name: &str, me: &str, duration: i32) -> Result<bool, kube::Error> {
    match api.get_opt(name).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(SYSTEM_NAMESPACE.to_string()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.to_string()),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if conflict(&e) => Ok(false),
                Err(e) => Err(e),
            }
        }
        Some(lease) if held_by_other(&lease, me) => Ok(false),
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() != Some(me) {
                spec.holder_identity = Some(me.to_string());
                spec.acquire_time = Some(now());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            spec.renew_time = Some(now());
            spec.lease_duration_seconds = Some(duration);
            // The resourceVersion read makes this a compare-and-swap: 409 when another
            // replica wrote in between.
            match api.replace(name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if conflict(&e) => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// Gives a Lease up if `me` still holds it.
async fn release(api: &Api<Lease>, name: &str, me: &str) -> Result<(), kube::Error> {
    if let Some(mut lease) = api.get_opt(name).await? {
        if let Some(spec) = lease.spec.as_mut() {
            if spec.holder_identity.as_deref() == Some(me) {
                spec.holder_identity = None;
                match api.replace(name, &PostParams::default(), &lease).await {
                    Ok(_) => {}
                    Err(e) if conflict(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(())
}

/// This replica's part in leader election.
pub struct Leader {
    leading: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Leader {
    /// Starts claiming the leader Lease as `me` every few seconds.
    pub fn start(client: kube::Client, me: String) -> Leader {
        let leading = Arc::new(AtomicBool::new(false));
        let flag = leading.clone();
        let task = tokio::spawn(async move {
            let api: Api<Lease> = Api::namespaced(client, SYSTEM_NAMESPACE);
            loop {
                let now_leading = match claim(&api, LEADER_LEASE, &me, LEADER_DURATION).await {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::debug!(error = %e, "leader Lease");
                        false
                    }
                };
                if flag.swap(now_leading, Ordering::SeqCst) != now_leading {
                    tracing::info!(leading = now_leading, identity = %me, "leader Lease");
                }
                tokio::time::sleep(LEADER_RENEW).await;
            }
        });
        Leader { leading, task }
    }

    /// Whether this replica holds the leader Lease.
    pub fn leading(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Takes a tenant's quota Lease as `me` (waiting for another replica's); the returned lock
/// gives it up when dropped.
pub async fn lock_tenant(
    client: &kube::Client,
    tenant: &str,
    me: String,
) -> PlatformResult<HeldLock> {
    let api: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let name = quota_lease(tenant);
    let started = Instant::now();
    loop {
        match claim(&api, &name, &me, QUOTA_DURATION).await {
            Ok(true) => break,
            Ok(false) if started.elapsed() < QUOTA_WAIT => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(false) => {
                return Err(PlatformError::Unavailable(format!(
                    "tenant '{tenant}': its quota Lease {SYSTEM_NAMESPACE}/{name} stayed held by \
                     another replica for {} s",
                    QUOTA_WAIT.as_secs()
                )));
            }
            Err(e) => return Err(kube_error(&format!("Lease {name}"), e)),
        }
    }
    Ok(HeldLock::new(async move {
        if let Err(e) = release(&api, &name, &me).await {
            tracing::warn!(lease = %name, error = %e, "releasing a quota Lease");
        }
    }))
}
