//! How a cancel reaches a backend connection, or a statement still
//! waiting for one (see the parent module's docs): the count of cancels in
//! flight on a connection, which keeps it from the next client until they
//! land, and the session's cancellable wait for a connection.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError};
use std::task::Poll;
use std::time::Duration;

use super::CancelSlot;

/// How long a backend connection waits for the cancels sent to it to be
/// delivered before it is closed instead: longer than either engine's own
/// limit on delivering one (5 s), which ends the cancel's [`InFlight`].
pub const CANCEL_SETTLE_LIMIT: Duration = Duration::from_secs(6);

/// The cancels sent to one backend connection and not yet delivered (see
/// the module docs). Shared by the connection and its cancel targets.
#[derive(Debug, Default)]
pub struct CancelFlight {
    count: AtomicU32,
    done: tokio::sync::Notify,
}

/// One cancel in flight, counted until dropped.
#[derive(Debug)]
pub struct InFlight(Arc<CancelFlight>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.done.notify_waiters();
    }
}

impl CancelFlight {
    fn begin(self: &Arc<Self>) -> InFlight {
        self.count.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// Whether no cancel is in flight.
    pub fn idle(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Waits until no cancel is in flight, up to `within`; whether none is.
    pub async fn settled(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.idle() {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.idle();
            }
        }
    }
}

/// How [`CancelSlot::unless_cancelled`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum LeaseWait<O> {
    Done(O),
    /// A cancel came first.
    Cancelled,
}

/// What an engine's cancel target shares with its connection.
pub trait CancelTarget: Clone + Send + Sync + 'static {
    /// The connection's cancels in flight.
    fn flight(&self) -> &Arc<CancelFlight>;
    /// The server's address and the connection's own id there
    /// (PostgreSQL's backend pid, MySQL's thread id), for the console.
    fn server(&self) -> (&str, u32);

    /// The TLS session of that connection (version and cipher suite), for
    /// the console; `None` in plain text.
    fn server_tls(&self) -> Option<&Arc<str>> {
        None
    }
}

/// A target looked up for a cancel, counted in flight on its connection
/// until this is dropped: hold it until the cancel was delivered.
#[derive(Debug)]
pub struct Claimed<T> {
    pub target: T,
    pub in_flight: InFlight,
}

impl<T: Clone> CancelSlot<T> {
    /// After [`Self::unless_cancelled`] gave the session its connection
    /// and the session made it ready (session state brought over): sets
    /// `target` unless a cancel came since the wait began, under the
    /// slot's lock, so a cancel reaches either the wait or the target, never
    /// neither. `false`: cancelled, the statement answers as such.
    pub fn publish(&self, target: Option<T>) -> bool {
        let mut slot = self.target.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.store(false, Ordering::Release);
        if self.cancel_asked.swap(false, Ordering::AcqRel) {
            *slot = None;
            return false;
        }
        *slot = target;
        true
    }

    /// The target, counted in flight under the slot's lock: a session that
    /// empties the slot afterwards sees the cancel on its connection. With
    /// no target while the session's statement waits for a connection, the
    /// cancel is marked to stop that wait ([`Self::unless_cancelled`])
    /// instead; the canceller wakes it ([`CancelRegistry::wake_cancelled`])
    /// once it has answered its own client, so that, as with a server, the
    /// canceller hears "done" before the cancelled statement its error
    /// (Connector/J tells a timeout from an interruption by that order).
    pub(crate) fn claim(&self) -> Option<Claimed<T>>
    where
        T: CancelTarget,
    {
        let target = self.target.lock().unwrap_or_else(PoisonError::into_inner);
        if target.is_none() && self.waiting.load(Ordering::Acquire) {
            self.cancel_asked.store(true, Ordering::Release);
        }
        target.as_ref().map(|t| Claimed {
            in_flight: t.flight().begin(),
            target: t.clone(),
        })
    }

    /// Runs `wait`, the session's wait for a backend connection for a
    /// statement, so that a cancel for the session arriving meanwhile (it
    /// has no backend query to reach yet) ends the wait: the statement
    /// must then answer as cancelled without running. After
    /// [`LeaseWait::Done`] the session stays cancellable this way until it
    /// [`Self::publish`]es the connection's target (or [`Self::set`]s the
    /// slot), which tells whether a cancel came meanwhile. The owning
    /// session only: its task's waker is kept where the cancel finds it,
    /// as in an idle wait.
    pub async fn unless_cancelled<F: std::future::Future>(&self, wait: F) -> LeaseWait<F::Output> {
        self.cancel_asked.store(false, Ordering::Release);
        let since = u64::try_from(self.born.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.wait_from_us.store(since, Ordering::Relaxed);
        self.waiting.store(true, Ordering::Release);
        let asked = std::future::poll_fn(|cx| {
            self.idle.register(cx.waker());
            if self.cancel_asked.load(Ordering::Acquire) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        });
        let out = tokio::select! {
            biased;
            () = asked => None,
            out = wait => Some(out),
        };
        match out {
            Some(out) => LeaseWait::Done(out),
            None => {
                self.set(None);
                self.cancel_asked.store(false, Ordering::Release);
                LeaseWait::Cancelled
            }
        }
    }
}
