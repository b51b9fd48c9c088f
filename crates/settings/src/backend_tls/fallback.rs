//! The WARN line of `prefer`'s fallback to plain text after a failed
//! handshake, at most once per [`FALLBACK_LOG_EVERY`] and server: a server
//! that always fails the handshake would otherwise log a line for every
//! connection a pool opens to it. The next line says how many were held
//! back. Kept per cluster configuration (a reload starts afresh).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// At most one fallback line per server in this time.
pub const FALLBACK_LOG_EVERY: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct FallbackLog {
    /// Per server address: when its last line was written, and the
    /// fallbacks not logged since.
    servers: Mutex<HashMap<String, (Instant, u64)>>,
}

impl FallbackLog {
    /// Whether a fallback to `addr` at `now` is logged: `Some(held back
    /// since the last line)`, or `None` to stay quiet.
    pub fn admit(&self, addr: &str, now: Instant) -> Option<u64> {
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        match servers.get_mut(addr) {
            Some((last, held)) if now.saturating_duration_since(*last) < FALLBACK_LOG_EVERY => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                *last = now;
                Some(std::mem::take(held))
            }
            None => {
                servers.insert(addr.to_owned(), (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_server_and_interval_counting_the_held_back() {
        let log = FallbackLog::default();
        let t0 = Instant::now();
        assert_eq!(log.admit("a:1", t0), Some(0));
        assert_eq!(log.admit("a:1", t0 + Duration::from_secs(1)), None);
        assert_eq!(log.admit("a:1", t0 + Duration::from_secs(59)), None);
        assert_eq!(
            log.admit("b:1", t0 + Duration::from_secs(2)),
            Some(0),
            "another server logs at once"
        );
        assert_eq!(log.admit("a:1", t0 + FALLBACK_LOG_EVERY), Some(2));
        assert_eq!(log.admit("a:1", t0 + FALLBACK_LOG_EVERY), None);
        assert_eq!(log.admit("a:1", t0 + FALLBACK_LOG_EVERY * 2), Some(1));
    }
}
