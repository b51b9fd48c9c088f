//! [`MasterKey`]: the 256-bit AES key that protects every secret, how it is
//! loaded (file or environment variable, raw / hex / base64) and generated.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore as _;
use zeroize::Zeroizing;

use crate::error::{Result, SecretsError};

/// AES-256 key length in bytes (FIPS 197: Nk = 8 32-bit words).
pub const KEY_LEN: usize = 32;

/// Length of the hex text form of a key.
const HEX_LEN: usize = KEY_LEN * 2;

/// The store's master key. Zeroed on drop; `Debug` never shows it.
#[derive(Clone)]
pub struct MasterKey(Zeroizing<[u8; KEY_LEN]>);

impl MasterKey {
    /// Wrap raw key bytes. The caller's copy of `bytes` is theirs to wipe.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// A fresh random key from the operating system's CSPRNG.
    pub fn generate() -> Result<Self> {
        let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
        rand::rngs::OsRng
            .try_fill_bytes(bytes.as_mut())
            .map_err(|_| SecretsError::Random)?;
        Ok(Self(bytes))
    }

    /// Read a key file holding exactly 32 raw bytes, or text (surrounding
    /// whitespace ignored) that is 64 hex digits or standard base64 of 32 bytes.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let content = Zeroizing::new(std::fs::read(path).map_err(|source| SecretsError::KeyFileRead {
            path: path.to_path_buf(),
            source,
        })?);
        let origin = || format!("file {}", path.display());
        if let Ok(raw) = <[u8; KEY_LEN]>::try_from(content.as_slice()) {
            return Ok(Self::from_bytes(raw));
        }
        let text = std::str::from_utf8(&content).map_err(|_| SecretsError::KeyFormat { origin: origin() })?;
        parse_text(text).ok_or_else(|| SecretsError::KeyFormat { origin: origin() })
    }

    /// Read a key from environment variable `var`: 64 hex digits or standard
    /// base64 of 32 bytes, surrounding whitespace ignored.
    pub fn from_env(var: &str) -> Result<Self> {
        let origin = || format!("environment variable {var}");
        let value = match std::env::var_os(var) {
            None => return Err(SecretsError::KeyEnvMissing { var: var.to_owned() }),
            Some(v) => v,
        };
        // A non-UTF-8 value cannot be a valid key; `OsString` cannot be wiped,
        // so it is simply dropped.
        let text = Zeroizing::new(
            value
                .into_string()
                .map_err(|_| SecretsError::KeyFormat { origin: origin() })?,
        );
        parse_text(&text).ok_or_else(|| SecretsError::KeyFormat { origin: origin() })
    }

    /// The key as standard base64 text (for `gatehouse secrets keygen`-style
    /// output); the returned buffer is wiped on drop.
    pub fn to_text(&self) -> Zeroizing<String> {
        let mut out = Zeroizing::new(String::with_capacity(KEY_LEN.div_ceil(3) * 4));
        STANDARD.encode_string(self.0.as_slice(), &mut out);
        out
    }

    /// The raw key, for the envelope code only.
    pub(crate) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

/// Parse trimmed text as 64 hex digits, else as base64 of exactly 32 bytes.
fn parse_text(text: &str) -> Option<MasterKey> {
    let text = text.trim();
    if text.len() == HEX_LEN
        && let Some(key) = parse_hex(text.as_bytes())
    {
        return Some(key);
    }
    // Room for a slightly over-long input so the decoder, rather than the
    // buffer size, decides; the length check below rejects it.
    let mut buf = Zeroizing::new([0u8; KEY_LEN + 3]);
    let n = STANDARD.decode_slice(text.as_bytes(), buf.as_mut()).ok()?;
    let raw: &[u8; KEY_LEN] = buf.get(..n)?.try_into().ok()?;
    let mut key = Zeroizing::new([0u8; KEY_LEN]);
    key.copy_from_slice(raw);
    Some(MasterKey(key))
}

