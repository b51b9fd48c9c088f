//! Greeting, SSLRequest, HandshakeResponse41, auth switch, COM_CHANGE_USER.

use bytes::BytesMut;
use gatehouse_proto_mysql::DecodeError;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::handshake::*;
use proptest::prelude::*;

fn greeting(caps: u32) -> HandshakeV10 {
    HandshakeV10 {
        server_version: "8.0.36-gatehouse".into(),
        connection_id: 42,
        scramble: *b"abcdefghijklmnopqrst",
        capabilities: caps,
        mariadb_ext_caps: MARIADB_CLIENT_PROGRESS,
        charset: CHARSET_UTF8MB4_GENERAL_CI,
        status: SERVER_STATUS_AUTOCOMMIT,
        auth_plugin: MYSQL_NATIVE_PASSWORD.into(),
    }
}

const BASE: u32 = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;

#[test]
fn greeting_layout_and_round_trip() {
    let g = greeting(BASE | CLIENT_LONG_PASSWORD);
    let mut b = BytesMut::new();
    g.encode(&mut b);
    assert_eq!(b[0], 10);
    let after_version = 1 + g.server_version.len() + 1;
    assert_eq!(&b[after_version + 4..after_version + 12], b"abcdefgh");
    assert_eq!(b[after_version + 12], 0, "filler");
    assert_eq!(b[after_version + 20], 21, "auth-plugin-data length");
    assert!(b.ends_with(b"mysql_native_password\0"));
    let back = HandshakeV10::decode(&b).unwrap();
    // CLIENT_MYSQL set: no extended caps on the wire.
    assert_eq!(
        back,
        HandshakeV10 {
            mariadb_ext_caps: 0,
            ..g
        }
    );
    let g = greeting(BASE);
    let mut b = BytesMut::new();
    g.encode(&mut b);
    assert_eq!(HandshakeV10::decode(&b).unwrap(), g);
    assert!(!g.is_mariadb());
}

#[test]
fn greeting_rejections() {
    assert_eq!(HandshakeV10::decode(&[9, 0]), Err(DecodeError::ProtocolVersion(9)));
    assert!(matches!(
        HandshakeV10::decode(b"\xff\x10\x04Too many"),
        Err(DecodeError::UnexpectedHeader { header: 0xFF, .. })
    ));
    let mut b = BytesMut::new();
    greeting(CLIENT_PLUGIN_AUTH).encode(&mut b);
    assert!(matches!(HandshakeV10::decode(&b), Err(DecodeError::Invalid { .. })));
    assert!(matches!(HandshakeV10::decode(&[]), Err(DecodeError::Truncated { .. })));
}

#[test]
fn ssl_request() {
    let s = SslRequest {
        capabilities: BASE | CLIENT_SSL,
        max_packet_size: DEFAULT_MAX_PACKET_SIZE,
        charset: 45,
        mariadb_ext_caps: 4,
    };
    let mut b = BytesMut::new();
    s.encode(&mut b);
    assert_eq!(b.len(), 32);
    assert!(SslRequest::is_ssl_request(&b));
    assert_eq!(SslRequest::decode(&b).unwrap(), s);
    assert!(!SslRequest::is_ssl_request(&b[..31]));
    let mut no_ssl = b.clone();
    no_ssl[1] &= !((CLIENT_SSL >> 8) as u8);
    assert!(!SslRequest::is_ssl_request(&no_ssl));
}

fn response(caps: u32) -> HandshakeResponse41 {
    HandshakeResponse41 {
        capabilities: caps,
        max_packet_size: 1 << 24,
        charset: 45,
        mariadb_ext_caps: 0,
        username: "tenant_7".into(),
        auth_response: (1..=20).collect(),
        database: (caps & CLIENT_CONNECT_WITH_DB != 0).then(|| "db7".into()),
        auth_plugin: (caps & CLIENT_PLUGIN_AUTH != 0).then(|| MYSQL_NATIVE_PASSWORD.into()),
        attributes: if caps & CLIENT_CONNECT_ATTRS != 0 {
            vec![("_os".into(), "linux".into())]
        } else {
            vec![]
        },
        zstd_level: None,
    }
}

