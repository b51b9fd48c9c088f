//! The client's side of a transaction-mode session: each frontend message
//! is checked, renamed where it names a prepared statement, queued for its
//! answers and sent on; statement texts are classified for what they do to
//! session state (tracked parameters read back, pinning, forgotten
//! statements).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use gatehouse_proto_pg::frame::{self, Step, next_frame};
use gatehouse_proto_pg::{extended, messages};
use gatehouse_sql::{DiscardKind, Effect, PinReason, Scope};

use super::TxSession;
use super::inspect::{Ruled, query_text};
use crate::pending::Pending;
use crate::relay::End;
use crate::statements::{Statement, proxy_name};
use crate::tracked;
use gatehouse_core::error::{Condition, ProxyError};

impl TxSession {
    /// What a statement's text does to session state.
    /// Returns whether running `sql` may change tracked parameters (the
    /// caller reads them back after the transaction in which it runs).
    pub(super) fn note_effects(&mut self, sql: &str) -> bool {
        // One statement, perhaps with a final `;` (the usual case): no
        // split and no list.
        let one = sql.trim_end().trim_end_matches(';');
        if !one.contains(';') {
            return self.note_effect(gatehouse_sql::classify(one));
        }
        let mut touches = false;
        for effect in gatehouse_sql::classify_all(sql) {
            touches |= self.note_effect(effect);
        }
        touches
    }

