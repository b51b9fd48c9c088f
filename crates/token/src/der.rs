//! Just enough PEM and DER reading to tell what kind of key a PEM file holds
//! (RSA, EC P-256, Ed25519; private PKCS#8 / PKCS#1 or public SPKI / PKCS#1)
//! and to pull the public numbers out of a public key for a JWK.
//!
//! Errors are fixed texts: nothing read from the key ever reaches them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

const TAG_INTEGER: u8 = 0x02;
const TAG_BIT_STRING: u8 = 0x03;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_OID: u8 = 0x06;
const TAG_SEQUENCE: u8 = 0x30;

/// 1.2.840.113549.1.1.1
const OID_RSA_ENCRYPTION: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01];
/// 1.2.840.10045.2.1
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
/// 1.2.840.10045.3.1.7 (P-256, prime256v1, secp256r1)
const OID_P256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
/// 1.3.101.112
const OID_ED25519: &[u8] = &[0x2B, 0x65, 0x70];

/// One decoded PEM block.
pub(crate) struct Pem {
    pub label: String,
    pub der: Vec<u8>,
}

/// Decodes the first PEM block of `text`. Text before the block is ignored.
pub(crate) fn parse_pem(text: &[u8]) -> Result<Pem, &'static str> {
    let text = std::str::from_utf8(text).map_err(|_| "PEM file is not text")?;
    let mut lines = text.lines().map(str::trim);
    let label = loop {
        let line = lines.next().ok_or("no PEM block found")?;
        if let Some(rest) = line.strip_prefix("-----BEGIN ") {
            break rest.strip_suffix("-----").ok_or("bad PEM header line")?;
        }
    };
    let end = format!("-----END {label}-----");
    let mut body = String::new();
    loop {
        let line = lines.next().ok_or("PEM block has no end line")?;
        if line == end {
            break;
        }
        if line.contains(':') {
            // RFC 1421 headers (Proc-Type, DEK-Info) only appear on
            // encrypted legacy keys.
            return Err("encrypted PEM keys are not supported");
        }
        body.push_str(line);
    }
    let der = STANDARD.decode(body.as_bytes()).map_err(|_| "PEM body is not base64")?;
    Ok(Pem {
        label: label.to_owned(),
        der,
    })
}

/// A minimal DER reader over a byte slice.
struct Der<'a> {
    rest: &'a [u8],
}

impl<'a> Der<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Der { rest: bytes }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Reads one element, returning its tag and content.
    fn read(&mut self) -> Result<(u8, &'a [u8]), &'static str> {
        const BAD: &str = "key is not valid DER";
        let (&tag, rest) = self.rest.split_first().ok_or(BAD)?;
        let (&first, mut rest) = rest.split_first().ok_or(BAD)?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7F);
            if count == 0 || count > 4 || rest.len() < count {
                return Err(BAD);
            }
            let (len_bytes, after) = rest.split_at(count);
            rest = after;
            len_bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
        };
        if rest.len() < len {
            return Err(BAD);
        }
        let (content, after) = rest.split_at(len);
        self.rest = after;
        Ok((tag, content))
    }

    fn take(&mut self, tag: u8) -> Result<&'a [u8], &'static str> {
        match self.read()? {
            (t, content) if t == tag => Ok(content),
            _ => Err("key has an unexpected DER structure"),
        }
    }
}

/// The key types this crate can sign and verify with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyType {
    Rsa,
    EcP256,
    Ed25519,
}

/// Reads an AlgorithmIdentifier and tells the key type it names.
fn key_type_of(alg_id: &[u8]) -> Result<KeyType, &'static str> {
    let mut seq = Der::new(alg_id);
    let oid = seq.take(TAG_OID)?;
    if oid == OID_RSA_ENCRYPTION {
        Ok(KeyType::Rsa)
    } else if oid == OID_ED25519 {
        Ok(KeyType::Ed25519)
    } else if oid == OID_EC_PUBLIC_KEY {
        let curve = seq.take(TAG_OID)?;
        if curve == OID_P256 {
            Ok(KeyType::EcP256)
        } else {
            Err("only the P-256 curve is supported for EC keys")
        }
    } else {
        Err("unsupported key algorithm (RSA, EC P-256 and Ed25519 are supported)")
    }
}

/// Tells the key type of a PKCS#8 `PrivateKeyInfo`.
pub(crate) fn pkcs8_key_type(der: &[u8]) -> Result<KeyType, &'static str> {
    let mut outer = Der::new(der);
    let mut info = Der::new(outer.take(TAG_SEQUENCE)?);
    info.take(TAG_INTEGER)?;
    key_type_of(info.take(TAG_SEQUENCE)?)
}

