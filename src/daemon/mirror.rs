//! A copy of stored state kept in memory (tenants, API keys, node dedications) that timers
//! reload and this replica's own writes update, where a read of the store that began before
//! a newer one (or before a write) can never replace what that newer one left.
//!
//! Every read of the store takes a [`Ticket`] before it starts; installing its result fails
//! when something with a later ticket was installed first. A write takes a ticket once it has
//! reached the store, so no read begun while the write was on its way can undo it. Stores
//! read here are linearizable (SQLite in this process; the Kubernetes API server, whose lists
//! without a resource version are read from etcd by quorum), so a later ticket always reads
//! state at least as new.
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Taken before reading the store; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

#[derive(Debug)]
struct Held<T> {
    /// What is held (`None`: nothing read yet, or dropped by [`Mirror::invalidate`]).
    value: Option<T>,
    /// When it was read.
    read_at: Option<Instant>,
    /// The last ticket handed out.
    issued: u64,
    /// The ticket of what is held: nothing older may replace it.
    holds: u64,
}

/// Stored state mirrored in memory; see the module documentation.
#[derive(Debug)]
pub struct Mirror<T> {
    held: Mutex<Held<T>>,
}

impl<T> Default for Mirror<T> {
    fn default() -> Self {
        Mirror {
            held: Mutex::new(Held {
                value: None,
                read_at: None,
                issued: 0,
                holds: 0,
            }),
        }
    }
}

impl<T> Mirror<T> {
    /// An empty mirror.
    pub fn new() -> Mirror<T> {
        Mirror::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held<T>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ticket for a read of the store that starts now.
    pub fn ticket(&self) -> Ticket {
        let mut held = self.lock();
        held.issued += 1;
        Ticket(held.issued)
    }

    /// Installs what the read of `ticket` returned, made from it and what is held now by
    /// `merge`, unless something newer is held. Returns whether it was installed.
    pub fn install_with(&self, ticket: Ticket, merge: impl FnOnce(Option<&T>) -> T) -> bool {
        let mut held = self.lock();
        if ticket.0 <= held.holds {
            return false;
        }
        let value = merge(held.value.as_ref());
        held.value = Some(value);
        held.read_at = Some(Instant::now());
        held.holds = ticket.0;
        true
    }

    /// [`Mirror::install_with`] without a merge.
    pub fn install(&self, ticket: Ticket, value: T) -> bool {
        self.install_with(ticket, |_| value)
    }

    /// Applies a write that has reached the store to what is held (if anything): reads begun
    /// before now can no longer replace the result.
    pub fn write(&self, change: impl FnOnce(&mut T)) {
        let mut held = self.lock();
        held.issued += 1;
        held.holds = held.issued;
        if let Some(value) = held.value.as_mut() {
            change(value);
        }
    }

    /// Changes what is held without ordering it after reads under way: only for data that
    /// every install merges from what is held (e.g. the latest use of an API key).
    pub fn amend(&self, change: impl FnOnce(&mut T)) {
        if let Some(value) = self.lock().value.as_mut() {
            change(value);
        }
    }

    /// Drops what is held after a write that has reached the store, so the next use reads
    /// the store again; reads begun before now can no longer install theirs.
    pub fn invalidate(&self) {
        let mut held = self.lock();
        held.issued += 1;
        held.holds = held.issued;
        held.value = None;
        held.read_at = None;
    }

    /// Reads what is held, if anything.
    pub fn read<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        f(self.lock().value.as_ref())
    }
}

impl<T: Clone> Mirror<T> {
    /// A copy of what is held, if anything.
    pub fn get(&self) -> Option<T> {
        self.lock().value.clone()
    }

    /// A copy of what is held if it was read less than `max_age` ago.
    pub fn get_fresh(&self, max_age: Duration) -> Option<T> {
        let held = self.lock();
        match held.read_at {
            Some(at) if at.elapsed() < max_age => held.value.clone(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_read_never_replaces_a_newer_one() {
        let mirror = Mirror::new();
        let (early, late) = (mirror.ticket(), mirror.ticket());
        assert!(mirror.install(late, "new"));
        assert!(!mirror.install(early, "old"));
        assert_eq!(mirror.get(), Some("new"));
        // In order, each read replaces the last.
        let next = mirror.ticket();
        assert!(mirror.install(next, "newer"));
        assert_eq!(mirror.get(), Some("newer"));
    }

    #[test]
    fn a_read_begun_before_a_write_cannot_undo_it() {
        let mirror = Mirror::new();
        let first = mirror.ticket();
        mirror.install(first, vec!["a"]);
        let before = mirror.ticket();
        mirror.write(|v| v.push("b"));
        assert!(!mirror.install(before, vec!["a"]));
        assert_eq!(mirror.get(), Some(vec!["a", "b"]));
        let after = mirror.ticket();
        assert!(mirror.install_with(after, |held| {
            assert_eq!(held, Some(&vec!["a", "b"]));
            vec!["a", "b", "c"]
        }));
    }

    #[test]
    fn invalidation_drops_the_value_and_older_reads() {
        let mirror = Mirror::new();
        let first = mirror.ticket();
        mirror.install(first, 1);
        assert_eq!(mirror.get_fresh(Duration::from_secs(60)), Some(1));
        assert_eq!(mirror.get_fresh(Duration::ZERO), None);
        let before = mirror.ticket();
        mirror.invalidate();
        assert_eq!(mirror.get(), None);
        assert!(!mirror.install(before, 1));
        let after = mirror.ticket();
        assert!(mirror.install(after, 2));
        assert_eq!(mirror.get(), Some(2));
    }
}
