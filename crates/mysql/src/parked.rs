//! A MySQL session after the connection phase: the task that drives it
//! ([`drive`]), and its parked form ([`gatehouse_core::park`]): a plain-TCP session
//! idle without a lease for `park_idle_after` leaves the runtime (its
//! boxed [`Session`] and its socket go to the parking lot), and a new task
//! takes it up again when the client speaks, is killed or shut down, or
//! times out.

use std::future::Future;
use std::pin::Pin;
use std::task::Waker;

use bytes::BytesMut;
use tokio::runtime::Handle;

use super::errors::fail;
use super::txn::{Served, Session};
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::park::Parked;

/// Runs the session until it ends, or until it parks (the task then ends;
/// the parking lot owns the session).
pub(super) async fn drive(mut s: Box<Session>, mut stream: ClientStream, mut buf: BytesMut) {
    loop {
        // Nothing of the outcome is kept across the final await.
        let ending = match s.run(&mut stream, &mut buf).await {
            Ok(Served::Ended) => return,
            Err((seq, e)) => failed(s, stream, seq, e),
            Ok(Served::Park(idle_left)) => match park(s, stream, idle_left) {
                Some((back, st)) => {
                    (s, stream) = (back, st);
                    continue;
                }
                None => return,
            },
        };
        return ending.await;
    }
}

/// Tells the client why its session ended (boxed: rare).
fn failed(
    s: Box<Session>,
    mut stream: ClientStream,
    seq: u8,
    e: ProxyError,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move { fail(&s.core, Some(&mut stream), seq, &e).await })
}

/// Hands the session to the parking lot; gives it back when it cannot park.
fn park(
    s: Box<Session>,
    stream: ClientStream,
    idle_left: Option<std::time::Duration>,
) -> Option<(Box<Session>, ClientStream)> {
    let Some(lot) = s.core.parking.clone() else {
        return Some((s, stream));
    };
    let (socket, _meter) = match stream.into_plain() {
        Ok(plain) => plain,
        Err(stream) => return Some((s, stream)),
    };
    let peer = socket.peer_addr().ok();
    match socket.into_std() {
        Ok(socket) => lot.park(socket, s, idle_left),
        Err(e) => tracing::info!(?peer, error = %e, "session ended: its socket could not be parked"),
    }
    None
}

impl Parked for Session {
    fn arm(&self, waker: &Waker) {
        self.cancel.slot.arm(waker);
    }

    fn signalled(&self) -> bool {
        self.cancel.slot.is_terminated() || self.cancel.slot.is_closing() || *self.core.shutdown.borrow()
    }

    fn resume(self: Box<Self>, runtime: &Handle, socket: std::net::TcpStream, timed_out: bool) {
        runtime.spawn(resumed(self, socket, timed_out));
    }
}

async fn resumed(mut s: Box<Session>, socket: std::net::TcpStream, timed_out: bool) {
    let Some(mut stream) = ClientStream::resumed(socket, s.inspect.meter().endpoint().clone()) else {
        return;
    };
    if timed_out {
        let e = ProxyError::new(Condition::IdleTimeout, "idle client timeout reached");
        Box::pin(s.finish()).await;
        fail(&s.core, Some(&mut stream), 0, &e).await;
        return;
    }
    drive(s, stream, BytesMut::new()).await;
}
