//! A fault-injecting TCP relay for tests: put it between a proxy and a real
//! database server (the proxy's backend address names the relay, the relay
//! forwards to the server) and break the network on purpose while the test
//! runs. [`FaultRelay`] can
//!
//! - reset every current connection (RST, `SO_LINGER` 0, on both sides),
//! - cut the next connection that carries more than N bytes from the server
//!   towards the client (it forwards exactly N, then resets both sides),
//! - stall a direction of every connection (a black hole: nothing is read,
//!   nothing forwarded, the sockets stay open) until healed,
//! - cut the next NEW connection that carries more than N bytes towards the
//!   client (connections open before are left alone): with a small N, a
//!   reset during the backend's greeting or authentication exchange,
//! - delay a direction (each chunk forwarded `latency ± jitter` after it was
//!   read, order preserved) and limit its bandwidth (bytes per second),
//! - black-hole new connections (accepted, no byte either way, the upstream
//!   not even dialled) until healed,
//! - refuse new connections (accepted and reset at once),
//! - and [`heal`](FaultRelay::heal): let everything through again.
//!
//! Each connection is one tokio task forwarding both directions side by
//! side; the fault state is a `watch` every direction follows, so a change reaches connections already
//! open. Its own tests are in `tests/faults.rs`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The largest chunk one read takes.
const CHUNK: usize = 16 * 1024;
/// The most a delayed or limited direction holds read but not yet
/// forwarded; above it, it stops reading (the sender sees backpressure).
const MAX_QUEUED: usize = 256 * 1024;

/// A direction of the traffic through the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the server (upstream) to the client (the proxy).
    ToClient,
    /// From the client to the server.
    ToServer,
}

/// What is broken now; every connection task follows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Faults {
    refuse: bool,
    hold_new: bool,
    stall_to_client: bool,
    stall_to_server: bool,
    /// The armed cut, if any.
    cut: Option<Cut>,
    to_client: Shape,
    to_server: Shape,
}

/// A one-shot cut armed by the handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cut {
    /// Its number: a connection claims it once.
    number: u64,
    /// The bytes towards the client it lets pass.
    bytes: u64,
    /// Only connections numbered from this one on count.
    first_connection: u64,
}

/// How one direction is slowed down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Shape {
    latency: Duration,
    jitter: Duration,
    /// Bytes per second, if limited.
    rate: Option<u64>,
}

impl Shape {
    fn is_plain(&self) -> bool {
        *self == Shape::default()
    }
}

/// The state the relay's tasks share with its handle.
struct Shared {
    upstream: SocketAddr,
    faults: watch::Sender<Faults>,
    /// Live connections: their kill switch (taken once it is pulled).
    live: Mutex<HashMap<u64, Option<oneshot::Sender<()>>>>,
    /// Notified whenever a connection task ends.
    gone: Notify,
    next_id: AtomicU64,
    next_cut: AtomicU64,
    /// The number of the last cut a connection claimed.
    claimed_cut: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    cuts: AtomicU64,
}

