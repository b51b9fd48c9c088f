//! How a session of either engine waits for its client without a waiter
//! of its own: a hand-written poll that leaves the task's waker with the
//! socket's readiness and in the session's cancel slot, where `KILL`
//! ([`crate::cancel::CancelSlot::terminate`]) and shutdown
//! ([`crate::cancel::CancelRegistry::wake_idle`]) find it. The future is a
//! few pointers, so an idle client's task stays small, and nothing is
//! linked or unlinked per wait.

use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;

use super::stream::ClientStream;
use crate::cancel::CancelSlot;

/// What ended a wait for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// The client sent something (or closed): read it.
    Readable,
    /// Another session asked this one to end.
    Terminated,
    Shutdown,
    IdleTimeout,
    /// Idle long enough: the session should park ([`crate::park`]); with
    /// what is left of its idle timeout, if it has one.
    Park(Option<Duration>),
}

/// Waits until the client's socket is readable, the session is terminated,
/// shutdown begins or the session's endpoint is removed (when `watch_shutdown`), `timeout` passes, or (when
/// `parkable`) the parking sweep asks the session to park.
pub async fn next_message<T>(
    stream: &ClientStream,
    slot: &CancelSlot<T>,
    shutdown: &watch::Receiver<bool>,
    watch_shutdown: bool,
    timeout: Option<Duration>,
    parkable: bool,
) -> Woke {
    if parkable {
        slot.enter_idle();
    }
    let wait = std::future::poll_fn(|cx| {
        // Register first, then look: a signal sent in between wakes us.
        if slot.poll_idle(cx).is_ready() {
            return Poll::Ready(Woke::Terminated);
        }
        if watch_shutdown && (*shutdown.borrow() || slot.is_closing()) {
            return Poll::Ready(Woke::Shutdown);
        }
        if parkable && slot.park_requested() {
            return Poll::Ready(Woke::Park(None));
        }
        stream.poll_readable(cx).map(|_| Woke::Readable)
    });
    let woke = match timeout {
        // Boxed: the timer is only paid for where a timeout is set.
        Some(t) => {
            Box::pin(async move {
                let started = tokio::time::Instant::now();
                match tokio::time::timeout(t, wait).await {
                    Ok(Woke::Park(_)) => Woke::Park(Some(t.saturating_sub(started.elapsed()))),
                    Ok(woke) => woke,
                    Err(_) => Woke::IdleTimeout,
                }
            })
            .await
        }
        None => wait.await,
    };
    if parkable {
        slot.leave_idle();
    }
    woke
}

/// Completes once shutdown has begun (or the session's endpoint was
/// removed), for a session busy with something else in the same `select!`
/// (the waker stays in `slot`).
pub async fn shutdown_begun<T>(slot: &CancelSlot<T>, shutdown: &watch::Receiver<bool>) {
    std::future::poll_fn(|cx| {
        let _ = slot.poll_idle(cx);
        if *shutdown.borrow() || slot.is_closing() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}
