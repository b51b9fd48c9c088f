//! The TLS session store of client-facing endpoints: the sessions a client
//! may resume (TLS 1.2 session ids, TLS 1.3 stateful tickets), at most a
//! fixed number, the oldest forgotten first, every operation in constant
//! time. rustls's own `ServerSessionMemoryCache` finds the key to forget in
//! a list, one comparison per entry: with thousands of entries (the
//! connection storm's 1,000 clients each resuming) that scan was a tenth
//! of the proxy's CPU under the storm (`perf`, `__memcmp_avx2_movbe` under
//! `LimitedCache::remove`). Here a map holds the sessions and a queue the
//! order they came in; a session taken or replaced leaves a stale entry in
//! the queue, skipped when it comes up and swept once the queue holds
//! twice the capacity.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// Sessions kept for resumption, oldest forgotten first.
#[derive(Debug)]
pub struct SessionStore {
    capacity: usize,
    inner: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    /// Key → (value, the sequence number it was stored with).
    map: HashMap<Vec<u8>, (Vec<u8>, u64)>,
    /// Keys in the order they were stored, with their sequence numbers;
    /// an entry whose number is not the map's is stale.
    order: VecDeque<(Vec<u8>, u64)>,
    next: u64,
}

impl Sessions {
    fn is_live(&self, key: &[u8], seq: u64) -> bool {
        self.map.get(key).is_some_and(|(_, s)| *s == seq)
    }
}

impl SessionStore {
    /// A store of at most `capacity` sessions (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Sessions::default()),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sessions held now.
    pub fn len(&self) -> usize {
        self.sessions().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries in the order queue, stale ones included (for tests of its
    /// bound).
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.sessions().order.len()
    }
}

impl rustls::server::StoresServerSessions for SessionStore {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut s = self.sessions();
        let seq = s.next;
        s.next += 1;
        s.order.push_back((key.clone(), seq));
        s.map.insert(key, (value, seq));
        while s.map.len() > self.capacity {
            let Some((old, old_seq)) = s.order.pop_front() else {
                break;
            };
            if s.is_live(&old, old_seq) {
                s.map.remove(&old);
            }
        }
        if s.order.len() > 2 * self.capacity {
            let Sessions { map, order, .. } = &mut *s;
            order.retain(|(k, seq)| map.get(k).is_some_and(|(_, s)| s == seq));
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.sessions().map.get(key).map(|(v, _)| v.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.sessions().map.remove(key).map(|(v, _)| v)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use rustls::server::StoresServerSessions;

    use super::*;

    fn key(i: usize) -> Vec<u8> {
        i.to_be_bytes().to_vec()
    }

    #[test]
    fn keeps_at_most_its_capacity_forgetting_the_oldest_first() {
        let store = SessionStore::new(3);
        for i in 0..5 {
            assert!(store.put(key(i), vec![i as u8]));
        }
        assert_eq!(store.len(), 3);
        assert_eq!(store.get(&key(0)), None);
        assert_eq!(store.get(&key(1)), None);
        assert_eq!(store.get(&key(4)), Some(vec![4]));
        assert_eq!(store.get(&key(2)), Some(vec![2]));
    }

    #[test]
    fn a_session_taken_is_gone_and_its_place_not_counted() {
        let store = SessionStore::new(2);
        store.put(key(1), vec![1]);
        store.put(key(2), vec![2]);
        assert_eq!(store.take(&key(1)), Some(vec![1]));
        assert_eq!(store.take(&key(1)), None);
        assert_eq!(store.get(&key(1)), None);
        // One place free: a new session forgets nobody.
        store.put(key(3), vec![3]);
        assert_eq!(store.get(&key(2)), Some(vec![2]));
        assert_eq!(store.get(&key(3)), Some(vec![3]));
    }

    #[test]
    fn a_session_stored_again_lives_from_its_new_place_in_line() {
        let store = SessionStore::new(2);
        store.put(key(1), vec![1]);
        store.put(key(2), vec![2]);
        store.put(key(1), vec![10]);
        // key 1's first entry is stale: the next put forgets key 2.
        store.put(key(3), vec![3]);
        assert_eq!(store.get(&key(1)), Some(vec![10]));
        assert_eq!(store.get(&key(2)), None);
        assert_eq!(store.get(&key(3)), Some(vec![3]));
    }

    #[test]
    fn the_order_queue_stays_bounded_when_sessions_are_taken() {
        let store = SessionStore::new(4);
        for i in 0..10_000 {
            store.put(key(i), vec![0; 8]);
            store.take(&key(i));
        }
        assert!(store.is_empty());
        assert!(store.queued() <= 2 * 4 + 1, "{} queued", store.queued());
    }
}
