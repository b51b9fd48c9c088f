//! `gatehouse-loadgen relay`: a fault-injecting TCP relay that puts a
//! server a few milliseconds away on one machine. It accepts connections,
//! opens one to the upstream address for each, and forwards both
//! directions, every chunk delayed by the one-way delay (optionally with
//! jitter), so a round trip through it costs twice the delay.
//!
//! Each direction is a reader and a writer joined by a bounded channel: the
//! reader stamps every chunk it reads with its due time (read time plus the
//! delay) and queues it; the writer sleeps until the head chunk is due and
//! writes it. A chunk read while earlier ones wait is due at its own read
//! time plus the delay, never later than that because of its predecessors
//! (except with jitter, where a chunk is never due before the one read
//! before it: order is kept, as TCP keeps it; and unless the receiving
//! side is slow to take what is written). End of stream travels the
//! same way: the peer's FIN (or a read error) becomes a half-close of the
//! other socket once due, so half-closes and closes propagate, each
//! direction on its own. A writer that fails stops its reader.
//!
//! Memory is bounded per connection: at most [`QUEUED_CHUNKS`] chunks of
//! at most [`READ_CHUNK`] bytes wait per direction; when the queue is full
//! the reader stops reading, and TCP's flow control pushes back on the
//! sender. What is not modelled: the TCP handshake (the upstream
//! connection is opened at once, so a client's connect costs no round
//! trip), loss, and bandwidth limits.
//!
//! Writers wait on a [`Clock`] of their own, not on tokio's timer: tokio
//! ticks in whole milliseconds and rounds every sleep up, which would turn
//! a 2 ms delay into 3 or more; the clock's thread sleeps to the earliest
//! due time with the OS's precision (tens of microseconds). Delays are
//! never shorter than the given ones.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// The largest chunk one read takes.
pub const READ_CHUNK: usize = 16 * 1024;
/// Chunks waiting in one direction at most (with [`READ_CHUNK`], 1 MiB).
pub const QUEUED_CHUNKS: usize = 64;
/// After a failed accept (out of file descriptors, say), wait this long.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

#[derive(clap::Args)]
pub struct RelayArgs {
    /// Listen on HOST:PORT (port 0: a free one); the address is printed.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: String,
    /// Forward each connection to HOST:PORT (resolved once, at start).
    #[arg(long, value_name = "HOST:PORT")]
    pub to: String,
    /// One-way delay of every chunk, in milliseconds, fractions allowed
    /// (a round trip costs twice this).
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    pub delay_ms: Duration,
    /// Each chunk's delay drawn uniformly from delay ± jitter (at least 0,
    /// order kept).
    #[arg(long, value_name = "MS", default_value = "0", value_parser = parse_ms)]
    pub jitter_ms: Duration,
}