/// A running relay; dropping it stops accepting and resets what is open.
pub struct FaultRelay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl FaultRelay {
    /// Listens on a free loopback port and forwards every connection to
    /// `upstream`. Must be called inside a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultRelay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            faults: watch::Sender::new(Faults::default()),
            live: Mutex::new(HashMap::new()),
            gone: Notify::new(),
            next_id: AtomicU64::new(0),
            next_cut: AtomicU64::new(0),
            claimed_cut: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(FaultRelay { addr, shared, accept })
    }

    /// The address to give the client instead of the server's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// "127.0.0.1:PORT", as a proxy's backend list wants it.
    pub fn addr_string(&self) -> String {
        self.addr.to_string()
    }

    /// Resets (RST) every connection open now, both its sockets, and waits
    /// until they are gone; how many there were.
    pub async fn reset_all(&self) -> usize {
        let ids: Vec<u64> = {
            let mut live = self.shared.live.lock().unwrap_or_else(PoisonError::into_inner);
            live.iter_mut()
                .filter_map(|(id, kill)| {
                    let _ = kill.take()?.send(());
                    Some(*id)
                })
                .collect()
        };
        loop {
            let gone = self.shared.gone.notified();
            let any_left = {
                let live = self.shared.live.lock().unwrap_or_else(PoisonError::into_inner);
                ids.iter().any(|id| live.contains_key(id))
            };
            if !any_left {
                return ids.len();
            }
            gone.await;
        }
    }

    /// Arms a one-shot cut: the first connection that carries more than
    /// `bytes` from the server towards the client from now on forwards
    /// exactly `bytes` of them, then is reset on both sides. Connections
    /// that stay below it are left alone.
    pub fn cut_after_server_bytes(&self, bytes: u64) {
        self.arm_cut(bytes, 0);
    }

    /// Arms a one-shot cut like [`cut_after_server_bytes`](Self::cut_after_server_bytes),
    /// but only for connections accepted from now on: the first of them
    /// to carry more than `bytes` towards the client forwards exactly
    /// `bytes`, then is reset on both sides. With a small `bytes`, that is a
    /// reset in the middle of the server's greeting or of the
    /// authentication exchange of a new connection.
    pub fn cut_next_connection_after_server_bytes(&self, bytes: u64) {
        let first = self.shared.next_id.load(Ordering::SeqCst);
        self.arm_cut(bytes, first);
    }

    fn arm_cut(&self, bytes: u64, first_connection: u64) {
        let number = self.shared.next_cut.fetch_add(1, Ordering::SeqCst) + 1;
        self.shared.faults.send_modify(|f| {
            f.cut = Some(Cut {
                number,
                bytes,
                first_connection,
            })
        });
    }

    /// Delays `direction` on every connection, open now or later: each
    /// chunk read is forwarded `latency ± jitter` (uniform) after it was
    /// read, never before the chunk read before it (order is preserved),
    /// until healed.
    pub fn delay(&self, direction: Direction, latency: Duration, jitter: Duration) {
        self.shape(direction, |s| {
            s.latency = latency;
            s.jitter = jitter.min(latency);
        });
    }

    /// Limits `direction` of every connection, open now or later, to
    /// `bytes_per_second` (at least 1) each, until healed.
    pub fn limit_bandwidth(&self, direction: Direction, bytes_per_second: u64) {
        self.shape(direction, |s| s.rate = Some(bytes_per_second.max(1)));
    }

    fn shape(&self, direction: Direction, change: impl FnOnce(&mut Shape)) {
        self.shared.faults.send_modify(|f| {
            change(match direction {
                Direction::ToClient => &mut f.to_client,
                Direction::ToServer => &mut f.to_server,
            })
        });
    }

    /// Stops forwarding `direction` on every connection, open now or later
    /// (nothing is read from that side, nothing written), until healed.
    pub fn stall(&self, direction: Direction) {
        self.shared.faults.send_modify(|f| match direction {
            Direction::ToClient => f.stall_to_client = true,
            Direction::ToServer => f.stall_to_server = true,
        });
    }

    /// New connections are accepted but black-holed: no byte goes either
    /// way (the server is not even dialled) until healed. Connections open
    /// now keep flowing.
    pub fn black_hole_new(&self) {
        self.shared.faults.send_modify(|f| f.hold_new = true);
    }

    /// New connections are accepted and reset at once, until healed.
    pub fn refuse_new(&self) {
        self.shared.faults.send_modify(|f| f.refuse = true);
    }

    /// Clears every fault: stalled and held connections flow again, new
    /// ones are forwarded, an armed cut is disarmed, delays and limits end
    /// (chunks already delayed still leave at their time).
    pub fn heal(&self) {
        self.shared.faults.send_replace(Faults::default());
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.live.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Connections accepted and forwarded (or held) so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections refused so far.
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// Connections cut by [`cut_after_server_bytes`](Self::cut_after_server_bytes) so far.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for FaultRelay {
    fn drop(&mut self) {
        self.accept.abort();
        let mut live = self.shared.live.lock().unwrap_or_else(PoisonError::into_inner);
        for kill in live.values_mut() {
            if let Some(k) = kill.take() {
                let _ = k.send(());
            }
        }
    }
}

/// Closes `stream` with a reset instead of a FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        if shared.faults.borrow().refuse {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            reset(client);
            continue;
        }
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        let (kill, killed) = oneshot::channel();
        shared
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Some(kill));
        let shared = shared.clone();
        tokio::spawn(async move {
            serve(&shared, id, client, killed).await;
            shared.live.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
            shared.gone.notify_waiters();
        });
    }
}

/// How a connection's forwarding ended.
enum End {
    /// Close both sides normally (a FIN or an error from one side).
    Close,
    /// Reset both sides (killed, cut, or a reset from one side).
    Reset,
}

