//! Watch caches for reads: a watcher per resource (sandbox Deployments, their Pods and the
//! VolumeSnapshots of sandboxes, by the `managed-by=sbx` label) keeps a store, indexed by
//! namespace, that lists and gets read instead of the API server. A cache answers only while
//! it is in step: after its first full list and as long as the watch reports no error;
//! otherwise the caller reads the API server (and so answers 503 while that is unreachable).
//! A write of this replica shows in its cache at once (a sandbox's Deployment: the object the
//! API server answered, until the watch's event for it) or is waited for (briefly), so that a
//! read after a write sees it.
//!
//! The store is the project's own rather than kube's reflector store for two reasons that
//! matter at 10,000 sandboxes (`scripts/bench-scale`): a list of one tenant's sandboxes or a
//! get reads one namespace's objects, not a scan of the whole cluster's; and the objects are
//! kept without their `managedFields` (the API server's record of which client set which
//! field, most of a Pod's size and read by nothing here).
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

/// A watch that only says "changed": its counter moves on every change of the watched objects
/// and after every relist that follows a broken watch, so that a reader of the store re-reads
/// it within the watch's delay instead of polling the API server.
pub struct Changes {
    changes: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Changes {
    /// Starts watching what `api` and `config` select; `what` names it in the log.
    pub fn start<K>(api: Api<K>, config: watcher::Config, what: &'static str) -> Changes
    where
        K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    {
        let (bump, changes) = tokio::sync::watch::channel(0u64);
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::Init | Event::InitApply(_)) => {}
                    Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_)) => {
                        bump.send_modify(|v| *v += 1)
                    }
                    Err(e) => tracing::warn!(what, error = %e, "watch failed; retrying"),
                }
            }
        });
        Changes { changes, task }
    }

    /// A receiver of the counter.
    pub fn receiver(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.clone()
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long a write waits for the cache to show it before going on without.
const SETTLE: Duration = Duration::from_secs(2);

/// Objects by namespace, then name (so a namespace's list is one map, in order).
type Objects<K> = BTreeMap<String, BTreeMap<String, Arc<K>>>;

/// The key of an object in [`Objects`] (namespace, name).
fn key_of<K: Resource>(object: &K) -> (String, String) {
    let meta = object.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// What a cache keeps of an object of its kind: never its `managedFields`; a kind whose
/// cached objects are read in a few fields only keeps those (the impl names the readers). A
/// reader that needs another field of such a kind reads the API server, or adds the field.
pub trait Kept: Resource {
    /// Drops the fields no reader of the cache uses.
    fn keep_read_fields(&mut self) {}
}

impl Kept for kube::api::DynamicObject {}

/// An object as the cache keeps it.
fn trimmed<K: Kept>(mut object: K) -> Arc<K> {
    object.meta_mut().managed_fields = None;
    object.keep_read_fields();
    Arc::new(object)
}

/// An object's resourceVersion as a number (etcd's revision); 0 when it has none.
fn revision_of<K: Resource>(object: &K) -> u64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether `a` is a later version than `b` of an object (both resourceVersions numbers).
fn later<K: Resource>(a: &K, b: &K) -> bool {
    let version = |o: &K| o.meta().resource_version.as_deref()?.parse::<u64>().ok();
    matches!((version(a), version(b)), (Some(a), Some(b)) if a > b)
}

/// Stores `object`, unless the store holds a later version of it (shown by a write of this
/// replica before the watch's event for it came).
fn insert<K: Kept>(objects: &mut Objects<K>, object: K) {
    let (namespace, name) = key_of(&object);
    let names = objects.entry(namespace).or_default();
    if names
        .get(&name)
        .is_some_and(|held| later(held.as_ref(), &object))
    {
        return;
    }
    names.insert(name, trimmed(object));
}

/// Removes the deleted `object`, unless the store holds a later object of its name (made
/// again by this replica, shown before the watch's event for it came).
fn remove<K: Resource>(objects: &mut Objects<K>, object: &K) {
    let (namespace, name) = key_of(object);
    if let Some(names) = objects.get_mut(&namespace) {
        if !names
            .get(&name)
            .is_some_and(|held| later(held.as_ref(), object))
        {
            names.remove(&name);
        }
        if names.is_empty() {
            objects.remove(&namespace);
        }
    }
}

/// A watched, label-selected resource.
pub struct Cache<K> {
    objects: Arc<RwLock<Objects<K>>>,
    in_step: Arc<AtomicBool>,
    version: tokio::sync::watch::Receiver<u64>,
    /// The highest resourceVersion of an object the store applied (an event's, or one of a
    /// complete list's).
    revision: Arc<AtomicU64>,
    /// Writes of this replica that did not show within [`SETTLE`].
    misses: Arc<AtomicU64>,
    /// The highest resourceVersion of a write of this replica ([`Cache::wrote`],
    /// [`Cache::settled`]).
    written: Arc<AtomicU64>,
    /// Moves [`Cache::version`] on.
    bump: Arc<tokio::sync::watch::Sender<u64>>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Cache<K>
where
    K: Kept + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    /// Starts watching `api` for objects with `labels` (of any resource: the type of `api`
    /// says which).
    pub fn start(api: Api<K>, labels: &str, what: &'static str) -> Cache<K> {
        let objects: Arc<RwLock<Objects<K>>> = Arc::default();
        let in_step = Arc::new(AtomicBool::new(false));
        let (bump, version) = tokio::sync::watch::channel(0u64);
        let bump = Arc::new(bump);
        let revision = Arc::new(AtomicU64::new(0));
        let (store, flag, seen) = (objects.clone(), in_step.clone(), revision.clone());
        let bumps = bump.clone();
        let config = watcher::Config::default().labels(labels);
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            // A relist is gathered apart and replaces the store when complete.
            let mut relist: Option<Objects<K>> = None;
            let mut relist_revision = 0;
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        match event {
                            Event::Init => {
                                relist = Some(Objects::new());
                                relist_revision = 0;
                            }
                            Event::InitApply(object) => {
                                relist_revision = relist_revision.max(revision_of(&object));
                                insert(relist.get_or_insert_with(Objects::new), object)
                            }
                            Event::InitDone => {
                                let listed = relist.take().unwrap_or_default();
                                *store.write().unwrap_or_else(|e| e.into_inner()) = listed;
                                seen.fetch_max(relist_revision, Ordering::SeqCst);
                                if !flag.swap(true, Ordering::SeqCst) {
                                    tracing::debug!(what, "watch cache in step");
                                }
                            }
                            Event::Apply(object) => {
                                seen.fetch_max(revision_of(&object), Ordering::SeqCst);
                                insert(
                                    &mut store.write().unwrap_or_else(|e| e.into_inner()),
                                    object,
                                );
                                if relist.is_none() {
                                    flag.store(true, Ordering::SeqCst);
                                }
                            }
                            Event::Delete(object) => {
                                seen.fetch_max(revision_of(&object), Ordering::SeqCst);
                                remove(
                                    &mut store.write().unwrap_or_else(|e| e.into_inner()),
                                    &object,
                                );
                                if relist.is_none() {
                                    flag.store(true, Ordering::SeqCst);
                                }
                            }
                        }
                        bumps.send_modify(|v| *v += 1);
                    }
                    Err(e) => {
                        if flag.swap(false, Ordering::SeqCst) {
                            tracing::warn!(what, error = %e, "watch failed: reading the API server until it recovers");
                        }
                        bumps.send_modify(|v| *v += 1);
                    }
                }
            }
        });
        Cache {
            objects,
            in_step,
            version,
            revision,
            misses: Arc::default(),
            written: Arc::default(),
            bump,
            task,
        }
    }
}

