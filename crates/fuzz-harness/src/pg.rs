//! Harnesses of the PostgreSQL codec (`gatehouse-proto-pg`): framing,
//! startup packets, the regular and extended-query messages, the SCRAM and
//! md5 server side, and the backend startup state machine.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::{BufMut, BytesMut};
use gatehouse_proto_pg::auth::md5::{md5_stored, md5_verify};
use gatehouse_proto_pg::auth::scram::{
    MAX_ITERATIONS, NONCE_RAW_LEN, SCRAM_SHA_256, ScramError, ScramServer, ScramVerifier,
};
use gatehouse_proto_pg::backend_startup::{BackendStartup, Progress};
use gatehouse_proto_pg::extended::{parse_bind, parse_parse, parse_target, put_bind, put_parse, put_target};
use gatehouse_proto_pg::frame::{FrameError, HEADER_LEN, PQ_LARGE_MESSAGE_LIMIT, Step, next_frame};
use gatehouse_proto_pg::messages::{
    AuthRequest, body, parse_auth, parse_backend_key, parse_data_row, parse_error, parse_parameter_status,
    parse_password, parse_ready, parse_sasl_initial, put_auth_cleartext, put_auth_md5, put_auth_ok, put_auth_sasl,
    put_auth_sasl_data, put_backend_key, put_error, put_message, put_parameter_status, put_password, put_ready,
    put_sasl_initial,
};
use gatehouse_proto_pg::startup::{
    GSSENC_REQUEST_CODE, MAX_STARTUP_PACKET_LEN, SSL_REQUEST_CODE, StartupPacket, cancel_request, parse_startup,
    startup_message,
};
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};

use crate::input::Input;

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `next_frame` on arbitrary bytes: input is `hold: u16`, `max_len: u32`,
/// then the buffer. Every answer must agree with the header: a whole frame
/// lies within the buffer and the limit, a streamed one is larger than both
/// the buffer and `hold`, and an error names the declared length.
pub fn pg_frame(data: &[u8]) {
    let mut input = Input::new(data);
    let hold = usize::from(input.u16());
    let max = input.u32() as usize;
    let buf = input.rest();
    check_frame(buf, hold, max);
    // A stream of messages is walked frame by frame, each checked alike.
    let mut pos = 0;
    while let Ok(Step::Whole { len, .. }) = next_frame(&buf[pos..], hold, max) {
        pos += len;
        check_frame(&buf[pos..], hold, max);
    }
}

fn check_frame(buf: &[u8], hold: usize, max: usize) {
    let step = next_frame(buf, hold, max);
    if buf.len() < HEADER_LEN {
        assert_eq!(step, Ok(Step::NeedMore));
        return;
    }
    let declared = i32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
    let limit = max.min(PQ_LARGE_MESSAGE_LIMIT);
    let len = usize::try_from(declared).map(|d| d + 1).unwrap_or(0);
    match step {
        Ok(Step::Whole { tag, len: got }) => {
            assert_eq!((tag, got), (buf[0], len));
            assert!((HEADER_LEN..=buf.len()).contains(&got) && got <= limit);
            // The frame does not depend on what follows it, and one byte
            // short it is not whole.
            let mut longer = buf.to_vec();
            longer.push(0);
            assert_eq!(next_frame(&longer, hold, max), step);
            assert!(matches!(
                next_frame(&buf[..got - 1], hold, max),
                Ok(Step::NeedMore | Step::Stream { .. })
            ));
        }
        Ok(Step::Stream { tag, len: got }) => {
            assert_eq!((tag, got), (buf[0], len));
            assert!(got > buf.len() && got > hold && got <= limit);
        }
        Ok(Step::NeedMore) => {
            assert!(declared >= 4 && len > buf.len() && len <= hold && len <= limit);
        }
        Err(FrameError::BadLength(n)) => assert!(n == i64::from(declared) && declared < 4),
        Err(FrameError::TooLarge { len: got, limit: l }) => {
            assert!(declared >= 4 && got == len && l == limit && got > l);
        }
    }
}

