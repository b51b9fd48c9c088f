//! Restarting without dropping clients: a successor process takes the
//! running proxy's listening sockets over a Unix socket (`[proxy]
//! upgrade_socket`, mode 0600, the same user only), with SCM_RIGHTS, so
//! both hold the very same sockets and their accept queues: no connection
//! is refused or reset between the two. Then:
//!
//! 1. the successor (`gatehouse upgrade --config <file>`) connects and
//!    says `HELLO`; the running proxy answers with its listeners (each
//!    endpoint's name and configured address, and the admin listener's)
//!    and their descriptors;
//! 2. the successor starts on them (an endpoint keeps a listener when its
//!    name and configured address are the same; others bind anew), probes
//!    its clusters, accepts, and says `READY`;
//! 3. the running proxy stops accepting, answers `DRAINING`, leaves its
//!    sessions [`DRAIN_IDLE_GRACE`] to send what they were about to, then
//!    shuts down as on SIGTERM: transactions in flight finish, idle
//!    sessions are closed between transactions, it exits; the successor then offers its own
//!    listeners on the socket path for the next upgrade.
//!
//! Sessions are not moved: a client connected to the old process keeps its
//! connection until its transaction ends (clients that connect per
//! transaction, as serverless functions do, see nothing at all).

use std::io::{BufRead, BufReader, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

/// The hand-over protocol's name and version, in the successor's `HELLO`.
const PROTOCOL: &str = "gatehouse-upgrade 1";

/// Most listeners one hand-over carries (endpoints and the admin listener).
pub const MAX_LISTENERS: usize = 250;

/// Largest offer (the listeners' names and addresses, as JSON).
const MAX_OFFER_BYTES: usize = 256 * 1024;

/// How long either side waits for the other at each step.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// After a hand-over, how long the old process leaves idle sessions be
/// before closing them: a client that logged in just before (a connection
/// per transaction) sends its first statement within milliseconds, runs
/// its transaction there and leaves by itself.
pub const DRAIN_IDLE_GRACE: Duration = Duration::from_secs(1);

/// The admin listener's name in an offer.
pub const ADMIN: &str = "[admin]";

#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("cannot reach the running proxy's upgrade socket {path}: {source}")]
    Connect { path: PathBuf, source: std::io::Error },
    #[error("upgrade hand-over failed: {0}")]
    Protocol(String),
    #[error("upgrade hand-over failed: {0}")]
    Io(#[from] std::io::Error),
}

fn protocol(message: impl Into<String>) -> UpgradeError {
    UpgradeError::Protocol(message.into())
}

/// One listener offered: whose it is and where.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Offered {
    /// The endpoint's name, or [`ADMIN`].
    pub name: String,
    /// The address as configured (port 0 included).
    pub listen: SocketAddr,
    /// The address it is bound to.
    pub addr: SocketAddr,
}

#[derive(Serialize, Deserialize)]
struct Offer {
    listeners: Vec<Offered>,
}

/// The listeners a successor took over, until each is claimed.
#[derive(Default)]
pub struct Inherited {
    listeners: Vec<(Offered, std::net::TcpListener)>,
}

impl Inherited {
    /// No listeners (a fresh start).
    pub fn none() -> Self {
        Self::default()
    }

    /// The listener of `name` if it was configured at `listen` in the old
    /// process too; taken out (a listener is claimed once).
    pub fn take(&mut self, name: &str, listen: SocketAddr) -> Option<std::net::TcpListener> {
        let i = self
            .listeners
            .iter()
            .position(|(o, _)| o.name == name && o.listen == listen)?;
        Some(self.listeners.swap_remove(i).1)
    }

    pub fn len(&self) -> usize {
        self.listeners.len()
    }

    pub fn is_empty(&self) -> bool {
        self.listeners.is_empty()
    }
}

/// The successor's end of the hand-over, until it serves.
pub struct Successor {
    stream: BufReader<UnixStream>,
    path: PathBuf,
}

