//! The client side of an engine, above the core it serves sessions from:
//! [`ClientConn`], a connection as an endpoint's listener accepted it, and
//! [`Serve`], which an engine implements to run one from accept to close.
//! Kept apart from [`crate::engine::Engine`] so the arrows point one way:
//! backend drivers ← pools/topology/router ([`Core`]) ← sessions.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use crate::config::EndpointSettings;
use crate::core::Core;
use crate::engine::Engine;

/// A client connection as accepted by an endpoint listener.
pub struct ClientConn {
    pub socket: TcpStream,
    pub peer: SocketAddr,
    pub endpoint: Arc<EndpointSettings>,
    /// The endpoint's connection slot; `None` when the endpoint is full, in
    /// which case the engine answers with its "too many connections" error.
    pub admission: Option<OwnedSemaphorePermit>,
    /// Held for the session's life so shutdown can wait for it.
    pub drain: crate::drain::DrainGuard,
}

/// The client side of an engine: its sessions, which sit above the core
/// (pools, topology, router) that [`Engine`] drives backends for.
pub trait Serve: Engine {
    /// Serves one client connection from accept to close.
    fn serve(core: Arc<Core<Self>>, client: ClientConn) -> impl Future<Output = ()> + Send;
}