/// One connection, from accept to close.
async fn serve(shared: &Shared, id: u64, client: TcpStream, mut killed: oneshot::Receiver<()>) {
    let mut faults = shared.faults.subscribe();
    if faults.borrow_and_update().hold_new {
        loop {
            tokio::select! {
                _ = &mut killed => return reset(client),
                changed = faults.changed() => {
                    if changed.is_err() {
                        return reset(client);
                    }
                    if !faults.borrow_and_update().hold_new {
                        break;
                    }
                }
            }
        }
    }
    let server = tokio::select! {
        _ = &mut killed => return reset(client),
        s = TcpStream::connect(shared.upstream) => match s {
            Ok(s) => s,
            Err(_) => return reset(client),
        },
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    let end = tokio::select! {
        _ = &mut killed => End::Reset,
        end = pump(shared, id, Direction::ToServer, &mut client_r, &mut server_w, faults.clone()) => end,
        end = pump(shared, id, Direction::ToClient, &mut server_r, &mut client_w, faults) => end,
    };
    if let End::Reset = end {
        // Whole again first: a write half dropped on its own sends a FIN.
        for (r, w) in [(client_r, client_w), (server_r, server_w)] {
            if let Ok(stream) = r.reunite(w) {
                reset(stream);
            }
        }
    }
}

/// A chunk read, waiting for its time to be forwarded.
struct Pending {
    due: Instant,
    bytes: Vec<u8>,
    /// The cut ends the connection once this chunk is written.
    cut: bool,
}

/// Forwards one direction of connection `id` under the faults until its
/// side ends or a fault resets the connection. Each direction runs on its
/// own, so a full socket one way never blocks the other. A chunk read is
/// queued with the time it is due (now, or later under a delay or a
/// bandwidth limit) and written in order when due.
async fn pump(
    shared: &Shared,
    id: u64,
    direction: Direction,
    from: &mut OwnedReadHalf,
    to: &mut OwnedWriteHalf,
    mut faults: watch::Receiver<Faults>,
) -> End {
    let mut buf = vec![0u8; CHUNK];
    // The armed cut this direction counts for: (its number, bytes left).
    let mut counting: Option<(u64, u64)> = None;
    let mut queue: VecDeque<Pending> = VecDeque::new();
    let mut queued = 0usize;
    // Nothing more is read: the side ended, or a cut is queued.
    let mut done_reading = false;
    // When the last chunk is due, and when the bandwidth allows the next.
    let mut last_due = Instant::now();
    let mut free_at = Instant::now();
    let mut rng = Jitter::new(id, direction);
    loop {
        let f = *faults.borrow_and_update();
        let (stalled, shape) = match direction {
            Direction::ToClient => (f.stall_to_client, f.to_client),
            Direction::ToServer => (f.stall_to_server, f.to_server),
        };
        counting = match (f.cut, counting) {
            _ if direction == Direction::ToServer => None,
            (Some(c), _) if id < c.first_connection => None,
            (Some(c), Some((m, left))) if c.number == m => Some((m, left)),
            (cut, _) => cut.map(|c| (c.number, c.bytes)),
        };
        let want = match shape.rate {
            // About 20 chunks a second under a limit.
            Some(rate) => usize::try_from(rate / 20).unwrap_or(CHUNK).clamp(256, CHUNK),
            None => CHUNK,
        };
        let front_due = queue.front().map(|p| p.due);
        let can_read = !stalled && !done_reading && queued < MAX_QUEUED;
        tokio::select! {
            biased;
            changed = faults.changed() => {
                if changed.is_err() {
                    return End::Reset;
                }
            }
            () = tokio::time::sleep_until(front_due.unwrap_or(last_due)), if !stalled && front_due.is_some() => {
                let Some(p) = queue.pop_front() else { continue };
                queued -= p.bytes.len();
                if let Err(e) = to.write_all(&p.bytes).await {
                    return end_of(&e);
                }
                if p.cut {
                    shared.cuts.fetch_add(1, Ordering::SeqCst);
                    return End::Reset;
                }
                if done_reading && queue.is_empty() {
                    return End::Close;
                }
            }
            read = from.read(&mut buf[..want]), if can_read => {
                let n = match read {
                    Ok(0) => {
                        done_reading = true;
                        if queue.is_empty() {
                            return End::Close;
                        }
                        continue;
                    }
                    Ok(n) => n,
                    Err(e) => return end_of(&e),
                };
                let mut pass = n;
                let mut cut = false;
                if let Some((number, left)) = counting {
                    if (n as u64) > left && claim(shared, number) {
                        pass = usize::try_from(left).unwrap_or(n);
                        cut = true;
                        done_reading = true;
                    }
                    counting = Some((number, left.saturating_sub(n as u64)));
                }
                let now = Instant::now();
                let mut due = if shape.is_plain() { now } else { now + rng.delay(&shape) };
                due = due.max(last_due);
                if let Some(rate) = shape.rate {
                    due = due.max(free_at);
                    free_at = due + Duration::from_secs_f64(pass as f64 / rate as f64);
                }
                last_due = due;
                queued += pass;
                queue.push_back(Pending {
                    due,
                    bytes: buf[..pass].to_vec(),
                    cut,
                });
            }
        }
    }
}

/// A small xorshift generator for the jitter, seeded per connection and
/// direction (no dependency for it).
struct Jitter(u64);

impl Jitter {
    fn new(id: u64, direction: Direction) -> Jitter {
        let seed = (id + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (direction as u64 + 1);
        Jitter(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `latency ± jitter`, uniform.
    fn delay(&mut self, shape: &Shape) -> Duration {
        let jitter = u64::try_from(shape.jitter.as_micros()).unwrap_or(u64::MAX / 4);
        if jitter == 0 {
            return shape.latency;
        }
        let offset = self.next() % (2 * jitter + 1);
        (shape.latency + Duration::from_micros(offset)).saturating_sub(Duration::from_micros(jitter))
    }
}

/// Takes cut `number` for this connection, unless another one took it;
/// disarms it.
fn claim(shared: &Shared, number: u64) -> bool {
    let took = shared
        .claimed_cut
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            (last < number).then_some(number)
        })
        .is_ok();
    if took {
        shared.faults.send_modify(|f| {
            if f.cut.is_some_and(|c| c.number == number) {
                f.cut = None;
            }
        });
    }
    took
}

/// A reset from one side is passed on as a reset; other errors close.
fn end_of(e: &io::Error) -> End {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => End::Reset,
        _ => End::Close,
    }
}
