//! The RSA exchange of `caching_sha2_password` full authentication over a
//! connection without TLS: the client asks for the server's public key
//! ([`super::caching_sha2::REQUEST_PUBLIC_KEY`]) unless it already has it,
//! the server sends it as PEM in an AuthMoreData packet, and the client sends
//! `RSA-OAEP(SHA-1)((password ‖ NUL) XOR nonce)`, the nonce repeated to the
//! length of the password. XOR with the connection's nonce stops a captured
//! ciphertext from being replayed on another connection.
//!
//! Reference: MySQL "Caching_sha2_password information" and
//! `sql/auth/sha2_password.cc` (`RSA_PKCS1_OAEP_PADDING`, MySQL 8.0.5+).

use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{PrivateKey, PublicKey};
use sha1_oaep::Sha1;
use zeroize::Zeroizing;

/// Smallest key accepted, in bits: MySQL generates 2048-bit keys; anything
/// smaller is too weak to carry a password.
pub const MIN_KEY_BITS: usize = 2048;
/// Largest key accepted from a server, in bits (bounds the work a hostile
/// server can cause and the PEM it can send).
pub const MAX_KEY_BITS: usize = 16384;
/// OAEP with SHA-1 leaves `k - 2·20 - 2` bytes for the message.
const OAEP_SHA1_OVERHEAD: usize = 42;

#[derive(Debug, thiserror::Error)]
pub enum RsaError {
    #[error("not an RSA key in PEM (PKCS#8 or PKCS#1)")]
    BadKey,
    #[error("RSA key of {0} bits: keys from {MIN_KEY_BITS} to {MAX_KEY_BITS} bits are accepted")]
    KeySize(usize),
    #[error("the password is too long for the server's RSA key")]
    TooLong,
    #[error("RSA encryption failed")]
    Encrypt,
    #[error("the RSA-encrypted password could not be decrypted")]
    Decrypt,
}

/// `(password ‖ NUL) XOR nonce`, the nonce repeated.
fn xor_with_nonce(data: &[u8], nonce: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(data.len()));
    for (i, b) in data.iter().enumerate() {
        let k = if nonce.is_empty() { 0 } else { nonce[i % nonce.len()] };
        out.push(b ^ k);
    }
    out
}

fn check_bits(bits: usize) -> Result<(), RsaError> {
    if (MIN_KEY_BITS..=MAX_KEY_BITS).contains(&bits) {
        Ok(())
    } else {
        Err(RsaError::KeySize(bits))
    }
}

/// Client side: the encrypted password for a server that sent `pem`.
pub fn encrypt_password(password: &[u8], nonce: &[u8], pem: &[u8]) -> Result<Vec<u8>, RsaError> {
    let text = std::str::from_utf8(pem).map_err(|_| RsaError::BadKey)?;
    let key = PublicKey::from_public_key_pem(text.trim())
        .or_else(|_| PublicKey::from_pkcs1_pem(text.trim()))
        .map_err(|_| RsaError::BadKey)?;
    check_bits(key.size() * 8)?;
    let mut plain = Zeroizing::new(password.to_vec());
    plain.push(0);
    if plain.len() > key.size() - OAEP_SHA1_OVERHEAD {
        return Err(RsaError::TooLong);
    }
    let masked = xor_with_nonce(&plain, nonce);
    key.oaep_encrypt::<Sha1>(&masked).map_err(|_| RsaError::Encrypt)
}

/// Server side: a private key and the PEM of its public half, as sent to
/// clients that ask for it.
pub struct ServerKey {
    private: PrivateKey,
    public_pem: String,
}

impl std::fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKey")
            .field("bits", &self.bits())
            .finish_non_exhaustive()
    }
}

impl ServerKey {
    /// Loads a private key from PEM (PKCS#8 `PRIVATE KEY` or PKCS#1 `RSA
    /// PRIVATE KEY`, as `openssl genpkey` / `genrsa` write them).
    pub fn from_pem(pem: &str) -> Result<Self, RsaError> {
        let private = PrivateKey::from_pkcs8_pem(pem.trim())
            .or_else(|_| PrivateKey::from_pkcs1_pem(pem.trim()))
            .map_err(|_| RsaError::BadKey)?;
        check_bits(private.size() * 8)?;
        let public_pem = private
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|_| RsaError::BadKey)?;
        Ok(ServerKey { private, public_pem })
    }

    pub fn bits(&self) -> usize {
        self.private.size() * 8
    }

    /// The public key as clients expect it (`-----BEGIN PUBLIC KEY-----`).
    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }

    /// The password a client encrypted for `nonce`, without its NUL.
    /// Decryption is blinded and constant-time (rsa 0.10).
    pub fn decrypt_password(&self, ciphertext: &[u8], nonce: &[u8]) -> Result<Zeroizing<Vec<u8>>, RsaError> {
        let masked = Zeroizing::new(
            self.private
                .oaep_decrypt::<Sha1>(ciphertext)
                .map_err(|_| RsaError::Decrypt)?,
        );
        let mut plain = xor_with_nonce(&masked, nonce);
        match plain.last() {
            Some(0) => {
                plain.pop();
                Ok(plain)
            }
            _ => Err(RsaError::Decrypt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key made for these tests only (`openssl genpkey -algorithm RSA`).
    fn key() -> ServerKey {
        ServerKey::from_pem(include_str!("../../testdata/rsa2048-test-only.pem")).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn round_trip_with_the_nonce() {
        let k = &key();
        let nonce = b"abcdefghijklmnopqrst";
        let ct = encrypt_password(b"s3cret", nonce, k.public_pem().as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ct.len(), 256);
        let pw = k.decrypt_password(&ct, nonce).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&pw[..], b"s3cret");
        // Another connection's nonce does not yield the password.
        let other = k
            .decrypt_password(&ct, b"ABCDEFGHIJKLMNOPQRST")
            .map(|p| p.to_vec())
            .ok();
        assert_ne!(other.as_deref(), Some(&b"s3cret"[..]));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever a client sends as the encrypted password, decryption
        /// answers with an error or a password, never a panic.
        #[test]
        fn any_ciphertext_is_answered(ct in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
                                      nonce in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let _ = key().decrypt_password(&ct, &nonce);
        }

        /// Any password that fits round-trips under any nonce.
        #[test]
        fn passwords_round_trip(pw in proptest::collection::vec(1u8..=255, 0..200),
                                nonce in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..40)) {
            let k = key();
            let ct = encrypt_password(&pw, &nonce, k.public_pem().as_bytes()).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            let back = k.decrypt_password(&ct, &nonce).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(&back[..], &pw[..]);
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let k = &key();
        assert!(k.decrypt_password(&[0u8; 256], b"n").is_err());
        assert!(k.decrypt_password(&[1u8; 3], b"n").is_err());
        assert!(encrypt_password(b"x", b"n", b"-----BEGIN PUBLIC KEY-----\nnope\n").is_err());
        assert!(encrypt_password(&[b'x'; 300], b"n", k.public_pem().as_bytes()).is_err());
        assert!(ServerKey::from_pem("garbage").is_err());
    }
}
