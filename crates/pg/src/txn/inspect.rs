//! Query rules and digest statistics on the PostgreSQL transaction path
//! ([`gatehouse_core::inspect`]): a simple Query's text and a Parse's statement are
//! put to the rules before they need a connection (a block is answered by
//! the proxy, 42501; a route picks the lease); a rewrite replaces the text
//! before the statement is named and sent; each Query and Execute is
//! followed to its answer for the digest store and a rule's statement
//! timeout.

use bytes::{Bytes, BytesMut};
use gatehouse_proto_pg::{extended, messages};

use super::TxSession;
use crate::pending::{Finished, Pending};
use gatehouse_core::inspect::{Inspector, Tracked};
use gatehouse_core::topology::RouteTo;

/// SQLSTATE insufficient_privilege: what a blocked statement answers.
const BLOCKED: &str = "42501";

/// What the rules made of a client message.
pub(super) enum Ruled {
    /// Send it (perhaps rewritten, perhaps to a lease a rule routes).
    Run(Option<RouteTo>),
    /// Answered by the proxy: not sent.
    Blocked,
}

impl TxSession {
    /// Puts a Query's or a Parse's text to the session's rules; the verdict
    /// is kept for [`Self::client_message`]. A blocked statement is
    /// answered here.
    pub(super) fn apply_rules(&mut self, tag: u8, msg: &Bytes) -> Ruled {
        self.verdict = None;
        let settings = self.view.current(&self.core).settings();
        if !self.inspect.has_rules(settings) {
            return Ruled::Run(None);
        }
        let settings = settings.clone();
        let text = match tag {
            b'Q' => std::str::from_utf8(query_text(msg)).ok(),
            b'P' => extended::parse_parse(msg).ok().map(|p| p.query),
            _ => None,
        };
        let Some(text) = text else {
            return Ruled::Run(None);
        };
        let reader = gatehouse_settings::rules::Reader {
            digest: &gatehouse_sql::digest,
            kind: &gatehouse_sql::statement_kind_at,
        };
        let Some(verdict) = self.inspect.rules(&settings, text, &reader) else {
            return Ruled::Run(None);
        };
        if let Some(message) = &verdict.block {
            let mut out = BytesMut::new();
            messages::put_error(&mut out, "ERROR", BLOCKED, message);
            if tag == b'Q' {
                messages::put_ready(&mut out, self.status);
            } else {
                // As after any error in an extended-query exchange.
                self.client_skip = true;
            }
            self.queue.push(Pending::Synthetic(out.freeze()), &mut self.to_client);
            return Ruled::Blocked;
        }
        let route = verdict.route.clone();
        self.verdict = Some(verdict);
        Ruled::Run(route)
    }

    /// The message as the rules rewrote it (the same one otherwise).
    pub(super) fn rewritten(&mut self, tag: u8, msg: Bytes) -> Bytes {
        let Some(text) = self.verdict.as_mut().and_then(|v| v.rewritten.take()) else {
            return msg;
        };
        let mut out = BytesMut::new();
        match tag {
            b'Q' => messages::put_message(&mut out, b'Q', |b| {
                b.extend_from_slice(text.as_bytes());
                b.extend_from_slice(&[0]);
            }),
            b'P' => match extended::parse_parse(&msg) {
                Ok(p) => extended::put_parse(&mut out, p.name, &text, p.param_types),
                Err(_) => return msg,
            },
            _ => return msg,
        }
        out.freeze()
    }

    /// What the core follows of a statement about to be sent (`text`):
    /// its digest statistics when they are on, the rule's statement
    /// timeout, the pin it caused. `None` when nothing.
    pub(super) fn follow(&mut self, text: &str, timeout: Option<std::time::Duration>) -> Option<Box<Tracked>> {
        let lease_wait = std::mem::take(&mut self.lease_wait);
        let timed = match self.view.digests() {
            true => Inspector::start(&self.core, text, lease_wait, gatehouse_sql::digest),
            false => None,
        };
        let pin = self.just_pinned.take();
        if timed.is_none() && timeout.is_none() && pin.is_none() {
            return None;
        }
        let mut tracked = Box::new(Tracked::new(timed, pin));
        if let Some(after) = timeout {
            tracked.arm_timeout(&self.core, &self.cancel.slot, after);
        }
        Some(tracked)
    }

    /// Where the rules route the statement being parsed, if anywhere.
    pub(super) fn rule_route(&self) -> Option<RouteTo> {
        self.verdict.as_ref().and_then(|v| v.route.clone())
    }

    /// Where the rules route an exchange that starts with this Bind: as
    /// they routed the Parse of the statement it binds.
    pub(super) fn bound_route(&self, msg: &[u8]) -> Option<RouteTo> {
        let b = extended::parse_bind(msg).ok()?;
        let st = if b.statement.is_empty() {
            self.registry.unnamed().map(|(_, st)| st)
        } else {
            self.registry.get(b.statement)
        };
        st?.rule_route.clone()
    }

    /// The rule's statement timeout of the message being sent, if any.
    pub(super) fn rule_timeout(&self) -> Option<std::time::Duration> {
        self.verdict.as_ref().and_then(|v| v.statement_timeout)
    }

    /// Records the followed statements that have their answers.
    pub(super) fn record_finished(&mut self) {
        let finished = self.queue.take_finished();
        let store = self.core.digests.load();
        for Finished { tracked, rows, error } in finished {
            if let Some(timed) = &tracked.timed {
                self.inspect.record(store.as_deref(), timed, rows, error, tracked.pin);
            }
        }
    }

    /// Whether the core follows the statement about to be sent: digest
    /// statistics on, a rule's timeout, or a pin it caused.
    pub(super) fn followed(&self, timeout: Option<std::time::Duration>) -> bool {
        timeout.is_some() || self.just_pinned.is_some() || self.view.digests()
    }
}

/// A Query message's text (without its terminating NUL).
pub(super) fn query_text(msg: &[u8]) -> &[u8] {
    messages::body(msg).split_last().map(|(_, s)| s).unwrap_or_default()
}

/// The rows a CommandComplete tag reports (`INSERT 0 5`, `SELECT 3`,
/// `UPDATE 2`; PostgreSQL docs §55.7): its last number, 0 when it has none.
pub(super) fn rows_of_tag(tag: &[u8]) -> u64 {
    let tag = tag.strip_suffix(&[0]).unwrap_or(tag);
    tag.rsplit(|&b| b == b' ')
        .next()
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_from_the_tags_last_number() {
        assert_eq!(rows_of_tag(b"INSERT 0 5\0"), 5);
        assert_eq!(rows_of_tag(b"SELECT 3\0"), 3);
        assert_eq!(rows_of_tag(b"UPDATE 12"), 12);
        assert_eq!(rows_of_tag(b"BEGIN\0"), 0);
        assert_eq!(rows_of_tag(b""), 0);
    }
}