/// `parse_startup` on arbitrary bytes. A parsed packet used exactly its
/// declared length, parses alike without what follows it, and writes back
/// byte for byte (`startup_message`, `cancel_request`); an error does not
/// depend on later bytes.
pub fn pg_startup(data: &[u8]) {
    let parsed = parse_startup(data);
    match &parsed {
        Ok(Some((packet, used))) => {
            let used = *used;
            assert!(used <= data.len() && (8..=MAX_STARTUP_PACKET_LEN).contains(&used));
            assert_eq!(u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize, used);
            let own = &data[..used];
            assert_eq!(parse_startup(own), Ok(Some((packet.clone(), used))));
            let code = |c: u32| [&8u32.to_be_bytes()[..], &c.to_be_bytes()[..]].concat();
            match packet {
                StartupPacket::SslRequest => assert_eq!(own, code(SSL_REQUEST_CODE)),
                StartupPacket::GssEncRequest => assert_eq!(own, code(GSSENC_REQUEST_CODE)),
                StartupPacket::Cancel { pid, secret } => assert_eq!(own, cancel_request(*pid, *secret)),
                StartupPacket::Startup {
                    minor,
                    params,
                    unsupported_options,
                } => {
                    assert!(params.iter().all(|(k, _)| !k.is_empty() && !k.starts_with("_pq_.")));
                    if *minor == 0 && unsupported_options.is_empty() {
                        let written = startup_message(params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                        assert_eq!(own, written);
                    }
                }
            }
        }
        Ok(None) => {
            if let Some(h) = data.get(..4) {
                assert!(data.len() < u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize);
            }
        }
        Err(e) => {
            let mut longer = data.to_vec();
            longer.push(0x55);
            assert_eq!(parse_startup(&longer).as_ref().err(), Some(e));
        }
    }
}

/// Every decoder of a whole regular message (messages.rs and extended.rs)
/// on arbitrary bytes taken as one message: whatever decodes writes back
/// with the matching encoder and decodes to the same value (byte for byte
/// where the message has one form).
pub fn pg_messages(msg: &[u8]) {
    let b = body(msg);

    if let Ok(f) = parse_error(msg) {
        let o = &mut BytesMut::new();
        put_error(o, &f.severity, &f.code, &f.message);
        assert_eq!(parse_error(o), Ok(f));
    }
    if let Ok((name, value)) = parse_parameter_status(msg) {
        let o = &mut BytesMut::new();
        put_parameter_status(o, &name, &value);
        assert_eq!(parse_parameter_status(o), Ok((name, value)));
    }
    if let Ok((pid, secret)) = parse_backend_key(msg) {
        let o = &mut BytesMut::new();
        put_backend_key(o, pid, secret);
        assert_eq!(body(o), b);
    }
    if let Ok(status) = parse_ready(msg) {
        let o = &mut BytesMut::new();
        put_ready(o, status);
        assert_eq!(body(o), b);
    }
    if let Ok(cols) = parse_data_row(msg) {
        let used: usize = 2 + cols.iter().map(|c| 4 + c.as_ref().map_or(0, Vec::len)).sum::<usize>();
        assert!(used <= b.len());
        let o = &mut BytesMut::new();
        put_message(o, b'D', |m| {
            m.put_u16(u16::try_from(cols.len()).expect("at most u16::MAX columns"));
            for c in &cols {
                match c {
                    None => m.put_i32(-1),
                    Some(v) => {
                        m.put_i32(i32::try_from(v.len()).expect("a column fits its message"));
                        m.put_slice(v);
                    }
                }
            }
        });
        assert_eq!(parse_data_row(o), Ok(cols));
    }
    if let Ok(req) = parse_auth(msg) {
        let o = &mut BytesMut::new();
        match &req {
            AuthRequest::Ok => put_auth_ok(o),
            AuthRequest::Cleartext => put_auth_cleartext(o),
            AuthRequest::Md5 { salt } => put_auth_md5(o, *salt),
            AuthRequest::Sasl { mechanisms } => {
                assert!(mechanisms.iter().all(|m| !m.is_empty()));
                put_auth_sasl(o, &mechanisms.iter().map(String::as_str).collect::<Vec<_>>());
            }
            AuthRequest::SaslContinue(d) => put_auth_sasl_data(o, false, d),
            AuthRequest::SaslFinal(d) => put_auth_sasl_data(o, true, d),
            AuthRequest::Other(code) => put_message(o, b'R', |m| m.put_i32(*code)),
        }
        assert_eq!(parse_auth(o), Ok(req));
    }
    if let Ok((mechanism, data)) = parse_sasl_initial(msg) {
        let o = &mut BytesMut::new();
        put_sasl_initial(o, &mechanism, &data);
        assert_eq!(parse_sasl_initial(o), Ok((mechanism, data)));
    }
    if let Ok(pw) = parse_password(msg) {
        let o = &mut BytesMut::new();
        put_password(o, pw, true);
        assert_eq!(body(o), b);
    }
    if let Ok(p) = parse_parse(msg) {
        let o = &mut BytesMut::new();
        put_parse(o, p.name, p.query, p.param_types);
        assert_eq!(body(o), b);
    }
    if let Ok(bind) = parse_bind(msg) {
        let o = &mut BytesMut::new();
        put_bind(o, bind.portal, bind.statement, bind.rest);
        assert_eq!(body(o), b);
    }
    if let Ok((kind, name)) = parse_target(msg) {
        let o = &mut BytesMut::new();
        put_target(o, msg[0], kind, name);
        assert_eq!((o[0], body(o)), (msg[0], b));
    }
}

/// Salt of the verifiers the SCRAM harness makes.
const SALT: &[u8] = b"gatehouse-fuzz-salt";
/// The server nonce of every SCRAM exchange here (the harness must be
/// deterministic; real callers draw it at random).
const NONCE: [u8; NONCE_RAW_LEN] = [0x5a; NONCE_RAW_LEN];

/// The server side of SCRAM-SHA-256 and md5, by the first byte:
/// 0: made-up client messages, which never verify, and after which every
/// call is out of order; 1: a genuine exchange with postgres-protocol's
/// client, right or wrong password, client-final optionally tampered with
/// (only the untouched one with the right password verifies, and the client
/// accepts the server's signature); 2: a stored verifier's text, which
/// parses back to itself once shown; 3: md5, where exactly the genuine
/// response verifies.
pub fn pg_scram_server(data: &[u8]) {
    let mut input = Input::new(data);
    match input.u8() % 4 {
        0 => scram_made_up(&mut input),
        1 => scram_genuine(&mut input),
        2 => scram_verifier_text(input.rest()),
        _ => md5(&mut input),
    }
}

fn scram_made_up(input: &mut Input<'_>) {
    let flags = input.u8();
    let mechanism = match flags % 4 {
        0 | 1 => SCRAM_SHA_256.to_owned(),
        2 => format!("{SCRAM_SHA_256}-PLUS"),
        _ => lossy(input.chunk()),
    };
    let first = input.chunk();
    let fin = input.rest();
    let mut server = if flags & 0x10 != 0 {
        ScramServer::mock("alice", b"mock seed", NONCE)
    } else {
        ScramServer::new(
            ScramVerifier::from_password("pencil", SALT, 1 + u32::from(flags >> 5)),
            NONCE,
        )
    };
    match server.client_first(&mechanism, first) {
        Ok(server_first) => {
            let server_first = String::from_utf8(server_first).expect("server-first is UTF-8");
            let rest = server_first.strip_prefix("r=").expect("server-first starts with r=");
            let (nonce, rest) = rest.split_once(',').expect("server-first has s= and i=");
            let ours = B64.encode(NONCE);
            assert!(nonce.len() > ours.len() && nonce.ends_with(&ours));
            assert!(rest.starts_with("s=") && rest.contains(",i="));
            assert!(
                server.client_final(fin).is_err(),
                "a client-final made up without the password verified"
            );
        }
        Err(_) => assert_eq!(server.client_final(fin), Err(ScramError::OutOfOrder)),
    }
    assert_eq!(server.client_first(SCRAM_SHA_256, first), Err(ScramError::OutOfOrder));
    assert_eq!(server.client_final(fin), Err(ScramError::OutOfOrder));
}

/// Printable ASCII, which SASLprep leaves alone: the client and our server
/// (which skips SASLprep) then derive the same keys.
fn printable(b: &[u8]) -> String {
    b.iter().map(|&c| char::from(0x21 + c % 94)).collect()
}

fn scram_genuine(input: &mut Input<'_>) {
    let flags = input.u8();
    let password = printable(input.chunk());
    let wrong = flags & 1 != 0;
    let iterations = 1 + u32::from(flags >> 5);
    let binding = match (flags >> 1) % 3 {
        0 => ChannelBinding::unsupported(),
        1 => ChannelBinding::unrequested(),
        _ => ChannelBinding::tls_server_end_point(vec![1, 2, 3]),
    };
    let plus = (flags >> 1) % 3 == 2;
    let tamper = input.u8();
    let at = usize::from(input.u16());
    let extra = input.rest();

    let mut server = ScramServer::new(ScramVerifier::from_password(&password, SALT, iterations), NONCE);
    let client_password = if wrong { format!("{password}x") } else { password };
    let mut client = ScramSha256::new(client_password.as_bytes(), binding);
    let first = server.client_first(SCRAM_SHA_256, client.message());
    if plus {
        assert_eq!(first, Err(ScramError::ChannelBindingUnsupported));
        return;
    }
    let server_first = first.expect("the server accepts a genuine client-first");
    client
        .update(&server_first)
        .expect("postgres-protocol's client accepts our server-first");
    let genuine = client.message().to_vec();
    let mut sent = genuine.clone();
    if !sent.is_empty() {
        let at = at % sent.len();
        match tamper % 4 {
            1 => sent[at] ^= extra.first().copied().unwrap_or(1).max(1),
            2 => sent.truncate(at),
            3 => {
                sent.splice(at..at, extra.iter().copied());
            }
            _ => {}
        }
    }
    let result = server.client_final(&sent);
    if sent != genuine {
        assert!(result.is_err(), "a tampered client-final verified");
    } else if wrong {
        assert_eq!(result, Err(ScramError::InvalidProof));
    } else {
        let server_final = result.expect("the right password verifies");
        client
            .finish(&server_final)
            .expect("postgres-protocol's client accepts our server signature");
    }
}

fn scram_verifier_text(data: &[u8]) {
    let text = lossy(data);
    if let Ok(v) = ScramVerifier::parse(&text) {
        assert!((1..=MAX_ITERATIONS).contains(&v.iterations()));
        assert!(!v.salt().is_empty());
        let shown = v.to_string();
        let again = ScramVerifier::parse(&shown).expect("a shown verifier parses");
        assert_eq!(again, v);
        assert_eq!(again.to_string(), shown);
    }
}

fn md5(input: &mut Input<'_>) {
    let user = lossy(input.chunk());
    let password = lossy(input.chunk());
    let salt = input.array::<4>();
    let response = input.rest();
    let stored = md5_stored(&user, &password);
    let genuine = md5_hash(user.as_bytes(), password.as_bytes(), salt);
    assert!(md5_verify(&stored, salt, genuine.as_bytes()));
    assert_eq!(md5_verify(&stored, salt, response), response == genuine.as_bytes());
    // Any text as the stored form: only the user's own verifies the response.
    let text = lossy(response);
    if md5_verify(&text, salt, genuine.as_bytes()) {
        assert_eq!(text, stored);
    }
}

/// The proxy's side of connecting to a server, fed a stream of server
/// messages (first byte: bit 0 set means no password is configured). Ready
/// comes only on ReadyForQuery after AuthenticationOk, with the
/// ParameterStatus and BackendKeyData seen since; the replies written are
/// whole PasswordMessages, and only in answer to an authentication request.
pub fn pg_backend_startup(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let password = (flags & 1 == 0).then_some("pw");
    let stream = input.rest();
    let mut startup = BackendStartup::new("u", password);
    let mut out = BytesMut::new();
    let mut authenticated = false;
    let mut parameters = 0usize;
    let mut key = None;
    let mut pos = 0;
    while let Ok(Step::Whole { tag, len }) = next_frame(&stream[pos..], 1 << 16, 1 << 20) {
        let msg = &stream[pos..pos + len];
        pos += len;
        let before = out.len();
        match startup.handle(msg, &mut out) {
            Ok(Progress::Continue) => {
                match tag {
                    b'R' => {
                        assert!(!authenticated);
                        let req = parse_auth(msg).expect("an accepted 'R' parses");
                        let reply = &out[before..];
                        match req {
                            AuthRequest::Ok => {
                                authenticated = true;
                                assert!(reply.is_empty());
                            }
                            AuthRequest::Cleartext => assert_eq!(parse_password(reply), Ok(&b"pw"[..])),
                            AuthRequest::Md5 { salt } => {
                                let hash = md5_hash(b"u", b"pw", salt);
                                assert_eq!(parse_password(reply), Ok(hash.as_bytes()));
                            }
                            _ => {}
                        }
                    }
                    b'S' => {
                        assert!(authenticated);
                        parameters += 1;
                    }
                    b'K' => {
                        assert!(authenticated);
                        key = Some(parse_backend_key(msg).expect("an accepted 'K' parses"));
                    }
                    b'N' => {}
                    other => panic!("message '{}' was accepted during startup", char::from(other)),
                }
                if tag != b'R' {
                    assert_eq!(out.len(), before, "a reply to a message that asks for none");
                }
            }
            Ok(Progress::Ready(status)) => {
                assert!(authenticated && tag == b'Z' && matches!(status, b'I' | b'T' | b'E'));
                assert_eq!(startup.parameters().len(), parameters);
                assert_eq!(startup.key(), key);
                assert_eq!(out.len(), before);
                break;
            }
            Err(_) => break,
        }
    }
    // Every reply is a whole PasswordMessage.
    let mut at = 0;
    while at < out.len() {
        match next_frame(&out[at..], 0, 1 << 20) {
            Ok(Step::Whole { tag: b'p', len }) => at += len,
            other => panic!("a reply that is not a whole PasswordMessage: {other:?}"),
        }
    }
}
