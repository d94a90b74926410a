//! Leases (coordination.k8s.io/v1) in `kube-system`: the leader Lease (`sbx-leader`) that
//! picks the one replica running the scheduled GC sweep and the tenant status refresh, and
//! the per-tenant quota Leases (`sbx-quota-<tenant>`) that serialise quota checks across
//! replicas.
//!
//! A replica that other replicas can reach ([`Known::keep_held`]: it knows its own URL)
//! keeps a quota Lease it took for [`QUOTA_IDLE`] after its last check, renewing it at a
//! check when its claim is older than [`QUOTA_RENEW`]: a tenant's next checks on it write
//! nothing. It gives the Lease up at the end of the first check [`QUOTA_KEEP`] after taking
//! it, however busy, so that the other replicas get their turn. The Lease names the holder's
//! URL ([`HOLDER_URL_ANNOTATION`]), and a check on another replica that finds it held there
//! answers [`PlatformError::Elsewhere`]: the request is passed to the holder
//! (`daemon/forward.rs`) instead of waiting for the Lease. The Lease alone decides who
//! checks; passing requests on only saves the waits and the writes.
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::cache::{Cache, Kept};
use super::{SYSTEM_NAMESPACE, conflict, kube_error, managed_selector, objects};
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
/// How often a claim of a Lease another replica holds tries again (with a watch in step, at
/// the watch's next event, or after this without one).
const LOCK_POLL: Duration = Duration::from_millis(20);

/// How long a replica keeps a quota Lease after its last check (when it is reachable).
const QUOTA_IDLE: Duration = Duration::from_secs(3);
/// How old a kept quota Lease's claim may be at the start of a check before the check renews
/// it (so a check starts with at least `QUOTA_DURATION` less this of the claim left).
const QUOTA_RENEW: Duration = Duration::from_secs(3);
/// How long a replica keeps a quota Lease it took, however busy: then the check's end gives it
/// up, so that a replica that cannot pass its requests to the holder (the Pod network in
/// between refuses) gets its turn within its wait.
const QUOTA_KEEP: Duration = Duration::from_secs(5);

/// The annotation of a quota Lease naming the URL its holder serves the API at (where the
/// other replicas pass the tenant's creates while it holds the Lease).
pub const HOLDER_URL_ANNOTATION: &str = "sbx.io/holder-url";

/// The annotation of a quota Lease in which its last holder recorded, on release, how far
/// its watch caches were (so every write it made under the Lease): see [`lock`].
pub const WRITES_ANNOTATION: &str = "sbx.io/quota-writes";

/// At a release, from what the holder's check read ([`HeldLock::based_on`]): what to record
/// in [`WRITES_ANNOTATION`] (`None`: remove it, nothing is known).
pub type Stamp = Box<dyn FnOnce(&str) -> Option<String> + Send>;

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

impl Kept for Lease {}

/// The Leases this replica knows without reading them. A claim or a release starts from the
/// one known, as a compare-and-swap on its resourceVersion, instead of reading the Lease
/// first; a 409 sends it back to reading. That saves a read per claim and per release, both
/// made while a tenant's creates wait. With [`Known::watching`], sbx's Leases in
/// `kube-system` are known as watched (this replica's own writes shown at once): right also
/// when another replica wrote last (a tenant's creates spread over the replicas), and a claim
/// that finds the Lease held waits for the watch's next event instead of polling. Without a
/// watch in step, the ones this replica last wrote are known (right whenever it wrote last:
/// the leader's renewals).
#[derive(Clone, Default)]
pub struct Known {
    remembered: Arc<std::sync::Mutex<HashMap<String, Lease>>>,
    watched: Option<Arc<Cache<Lease>>>,
    /// The quota Leases kept between checks, once this replica's URL is known.
    kept: Arc<std::sync::OnceLock<Keeping>>,
    /// Quota checks by how their Lease was had (`sbx_quota_checks_total`).
    pub checks: Checks,
}

/// The quota Leases this replica keeps between checks, and the URL it serves at.
struct Keeping {
    url: String,
    holds: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Hold>>>>,
}

