//! Watch caches for reads: a watcher per resource (sandbox Deployments, their Pods and the
//! VolumeSnapshots of sandboxes, by the `managed-by=sbx` label) keeps a reflector store that
//! lists and gets read instead of the API server. A cache answers only while it is in step:
//! after its first full list and as long as the watch reports no error; otherwise the caller
//! reads the API server (and so answers 503 while that is unreachable). Writes of this
//! replica wait (briefly) until the cache shows them, so that a read after a write sees it.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
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

/// A watched, label-selected resource.
pub struct Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    store: Store<K>,
    dyntype: K::DynamicType,
    in_step: Arc<AtomicBool>,
    version: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Cache<K>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Default + Send + Sync,
{
    /// Starts watching `api` for objects with `labels` (a resource of a compiled-in type).
    pub fn start(api: Api<K>, labels: &str, what: &'static str) -> Cache<K> {
        Cache::start_with(api, labels, what, Default::default())
    }
}

impl<K> Cache<K>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Send + Sync,
{
    /// Starts watching `api` for objects with `labels`, of the resource `dyntype` describes
    /// (for dynamic objects such as VolumeSnapshots).
    pub fn start_with(
        api: Api<K>,
        labels: &str,
        what: &'static str,
        dyntype: K::DynamicType,
    ) -> Cache<K> {
        let mut writer = reflector::store::Writer::<K>::new(dyntype.clone());
        let store = writer.as_reader();
        let in_step = Arc::new(AtomicBool::new(false));
        let (bump, version) = tokio::sync::watch::channel(0u64);
        let flag = in_step.clone();
        let config = watcher::Config::default().labels(labels);
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            let mut listing = false;
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        writer.apply_watcher_event(&event);
                        match event {
                            Event::Init => listing = true,
                            Event::InitDone => {
                                listing = false;
                                if !flag.swap(true, Ordering::SeqCst) {
                                    tracing::debug!(what, "watch cache in step");
                                }
                            }
                            _ if !listing => flag.store(true, Ordering::SeqCst),
                            _ => {}
                        }
                        bump.send_modify(|v| *v += 1);
                    }
                    Err(e) => {
                        if flag.swap(false, Ordering::SeqCst) {
                            tracing::warn!(what, error = %e, "watch failed: reading the API server until it recovers");
                        }
                        bump.send_modify(|v| *v += 1);
                    }
                }
            }
        });
        Cache {
            store,
            dyntype,
            in_step,
            version,
            task,
        }
    }

    /// The store, when it is in step with the API server.
    pub fn store(&self) -> Option<&Store<K>> {
        self.in_step.load(Ordering::SeqCst).then_some(&self.store)
    }

    /// The key of the object `namespace/name` in the store.
    pub fn key(&self, namespace: &str, name: &str) -> reflector::ObjectRef<K> {
        reflector::ObjectRef::new_with(name, self.dyntype.clone()).within(namespace)
    }

    /// The object `namespace/name` from the store when it is in step and holds it; `None`
    /// when the caller must read the API server (it may be out of step, or the object may be
    /// too new for this replica's watch).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store()?.get(&self.key(namespace, name))
    }

    /// Waits until the store shows a write of this replica: the object `namespace/name` with
    /// a resourceVersion at least `version`, or (`None`) gone.
    pub async fn settled(&self, namespace: &str, name: &str, version: Option<&str>) {
        let key = self.key(namespace, name);
        self.settle(|store| shows(store, &key, version)).await
    }

    /// A number that changes with every event the cache applied (`None` when not in step).
    pub fn version(&self) -> Option<u64> {
        self.in_step
            .load(Ordering::SeqCst)
            .then(|| *self.version.borrow())
    }

    /// Waits (at most a couple of seconds) until `shown` holds for the store: a write of this
    /// replica has arrived through the watch. Without a cache in step there is nothing to wait
    /// for.
    pub async fn settle(&self, shown: impl Fn(&Store<K>) -> bool) {
        let mut version = self.version.clone();
        let wait = async {
            loop {
                if self.store().is_none_or(&shown) {
                    return;
                }
                if version.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(SETTLE, wait).await.is_err() {
            tracing::debug!("a write did not show in the watch cache within 2 s");
        }
    }
}

impl<K> Drop for Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether the store holds the object `key` with a resourceVersion at least `version` (etcd
/// revisions, compared as numbers), or — with `version` `None` — does not hold it any more.
fn shows<K>(store: &Store<K>, key: &reflector::ObjectRef<K>, version: Option<&str>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    let found = store.get(key);
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