/// Milliseconds, fractions allowed (`0.25`), as a duration.
fn parse_ms(raw: &str) -> Result<Duration, String> {
    let ms: f64 = raw
        .parse()
        .map_err(|_| format!("{raw:?} is not a number of milliseconds"))?;
    if !ms.is_finite() || ms < 0.0 {
        return Err(format!("{raw:?}: must be zero or more"));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// How long a chunk takes one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    pub one_way: Duration,
    pub jitter: Duration,
}

impl Delay {
    /// One chunk's delay: uniform in `one_way ± jitter`, at least 0.
    fn sample(&self, rng: &mut StdRng) -> Duration {
        if self.jitter.is_zero() {
            return self.one_way;
        }
        rng.gen_range(self.one_way.saturating_sub(self.jitter)..=self.one_way + self.jitter)
    }
}

/// The `relay` subcommand: binds, prints the listening address on stdout,
/// and relays until SIGINT or SIGTERM.
pub async fn serve(args: &RelayArgs) -> Result<()> {
    let to = tokio::net::lookup_host(&args.to)
        .await
        .with_context(|| format!("resolving --to {}", args.to))?
        .next()
        .with_context(|| format!("--to {} resolves to no address", args.to))?;
    let delay = Delay {
        one_way: args.delay_ms,
        jitter: args.jitter_ms,
    };
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    // Scripts read this line to learn the port.
    println!("{}", listener.local_addr().context("the listening address")?);
    tokio::select! {
        relayed = run(listener, to, delay) => relayed?,
        interrupted = tokio::signal::ctrl_c() => interrupted.context("waiting for SIGINT")?,
        _ = terminate.recv() => {}
    }
    Ok(())
}

/// Relays every connection `listener` accepts to `to`, with `delay` each
/// way; runs until dropped (connections in flight end with it when it runs
/// as its runtime's main task, else they go on in their own tasks). Fails
/// only when its clock's thread cannot start.
pub async fn run(listener: TcpListener, to: SocketAddr, delay: Delay) -> Result<()> {
    let clock = Clock::start()?;
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                let clock = clock.clone();
                tokio::spawn(async move {
                    if let Err(e) = relay_connection(client, to, delay, clock).await {
                        eprintln!("relay: {e:#}");
                    }
                });
            }
            Err(e) => {
                eprintln!("relay: accepting a connection: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// One accepted connection: its upstream connection opened, then both
/// directions pumped until each has ended.
async fn relay_connection(client: TcpStream, to: SocketAddr, delay: Delay, clock: Clock) -> Result<()> {
    // Dropping `client` on failure closes it: the client sees the refusal
    // as a close.
    let server = TcpStream::connect(to)
        .await
        .with_context(|| format!("connecting to {to}"))?;
    // Chunks go out when due, not when Nagle's algorithm lets them.
    client.set_nodelay(true).context("TCP_NODELAY")?;
    server.set_nodelay(true).context("TCP_NODELAY")?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pump(client_read, server_write, delay, clock.clone()),
        pump(server_read, client_write, delay, clock)
    );
    Ok(())
}

/// What a reader hands its writer.
enum Segment {
    Data(Vec<u8>),
    /// The peer closed its side (or reading failed): half-close the other.
    End,
}

/// A segment and when it is due at the other side.
struct Due {
    at: Instant,
    segment: Segment,
}

/// One direction: `from` read into a bounded queue of stamped chunks,
/// written to `to` each when due. Returns when the end has been passed on
/// or writing failed.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Delay, clock: Clock) {
    let (tx, mut rx) = mpsc::channel::<Due>(QUEUED_CHUNKS);
    let reader = async move {
        let mut rng = StdRng::from_entropy();
        let mut buf = vec![0u8; READ_CHUNK];
        let mut last = Instant::now();
        loop {
            let read = tokio::select! {
                read = from.read(&mut buf) => read,
                // The writer gave up: nothing more goes that way.
                () = tx.closed() => return,
            };
            let segment = match read {
                Ok(n) if n > 0 => Segment::Data(buf[..n].to_vec()),
                _ => Segment::End,
            };
            let end = matches!(segment, Segment::End);
            // Never before the previous chunk (only jitter could make it).
            let at = (Instant::now() + delay.sample(&mut rng)).max(last);
            last = at;
            // A full queue waits here: back-pressure on the sender.
            if tx.send(Due { at, segment }).await.is_err() || end {
                return;
            }
        }
    };
    let writer = async move {
        while let Some(Due { at, segment }) = rx.recv().await {
            clock.sleep_until(at).await;
            match segment {
                Segment::Data(bytes) => {
                    if to.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Segment::End => break,
            }
        }
        // Half-close: the peer reads end of stream. (A failed shutdown
        // means the peer is gone already.)
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

/// Wakes tasks at instants, to within the OS's timer precision: one thread
/// keeps the waiting instants in a heap and sleeps (`recv_timeout`) until
/// the earliest, or until a new one arrives. It ends when the last handle
/// is dropped.
#[derive(Clone)]
pub struct Clock {
    requests: Sender<Wake>,
}

/// A task waiting for `at`, woken through `done`.
struct Wake {
    at: Instant,
    done: oneshot::Sender<()>,
}

impl PartialEq for Wake {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Wake {}

impl PartialOrd for Wake {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Wake {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at.cmp(&other.at)
    }
}

impl Clock {
    /// Starts the clock's thread.
    pub fn start() -> Result<Self> {
        let (requests, received) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("relay-clock".to_owned())
            .spawn(move || keep_time(&received))
            .context("starting the relay's clock thread")?;
        Ok(Self { requests })
    }

    /// Returns at `at` (at once when it has passed).
    pub async fn sleep_until(&self, at: Instant) {
        if at <= Instant::now() {
            return;
        }
        let (done, woken) = oneshot::channel();
        match self.requests.send(Wake { at, done }) {
            Ok(()) => {
                // An error means the thread ended (it cannot while this
                // handle lives): nothing left to wait for.
                let _ = woken.await;
            }
            Err(_) => tokio::time::sleep_until(at.into()).await,
        }
    }
}

/// The clock's thread: wakes every waiter whose instant has come, then
/// sleeps until the next one or a new request.
fn keep_time(requests: &Receiver<Wake>) {
    let mut waiting: BinaryHeap<Reverse<Wake>> = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while waiting.peek().is_some_and(|Reverse(w)| w.at <= now) {
            if let Some(Reverse(w)) = waiting.pop() {
                // The waiter may be gone (its connection closed).
                let _ = w.done.send(());
            }
        }
        let next = match waiting.peek() {
            Some(Reverse(w)) => requests.recv_timeout(w.at.saturating_duration_since(now)),
            None => requests.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(wake) => waiting.push(Reverse(wake)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::task::JoinHandle;
    use tokio::time::Instant;

    use super::{Clock, Delay, run};

    const DELAY: Duration = Duration::from_millis(20);
    /// [`DELAY`] for every chunk.
    const FIXED: Delay = Delay {
        one_way: DELAY,
        jitter: Duration::ZERO,
    };
    /// Generous bound for anything a test waits for (never a measurement).
    const PATIENCE: Duration = Duration::from_secs(20);

    /// A relay with `delay` in front of `to`, on a free port of its own.
    async fn relay(to: std::net::SocketAddr, delay: Delay) -> (std::net::SocketAddr, JoinHandle<anyhow::Result<()>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (addr, tokio::spawn(run(listener, to, delay)))
    }

    /// A server echoing every connection's bytes, then closing its side
    /// after the client closed its own.
    async fn echo_server() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = conn.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    let _ = w.shutdown().await;
                });
            }
        });
        addr
    }

    /// A client through a relay (with `delay`) to a server whose accepted
    /// connection the test holds: (client, server side).
    async fn pair(delay: Delay) -> (TcpStream, TcpStream, JoinHandle<anyhow::Result<()>>) {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (addr, relay) = relay(upstream.local_addr().unwrap(), delay).await;
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = tokio::time::timeout(PATIENCE, upstream.accept())
            .await
            .unwrap()
            .unwrap();
        (client, server, relay)
    }

    async fn read_to_end(stream: &mut (impl AsyncReadExt + Unpin)) -> Vec<u8> {
        let mut got = Vec::new();
        tokio::time::timeout(PATIENCE, stream.read_to_end(&mut got))
            .await
            .unwrap()
            .unwrap();
        got
    }

    #[tokio::test]
    async fn a_round_trip_costs_at_least_twice_the_delay() {
        let (addr, relay) = relay(echo_server().await, FIXED).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.set_nodelay(true).unwrap();
        for _ in 0..3 {
            let began = Instant::now();
            client.write_all(b"ping").await.unwrap();
            let mut answer = [0u8; 4];
            tokio::time::timeout(PATIENCE, client.read_exact(&mut answer))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&answer, b"ping");
            assert!(began.elapsed() >= 2 * DELAY, "round trip {:?}", began.elapsed());
        }
        relay.abort();
    }

    #[tokio::test]
    async fn each_direction_is_delayed_once_and_keeps_its_order() {
        // 1 MiB of a non-repeating pattern, written while the echo comes
        // back (the relay's queues fill and push back), read back whole.
        let data: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect();
        let (addr, relay) = relay(echo_server().await, FIXED).await;
        let client = TcpStream::connect(addr).await.unwrap();
        let (mut r, mut w) = client.into_split();
        let began = Instant::now();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            for piece in sent.chunks(7919) {
                w.write_all(piece).await.unwrap();
            }
            w.shutdown().await.unwrap();
        });
        let got = read_to_end(&mut r).await;
        writer.await.unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "the echoed bytes differ from those sent");
        assert!(began.elapsed() >= 2 * DELAY);
        relay.abort();
    }

    #[tokio::test]
    async fn jitter_never_reorders_chunks() {
        let delay = Delay {
            one_way: DELAY,
            jitter: Duration::from_millis(15),
        };
        let (mut client, mut server, relay) = pair(delay).await;
        client.set_nodelay(true).unwrap();
        for i in 0..200u32 {
            client.write_all(&i.to_be_bytes()).await.unwrap();
            if i % 10 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        client.shutdown().await.unwrap();
        let got = read_to_end(&mut server).await;
        let expected: Vec<u8> = (0..200u32).flat_map(|i| i.to_be_bytes()).collect();
        assert_eq!(got, expected);
        relay.abort();
    }

    #[tokio::test]
    async fn closing_the_client_closes_the_server_side() {
        let (client, mut server, relay) = pair(FIXED).await;
        let began = Instant::now();
        drop(client);
        assert!(read_to_end(&mut server).await.is_empty());
        // The end of stream travels like data: after the delay.
        assert!(began.elapsed() >= DELAY);
        relay.abort();
    }

    #[tokio::test]
    async fn closing_the_server_closes_the_client_side() {
        let (mut client, mut server, relay) = pair(FIXED).await;
        server.write_all(b"bye").await.unwrap();
        drop(server);
        assert_eq!(read_to_end(&mut client).await, b"bye");
        relay.abort();
    }

    #[tokio::test]
    async fn a_half_close_leaves_the_other_direction_open() {
        let (mut client, mut server, relay) = pair(FIXED).await;
        client.write_all(b"request").await.unwrap();
        client.shutdown().await.unwrap();
        // The server reads the request and its end, then still answers.
        assert_eq!(read_to_end(&mut server).await, b"request");
        server.write_all(b"answer").await.unwrap();
        server.shutdown().await.unwrap();
        assert_eq!(read_to_end(&mut client).await, b"answer");
        relay.abort();
    }

    #[tokio::test]
    async fn an_unreachable_upstream_closes_the_client() {
        // A port nothing listens on: bound, its address taken, then freed.
        let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let to = gone.local_addr().unwrap();
        drop(gone);
        let (addr, relay) = relay(to, FIXED).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        let mut got = Vec::new();
        let read = tokio::time::timeout(PATIENCE, client.read_to_end(&mut got))
            .await
            .unwrap();
        // End of stream or a reset, but never data and never a hang.
        assert!(read.is_err() || got.is_empty());
        relay.abort();
    }

    #[tokio::test]
    async fn the_clock_never_wakes_a_task_early() {
        let clock = Clock::start().unwrap();
        let start = std::time::Instant::now();
        let mut waiters = Vec::new();
        for ms in [7u64, 1, 4, 4, 0, 2, 30] {
            let clock = clock.clone();
            let at = start + Duration::from_millis(ms);
            waiters.push(tokio::spawn(async move {
                clock.sleep_until(at).await;
                std::time::Instant::now() >= at
            }));
        }
        for waiter in waiters {
            assert!(tokio::time::timeout(PATIENCE, waiter).await.unwrap().unwrap());
        }
    }

    #[test]
    fn jittered_delays_stay_within_their_range() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let delay = Delay {
            one_way: Duration::from_millis(2),
            jitter: Duration::from_millis(5),
        };
        for _ in 0..1000 {
            let d = delay.sample(&mut rng);
            assert!(d <= Duration::from_millis(7), "{d:?}");
        }
        assert_eq!(FIXED.sample(&mut rng), DELAY);
    }
}
