//! Prepared sandboxes: the part of a create that the request does not decide, done before
//! the request comes.
//!
//! A create spends most of its time in the OCI runtime's `create` (the shim, `runc init`,
//! the namespaces, cgroups and mounts). What that step builds depends on the image, the
//! process (entrypoint, cmd, env, user, groups, capabilities) and the limits, not on the
//! sandbox's name, address or egress rules. So, per [`Shape`] that creates asked for
//! recently, the pool keeps a few containers created and not started, each over its own
//! fresh writable layer. A create of that shape claims one: it gets the prepared id, its
//! `/etc/hosts` and hostname are written, its network is plugged with the sandbox's own
//! address and rules, and the runtime starts it (a few milliseconds instead of ~40).
//!
//! A prepared container is used once: it has run nothing before the claim, holds no address
//! and no rule, and its writable layer is empty. Entries are marked on disk
//! (`<sandbox dir>/pool.json`) so that a restarted daemon adopts the intact ones and removes
//! the others; they count against no tenant (they are no sandbox) and are bounded by
//! `[runtime.pool] size` per shape and `shapes` shapes. `/metrics` shows them.
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

use super::provision::Phases;
use super::{RuntimeError, SandboxSpec, Sbxd, mkdir_private, rand_u64, write_private};
use crate::runtime::process;

/// The marker of a prepared sandbox's directory.
pub const MARKER: &str = "pool.json";

/// How long a shape whose preparation failed is left alone.
const FAILED_BACKOFF: Duration = Duration::from_secs(30);

/// How long the pool stays quiet after a claim before it prepares again: a sandbox is often
/// used right after its create (an exec), and a preparation (a runtime `create`, ~30 ms of
/// CPU) would compete with that; in a burst of creates, the refill comes after the burst.
const QUIET_AFTER_CLAIM: Duration = Duration::from_millis(100);

/// Pool settings (config file section `[runtime.pool]`, camelCase keys).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolConfig {
    /// Prepared sandboxes kept per shape; 0 turns the pool off.
    #[serde(default = "default_size")]
    pub size: usize,
    /// Shapes kept prepared: the ones most recently asked for.
    #[serde(default = "default_shapes")]
    pub shapes: usize,
    /// A shape nobody asked for in this many seconds is no longer kept prepared.
    #[serde(default = "default_idle_seconds")]
    pub idle_seconds: u64,
}

fn default_size() -> usize {
    2
}
fn default_shapes() -> usize {
    4
}
fn default_idle_seconds() -> u64 {
    600
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            size: default_size(),
            shapes: default_shapes(),
            idle_seconds: default_idle_seconds(),
        }
    }
}

/// What a prepared container is built from: everything in its runtime config that a
/// create request decides, except what is set at the claim (name, address, egress).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    image: String,
    env: Vec<String>,
    cpu_millis: Option<u64>,
    memory_bytes: Option<u64>,
    uid: u32,
    gid: u32,
    additional_gids: Vec<u32>,
    capabilities: Vec<String>,
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
}

impl Shape {
    /// The shape of a sandbox, if a prepared container can serve it (one on snapshot
    /// layers, a restore or a fork, cannot).
    pub fn of(spec: &SandboxSpec) -> Option<Shape> {
        spec.layers.is_empty().then(|| Shape {
            image: spec.image.clone(),
            env: spec.env.clone(),
            cpu_millis: spec.cpu_millis,
            memory_bytes: spec.memory_bytes,
            uid: spec.uid,
            gid: spec.gid,
            additional_gids: spec.additional_gids.clone(),
            capabilities: spec.capabilities.clone(),
            entrypoint: spec.entrypoint.clone(),
            cmd: spec.cmd.clone(),
        })
    }

