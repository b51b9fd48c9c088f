//! The queue of responses a backend owes, in the order the client's messages
//! (and the proxy's own injected ones) were sent. It decides, message by
//! message, what goes to the client and what the proxy swallows (answers to
//! its injected Parse/Close), where its own synthetic answers (a
//! ParseComplete for a statement the backend already has) slot in, and how
//! an error skips everything up to the next Sync — so one client's pipeline
//! can never be answered with another's messages. Sans-I/O.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use gatehouse_core::inspect::Tracked;
use gatehouse_core::meter::Stamp;

/// A response the backend (or the proxy) owes.
#[derive(Debug)]
pub enum Pending {
    /// A client Parse; `proxy` names the statement prepared on the backend,
    /// `client` the client's own name for it.
    Parse {
        proxy: Arc<str>,
        client: Option<Arc<str>>,
    },
    Bind,
    Describe,
    Close,
    /// An Execute; what the core follows of it, if anything
    /// ([`gatehouse_core::inspect`]), and its times when histograms are on
    /// ([`gatehouse_core::meter`]).
    Execute(Option<Box<Tracked>>, Option<Stamp>),
    /// A simple Query or FunctionCall: everything up to ReadyForQuery.
    Query(Option<Box<Tracked>>, Option<Stamp>),
    Sync,
    /// The proxy's own Parse of a statement the backend lacks: swallow the answer.
    InjectedParse(Arc<str>),
    /// The proxy's own Close of an evicted statement: swallow the answer.
    InjectedClose(Arc<str>),
    /// An answer the proxy makes itself, sent when its turn comes.
    Synthetic(Bytes),
    /// The client ended a COPY FROM STDIN (CopyDone/CopyFail): no answer of
    /// its own, but it marks where Syncs start to count again.
    CopyEnd,
}

/// What became of a statement the proxy believed prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The Parse failed (or was skipped after an error): not prepared.
    ParseFailed { proxy: Arc<str>, client: Option<Arc<str>> },
    /// The proxy's Close was skipped after an error: still prepared.
    CloseSkipped { proxy: Arc<str> },
}

/// What to do with one backend message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    Forward,
    Swallow,
}

/// A followed statement that has its answer: the rows its
/// CommandComplete tags reported, and whether it failed.
#[derive(Debug)]
pub struct Finished {
    pub tracked: Box<Tracked>,
    pub rows: u64,
    pub error: bool,
}

#[derive(Debug, Default)]
pub struct ResponseQueue {
    /// Rows and error of the followed statement at the front so far.
    rows: u64,
    errored: bool,
    finished: Vec<Finished>,
    /// Timed statements answered in full since the last call.
    answered: Vec<Stamp>,
    queue: VecDeque<Pending>,
    /// The backend hit an error and ignores everything until a Sync that
    /// has not been sent yet.
    skipping: bool,
    /// The backend is in COPY FROM STDIN and the client has not ended it:
    /// it ignores Sync until then (§55.2.6).
    copy_in: bool,
    events: Vec<Event>,
}

impl ResponseQueue {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether events wait to be taken.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Events since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Records a response owed for a message just sent (or made up). While
    /// the backend skips to Sync, messages before the Sync get no answer.
    pub fn push(&mut self, p: Pending, out: &mut BytesMut) {
        if self.copy_in {
            match p {
                Pending::Sync => return,
                Pending::CopyEnd => {
                    self.copy_in = false;
                    return;
                }
                _ => {}
            }
        }
        if self.skipping {
            match p {
                Pending::Sync => self.skipping = false,
                Pending::Parse { proxy, client } => {
                    self.events.push(Event::ParseFailed { proxy, client });
                    return;
                }
                Pending::InjectedParse(proxy) => {
                    self.events.push(Event::ParseFailed { proxy, client: None });
                    return;
                }
                Pending::InjectedClose(proxy) => {
                    self.events.push(Event::CloseSkipped { proxy });
                    return;
                }
                _ => return,
            }
        }
        if matches!(p, Pending::CopyEnd) && self.queue.is_empty() {
            return;
        }
        self.queue.push_back(p);
        self.drain_synthetic(out);
    }

    /// Sends the synthetic answers that are now first in line.
    fn drain_synthetic(&mut self, out: &mut BytesMut) {
        while let Some(Pending::Synthetic(_) | Pending::CopyEnd) = self.queue.front() {
            if let Some(Pending::Synthetic(b)) = self.queue.pop_front() {
                out.extend_from_slice(&b);
            }
        }
    }