impl<K> Cache<K> {
    /// Whether the cache is in step with the API server (its reads may be answered).
    pub fn in_step(&self) -> bool {
        self.in_step.load(Ordering::SeqCst)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects<K>> {
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The objects of a namespace (all when `None`) that `keep` keeps, by namespace then
    /// name; `None` when the cache is not in step (the caller reads the API server).
    pub fn list_where(
        &self,
        namespace: Option<&str>,
        keep: impl Fn(&K) -> bool,
    ) -> Option<Vec<Arc<K>>> {
        if !self.in_step() {
            return None;
        }
        let objects = self.read();
        let kept = |names: &BTreeMap<String, Arc<K>>| -> Vec<Arc<K>> {
            names.values().filter(|o| keep(o)).cloned().collect()
        };
        Some(match namespace {
            Some(ns) => objects.get(ns).map(kept).unwrap_or_default(),
            None => objects.values().flat_map(kept).collect(),
        })
    }

    /// The objects of a namespace (all when `None`), by namespace then name; `None` when the
    /// cache is not in step.
    pub fn list(&self, namespace: Option<&str>) -> Option<Vec<Arc<K>>> {
        self.list_where(namespace, |_| true)
    }

    /// The object `namespace/name` when the cache is in step and holds it; `None` when the
    /// caller must read the API server (it may be out of step, or the object may be too new
    /// for this replica's watch).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        if !self.in_step() {
            return None;
        }
        self.read().get(namespace)?.get(name).cloned()
    }

    /// A number that changes with every event the cache applied (`None` when not in step).
    pub fn version(&self) -> Option<u64> {
        self.in_step().then(|| *self.version.borrow())
    }

