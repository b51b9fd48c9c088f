//! The parking lot: where idle client sessions wait without a task.
//!
//! A session outside any transaction, holding no backend connection and
//! nothing buffered, needs nothing from the runtime but a wake-up when its
//! client speaks. Left as a task it still costs the task's cell and the
//! runtime's registration of its socket (together more than half of an idle
//! client's memory). After `park_idle_after` of idleness (see
//! [`crate::cancel::CancelRegistry::ask_idle_to_park`]) the session hands
//! its state and its socket here instead and its task ends. One thread
//! watches every parked socket with one epoll set; when a client sends
//! something (or hangs up), when another session signals it (`KILL`,
//! shutdown: through the waker it leaves in its cancel slot), or when its
//! idle timeout passes, the session is taken out and its engine resumes it
//! in a new task ([`Parked::resume`]).
//!
//! The lot is a handle owned by the proxy's cores, not a `static`, so tests
//! run many proxies in one process; [`ParkingLot::stop`] ends its thread and
//! drops (closes) whatever is still parked.

use std::collections::BTreeSet;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use tokio::runtime::Handle;

/// The token of the lot's own waker (never a session's: those carry a
/// generation above zero in their upper half).
const WAKER: Token = Token(0);
/// Readiness events taken from the kernel per turn.
const EVENTS_PER_TURN: usize = 1024;

/// A session's state while it is parked.
pub trait Parked: Send {
    /// Leaves `waker` where the session's signals (`KILL`, shutdown) wake
    /// it. The waker is the lot's own: when it fires, the lot resumes every
    /// parked session that is [`Self::signalled`] (signals are rare; a
    /// waker of its own would cost every parked session an allocation).
    fn arm(&self, waker: &Waker);
    /// Whether the session was signalled (asked to end, or shutdown began).
    fn signalled(&self) -> bool;
    /// Continues the session in a new task on `runtime`, with its client
    /// socket back; `timed_out` when its idle timeout passed while parked.
    fn resume(self: Box<Self>, runtime: &Handle, socket: TcpStream, timed_out: bool);
}

#[derive(Debug, thiserror::Error)]
pub enum ParkError {
    #[error("cannot start the parking lot: {0}")]
    Start(#[source] std::io::Error),
}

struct Entry {
    socket: TcpStream,
    session: Box<dyn Parked>,
    deadline: Option<Instant>,
    generation: u32,
}

#[derive(Default)]
struct State {
    /// Parked sessions by slot; a token is the slot and its generation.
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    next_generation: u32,
    /// Idle deadlines, earliest first.
    deadlines: BTreeSet<(Instant, usize)>,
    /// The lot's signal waker fired: look at every parked session.
    scan: bool,
    stopped: bool,
    len: usize,
}

impl State {
    fn insert(&mut self, socket: TcpStream, session: Box<dyn Parked>, deadline: Option<Instant>) -> usize {
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        let generation = self.next_generation;
        let entry = Entry {
            socket,
            session,
            deadline,
            generation,
        };
        let index = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(entry);
                i
            }
            None => {
                self.slots.push(Some(entry));
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let token = (usize::try_from(generation).unwrap_or(0) << 32) | index as usize;
        if let Some(d) = deadline {
            self.deadlines.insert((d, token));
        }
        self.len += 1;
        token
    }

    /// Takes the entry `token` names, if it is still parked.
    fn take(&mut self, token: usize) -> Option<Entry> {
        let index = token & 0xffff_ffff;
        let generation = token >> 32;
        let slot = self.slots.get_mut(index)?;
        if slot.as_ref().is_none_or(|e| e.generation as usize != generation) {
            return None;
        }
        let entry = slot.take()?;
        if let Some(d) = entry.deadline {
            self.deadlines.remove(&(d, token));
        }
        self.free.push(u32::try_from(index).unwrap_or(u32::MAX));
        self.len -= 1;
        Some(entry)
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Takes every parked session that was signalled.
    fn take_signalled(&mut self) -> Vec<Entry> {
        let tokens: Vec<usize> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let e = e.as_ref()?;
                e.session
                    .signalled()
                    .then_some((usize::try_from(e.generation).unwrap_or(0) << 32) | i)
            })
            .collect();
        tokens.into_iter().filter_map(|t| self.take(t)).collect()
    }
}