    /// The backend entered COPY FROM STDIN (CopyInResponse): Syncs the
    /// client sent since, before ending the copy, get no answer.
    fn copy_in_started(&mut self) {
        let mut i = 1;
        while i < self.queue.len() {
            match self.queue[i] {
                Pending::CopyEnd => return,
                Pending::Sync => {
                    self.queue.remove(i);
                }
                _ => i += 1,
            }
        }
        self.copy_in = true;
    }

    /// Decides the fate of one backend message with `tag`; synthetic answers
    /// that become due are appended to `out` after it (when forwarded, the
    /// caller appends the message itself first, then calls [`Self::after`]).
    pub fn on_message(&mut self, tag: u8) -> Disposition {
        // Asynchronous messages belong to no request.
        if matches!(tag, b'N' | b'S' | b'A') {
            return Disposition::Forward;
        }
        if tag == b'G' {
            self.copy_in_started();
        }
        let Some(front) = self.queue.front() else {
            return Disposition::Forward;
        };
        if tag == b'E' && !matches!(front, Pending::Query(..)) {
            let swallow = matches!(front, Pending::InjectedClose(_));
            if let Some(Pending::Execute(tracked, stamp)) = self.queue.front()
                && (tracked.is_some() || stamp.is_some())
            {
                self.errored = true;
                self.finish_front();
            }
            self.fail_to_sync();
            return if swallow {
                Disposition::Swallow
            } else {
                Disposition::Forward
            };
        }
        let (done, disposition) = match front {
            Pending::Parse { .. } => (tag == b'1', Disposition::Forward),
            Pending::Bind => (tag == b'2', Disposition::Forward),
            Pending::Describe => (matches!(tag, b'T' | b'n'), Disposition::Forward),
            Pending::Close => (tag == b'3', Disposition::Forward),
            Pending::Execute(..) => (matches!(tag, b'C' | b'I' | b's'), Disposition::Forward),
            Pending::Query(tracked, _) => {
                self.errored |= tracked.is_some() && tag == b'E';
                (tag == b'Z', Disposition::Forward)
            }
            Pending::Sync => (tag == b'Z', Disposition::Forward),
            Pending::InjectedParse(_) => (tag == b'1', Disposition::Swallow),
            Pending::InjectedClose(_) => (tag == b'3', Disposition::Swallow),
            Pending::Synthetic(_) | Pending::CopyEnd => (false, Disposition::Forward),
        };
        if done {
            self.finish_front();
        }
        disposition
    }

    /// Whether the answer at the front is followed ([`gatehouse_core::inspect`]):
    /// the caller then reports the rows of each CommandComplete.
    pub fn front_followed(&self) -> bool {
        matches!(
            self.queue.front(),
            Some(Pending::Query(Some(_), _) | Pending::Execute(Some(_), _))
        )
    }

    /// Rows a CommandComplete of the followed answer at the front reported.
    pub fn add_rows(&mut self, rows: u64) {
        self.rows += rows;
    }

    /// Followed statements answered since the last call.
    pub fn take_finished(&mut self) -> Vec<Finished> {
        std::mem::take(&mut self.finished)
    }

    /// Whether followed statements wait to be taken.
    pub fn has_finished(&self) -> bool {
        !self.finished.is_empty()
    }