    /// The spec of a container prepared in this shape under `id` in the host id range
    /// `id_range`: a placeholder name (the claim sets the sandbox's), no slot and no egress
    /// (the claim plugs the network).
    pub fn spec(&self, id: &str, id_range: Option<u32>) -> SandboxSpec {
        SandboxSpec {
            id: id.to_string(),
            namespace: String::new(),
            name: id.to_string(),
            image: self.image.clone(),
            env: self.env.clone(),
            before_script: None,
            cpu_millis: self.cpu_millis,
            memory_bytes: self.memory_bytes,
            ephemeral_bytes: None,
            egress: None,
            egress_deny: Vec::new(),
            uid: self.uid,
            gid: self.gid,
            additional_gids: self.additional_gids.clone(),
            capabilities: self.capabilities.clone(),
            slot: u32::MAX,
            id_range,
            layers: Vec::new(),
            entrypoint: self.entrypoint.clone(),
            cmd: self.cmd.clone(),
            nodes: None,
            labels: Default::default(),
            expires_at: None,
            idle_timeout_seconds: None,
        }
    }
}

/// A prepared container, as its marker records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prepared {
    /// Its id (container id, sandbox dir, cgroup).
    pub id: String,
    /// The shape it was built in.
    pub shape: Shape,
    /// The digest of the image it was built from (a claim checks that the reference still
    /// names it).
    pub image_digest: String,
    /// The container init's host pid (0 while it is being prepared).
    #[serde(default)]
    pub pid: i32,
    /// Its host id range (the claiming sandbox's from then on).
    #[serde(default)]
    pub id_range: Option<u32>,
}

