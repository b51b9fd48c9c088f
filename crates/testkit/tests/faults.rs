//! The fault relay's own tests, against small servers on loopback: it
//! forwards both ways, resets every open connection on command, cuts the
//! connection that passes N bytes towards the client after exactly N,
//! stalls a direction and black-holes or refuses new connections until
//! healed, and then lets everything through again; delays hold chunks at
//! least the latency and keep their order, a bandwidth limit slows a
//! transfer, and a cut of the next connection spares open ones.

use std::net::SocketAddr;
use std::time::Duration;

use gatehouse_testkit::faults::{Direction, FaultRelay};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Generous bound for anything that should happen now.
const SOON: Duration = Duration::from_secs(10);
/// How long "nothing arrives" is watched.
const QUIET: Duration = Duration::from_millis(300);

/// An upstream that echoes every connection.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// An upstream that sends `len` bytes to every connection, then waits.
async fn blob_server(len: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let blob = vec![7u8; len];
                if s.write_all(&blob).await.is_ok() {
                    let mut rest = [0u8; 64];
                    let _ = s.read(&mut rest).await;
                }
            });
        }
    });
    addr
}

async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    s.write_all(msg).await?;
    let mut got = vec![0u8; msg.len()];
    s.read_exact(&mut got).await?;
    Ok(got)
}