/// One quota Lease as this replica keeps it. Its mutex is held by the check under it and by
/// its release after [`QUOTA_IDLE`], so that a release never gives up a Lease a check uses.
#[derive(Default)]
struct Hold {
    /// When this replica's standing claim was written (the instant before the write);
    /// `None`: not held.
    claimed: Option<Instant>,
    /// When this replica took it (not renewed it): kept [`QUOTA_KEEP`] at most.
    taken: Option<Instant>,
    /// What the last check under it recorded of the writes (see [`WRITES_ANNOTATION`]);
    /// `None`: nothing known, the next check reads afresh.
    writes: Option<String>,
    /// Counts the checks: a release after the idle time goes ahead only if none came since.
    turn: u64,
}

impl Hold {
    /// Gives the Lease up if this replica holds it, recording what the last check under it
    /// recorded of the writes.
    async fn give_up(&mut self, api: &Api<Lease>, known: &Known, name: &str, me: &str) {
        if self.claimed.take().is_none() {
            return;
        }
        let writes = self.writes.take();
        if let Err(e) = release(api, known, name, me, Some(writes)).await {
            tracing::warn!(lease = %name, error = %e, "releasing a Lease");
        }
    }
}

/// Labels of `sbx_quota_checks_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct CheckLabels {
    lease: &'static str,
}

/// Quota checks by how their Lease was had: `kept` from an earlier check (no write),
/// `renewed` first (one write), `claimed` for the check, or `passed` to its holder.
#[derive(Clone, Debug, Default)]
pub struct Checks(Family<CheckLabels, Counter>);

/// Where the Lease a claim or a release starts from came from.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    /// This replica's last write of it: another replica may have written it since.
    Remembered,
    /// The watch: it lags the API server by the watch's delay.
    Watched,
    /// A read of the API server.
    Read,
}

impl Checks {
    fn count(&self, lease: &'static str) {
        self.0.get_or_create(&CheckLabels { lease }).inc();
    }

    /// Adds the series to a registry (`sbx_quota_checks_total`).
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.sub_registry_with_prefix("quota").register(
            "checks",
            "Quota checks of this replica by how it had the tenant's quota Lease: kept from an \
             earlier check (no write), renewed, claimed, or passed to the replica holding it",
            self.0.clone(),
        );
    }
}

impl Known {
    /// Knows sbx's Leases in `kube-system` from a watch (RBAC: list and watch of Leases
    /// there) as well as from this replica's own writes.
    pub fn watching(client: kube::Client) -> Known {
        Known {
            watched: Some(Arc::new(Cache::start(
                Api::namespaced(client, SYSTEM_NAMESPACE),
                &managed_selector(),
                "sbx's Leases",
            ))),
            ..Known::default()
        }
    }

    /// From now on keeps quota Leases between checks, naming `url` as where this replica
    /// serves (the first call wins).
    pub fn keep_held(&self, url: String) {
        let _ = self.kept.set(Keeping {
            url,
            holds: Default::default(),
        });
    }

    /// The watch, when it is in step.
    fn watch(&self) -> Option<&Cache<Lease>> {
        self.watched.as_deref().filter(|c| c.in_step())
    }

    /// The Lease to start from: the one watched (the watch shows this replica's own writes
    /// too), else the one remembered, else the one read now.
    async fn current(
        &self,
        api: &Api<Lease>,
        name: &str,
    ) -> Result<(Option<Lease>, Source), kube::Error> {
        let remembered = self
            .remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        if let Some(watch) = self.watch() {
            // Not watched: none yet (or one made before sbx labelled its Leases: the create's
            // 409 reads it).
            let watched = watch.get(SYSTEM_NAMESPACE, name).map(|l| (*l).clone());
            return Ok((watched, Source::Watched));
        }
        match remembered {
            Some(lease) => Ok((Some(lease), Source::Remembered)),
            None => Ok((api.get_opt(name).await?, Source::Read)),
        }
    }

    fn keep(&self, name: &str, lease: Lease) {
        if let Some(watch) = self.watch() {
            watch.wrote(&lease);
        }
        self.remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), lease);
    }

    /// Where the watch is (see [`Known::wait`]).
    fn seen(&self) -> Option<u64> {
        self.watch().and_then(Cache::version)
    }

    /// Waits for another replica's release: an event of the watch since it was at `seen`, at
    /// most `limit` (without a watch in step, `limit`).
    async fn wait(&self, seen: Option<u64>, limit: Duration) {
        match (self.watch(), seen) {
            (Some(watch), Some(seen)) => watch.changed_since(seen, limit).await,
            _ => tokio::time::sleep(limit).await,
        }
    }
}

