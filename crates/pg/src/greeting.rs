//! The login greeting of transaction-pooled sessions, cached per pool and
//! startup parameters: the ParameterStatus values a client is told and the
//! tracked values its session starts from. With a cached greeting a login
//! borrows no backend connection at all (as PgBouncer answers from the
//! first server's welcome), so connection storms never touch the pool.
//!
//! A greeting is taken from a real backend connection after the client's
//! startup parameters were applied and read back, so every value is the
//! server's own (canonical) rendering. Entries live [`GREETING_TTL`], so a
//! server-side default changed by a reload reaches new clients within that
//! time (one changed with `ALTER ROLE|DATABASE … SET` through the proxy at
//! once: [`Greetings::forget_backend`]); the cache holds at most
//! [`MAX_GREETINGS`] entries (a client that sends a new
//! `application_name` per connection cannot grow it without bound).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::tracked;
use gatehouse_core::pool::PoolKey;

/// How long a cached greeting is used before a login reads a fresh one.
pub const GREETING_TTL: Duration = Duration::from_secs(60);

/// Most greetings cached at once (all pools together).
pub const MAX_GREETINGS: usize = 1024;

/// What a transaction-pooled client is told at login, and starts from.
#[derive(Debug, PartialEq, Eq)]
pub struct Greeting {
    /// ParameterStatus (name, value) pairs, in the server's order.
    pub params: Vec<(String, String)>,
    /// The session's tracked values after its startup parameters.
    pub desired: tracked::Values,
}

/// Startup parameters as the cache key: names lower-cased, order kept.
type Startup = Vec<(String, String)>;

struct Entry {
    pool: PoolKey,
    startup: Startup,
    greeting: Arc<Greeting>,
    stored: Instant,
}

/// Cached greetings of one engine instance, by a hash of (pool, startup
/// parameters), so that a login looks one up without building a key; the
/// entry's own pool and parameters are compared on a hit.
#[derive(Default)]
pub struct Greetings {
    map: Mutex<HashMap<u64, Entry>>,
    hasher: RandomState,
}

fn startup_key(wanted: &[(String, String)]) -> Startup {
    wanted
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect()
}

impl Greetings {
    fn fingerprint(&self, pool: &PoolKey, wanted: &[(String, String)]) -> u64 {
        let mut h = self.hasher.build_hasher();
        pool.hash(&mut h);
        wanted.len().hash(&mut h);
        for (k, v) in wanted {
            for b in k.bytes() {
                h.write_u8(b.to_ascii_lowercase());
            }
            h.write_u8(0xff);
            v.hash(&mut h);
        }
        h.finish()
    }

    /// The cached greeting for these startup parameters on `pool`, if fresh.
    pub fn get(&self, pool: &PoolKey, wanted: &[(String, String)], now: Instant) -> Option<Arc<Greeting>> {
        let fingerprint = self.fingerprint(pool, wanted);
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.get(&fingerprint)?;
        let same = entry.pool == *pool
            && entry.startup.len() == wanted.len()
            && entry
                .startup
                .iter()
                .zip(wanted)
                .all(|((ek, ev), (k, v))| ek.eq_ignore_ascii_case(k) && ev == v);
        (same && now.duration_since(entry.stored) < GREETING_TTL).then(|| entry.greeting.clone())
    }

    /// Remembers a greeting; when full, stale entries go first, then any one.
    pub fn put(&self, pool: &PoolKey, wanted: &[(String, String)], greeting: Greeting, now: Instant) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_GREETINGS {
            map.retain(|_, e| now.duration_since(e.stored) < GREETING_TTL);
            if map.len() >= MAX_GREETINGS
                && let Some(k) = map.keys().next().copied()
            {
                map.remove(&k);
            }
        }
        map.insert(
            self.fingerprint(pool, wanted),
            Entry {
                pool: pool.clone(),
                startup: startup_key(wanted),
                greeting: Arc::new(greeting),
                stored: now,
            },
        );
    }

    /// Forgets the greetings of the pools on `backend` of `cluster`: what
    /// new sessions start with changed there (`ALTER ROLE|DATABASE ...
    /// SET`).
    pub fn forget_backend(&self, cluster: &str, backend: &str) {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, e| e.pool.cluster != cluster || e.pool.backend != backend);
    }

    /// Number of cached greetings (for tests and reports).
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(db: &str) -> PoolKey {
        PoolKey {
            cluster: "c".into(),
            backend: "127.0.0.1:5432".into(),
            user: "u".into(),
            database: db.into(),
            startup: Vec::new(),
        }
    }

    fn greeting(tag: &str) -> Greeting {
        Greeting {
            params: vec![("application_name".into(), tag.into())],
            desired: vec![tag.to_owned()].into(),
        }
    }

    fn startup(app: &str) -> Vec<(String, String)> {
        vec![("application_name".into(), app.into())]
    }

    #[test]
    fn hit_only_for_same_pool_and_parameters() {
        let g = Greetings::default();
        let t = Instant::now();
        g.put(&key("a"), &startup("x"), greeting("x"), t);
        assert_eq!(g.get(&key("a"), &startup("x"), t).as_deref(), Some(&greeting("x")));
        assert!(g.get(&key("b"), &startup("x"), t).is_none());
        assert!(g.get(&key("a"), &startup("y"), t).is_none());
        assert!(g.get(&key("a"), &[], t).is_none());
    }

    #[test]
    fn parameter_names_compare_without_case() {
        let g = Greetings::default();
        let t = Instant::now();
        g.put(&key("a"), &[("DateStyle".into(), "ISO".into())], greeting("x"), t);
        assert!(g.get(&key("a"), &[("datestyle".into(), "ISO".into())], t).is_some());
        assert!(g.get(&key("a"), &[("datestyle".into(), "iso".into())], t).is_none());
    }

    #[test]
    fn entries_expire() {
        let g = Greetings::default();
        let t = Instant::now();
        g.put(&key("a"), &[], greeting("x"), t);
        assert!(
            g.get(&key("a"), &[], t + GREETING_TTL - Duration::from_millis(1))
                .is_some()
        );
        assert!(g.get(&key("a"), &[], t + GREETING_TTL).is_none());
    }

    #[test]
    fn bounded() {
        let g = Greetings::default();
        let t = Instant::now();
        for i in 0..MAX_GREETINGS + 10 {
            g.put(&key("a"), &startup(&i.to_string()), greeting("x"), t);
        }
        assert!(g.len() <= MAX_GREETINGS);
        // The newest is always there.
        let last = (MAX_GREETINGS + 9).to_string();
        assert!(g.get(&key("a"), &startup(&last), t).is_some());
    }
}
