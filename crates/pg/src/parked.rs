//! A transaction-pooled PostgreSQL session after its greeting: the task
//! that drives it ([`drive`]), and its parked form ([`gatehouse_core::park`]): when
//! the session has been idle long enough, its lasting state ([`ParkedTx`],
//! without buffers or lease) and its socket leave the runtime, and a new
//! task takes them up again when the client speaks, is signalled or times
//! out.

use std::future::Future;
use std::pin::Pin;
use std::task::Waker;

use tokio::runtime::Handle;

use super::errors::fail;
use super::txn::{Outcome, ParkedTx, TxSession};
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::park::Parked;

/// What a logged-in client holds for its whole life (released on drop).
pub(super) struct Guards {
    pub _tenant_slot: Option<tokio::sync::OwnedSemaphorePermit>,
    pub _admission: Option<tokio::sync::OwnedSemaphorePermit>,
    pub _drain: gatehouse_core::drain::DrainGuard,
}

/// A transaction-pooled client between and during its transactions:
/// everything it keeps but its socket, in one allocation.
pub(super) struct Live {
    pub tx: TxSession,
    pub guards: Guards,
}

/// [`Live`] while parked.
struct ParkedLive {
    tx: ParkedTx,
    guards: Guards,
}

/// Runs the session until it ends, or until it parks (the task then ends;
/// the parking lot owns the session).
pub(super) async fn drive(mut live: Box<Live>, mut stream: ClientStream) {
    loop {
        // Nothing of the outcome is kept across the final await.
        let ending = match live.tx.run(&mut stream).await {
            Outcome::Ended(None) => return,
            Outcome::Ended(Some(e)) => failed(live, stream, e),
            Outcome::Park(idle_left) => match park(live, stream, idle_left) {
                Some((l, s)) => {
                    (live, stream) = (l, s);
                    continue;
                }
                None => return,
            },
        };
        return ending.await;
    }
}

/// Tells the client why its session ended (boxed: rare, and the error
/// would otherwise take room in every session's task).
fn failed(live: Box<Live>, mut stream: ClientStream, e: ProxyError) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let peer = stream.peer();
        fail::<()>(&live.tx.core.stats, Some(&mut stream), &e, peer).await;
    })
}

/// Hands the session to the parking lot; gives it back when it cannot park.
fn park(
    live: Box<Live>,
    stream: ClientStream,
    idle_left: Option<std::time::Duration>,
) -> Option<(Box<Live>, ClientStream)> {
    let Some(lot) = live.tx.core.parking.clone() else {
        return Some((live, stream));
    };
    let (socket, _meter) = match stream.into_plain() {
        Ok(plain) => plain,
        Err(stream) => return Some((live, stream)),
    };
    let peer = socket.peer_addr().ok();
    match socket.into_std() {
        Ok(socket) => {
            let Live { tx, guards } = *live;
            let parked = Box::new(ParkedLive { tx: tx.park(), guards });
            lot.park(socket, parked, idle_left);
        }
        Err(e) => tracing::info!(?peer, error = %e, "session ended: its socket could not be parked"),
    }
    None
}

impl Parked for ParkedLive {
    fn arm(&self, waker: &Waker) {
        self.tx.cancel().slot.arm(waker);
    }

    fn signalled(&self) -> bool {
        self.tx.cancel().slot.is_terminated() || self.tx.cancel().slot.is_closing() || *self.tx.core().shutdown.borrow()
    }

    fn resume(self: Box<Self>, runtime: &Handle, socket: std::net::TcpStream, timed_out: bool) {
        runtime.spawn(resumed(self, socket, timed_out));
    }
}

async fn resumed(parked: Box<ParkedLive>, socket: std::net::TcpStream, timed_out: bool) {
    let Some(mut stream) = ClientStream::resumed(socket, parked.tx.endpoint_meter()) else {
        return;
    };
    if timed_out {
        let e = ProxyError::new(
            Condition::IdleTimeout,
            "terminating connection due to idle-session timeout",
        );
        let peer = stream.peer();
        fail::<()>(&parked.tx.core().stats, Some(&mut stream), &e, peer).await;
        return;
    }
    let ParkedLive { tx, guards } = *parked;
    drive(
        Box::new(Live {
            tx: tx.resume(),
            guards,
        }),
        stream,
    )
    .await;
}
#[cfg(test)]
mod tests {
    /// A parked client costs this box, its cancel key and its place in the
    /// lot: the bound catches a field that makes every parked client
    /// bigger (184 bytes when written; 200 since the session keeps its
    /// query rules and digest statistics' inspector, one pointer; 208 since
    /// it keeps its startup values for `RESET`, one pointer).
    #[test]
    fn parked_session_stays_small() {
        let parked = std::mem::size_of::<super::ParkedLive>();
        assert!(parked <= 208, "a parked session grew to {parked} bytes");
    }
}