#[test]
fn handshake_response_all_auth_encodings() {
    let common = CLIENT_PROTOCOL_41 | CLIENT_CONNECT_WITH_DB | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_ATTRS;
    for (extra, marker) in [
        (CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | CLIENT_SECURE_CONNECTION, 20u8),
        (CLIENT_SECURE_CONNECTION, 20),
        (0, 1),
    ] {
        let r = response(common | extra);
        let mut b = BytesMut::new();
        r.encode(&mut b);
        assert_eq!(b[32..41], *b"tenant_7\0");
        assert_eq!(b[41], marker, "lenenc / 1-byte length / raw NUL-terminated");
        assert_eq!(HandshakeResponse41::decode(&b).unwrap(), r);
    }
}

#[test]
fn handshake_response_minimal_and_errors() {
    let r = response(CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION);
    let mut b = BytesMut::new();
    r.encode(&mut b);
    assert_eq!(HandshakeResponse41::decode(&b).unwrap(), r);
    // Pre-4.1 client: 2-byte caps without CLIENT_PROTOCOL_41.
    assert_eq!(
        HandshakeResponse41::decode(&[0x05, 0x00, 0, 0, 0, b'u', 0]),
        Err(DecodeError::NotProtocol41)
    );
    assert_eq!(SslRequest::decode(&[0x00, 0x00]), Err(DecodeError::NotProtocol41));
    // Truncated auth response.
    let cut = &b[..b.len() - 3];
    assert!(matches!(
        HandshakeResponse41::decode(cut),
        Err(DecodeError::Truncated { .. })
    ));
    // Non-UTF-8 user name.
    let mut bad = b.clone();
    bad[32] = 0xC3;
    bad[33] = 0x28;
    assert!(matches!(
        HandshakeResponse41::decode(&bad),
        Err(DecodeError::InvalidUtf8 { .. })
    ));
}

#[test]
fn auth_switch_and_more_data() {
    let s = AuthSwitchRequest::with_nonce(CACHING_SHA2_PASSWORD, b"abcdefghijklmnopqrst");
    let mut b = BytesMut::new();
    s.encode(&mut b);
    assert_eq!(&b[..], b"\xfecaching_sha2_password\0abcdefghijklmnopqrst\0");
    let back = AuthSwitchRequest::decode(&b).unwrap();
    assert_eq!(back.nonce(), Some(*b"abcdefghijklmnopqrst"));
    assert_eq!(back, s);
    assert!(AuthSwitchRequest::decode(b"\xfe").is_err(), "old auth switch");
    assert!(AuthSwitchRequest::decode(b"\xfeno-nul").is_err());
    assert!(AuthSwitchRequest::decode(b"\x00x\0").is_err());
    assert_eq!(
        AuthSwitchRequest {
            plugin: "x".into(),
            data: vec![1; 5]
        }
        .nonce(),
        None
    );

    let m = AuthMoreData { data: vec![3] };
    let mut b = BytesMut::new();
    m.encode(&mut b);
    assert_eq!(&b[..], &[1, 3]);
    assert_eq!(AuthMoreData::decode(&b).unwrap(), m);
    assert_eq!(AuthMoreData::decode(&[]), Err(DecodeError::Empty));
    assert!(AuthMoreData::decode(&[2]).is_err());
}

