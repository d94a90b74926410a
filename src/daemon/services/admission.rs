//! Quota admission of creates (tenant rule 4), checked in sessions. A tenant's check takes the
//! tenant's lock shared with the other replicas (a Lease on Kubernetes) and reads once what
//! the tenant's namespaces hold; that session then checks each of the tenant's creates as it
//! comes, in arrival order, against that read plus every create it admitted since (running or
//! ended: the read shows neither). A create no longer waits for the ones admitted before it to
//! end. A session takes no new create once it is [`SESSION`] old, and none over other
//! namespaces, nor a second that takes a snapshot (its size is known only once taken); it
//! ends, giving the lock up, once the creates it admitted have ended, and the next session
//! reads afresh.
//!
//! The read may come from the platform's memory (its watch caches, when the lock says they
//! hold every write made under it); it may then still count something deleted meanwhile. A
//! refusal stands only on a fresh read made after the create arrived, with nothing admitted
//! since: else the session waits for the creates it admitted to end (a read while they run
//! could count them twice), reads afresh and checks again. So the decisions are those of
//! one-at-a-time checks: never two asks through that could not both fit, and no refusal that
//! a check of its own would not have given.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Notify, oneshot};

use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::{Reservation, TenantStore};
use crate::daemon::services::quotas::{Ask, check_quotas};
use crate::shared::models::tenant::TenantQuotas;

/// How long a session takes new creates: under the lock, the ones admitted in it must end
/// well within a Lease's claim (10 s, at least 7 s left at the start).
const SESSION: Duration = Duration::from_secs(1);

/// Held by an admitted create until it has ended: [`Admitted::succeeded`], or dropped (it
/// failed, or was cancelled).
pub struct Admitted {
    end: Option<oneshot::Sender<bool>>,
}

impl Admitted {
    /// The create ended and made what it was admitted for.
    pub fn succeeded(mut self) {
        if let Some(end) = self.end.take() {
            let _ = end.send(true);
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(end) = self.end.take() {
            let _ = end.send(false);
        }
    }
}

/// One create waiting for its check.
struct Waiting {
    namespaces: Vec<String>,
    quotas: TenantQuotas,
    /// `None`: a snapshot.
    ask: Option<Ask>,
    /// Whether its request may be passed to the replica holding the tenant's lock
    /// (`daemon/forward.rs`).
    pass: bool,
    /// When it came: a refusal stands on a read made after it only.
    arrived: Instant,
    verdict: oneshot::Sender<ServiceResult<Admitted>>,
}

impl Waiting {
    /// Whether the create takes a snapshot: its size is known only once taken, so a session
    /// admits one at most (the next session's read sees what it holds).
    fn snapshots(&self) -> bool {
        self.ask.is_none_or(|a| a.with_snapshot)
    }
}

/// A tenant's creates waiting, and whether sessions are running for it.
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    running: bool,
    /// Told of each create that comes (a session waiting for more).
    arrived: Arc<Notify>,
}

/// The admission of every tenant's creates.
#[derive(Clone)]
pub struct Admissions {
    tenancy: Arc<dyn TenantStore>,
    queues: Arc<Mutex<HashMap<String, Queue>>>,
}

impl Admissions {
    /// Admissions over the platform's tenancy store.
    pub fn new(tenancy: Arc<dyn TenantStore>) -> Admissions {
        Admissions {
            tenancy,
            queues: Default::default(),
        }
    }