/// Asks the proxy running at `path` for its listeners (blocking: before the
/// successor's runtime starts).
pub fn take_over(path: &Path) -> Result<(Inherited, Successor), UpgradeError> {
    let stream = UnixStream::connect(path).map_err(|source| UpgradeError::Connect {
        path: path.to_owned(),
        source,
    })?;
    stream.set_read_timeout(Some(STEP_TIMEOUT))?;
    stream.set_write_timeout(Some(STEP_TIMEOUT))?;
    (&stream).write_all(format!("HELLO {PROTOCOL}\n").as_bytes())?;
    let (offer, fds) = receive_offer(&stream)?;
    if offer.listeners.len() != fds.len() {
        return Err(protocol(format!(
            "{} listeners offered with {} descriptors",
            offer.listeners.len(),
            fds.len()
        )));
    }
    let mut listeners = Vec::with_capacity(fds.len());
    for (o, fd) in offer.listeners.into_iter().zip(fds) {
        let l = std::net::TcpListener::from(fd);
        l.set_nonblocking(true)?;
        listeners.push((o, l));
    }
    Ok((
        Inherited { listeners },
        Successor {
            stream: BufReader::new(stream),
            path: path.to_owned(),
        },
    ))
}

/// The offer: a 4-byte big-endian length, then that much JSON; the
/// descriptors ride on the first bytes.
fn receive_offer(stream: &UnixStream) -> Result<(Offer, Vec<OwnedFd>), UpgradeError> {
    let mut head = [0u8; 4];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_LISTENERS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut fds = Vec::new();
    let got = rustix::net::recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut head)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.flags.contains(rustix::net::ReturnFlags::CTRUNC) {
        return Err(protocol(format!("more than {MAX_LISTENERS} listeners offered")));
    }
    let mut reader = stream;
    reader.read_exact(&mut head[got.bytes..])?;
    let len = u32::from_be_bytes(head) as usize;
    if len > MAX_OFFER_BYTES {
        return Err(protocol(format!("an offer of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    let offer: Offer = serde_json::from_slice(&body).map_err(|e| protocol(format!("unreadable offer: {e}")))?;
    Ok((offer, fds))
}

impl Successor {
    /// Tells the old process this one accepts now, and waits until it has
    /// stopped accepting; the socket path is then free for this process's
    /// own [`offer`].
    pub async fn serving(self) -> Result<PathBuf, UpgradeError> {
        let Successor { mut stream, path } = self;
        tokio::task::spawn_blocking(move || {
            stream.get_mut().write_all(b"READY\n")?;
            let mut line = String::new();
            stream.read_line(&mut line)?;
            match line.trim_end() {
                "DRAINING" => Ok(path),
                other => Err(protocol(format!("expected DRAINING, got {other:?}"))),
            }
        })
        .await
        .map_err(|e| protocol(format!("hand-over task failed: {e}")))?
    }
}

/// The running proxy's listeners, as it offers them.
pub type Listeners = Vec<(Offered, OwnedFd)>;

/// Offers the listeners `listeners()` gives (read at each successor's
/// connection) on `path` until a successor is ready; then `handed_over`
/// runs (it stops accepting), the path is removed and the successor told.
/// Returns when the hand-over is done, or on an error that ends offering.
pub async fn offer<L, H, F>(path: PathBuf, listeners: L, handed_over: H) -> Result<(), UpgradeError>
where
    L: Fn() -> Listeners + Send + Sync + 'static,
    H: FnOnce() -> F + Send,
    F: std::future::Future<Output = ()> + Send,
{
    let listener = bind(&path)?;
    let listeners = std::sync::Arc::new(listeners);
    let me = rustix::process::getuid();
    // Accepted on the runtime (a proxy that is never upgraded leaves no
    // thread blocked); each successor's few steps run blocking, bounded by
    // STEP_TIMEOUT.
    let stream = loop {
        let (stream, _) = listener.accept().await?;
        let uid = stream.peer_cred()?.uid();
        if uid != me.as_raw() {
            tracing::warn!(uid, path = %path.display(), "upgrade socket: a process of another user was turned away");
            continue;
        }
        let stream = stream.into_std()?;
        stream.set_nonblocking(false)?;
        let offered = listeners.clone();
        let done = tokio::task::spawn_blocking(move || hand_over(&stream, offered()).map(|()| stream))
            .await
            .map_err(|e| protocol(format!("hand-over task failed: {e}")))?;
        match done {
            Ok(stream) => break stream,
            Err(e) => tracing::warn!(error = %e, "upgrade: a successor failed before it was ready; still offering"),
        }
    };
    handed_over().await;
    let _ = std::fs::remove_file(&path);
    tokio::task::spawn_blocking(move || {
        let mut s = stream;
        s.write_all(b"DRAINING\n")
    })
    .await
    .map_err(|e| protocol(format!("hand-over task failed: {e}")))??;
    Ok(())
}

/// Binds `path` for the owner only; a stale socket file (nobody listening)
/// is replaced.
fn bind(path: &Path) -> Result<tokio::net::UnixListener, UpgradeError> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(protocol(format!("{} is in use by another process", path.display())));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    Ok(tokio::net::UnixListener::from_std(listener)?)
}

/// One successor: its `HELLO`, the offer, its `READY`.
fn hand_over(stream: &UnixStream, listeners: Listeners) -> Result<(), UpgradeError> {
    stream.set_read_timeout(Some(STEP_TIMEOUT))?;
    stream.set_write_timeout(Some(STEP_TIMEOUT))?;
    let mut reader = BufReader::new(stream);
    let mut hello = String::new();
    reader.read_line(&mut hello)?;
    if hello.trim_end() != format!("HELLO {PROTOCOL}") {
        return Err(protocol(format!("unexpected greeting {:?}", hello.trim_end())));
    }
    if listeners.len() > MAX_LISTENERS {
        return Err(protocol(format!("more than {MAX_LISTENERS} listeners to hand over")));
    }
    let offer = Offer {
        listeners: listeners.iter().map(|(o, _)| o.clone()).collect(),
    };
    let body = serde_json::to_vec(&offer).map_err(|e| protocol(e.to_string()))?;
    let len = u32::try_from(body.len()).map_err(|_| protocol("offer too large"))?;
    let head = len.to_be_bytes();
    let fds: Vec<BorrowedFd<'_>> = listeners.iter().map(|(_, fd)| fd.as_fd()).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len().max(1)))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(protocol("the descriptors do not fit the control buffer"));
    }
    let sent = rustix::net::sendmsg(stream, &[IoSlice::new(&head)], &mut control, SendFlags::empty())
        .map_err(std::io::Error::from)?;
    (&*stream).write_all(&head[sent..])?;
    (&*stream).write_all(&body)?;
    tracing::info!(listeners = listeners.len(), "upgrade: listeners offered to a successor");
    let mut ready = String::new();
    reader.read_line(&mut ready)?;
    if ready.trim_end() != "READY" {
        return Err(protocol(format!("expected READY, got {:?}", ready.trim_end())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener offered by one side is the same socket on the other: a
    /// connection queued before the hand-over is accepted after it, once
    /// the offering side has closed its own descriptor.
    #[tokio::test]
    async fn a_handed_over_listener_is_the_same_socket_with_its_queue() {
        let dir = std::env::temp_dir().join(format!("gh-upgrade-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("u.sock");
        let original = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = original.local_addr().unwrap();
        let fd = original.as_fd().try_clone_to_owned().unwrap();
        let offered = Offered {
            name: "e".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            addr,
        };
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let offering = tokio::spawn(offer(
            path.clone(),
            move || vec![(offered.clone(), fd.try_clone().unwrap())],
            || async move {
                let _ = done_tx.send(());
            },
        ));
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the socket is the owner's only");
        // Queued before the hand-over, on the old side's socket.
        let queued = std::net::TcpStream::connect(addr).unwrap();
        let taken = path.clone();
        let (mut inherited, successor) = tokio::task::spawn_blocking(move || take_over(&taken).unwrap())
            .await
            .unwrap();
        assert_eq!(inherited.len(), 1);
        assert!(
            inherited.take("e", "127.0.0.1:1".parse().unwrap()).is_none(),
            "another configured address"
        );
        let listener = inherited.take("e", "127.0.0.1:0".parse().unwrap()).unwrap();
        assert_eq!(listener.local_addr().unwrap(), addr);
        drop(original);
        assert_eq!(successor.serving().await.unwrap(), path);
        done_rx.await.unwrap();
        offering.await.unwrap().unwrap();
        assert!(!path.exists(), "the path is free for the successor's own offer");
        listener.set_nonblocking(false).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(accepted.peer_addr().unwrap(), queued.local_addr().unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
