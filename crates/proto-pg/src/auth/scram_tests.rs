//! Tests of the SCRAM-SHA-256 server: RFC 7677 vectors, exchanges against
//! postgres-protocol's client, and every rejection.

use super::*;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};

const NONCE: [u8; NONCE_RAW_LEN] = [7; NONCE_RAW_LEN];

/// Run a full exchange with postgres-protocol's client. Returns the
/// server's error, or whether the client accepted our server-final.
fn exchange(server: &mut ScramServer, password: &str, cb: ChannelBinding) -> Result<bool, ScramError> {
    let mut client = ScramSha256::new(password.as_bytes(), cb);
    let server_first = server.client_first(SCRAM_SHA_256, client.message())?;
    client
        .update(&server_first)
        .map_err(|_| ScramError::Malformed("client rejected server-first"))?;
    let server_final = server.client_final(client.message())?;
    Ok(client.finish(&server_final).is_ok())
}

fn verifier(password: &str) -> ScramVerifier {
    ScramVerifier::from_password(password, b"0123456789abcdef", 64)
}

#[test]
fn hmac_key_matches_new_from_slice() {
    for len in [0, 1, 32, 63, 64, 65, 200] {
        let key = vec![0xa5u8; len];
        let mut a = hmac_key(&key);
        let mut b = <HmacSha256 as Mac>::new_from_slice(&key).unwrap();
        a.update(b"msg");
        b.update(b"msg");
        assert_eq!(a.finalize().into_bytes(), b.finalize().into_bytes(), "{len}");
    }
}

