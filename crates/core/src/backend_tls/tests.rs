//! The modes, building from files, and what each mode takes from a TLS
//! server on loopback (rustls, with certificates made here): the database
//! servers' own handshakes are in the `backend_tls` integration tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

struct Ca {
    key: KeyPair,
    cert: rcgen::Certificate,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca { key, cert }
    }

    /// A certificate for `names`, and its key, as DER.
    fn leaf(&self, names: &[&str]) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let der = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        (cert.der().clone(), der)
    }
}

/// A directory of the test's own, removed when dropped.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("gatehouse-backend-tls-{name}-"))
        .tempdir()
        .unwrap()
}

fn write_ca(dir: &Path, ca: &Ca) -> PathBuf {
    let path = dir.join("ca.pem");
    std::fs::write(&path, ca.cert.pem()).unwrap();
    path
}

#[test]
fn mode_names_round_trip_and_say_what_they_ask() {
    for name in TlsMode::NAMES {
        let mode = TlsMode::parse(name).unwrap();
        assert_eq!(mode.as_str(), name);
    }
    assert_eq!(TlsMode::parse("allow"), None);
    assert_eq!(TlsMode::default(), TlsMode::Prefer);
    assert!(!TlsMode::Disable.asks());
    assert!(TlsMode::Prefer.asks() && !TlsMode::Prefer.requires());
    assert!(TlsMode::Require.requires() && !TlsMode::Require.verifies());
    assert!(TlsMode::VerifyCa.verifies() && TlsMode::VerifyFull.verifies());
}

#[test]
fn verifying_modes_need_a_ca_and_files_must_hold_certificates() {
    for mode in [TlsMode::VerifyCa, TlsMode::VerifyFull] {
        let e = build(&Source {
            mode,
            ..Source::default()
        })
        .unwrap_err();
        assert!(matches!(e, BackendTlsError::NeedsCa(_)), "{e}");
    }
    let dir = scratch("files");
    let missing = dir.path().join("missing.pem");
    let e = build(&Source {
        mode: TlsMode::VerifyCa,
        ca: Some(&missing),
        ..Source::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("missing.pem"), "{e}");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let e = build(&Source {
        mode: TlsMode::VerifyFull,
        ca: Some(&empty),
        ..Source::default()
    })
    .unwrap_err();
    assert!(matches!(e, BackendTlsError::Empty { .. }), "{e}");
    let e = build(&Source {
        server_name: Some("not a name!"),
        ..Source::default()
    })
    .unwrap_err();
    assert!(matches!(e, BackendTlsError::ServerName(_)), "{e}");
}

#[test]
fn direct_negotiation_needs_alpn_and_a_mode_that_never_goes_plain() {
    assert_eq!(Negotiation::parse("direct"), Some(Negotiation::Direct));
    assert_eq!(Negotiation::parse("postgres"), Some(Negotiation::Postgres));
    assert_eq!(Negotiation::parse("DIRECT"), None);
    let direct = |mode, alpn| Source {
        mode,
        alpn,
        negotiation: Negotiation::Direct,
        ..Source::default()
    };
    for mode in [TlsMode::Disable, TlsMode::Prefer] {
        let e = build(&direct(mode, Some(b"postgresql"))).unwrap_err();
        assert!(matches!(e, BackendTlsError::DirectNeedsRequire(_)), "{mode:?}: {e}");
    }
    let e = build(&direct(TlsMode::Require, None)).unwrap_err();
    assert!(matches!(e, BackendTlsError::DirectUnsupported), "{e}");
    let tls = build(&direct(TlsMode::Require, Some(b"postgresql"))).unwrap();
    assert_eq!(tls.negotiation, Negotiation::Direct);
    // A change of negotiation is a change of the cluster's TLS.
    let asked = build(&Source {
        negotiation: Negotiation::Postgres,
        ..direct(TlsMode::Require, Some(b"postgresql"))
    })
    .unwrap();
    assert_ne!(tls, asked);
}

#[test]
fn companions_of_a_prefer_connection_that_went_plain_go_plain() {
    let with = |mode| {
        build(&Source {
            mode,
            ..Source::default()
        })
        .unwrap()
    };
    let prefer = with(TlsMode::Prefer);
    assert_eq!(prefer.for_companion_of(false).mode, TlsMode::Disable);
    assert_eq!(prefer.for_companion_of(true), prefer);
    // From require up a companion asks for TLS whatever happened before.
    let require = with(TlsMode::Require);
    assert_eq!(require.for_companion_of(false), require);
}

#[test]
fn equal_only_when_built_from_the_same_mode_name_and_file_contents() {
    let dir = scratch("identity");
    let ca_path = write_ca(dir.path(), &Ca::new("first"));
    let source = Source {
        mode: TlsMode::VerifyFull,
        ca: Some(&ca_path),
        ..Source::default()
    };
    let a = build(&source).unwrap();
    assert_eq!(a, build(&source).unwrap());
    assert_ne!(
        a,
        build(&Source {
            mode: TlsMode::VerifyCa,
            ..source
        })
        .unwrap()
    );
    assert_ne!(
        a,
        build(&Source {
            server_name: Some("db.internal"),
            ..source
        })
        .unwrap()
    );
    // The same path, a rotated CA.
    write_ca(dir.path(), &Ca::new("second"));
    assert_ne!(a, build(&source).unwrap());
}

/// A TLS server on loopback presenting `chain`, answering "hello" to
/// every connection; its address.
async fn tls_server(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> std::net::SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"hello").await;
                    let _ = tls.flush().await;
                    let mut sink = [0u8; 16];
                    let _ = tls.read(&mut sink).await;
                }
            });
        }
    });
    addr
}

