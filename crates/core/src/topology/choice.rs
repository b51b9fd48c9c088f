//! The router's question to the topology: which backend should serve
//! the next lease of an endpoint, and why ([`ClusterState::choose`]). The
//! elected writer for writes; for reads, the up replica within the
//! endpoint's lag bound with the fewest leases out for its weight, one
//! that has replayed the client's last write when read-your-writes asks
//! it ([`Intent::Read`]), else the writer or nothing, as the endpoint says.

use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{BackendState, ClusterState, Role};
use crate::config::{EndpointRole, EndpointSettings, ReaderFallback};
use crate::engine::position::Position;

/// Where the router sends a lease, and why.
pub struct Choice {
    pub backend: Arc<BackendState>,
    pub why: Why,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The elected writer (read/write endpoints).
    Writer,
    /// The up-to-date replica with the fewest leases outstanding.
    LeastBusyReader,
    /// A read with no usable replica: the writer.
    WriterFallback,
    /// A split endpoint's read after the client's write, which no usable
    /// replica has replayed yet: the writer.
    WriterReadYourWrites,
    /// A split endpoint's read after the client's write, on the least busy
    /// replica once it showed, asked on the connection lent, that it had
    /// replayed the write (its last probe was older than the write).
    CaughtUpReader,
    /// A query rule's `route = "writer"`.
    RuleWriter,
    /// A query rule's `route = "replica"`: the least busy replica.
    RuleReplica,
    /// A query rule's `route = { backend = "host:port" }`.
    RuleBackend,
    /// A query rule's `route = { cluster = "name" }`: that cluster's writer.
    RuleCluster,
    /// A read on the writer of an endpoint with `writer_reads`, which had
    /// the fewest leases among it and the usable replicas.
    WriterAsReader,
}

impl Why {
    pub const ALL: [Why; 10] = [
        Why::Writer,
        Why::LeastBusyReader,
        Why::WriterFallback,
        Why::WriterReadYourWrites,
        Why::CaughtUpReader,
        Why::RuleWriter,
        Why::RuleReplica,
        Why::RuleBackend,
        Why::RuleCluster,
        Why::WriterAsReader,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Writer => "writer",
            Self::LeastBusyReader => "least_busy_reader",
            Self::WriterFallback => "writer_fallback",
            Self::WriterReadYourWrites => "writer_read_your_writes",
            Self::CaughtUpReader => "caught_up_reader",
            Self::RuleWriter => "rule_writer",
            Self::RuleReplica => "rule_replica",
            Self::RuleBackend => "rule_backend",
            Self::RuleCluster => "rule_cluster",
            Self::WriterAsReader => "writer_as_reader",
        }
    }
}