struct Inner {
    registry: Registry,
    waker: mio::Waker,
    state: Mutex<State>,
    runtime: Handle,
    /// The waker parked sessions leave for their signals ([`Signal`]).
    signal: std::sync::OnceLock<Waker>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The thread holds only a weak reference: let it see that.
        let _ = self.waker.wake();
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake_thread(&self) {
        if let Err(e) = self.waker.wake() {
            tracing::warn!(error = %e, "cannot wake the parking lot");
        }
    }
}

/// The waker every parked session leaves for its signals: makes the lot
/// look for signalled sessions.
struct Signal {
    lot: Weak<Inner>,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(lot) = self.lot.upgrade() {
            lot.lock().scan = true;
            lot.wake_thread();
        }
    }
}

/// Handle to a running parking lot; clones share it.
#[derive(Clone)]
pub struct ParkingLot {
    inner: Arc<Inner>,
}

impl ParkingLot {
    /// Starts the lot's thread; sessions are resumed on `runtime`.
    pub fn start(runtime: Handle) -> Result<Self, ParkError> {
        let poll = Poll::new().map_err(ParkError::Start)?;
        let registry = poll.registry().try_clone().map_err(ParkError::Start)?;
        let waker = mio::Waker::new(poll.registry(), WAKER).map_err(ParkError::Start)?;
        let inner = Arc::new(Inner {
            registry,
            waker,
            state: Mutex::new(State::default()),
            runtime,
            signal: std::sync::OnceLock::new(),
        });
        let weak = Arc::downgrade(&inner);
        let _ = inner.signal.set(Waker::from(Arc::new(Signal { lot: weak.clone() })));
        std::thread::Builder::new()
            .name("gatehouse-park".into())
            .spawn(move || watch(&weak, poll))
            .map_err(ParkError::Start)?;
        Ok(Self { inner })
    }

    /// Parks `session` until `socket` is readable, the session is
    /// signalled, or `idle_timeout` (from now) passes. If the socket cannot
    /// be watched the session is resumed at once.
    pub fn park(&self, socket: TcpStream, session: Box<dyn Parked>, idle_timeout: Option<Duration>) {
        let deadline = idle_timeout.map(|t| Instant::now() + t);
        let fd = socket.as_raw_fd();
        let mut state = self.inner.lock();
        if state.stopped {
            drop(state);
            session.resume(&self.inner.runtime, socket, false);
            return;
        }
        let token = state.insert(socket, session, deadline);
        // The thread sleeps until the earliest deadline it knew of.
        let earliest = deadline.is_some() && state.deadlines.first().is_some_and(|&(_, t)| t == token);
        // Edge-triggered: a socket readable already reports at once.
        if let Err(e) = self
            .inner
            .registry
            .register(&mut SourceFd(&fd), Token(token), Interest::READABLE)
        {
            tracing::warn!(error = %e, "cannot park a session; resuming it");
            if let Some(entry) = state.take(token) {
                drop(state);
                entry.session.resume(&self.inner.runtime, entry.socket, false);
            }
            return;
        }
        // Under the lock: a signal raised now waits for it, then finds the
        // entry; one raised before is seen here.
        let signalled = match (
            state.slots.get(token & 0xffff_ffff).and_then(Option::as_ref),
            self.inner.signal.get(),
        ) {
            (Some(e), Some(signal)) => {
                e.session.arm(signal);
                e.session.signalled()
            }
            _ => false,
        };
        if signalled {
            state.scan = true;
        }
        drop(state);
        if signalled || earliest {
            self.inner.wake_thread();
        }
    }