    /// [`Self::note_effects`] for one statement's effect.
    fn note_effect(&mut self, effect: Effect) -> bool {
        match effect {
            // A rolled-back transaction's resets are undone with it.
            Effect::Transaction(gatehouse_sql::TxCommand::Rollback) => {
                self.resets = 0;
                false
            }
            Effect::None | Effect::Transaction(_) | Effect::Execute { .. } => false,
            Effect::Set {
                scope: Scope::Local, ..
            } => false,
            Effect::Set { name, .. } if tracked::is_tracked(&name) => {
                if let Some(i) = tracked::index(&name) {
                    self.resets &= !(1 << i);
                }
                true
            }
            Effect::Set { name, .. } => {
                if !self
                    .endpoint
                    .pinning_filter
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case(&name))
                {
                    self.pin("set_untracked", format!("SET of untracked parameter \"{name}\""));
                }
                false
            }
            Effect::Reset { name } if name == "role" || name == "session_authorization" => false,
            Effect::Reset { name } => {
                if let Some(i) = tracked::index(&name) {
                    self.resets |= 1 << i;
                }
                true
            }
            Effect::ResetAll => {
                self.resets = tracked::ALL;
                true
            }
            Effect::Discard(DiscardKind::All) => {
                self.resets = tracked::ALL;
                self.forget_statements();
                true
            }
            Effect::Discard(_) | Effect::Deallocate { name: Some(_) } => false,
            Effect::Deallocate { name: None } => {
                self.forget_statements();
                false
            }
            Effect::Defaults => {
                self.defaults_changed = true;
                false
            }
            Effect::Prepare { name } => {
                self.pin("sql_prepare", format!("SQL-level PREPARE of \"{name}\""));
                false
            }
            Effect::Pin(reason) => {
                let (code, detail) = pin_reason(&reason);
                self.pin(code, detail.to_owned());
                false
            }
        }
    }

    /// DISCARD ALL / DEALLOCATE ALL: the client's statements are gone, and so
    /// is everything prepared on this backend connection.
    fn forget_statements(&mut self) {
        self.registry.clear();
        if let Some(lease) = self.lease.as_mut() {
            let conn = lease.conn();
            conn.prepared.clear();
            conn.unnamed_owner = None;
        }
    }

    pub(super) async fn client_messages(&mut self) -> Result<(), End> {
        let max = self.view.current(&self.core).settings().proxy.max_message_bytes;
        // Most of what arrived goes on to the server: one allocation for it.
        self.to_backend.reserve(self.cbuf.len());
        loop {
            let (tag, len) = match next_frame(&self.cbuf, max, max) {
                Ok(Step::Whole { tag, len }) => (tag, len),
                Ok(Step::NeedMore | Step::Stream { .. }) => return Ok(()),
                Err(e) => {
                    return Err(End::ClientError(ProxyError::new(
                        Condition::ProtocolViolation,
                        e.to_string(),
                    )));
                }
            };
            if self.must_wait_for_read_lease() {
                self.held = true;
                return Ok(());
            }
            // A split endpoint routes by what the exchange does, read
            // before its first message leaves the buffer.
            let decision = match self.split {
                Some(_) if self.lease.is_none() => Some(self.exchange_decision()),
                _ => None,
            };
            let msg = self.cbuf.split_to(len).freeze();
            tracing::trace!(tag = %char::from(tag), len, "client message");
            if tag == b'X' {
                return Err(End::Terminated);
            }
            if !frame::is_frontend_tag(tag) {
                return Err(End::ClientError(ProxyError::new(
                    Condition::ProtocolViolation,
                    format!("invalid frontend message type {}", char::from(tag).escape_default()),
                )));
            }
            if self.client_skip && tag != b'S' {
                continue;
            }
            if self.client_skip && self.lease.is_none() {
                // The Sync ending a skip, with nothing on a server: the
                // proxy's own error was the exchange's only answer.
                self.client_skip = false;
                let mut ready = BytesMut::new();
                messages::put_ready(&mut ready, self.status);
                self.queue.push(Pending::Synthetic(ready.freeze()), &mut self.to_client);
                continue;
            }
            if self.lost_block && self.lease.is_none() {
                self.answer_lost_block(tag, &msg)?;
                continue;
            }
            // Query rules, before a connection is needed (a block needs none).
            let mut ruled = None;
            if matches!(tag, b'Q' | b'P') {
                match self.apply_rules(tag, &msg) {
                    Ruled::Blocked => continue,
                    Ruled::Run(route) => ruled = route,
                }
            } else if tag == b'B' && self.lease.is_none() {
                ruled = self.bound_route(&msg);
            }
            if let Some(e) = self.ensure_lease(decision, ruled).await? {
                self.answer_refused(tag, &e);
                continue;
            }
            self.client_message(tag, msg)?;
            self.apply_queue_events();
        }
    }

    /// The message got no backend connection: a cancel request came while
    /// it waited (57014, what a server gives a cancelled statement), or
    /// none was to be had (53300 after the failover hold, or the pool's
    /// borrow timeout). It does not run; the client gets the error and,
    /// as after any error in an extended-query exchange, the rest up to
    /// Sync is skipped. The session goes on.
    fn answer_refused(&mut self, tag: u8, e: &ProxyError) {
        let mut out = BytesMut::new();
        let error = |out: &mut BytesMut| {
            messages::put_error(out, "ERROR", crate::errors::sqlstate_of(e.condition), &e.message);
        };
        match tag {
            b'Q' | b'F' => {
                error(&mut out);
                messages::put_ready(&mut out, self.status);
            }
            // A Sync alone: nothing of the client's is pending on a server.
            b'S' => {
                self.client_skip = false;
                messages::put_ready(&mut out, self.status);
            }
            // Flush, CopyData and the like: nothing to answer.
            b'P' | b'B' | b'D' | b'C' | b'E' => {
                error(&mut out);
                self.client_skip = true;
            }
            _ => return,
        }
        self.queue.push(Pending::Synthetic(out.freeze()), &mut self.to_client);
    }

    fn client_message(&mut self, tag: u8, msg: Bytes) -> Result<(), End> {
        match tag {
            b'P' | b'B' | b'D' | b'C' | b'E' => self.unsynced = true,
            b'S' => self.unsynced = false,
            _ => {}
        }
        let malformed =
            |e: messages::DecodeError| End::ClientError(ProxyError::new(Condition::ProtocolViolation, e.to_string()));
        match tag {
            b'Q' => {
                let msg = self.rewritten(tag, msg);
                let sql = lossy_text(query_text(&msg));
                if self.note_effects(&sql) {
                    self.readback = true;
                }
                if self.split.is_some() {
                    self.note_statement(&sql);
                }
                let tracked = self.follow(&sql, self.rule_timeout());
                self.to_backend.extend_from_slice(&msg);
                let stamp = self.metered_statement();
                self.queue.push(Pending::Query(tracked, stamp), &mut self.to_client);
            }
            b'P' => {
                let msg = self.rewritten(tag, msg);
                let p = extended::parse_parse(&msg).map_err(malformed)?;
                // Effects on tracked parameters happen when the statement is
                // executed (Bind), possibly in a later transaction.
                let touches_tracked = self.note_effects(p.query);
                let stmt = Statement {
                    proxy: if p.name.is_empty() {
                        Arc::from("")
                    } else {
                        proxy_name(p.query, p.param_types)
                    },
                    query: Arc::from(p.query),
                    param_types: Bytes::copy_from_slice(p.param_types),
                    touches_tracked,
                    rule_timeout: self.rule_timeout(),
                    rule_route: self.rule_route(),
                };
                self.client_parse(p.name.to_owned(), Arc::new(stmt), &msg);
            }
            b'B' => {
                let b = extended::parse_bind(&msg).map_err(malformed)?;
                let bound = if b.statement.is_empty() {
                    self.registry.unnamed().map(|(_, st)| st)
                } else {
                    self.registry.get(b.statement)
                };
                self.readback |= bound.is_some_and(|st| st.touches_tracked);
                self.bound = bound.cloned();
                if self.split.is_some() {
                    let text = if b.statement.is_empty() {
                        self.registry.unnamed().map(|(_, st)| st.query.clone())
                    } else {
                        self.registry.get(b.statement).map(|st| st.query.clone())
                    };
                    match text {
                        Some(t) => self.note_statement(&t),
                        None => self.note_statement(""),
                    }
                }
                match self.resolve(b.statement) {
                    Some(proxy) => extended::put_bind(&mut self.to_backend, b.portal, &proxy, b.rest),
                    None => self.to_backend.extend_from_slice(&msg),
                }
                self.queue.push(Pending::Bind, &mut self.to_client);
            }
            b'D' => {
                let (kind, name) = extended::parse_target(&msg).map_err(malformed)?;
                match (kind, self.resolve_if_statement(kind, name)) {
                    (b'S', Some(proxy)) => extended::put_target(&mut self.to_backend, b'D', b'S', &proxy),
                    _ => self.to_backend.extend_from_slice(&msg),
                }
                self.queue.push(Pending::Describe, &mut self.to_client);
            }
            b'C' => {
                let (kind, name) = extended::parse_target(&msg).map_err(malformed)?;
                if kind == b'S' && !name.is_empty() {
                    // Backend statements are shared and cached: only the client's view changes.
                    self.registry.remove(name);
                    let mut done = BytesMut::new();
                    messages::put_message(&mut done, b'3', |_| {});
                    self.queue.push(Pending::Synthetic(done.freeze()), &mut self.to_client);
                } else {
                    if kind == b'S' {
                        self.registry.clear_unnamed();
                        if let Some(l) = self.lease.as_mut() {
                            l.conn().unnamed_owner = None;
                        }
                    }
                    self.to_backend.extend_from_slice(&msg);
                    self.queue.push(Pending::Close, &mut self.to_client);
                }
            }
            b'E' => {
                // What it runs is looked at only when something follows it.
                let timeout = self.bound.as_ref().and_then(|st| st.rule_timeout);
                let text = self
                    .followed(timeout)
                    .then(|| self.bound.as_ref().map(|st| st.query.clone()))
                    .flatten();
                let tracked = text.and_then(|text| self.follow(&text, timeout));
                self.to_backend.extend_from_slice(&msg);
                let stamp = self.metered_statement();
                self.queue.push(Pending::Execute(tracked, stamp), &mut self.to_client);
            }
            b'S' => {
                self.client_skip = false;
                self.to_backend.extend_from_slice(&msg);
                self.queue.push(Pending::Sync, &mut self.to_client);
            }
            b'F' => {
                self.to_backend.extend_from_slice(&msg);
                let stamp = self.metered_statement();
                self.queue.push(Pending::Query(None, stamp), &mut self.to_client);
            }
            b'c' | b'f' => {
                self.to_backend.extend_from_slice(&msg);
                self.queue.push(Pending::CopyEnd, &mut self.to_client);
            }
            // Flush and CopyData get no per-message answer.
            _ => self.to_backend.extend_from_slice(&msg),
        }
        Ok(())
    }
}

/// A statement's text: borrowed when it is UTF-8, as it nearly always is
/// (a word-at-a-time check), else with replacement characters.
fn lossy_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

fn pin_reason(reason: &PinReason) -> (&'static str, &'static str) {
    match reason {
        PinReason::TempTable => ("temp_table", "temporary table"),
        PinReason::AdvisoryLock => ("advisory_lock", "session-level advisory lock"),
        PinReason::Listen => ("listen", "LISTEN"),
        PinReason::CursorWithHold => ("cursor_with_hold", "cursor WITH HOLD"),
        PinReason::SetRole => ("set_role", "SET ROLE"),
        PinReason::SetSessionAuthorization => ("set_session_authorization", "SET SESSION AUTHORIZATION"),
        PinReason::Load => ("load", "LOAD"),
        PinReason::SetInBlock => ("set_in_do_block", "SET or RESET inside a DO block"),
        PinReason::Unrecognized => ("unrecognized", "statement the classifier does not understand"),
    }
}