impl Prepared {
    /// Reads the marker in a sandbox dir, if there is one.
    pub fn read(dir: &Path) -> Option<Prepared> {
        let bytes = std::fs::read(dir.join(MARKER)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// Labels of the pool's claim counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClaimLabels {
    outcome: &'static str,
}

/// The pool's series on `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct PoolMetrics {
    prepared: Gauge,
    claims: Family<ClaimLabels, Counter>,
    discarded: Counter,
}

impl PoolMetrics {
    /// Adds the series to a registry (under `sbx_pool_`).
    pub fn register(&self, registry: &mut Registry) {
        let pool = registry.sub_registry_with_prefix("pool");
        pool.register(
            "prepared",
            "Sandboxes prepared ahead of requests (created, not started), all shapes",
            self.prepared.clone(),
        );
        pool.register(
            "claims",
            "Creates that could use a prepared sandbox: hit (one was ready) or miss",
            self.claims.clone(),
        );
        pool.register(
            "discarded",
            "Prepared sandboxes removed unused (shape no longer asked for, image changed, found broken)",
            self.discarded.clone(),
        );
    }
}

#[derive(Default)]
struct State {
    ready: HashMap<Shape, Vec<Prepared>>,
    /// Claimed by a create that has not started it yet, by id.
    claimed: HashMap<String, Prepared>,
    /// Ids being prepared, with their shape.
    preparing: HashMap<String, Shape>,
    /// Shapes asked for, most recent first.
    wanted: Vec<(Shape, Instant)>,
    /// Shapes whose last preparation failed, and when.
    failed: HashMap<Shape, Instant>,
    /// Entries to remove (no longer wanted).
    unwanted: Vec<Prepared>,
    /// When the last claim came.
    last_claim: Option<Instant>,
}

impl State {
    fn put_ready(&mut self, entry: Prepared) {
        self.ready
            .entry(entry.shape.clone())
            .or_default()
            .push(entry);
    }
}

/// The pool's bookkeeping; the engine does the runtime work.
pub struct Pool {
    config: PoolConfig,
    state: Mutex<State>,
    /// Wakes the filler (a claim, an entry that came back).
    pub(super) wake: tokio::sync::Notify,
    metrics: PoolMetrics,
}

impl Pool {
    /// An empty pool.
    pub fn new(config: PoolConfig, metrics: PoolMetrics) -> Pool {
        Pool {
            config,
            state: Mutex::new(State::default()),
            wake: tokio::sync::Notify::new(),
            metrics,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the pool is on.
    pub fn enabled(&self) -> bool {
        self.config.size > 0 && self.config.shapes > 0
    }

    /// A prepared container's id for a create of `shape`, if one is ready; either way the
    /// shape counts as asked for now, and the filler is woken.
    pub fn claim(&self, shape: &Shape) -> Option<String> {
        if !self.enabled() {
            return None;
        }
        let mut state = self.lock();
        let now = Instant::now();
        state.last_claim = Some(now);
        state.wanted.retain(|(s, _)| s != shape);
        state.wanted.insert(0, (shape.clone(), now));
        let claimed = state.ready.get_mut(shape).and_then(Vec::pop);
        let id = claimed.map(|entry| {
            let id = entry.id.clone();
            state.claimed.insert(id.clone(), entry);
            id
        });
        drop(state);
        self.metrics
            .claims
            .get_or_create(&ClaimLabels {
                outcome: if id.is_some() { "hit" } else { "miss" },
            })
            .inc();
        self.publish();
        self.wake.notify_one();
        id
    }

    /// Gives back a claimed entry whose create never started it (unused, it is as good as
    /// before).
    pub fn unclaim(&self, id: &str) {
        let mut state = self.lock();
        if let Some(entry) = state.claimed.remove(id) {
            state.put_ready(entry);
        }
        drop(state);
        self.publish();
        self.wake.notify_one();
    }

    /// The host id range of the claimed entry `id` (the sandbox that claimed it takes it).
    pub fn claimed_range(&self, id: &str) -> Option<u32> {
        self.lock().claimed.get(id).and_then(|e| e.id_range)
    }

    /// The claimed entry of `id`, taken for its start.
    pub(super) fn take_claimed(&self, id: &str) -> Option<Prepared> {
        self.lock().claimed.remove(id)
    }

    /// Whether `id` is the pool's (ready, claimed or being prepared): no orphan.
    pub fn owns(&self, id: &str) -> bool {
        let state = self.lock();
        state.claimed.contains_key(id)
            || state.preparing.contains_key(id)
            || state.unwanted.iter().any(|e| e.id == id)
            || state.ready.values().flatten().any(|e| e.id == id)
    }

    /// Takes an adopted or newly prepared entry.
    pub(super) fn add(&self, entry: Prepared) {
        let mut state = self.lock();
        state.preparing.remove(&entry.id);
        state.failed.remove(&entry.shape);
        state.put_ready(entry);
        drop(state);
        self.publish();
    }

    /// A preparation that failed (its leftovers are removed by the caller).
    pub(super) fn failed(&self, id: &str) {
        let mut state = self.lock();
        if let Some(shape) = state.preparing.remove(id) {
            state.failed.insert(shape, Instant::now());
        }
    }

    /// Adopted entries' shapes count as asked for at start-up (they were, before it).
    pub(super) fn adopt(&self, entries: Vec<Prepared>) {
        let now = Instant::now();
        for entry in entries {
            {
                let mut state = self.lock();
                if !state.wanted.iter().any(|(s, _)| *s == entry.shape) {
                    state.wanted.push((entry.shape.clone(), now));
                }
            }
            self.add(entry);
        }
    }

    /// Entries to remove now: shapes no longer among the recently asked for.
    pub(super) fn take_unwanted(&self, now: Instant) -> Vec<Prepared> {
        let idle = Duration::from_secs(self.config.idle_seconds);
        let mut state = self.lock();
        state
            .wanted
            .retain(|(_, at)| now.duration_since(*at) < idle);
        state.wanted.truncate(self.config.shapes);
        let wanted: HashSet<Shape> = state.wanted.iter().map(|(s, _)| s.clone()).collect();
        let size = self.config.size;
        let mut out = Vec::new();
        state.ready.retain(|shape, entries| {
            if wanted.contains(shape) {
                while entries.len() > size {
                    out.extend(entries.pop());
                }
                !entries.is_empty()
            } else {
                out.append(entries);
                false
            }
        });
        // Still the pool's until removed (a restart finds their markers).
        state.unwanted.extend(out.iter().cloned());
        drop(state);
        self.publish();
        out
    }

    /// An unwanted entry is gone.
    pub(super) fn removed(&self, id: &str) {
        self.lock().unwanted.retain(|e| e.id != id);
        self.metrics.discarded.inc();
    }

    /// A claimed entry was found unusable (its image changed) and is removed.
    pub(super) fn discarded(&self) {
        self.metrics.discarded.inc();
    }

    /// The next preparation, if one is due: the most recently asked-for shape short of
    /// `size`, and the new entry's id (counted as being prepared from now).
    pub(super) fn next(
        &self,
        now: Instant,
        new_id: impl FnOnce() -> String,
    ) -> Option<(Shape, String)> {
        let mut state = self.lock();
        let size = self.config.size;
        let shape = state
            .wanted
            .iter()
            .map(|(s, _)| s)
            .find(|shape| {
                let ready = state.ready.get(*shape).map_or(0, Vec::len);
                let preparing = state.preparing.values().filter(|s| s == shape).count();
                let backing_off = state
                    .failed
                    .get(*shape)
                    .is_some_and(|at| now.duration_since(*at) < FAILED_BACKOFF);
                ready + preparing < size && !backing_off
            })
            .cloned();
        let shape = shape?;
        let id = new_id();
        state.preparing.insert(id.clone(), shape.clone());
        Some((shape, id))
    }

    /// How much longer the pool stays quiet after the last claim.
    pub(super) fn quiet_for(&self, now: Instant) -> Duration {
        self.lock().last_claim.map_or(Duration::ZERO, |at| {
            QUIET_AFTER_CLAIM.saturating_sub(now.duration_since(at))
        })
    }

    /// How many entries are ready (all shapes).
    pub fn ready_count(&self) -> usize {
        self.lock().ready.values().map(Vec::len).sum()
    }

    fn publish(&self) {
        let ready = self.ready_count();
        self.metrics.prepared.set(ready as i64);
    }
}

impl Sbxd {
    /// The pool of prepared containers.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Takes over the prepared containers a previous daemon left (`sandboxes`: the ids of
    /// sandboxes, whose markers are stale claims): the intact ones go back into the pool,
    /// the others are removed. Before anything removes orphans.
    pub async fn adopt_pool(&self, sandboxes: &HashSet<String>) {
        let mut adopted = Vec::new();
        for dir in marked_dirs(&self.sandboxes_dir) {
            let Some(id) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            if sandboxes.contains(&id) {
                // Claimed, and the crash came before its start: the sandbox's create is
                // resumed from scratch.
                let _ = std::fs::remove_file(dir.join(MARKER));
                continue;
            }
            let intact = match Prepared::read(&dir) {
                Some(p) if p.id == id && p.pid > 0 && self.pool.enabled() => {
                    let state = self.runc.state(&id).await.ok().flatten();
                    let created = state.is_some_and(|s| s.status == "created" && s.pid == p.pid);
                    (created && process::alive(p.pid) && self.shim_pid(&id).is_some()).then_some(p)
                }
                _ => None,
            };
            match intact {
                Some(p) => {
                    self.adopt_id_range(&p.shape.spec(&p.id, p.id_range));
                    adopted.push(p)
                }
                None => {
                    tracing::info!(prepared = %id, "removing a prepared sandbox left unfinished or no longer wanted");
                    if let Err(e) = self.teardown_id(&id, true).await {
                        tracing::warn!(prepared = %id, error = %e, "removing a prepared sandbox");
                    }
                }
            }
        }
        if !adopted.is_empty() {
            tracing::info!(count = adopted.len(), "prepared sandboxes taken over");
        }
        self.pool.adopt(adopted);
    }

    /// Keeps the pool filled, one preparation at a time, for the daemon's life.
    pub async fn run_pool(self: std::sync::Arc<Self>) {
        if !self.pool.enabled() {
            return;
        }
        loop {
            for entry in self.pool.take_unwanted(Instant::now()) {
                match self.teardown_id(&entry.id, true).await {
                    // Its processes are dead and its files gone: its range is free.
                    Ok(()) => self.release_id_range(&entry.shape.spec(&entry.id, entry.id_range)),
                    Err(e) => {
                        tracing::warn!(prepared = %entry.id, error = %e, "removing a prepared sandbox")
                    }
                }
                self.pool.removed(&entry.id);
            }
            let quiet = self.pool.quiet_for(Instant::now());
            if !quiet.is_zero() {
                tokio::time::sleep(quiet).await;
                continue;
            }
            let new_id = || format!("{:010x}", rand_u64() & 0xff_ffff_ffff);
            match self.pool.next(Instant::now(), new_id) {
                Some((shape, id)) => {
                    let id_range = match self.allocate_id_range() {
                        Ok(range) => range,
                        Err(e) => {
                            tracing::warn!(prepared = %id, error = %e, "preparing a sandbox ahead of requests");
                            self.pool.failed(&id);
                            continue;
                        }
                    };
                    match self.prepare(&shape, &id, id_range).await {
                        Ok(entry) => self.pool.add(entry),
                        Err(e) => {
                            tracing::warn!(prepared = %id, image = %shape.image, error = %e, "preparing a sandbox ahead of requests");
                            match self.teardown_id(&id, true).await {
                                Ok(()) => self.release_id_range(&shape.spec(&id, id_range)),
                                Err(e) => {
                                    tracing::warn!(prepared = %id, error = %e, "removing a failed preparation")
                                }
                            }
                            self.pool.failed(&id);
                        }
                    }
                }
                None => {
                    tokio::select! {
                        _ = self.pool.wake.notified() => {}
                        _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                    }
                }
            }
        }
    }

    /// Makes one prepared container of `shape` under `id`: marker, files, root filesystem,
    /// bundle and the runtime's create, with no network and a placeholder hostname.
    async fn prepare(
        &self,
        shape: &Shape,
        id: &str,
        id_range: Option<u32>,
    ) -> Result<Prepared, RuntimeError> {
        let spec = shape.spec(id, id_range);
        let image = self.images.ensure(&shape.image).await?;
        let network = self.network().await?;
        let mut prepared = Prepared {
            id: id.to_string(),
            shape: shape.clone(),
            image_digest: image.digest.clone(),
            pid: 0,
            id_range,
        };
        let json =
            |p: &Prepared| serde_json::to_vec(p).map_err(|e| RuntimeError::Spec(e.to_string()));
        // The dir appears with its marker: nothing ever sees a prepared container's dir as
        // a sandbox's.
        let dir = self.dir(id);
        let unmarked = self.sandboxes_dir.join(format!(".{id}.new"));
        mkdir_private(&unmarked)?;
        write_private(&unmarked.join(MARKER), &json(&prepared)?)?;
        std::fs::rename(&unmarked, &dir)
            .map_err(|e| RuntimeError::io("make a prepared sandbox's dir", e))?;
        let marker = dir.join(MARKER);
        let mut phases = Phases::start();
        self.make_container(&spec, &image, network.resolv_conf(), None, &mut phases)
            .await?;
        prepared.pid = self.spawn_shim(&spec, None).await?;
        phases.mark("create");
        write_private(&marker, &json(&prepared)?)?;
        tracing::debug!(prepared = %id, phases = %phases, "prepared a sandbox ahead of requests");
        Ok(prepared)
    }
}

/// The sandbox dirs under `sandboxes_dir` that carry a pool marker.
pub(super) fn marked_dirs(sandboxes_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(sandboxes_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(MARKER).is_file())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(image: &str) -> Shape {
        let mut spec = Shape {
            image: String::new(),
            env: Vec::new(),
            cpu_millis: None,
            memory_bytes: None,
            uid: 0,
            gid: 0,
            additional_gids: Vec::new(),
            capabilities: Vec::new(),
            entrypoint: None,
            cmd: None,
        }
        .spec("x", None);
        spec.image = image.to_string();
        Shape::of(&spec).unwrap()
    }

    fn prepared(id: &str, shape: &Shape) -> Prepared {
        Prepared {
            id: id.to_string(),
            shape: shape.clone(),
            image_digest: "sha256:0".into(),
            pid: 1,
            id_range: None,
        }
    }

    fn pool(size: usize, shapes: usize) -> Pool {
        Pool::new(
            PoolConfig {
                size,
                shapes,
                idle_seconds: 600,
            },
            PoolMetrics::default(),
        )
    }

    #[test]
    fn a_claim_asks_for_its_shape_and_takes_a_ready_entry_once() {
        let pool = pool(2, 4);
        let a = shape("a");
        assert_eq!(pool.claim(&a), None, "nothing prepared yet");
        let mut n = 0;
        let mut ids = || {
            n += 1;
            format!("p{n}")
        };
        let Some((s, id)) = pool.next(Instant::now(), &mut ids) else {
            panic!("the shape asked for is prepared");
        };
        assert_eq!(s, a);
        assert!(pool.owns(&id), "an entry being prepared is no orphan");
        pool.add(prepared(&id, &a));
        let Some((_, second)) = pool.next(Instant::now(), &mut ids) else {
            panic!("up to size");
        };
        pool.add(prepared(&second, &a));
        assert!(pool.next(Instant::now(), &mut ids).is_none());
        let claimed = pool.claim(&a).expect("a ready entry");
        assert!(pool.take_claimed(&claimed).is_some());
        assert!(pool.take_claimed(&claimed).is_none(), "used once");
        assert!(!pool.owns(&claimed), "a started entry is a sandbox's now");
        assert_eq!(pool.ready_count(), 1);
    }

    #[test]
    fn an_unclaimed_entry_goes_back_and_other_shapes_never_get_it() {
        let pool = pool(1, 4);
        let (a, b) = (shape("a"), shape("b"));
        pool.adopt(vec![prepared("p1", &a)]);
        assert_eq!(pool.claim(&b), None);
        let id = pool.claim(&a).unwrap();
        pool.unclaim(&id);
        assert_eq!(pool.claim(&a).as_deref(), Some("p1"));
    }

    #[test]
    fn shapes_beyond_the_most_recent_are_removed() {
        let pool = pool(1, 1);
        let (a, b) = (shape("a"), shape("b"));
        pool.adopt(vec![prepared("p1", &a)]);
        assert_eq!(pool.claim(&b), None);
        let unwanted = pool.take_unwanted(Instant::now());
        assert_eq!(unwanted.len(), 1);
        assert_eq!(unwanted[0].id, "p1");
        assert!(pool.owns("p1"), "until removed");
        pool.removed("p1");
        assert!(!pool.owns("p1"));
        assert_eq!(pool.claim(&a), None);
    }

    #[test]
    fn a_failed_shape_is_left_alone_for_a_while() {
        let pool = pool(1, 4);
        let a = shape("a");
        pool.claim(&a);
        let Some((_, id)) = pool.next(Instant::now(), || "p1".into()) else {
            panic!();
        };
        pool.failed(&id);
        assert!(pool.next(Instant::now(), || "p2".into()).is_none());
        assert!(
            pool.next(Instant::now() + FAILED_BACKOFF, || "p2".into())
                .is_some()
        );
    }

    #[test]
    fn the_pool_stays_quiet_right_after_a_claim() {
        let pool = pool(1, 4);
        assert!(pool.quiet_for(Instant::now()).is_zero(), "no claim yet");
        pool.claim(&shape("a"));
        assert!(!pool.quiet_for(Instant::now()).is_zero());
        assert!(pool.quiet_for(Instant::now() + QUIET_AFTER_CLAIM).is_zero());
    }

    #[test]
    fn a_snapshot_sandbox_has_no_shape() {
        let mut spec = shape("a").spec("x", None);
        spec.layers = vec!["l".into()];
        assert!(Shape::of(&spec).is_none());
    }
}