/// The inner PKCS#1 `RSAPrivateKey` of an RSA PKCS#8 `PrivateKeyInfo`.
pub(crate) fn pkcs8_inner_key(der: &[u8]) -> Result<&[u8], &'static str> {
    let mut outer = Der::new(der);
    let mut info = Der::new(outer.take(TAG_SEQUENCE)?);
    info.take(TAG_INTEGER)?;
    info.take(TAG_SEQUENCE)?;
    info.take(TAG_OCTET_STRING)
}

/// The public numbers of a public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PublicKey {
    /// Big-endian modulus and exponent, without leading zero bytes.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// Affine coordinates, 32 bytes each.
    EcP256 { x: Vec<u8>, y: Vec<u8> },
    /// The 32-byte public key.
    Ed25519 { x: Vec<u8> },
}

fn unsigned(integer: &[u8]) -> Result<Vec<u8>, &'static str> {
    if integer.first().is_some_and(|&b| b & 0x80 != 0) {
        return Err("RSA key has a negative number");
    }
    let start = integer.iter().position(|&b| b != 0).unwrap_or(integer.len());
    if start == integer.len() {
        return Err("RSA key has a zero number");
    }
    Ok(integer[start..].to_vec())
}

/// Reads a PKCS#1 `RSAPublicKey`.
pub(crate) fn pkcs1_public(der: &[u8]) -> Result<PublicKey, &'static str> {
    let mut outer = Der::new(der);
    let mut seq = Der::new(outer.take(TAG_SEQUENCE)?);
    let n = unsigned(seq.take(TAG_INTEGER)?)?;
    let e = unsigned(seq.take(TAG_INTEGER)?)?;
    if !seq.is_empty() {
        return Err("key has an unexpected DER structure");
    }
    Ok(PublicKey::Rsa { n, e })
}

/// Reads a `SubjectPublicKeyInfo`.
pub(crate) fn spki_public(der: &[u8]) -> Result<PublicKey, &'static str> {
    let mut outer = Der::new(der);
    let mut spki = Der::new(outer.take(TAG_SEQUENCE)?);
    let key_type = key_type_of(spki.take(TAG_SEQUENCE)?)?;
    let bits = spki.take(TAG_BIT_STRING)?;
    // The first byte of a BIT STRING counts unused bits; keys use none.
    let key = match bits.split_first() {
        Some((0, key)) => key,
        _ => return Err("key has an unexpected DER structure"),
    };
    match key_type {
        KeyType::Rsa => pkcs1_public(key),
        KeyType::EcP256 => match key.split_first() {
            Some((0x04, xy)) if xy.len() == 64 => Ok(PublicKey::EcP256 {
                x: xy[..32].to_vec(),
                y: xy[32..].to_vec(),
            }),
            _ => Err("EC public key is not an uncompressed P-256 point"),
        },
        KeyType::Ed25519 if key.len() == 32 => Ok(PublicKey::Ed25519 { x: key.to_vec() }),
        KeyType::Ed25519 => Err("Ed25519 public key is not 32 bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_form_lengths_and_truncation() {
        let mut der = vec![TAG_OCTET_STRING, 0x81, 200];
        der.extend(std::iter::repeat_n(7u8, 200));
        let mut reader = Der::new(&der);
        assert_eq!(reader.take(TAG_OCTET_STRING).map(<[u8]>::len), Ok(200));
        assert!(reader.is_empty());
        assert!(Der::new(&der[..100]).read().is_err());
        assert!(Der::new(&[TAG_SEQUENCE, 0x85, 0, 0, 0, 0, 1]).read().is_err());
    }

    #[test]
    fn pem_without_block_or_end_is_refused() {
        assert!(parse_pem(b"nothing here").is_err());
        assert!(parse_pem(b"-----BEGIN PUBLIC KEY-----\nAAAA\n").is_err());
        assert!(
            parse_pem(b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n-----END RSA PRIVATE KEY-----\n")
                .is_err()
        );
    }

    #[test]
    fn rsa_integers_lose_their_sign_byte() {
        assert_eq!(unsigned(&[0, 0x80, 1]), Ok(vec![0x80, 1]));
        assert!(unsigned(&[0x80]).is_err());
        assert!(unsigned(&[0, 0]).is_err());
    }
}
