//! The statements `log = true` rules matched most recently, kept for the
//! admin API (`GET /api/rules/log`) besides the log line each one writes:
//! a ring of at most [`LOGGED_HITS_KEPT`], the oldest dropped first, so a
//! busy rule costs a bounded amount of memory.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// How many logged hits the ring keeps.
pub const LOGGED_HITS_KEPT: usize = 256;

/// The longest statement text a logged hit keeps, in bytes (cut at a
/// character boundary).
pub const LOGGED_TEXT_LIMIT: usize = 1024;

/// One statement a logging rule matched.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoggedHit {
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    pub tenant: String,
    pub endpoint: String,
    /// Every rule that matched it, in order (not only the logging one).
    pub rules: Vec<String>,
    pub blocked: bool,
    pub rewritten: bool,
    /// The statement as the client sent it, at most [`LOGGED_TEXT_LIMIT`] bytes.
    pub statement: String,
}

impl LoggedHit {
    /// A hit now; `statement` is cut to [`LOGGED_TEXT_LIMIT`].
    pub fn now(
        tenant: &str,
        endpoint: &str,
        rules: Vec<String>,
        blocked: bool,
        rewritten: bool,
        statement: &str,
    ) -> Self {
        let at_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Self {
            at_unix_ms,
            tenant: tenant.to_owned(),
            endpoint: endpoint.to_owned(),
            rules,
            blocked,
            rewritten,
            statement: crate::text::cut(statement, LOGGED_TEXT_LIMIT).to_owned(),
        }
    }
}

/// The ring of logged hits.
#[derive(Debug, Default)]
pub struct HitLog {
    hits: Mutex<VecDeque<LoggedHit>>,
}

impl HitLog {
    pub fn push(&self, hit: LoggedHit) {
        let mut hits = self.hits.lock().unwrap_or_else(PoisonError::into_inner);
        if hits.len() == LOGGED_HITS_KEPT {
            hits.pop_front();
        }
        hits.push_back(hit);
    }

    /// The hits kept, oldest first.
    pub fn recent(&self) -> Vec<LoggedHit> {
        self.hits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    pub fn clear(&self) {
        self.hits.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// Takes `old`'s hits in place of its own (a reload's new rules keep
    /// what the running ones logged). Idempotent.
    pub fn carry_from(&self, old: &HitLog) {
        if std::ptr::eq(self, old) {
            return;
        }
        let kept = old.recent();
        *self.hits.lock().unwrap_or_else(PoisonError::into_inner) = kept.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(n: usize) -> LoggedHit {
        LoggedHit::now("t", "e", vec!["r".into()], false, false, &format!("SELECT {n}"))
    }

    #[test]
    fn the_ring_keeps_the_newest_hits_only() {
        let log = HitLog::default();
        for n in 0..LOGGED_HITS_KEPT + 10 {
            log.push(hit(n));
        }
        let kept = log.recent();
        assert_eq!(kept.len(), LOGGED_HITS_KEPT);
        assert_eq!(kept[0].statement, "SELECT 10");
        assert_eq!(
            kept[LOGGED_HITS_KEPT - 1].statement,
            format!("SELECT {}", LOGGED_HITS_KEPT + 9)
        );
    }

    #[test]
    fn long_statements_are_cut_at_a_character_boundary() {
        let long = "é".repeat(LOGGED_TEXT_LIMIT);
        let h = LoggedHit::now("t", "e", Vec::new(), true, false, &long);
        assert!(h.statement.len() <= LOGGED_TEXT_LIMIT && h.statement.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_reload_carries_the_hits_once() {
        let old = HitLog::default();
        old.push(hit(1));
        let new = HitLog::default();
        new.carry_from(&old);
        new.carry_from(&old);
        assert_eq!(new.recent(), old.recent());
        new.clear();
        assert!(new.recent().is_empty());
    }
}