    /// Waits for `ask` (one more sandbox of that size; `None`: a snapshot) to be checked
    /// against `tenant`'s quotas: admitted (keep the result until the create has ended) or
    /// 403 `QuotaExceeded` (or the platform's error).
    pub async fn admit(
        &self,
        tenant: &str,
        namespaces: &[String],
        quotas: &TenantQuotas,
        ask: Option<Ask>,
    ) -> ServiceResult<Admitted> {
        let (verdict, decided) = oneshot::channel();
        let start = {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let queue = queues.entry(tenant.to_string()).or_default();
            queue.waiting.push(Waiting {
                namespaces: namespaces.to_vec(),
                quotas: quotas.clone(),
                ask,
                pass: crate::daemon::forward::may_pass(),
                arrived: Instant::now(),
                verdict,
            });
            queue.arrived.notify_one();
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            // The sessions run on their own task: a caller that goes away (a closed
            // connection) never leaves the lock held or the others waiting.
            let this = self.clone();
            let tenant = tenant.to_string();
            tokio::spawn(async move { this.run(&tenant).await });
        }
        decided
            .await
            .unwrap_or_else(|_| Err(ServiceError::internal("the quota check was abandoned")))
    }

    /// Runs sessions of `tenant`'s waiting creates until none waits.
    async fn run(&self, tenant: &str) {
        while let Some((first, arrived)) = self.first(tenant) {
            self.session(tenant, first, &arrived).await;
        }
    }

    /// The creates a session starts with: the first waiting and those like it (`None`: none
    /// waits, and the tenant's queue is gone), and what tells of the next ones.
    fn first(&self, tenant: &str) -> Option<(Vec<Waiting>, Arc<Notify>)> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let queue = queues.get_mut(tenant)?;
        if queue.waiting.is_empty() {
            queues.remove(tenant);
            return None;
        }
        let namespaces = queue.waiting[0].namespaces.clone();
        Some((
            next_batch(&mut queue.waiting, &namespaces, true),
            queue.arrived.clone(),
        ))
    }

    /// The creates waiting that a running session over `namespaces` takes next.
    fn more(&self, tenant: &str, namespaces: &[String], snapshots: bool) -> Vec<Waiting> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .get_mut(tenant)
            .map(|queue| next_batch(&mut queue.waiting, namespaces, snapshots))
            .unwrap_or_default()
    }

    /// One session: the shared lock, one read of the usage, the verdicts of the creates that
    /// come while it takes them, the admitted creates' ends.
    async fn session(&self, tenant: &str, first: Vec<Waiting>, arrived: &Notify) {
        let namespaces = first[0].namespaces.clone();
        // Held by another replica, the lock may answer where to pass the first creates'
        // requests (when each of them can be passed there) instead of a wait.
        let pass = first.iter().all(|w| w.pass);
        let lock = match self.tenancy.lock_tenant(tenant, pass).await {
            Ok(lock) => lock,
            Err(e) => return refuse(first, ServiceError::from(e)),
        };
        let started = Instant::now();
        let usage = match self
            .tenancy
            .reservation_under(lock.writes(), &namespaces)
            .await
        {
            Ok(usage) => usage,
            Err(e) => {
                lock.release().await;
                return refuse(first, ServiceError::from(e));
            }
        };
        lock.based_on(usage.basis);
        let mut session = Session {
            tenant,
            namespaces,
            tenancy: self.tenancy.as_ref(),
            held: usage.held,
            fresh: usage.exact.then_some(started),
            since: Reservation::default(),
            admitted: 0,
            snapshotted: false,
            running: FuturesUnordered::new(),
            failed: false,
        };
        let mut batch = first;
        'taking: loop {
            session.check(batch).await;
            // The next creates over the same namespaces, as they come, while the admitted
            // ones run and the session is young.
            loop {
                if started.elapsed() >= SESSION {
                    break 'taking;
                }
                batch = self.more(tenant, &session.namespaces, !session.snapshotted);
                if !batch.is_empty() {
                    break;
                }
                if session.running.is_empty() {
                    break 'taking;
                }
                tokio::select! {
                    () = arrived.notified() => {}
                    Some(end) = session.running.next() => session.ended(end),
                }
            }
        }
        session.drain().await;
        // A create that failed midway may have written something its maker never saw.
        if session.failed {
            lock.doubt();
        }
        lock.release().await;
    }
}