#[test]
fn rfc7677_test_vector() {
    // RFC 7677 §3: user "user", password "pencil".
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let v = ScramVerifier::from_password("pencil", &salt, 4096);
    let mut s = ScramServer::new(v, NONCE);
    s.server_nonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_owned();
    let sf = s
        .client_first(SCRAM_SHA_256, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
        .unwrap();
    assert_eq!(
        sf,
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let fin = s
        .client_final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        .unwrap();
    assert_eq!(fin, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

#[test]
fn parse_display_round_trip() {
    let v = verifier("hunter2");
    let s = v.to_string();
    assert!(s.starts_with("SCRAM-SHA-256$64:"));
    let p: ScramVerifier = s.parse().unwrap();
    assert_eq!(p, v);
    assert_eq!(p.to_string(), s);
    assert_eq!(p.iterations(), 64);
    assert_eq!(p.salt(), b"0123456789abcdef");
    assert!(!format!("{p:?}").contains(&B64.encode(p.stored_key)));
}

#[test]
fn parse_rejects_bad_verifiers() {
    let good = verifier("x").to_string();
    let (head, keys) = good.rsplit_once('$').unwrap();
    let salt = B64.encode(b"0123456789abcdef");
    for bad in [
        String::new(),
        "md5abcdef".to_owned(),
        good.replacen("SCRAM-SHA-256", "SCRAM-SHA-1", 1),
        format!("SCRAM-SHA-256$0:{salt}${keys}"),
        format!("SCRAM-SHA-256$10000001:{salt}${keys}"),
        format!("SCRAM-SHA-256$99999999999:{salt}${keys}"),
        format!("SCRAM-SHA-256$+5:{salt}${keys}"),
        format!("SCRAM-SHA-256$:{salt}${keys}"),
        format!("SCRAM-SHA-256$4096:${keys}"),
        format!("SCRAM-SHA-256$4096:!!!${keys}"),
        format!("{head}$"),
        format!("{head}${}", keys.replace(':', "")),
        format!("{head}$AAAA:AAAA"),
        format!("{head}${keys}x"),
        good.replace('$', ""),
    ] {
        assert!(
            matches!(ScramVerifier::parse(&bad), Err(ScramError::InvalidVerifier(_))),
            "{bad:?}"
        );
    }
    let max = format!("SCRAM-SHA-256${MAX_ITERATIONS}:{salt}${keys}");
    assert_eq!(ScramVerifier::parse(&max).unwrap().iterations(), MAX_ITERATIONS);
}

#[test]
fn from_password_clamps_iterations() {
    assert_eq!(ScramVerifier::from_password("p", b"s", 0).iterations(), 1);
}

#[test]
fn full_exchange_with_postgres_protocol_client() {
    for cb in [ChannelBinding::unsupported(), ChannelBinding::unrequested()] {
        let mut s = ScramServer::new(verifier("correct horse"), NONCE);
        assert_eq!(exchange(&mut s, "correct horse", cb), Ok(true));
        assert_eq!(s.client_final(b"c=biws"), Err(ScramError::OutOfOrder));
    }
}

#[test]
fn wrong_password_is_invalid_proof() {
    let mut s = ScramServer::new(verifier("correct horse"), NONCE);
    assert_eq!(
        exchange(&mut s, "battery staple", ChannelBinding::unsupported()),
        Err(ScramError::InvalidProof)
    );
}

#[test]
fn postgres_protocol_verifier_authenticates() {
    let stored = postgres_protocol::password::scram_sha_256(b"p@ss word");
    let v = ScramVerifier::parse(&stored).unwrap();
    assert_eq!(v.to_string(), stored);
    assert_eq!(v.iterations(), DEFAULT_ITERATIONS);
    let mut s = ScramServer::new(v.clone(), NONCE);
    assert_eq!(exchange(&mut s, "p@ss word", ChannelBinding::unsupported()), Ok(true));
    // Our derivation agrees with postgres-protocol's for the same salt.
    assert_eq!(ScramVerifier::from_password("p@ss word", v.salt(), v.iterations()), v);
}

#[test]
fn mock_always_fails_and_is_stable() {
    let mut a = ScramServer::mock("ghost", b"seed", NONCE);
    let mut b = ScramServer::mock("ghost", b"seed", NONCE);
    let mut c = ScramServer::mock("other", b"seed", NONCE);
    let first = b"n,,n=,r=abc";
    let fa = a.client_first(SCRAM_SHA_256, first).unwrap();
    assert_eq!(fa, b.client_first(SCRAM_SHA_256, first).unwrap());
    assert_ne!(fa, c.client_first(SCRAM_SHA_256, first).unwrap());
    let text = String::from_utf8(fa).unwrap();
    assert!(text.ends_with(",i=4096"));
    let salt_b64 = text.split(",s=").nth(1).unwrap().split(',').next().unwrap();
    assert_eq!(B64.decode(salt_b64).unwrap().len(), DEFAULT_SALT_LEN);

    // Even the "right" password for the mock's own keys cannot succeed.
    for pw in ["", "seed", "ghost"] {
        let mut m = ScramServer::mock("ghost", b"seed", NONCE);
        assert_eq!(
            exchange(&mut m, pw, ChannelBinding::unsupported()),
            Err(ScramError::InvalidProof)
        );
    }
    // The mock flag dominates even a proof that matches the keys.
    let mut m = ScramServer {
        mock: true,
        ..ScramServer::new(verifier("pw"), NONCE)
    };
    assert_eq!(
        exchange(&mut m, "pw", ChannelBinding::unsupported()),
        Err(ScramError::InvalidProof)
    );
}

fn started(cb_header: &str) -> (ScramServer, String) {
    let mut s = ScramServer::new(verifier("pw"), NONCE);
    let sf = s
        .client_first(SCRAM_SHA_256, format!("{cb_header}n=,r=cn").as_bytes())
        .unwrap();
    let sf = String::from_utf8(sf).unwrap();
    let nonce = sf[2..sf.find(',').unwrap()].to_owned();
    (s, nonce)
}

#[test]
fn channel_binding_rules() {
    let mut s = ScramServer::new(verifier("pw"), NONCE);
    assert_eq!(
        s.client_first(SCRAM_SHA_256, b"p=tls-server-end-point,,n=,r=abc"),
        Err(ScramError::ChannelBindingUnsupported)
    );
    let mut s = ScramServer::new(verifier("pw"), NONCE);
    assert_eq!(
        s.client_first("SCRAM-SHA-256-PLUS", b"n,,n=,r=abc"),
        Err(ScramError::UnsupportedMechanism)
    );
    let proof = B64.encode([0u8; 32]);
    // Header "n,," must echo "biws"; "y,," must echo "eSws".
    for (hdr, wrong) in [("n,,", "eSws"), ("y,,", "biws"), ("n,,", "")] {
        let (mut s, nonce) = started(hdr);
        assert_eq!(
            s.client_final(format!("c={wrong},r={nonce},p={proof}").as_bytes()),
            Err(ScramError::ChannelBindingMismatch),
            "{hdr} {wrong}"
        );
    }
    for (hdr, right) in [("n,,", "biws"), ("y,,", "eSws")] {
        let (mut s, nonce) = started(hdr);
        assert_eq!(
            s.client_final(format!("c={right},r={nonce},p={proof}").as_bytes()),
            Err(ScramError::InvalidProof)
        );
    }
}

#[test]
fn client_first_rejections() {
    let cases: &[(&[u8], ScramError)] = &[
        (b"n,a=admin,n=,r=abc", ScramError::AuthzidUnsupported),
        (b"n,,m=ext,n=,r=abc", ScramError::UnsupportedExtension),
        (
            b"x,,n=,r=abc",
            ScramError::Malformed("invalid gs2 channel binding flag"),
        ),
        (b"", ScramError::Malformed("invalid gs2 channel binding flag")),
        (b"n,,r=abc", ScramError::Malformed("expected username attribute")),
        (b"n,,n=", ScramError::Malformed("expected nonce attribute")),
        (b"n,,n=,r=", ScramError::Malformed("invalid client nonce")),
        (b"n,,n=,r=a b", ScramError::Malformed("invalid client nonce")),
        (b"n,,n=,r=abc,", ScramError::Malformed("invalid extension attribute")),
        (b"n,x,n=,r=abc", ScramError::Malformed("invalid gs2 header")),
        (b"n,,n=\xff,r=abc", ScramError::Malformed("not UTF-8")),
    ];
    for (msg, err) in cases {
        let mut s = ScramServer::new(verifier("pw"), NONCE);
        assert_eq!(s.client_first(SCRAM_SHA_256, msg).as_ref(), Err(err));
        // An error ends the exchange.
        assert_eq!(
            s.client_first(SCRAM_SHA_256, b"n,,n=,r=abc"),
            Err(ScramError::OutOfOrder)
        );
    }
    let mut s = ScramServer::new(verifier("pw"), NONCE);
    let long = format!("n,,n=,r={}", "a".repeat(MAX_SCRAM_MESSAGE_LEN));
    assert_eq!(
        s.client_first(SCRAM_SHA_256, long.as_bytes()),
        Err(ScramError::MessageTooLong)
    );
    // Extensions and a non-empty SCRAM username are accepted (and ignored).
    let mut s = ScramServer::new(verifier("pw"), NONCE);
    assert!(s.client_first(SCRAM_SHA_256, b"n,,n=someone,r=abc,x=1").is_ok());
}

#[test]
fn client_final_rejections() {
    let (mut s, _) = started("n,,");
    let proof = B64.encode([0u8; 32]);
    assert_eq!(
        s.client_final(format!("c=biws,r=cnWRONG,p={proof}").as_bytes()),
        Err(ScramError::NonceMismatch)
    );
    let (_, nonce) = started("n,,");
    for (msg, err) in [
        (format!("c=biws,r={nonce}"), "expected proof attribute"),
        (format!("c=biws,r={nonce},p=AAAA"), "invalid proof"),
        (
            format!("r={nonce},c=biws,p={proof}"),
            "expected channel binding attribute",
        ),
        (format!("c=biws,p={proof}"), "expected nonce attribute"),
        (format!("c=biws,r={nonce},,p={proof}"), "invalid extension attribute"),
    ] {
        let (mut s, _) = started("n,,");
        assert_eq!(s.client_final(msg.as_bytes()), Err(ScramError::Malformed(err)), "{msg}");
    }
    let mut fresh = ScramServer::new(verifier("pw"), NONCE);
    assert_eq!(fresh.client_final(b"c=biws"), Err(ScramError::OutOfOrder));
}

#[test]
fn verify_password_accepts_only_the_password() {
    let v = verifier("s3cret");
    assert!(v.verify_password("s3cret"));
    assert!(!v.verify_password("s3cret "));
    assert!(!v.verify_password(""));
    // A verifier parsed back from its text form checks the same way.
    let parsed: ScramVerifier = v.to_string().parse().unwrap();
    assert!(parsed.verify_password("s3cret"));
    assert!(!parsed.verify_password("other"));
}
