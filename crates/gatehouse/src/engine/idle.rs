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
}

/// Waits until the client's socket is readable, the session is terminated,
/// shutdown begins (when `watch_shutdown`), or `timeout` passes.
pub async fn next_message<T>(
    stream: &ClientStream,
    slot: &CancelSlot<T>,
    shutdown: &watch::Receiver<bool>,
    watch_shutdown: bool,
    timeout: Option<Duration>,
) -> Woke {
    let wait = std::future::poll_fn(|cx| {
        // Register first, then look: a signal sent in between wakes us.
        if slot.poll_idle(cx).is_ready() {
            return Poll::Ready(Woke::Terminated);
        }
        if watch_shutdown && *shutdown.borrow() {
            return Poll::Ready(Woke::Shutdown);
        }
        stream.poll_readable(cx).map(|_| Woke::Readable)
    });
    match timeout {
        // Boxed: the timer is only paid for where a timeout is set.
        Some(t) => Box::pin(tokio::time::timeout(t, wait))
            .await
            .unwrap_or(Woke::IdleTimeout),
        None => wait.await,
    }
}

/// Completes once shutdown has begun, for a session busy with something
/// else in the same `select!` (the waker stays in `slot`).
pub async fn shutdown_begun<T>(slot: &CancelSlot<T>, shutdown: &watch::Receiver<bool>) {
    std::future::poll_fn(|cx| {
        let _ = slot.poll_idle(cx);
        if *shutdown.borrow() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}