    /// The highest resourceVersion (etcd revision) of an object the store applied: every
    /// write of the watched objects up to it shows in the store, except those it never
    /// saw because a relist came after their object was deleted.
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::SeqCst)
    }

    /// This replica's writes shown in the cache, readable after the cache is gone from reach
    /// (a Lease's release).
    pub fn mark(&self) -> Mark {
        Mark {
            written: self.written.clone(),
            misses: self.misses.clone(),
        }
    }

    /// Waits (at most `limit`) until the cache's [`Cache::version`] is past `seen`.
    pub async fn changed_since(&self, seen: u64, limit: Duration) {
        let mut changes = self.version.clone();
        let _ = tokio::time::timeout(limit, changes.wait_for(|v| *v != seen)).await;
    }

    /// Waits (at most `limit`) until the store has applied an object of resourceVersion
    /// `revision` or later; `false` when it has not (or is not in step).
    pub async fn reached(&self, revision: u64, limit: Duration) -> bool {
        let mut changes = self.version.clone();
        let wait = async {
            loop {
                if !self.in_step() {
                    return false;
                }
                if self.revision() >= revision {
                    return true;
                }
                if changes.changed().await.is_err() {
                    return false;
                }
            }
        };
        tokio::time::timeout(limit, wait).await.unwrap_or(false)
    }
}

impl<K: Kept> Cache<K> {
    /// Shows a write of this replica at once (`object` as the API server answered it),
    /// unless the store holds a later version; the watch's own event for it follows. A read
    /// right after the write sees it without waiting for the watch.
    pub fn wrote(&self, object: &K)
    where
        K: Clone,
    {
        if !self.in_step() {
            return;
        }
        let revision = revision_of(object);
        self.written.fetch_max(revision, Ordering::SeqCst);
        {
            let mut objects = self.objects.write().unwrap_or_else(|e| e.into_inner());
            // A watch that got there first showed it, and what came after (a delete), in
            // order: nothing to add. (It moves its revision before it takes the store.)
            if self.revision() >= revision {
                return;
            }
            insert(&mut objects, object.clone());
        }
        self.bump.send_modify(|v| *v += 1);
    }
}

impl<K: Resource> Cache<K> {
    /// Waits (at most a couple of seconds) until the cache shows a write of this replica: the
    /// object `namespace/name` with a resourceVersion at least `version`, or (`None`) gone.
    /// Without a cache in step there is nothing to wait for.
    pub async fn settled(&self, namespace: &str, name: &str, version: Option<&str>) {
        if let Some(revision) = version.and_then(|v| v.parse().ok()) {
            self.written.fetch_max(revision, Ordering::SeqCst);
        }
        let mut changes = self.version.clone();
        let wait = async {
            loop {
                if !self.in_step() {
                    return;
                }
                let found = self
                    .read()
                    .get(namespace)
                    .and_then(|n| n.get(name))
                    .cloned();
                if shows(found.as_deref(), version) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(SETTLE, wait).await.is_err() {
            self.misses.fetch_add(1, Ordering::SeqCst);
            tracing::debug!("a write did not show in the watch cache within 2 s");
        }
    }
}

/// The writes of this replica a cache showed (the highest resourceVersion), and its count of
/// those that did not show within the settle wait.
#[derive(Clone)]
pub struct Mark {
    written: Arc<AtomicU64>,
    misses: Arc<AtomicU64>,
}

impl Mark {
    /// The highest resourceVersion of a write of this replica the cache showed or waited for.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Writes that did not show in time, so far.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::SeqCst)
    }
}

impl<K> Drop for Cache<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether `found` is the object with a resourceVersion at least `version` (etcd revisions,
/// compared as numbers), or — with `version` `None` — whether the object is gone.
fn shows<K: Resource>(found: Option<&K>, version: Option<&str>) -> bool {
    match version {
        None => found.is_none(),
        Some(want) => found.is_some_and(|o| {
            let have = o.meta().resource_version.as_deref().unwrap_or("0");
            match (have.parse::<u64>(), want.parse::<u64>()) {
                (Ok(h), Ok(w)) => h >= w,
                _ => have == want,
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;

    fn deployment(name: &str, version: &str) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.namespace = Some("ns".into());
        d.metadata.name = Some(name.into());
        d.metadata.resource_version = Some(version.into());
        d
    }

    fn held(objects: &Objects<Deployment>, name: &str) -> Option<String> {
        objects
            .get("ns")?
            .get(name)?
            .metadata
            .resource_version
            .clone()
    }

    #[test]
    fn a_write_shown_early_is_not_undone_by_older_events() {
        let mut objects = Objects::new();
        // The sandbox's Deployment as this replica's POST answered, before the watch's events.
        insert(&mut objects, deployment("a", "20"));
        // A late event of an earlier version, and the delete of an earlier sandbox of the name.
        insert(&mut objects, deployment("a", "15"));
        assert_eq!(held(&objects, "a").as_deref(), Some("20"));
        remove(&mut objects, &deployment("a", "18"));
        assert_eq!(held(&objects, "a").as_deref(), Some("20"));
        // Its own event, then its delete.
        insert(&mut objects, deployment("a", "20"));
        insert(&mut objects, deployment("a", "21"));
        assert_eq!(held(&objects, "a").as_deref(), Some("21"));
        remove(&mut objects, &deployment("a", "25"));
        assert_eq!(held(&objects, "a"), None);
        assert!(objects.is_empty(), "an empty namespace goes too");
    }
}
