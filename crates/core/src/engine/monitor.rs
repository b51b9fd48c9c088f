//! Monitor connections kept between health checks, so a check does not cost
//! the server a login each interval. Kept per (monitor user, backend
//! address): several clusters may probe one server, as the same user or as
//! different ones, and each probe takes a connection of its own, so
//! concurrent probes never close each other's.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// At most this many idle monitor connections per (user, address): one per
/// cluster probing that server at the same moment is plenty.
pub const KEPT_PER_SERVER: usize = 4;

pub struct MonitorConns<C> {
    kept: Mutex<HashMap<String, Vec<C>>>,
}

impl<C> Default for MonitorConns<C> {
    fn default() -> Self {
        Self {
            kept: Mutex::new(HashMap::new()),
        }
    }
}

fn key(user: &str, addr: &str) -> String {
    format!("{user}@{addr}")
}

impl<C> MonitorConns<C> {
    /// A kept connection of `user` to `addr`, if any.
    pub fn take(&self, user: &str, addr: &str) -> Option<C> {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&key(user, addr))
            .and_then(Vec::pop)
    }

    /// Keeps `conn` for the next check (dropped, i.e. closed, past the cap).
    pub fn put(&self, user: &str, addr: &str, conn: C) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = kept.entry(key(user, addr)).or_default();
        if slot.len() < KEPT_PER_SERVER {
            slot.push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_per_user_and_address_up_to_the_cap() {
        let m = MonitorConns::default();
        m.put("root", "a:1", 1);
        m.put("root", "a:1", 2);
        m.put("other", "a:1", 3);
        assert_eq!(m.take("root", "b:1"), None);
        assert_eq!(m.take("other", "a:1"), Some(3));
        assert_eq!(m.take("other", "a:1"), None);
        let mut got = vec![m.take("root", "a:1"), m.take("root", "a:1")];
        got.sort();
        assert_eq!(got, vec![Some(1), Some(2)]);
        for i in 0..10 {
            m.put("root", "a:1", i);
        }
        let mut n = 0;
        while m.take("root", "a:1").is_some() {
            n += 1;
        }
        assert_eq!(n, KEPT_PER_SERVER);
    }
}
