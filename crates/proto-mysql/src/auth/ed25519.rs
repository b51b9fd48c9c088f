//! MariaDB's `client_ed25519` plugin (server side `ed25519`): the server
//! sends a 32-byte nonce in an AuthSwitchRequest, and the client answers with
//! the 64-byte Ed25519 signature of that nonce under a key derived from the
//! password. The derivation differs from RFC 8032 in one point: the expanded
//! secret key is `SHA-512(password)` for a password of any length (RFC 8032
//! hashes a 32-byte seed). Clamping, the nonce `r = SHA-512(prefix ‖ m)` and
//! `S = r + SHA-512(R ‖ A ‖ m)·a` are RFC 8032's, so an ordinary Ed25519
//! verifier checks the signature against the public key `A`, which the server
//! stores base64-encoded without padding (`mysql.global_priv`,
//! `ed25519_password()`).
//!
//! Reference: MariaDB Knowledge Base "Authentication Plugin - ed25519";
//! `plugin/auth_ed25519/ref10/sign.c` (`crypto_sign` keyed by the password).

use ed25519_dalek::hazmat::{ExpandedSecretKey, raw_sign};
use ed25519_dalek::{Sha512, Signature, VerifyingKey};
use sha2::Digest as _;
use zeroize::Zeroizing;

/// The client-side plugin name, as the server names it in AuthSwitchRequest.
pub const CLIENT_PLUGIN: &str = "client_ed25519";
/// Length of the server's nonce (`NONCE_BYTES` in MariaDB's plugin).
pub const NONCE_LEN: usize = 32;
/// Length of the client's answer: an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;
/// Length of the public key the server stores.
pub const PUBLIC_KEY_LEN: usize = 32;

fn expanded(password: &[u8]) -> ExpandedSecretKey {
    let mut hash = Zeroizing::new([0u8; 64]);
    hash.copy_from_slice(&sha2::Sha512::digest(password));
    ExpandedSecretKey::from_bytes(&hash)
}

/// The signature a client sends for `password` and the server's `nonce`.
pub fn client_response(password: &[u8], nonce: &[u8]) -> [u8; SIGNATURE_LEN] {
    let esk = expanded(password);
    let public = VerifyingKey::from(&esk);
    raw_sign::<Sha512>(&esk, nonce, &public).to_bytes()
}

/// The public key the server stores for `password`.
pub fn public_key(password: &[u8]) -> [u8; PUBLIC_KEY_LEN] {
    VerifyingKey::from(&expanded(password)).to_bytes()
}

/// Checks a client's `signature` of `nonce` against a stored public key
/// (strict verification: no malleable or small-order encodings).
pub fn verify(public: &[u8; PUBLIC_KEY_LEN], nonce: &[u8], signature: &[u8]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(public) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(signature) else {
        return false;
    };
    key.verify_strict(nonce, &sig).is_ok()
}

/// The nonce of a `client_ed25519` AuthSwitchRequest's data: its first 32
/// bytes (servers send exactly 32; a trailing NUL is tolerated).
pub fn nonce_of(data: &[u8]) -> Option<&[u8]> {
    match data.len() {
        NONCE_LEN => Some(data),
        33 if data[NONCE_LEN] == 0 => Some(&data[..NONCE_LEN]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_verifies_under_the_password_public_key() {
        let nonce = [7u8; NONCE_LEN];
        let sig = client_response(b"secret", &nonce);
        assert!(verify(&public_key(b"secret"), &nonce, &sig));
        assert!(!verify(&public_key(b"other"), &nonce, &sig));
        assert!(!verify(&public_key(b"secret"), &[8u8; NONCE_LEN], &sig));
        let mut bad = sig;
        bad[10] ^= 1;
        assert!(!verify(&public_key(b"secret"), &nonce, &bad));
        assert!(!verify(&public_key(b"secret"), &nonce, &sig[..63]));
    }

    #[test]
    fn long_passwords_are_hashed_whole() {
        let a = public_key(&[b'x'; 100]);
        let mut longer = vec![b'x'; 100];
        longer.push(b'y');
        assert_ne!(a, public_key(&longer));
    }

    proptest::proptest! {
        /// Arbitrary keys, nonces and signatures are refused, never a panic.
        #[test]
        fn arbitrary_input_is_refused(key in proptest::prelude::any::<[u8; 32]>(),
                                      sig in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)) {
            proptest::prop_assert!(!verify(&key, &[1u8; NONCE_LEN], &sig));
        }
    }

    #[test]
    fn nonce_is_32_bytes_or_32_and_nul() {
        assert_eq!(nonce_of(&[1u8; 32]).map(<[u8]>::len), Some(32));
        let mut d = vec![1u8; 32];
        d.push(0);
        assert_eq!(nonce_of(&d).map(<[u8]>::len), Some(32));
        assert!(nonce_of(&[1u8; 20]).is_none());
    }
}
