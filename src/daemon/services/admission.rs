//! Quota admission of creates, checked together (tenant rule 4). The creates of one tenant
//! that wait while another check holds the tenant's lock are admitted as one batch: one take
//! of the lock shared with the other replicas (a Lease on Kubernetes), one read of what the
//! tenant's namespaces hold, each ask checked in arrival order against that plus the asks
//! admitted before it in the batch; the admitted creates then run together and the lock is
//! given up when the last one ends. What the namespaces hold may come from the platform's
//! memory (its watch caches, when the lock says they hold every write made under it); it
//! may then still count something deleted meanwhile, so a refusal is checked again against a
//! fresh read. Decisions stay exactly those of one-at-a-time checks: a
//! batch never lets two asks through that could not both fit, and what it admitted exists (or
//! failed) before the next check reads the usage.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use tokio::sync::oneshot;

use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::{Reservation, TenantStore};
use crate::daemon::services::quotas::{Ask, check_quotas};
use crate::shared::models::tenant::TenantQuotas;

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
    verdict: oneshot::Sender<ServiceResult<Admitted>>,
}

impl Waiting {
    /// Whether the create takes a snapshot: its size is known only once taken, so a batch
    /// admits one at most (the next check sees what it holds).
    fn snapshots(&self) -> bool {
        self.ask.is_none_or(|a| a.with_snapshot)
    }
}

/// A tenant's creates waiting, and whether a batch is running for it.
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    running: bool,
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
                verdict,
            });
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            // The batches run on their own task: a caller that goes away (a closed
            // connection) never leaves the lock held or the others waiting.
            let this = self.clone();
            let tenant = tenant.to_string();
            tokio::spawn(async move { this.run(&tenant).await });
        }
        decided
            .await
            .unwrap_or_else(|_| Err(ServiceError::internal("the quota check was abandoned")))
    }

    /// Checks batches of `tenant`'s waiting creates until none waits.
    async fn run(&self, tenant: &str) {
        loop {
            let batch = {
                let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
                let Some(queue) = queues.get_mut(tenant) else {
                    return;
                };
                if queue.waiting.is_empty() {
                    queues.remove(tenant);
                    return;
                }
                next_batch(&mut queue.waiting)
            };
            self.check(tenant, batch).await;
        }
    }

    /// One batch: the shared lock, the usage, each verdict, the admitted creates' ends.
    async fn check(&self, tenant: &str, batch: Vec<Waiting>) {
        let namespaces = batch[0].namespaces.clone();
        // Held by another replica, the lock may answer where to pass the batch's requests
        // (when each of them can be passed there) instead of a wait.
        let pass = batch.iter().all(|w| w.pass);
        let shared = match self.tenancy.lock_tenant(tenant, pass).await {
            Ok(lock) => lock,
            Err(e) => return refuse(batch, ServiceError::from(e)),
        };
        let usage = match self
            .tenancy
            .reservation_under(shared.writes(), &namespaces)
            .await
        {
            Ok(usage) => usage,
            Err(e) => {
                shared.release().await;
                return refuse(batch, ServiceError::from(e));
            }
        };
        shared.based_on(usage.basis);
        let (mut held, mut exact) = (usage.held, usage.exact);
        // What the batch admitted so far, on top of what the namespaces held.
        let mut admitted = Reservation::default();
        let mut ends = Vec::new();
        for waiting in batch {
            let check = |held: Reservation| {
                let mut used = held;
                used += admitted;
                check_quotas(tenant, &waiting.quotas, &used, waiting.ask.as_ref())
            };
            let mut verdict = check(held);
            if verdict.is_err() && !exact {
                // Read from memory, the usage may still count what was deleted meanwhile:
                // a refusal stands only on a fresh read.
                match self.tenancy.reservation(&namespaces).await {
                    Ok(read) => {
                        (held, exact) = (read, true);
                        verdict = check(held);
                    }
                    Err(e) => verdict = Err(ServiceError::from(e)),
                }
            }
            let Err(refused) = verdict else {
                let (end, ended) = oneshot::channel();
                if waiting
                    .verdict
                    .send(Ok(Admitted { end: Some(end) }))
                    .is_ok()
                {
                    if let Some(ask) = &waiting.ask {
                        admitted += ask.reservation();
                    }
                    ends.push(ended);
                }
                continue;
            };
            let _ = waiting.verdict.send(Err(refused));
        }
        // A create that failed midway may have written something its maker never saw.
        if !join_all(ends).await.into_iter().all(|e| e == Ok(true)) {
            shared.doubt();
        }
        shared.release().await;
    }
}

/// Takes the next batch off the queue, in arrival order: the first waiting create and every
/// later one over the same namespaces, with one snapshot-taking create at most.
fn next_batch(waiting: &mut Vec<Waiting>) -> Vec<Waiting> {
    let namespaces = waiting[0].namespaces.clone();
    let mut snapshot = false;
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
        let first = next_batch(&mut queue);
        assert_eq!(shape(&first), [(1, false), (1, true), (1, false)]);
        assert_eq!(shape(&queue), [(2, false), (1, true)]);
        let second = next_batch(&mut queue);
        assert_eq!(shape(&second), [(2, false)]);
        assert_eq!(shape(&next_batch(&mut queue)), [(1, true)]);
        assert!(queue.is_empty());
    }
}
