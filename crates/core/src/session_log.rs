//! What the logs say of one client session: a line at info when it has
//! logged in, and one when it ends, on whatever path it ends (the client
//! left, an error, a kill, the idle timeout, shutdown; parked or not): who
//! it was (tenant, database), where it came in (endpoint, client address),
//! how long it lasted, how many backend leases it took (one a transaction
//! with transaction pooling) and why it was pinned, if it was. The record
//! rides in the session's [`crate::inspect::Inspector`], which both
//! engines keep for the session's whole life and move through parking.

use std::net::IpAddr;
use std::time::{Duration, Instant};

/// A client address in a log line: the address, or nothing when unknown
/// (formatted only when the line is written).
pub struct ClientAddr(pub Option<IpAddr>);

impl std::fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(ip) => write!(f, "{ip}"),
            None => Ok(()),
        }
    }
}

/// A session's own counts, for its end line.
#[derive(Debug)]
pub struct SessionLog {
    started: Instant,
    leases: u64,
    pinned: Option<&'static str>,
}

impl Default for SessionLog {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionLog {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            leases: 0,
            pinned: None,
        }
    }

    /// The session took a backend lease.
    pub fn leased(&mut self) {
        self.leases += 1;
    }

    /// The session was pinned for `reason` (the first reason is kept).
    pub fn pinned(&mut self, reason: &'static str) {
        self.pinned.get_or_insert(reason);
    }

    pub fn leases(&self) -> u64 {
        self.leases
    }

    pub fn pin_reason(&self) -> Option<&'static str> {
        self.pinned
    }

    /// How long the session has lasted, to the millisecond.
    pub fn duration(&self) -> Duration {
        let d = self.started.elapsed();
        Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_counts_its_leases_and_keeps_its_first_pin_reason() {
        let mut s = SessionLog::new();
        assert_eq!((s.leases(), s.pin_reason()), (0, None));
        s.leased();
        s.leased();
        s.pinned("temp_table");
        s.pinned("advisory_lock");
        assert_eq!((s.leases(), s.pin_reason()), (2, Some("temp_table")));
        assert_eq!(s.duration().subsec_nanos() % 1_000_000, 0, "whole milliseconds");
    }
}