async fn connected(relay: &FaultRelay, n: usize) {
    tokio::time::timeout(SOON, async {
        while relay.open_connections() < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("connections registered");
}

#[tokio::test]
async fn forwards_both_directions() {
    let relay = FaultRelay::start(echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    assert_eq!(round_trip(&mut s, b"hello").await.unwrap(), b"hello");
    let big = vec![3u8; 300_000];
    assert_eq!(round_trip(&mut s, &big).await.unwrap(), big);
}

#[tokio::test]
async fn reset_all_resets_every_open_connection_and_new_ones_still_work() {
    let relay = FaultRelay::start(echo_server().await).await.unwrap();
    let mut a = TcpStream::connect(relay.addr()).await.unwrap();
    let mut b = TcpStream::connect(relay.addr()).await.unwrap();
    round_trip(&mut a, b"a").await.unwrap();
    round_trip(&mut b, b"b").await.unwrap();
    connected(&relay, 2).await;
    assert_eq!(relay.reset_all().await, 2);
    assert_eq!(relay.open_connections(), 0);
    for s in [&mut a, &mut b] {
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(SOON, s.read(&mut buf)).await.unwrap();
        let err = read.expect_err("a reset, not a clean end");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    }
    let mut c = TcpStream::connect(relay.addr()).await.unwrap();
    assert_eq!(round_trip(&mut c, b"c").await.unwrap(), b"c");
}

/// Reads `s` until the connection is reset (a clean end fails the test):
/// how many bytes came before.
async fn bytes_until_reset(s: &mut TcpStream) -> usize {
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let err = tokio::time::timeout(SOON, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) => panic!("a clean end after {got} bytes"),
                Ok(n) => got += n,
                Err(e) => return e,
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    got
}

#[tokio::test]
async fn a_cut_forwards_exactly_n_bytes_to_the_client_then_resets_only_that_connection() {
    let relay = FaultRelay::start(blob_server(1_000_000).await).await.unwrap();
    relay.cut_after_server_bytes(100_000);
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    assert_eq!(bytes_until_reset(&mut s).await, 100_000);
    assert_eq!(relay.cuts(), 1);
    // One-shot: the next connection gets the whole blob.
    let mut t = TcpStream::connect(relay.addr()).await.unwrap();
    let mut all = vec![0u8; 1_000_000];
    tokio::time::timeout(SOON, t.read_exact(&mut all))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(relay.cuts(), 1);
}

#[tokio::test]
async fn a_stalled_direction_forwards_nothing_until_healed() {
    let relay = FaultRelay::start(echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    round_trip(&mut s, b"1").await.unwrap();
    relay.stall(Direction::ToClient);
    s.write_all(b"2").await.unwrap();
    let mut buf = [0u8; 1];
    assert!(
        tokio::time::timeout(QUIET, s.read(&mut buf)).await.is_err(),
        "a byte came through"
    );
    relay.heal();
    tokio::time::timeout(SOON, s.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"2");
}

#[tokio::test]
async fn black_holed_new_connections_are_accepted_but_silent_until_healed() {
    let relay = FaultRelay::start(echo_server().await).await.unwrap();
    let mut open = TcpStream::connect(relay.addr()).await.unwrap();
    round_trip(&mut open, b"x").await.unwrap();
    relay.black_hole_new();
    let mut held = TcpStream::connect(relay.addr()).await.unwrap();
    held.write_all(b"y").await.unwrap();
    let mut buf = [0u8; 1];
    assert!(
        tokio::time::timeout(QUIET, held.read(&mut buf)).await.is_err(),
        "a byte came through"
    );
    // The connection open before keeps flowing.
    assert_eq!(round_trip(&mut open, b"z").await.unwrap(), b"z");
    relay.heal();
    tokio::time::timeout(SOON, held.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"y");
}

#[tokio::test]
async fn refused_connections_are_reset_at_once_and_accepted_again_after_heal() {
    let relay = FaultRelay::start(echo_server().await).await.unwrap();
    relay.refuse_new();
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(SOON, s.read(&mut buf)).await.unwrap();
    assert!(matches!(read, Err(_) | Ok(0)), "refused connection answered: {read:?}");
    assert_eq!(relay.refused(), 1);
    relay.heal();
    let mut t = TcpStream::connect(relay.addr()).await.unwrap();
    assert_eq!(round_trip(&mut t, b"ok").await.unwrap(), b"ok");
}

#[tokio::test]
async fn a_delay_holds_each_chunk_at_least_the_latency_and_keeps_the_order() {
    let relay = FaultRelay::start(echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    round_trip(&mut s, b"warm").await.unwrap();
    relay.delay(Direction::ToClient, Duration::from_millis(100), Duration::ZERO);
    let started = std::time::Instant::now();
    assert_eq!(round_trip(&mut s, b"slow").await.unwrap(), b"slow");
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );

    // Jitter both ways: many small writes come back whole and in order.
    relay.delay(
        Direction::ToClient,
        Duration::from_millis(20),
        Duration::from_millis(15),
    );
    relay.delay(
        Direction::ToServer,
        Duration::from_millis(20),
        Duration::from_millis(15),
    );
    let mut sent = Vec::new();
    let started = std::time::Instant::now();
    for i in 0..200u32 {
        let msg = i.to_be_bytes();
        s.write_all(&msg).await.unwrap();
        sent.extend_from_slice(&msg);
        if i % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    }
    let mut got = vec![0u8; sent.len()];
    tokio::time::timeout(SOON, s.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, sent);
    // Each way at least latency - jitter.
    assert!(
        started.elapsed() >= Duration::from_millis(10),
        "{:?}",
        started.elapsed()
    );

    relay.heal();
    assert_eq!(round_trip(&mut s, b"fast").await.unwrap(), b"fast");
}

#[tokio::test]
async fn a_bandwidth_limit_slows_a_transfer_and_delivers_it_whole() {
    const LEN: usize = 200_000;
    let relay = FaultRelay::start(blob_server(LEN).await).await.unwrap();
    relay.limit_bandwidth(Direction::ToClient, 400_000);
    let started = std::time::Instant::now();
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    let mut all = vec![0u8; LEN];
    tokio::time::timeout(SOON, s.read_exact(&mut all))
        .await
        .unwrap()
        .unwrap();
    assert!(all.iter().all(|&b| b == 7));
    // 200 kB at 400 kB/s: about half a second (the first chunk is free).
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_cut_of_the_next_connection_leaves_open_ones_alone_and_resets_a_new_one_early() {
    let relay = FaultRelay::start(blob_server(1000).await).await.unwrap();
    let mut open = TcpStream::connect(relay.addr()).await.unwrap();
    connected(&relay, 1).await;
    relay.cut_next_connection_after_server_bytes(10);
    let mut all = vec![0u8; 1000];
    tokio::time::timeout(SOON, open.read_exact(&mut all))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(relay.cuts(), 0);

    let mut new = TcpStream::connect(relay.addr()).await.unwrap();
    assert_eq!(bytes_until_reset(&mut new).await, 10);
    assert_eq!(relay.cuts(), 1);
}