/// What a session knows of a tenant's usage.
struct Session<'a> {
    tenant: &'a str,
    namespaces: Vec<String>,
    tenancy: &'a dyn TenantStore,
    /// What the namespaces held at the last read.
    held: Reservation,
    /// When the last read started, when it was a fresh one (else it came from memory).
    fresh: Option<Instant>,
    /// What the session admitted since the last read, and how many creates.
    since: Reservation,
    admitted: usize,
    /// Whether it admitted a create that takes a snapshot.
    snapshotted: bool,
    /// The admitted creates' ends: `Ok(true)` for one that made what it was admitted for.
    running: FuturesUnordered<oneshot::Receiver<bool>>,
    /// Whether an admitted create failed (or was cancelled).
    failed: bool,
}

impl Session<'_> {
    /// Each create's verdict, in arrival order; the admitted ones are counted from now on.
    async fn check(&mut self, batch: Vec<Waiting>) {
        for waiting in batch {
            let mut verdict = self.verdict(&waiting);
            if verdict.is_err() && !self.final_for(&waiting) {
                verdict = match self.read_afresh().await {
                    Ok(()) => self.verdict(&waiting),
                    Err(e) => Err(e),
                };
            }
            let Err(refused) = verdict else {
                let (end, ended) = oneshot::channel();
                let snapshots = waiting.snapshots();
                if waiting
                    .verdict
                    .send(Ok(Admitted { end: Some(end) }))
                    .is_ok()
                {
                    if let Some(ask) = &waiting.ask {
                        self.since += ask.reservation();
                    }
                    self.admitted += 1;
                    self.snapshotted |= snapshots;
                    self.running.push(ended);
                }
                continue;
            };
            let _ = waiting.verdict.send(Err(refused));
        }
    }

    /// The create's verdict against the last read plus what was admitted since.
    fn verdict(&self, waiting: &Waiting) -> ServiceResult<()> {
        let mut used = self.held;
        used += self.since;
        check_quotas(self.tenant, &waiting.quotas, &used, waiting.ask.as_ref())
    }

    /// Whether a refusal of `waiting` stands: the last read was a fresh one made after it
    /// came, and nothing was admitted since.
    fn final_for(&self, waiting: &Waiting) -> bool {
        self.fresh.is_some_and(|at| at >= waiting.arrived) && self.admitted == 0
    }

    /// Waits for the admitted creates to end, then reads the usage afresh.
    async fn read_afresh(&mut self) -> ServiceResult<()> {
        self.drain().await;
        let at = Instant::now();
        self.held = self.tenancy.reservation(&self.namespaces).await?;
        (self.fresh, self.since, self.admitted) = (Some(at), Reservation::default(), 0);
        Ok(())
    }

    /// Waits for every admitted create to end.
    async fn drain(&mut self) {
        while let Some(end) = self.running.next().await {
            self.ended(end);
        }
    }

    /// Notes an admitted create's end (a failure, or a cancel, makes the lock's record doubtful).
    fn ended(&mut self, end: Result<bool, oneshot::error::RecvError>) {
        self.failed |= end != Ok(true);
    }
}

/// Takes the creates waiting over `namespaces` off the queue, in arrival order, with one
/// snapshot-taking create at most (none without `snapshots`).
fn next_batch(waiting: &mut Vec<Waiting>, namespaces: &[String], snapshots: bool) -> Vec<Waiting> {
    let mut snapshot = !snapshots;
    let mut batch = Vec::new();
    let mut rest = Vec::new();
    for w in waiting.drain(..) {
        if w.namespaces == namespaces && !(snapshot && w.snapshots()) {
            snapshot |= w.snapshots();
            batch.push(w);
        } else {
            rest.push(w);
        }
    }
    *waiting = rest;
    batch
}

