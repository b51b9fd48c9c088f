//! What a test cluster is made of, as tests and scripts see it: the
//! engines, the servers with their roles and addresses, and the options a
//! cluster is started with.

use std::fmt;
use std::path::PathBuf;

/// Which database engine a server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    Postgres,
    Mysql,
}

/// Replication role of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Primary,
    Replica,
}

/// One running (or stopped) database server of a [`Cluster`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// "pg0", "pg1", ... or "my0", "my1", ...
    pub name: String,
    pub engine: Engine,
    /// Always "127.0.0.1".
    pub host: String,
    /// The port the server listens on (the kit's own connections and
    /// replication use it).
    pub port: u16,
    /// The port the client side reaches it on: `port`, or with a testbed
    /// latency the port of the relay that delays its traffic (see
    /// [`crate::testbed`]). `cluster.env`'s `GH_<NAME>_PORT` is this one.
    pub client_port: u16,
    pub role: Role,
    /// The server's own directory (data dir, log and socket live below it).
    pub dir: PathBuf,
}

impl Server {
    /// "127.0.0.1:PORT".
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// "127.0.0.1:CLIENT_PORT": where the client side reaches it.
    pub fn client_addr(&self) -> String {
        format!("{}:{}", self.host, self.client_port)
    }
}

/// What [`Cluster::up`] starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub pg: bool,
    pub pg_replicas: usize,
    pub pg_max_connections: u32,
    pub mysql: bool,
    pub mysql_replicas: usize,
    pub mysql_max_connections: u32,
    /// Start every server with TLS enabled (plain connections still work),
    /// with a certificate from a CA generated for the cluster; see
    /// [`Cluster::tls_ca`].
    pub tls: bool,
    /// PostgreSQL binaries other than the host's (a newer server, say);
    /// `None`: `GH_PG_BINDIR` or the installed PostgreSQL 15.
    pub pg_bindir: Option<std::path::PathBuf>,
    /// Hosts of their own: each server's CPU budget and its latency from
    /// the client side ([`crate::testbed`]); empty by default.
    pub testbed: crate::testbed::Testbed,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pg: true,
            pg_replicas: 0,
            pg_max_connections: 200,
            mysql: false,
            mysql_replicas: 0,
            mysql_max_connections: 200,
            tls: false,
            pg_bindir: None,
            testbed: crate::testbed::Testbed::default(),
        }
    }
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::Mysql => "mysql",
        }
    }
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