#[test]
fn change_user() {
    let caps = BASE | CLIENT_CONNECT_ATTRS;
    let c = ChangeUser {
        username: "bob".into(),
        auth_response: vec![9; 20],
        database: "shop".into(),
        charset: Some(45),
        auth_plugin: Some(MYSQL_NATIVE_PASSWORD.into()),
        attributes: vec![("k".into(), "v".into())],
    };
    let mut b = BytesMut::new();
    c.encode(&mut b, caps);
    assert_eq!(b[0], COM_CHANGE_USER);
    assert_eq!(ChangeUser::decode(&b, caps).unwrap(), c);
    // Old-style: NUL-terminated auth, stops after the database.
    let raw = b"\x11bob\0pw\0shop\0";
    let old = ChangeUser::decode(raw, CLIENT_PROTOCOL_41).unwrap();
    assert_eq!(
        (old.auth_response.as_slice(), old.database.as_str(), old.charset),
        (&b"pw"[..], "shop", None)
    );
    let mut b = BytesMut::new();
    old.encode(&mut b, CLIENT_PROTOCOL_41);
    assert_eq!(&b[..], raw);
    assert!(ChangeUser::decode(b"\x03bob\0", caps).is_err());
    assert!(ChangeUser::decode(b"\x11bob\0\x05ab", caps).is_err());
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_]{1,16}"
}

proptest! {
    #[test]
    fn greeting_round_trip(ver in name(), id: u32, scramble: [u8; 20], caps: u32, ext: u32, charset: u8, status: u16, plugin in name()) {
        let caps = caps | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION;
        let g = HandshakeV10 {
            server_version: ver, connection_id: id, scramble, capabilities: caps,
            mariadb_ext_caps: if caps & CLIENT_MYSQL == 0 { ext } else { 0 },
            charset, status,
            auth_plugin: if caps & CLIENT_PLUGIN_AUTH != 0 { plugin } else { String::new() },
        };
        let mut b = BytesMut::new();
        g.encode(&mut b);
        prop_assert_eq!(HandshakeV10::decode(&b).unwrap(), g);
    }

    #[test]
    fn response_round_trip(caps: u32, user in name(), auth in prop::collection::vec(1u8..=255, 0..255),
                           db in prop::option::of(name()), plugin in name(), attrs in prop::collection::vec((name(), ".{0,8}"), 0..4), ext: u32) {
        let caps = caps | CLIENT_PROTOCOL_41;
        let r = HandshakeResponse41 {
            capabilities: caps, max_packet_size: 1024, charset: 33,
            mariadb_ext_caps: if caps & CLIENT_MYSQL == 0 { ext } else { 0 },
            username: user, auth_response: auth,
            database: db.filter(|_| caps & CLIENT_CONNECT_WITH_DB != 0),
            auth_plugin: (caps & CLIENT_PLUGIN_AUTH != 0).then_some(plugin),
            attributes: if caps & CLIENT_CONNECT_ATTRS != 0 { attrs } else { vec![] },
            zstd_level: (caps & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0).then_some(3),
        };
        let mut b = BytesMut::new();
        r.encode(&mut b);
        prop_assert_eq!(HandshakeResponse41::decode(&b).unwrap(), r);
    }

    #[test]
    fn decoders_never_panic(data in prop::collection::vec(any::<u8>(), 0..120), caps: u32) {
        let _ = HandshakeV10::decode(&data);
        let _ = SslRequest::decode(&data);
        let _ = SslRequest::is_ssl_request(&data);
        let _ = HandshakeResponse41::decode(&data);
        let _ = AuthSwitchRequest::decode(&data);
        let _ = AuthMoreData::decode(&data);
        let _ = ChangeUser::decode(&data, caps);
    }

    #[test]
    fn greeting_prefix_never_panics(cut in 0usize..120, flip in 0usize..120, v: u8) {
        // Mutations of a valid greeting reach deeper than random bytes do.
        let mut b = BytesMut::new();
        greeting(BASE).encode(&mut b);
        let mut b = b.to_vec();
        if let Some(x) = b.get_mut(flip) { *x = v; }
        b.truncate(cut);
        let _ = HandshakeV10::decode(&b);
    }
}