/// Labels a Lease as sbx's (what [`Known::watching`] watches).
fn label(lease: &mut Lease) {
    lease
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .entry(objects::names::MANAGED_LABEL.to_string())
        .or_insert_with(|| super::FIELD_MANAGER.to_string());
}

/// Whether a write from a Lease known without reading it failed because it was stale:
/// written (409) or deleted (404) since.
fn stale(e: &kube::Error) -> bool {
    conflict(e) || matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A Lease taken: what its last holder recorded in [`WRITES_ANNOTATION`], unless that
/// holder never gave it up (its claim ran out, or this replica renews its own claim).
struct Claimed {
    writes: Option<String>,
}

/// A Lease another holder's claim stands on: the URL it serves at, when it named one.
struct Held {
    url: Option<String>,
}

/// Names `url` as where the Lease's holder serves ([`HOLDER_URL_ANNOTATION`]; `None`: none).
fn name_url(lease: &mut Lease, url: Option<&str>) {
    match url {
        Some(url) => {
            lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(HOLDER_URL_ANNOTATION.to_string(), url.to_string());
        }
        None => {
            if let Some(a) = lease.metadata.annotations.as_mut() {
                a.remove(HOLDER_URL_ANNOTATION);
            }
        }
    }
}

/// Takes or renews a Lease for `me`, naming `url` as where it serves; `Ok(Err(held))` when
/// another holder's claim stands.
async fn claim(
    api: &Api<Lease>,
    known: &Known,
    name: &str,
    me: &str,
    duration: i32,
    url: Option<&str>,
) -> Result<Result<Claimed, Held>, kube::Error> {
    let (mut current, mut source) = known.current(api, name).await?;
    loop {
        // A remembered Lease that says another holds it may be stale: read it. (A watched
        // one shows the release when its event comes: the caller waits for that.)
        if source == Source::Remembered && current.as_ref().is_some_and(|l| held_by_other(l, me)) {
            current = api.get_opt(name).await?;
            source = Source::Read;
        }
        // The record of the writes counts only from a holder that gave the Lease up (a
        // write of this one lands only if the Lease is still as read: a compare-and-swap).
        let released = current.as_ref().is_some_and(|l| {
            l.spec
                .as_ref()
                .is_none_or(|s| s.holder_identity.as_deref().is_none_or(str::is_empty))
        });
        let writes = current.as_ref().filter(|_| released).and_then(|l| {
            l.metadata
                .annotations
                .as_ref()?
                .get(WRITES_ANNOTATION)
                .cloned()
        });
        let written = match current.take() {
            None => {
                let mut lease = Lease {
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
                label(&mut lease);
                name_url(&mut lease, url);
                api.create(&PostParams::default(), &lease).await
            }
            Some(lease) if held_by_other(&lease, me) => {
                let url = lease
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(HOLDER_URL_ANNOTATION))
                    .cloned();
                return Ok(Err(Held { url }));
            }
            Some(mut lease) => {
                let spec = lease.spec.get_or_insert_with(Default::default);
                if spec.holder_identity.as_deref() != Some(me) {
                    spec.holder_identity = Some(me.to_string());
                    spec.acquire_time = Some(now());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.renew_time = Some(now());
                spec.lease_duration_seconds = Some(duration);
                label(&mut lease);
                name_url(&mut lease, url);
                // The resourceVersion makes this a compare-and-swap: 409 when another replica
                // wrote since.
                api.replace(name, &PostParams::default(), &lease).await
            }
        };
        match written {
            Ok(lease) => {
                known.keep(name, lease);
                return Ok(Ok(Claimed { writes }));
            }
            Err(e) if source != Source::Read && stale(&e) => {
                current = api.get_opt(name).await?;
                source = Source::Read;
            }
            Err(e) if conflict(&e) => return Ok(Err(Held { url: None })),
            Err(e) => return Err(e),
        }
    }
}

/// Gives a Lease up if `me` still holds it; with `writes`, recorded in
/// [`WRITES_ANNOTATION`] (`Some(None)`: the annotation removed).
async fn release(
    api: &Api<Lease>,
    known: &Known,
    name: &str,
    me: &str,
    writes: Option<Option<String>>,
) -> Result<(), kube::Error> {
    let (mut current, mut source) = known.current(api, name).await?;
    loop {
        let Some(mut lease) = current.take() else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(me) {
            return Ok(());
        }
        spec.holder_identity = None;
        match &writes {
            Some(Some(w)) => {
                lease
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(WRITES_ANNOTATION.to_string(), w.clone());
            }
            Some(None) => {
                if let Some(a) = lease.metadata.annotations.as_mut() {
                    a.remove(WRITES_ANNOTATION);
                }
            }
            None => {}
        }
        match api.replace(name, &PostParams::default(), &lease).await {
            Ok(lease) => {
                known.keep(name, lease);
                return Ok(());
            }
            Err(e) if source != Source::Read && stale(&e) => {
                current = api.get_opt(name).await?;
                source = Source::Read;
            }
            Err(e) if conflict(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
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
            let known = Known::default();
            loop {
                let now_leading =
                    match claim(&api, &known, LEADER_LEASE, &me, LEADER_DURATION, None).await {
                        Ok(v) => v.is_ok(),
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

/// The Lease that serialises the minting of the first admin key across replicas.
pub const BOOTSTRAP_LEASE: &str = "sbx-bootstrap";

/// Takes a tenant's quota Lease as `me` (waiting for another replica's); the returned lock
/// gives it up when dropped, recording `stamp`'s answer then. Once this replica's URL is
/// known ([`Known::keep_held`]), it keeps the Lease for [`QUOTA_IDLE`] after the check
/// instead, and with `pass`, a Lease another replica holds and names its URL in answers
/// [`PlatformError::Elsewhere`] at once.
pub async fn lock_tenant(
    client: &kube::Client,
    known: &Known,
    tenant: &str,
    me: String,
    stamp: Stamp,
    pass: bool,
) -> PlatformResult<HeldLock> {
    let name = quota_lease(tenant);
    let what = format!("tenant '{tenant}': its quota Lease");
    let Some(kept) = known.kept.get() else {
        let lock = lock(client, known, name, &what, me, Some(stamp)).await?;
        known.checks.count("claimed");
        return Ok(lock);
    };
    let api: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let slot = kept
        .holds
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(name.clone())
        .or_default()
        .clone();
    let mut hold = slot.clone().lock_owned().await;
    hold.turn += 1;
    let url = Some(kept.url.as_str());
    if hold.claimed.is_some_and(|at| at.elapsed() >= QUOTA_RENEW) {
        let at = Instant::now();
        hold.claimed = match claim(&api, known, &name, &me, QUOTA_DURATION, url).await {
            Ok(Ok(_)) => Some(at),
            // Lost (its claim ran out meanwhile), or unknown: taken afresh below.
            _ => None,
        };
        if hold.claimed.is_some() {
            known.checks.count("renewed");
        }
    } else if hold.claimed.is_some() {
        known.checks.count("kept");
    }
    let writes = if hold.claimed.is_some() {
        hold.writes.take()
    } else {
        let at = Instant::now();
        match take(&api, known, &name, &what, &me, url, pass).await {
            Ok(claimed) => {
                known.checks.count("claimed");
                (hold.claimed, hold.taken) = (Some(at), Some(at));
                claimed.writes
            }
            Err(e) => {
                if matches!(e, PlatformError::Elsewhere(_)) {
                    known.checks.count("passed");
                }
                return Err(e);
            }
        }
    };
    let known = known.clone();
    let (doubted, basis) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let record = recorder(Some(stamp), doubted.clone(), Arc::clone(&basis));
    Ok(HeldLock::new(async move {
        hold.writes = record().flatten();
        if hold.taken.is_some_and(|at| at.elapsed() >= QUOTA_KEEP) {
            return hold.give_up(&api, &known, &name, &me).await;
        }
        let turn = hold.turn;
        drop(hold);
        // Given up after the idle time unless a check came since (whose lock does the same).
        tokio::spawn(async move {
            tokio::time::sleep(QUOTA_IDLE).await;
            let mut hold = slot.lock().await;
            if hold.turn == turn {
                hold.give_up(&api, &known, &name, &me).await;
            }
        });
    })
    .with_writes(writes)
    .with_doubt(doubted)
    .with_basis(basis))
}

/// Gives up every quota Lease this replica keeps (at shutdown), at most `limit` in all.
pub async fn release_kept(client: &kube::Client, known: &Known, me: &str, limit: Duration) {
    let Some(kept) = known.kept.get() else {
        return;
    };
    let api: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let slots: Vec<_> = kept
        .holds
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(name, slot)| (name.clone(), slot.clone()))
        .collect();
    let releases = slots.into_iter().map(|(name, slot)| {
        let api = api.clone();
        async move { slot.lock().await.give_up(&api, known, &name, me).await }
    });
    let _ = tokio::time::timeout(limit, futures_util::future::join_all(releases)).await;
}

/// What a lock's release records for the next holder ([`WRITES_ANNOTATION`]): `stamp`'s
/// answer for what the check read, or nothing when it read nothing or doubts a write.
fn recorder(
    stamp: Option<Stamp>,
    doubted: Arc<AtomicBool>,
    basis: Arc<std::sync::Mutex<Option<String>>>,
) -> impl FnOnce() -> Option<Option<String>> + Send {
    move || {
        let based = basis.lock().unwrap_or_else(|e| e.into_inner()).take();
        stamp.map(|stamp| match (doubted.load(Ordering::SeqCst), based) {
            (false, Some(basis)) => stamp(&basis),
            _ => None,
        })
    }
}

/// Takes the Lease `name` as `me`, naming `url` (waiting for another replica's, at most
/// `QUOTA_WAIT`; with `pass`, answering [`PlatformError::Elsewhere`] for one held by a
/// replica that names another URL). `what` names it in an error.
async fn take(
    api: &Api<Lease>,
    known: &Known,
    name: &str,
    what: &str,
    me: &str,
    url: Option<&str>,
    pass: bool,
) -> PlatformResult<Claimed> {
    let started = Instant::now();
    loop {
        let seen = known.seen();
        match claim(api, known, name, me, QUOTA_DURATION, url).await {
            Ok(Ok(claimed)) => return Ok(claimed),
            Ok(Err(Held { url: Some(there) })) if pass && Some(there.as_str()) != url => {
                return Err(PlatformError::Elsewhere(there));
            }
            Ok(Err(_)) if started.elapsed() < QUOTA_WAIT => known.wait(seen, LOCK_POLL).await,
            Ok(Err(_)) => {
                return Err(PlatformError::Unavailable(format!(
                    "{what} {SYSTEM_NAMESPACE}/{name} stayed held by another replica for {} s",
                    QUOTA_WAIT.as_secs()
                )));
            }
            Err(e) => return Err(kube_error(&format!("Lease {name}"), e)),
        }
    }
}

/// Takes the Lease `name` as `me` (waiting for another replica's, at most `QUOTA_WAIT`); the
/// returned lock gives it up when dropped. `what` names it in an error.
///
/// With a `stamp`, the Lease carries a record of the writes made under it from one holder to
/// the next: the releasing holder records `stamp`'s answer for what its check read
/// ([`HeldLock::based_on`]) in [`WRITES_ANNOTATION`], and the next holder's lock has it
/// ([`HeldLock::writes`]) when the Lease was given up; when the last holder's claim ran out
/// instead (it died holding it), the lock has none. A holder that read nothing, or doubts a
/// write ([`HeldLock::doubt`]), removes the record.
pub async fn lock(
    client: &kube::Client,
    known: &Known,
    name: String,
    what: &str,
    me: String,
    stamp: Option<Stamp>,
) -> PlatformResult<HeldLock> {
    let api: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let claimed = take(&api, known, &name, what, &me, None, false).await?;
    let known = known.clone();
    let writes = stamp.is_some().then_some(claimed.writes).flatten();
    let (doubted, basis) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let record = recorder(stamp, doubted.clone(), Arc::clone(&basis));
    Ok(HeldLock::new(async move {
        if let Err(e) = release(&api, &known, &name, &me, record()).await {
            tracing::warn!(lease = %name, error = %e, "releasing a Lease");
        }
    })
    .with_writes(writes)
    .with_doubt(doubted)
    .with_basis(basis))
}