    /// Sessions parked now.
    pub fn len(&self) -> usize {
        self.inner.lock().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends the lot's thread; sessions still parked are dropped (their
    /// sockets closed) and later ones are resumed at once.
    pub fn stop(&self) {
        let parked = {
            let mut state = self.inner.lock();
            state.stopped = true;
            state.deadlines.clear();
            state.len = 0;
            std::mem::take(&mut state.slots)
        };
        self.inner.wake_thread();
        drop(parked);
    }
}

/// The lot's thread: waits for readiness, signals and deadlines, and
/// resumes the sessions they concern. Ends when the lot is stopped or gone.
fn watch(lot: &Weak<Inner>, mut poll: Poll) {
    let mut events = Events::with_capacity(EVENTS_PER_TURN);
    loop {
        let timeout = {
            let Some(inner) = lot.upgrade() else { return };
            let state = inner.lock();
            if state.stopped {
                return;
            }
            state
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()))
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                tracing::warn!(error = %e, "parking lot poll failed");
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        let Some(inner) = lot.upgrade() else { return };
        let mut due: Vec<(Entry, bool)> = Vec::new();
        {
            let mut state = inner.lock();
            if state.stopped {
                return;
            }
            for event in &events {
                if event.token() == WAKER {
                    if std::mem::take(&mut state.scan) {
                        due.extend(state.take_signalled().into_iter().map(|e| (e, false)));
                    }
                } else if let Some(entry) = state.take(event.token().0) {
                    due.push((entry, false));
                }
            }
            let now = Instant::now();
            while let Some(&(d, token)) = state.deadlines.first() {
                if d > now {
                    break;
                }
                match state.take(token) {
                    Some(entry) => due.push((entry, true)),
                    None => {
                        state.deadlines.remove(&(d, token));
                    }
                }
            }
        }
        for (entry, timed_out) in due {
            let fd = entry.socket.as_raw_fd();
            if let Err(e) = inner.registry.deregister(&mut SourceFd(&fd)) {
                tracing::debug!(error = %e, "deregistering a parked socket failed");
            }
            entry.session.resume(&inner.runtime, entry.socket, timed_out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::sync::oneshot;

    /// A parked "session" that reports how it was resumed.
    struct Probe {
        signalled: Arc<AtomicBool>,
        armed: Armed,
        done: Option<oneshot::Sender<(TcpStream, bool)>>,
    }

    impl Parked for Probe {
        fn arm(&self, waker: &Waker) {
            *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some(waker.clone());
        }

        fn signalled(&self) -> bool {
            self.signalled.load(Ordering::Relaxed)
        }

        fn resume(mut self: Box<Self>, runtime: &Handle, socket: TcpStream, timed_out: bool) {
            let done = self.done.take();
            runtime.spawn(async move {
                if let Some(d) = done {
                    let _ = d.send((socket, timed_out));
                }
            });
        }
    }

    fn pair() -> (TcpStream, TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        server.set_nonblocking(true).expect("nonblocking");
        (client, server)
    }

    type Armed = Arc<Mutex<Option<Waker>>>;
    type Resumed = oneshot::Receiver<(TcpStream, bool)>;

    fn probe(signalled: &Arc<AtomicBool>) -> (Box<Probe>, Armed, Resumed) {
        let (tx, rx) = oneshot::channel();
        let armed = Arc::new(Mutex::new(None));
        let p = Box::new(Probe {
            signalled: signalled.clone(),
            armed: armed.clone(),
            done: Some(tx),
        });
        (p, armed, rx)
    }

    fn quiet() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    async fn resumed(rx: Resumed) -> (TcpStream, bool) {
        tokio::time::timeout(Duration::from_secs(5), rx)
            .await
            .expect("not resumed in time")
            .expect("resume dropped")
    }

    #[tokio::test]
    async fn a_client_message_resumes_the_session_with_its_socket() {
        let lot = ParkingLot::start(Handle::current()).expect("lot");
        let (mut client, server) = pair();
        let server_port = server.local_addr().expect("addr").port();
        let (p, _, rx) = probe(&quiet());
        lot.park(server, p, None);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(lot.len(), 1, "parked while the client is quiet");
        client.write_all(b"x").expect("write");
        let (socket, timed_out) = resumed(rx).await;
        assert!(!timed_out);
        assert_eq!(
            socket.local_addr().expect("addr").port(),
            server_port,
            "its own socket back"
        );
        assert!(lot.is_empty());
        lot.stop();
    }

    #[tokio::test]
    async fn data_already_waiting_resumes_at_once() {
        let lot = ParkingLot::start(Handle::current()).expect("lot");
        let (mut client, server) = pair();
        client.write_all(b"early").expect("write");
        std::thread::sleep(Duration::from_millis(20));
        let (p, _, rx) = probe(&quiet());
        lot.park(server, p, None);
        let (_, timed_out) = resumed(rx).await;
        assert!(!timed_out);
        lot.stop();
    }

    #[tokio::test]
    async fn a_signal_resumes_the_session_even_one_raised_before_parking() {
        let lot = ParkingLot::start(Handle::current()).expect("lot");
        let (_client, server) = pair();
        let (_other_client, other) = pair();
        let flag = quiet();
        let (p, armed, rx) = probe(&flag);
        let (q, _, mut other_rx) = probe(&quiet());
        lot.park(server, p, None);
        lot.park(other, q, None);
        let waker = armed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .expect("armed");
        // A wake-up with nobody signalled resumes nobody.
        waker.wake_by_ref();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(lot.len(), 2);
        flag.store(true, Ordering::Relaxed);
        waker.wake_by_ref();
        let (_, timed_out) = resumed(rx).await;
        assert!(!timed_out);
        assert!(other_rx.try_recv().is_err(), "only the signalled session is resumed");
        assert_eq!(lot.len(), 1);

        let (_client2, server2) = pair();
        let (p2, _, rx2) = probe(&Arc::new(AtomicBool::new(true)));
        lot.park(server2, p2, None);
        let (_, timed_out) = resumed(rx2).await;
        assert!(!timed_out);
        lot.stop();
    }

    #[tokio::test]
    async fn the_idle_timeout_resumes_a_quiet_session_as_timed_out() {
        let lot = ParkingLot::start(Handle::current()).expect("lot");
        let (_client, server) = pair();
        let (p, _, rx) = probe(&quiet());
        let (_client2, server2) = pair();
        let (p2, _, rx2) = probe(&quiet());
        lot.park(server, p, Some(Duration::from_millis(100)));
        lot.park(server2, p2, Some(Duration::from_secs(60)));
        let (_, timed_out) = resumed(rx).await;
        assert!(timed_out);
        assert_eq!(lot.len(), 1, "the other session keeps waiting");
        lot.stop();
        assert!(rx2.await.is_err(), "stopping drops what is still parked");
    }

    #[tokio::test]
    async fn a_stopped_lot_resumes_new_sessions_at_once() {
        let lot = ParkingLot::start(Handle::current()).expect("lot");
        lot.stop();
        let (_client, server) = pair();
        let (p, _, rx) = probe(&quiet());
        lot.park(server, p, None);
        let (_, timed_out) = resumed(rx).await;
        assert!(!timed_out);
    }

    #[test]
    fn tokens_of_reused_slots_do_not_reach_new_tenants() {
        let mut state = State::default();
        let resumed = Arc::new(AtomicBool::new(false));
        struct Nop(Arc<AtomicBool>);
        impl Parked for Nop {
            fn arm(&self, _: &Waker) {}
            fn signalled(&self) -> bool {
                false
            }
            fn resume(self: Box<Self>, _: &Handle, _: TcpStream, _: bool) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let (_c1, s1) = pair();
        let (_c2, s2) = pair();
        let old = state.insert(s1, Box::new(Nop(resumed.clone())), None);
        assert!(state.take(old).is_some());
        let new = state.insert(s2, Box::new(Nop(resumed.clone())), None);
        assert_eq!(old & 0xffff_ffff, new & 0xffff_ffff, "the slot is reused");
        assert!(state.take(old).is_none(), "a stale token finds nothing");
        assert!(state.take(new).is_some());
        assert!(!resumed.load(Ordering::Relaxed));
    }
}