/// Handshakes with the server at `addr` as `tls` does; the error's text
/// when it is refused.
async fn handshake(tls: &BackendTls, addr: std::net::SocketAddr) -> Result<(), String> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = tls.handshake(tcp, "127.0.0.1").await.map_err(|e| e.to_string())?;
    assert!(stream.is_tls());
    let mut hello = [0u8; 5];
    stream.read_exact(&mut hello).await.map_err(|e| e.to_string())?;
    assert_eq!(&hello, b"hello");
    Ok(())
}

#[tokio::test]
async fn each_mode_takes_what_it_should_from_a_server() {
    let dir = scratch("modes");
    let ca = Ca::new("servers");
    let ca_path = write_ca(dir.path(), &ca);
    let other_dir = scratch("modes-other");
    let other_ca = write_ca(other_dir.path(), &Ca::new("someone else"));
    let (cert, key) = ca.leaf(&["127.0.0.1", "db.internal"]);
    let server = tls_server(cert, key).await;
    let with = |mode, ca: &Path, server_name| {
        build(&Source {
            mode,
            ca: Some(ca),
            server_name,
            ..Source::default()
        })
        .unwrap()
    };

    // The right CA, the right name.
    for mode in [TlsMode::VerifyCa, TlsMode::VerifyFull] {
        handshake(&with(mode, &ca_path, None), server).await.unwrap();
        handshake(&with(mode, &ca_path, Some("db.internal")), server)
            .await
            .unwrap();
    }
    // Another name: verify-full refuses it, verify-ca does not look.
    let e = handshake(&with(TlsMode::VerifyFull, &ca_path, Some("db.elsewhere")), server)
        .await
        .unwrap_err();
    assert!(e.contains("not valid for name \"db.elsewhere\""), "{e}");
    handshake(&with(TlsMode::VerifyCa, &ca_path, Some("db.elsewhere")), server)
        .await
        .unwrap();
    // Another CA: both verifying modes refuse; require and prefer take it.
    for mode in [TlsMode::VerifyCa, TlsMode::VerifyFull] {
        let e = handshake(&with(mode, &other_ca, None), server).await.unwrap_err();
        assert!(e.contains("UnknownIssuer"), "{mode:?}: {e}");
    }
    for mode in [TlsMode::Require, TlsMode::Prefer] {
        handshake(&with(mode, &other_ca, None), server).await.unwrap();
    }
    // disable has no TLS to start.
    let disabled = build(&Source {
        mode: TlsMode::Disable,
        ..Source::default()
    })
    .unwrap();
    let e = handshake(&disabled, server).await.unwrap_err();
    assert!(e.contains("disable"), "{e}");
}

#[test]
fn host_of_strips_the_port_and_brackets() {
    assert_eq!(stream::host_of("127.0.0.1:5432"), "127.0.0.1");
    assert_eq!(stream::host_of("db.internal:3306"), "db.internal");
    assert_eq!(stream::host_of("[::1]:5432"), "::1");
}