/// What a lease is for. Read/write endpoints always lease the writer and
/// read-only endpoints a reader; a split endpoint decides per transaction
/// (`crate::split`).
#[derive(Debug, Clone, Copy)]
pub enum Intent<'a> {
    /// Writes, or anything not known to be a read: the writer.
    Write,
    /// A read-only transaction: a replica, one that has replayed `after`
    /// (the client's last write) when given.
    Read { after: Option<&'a Position> },
    /// A query rule's route, whatever the endpoint's role (see [`RouteTo`]).
    Ruled(&'a RouteTo),
}

pub use crate::rules::RouteTo;

/// What [`ClusterState::least_busy_reader`] found.
enum Reader {
    Found(Arc<BackendState>),
    /// Usable replicas, but none has replayed the required position.
    NotReplayed,
    None,
}

impl ClusterState {
    /// The backend that should serve the next lease of `endpoint`, as the
    /// topology is now; `None` when there is none (the router waits).
    pub fn choose(&self, endpoint: &EndpointSettings, intent: Intent<'_>) -> Option<Choice> {
        self.choose_for(endpoint, intent, true, &|_| false)
    }

    /// [`Self::choose`], where among equally busy replicas the first that
    /// `warm` holds (its pool for the lease's tenant has an idle connection:
    /// the lease skips a switch or an open) is taken before the turn.
    pub fn choose_warm(
        &self,
        endpoint: &EndpointSettings,
        intent: Intent<'_>,
        warm: &dyn Fn(&BackendState) -> bool,
    ) -> Option<Choice> {
        self.choose_for(endpoint, intent, true, warm)
    }

    /// [`Self::choose`] for a look only (a session's first pool): the turn
    /// among tied replicas does not move; a tied replica `warm` holds comes
    /// first.
    pub fn peek(&self, endpoint: &EndpointSettings, warm: &dyn Fn(&BackendState) -> bool) -> Option<Choice> {
        self.choose_for(endpoint, Intent::Write, false, warm)
    }

    fn choose_for(
        &self,
        endpoint: &EndpointSettings,
        intent: Intent<'_>,
        take_turn: bool,
        warm: &dyn Fn(&BackendState) -> bool,
    ) -> Option<Choice> {
        // Only a backend up and writable is elected, and one that stops
        // being either is unelected in the same probe round: no look at
        // its health is needed here.
        if self.holds(&endpoint.name) {
            return None;
        }
        let writer = |why| {
            self.writer
                .load_full()
                .filter(|w| !w.draining.load(Ordering::Relaxed))
                .map(|backend| Choice { backend, why })
        };
        let after = match (endpoint.role, intent) {
            (_, Intent::Ruled(RouteTo::Writer)) => return writer(Why::RuleWriter),
            (_, Intent::Ruled(RouteTo::Cluster(_))) => return writer(Why::RuleCluster),
            (_, Intent::Ruled(RouteTo::Backend(addr))) => return self.usable_backend(addr),
            (_, Intent::Ruled(RouteTo::Replica)) => {
                return match self.least_busy_reader(endpoint.max_replica_lag, None, None, take_turn, warm) {
                    Reader::Found(backend) => Some(Choice {
                        backend,
                        why: Why::RuleReplica,
                    }),
                    Reader::NotReplayed | Reader::None => writer(Why::WriterFallback),
                };
            }
            (EndpointRole::ReadWrite, _) | (EndpointRole::Split, Intent::Write) => return writer(Why::Writer),
            (EndpointRole::ReadOnly, _) => None,
            (EndpointRole::Split, Intent::Read { after }) => after,
        };
        // With `writer_reads`, the writer competes with the replicas.
        let also = endpoint
            .writer_reads
            .then(|| writer(Why::WriterAsReader))
            .flatten()
            .map(|c| c.backend);
        match self.least_busy_reader(endpoint.max_replica_lag, after, also.as_ref(), take_turn, warm) {
            Reader::Found(backend) => {
                let why = if also.as_ref().is_some_and(|w| Arc::ptr_eq(w, &backend)) {
                    Why::WriterAsReader
                } else {
                    Why::LeastBusyReader
                };
                Some(Choice { backend, why })
            }
            Reader::NotReplayed => writer(Why::WriterReadYourWrites),
            Reader::None if endpoint.role == EndpointRole::Split => writer(Why::WriterFallback),
            Reader::None => match endpoint.reader_fallback {
                ReaderFallback::Writer => writer(Why::WriterFallback),
                ReaderFallback::Error => None,
            },
        }
    }

    /// The backend at `addr` while it is up and not draining, whatever its role.
    fn usable_backend(&self, addr: &str) -> Option<Choice> {
        let backends = self.backends.load();
        let backend = backends.iter().find(|b| b.addr == addr)?;
        let up = backend.health.lock().unwrap_or_else(PoisonError::into_inner).up;
        (up && !backend.draining.load(Ordering::Relaxed)).then(|| Choice {
            backend: backend.clone(),
            why: Why::RuleBackend,
        })
    }

    /// The up replica, within `max_lag`, with the fewest leases out for
    /// its weight. Among ties (idle replicas, mostly) the first that `warm`
    /// holds, else the tied replicas take turns, so equal replicas share
    /// the load evenly; the turn moves only when `take_turn` (a lease, not
    /// a mere look). With `after`, only a replica whose last probe showed
    /// it had replayed that position is usable. `writer` (an endpoint's
    /// `writer_reads`): the elected writer competes as one more reader
    /// when some replica is usable.
    fn least_busy_reader(
        &self,
        max_lag: Option<Duration>,
        after: Option<&Position>,
        writer: Option<&Arc<BackendState>>,
        take_turn: bool,
        warm: &dyn Fn(&BackendState) -> bool,
    ) -> Reader {
        let backends = self.backends.load();
        let mut not_replayed = false;
        let mut usable = |b: &BackendState| {
            let h = b.health.lock().unwrap_or_else(PoisonError::into_inner);
            let ok = h.up
                && h.role == Role::Reader
                && !b.draining.load(Ordering::Relaxed)
                && max_lag.is_none_or(|max| h.lag.is_none_or(|lag| lag <= max));
            let replayed = after.is_none_or(|need| h.replayed.as_ref().is_some_and(|have| have.covers(need)));
            not_replayed |= ok && !replayed;
            ok && replayed
        };
        // (leases + 1) / weight, compared by cross-multiplying, so that an
        // idle heavy replica is not tied with an idle light one.
        let score = |b: &BackendState| {
            (
                b.leases.load(Ordering::Relaxed) + 1,
                b.weight.load(Ordering::Relaxed).max(1) as usize,
            )
        };
        let cmp = |(l1, w1): (usize, usize), (l2, w2): (usize, usize)| (l1 * w2).cmp(&(l2 * w1));
        let mut scored: Vec<(&Arc<BackendState>, (usize, usize))> = Vec::with_capacity(backends.len() + 1);
        for b in backends.iter() {
            if usable(b) {
                scored.push((b, score(b)));
            }
        }
        // The elected writer (up and writable, else not elected) has
        // replayed every write and lags nothing. It competes only beside a
        // usable replica: without one, what serves the read is decided as
        // without `writer_reads` (a replica asked whether it replayed the
        // client's write, the fallback).
        if let Some(w) = writer.filter(|_| !scored.is_empty()) {
            scored.push((w, score(w)));
        }
        let Some(best) = scored.iter().map(|(_, s)| *s).min_by(|a, b| cmp(*a, *b)) else {
            return if not_replayed {
                Reader::NotReplayed
            } else {
                Reader::None
            };
        };
        let ties: Vec<&Arc<BackendState>> = scored
            .iter()
            .filter(|(_, s)| cmp(*s, best).is_eq())
            .map(|(b, _)| *b)
            .collect();
        if ties.len() > 1
            && let Some(b) = ties.iter().find(|b| warm(b))
        {
            return Reader::Found((*b).clone());
        }
        let turn = if take_turn && ties.len() > 1 {
            self.next_reader.fetch_add(1, Ordering::Relaxed) % ties.len()
        } else {
            0
        };
        match ties.get(turn) {
            Some(b) => Reader::Found((*b).clone()),
            None => Reader::None,
        }
    }
}
