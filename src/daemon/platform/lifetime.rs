//! A sandbox's lifetime (its TTL and idle timeout) and when the leader's check acts on it.
use crate::shared::models::sandbox::{Sandbox, SandboxStatus};
use crate::shared::timestamp::parse_timestamp;

/// A sandbox's lifetime: the leader deletes it at `expires_at` and pauses it once
/// `idle_timeout_seconds` passed since its last activity (an exec, a stream, a file transfer,
/// its create or resume).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lifetime {
    /// Unix seconds at which it is deleted (`None`: never).
    pub expires_at: Option<i64>,
    /// Seconds without activity before it is paused (`None`: never).
    pub idle_timeout_seconds: Option<u64>,
}

impl Lifetime {
    /// A record's lifetime, and its last activity (Unix seconds) when it says.
    pub fn of_record(record: &Sandbox) -> (Lifetime, Option<i64>) {
        let unix = |t: Option<&str>| t.and_then(|t| parse_timestamp(t).ok());
        let lifetime = Lifetime {
            expires_at: unix(record.expires_at.as_deref()),
            idle_timeout_seconds: record.idle_timeout_seconds,
        };
        (lifetime, unix(record.last_activity_at.as_deref()))
    }

    /// Whether its deadline has come at `now` (Unix seconds).
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }

    /// Whether a sandbox last active at `last_activity` has been idle past its timeout at
    /// `now` (Unix seconds).
    pub fn idle(&self, last_activity: i64, now: i64) -> bool {
        self.idle_timeout_seconds.is_some_and(|idle| {
            last_activity.saturating_add(i64::try_from(idle).unwrap_or(i64::MAX)) <= now
        })
    }

    /// Whether a sandbox of this lifetime, last active at `last_activity`, is due for the
    /// leader's check at `now` (Unix seconds): past its deadline, or idle past its timeout
    /// while it `may_run` (a paused or stopped sandbox is not paused again).
    pub fn due(&self, last_activity: i64, may_run: bool, now: i64) -> bool {
        self.expired(now) || (may_run && self.idle(last_activity, now))
    }
}

/// The (namespace, name) of the records due at `now`, none being deleted.
pub(super) fn due_records(records: Vec<Sandbox>, now: i64) -> Vec<(String, String)> {
    records
        .into_iter()
        .filter(|s| {
            let (lifetime, last) = Lifetime::of_record(s);
            s.status != SandboxStatus::Terminating
                && lifetime.due(last.unwrap_or(now), s.status == SandboxStatus::Running, now)
        })
        .map(|s| (s.namespace, s.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Lifetime;

    #[test]
    fn a_lifetime_is_due_past_its_deadline_or_idle_past_its_timeout_while_running() {
        let now = 1_000;
        let ttl = |at| Lifetime {
            expires_at: Some(at),
            idle_timeout_seconds: None,
        };
        let idle = |seconds| Lifetime {
            expires_at: None,
            idle_timeout_seconds: Some(seconds),
        };
        assert!(
            ttl(now).due(0, false, now),
            "a deadline reached, paused or not"
        );
        assert!(!ttl(now + 1).due(0, true, now));
        assert!(idle(60).due(now - 60, true, now));
        assert!(!idle(60).due(now - 59, true, now));
        assert!(
            !idle(60).due(0, false, now),
            "a paused sandbox is not paused again"
        );
        assert!(!Lifetime::default().due(0, true, now));
        assert!(!idle(u64::MAX).due(i64::MAX, true, now), "no overflow");
    }
}
