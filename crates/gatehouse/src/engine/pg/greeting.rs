//! The login greeting of transaction-pooled sessions, cached per pool and
//! startup parameters: the ParameterStatus values a client is told and the
//! tracked values its session starts from. With a cached greeting a login
//! borrows no backend connection at all (as PgBouncer answers from the
//! first server's welcome), so connection storms never touch the pool.
//!
//! A greeting is taken from a real backend connection after the client's
//! startup parameters were applied and read back, so every value is the
//! server's own (canonical) rendering. Entries live [`GREETING_TTL`], so a
//! server-side default changed with `ALTER DATABASE … SET` or a reload
//! reaches new clients within that time; the cache holds at most
//! [`MAX_GREETINGS`] entries (a client that sends a new
//! `application_name` per connection cannot grow it without bound).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::tracked;
use crate::pool::PoolKey;

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
    greeting: Arc<Greeting>,
    stored: Instant,
}

/// Cached greetings of one engine instance.
#[derive(Default)]
pub struct Greetings {
    map: Mutex<HashMap<(PoolKey, Startup), Entry>>,
}

fn startup_key(wanted: &[(String, String)]) -> Startup {
    wanted
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect()
}

impl Greetings {
    /// The cached greeting for these startup parameters on `pool`, if fresh.
    pub fn get(&self, pool: &PoolKey, wanted: &[(String, String)], now: Instant) -> Option<Arc<Greeting>> {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.get(&(pool.clone(), startup_key(wanted)))?;
        (now.duration_since(entry.stored) < GREETING_TTL).then(|| entry.greeting.clone())
    }

    /// Remembers a greeting; when full, stale entries go first, then any one.
    pub fn put(&self, pool: &PoolKey, wanted: &[(String, String)], greeting: Greeting, now: Instant) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_GREETINGS {
            map.retain(|_, e| now.duration_since(e.stored) < GREETING_TTL);
            if map.len() >= MAX_GREETINGS
                && let Some(k) = map.keys().next().cloned()
            {
                map.remove(&k);
            }
        }
        map.insert(
            (pool.clone(), startup_key(wanted)),
            Entry {
                greeting: Arc::new(greeting),
                stored: now,
            },
        );
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