fn parse_hex(text: &[u8]) -> Option<MasterKey> {
    let mut key = Zeroizing::new([0u8; KEY_LEN]);
    for (out, pair) in key.iter_mut().zip(text.chunks_exact(2)) {
        let hi = hex_digit(pair[0])?;
        let lo = hex_digit(pair[1])?;
        *out = (hi << 4) | lo;
    }
    Some(MasterKey(key))
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    const KEY: [u8; KEY_LEN] = [
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0xf0, 0xe1,
        0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f,
    ];
    const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0ff0e1d2c3b4a5968778695a4b3c2d1e0f";
    const KEY_B64: &str = "AAECAwQFBgcICQoLDA0OD/Dh0sO0pZaHeGlaSzwtHg8=";

    const ENV_KEY: &str = "GATEHOUSE_SECRETS_TEST_KEY";
    const ENV_EXPECT: &str = "GATEHOUSE_SECRETS_TEST_EXPECT";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn fixtures_agree() {
        assert_eq!(hex(&KEY), KEY_HEX);
        assert_eq!(STANDARD.encode(KEY), KEY_B64);
    }

    #[test]
    fn from_file_accepts_raw_hex_and_base64() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, Vec<u8>); 5] = [
            ("raw", KEY.to_vec()),
            ("hex", format!("{KEY_HEX}\n").into_bytes()),
            ("hex-upper", format!("  {}\r\n", KEY_HEX.to_uppercase()).into_bytes()),
            ("b64", format!("{KEY_B64}\n").into_bytes()),
            ("b64-spaced", format!("\t{KEY_B64}  \n\n").into_bytes()),
        ];
        for (label, content) in cases {
            let path = dir.path().join(label);
            std::fs::write(&path, content).unwrap();
            let key = MasterKey::from_file(&path).unwrap();
            assert_eq!(key.bytes(), &KEY, "{label}");
        }
    }

    #[test]
    fn raw_file_wins_even_if_it_looks_like_text() {
        // 32 bytes of ASCII are taken as the raw key, not as text.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, [b'a'; KEY_LEN]).unwrap();
        assert_eq!(MasterKey::from_file(&path).unwrap().bytes(), &[b'a'; KEY_LEN]);
    }

    #[test]
    fn from_file_rejects_other_content_without_echoing_it() {
        let dir = tempfile::tempdir().unwrap();
        let short_b64 = STANDARD.encode(&KEY[..31]);
        let long_b64 = STANDARD.encode([7u8; 33]);
        let bad_hex = format!("{}zz", &KEY_HEX[..62]);
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            KEY[..31].to_vec(),
            [KEY.as_slice(), &[0]].concat(),
            short_b64.clone().into_bytes(),
            long_b64.clone().into_bytes(),
            bad_hex.clone().into_bytes(),
            KEY_HEX.as_bytes()[..63].to_vec(),
            vec![0xff; 40],
        ];
        for (i, content) in cases.into_iter().enumerate() {
            let path = dir.path().join(format!("bad{i}"));
            std::fs::write(&path, &content).unwrap();
            let err = MasterKey::from_file(&path).unwrap_err();
            assert!(matches!(err, SecretsError::KeyFormat { .. }), "case {i}: {err:?}");
            let shown = format!("{err} {err:?}");
            assert!(shown.contains(&path.display().to_string()), "{shown}");
            for secretish in [short_b64.as_str(), long_b64.as_str(), bad_hex.as_str(), &KEY_HEX[..20]] {
                assert!(!shown.contains(secretish), "case {i} leaked: {shown}");
            }
        }
    }

    #[test]
    fn missing_key_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.key");
        let err = MasterKey::from_file(&path).unwrap_err();
        assert!(matches!(err, SecretsError::KeyFileRead { .. }), "{err:?}");
        assert!(err.to_string().contains("nope.key"));
    }

    #[test]
    fn from_env_missing_variable() {
        let err = MasterKey::from_env("GATEHOUSE_SECRETS_TEST_SURELY_UNSET_VARIABLE").unwrap_err();
        assert!(matches!(err, SecretsError::KeyEnvMissing { .. }), "{err:?}");
        assert!(err.to_string().contains("GATEHOUSE_SECRETS_TEST_SURELY_UNSET_VARIABLE"));
    }

    /// Runs `from_env_child` in a fresh copy of this test binary with the
    /// variable set, since setting variables in-process needs `unsafe`.
    #[test]
    fn from_env_reads_hex_and_base64() {
        let cases = [
            (KEY_HEX.to_owned(), KEY_HEX),
            (format!(" {KEY_B64}\n"), KEY_HEX),
            ("not a key at all".to_owned(), "invalid"),
            (KEY_HEX[..62].to_owned(), "invalid"),
        ];
        for (value, expect) in cases {
            let out = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "key::tests::from_env_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ENV_KEY, &value)
                .env(ENV_EXPECT, expect)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{value:?}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(stdout.contains("1 passed"), "child test did not run: {stdout}");
        }
    }

    #[test]
    fn from_env_child() {
        // Does nothing unless started by `from_env_reads_hex_and_base64`.
        let Ok(expect) = std::env::var(ENV_EXPECT) else { return };
        match MasterKey::from_env(ENV_KEY) {
            Ok(key) => assert_eq!(hex(key.bytes()), expect),
            Err(err) => {
                assert_eq!(expect, "invalid", "{err}");
                assert!(matches!(err, SecretsError::KeyFormat { .. }), "{err:?}");
                assert!(err.to_string().contains(ENV_KEY));
                let value = std::env::var(ENV_KEY).unwrap();
                assert!(!format!("{err} {err:?}").contains(value.trim()));
            }
        }
    }

    #[test]
    fn generate_is_random_and_to_text_roundtrips() {
        let a = MasterKey::generate().unwrap();
        let b = MasterKey::generate().unwrap();
        assert_ne!(a.bytes(), b.bytes());
        let text = a.to_text();
        assert_eq!(text.len(), 44);
        assert_eq!(parse_text(&text).unwrap().bytes(), a.bytes());
        assert_eq!(MasterKey::from_bytes(KEY).to_text().as_str(), KEY_B64);
    }

    #[test]
    fn debug_is_redacted() {
        let key = MasterKey::from_bytes(KEY);
        for shown in [
            format!("{key:?}"),
            format!("{key:#?}"),
            format!("{:?}", Some(key.clone())),
        ] {
            assert!(shown.contains("MasterKey(<redacted>)"), "{shown}");
            assert!(!shown.contains("0, 1, 2") && !shown.contains(KEY_B64) && !shown.contains(&KEY_HEX[..8]));
        }
    }
}
