//! The drain guard every session holds: shutdown (and a successor's
//! takeover) waits until the last one is dropped.

use tokio::sync::mpsc;

/// Held by every session; shutdown waits until all are dropped (the
/// receiving end of the channel it was made from sees it closed then).
#[derive(Clone)]
pub struct DrainGuard(#[allow(dead_code)] mpsc::Sender<()>);

impl DrainGuard {
    /// A guard on the channel whose receiver shutdown waits on.
    pub fn new(tx: mpsc::Sender<()>) -> Self {
        Self(tx)
    }
}
