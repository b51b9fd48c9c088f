//! The versioned ciphertext envelope: `gh1:<base64(nonce || ciphertext || tag)>`.
//!
//! Version 1 is AES-256-GCM with a fresh random 96-bit nonce per encryption
//! and the secret's name bound in as additional authenticated data, so an
//! envelope copied to another secret's entry fails authentication.

use aes_gcm::aead::{Aead as _, KeyInit as _, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore as _;
use zeroize::Zeroizing;

use crate::error::{Result, SecretsError};
use crate::key::MasterKey;
use crate::value::SecretValue;

/// Text prefix of a version-1 envelope.
pub const PREFIX_V1: &str = "gh1:";

/// GCM nonce (IV) length in bytes. NIST SP 800-38D §5.2.1.1 and §8.2.2
/// recommend 96-bit IVs; RFC 5116 §5.1 fixes N_MIN = N_MAX = 12 for
/// AEAD_AES_256_GCM. With random nonces SP 800-38D §8.3 caps one key at 2^32
/// encryptions, far beyond what a credentials file sees.
pub const NONCE_LEN: usize = 12;

/// GCM authentication tag length in bytes: the full 128 bits
/// (SP 800-38D §5.2.1.2; RFC 5116 §5.1 uses a 16-octet tag).
pub const TAG_LEN: usize = 16;

/// Domain-separation prefix of the additional authenticated data; the secret's
/// name follows it. The NUL keeps the prefix and name unambiguous.
const AAD_PREFIX_V1: &[u8] = b"gatehouse-secret-v1\0";

/// Encrypt `plaintext` for the secret called `name` under `key`.
pub fn encrypt(key: &MasterKey, name: &str, plaintext: &str) -> Result<String> {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rngs::OsRng
        .try_fill_bytes(&mut nonce)
        .map_err(|_| SecretsError::Random)?;
    let aad = aad_v1(name);
    let sealed = cipher(key)
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: plaintext.as_bytes(),
                aad: &aad,
            },
        )
        .map_err(|_| SecretsError::Encryption { name: name.to_owned() })?;

    let mut raw = Vec::with_capacity(NONCE_LEN + sealed.len());
    raw.extend_from_slice(&nonce);
    raw.extend_from_slice(&sealed);
    let mut out = String::with_capacity(PREFIX_V1.len() + raw.len().div_ceil(3) * 4);
    out.push_str(PREFIX_V1);
    STANDARD.encode_string(&raw, &mut out);
    Ok(out)
}

/// Decrypt an envelope produced by [`encrypt`] for the same `name` and `key`.
///
/// A wrong key, altered bytes and an envelope belonging to another name all
/// give the same [`SecretsError::Authentication`].
pub fn decrypt(key: &MasterKey, name: &str, envelope: &str) -> Result<SecretValue> {
    let body = envelope
        .strip_prefix(PREFIX_V1)
        .ok_or_else(|| SecretsError::UnknownVersion { name: name.to_owned() })?;
    let malformed = |reason| SecretsError::Malformed {
        name: name.to_owned(),
        reason,
    };
    let raw = STANDARD.decode(body).map_err(|_| malformed("not valid base64"))?;
    if raw.len() < NONCE_LEN + TAG_LEN {
        return Err(malformed("too short"));
    }
    let (nonce, sealed) = raw.split_at(NONCE_LEN);
    let aad = aad_v1(name);
    let plain = cipher(key)
        .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: &aad })
        .map(Zeroizing::new)
        .map_err(|_| SecretsError::Authentication { name: name.to_owned() })?;
    let text = std::str::from_utf8(&plain).map_err(|_| malformed("decrypted value is not UTF-8"))?;
    // Copy into an exactly-sized buffer; `plain` is wiped when it drops.
    Ok(SecretValue::new(text.to_owned()))
}

fn cipher(key: &MasterKey) -> Aes256Gcm {
    Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key.bytes()))
}

