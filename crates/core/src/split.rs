//! Split endpoints, the engine-agnostic half: what a transaction's first
//! statements say about where it may run, and a session's read-your-writes
//! state. Each engine routes its dialect's statements (`gatehouse_sql`
//! `route` / `mysql::route`) and hands the routes here; the router
//! ([`crate::router`]) takes the resulting [`Intent`].
//!
//! **Where a transaction runs.** It is decided once, from what the client
//! sends first, and the lease keeps it for the whole transaction:
//! * statements that are all reads (an implicit transaction: one simple
//!   query, one extended-query exchange up to its Sync, one MySQL command
//!   under autocommit) run on a replica;
//! * a block declared read-only (`BEGIN READ ONLY`, `START TRANSACTION READ
//!   ONLY`) runs on a replica whole: the server itself rejects a write in
//!   it, as it would on the writer;
//! * everything else runs on the writer, including every other explicit
//!   transaction (a block that begins with a read may write later, and
//!   its read must then have seen the writer's data) and anything the
//!   classifier does not understand.
//!
//! **Read-your-writes** (on by default): after a transaction that may have
//! written commits, the engine reads the writer's position on the same
//! connection (PostgreSQL `pg_current_wal_insert_lsn()`, MariaDB
//! `@@last_gtid`); the client's later reads go only to a replica whose last
//! probe showed it had replayed that far, else to the writer.

use gatehouse_sql::{Route, WriteReason};

use crate::engine::position::Position;
use crate::error::ProxyError;
use crate::topology::{Intent, RouteTo};

/// Where a transaction may run, from its first statements' routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Reads only, or a read-only block: a replica.
    Read,
    /// The writer; `wrote`: it may change data, so its commit position
    /// matters for the client's later reads.
    Write { wrote: bool },
    /// Reads of results that belong to the session's connection (`SHOW
    /// WARNINGS`, `FOUND_ROWS()`, `LAST_INSERT_ID()`): on the connection
    /// the session still holds, if it holds one (MySQL keeps it for the
    /// command after a statement with warnings), else on the writer.
    Follow,
}

/// Whether a statement of this reason may leave a change a later read must see.
fn may_write(reason: WriteReason) -> bool {
    match reason {
        WriteReason::Modifies | WriteReason::Locks | WriteReason::SideEffectFunction | WriteReason::Unknown => true,
        WriteReason::SessionBound
        | WriteReason::WriterOnly
        | WriteReason::SessionState
        | WriteReason::TransactionControl => false,
    }
}

/// Folds the routes of the statements a transaction starts with (in
/// order). Transaction control after a read-only `BEGIN` stays in that
/// block; no statements at all (a lone Sync) is a read.
pub fn decide(routes: impl IntoIterator<Item = Route>) -> Decision {
    let mut fold = Fold::default();
    for route in routes {
        fold.add(route);
    }
    fold.decision()
}

/// [`decide`] one route at a time (no list on the hot path).
#[derive(Debug, Clone, Copy, Default)]
pub struct Fold {
    read_only_block: bool,
    write: Option<bool>,
    session_bound: bool,
}

impl Fold {
    pub fn add(&mut self, route: Route) {
        let wrote = match route {
            Route::Read => return,
            Route::Begin { read_only: true } => {
                self.read_only_block = true;
                return;
            }
            Route::Write(WriteReason::TransactionControl) if self.read_only_block => return,
            Route::Write(WriteReason::SessionBound) => {
                self.session_bound = true;
                return;
            }
            // A block may or may not write: its statements tell
            // ([`SplitState::noted`]).
            Route::Begin { read_only: false } => false,
            Route::Write(reason) => may_write(reason),
        };
        self.write = Some(self.write.unwrap_or(false) || wrote);
    }

    pub fn decision(&self) -> Decision {
        match (self.write, self.session_bound) {
            (Some(wrote), _) => Decision::Write { wrote },
            (None, true) => Decision::Follow,
            (None, false) => Decision::Read,
        }
    }
}

/// What a split session is told of a lease a query rule routed (`route`)
/// for a transaction it decided `decision`: a replica's lease is a read; a
/// named backend's or another cluster's lease is outside read-your-writes
/// (its position means nothing to the session's replicas, and a replica
/// has none to read), so the session is told nothing (`None`).
pub fn ruled_decision(route: &RouteTo, decision: Decision) -> Option<Decision> {
    match route {
        RouteTo::Writer => Some(decision),
        RouteTo::Replica => Some(Decision::Read),
        RouteTo::Backend(_) | RouteTo::Cluster(_) => None,
    }
}

/// What the lease a split session holds was routed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Leased {
    #[default]
    Nothing,
    /// A read-only transaction (on a replica, or on the writer when none
    /// could serve it).
    Read,
    /// The writer; `capture`: read its position when the transaction ends.
    Write { capture: bool },
}

/// A split endpoint session's routing state.
#[derive(Debug, Default)]
pub struct SplitState {
    /// Read-your-writes: the position of the client's last write that a
    /// replica must have replayed to serve its reads.
    after: Option<Position>,
    leased: Leased,
}