/// Answers every create of the batch with `error`.
fn refuse(batch: Vec<Waiting>, error: ServiceError) {
    for waiting in batch {
        let _ = waiting.verdict.send(Err(error.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(namespaces: &[&str], ask: Option<Ask>) -> Waiting {
        Waiting {
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            quotas: TenantQuotas::default(),
            ask,
            pass: false,
            arrived: Instant::now(),
            verdict: oneshot::channel().0,
        }
    }

    #[test]
    fn a_batch_is_one_spec_of_namespaces_and_one_snapshot_at_most() {
        let sandbox = Some(Ask::default());
        let fork = Some(Ask {
            with_snapshot: true,
            ..Ask::default()
        });
        let mut queue = vec![
            waiting(&["a"], sandbox),
            waiting(&["a"], None),
            waiting(&["a", "b"], sandbox),
            waiting(&["a"], fork),
            waiting(&["a"], sandbox),
        ];
        let shape = |batch: &[Waiting]| -> Vec<(usize, bool)> {
            batch
                .iter()
                .map(|w| (w.namespaces.len(), w.snapshots()))
                .collect()
        };
        let (a, ab) = (
            vec!["a".to_string()],
            vec!["a".to_string(), "b".to_string()],
        );
        let first = next_batch(&mut queue, &a, true);
        assert_eq!(shape(&first), [(1, false), (1, true), (1, false)]);
        assert_eq!(shape(&queue), [(2, false), (1, true)]);
        // A session that admitted a snapshot takes no second one.
        assert!(next_batch(&mut queue, &a, false).is_empty());
        let second = next_batch(&mut queue, &ab, true);
        assert_eq!(shape(&second), [(2, false)]);
        assert_eq!(shape(&next_batch(&mut queue, &a, true)), [(1, true)]);
        assert!(queue.is_empty());
    }

    /// Admissions over a real SQLite store that holds no sandbox: what a tenant uses is what
    /// the admissions admitted.
    fn admissions() -> (Admissions, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            crate::daemon::platform::local::LocalPlatform::open(dir.path(), vec![]).unwrap();
        (Admissions::new(Arc::new(store)), dir)
    }

    /// Admits one more sandbox of tenant `t` (namespace `t-ns`) under a quota of `n`.
    async fn one_more(admissions: &Admissions, n: u64) -> ServiceResult<Admitted> {
        let quotas = TenantQuotas {
            sandboxes: Some(n),
            ..TenantQuotas::default()
        };
        let ns = ["t-ns".to_string()];
        admissions
            .admit("t", &ns, &quotas, Some(Ask::default()))
            .await
    }

    /// A guard against a hang, not a timing assertion.
    async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(30), future)
            .await
            .unwrap_or_else(|_| panic!("{what}: no verdict"))
    }

    #[tokio::test]
    async fn a_create_is_admitted_while_the_one_before_it_runs() {
        let (admissions, _dir) = admissions();
        let first = within("first", one_more(&admissions, 2)).await;
        let first = first.expect("the first fits");
        // The first still runs: the second is checked counting it, not after it.
        let second = within("second", one_more(&admissions, 2)).await;
        second.expect("the second fits beside it").succeeded();
        first.succeeded();
    }

    #[tokio::test]
    async fn a_refusal_waits_for_the_running_creates_and_a_fresh_read() {
        let (admissions, _dir) = admissions();
        let first = within("first", one_more(&admissions, 1)).await;
        let first = first.expect("the first fits");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn({
            let admissions = admissions.clone();
            async move {
                let _ = tx.send(one_more(&admissions, 1).await);
            }
        });
        // No refusal while the first runs: it may still fail.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            rx.try_recv().is_err(),
            "a verdict before the first create ended"
        );
        // It failed, having made nothing (the store holds no sandbox): the second's check
        // reads afresh and admits it.
        drop(first);
        let second = within("second", rx.recv()).await.unwrap();
        second
            .expect("the failed create freed its place")
            .succeeded();
    }
}