fn aad_v1(name: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(AAD_PREFIX_V1.len() + name.len());
    aad.extend_from_slice(AAD_PREFIX_V1);
    aad.extend_from_slice(name.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const PLAIN: &str = "correct horse battery staple";

    fn key(byte: u8) -> MasterKey {
        MasterKey::from_bytes([byte; crate::key::KEY_LEN])
    }

    fn raw(envelope: &str) -> Vec<u8> {
        STANDARD.decode(envelope.strip_prefix(PREFIX_V1).unwrap()).unwrap()
    }

    fn rebuild(raw: &[u8]) -> String {
        format!("{PREFIX_V1}{}", STANDARD.encode(raw))
    }

    fn assert_clean(err: &SecretsError, forbidden: &[&str]) {
        let shown = format!("{err} | {err:?}");
        for f in forbidden {
            assert!(!shown.contains(f), "error text leaks {f:?}: {shown}");
        }
    }

    #[test]
    fn roundtrip_and_layout() {
        let k = key(1);
        let env = encrypt(&k, "demo_backend", PLAIN).unwrap();
        assert!(env.starts_with("gh1:"));
        assert!(!env.contains(PLAIN));
        assert_eq!(raw(&env).len(), NONCE_LEN + PLAIN.len() + TAG_LEN);
        assert_eq!(decrypt(&k, "demo_backend", &env).unwrap().expose(), PLAIN);
        let empty = encrypt(&k, "e", "").unwrap();
        assert_eq!(decrypt(&k, "e", &empty).unwrap().expose(), "");
    }

    #[test]
    fn fresh_nonce_every_time() {
        let k = key(2);
        let a = encrypt(&k, "n", PLAIN).unwrap();
        let b = encrypt(&k, "n", PLAIN).unwrap();
        assert_ne!(a, b);
        assert_ne!(raw(&a)[..NONCE_LEN], raw(&b)[..NONCE_LEN]);
        assert_eq!(
            decrypt(&k, "n", &a).unwrap().expose(),
            decrypt(&k, "n", &b).unwrap().expose()
        );
    }

    #[test]
    fn every_flipped_bit_position_fails_authentication() {
        let k = key(3);
        let env = encrypt(&k, "n", PLAIN).unwrap();
        let original = raw(&env);
        // Nonce, ciphertext and tag alike.
        for i in 0..original.len() {
            let mut bytes = original.clone();
            bytes[i] ^= 0x01 << (i % 8);
            let err = decrypt(&k, "n", &rebuild(&bytes)).unwrap_err();
            assert!(matches!(err, SecretsError::Authentication { .. }), "byte {i}: {err:?}");
            assert_clean(&err, &[PLAIN, &env]);
        }
    }

    #[test]
    fn envelope_moved_to_another_name_fails() {
        let k = key(4);
        let env = encrypt(&k, "tenant_a", PLAIN).unwrap();
        for other in ["tenant_b", "tenant_a ", "tenant_", "", "TENANT_A"] {
            let err = decrypt(&k, other, &env).unwrap_err();
            assert!(matches!(err, SecretsError::Authentication { .. }), "{other:?}: {err:?}");
            assert_clean(&err, &[PLAIN, &env]);
        }
    }

    #[test]
    fn wrong_key_fails_with_the_same_error() {
        let env = encrypt(&key(5), "n", PLAIN).unwrap();
        let err = decrypt(&key(6), "n", &env).unwrap_err();
        assert!(matches!(err, SecretsError::Authentication { .. }), "{err:?}");
        // One message for all three causes: it must not single one out.
        let tampered = {
            let mut bytes = raw(&env);
            bytes[NONCE_LEN] ^= 1;
            decrypt(&key(5), "n", &rebuild(&bytes)).unwrap_err()
        };
        let moved = decrypt(&key(5), "m", &env).unwrap_err();
        assert_eq!(err.to_string(), tampered.to_string());
        assert_eq!(err.to_string().replace("\"n\"", "\"m\""), moved.to_string());
        assert_clean(&err, &[PLAIN, &env]);
    }

    #[test]
    fn unknown_version_prefix() {
        let k = key(7);
        let env = encrypt(&k, "n", PLAIN).unwrap();
        let body = env.strip_prefix(PREFIX_V1).unwrap();
        for bad in [
            format!("gh2:{body}"),
            format!("GH1:{body}"),
            body.to_owned(),
            String::new(),
            PLAIN.to_owned(),
        ] {
            let err = decrypt(&k, "n", &bad).unwrap_err();
            assert!(matches!(err, SecretsError::UnknownVersion { .. }), "{bad:?}: {err:?}");
            assert_clean(&err, &[PLAIN, body]);
        }
    }

    #[test]
    fn malformed_and_truncated() {
        let k = key(8);
        let env = encrypt(&k, "n", PLAIN).unwrap();
        let bytes = raw(&env);
        let cases = [
            "gh1:".to_owned(),
            "gh1:!!!!".to_owned(),
            format!("{env}="),
            format!("{env} "),
            env[..env.len() - 1].to_owned(),
            rebuild(&bytes[..NONCE_LEN + TAG_LEN - 1]),
            rebuild(&bytes[..NONCE_LEN]),
        ];
        for bad in &cases {
            let err = decrypt(&k, "n", bad).unwrap_err();
            assert!(matches!(err, SecretsError::Malformed { .. }), "{bad:?}: {err:?}");
            assert_clean(&err, &[PLAIN, &env[4..]]);
        }
        // Cut on a byte boundary but still long enough: the tag no longer matches.
        let cut = rebuild(&bytes[..bytes.len() - 3]);
        let err = decrypt(&k, "n", &cut).unwrap_err();
        assert!(matches!(err, SecretsError::Authentication { .. }), "{err:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn roundtrip_any_name_and_password(
            name in "[A-Za-z0-9_.-]{1,63}",
            password in any::<String>(),
            key_bytes in any::<[u8; 32]>(),
        ) {
            let k = MasterKey::from_bytes(key_bytes);
            let env = encrypt(&k, &name, &password).unwrap();
            prop_assert!(env.starts_with(PREFIX_V1));
            let back = decrypt(&k, &name, &env).unwrap();
            prop_assert_eq!(back.expose(), password.as_str());
            let other = format!("{name}x");
            let moved_is_auth_error = matches!(decrypt(&k, &other, &env), Err(SecretsError::Authentication { .. }));
            prop_assert!(moved_is_auth_error);
        }
    }
}
