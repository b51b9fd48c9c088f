//! A transaction-mode session on a split endpoint ([`gatehouse_core::split`]): what
//! the client's next exchange does, read from the messages it sent. A
//! simple query is one exchange; an extended-query exchange runs up to its
//! Sync, and is read whole before it is routed: every statement it parses
//! and every statement it binds (by name, or the unnamed one it parsed
//! before) must be a read for it to go to a replica. An exchange whose
//! Sync has not arrived yet, a function call and COPY go to the writer.
//!
//! A read lease stays the session's until its answers are in. Should the
//! client pipeline an exchange that is not a read behind it, that exchange
//! waits (the session stops reading the client) until the read's answers
//! are in and the lease went back, and is then routed on its own.

use gatehouse_proto_pg::extended;
use gatehouse_proto_pg::frame::{Step, next_frame};
use gatehouse_proto_pg::messages;
use gatehouse_sql::{Route, WriteReason};

use super::TxSession;
use gatehouse_core::split::{Decision, Fold, Leased, decide};

/// Most messages looked at ahead for one exchange's Sync; an exchange
/// longer than this goes to the writer.
const MAX_LOOKAHEAD_MESSAGES: usize = 256;

const UNKNOWN: Route = Route::Write(WriteReason::Unknown);

/// The routes of the statements in `sql` (a simple query may hold several).
fn routes_of(sql: &str, read_only_functions: &[&str], out: &mut Fold) {
    let one = sql.trim_end().trim_end_matches(';');
    if !one.contains(';') {
        out.add(gatehouse_sql::route_with(one, read_only_functions));
        return;
    }
    let statements = gatehouse_sql::split_statements(sql);
    if statements.is_empty() {
        out.add(UNKNOWN);
    }
    for s in statements {
        out.add(gatehouse_sql::route_with(s, read_only_functions));
    }
}

impl TxSession {
    /// What the exchange that starts at the head of the client buffer does.
    pub(super) fn exchange_decision(&self) -> Decision {
        let functions: Vec<&str> = self.endpoint.read_only_functions.iter().map(String::as_str).collect();
        let mut routes = Fold::default();
        let mut buf = &self.cbuf[..];
        // The unnamed statement as the exchange leaves it (a Parse of "" replaces it).
        let mut unnamed: Option<&str> = self.registry.unnamed().map(|(_, st)| &*st.query);
        for _ in 0..MAX_LOOKAHEAD_MESSAGES {
            let Ok(Step::Whole { tag, len }) = next_frame(buf, usize::MAX, usize::MAX) else {
                // Its Sync not here yet (or a message streamed): the writer.
                return decide([UNKNOWN]);
            };
            let (msg, rest) = buf.split_at(len);
            buf = rest;
            match tag {
                b'Q' => {
                    let sql = messages::body(msg).split_last().map(|(_, s)| s).unwrap_or_default();
                    routes_of(&String::from_utf8_lossy(sql), &functions, &mut routes);
                    return routes.decision();
                }
                b'P' => {
                    let Ok(p) = extended::parse_parse(msg) else {
                        return decide([UNKNOWN]);
                    };
                    if p.name.is_empty() {
                        unnamed = Some(p.query);
                    }
                    routes_of(p.query, &functions, &mut routes);
                }
                b'B' => {
                    let Ok(b) = extended::parse_bind(msg) else {
                        return decide([UNKNOWN]);
                    };
                    let text = if b.statement.is_empty() {
                        unnamed
                    } else {
                        self.registry.get(b.statement).map(|st| &*st.query)
                    };
                    match text {
                        Some(t) => routes_of(t, &functions, &mut routes),
                        // Not prepared (the server will say so): anywhere is as good.
                        None => routes.add(UNKNOWN),
                    }
                }
                b'D' | b'E' | b'C' | b'H' => {}
                b'S' => return routes.decision(),
                // Function calls, COPY data and anything else: the writer.
                _ => return decide([UNKNOWN]),
            }
        }
        decide([UNKNOWN])
    }

    /// A statement sent on the lease held now (a simple query's text, or
    /// the text of the statement a Bind executes): in a block on the
    /// writer, one that may write makes the block's position due.
    pub(super) fn note_statement(&mut self, sql: &str) {
        let ryw = self.endpoint.read_your_writes;
        if !self.split.as_deref().is_some_and(|s| s.watching(ryw)) {
            return;
        }
        let functions: Vec<&str> = self.endpoint.read_only_functions.iter().map(String::as_str).collect();
        let mut fold = Fold::default();
        routes_of(sql, &functions, &mut fold);
        if let Some(split) = self.split.as_deref_mut() {
            split.noted(fold.decision(), ryw);
        }
    }

    /// Whether the exchange at the head of the client buffer must wait for
    /// the read lease the session holds to go back (see the module docs).
    pub(super) fn must_wait_for_read_lease(&self) -> bool {
        let Some(split) = self.split.as_deref() else {
            return false;
        };
        self.lease.is_some()
            && split.lease() == Leased::Read
            && self.status == b'I'
            && !self.unsynced
            && !self.client_skip
            && !self.queue.is_empty()
            && self.exchange_decision() != Decision::Read
    }
}
