//! Property tests for `auth`: SCRAM/MD5 parsers never panic on arbitrary input,
//! and random passwords complete a full SCRAM exchange against
//! postgres-protocol's independent client.

use gatehouse_proto_pg::auth::md5::{md5_stored, md5_verify};
use gatehouse_proto_pg::auth::scram::{SCRAM_SHA_256, ScramError, ScramServer, ScramVerifier};
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use proptest::prelude::*;

const NONCE: [u8; 18] = [42; 18];

fn verifier(password: &str, salt: &[u8]) -> ScramVerifier {
    // Low iteration count keeps the property fast; the algorithm is identical.
    ScramVerifier::from_password(password, salt, 16)
}

fn started() -> ScramServer {
    let mut s = ScramServer::new(verifier("pw", b"salt"), NONCE);
    assert!(s.client_first(SCRAM_SHA_256, b"n,,n=,r=abc").is_ok());
    s
}

proptest! {
    #[test]
    fn verifier_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = ScramVerifier::parse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn verifier_parse_near_miss_never_panics(tail in "[0-9A-Za-z+/=:$]{0,120}") {
        let _ = ScramVerifier::parse(&format!("SCRAM-SHA-256${tail}"));
    }

    #[test]
    fn verifier_round_trips(
        password in ".{0,20}",
        salt in proptest::collection::vec(any::<u8>(), 1..40),
        iterations in 1u32..64,
    ) {
        let v = ScramVerifier::from_password(&password, &salt, iterations);
        prop_assert_eq!(ScramVerifier::parse(&v.to_string()), Ok(v));
    }

    #[test]
    fn client_first_never_panics(
        mechanism in ".{0,20}",
        data in proptest::collection::vec(any::<u8>(), 0..2000),
    ) {
        let mut s = ScramServer::new(verifier("pw", b"salt"), NONCE);
        let _ = s.client_first(&mechanism, &data);
        let _ = s.client_first(SCRAM_SHA_256, &data);
        let _ = s.client_final(&data);
    }

    #[test]
    fn client_first_structured_never_panics(tail in "[a-zA-Z0-9=,~!]{0,60}") {
        let mut s = ScramServer::new(verifier("pw", b"salt"), NONCE);
        let _ = s.client_first(SCRAM_SHA_256, format!("n,,{tail}").as_bytes());
    }

    #[test]
    fn client_final_never_panics(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut s = started();
        let r = s.client_final(&data);
        prop_assert!(r.is_err());
        prop_assert_eq!(s.client_final(&data), Err(ScramError::OutOfOrder));
    }

    #[test]
    fn client_final_structured_never_panics(tail in "[a-zA-Z0-9=,+/]{0,80}") {
        let mut s = started();
        let _ = s.client_final(format!("c=biws,r={tail}").as_bytes());
    }

    /// ASCII passwords: SASLprep (applied by the client) is the identity or
    /// falls back to raw bytes, so our raw-bytes derivation must agree.
    #[test]
    fn random_password_full_exchange(
        password in "[\\x01-\\x7f]{0,40}",
        wrong in "[\\x01-\\x7f]{0,40}",
        salt in proptest::collection::vec(any::<u8>(), 1..32),
        nonce in any::<[u8; 18]>(),
        y_flag in any::<bool>(),
    ) {
        let cb = || if y_flag { ChannelBinding::unrequested() } else { ChannelBinding::unsupported() };
        let v = verifier(&password, &salt);

        let mut server = ScramServer::new(v.clone(), nonce);
        let mut client = ScramSha256::new(password.as_bytes(), cb());
        let first = server.client_first(SCRAM_SHA_256, client.message());
        prop_assert!(first.is_ok());
        prop_assert!(client.update(&first.unwrap_or_default()).is_ok());
        let fin = server.client_final(client.message());
        prop_assert!(fin.is_ok(), "{:?}", fin);
        prop_assert!(client.finish(&fin.unwrap_or_default()).is_ok());

        if wrong != password {
            let mut server = ScramServer::new(v, nonce);
            let mut client = ScramSha256::new(wrong.as_bytes(), cb());
            let first = server.client_first(SCRAM_SHA_256, client.message());
            prop_assert!(client.update(&first.unwrap_or_default()).is_ok());
            prop_assert_eq!(server.client_final(client.message()), Err(ScramError::InvalidProof));
        }
    }

    #[test]
    fn md5_matches_client(
        user in "[a-z_][a-z0-9_]{0,20}",
        password in ".{0,30}",
        salt in any::<[u8; 4]>(),
        stored_junk in ".{0,40}",
        response in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let stored = md5_stored(&user, &password);
        let good = md5_hash(user.as_bytes(), password.as_bytes(), salt);
        prop_assert!(md5_verify(&stored, salt, good.as_bytes()));
        let _ = md5_verify(&stored_junk, salt, &response);
    }
}