    /// Timed statements answered since the last call, taken.
    pub fn drain_answered(&mut self) -> std::vec::Drain<'_, Stamp> {
        self.answered.drain(..)
    }

    /// Whether timed statements were answered since the last call.
    pub fn has_answered(&self) -> bool {
        !self.answered.is_empty()
    }

    /// Pops the front entry, done; a followed one is finished, a timed one
    /// answered.
    fn finish_front(&mut self) {
        if let Some(Pending::Query(tracked, stamp) | Pending::Execute(tracked, stamp)) = self.queue.pop_front() {
            if let Some(tracked) = tracked {
                self.finished.push(Finished {
                    tracked,
                    rows: self.rows,
                    error: self.errored,
                });
            }
            if let Some(stamp) = stamp {
                self.answered.push(stamp);
            }
        }
        self.rows = 0;
        self.errored = false;
    }

    /// The backend connection was lost with answers still owed: each is
    /// answered as a server answers a failed request. The first request of
    /// each exchange gets `error`, each Query and Sync `ready`; the rest of
    /// an exchange gets nothing. Returns whether the last exchange is still
    /// open (its error sent, no Sync yet): the client's messages up to its
    /// Sync are then to be skipped.
    pub fn backend_lost(&mut self, error: &[u8], ready: &[u8], out: &mut BytesMut) -> bool {
        let mut errored = self.skipping;
        self.skipping = false;
        self.copy_in = false;
        while let Some(p) = self.queue.pop_front() {
            match p {
                Pending::Query(..) | Pending::Sync => {
                    if !errored {
                        out.extend_from_slice(error);
                    }
                    out.extend_from_slice(ready);
                    errored = false;
                }
                Pending::Synthetic(b) if !errored => out.extend_from_slice(&b),
                Pending::Parse { proxy, client } => {
                    self.events.push(Event::ParseFailed { proxy, client });
                    if !errored {
                        out.extend_from_slice(error);
                        errored = true;
                    }
                }
                Pending::InjectedParse(_) | Pending::InjectedClose(_) | Pending::CopyEnd | Pending::Synthetic(_) => {}
                Pending::Bind | Pending::Describe | Pending::Close | Pending::Execute(..) => {
                    if !errored {
                        out.extend_from_slice(error);
                        errored = true;
                    }
                }
            }
        }
        errored
    }

    /// Appends the synthetic answers due after the message just handled.
    pub fn after(&mut self, out: &mut BytesMut) {
        self.drain_synthetic(out);
    }

    /// An error: the failed request and everything after it up to the next
    /// Sync get no answer from the backend.
    fn fail_to_sync(&mut self) {
        while let Some(front) = self.queue.front() {
            if matches!(front, Pending::Sync) {
                return;
            }
            match self.queue.pop_front() {
                Some(Pending::Parse { proxy, client }) => self.events.push(Event::ParseFailed { proxy, client }),
                Some(Pending::InjectedParse(proxy)) => self.events.push(Event::ParseFailed { proxy, client: None }),
                Some(Pending::InjectedClose(proxy)) => self.events.push(Event::CloseSkipped { proxy }),
                _ => {}
            }
        }
        self.skipping = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn a_lost_backend_answers_every_owed_exchange_once() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        // A Query, a complete extended exchange, then one without its Sync.
        q.push(Pending::Query(None, None), &mut out);
        q.push(
            Pending::Parse {
                proxy: name("gh_1"),
                client: Some(name("s1")),
            },
            &mut out,
        );
        q.push(Pending::Bind, &mut out);
        q.push(Pending::Execute(None, None), &mut out);
        q.push(Pending::Sync, &mut out);
        q.push(Pending::Bind, &mut out);
        q.push(Pending::Execute(None, None), &mut out);
        let open = q.backend_lost(b"E", b"Z", &mut out);
        assert_eq!(&out[..], b"EZEZE");
        assert!(open, "the last exchange waits for its Sync");
        assert!(q.is_empty());
        let events = q.take_events();
        assert_eq!(
            events,
            vec![Event::ParseFailed {
                proxy: name("gh_1"),
                client: Some(name("s1"))
            }]
        );
        // Nothing owed: nothing sent.
        let mut out = BytesMut::new();
        assert!(!q.backend_lost(b"E", b"Z", &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn injected_parse_is_swallowed_and_synthetic_slots_in() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        q.push(Pending::InjectedParse(name("gh_1")), &mut out);
        q.push(Pending::Synthetic(Bytes::from_static(b"1\0\0\0\x04")), &mut out);
        q.push(Pending::Bind, &mut out);
        q.push(Pending::Execute(None, None), &mut out);
        q.push(Pending::Sync, &mut out);
        assert!(out.is_empty(), "synthetic waits for the injected parse");
        assert_eq!(q.on_message(b'1'), Disposition::Swallow);
        q.after(&mut out);
        assert_eq!(&out[..], b"1\0\0\0\x04");
        for tag in [b'2', b'D', b'D', b'C', b'Z'] {
            assert_eq!(q.on_message(tag), Disposition::Forward);
        }
        assert!(q.is_empty());
    }

    #[test]
    fn error_skips_to_sync_and_reports_unprepared_statements() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        q.push(
            Pending::Parse {
                proxy: name("gh_a"),
                client: Some(name("s1")),
            },
            &mut out,
        );
        q.push(Pending::Bind, &mut out);
        q.push(Pending::InjectedParse(name("gh_b")), &mut out);
        q.push(Pending::Synthetic(Bytes::from_static(b"x")), &mut out);
        q.push(Pending::Execute(None, None), &mut out);
        q.push(Pending::Sync, &mut out);
        assert_eq!(q.on_message(b'E'), Disposition::Forward);
        let events = q.take_events();
        assert_eq!(events.len(), 2);
        // A Sync is still queued: a Close sent now is answered after it.
        q.push(Pending::InjectedClose(name("gh_old")), &mut out);
        assert!(q.take_events().is_empty());
        assert_eq!(q.on_message(b'Z'), Disposition::Forward);
        q.after(&mut out);
        assert!(out.is_empty(), "the synthetic answer after an error is never sent");
        assert_eq!(q.on_message(b'3'), Disposition::Swallow);
        assert!(q.is_empty());
        // While skipping to a Sync not yet sent, a Close is skipped too: the
        // statement stays prepared.
        q.push(Pending::Execute(None, None), &mut out);
        assert_eq!(q.on_message(b'E'), Disposition::Forward);
        q.push(Pending::InjectedClose(name("gh_kept")), &mut out);
        assert_eq!(q.take_events(), vec![Event::CloseSkipped { proxy: name("gh_kept") }]);
    }

    #[test]
    fn error_before_sync_is_sent_skips_later_messages() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        q.push(Pending::Bind, &mut out);
        q.push(Pending::Execute(None, None), &mut out);
        assert_eq!(q.on_message(b'E'), Disposition::Forward);
        q.push(Pending::Bind, &mut out);
        q.push(
            Pending::Parse {
                proxy: name("gh_c"),
                client: None,
            },
            &mut out,
        );
        assert_eq!(q.take_events().len(), 1);
        q.push(Pending::Sync, &mut out);
        assert_eq!(q.on_message(b'Z'), Disposition::Forward);
        assert!(q.is_empty());
    }

    #[test]
    fn syncs_sent_during_copy_in_get_no_answer() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        for p in [Pending::Bind, Pending::Execute(None, None), Pending::Sync] {
            q.push(p, &mut out);
        }
        assert_eq!(q.on_message(b'2'), Disposition::Forward);
        assert_eq!(q.on_message(b'G'), Disposition::Forward);
        q.push(Pending::Sync, &mut out); // still copying: ignored by the backend
        q.push(Pending::CopyEnd, &mut out);
        q.push(Pending::Sync, &mut out);
        q.push(Pending::Synthetic(Bytes::from_static(b"3")), &mut out);
        q.push(Pending::Sync, &mut out);
        assert_eq!(q.on_message(b'C'), Disposition::Forward);
        assert_eq!(q.on_message(b'Z'), Disposition::Forward);
        q.after(&mut out);
        assert_eq!(&out[..], b"3", "CloseComplete comes after the copy's ReadyForQuery");
        assert_eq!(q.on_message(b'Z'), Disposition::Forward);
        assert!(q.is_empty());
    }

    #[test]
    fn timed_statements_are_answered_once_when_their_answer_is_complete_errors_included() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        let now = std::time::Instant::now();
        let stamp = Some(Stamp {
            received: now,
            sent: now,
        });
        q.push(Pending::Query(None, stamp), &mut out);
        q.push(Pending::Bind, &mut out);
        q.push(Pending::Execute(None, stamp), &mut out);
        q.push(Pending::Sync, &mut out);
        q.push(Pending::Bind, &mut out);
        q.push(Pending::Execute(None, stamp), &mut out);
        q.push(Pending::Sync, &mut out);
        for tag in [b'T', b'D', b'C'] {
            q.on_message(tag);
        }
        assert!(!q.has_answered(), "a simple query is answered at its ReadyForQuery");
        q.on_message(b'Z');
        assert_eq!(q.drain_answered().count(), 1);
        for tag in [b'2', b'D', b'C'] {
            q.on_message(tag);
        }
        assert_eq!(
            q.drain_answered().count(),
            1,
            "an Execute is answered at its CommandComplete"
        );
        q.on_message(b'Z');
        q.on_message(b'2');
        q.on_message(b'E');
        assert_eq!(q.drain_answered().count(), 1, "an error answers the Execute it ends");
        q.on_message(b'Z');
        assert!(q.is_empty() && !q.has_answered());
    }

    #[test]
    fn simple_query_errors_do_not_skip() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        q.push(Pending::Query(None, None), &mut out);
        q.push(Pending::Query(None, None), &mut out);
        for tag in [b'T', b'D', b'E', b'Z'] {
            assert_eq!(q.on_message(tag), Disposition::Forward);
        }
        assert!(!q.is_empty());
        assert_eq!(q.on_message(b'Z'), Disposition::Forward);
        assert!(q.is_empty());
    }

    #[test]
    fn describe_waits_for_row_description_and_notices_pass() {
        let mut q = ResponseQueue::default();
        let mut out = BytesMut::new();
        q.push(Pending::Describe, &mut out);
        q.push(Pending::Sync, &mut out);
        assert_eq!(q.on_message(b't'), Disposition::Forward);
        assert_eq!(q.on_message(b'N'), Disposition::Forward);
        assert_eq!(q.on_message(b'n'), Disposition::Forward);
        assert_eq!(q.on_message(b'Z'), Disposition::Forward);
        assert!(q.is_empty());
    }
}
