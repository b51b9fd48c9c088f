//! Query rules and digest statistics on the MySQL command path
//! ([`gatehouse_core::inspect`]): a COM_QUERY's text, a COM_STMT_PREPARE's and each
//! COM_STMT_EXECUTE's statement are put to the session's rules (a block
//! answers 1142 without running; a rewrite replaces the text before it is
//! classified, prepared or sent; a route picks the lease; a statement
//! timeout cancels it with `KILL QUERY`), and each statement run is
//! followed to its reply for the digest store and counted in the session's
//! meter ([`gatehouse_core::meter`]).

use gatehouse_proto_mysql::response::Done;
use gatehouse_sql::mysql as my_sql;

use super::txn::{Fatal, Session};
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::inspect::{Inspector, Tracked};
use gatehouse_core::meter::Stamp;
use gatehouse_settings::rules::Verdict;

impl Session {
    /// What the session's rules decide for `sql` (in its dialect).
    pub(super) fn rules(&mut self, sql: &str) -> Option<Verdict> {
        let settings = self.view.current(&self.core).settings();
        if !self.inspect.has_rules(settings) {
            return None;
        }
        let settings = settings.clone();
        let dialect = self.dialect();
        let reader = gatehouse_settings::rules::Reader {
            digest: &|text| my_sql::digest(text, dialect),
            kind: &my_sql::statement_kind_at,
        };
        self.inspect.rules(&settings, sql, &reader)
    }

    /// [`Session::forward`] of a statement (`sql`) the core follows: its
    /// digest statistics when on, and a rule's statement timeout. The
    /// rule's route applies to the lease this borrows, if it borrows one.
    pub(super) async fn forward_followed(
        &mut self,
        stream: &mut ClientStream,
        payload: &[u8],
        sql: &str,
        timeout: Option<std::time::Duration>,
    ) -> Result<Option<Done>, Fatal> {
        let followed = self.view.digests() || timeout.is_some();
        if !followed {
            let done = self.forward(stream, payload).await;
            self.ruled = None;
            return done;
        }
        let dialect = self.dialect();
        let mut tracked = Tracked::new(None, self.just_pinned.take());
        if let Some(after) = timeout {
            tracked.arm_timeout(&self.core, &self.cancel.slot, after);
        }
        let lease_wait_before = self.lease.is_none();
        let started = Inspector::start(&self.core, sql, std::time::Duration::ZERO, |t| {
            my_sql::digest(t, dialect)
        });
        let done = self.forward(stream, payload).await;
        self.ruled = None;
        if let (Some(mut timed), Ok(reply)) = (started, &done) {
            if lease_wait_before {
                // The backend time is the reply's; the wait came first.
                timed.lease_wait = std::mem::take(&mut self.lease_wait);
                timed.sent += timed.lease_wait;
            }
            let (rows, error) = match reply {
                Some(d) => (
                    d.last_rows.or(d.ok.map(|ok| ok.affected_rows)).unwrap_or(0),
                    d.error.is_some(),
                ),
                None => (0, true),
            };
            let store = self.core.digests.load();
            self.inspect.record(store.as_deref(), &timed, rows, error, tracked.pin);
        }
        drop(tracked);
        done
    }

    /// A client statement's reply was relayed whole: the transaction it
    /// ends (out of one now) is counted, and its times when it was timed
    /// (`sent`: when it went to the backend; histograms on).
    pub(super) fn statement_answered(&mut self, sent: Option<std::time::Instant>) {
        let in_transaction = self.in_transaction;
        let received = self.received;
        let meter = self.inspect.meter_mut();
        meter.boundary(in_transaction);
        if let (Some(sent), Some(received)) = (sent, received) {
            // Relayed as it came: the reply's end is its last byte written.
            let now = std::time::Instant::now();
            meter.answered(Stamp { received, sent }, now, now);
        }
    }
}
