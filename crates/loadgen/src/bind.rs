//! PostgreSQL connections from a chosen local address (bind before
//! connect), so that more connections to one server address fit than one
//! source address has ephemeral ports (about 28,000 in Linux's default
//! range): `idle-clients --source 127.0.0.2 --source 127.0.0.3 …` spreads
//! its connections over several loopback addresses.

use std::net::{IpAddr, SocketAddr};

use anyhow::{Context, Result, bail};
use tokio::net::{TcpSocket, TcpStream};
use tokio_postgres::Config;
use tokio_postgres::config::Host;

/// The TCP address of the first host and port in `config` (an IP address:
/// no name resolution for the sources' sake).
pub fn destination(config: &Config) -> Result<SocketAddr> {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(_) => bail!("--source needs a TCP host, not a Unix socket"),
        None => "127.0.0.1".to_string(),
    };
    let ip: IpAddr = host
        .parse()
        .with_context(|| format!("--source needs the host as an IP address, not {host:?}"))?;
    let port = config.get_ports().first().copied().unwrap_or(5432);
    Ok(SocketAddr::new(ip, port))
}

/// A TCP connection to `to` from `from` (any free port of it).
pub async fn connect_from(from: IpAddr, to: SocketAddr) -> Result<TcpStream> {
    let socket = if from.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .context("creating a socket")?;
    socket
        .bind(SocketAddr::new(from, 0))
        .with_context(|| format!("binding to {from}"))?;
    let stream = socket
        .connect(to)
        .await
        .with_context(|| format!("connecting from {from} to {to}"))?;
    stream.set_nodelay(true).context("TCP_NODELAY")?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn the_destination_is_the_first_ip_host_and_port() {
        let config = Config::from_str("host=127.0.0.1 port=6432 user=u dbname=d").expect("conninfo");
        assert_eq!(
            destination(&config).ok(),
            Some("127.0.0.1:6432".parse().expect("address"))
        );
        let config = Config::from_str("host=::1 user=u").expect("conninfo");
        assert_eq!(destination(&config).ok(), Some("[::1]:5432".parse().expect("address")));
        // A name would need resolving, which bind-before-connect skips.
        let config = Config::from_str("host=localhost user=u").expect("conninfo");
        assert!(destination(&config).is_err());
    }

    #[tokio::test]
    async fn a_connection_comes_from_the_chosen_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
        let to = listener.local_addr().expect("address");
        let from: IpAddr = "127.0.0.3".parse().expect("ip");
        let (client, accepted) = tokio::join!(connect_from(from, to), listener.accept());
        let client = client.expect("connect");
        let (_, peer) = accepted.expect("accept");
        assert_eq!(peer.ip(), from);
        assert_eq!(client.local_addr().expect("local").ip(), from);
    }
}
