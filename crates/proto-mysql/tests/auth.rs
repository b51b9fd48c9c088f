//! Password plugin computations. Fixed vectors were computed independently with
//! Python's `hashlib` (password `secret`, nonce bytes 1..=20); the native stored
//! hash is MariaDB's own `PASSWORD('secret')` output.

use gatehouse_proto_mysql::auth::{caching_sha2, clear_password, ct_eq, generate_nonce, native_password};
use proptest::prelude::*;

fn nonce() -> [u8; 20] {
    std::array::from_fn(|i| i as u8 + 1)
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn native_known_vectors() {
    assert_eq!(
        native_password::scramble(b"secret", &nonce()).to_vec(),
        unhex("b32bb3a583e1340c0a1108d58b1be49781ad8c2f")
    );
    let stored = native_password::stored_hash(b"secret");
    assert_eq!(
        native_password::format_stored(&stored),
        "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
    );
    assert_eq!(
        native_password::parse_stored("*14e65567abdb5135d0cfd9a70b3032c179a49ee7"),
        Some(stored)
    );
    for bad in [
        "",
        "*",
        "14E65567ABDB5135D0CFD9A70B3032C179A49EE7",
        "*14E65567ABDB5135D0CFD9A70B3032C179A49EEG",
        "*14E6",
    ] {
        assert_eq!(native_password::parse_stored(bad), None, "{bad}");
    }
}

#[test]
fn native_verify() {
    let n = nonce();
    let stored = native_password::stored_hash(b"secret");
    assert!(native_password::verify(
        &stored,
        &n,
        &native_password::scramble(b"secret", &n)
    ));
    assert!(!native_password::verify(
        &stored,
        &n,
        &native_password::scramble(b"Secret", &n)
    ));
    let mut other_nonce = n;
    other_nonce[0] ^= 1;
    assert!(!native_password::verify(
        &stored,
        &other_nonce,
        &native_password::scramble(b"secret", &n)
    ));
    assert!(!native_password::verify(&stored, &n, b""));
    assert!(!native_password::verify(&stored, &n, &[0u8; 19]));
    // Empty password: empty response on the wire, and only then does it match.
    let empty = native_password::stored_hash(b"");
    assert!(native_password::client_response(b"", &n).is_empty());
    assert!(native_password::verify(&empty, &n, b""));
    assert!(!native_password::verify(
        &empty,
        &n,
        &native_password::scramble(b"x", &n)
    ));
}

#[test]
fn caching_sha2_known_vectors_and_verify() {
    let n = nonce();
    assert_eq!(
        caching_sha2::scramble(b"secret", &n).to_vec(),
        unhex("746ebe205d56a0707acb3e796e834e0dd7b1d61743b26bd5202c7a623230c7c9")
    );
    let stored = caching_sha2::stored_hash(b"secret");
    assert_eq!(
        stored.to_vec(),
        unhex("3881219d087dd9c634373fd33dfa33a2cb6bfc6c520b64b8bb60ef2ceb534ae7")
    );
    assert!(caching_sha2::verify_fast(
        &stored,
        &n,
        &caching_sha2::scramble(b"secret", &n)
    ));
    assert!(!caching_sha2::verify_fast(
        &stored,
        &n,
        &caching_sha2::scramble(b"secreT", &n)
    ));
    assert!(!caching_sha2::verify_fast(&stored, &n, b""));
    assert!(!caching_sha2::verify_fast(&stored, &n, &[1u8; 31]));
    assert!(caching_sha2::verify_fast(&caching_sha2::stored_hash(b""), &n, b""));
    assert!(caching_sha2::client_response(b"", &n).is_empty());
    assert_eq!(
        (
            caching_sha2::FAST_AUTH_SUCCESS,
            caching_sha2::PERFORM_FULL_AUTH,
            caching_sha2::REQUEST_PUBLIC_KEY
        ),
        (3, 4, 2)
    );
}

#[test]
fn clear_password_and_helpers() {
    assert_eq!(clear_password::encode(b"pw"), b"pw\0");
    assert_eq!(clear_password::decode(b"pw\0"), b"pw");
    assert_eq!(clear_password::decode(b"pw"), b"pw");
    assert!(ct_eq(b"abc", b"abc") && !ct_eq(b"abc", b"abd") && !ct_eq(b"ab", b"abc"));
    let a = generate_nonce();
    assert!(a.iter().all(|&c| (0x21..=0x7e).contains(&c) && c != b'$'));
    assert_ne!(a, generate_nonce());
}

proptest! {
    #[test]
    fn right_password_verifies_wrong_does_not(pw in prop::collection::vec(any::<u8>(), 1..40), other in prop::collection::vec(any::<u8>(), 1..40), n: [u8; 20]) {
        let stored = native_password::stored_hash(&pw);
        prop_assert!(native_password::verify(&stored, &n, &native_password::scramble(&pw, &n)));
        let stored2 = caching_sha2::stored_hash(&pw);
        prop_assert!(caching_sha2::verify_fast(&stored2, &n, &caching_sha2::scramble(&pw, &n)));
        if other != pw {
            prop_assert!(!native_password::verify(&stored, &n, &native_password::scramble(&other, &n)));
            prop_assert!(!caching_sha2::verify_fast(&stored2, &n, &caching_sha2::scramble(&other, &n)));
        }
    }

    #[test]
    fn verify_never_panics(resp in prop::collection::vec(any::<u8>(), 0..64), n: [u8; 20], s: [u8; 20]) {
        let _ = native_password::verify(&s, &n, &resp);
        let _ = native_password::parse_stored(&String::from_utf8_lossy(&resp));
    }
}
