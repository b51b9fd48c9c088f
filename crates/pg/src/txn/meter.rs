//! The session's meter on the PostgreSQL transaction path
//! ([`gatehouse_core::meter`]): each Query, Execute and FunctionCall sent to a
//! backend is counted, and a ReadyForQuery out of a transaction after one
//! ends a transaction (`server.rs`). With histograms on, the messages of
//! each client read get a [`Stamp`] (read now; sent now, or when the lease
//! they waited for came), which travels with their entries in the
//! response queue; when their answers are complete the backend read that
//! completed them and the flush of it to the client give the other ends.

use std::time::{Duration, Instant};

use super::TxSession;
use gatehouse_core::meter::Stamp;

impl TxSession {
    /// Client messages were read: those that complete in it are stamped
    /// as received now (histograms on).
    pub(super) fn stamp_read(&mut self) {
        self.stamp = self.inspect.meter().clock().map(|now| Stamp {
            received: now,
            sent: now,
        });
    }

    /// The exchange held for a split endpoint's read lease goes on: its
    /// statements are sent from now.
    pub(super) fn stamp_resumed(&mut self) {
        if let Some(stamp) = self.stamp.as_mut()
            && let Some(now) = self.inspect.meter().clock()
        {
            stamp.sent = now;
        }
    }

    /// A lease was had, after a wait that began at `began` (`None`: lent at
    /// once, no wait): its wait is recorded, and the statements of this
    /// read are sent from now.
    pub(super) fn lease_metered(&mut self, began: Option<Instant>) {
        let Some(began) = began else {
            self.lease_wait = Duration::ZERO;
            self.inspect.meter().lease_waited(Duration::ZERO);
            return;
        };
        self.lease_wait = began.elapsed();
        self.inspect.meter().lease_waited(self.lease_wait);
        if let Some(stamp) = self.stamp.as_mut() {
            stamp.sent = began + self.lease_wait;
        }
    }

    /// A client statement goes to the backend: counted; its stamp.
    pub(super) fn metered_statement(&mut self) -> Option<Stamp> {
        self.inspect.meter_mut().statement();
        self.stamp
    }

    /// Now, if timed statements were answered in full by the backend
    /// messages just handled.
    pub(super) fn answered_at(&self) -> Option<Instant> {
        self.queue.has_answered().then(Instant::now)
    }

    /// Records the statements answered at `answered`, now that their
    /// answers are written to the client.
    pub(super) fn record_answered(&mut self, answered: Option<Instant>) {
        let Some(answered) = answered else { return };
        let written = Instant::now();
        let meter = self.inspect.meter();
        for stamp in self.queue.drain_answered() {
            meter.answered(stamp, answered, written);
        }
    }
}
