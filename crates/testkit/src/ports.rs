//! Network endpoints: picking free loopback TCP ports below the kernel's
//! ephemeral range, probing whether a port listens, and choosing unix
//! socket directories short enough for `sun_path`.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};

use crate::sys::{fnv1a, random_u64};

/// Ports are drawn from this range: below 32768 so they never collide with
/// the kernel's ephemeral (outgoing) ports.
const PORT_LOW: u16 = 20000;
const PORT_HIGH: u16 = 32000;

/// A random port on 127.0.0.1 that is free right now and not in `avoid`.
pub fn free_port(avoid: &[u16]) -> Result<u16> {
    for attempt in 0..500u64 {
        let span = u64::from(PORT_HIGH - PORT_LOW);
        let port = PORT_LOW + (random_u64(attempt) % span) as u16;
        if avoid.contains(&port) {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port found in {PORT_LOW}..{PORT_HIGH} after 500 attempts")
}

/// Does something accept TCP connections on 127.0.0.1:`port`?
pub fn is_listening(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

/// Longest socket file name we put in a socket dir (`.s.PGSQL.NNNNN.lock`).
const SOCKET_NAME_MAX: usize = 24;
/// Linux `sun_path` holds 108 bytes including the NUL; keep a margin.
const SUN_PATH_MAX: usize = 100;

/// Where a server keeps its unix socket: its own directory if the path is
/// short enough, else a deterministic short directory under /tmp.
pub(crate) fn socket_dir(server_dir: &Path) -> PathBuf {
    if server_dir.as_os_str().len() + 1 + SOCKET_NAME_MAX <= SUN_PATH_MAX {
        return server_dir.to_path_buf();
    }
    let hash = fnv1a(server_dir.as_os_str().as_encoded_bytes());
    PathBuf::from(format!("/tmp/gh-{hash:016x}"))
}