impl SplitState {
    /// The router's intent for a transaction decided `decision`.
    pub fn intent(&self, decision: Decision) -> Intent<'_> {
        match decision {
            Decision::Read => Intent::Read {
                after: self.after.as_ref(),
            },
            Decision::Write { .. } | Decision::Follow => Intent::Write,
        }
    }

    /// A lease was taken for a transaction decided `decision`, with
    /// read-your-writes on or off.
    pub fn leased(&mut self, decision: Decision, read_your_writes: bool) {
        self.leased = match decision {
            Decision::Read => Leased::Read,
            Decision::Write { wrote } => Leased::Write {
                capture: wrote && read_your_writes,
            },
            Decision::Follow => Leased::Write { capture: false },
        };
    }

    /// A statement (or exchange) decided `decision` runs on the lease held
    /// now: in a block begun on the writer, the first one that may write
    /// makes its position due at the end.
    pub fn noted(&mut self, decision: Decision, read_your_writes: bool) {
        if read_your_writes
            && let (Leased::Write { capture: false }, Decision::Write { wrote: true }) = (self.leased, decision)
        {
            self.leased = Leased::Write { capture: true };
        }
    }

    /// Whether [`Self::noted`] could change anything now (saves routing
    /// each statement of a block once its position is due anyway).
    pub fn watching(&self, read_your_writes: bool) -> bool {
        read_your_writes && self.leased == (Leased::Write { capture: false })
    }

    /// What the lease held now is for.
    pub fn lease(&self) -> Leased {
        self.leased
    }

    /// A transaction that may have written ended: its position is read
    /// before the lease goes back.
    pub fn capture_due(&self) -> bool {
        matches!(self.leased, Leased::Write { capture: true })
    }

    /// The lease went back to its pool (`wrote`: the position read at its
    /// end, if one was due and the server gave one).
    pub fn released(&mut self, wrote: Option<Position>) {
        self.leased = Leased::Nothing;
        if let Some(p) = wrote.filter(|p| !p.is_empty()) {
            self.after = Some(match self.after.take() {
                Some(old) => old.merge(p),
                None => p,
            });
        }
    }

    /// The lease on `conn` is going back: the writer's position is read on
    /// it first when one is due (the same for every engine; an error means
    /// the connection failed and must not be reused).
    pub async fn lease_ends<E: crate::engine::Engine>(&mut self, conn: &mut E::Conn) -> Result<(), ProxyError> {
        let wrote = if self.capture_due() {
            let read = E::write_position(conn).await;
            if read.is_err() {
                self.released(None);
            }
            read?
        } else {
            None
        };
        self.released(wrote);
        Ok(())
    }

    /// The requirement a later read carries (for tests and the admin view).
    pub fn after(&self) -> Option<&Position> {
        self.after.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(r: WriteReason) -> Route {
        Route::Write(r)
    }

    #[test]
    fn reads_alone_go_to_a_replica() {
        assert_eq!(decide([Route::Read, Route::Read]), Decision::Read);
        assert_eq!(decide([]), Decision::Read);
    }

    #[test]
    fn one_write_sends_everything_to_the_writer() {
        assert_eq!(
            decide([Route::Read, w(WriteReason::Modifies), Route::Read]),
            Decision::Write { wrote: true }
        );
        assert_eq!(decide([w(WriteReason::SessionState)]), Decision::Write { wrote: false });
        assert_eq!(decide([w(WriteReason::SessionBound)]), Decision::Follow);
        assert_eq!(
            decide([w(WriteReason::SessionBound), w(WriteReason::SessionState)]),
            Decision::Write { wrote: false }
        );
        assert_eq!(
            decide([w(WriteReason::SessionState), w(WriteReason::Unknown)]),
            Decision::Write { wrote: true }
        );
    }

    #[test]
    fn read_only_blocks_stay_on_a_replica_with_their_commit() {
        assert_eq!(
            decide([
                Route::Begin { read_only: true },
                Route::Read,
                w(WriteReason::TransactionControl)
            ]),
            Decision::Read
        );
        assert_eq!(
            decide([Route::Begin { read_only: false }, Route::Read]),
            Decision::Write { wrote: false }
        );
        assert_eq!(
            decide([Route::Begin { read_only: false }, w(WriteReason::Modifies)]),
            Decision::Write { wrote: true }
        );
        // A COMMIT with no read-only block before it: the writer.
        assert_eq!(
            decide([w(WriteReason::TransactionControl)]),
            Decision::Write { wrote: false }
        );
    }

    #[test]
    fn positions_of_writes_accumulate_for_later_reads() {
        let mut s = SplitState::default();
        s.leased(Decision::Write { wrote: true }, true);
        assert!(s.capture_due());
        s.released(Some(Position::Lsn(10)));
        s.leased(Decision::Write { wrote: true }, true);
        s.released(Some(Position::Lsn(7)));
        assert_eq!(s.after(), Some(&Position::Lsn(10)));
        match s.intent(Decision::Read) {
            Intent::Read { after } => assert_eq!(after, Some(&Position::Lsn(10))),
            other => panic!("a read was sent elsewhere: {other:?}"),
        }
        s.leased(Decision::Write { wrote: true }, false);
        assert!(!s.capture_due(), "read-your-writes off reads no position");
        // A block that only reads owes no position; one that writes does.
        s.leased(Decision::Write { wrote: false }, true);
        s.noted(Decision::Read, true);
        assert!(!s.capture_due());
        s.noted(Decision::Write { wrote: true }, true);
        assert!(s.capture_due());
    }
}
