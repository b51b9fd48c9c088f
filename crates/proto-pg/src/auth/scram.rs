//! Server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL runs it.
//!
//! Owns PostgreSQL's stored verifier format ([`ScramVerifier`]) and the
//! server-side exchange ([`ScramServer`]) carried in `SASLInitialResponse` /
//! `AuthenticationSASLContinue` / `SASLResponse` / `AuthenticationSASLFinal`
//! (PostgreSQL docs, "SASL Authentication").
//!
//! Scope and policy:
//! * Only `SCRAM-SHA-256` is offered; channel binding (`-PLUS`, gs2 flag `p`)
//!   is refused. Gs2 flags `n` and `y` are accepted (`y` is legitimate because
//!   we never advertise `-PLUS`, RFC 5802 §6).
//! * The authorization identity (`a=`) must be absent, the reserved `m=`
//!   extension is refused, and the SCRAM username is ignored: PostgreSQL
//!   authenticates the startup packet's `user` (libpq sends `n=`).
//! * Passwords are used as their raw UTF-8 bytes; no SASLprep (RFC 4013)
//!   normalisation is applied. That equals SASLprep for every ASCII password
//!   (SASLprep maps nothing in printable ASCII, and ASCII control characters are
//!   prohibited, in which case PostgreSQL and libpq also fall back to the raw
//!   bytes). Non-ASCII passwords that SASLprep would rewrite (NFKC, non-ASCII
//!   spaces, soft hyphens, ...) will not match verifiers created by
//!   PostgreSQL from the same text.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// SASL mechanism name (RFC 7677 §3; PostgreSQL "SASL Authentication").
pub const SCRAM_SHA_256: &str = "SCRAM-SHA-256";

/// Prefix of PostgreSQL's stored verifier: `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>`.
const VERIFIER_PREFIX: &str = "SCRAM-SHA-256$";

/// Output length of SHA-256 and thus of every SCRAM key and proof (RFC 7677 §3).
pub const SCRAM_KEY_LEN: usize = 32;

/// HMAC-SHA-256 block size in bytes (RFC 2104 §2, FIPS 180-4 §1).
const SHA256_BLOCK_LEN: usize = 64;

/// Default iteration count: RFC 7677 §4 requires at least 4096; PostgreSQL's
/// `scram_iterations` defaults to 4096.
pub const DEFAULT_ITERATIONS: u32 = 4096;

/// Upper bound on an iteration count we will accept from a stored verifier.
/// RFC 5802 §5.1 sets no maximum; this caps the PBKDF2 cost to avoid DoS.
pub const MAX_ITERATIONS: u32 = 10_000_000;

/// Default salt length, matching PostgreSQL's `SCRAM_DEFAULT_SALT_LEN`.
pub const DEFAULT_SALT_LEN: usize = 16;

/// Raw server-nonce length, matching PostgreSQL's `SCRAM_RAW_NONCE_LEN`;
/// base64 encodes it to 24 printable characters (RFC 5802 §5.1 `r=`).
pub const NONCE_RAW_LEN: usize = 18;

/// Largest client SCRAM message we parse. RFC 5802 sets no limit and
/// PostgreSQL bounds auth packets only by `PG_MAX_AUTH_TOKEN_LENGTH` (65535);
/// legitimate messages are around 100 bytes, so we refuse anything larger.
pub const MAX_SCRAM_MESSAGE_LEN: usize = 1024;

/// Channel-binding attribute values for the gs2 headers we accept:
/// base64("n,,") and base64("y,,") (RFC 5802 §7, `cbind-input`).
const CBIND_N: &str = "biws";
const CBIND_Y: &str = "eSws";

/// HMAC labels from RFC 5802 §3.
const CLIENT_KEY_LABEL: &[u8] = b"Client Key";
const SERVER_KEY_LABEL: &[u8] = b"Server Key";

/// Domain-separation label for deriving mock credentials of unknown users.
const MOCK_LABEL: &[u8] = b"gatehouse scram mock";

/// Why a SCRAM exchange or verifier parse failed.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ScramError {
    /// The client picked a mechanism other than `SCRAM-SHA-256`.
    #[error("unsupported SASL mechanism")]
    UnsupportedMechanism,
    /// The client asked for channel binding (gs2 flag `p=`), which we do not offer.
    #[error("channel binding is not supported")]
    ChannelBindingUnsupported,
    /// The client-final `c=` attribute does not match the gs2 header it sent.
    #[error("channel binding data does not match the gs2 header")]
    ChannelBindingMismatch,
    /// The client sent an authorization identity (`a=`).
    #[error("authorization identity is not supported")]
    AuthzidUnsupported,
    /// The client sent the reserved mandatory extension `m=` (RFC 5802 §5.1).
    #[error("unsupported mandatory SCRAM extension")]
    UnsupportedExtension,
    /// A client message exceeded [`MAX_SCRAM_MESSAGE_LEN`].
    #[error("SCRAM message too long")]
    MessageTooLong,
    /// A client message does not follow RFC 5802 §7 syntax.
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    /// The client-final nonce is not the combined nonce we sent.
    #[error("SCRAM nonce mismatch")]
    NonceMismatch,
    /// The client proof is wrong (or the user is unknown).
    #[error("invalid SCRAM proof")]
    InvalidProof,
    /// A message arrived in the wrong state (or after the exchange ended).
    #[error("SCRAM message out of order")]
    OutOfOrder,
    /// A stored verifier string is not in PostgreSQL's SCRAM-SHA-256 format.
    #[error("invalid SCRAM verifier: {0}")]
    InvalidVerifier(&'static str),
}

/// A SCRAM-SHA-256 verifier in PostgreSQL's stored form.
///
/// `Debug` redacts the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramVerifier {
    iterations: u32,
    salt: Vec<u8>,
    stored_key: [u8; SCRAM_KEY_LEN],
    server_key: [u8; SCRAM_KEY_LEN],
}

impl ScramVerifier {
    /// Parse PostgreSQL's stored format:
    /// `SCRAM-SHA-256$<iterations>:<salt base64>$<StoredKey base64>:<ServerKey base64>`.
    ///
    /// Rejects iteration counts of 0 or above [`MAX_ITERATIONS`], an empty salt,
    /// and keys that are not exactly 32 bytes.
    pub fn parse(s: &str) -> Result<Self, ScramError> {
        let rest = s
            .strip_prefix(VERIFIER_PREFIX)
            .ok_or(ScramError::InvalidVerifier("missing SCRAM-SHA-256$ prefix"))?;
        let (params, keys) = rest
            .split_once('$')
            .ok_or(ScramError::InvalidVerifier("missing '$' before keys"))?;
        let (iter_str, salt_b64) = params
            .split_once(':')
            .ok_or(ScramError::InvalidVerifier("missing ':' after iterations"))?;
        let (stored_b64, server_b64) = keys
            .split_once(':')
            .ok_or(ScramError::InvalidVerifier("missing ':' between keys"))?;

        let iterations =
            parse_iterations(iter_str).ok_or(ScramError::InvalidVerifier("iteration count out of range"))?;
        let salt = B64
            .decode(salt_b64)
            .map_err(|_| ScramError::InvalidVerifier("salt is not base64"))?;
        if salt.is_empty() {
            return Err(ScramError::InvalidVerifier("empty salt"));
        }
        let stored_key =
            decode_key(stored_b64).ok_or(ScramError::InvalidVerifier("StoredKey is not 32 bytes of base64"))?;
        let server_key =
            decode_key(server_b64).ok_or(ScramError::InvalidVerifier("ServerKey is not 32 bytes of base64"))?;
        Ok(Self {
            iterations,
            salt,
            stored_key,
            server_key,
        })
    }

    /// Derive a verifier from a password, salt and iteration count (RFC 5802 §3).
    ///
    /// The password's raw UTF-8 bytes are used without SASLprep (see the module
    /// docs). `iterations` is clamped to `1..=MAX_ITERATIONS`.
    pub fn from_password(password: &str, salt: &[u8], iterations: u32) -> Self {
        let iterations = iterations.clamp(1, MAX_ITERATIONS);
        let salted = hi(password.as_bytes(), salt, iterations);
        let client_key = hmac_once(&salted, CLIENT_KEY_LABEL);
        Self {
            iterations,
            salt: salt.to_vec(),
            stored_key: Sha256::digest(client_key).into(),
            server_key: hmac_once(&salted, SERVER_KEY_LABEL),
        }
    }

    /// Whether `password` is the one this verifier was made from: derives
    /// the StoredKey (a full PBKDF2 run: costly by design) and compares it in
    /// constant time.
    pub fn verify_password(&self, password: &str) -> bool {
        let derived = Self::from_password(password, &self.salt, self.iterations);
        bool::from(derived.stored_key.ct_eq(&self.stored_key))
    }

    /// The PBKDF2 iteration count.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The salt.
    pub fn salt(&self) -> &[u8] {
        &self.salt
    }
}

impl fmt::Display for ScramVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{VERIFIER_PREFIX}{}:{}${}:{}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(self.stored_key),
            B64.encode(self.server_key)
        )
    }
}

impl fmt::Debug for ScramVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramVerifier")
            .field("iterations", &self.iterations)
            .field("salt", &B64.encode(&self.salt))
            .finish_non_exhaustive()
    }
}

impl FromStr for ScramVerifier {
    type Err = ScramError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Where the exchange stands.
enum State {
    /// Waiting for `SASLInitialResponse`.
    Initial,
    /// Server-first sent; waiting for the client-final message.
    AwaitingFinal {
        client_first_bare: String,
        server_first: String,
        combined_nonce: String,
        cbind: &'static str,
    },
    /// Finished, successfully or not; every further message is out of order.
    Done,
}

/// One server-side SCRAM-SHA-256 exchange, as a state machine driven by the
/// client's messages.
///
/// Any error ends the exchange: later calls return [`ScramError::OutOfOrder`].
pub struct ScramServer {
    verifier: ScramVerifier,
    server_nonce: String,
    /// Unknown user: run the exchange identically, then always fail.
    mock: bool,
    state: State,
}

impl fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Initial => "Initial",
            State::AwaitingFinal { .. } => "AwaitingFinal",
            State::Done => "Done",
        };
        f.debug_struct("ScramServer")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl ScramServer {
    /// Start an exchange for a known user.
    ///
    /// `nonce_raw`: random bytes supplied by the caller (e.g.
    /// [`super::random_nonce`]); base64-encoded into the server nonce part.
    pub fn new(verifier: ScramVerifier, nonce_raw: [u8; NONCE_RAW_LEN]) -> Self {
        Self {
            verifier,
            server_nonce: B64.encode(nonce_raw),
            mock: false,
            state: State::Initial,
        }
    }

    /// Start an exchange for an unknown user.
    ///
    /// On the wire this is indistinguishable from a real user: the salt is
    /// derived deterministically from `mock_seed` and `username` (so repeated
    /// attempts see the same salt) with [`DEFAULT_SALT_LEN`] bytes and
    /// [`DEFAULT_ITERATIONS`]. The proof is still checked (for similar timing),
    /// but [`ScramServer::client_final`] always fails with
    /// [`ScramError::InvalidProof`].
    pub fn mock(username: &str, mock_seed: &[u8], nonce_raw: [u8; NONCE_RAW_LEN]) -> Self {
        let mut mac = hmac_key(mock_seed);
        mac.update(MOCK_LABEL);
        mac.update(b"\0");
        mac.update(username.as_bytes());
        let digest: [u8; SCRAM_KEY_LEN] = mac.finalize().into_bytes().into();
        let stored_key = hmac_once(&digest, CLIENT_KEY_LABEL);
        let server_key = hmac_once(&digest, SERVER_KEY_LABEL);
        let verifier = ScramVerifier {
            iterations: DEFAULT_ITERATIONS,
            salt: digest[..DEFAULT_SALT_LEN].to_vec(),
            stored_key,
            server_key,
        };
        Self {
            mock: true,
            ..Self::new(verifier, nonce_raw)
        }
    }

    /// Handle `SASLInitialResponse`: the chosen mechanism and the
    /// client-first-message. Returns the server-first-message to send in
    /// `AuthenticationSASLContinue`.
    pub fn client_first(&mut self, mechanism: &str, data: &[u8]) -> Result<Vec<u8>, ScramError> {
        if !matches!(self.state, State::Initial) {
            return Err(ScramError::OutOfOrder);
        }
        self.state = State::Done;
        if mechanism != SCRAM_SHA_256 {
            return Err(ScramError::UnsupportedMechanism);
        }
        let first = parse_client_first(data)?;
        let combined_nonce = format!("{}{}", first.client_nonce, self.server_nonce);
        let server_first = format!(
            "r={combined_nonce},s={},i={}",
            B64.encode(&self.verifier.salt),
            self.verifier.iterations
        );
        let out = server_first.clone().into_bytes();
        self.state = State::AwaitingFinal {
            client_first_bare: first.bare.to_owned(),
            server_first,
            combined_nonce,
            cbind: first.cbind,
        };
        Ok(out)
    }

    /// Handle `SASLResponse` carrying the client-final-message. On success
    /// returns the server-final-message (`v=...`) to send in
    /// `AuthenticationSASLFinal`.
    pub fn client_final(&mut self, data: &[u8]) -> Result<Vec<u8>, ScramError> {
        let State::AwaitingFinal {
            client_first_bare,
            server_first,
            combined_nonce,
            cbind,
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Err(ScramError::OutOfOrder);
        };
        let fin = parse_client_final(data)?;
        if fin.cbind != cbind {
            return Err(ScramError::ChannelBindingMismatch);
        }
        if fin.nonce != combined_nonce {
            return Err(ScramError::NonceMismatch);
        }

        // RFC 5802 §3.
        let mut auth = hmac_key(&self.verifier.stored_key);
        for part in [
            client_first_bare.as_bytes(),
            b",",
            server_first.as_bytes(),
            b",",
            fin.without_proof.as_bytes(),
        ] {
            auth.update(part);
        }
        let client_signature = auth.finalize().into_bytes();
        let mut client_key = fin.proof;
        for (k, s) in client_key.iter_mut().zip(client_signature.iter()) {
            *k ^= s;
        }
        let computed_stored: [u8; SCRAM_KEY_LEN] = Sha256::digest(client_key).into();
        let proof_ok = bool::from(computed_stored.ct_eq(&self.verifier.stored_key));
        if !proof_ok || self.mock {
            return Err(ScramError::InvalidProof);
        }

        let mut sig = hmac_key(&self.verifier.server_key);
        for part in [
            client_first_bare.as_bytes(),
            b",",
            server_first.as_bytes(),
            b",",
            fin.without_proof.as_bytes(),
        ] {
            sig.update(part);
        }
        let server_signature = sig.finalize().into_bytes();
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// The parts of a client-first-message we keep.
struct ClientFirst<'a> {
    /// Expected `c=` value in the client-final message.
    cbind: &'static str,
    /// client-first-message-bare (everything after the gs2 header).
    bare: &'a str,
    client_nonce: &'a str,
}

/// Parse a client-first-message (RFC 5802 §7).
fn parse_client_first(data: &[u8]) -> Result<ClientFirst<'_>, ScramError> {
    let s = checked_str(data)?;
    let (cbind, rest) = if let Some(rest) = s.strip_prefix("n,") {
        (CBIND_N, rest)
    } else if let Some(rest) = s.strip_prefix("y,") {
        (CBIND_Y, rest)
    } else if s.starts_with("p=") {
        return Err(ScramError::ChannelBindingUnsupported);
    } else {
        return Err(ScramError::Malformed("invalid gs2 channel binding flag"));
    };
    if rest.starts_with("a=") {
        return Err(ScramError::AuthzidUnsupported);
    }
    let bare = rest
        .strip_prefix(',')
        .ok_or(ScramError::Malformed("invalid gs2 header"))?;

    let mut attrs = bare.split(',');
    let user = attrs.next().unwrap_or_default();
    if user.starts_with("m=") {
        return Err(ScramError::UnsupportedExtension);
    }
    // The SCRAM username is ignored: PostgreSQL uses the startup packet's user.
    if !user.starts_with("n=") {
        return Err(ScramError::Malformed("expected username attribute"));
    }
    let client_nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(ScramError::Malformed("expected nonce attribute"))?;
    if client_nonce.is_empty() || !client_nonce.bytes().all(is_printable) {
        return Err(ScramError::Malformed("invalid client nonce"));
    }
    check_extensions(attrs)?;
    Ok(ClientFirst {
        cbind,
        bare,
        client_nonce,
    })
}

/// The parts of a client-final-message we check.
struct ClientFinal<'a> {
    cbind: &'a str,
    nonce: &'a str,
    /// client-final-message-without-proof, part of AuthMessage.
    without_proof: &'a str,
    proof: [u8; SCRAM_KEY_LEN],
}

/// Parse a client-final-message (RFC 5802 §7).
fn parse_client_final(data: &[u8]) -> Result<ClientFinal<'_>, ScramError> {
    let s = checked_str(data)?;
    let (without_proof, proof_b64) = s
        .rsplit_once(",p=")
        .ok_or(ScramError::Malformed("expected proof attribute"))?;
    let proof = decode_key(proof_b64).ok_or(ScramError::Malformed("invalid proof"))?;
    let mut attrs = without_proof.split(',');
    let cbind = attrs
        .next()
        .and_then(|a| a.strip_prefix("c="))
        .ok_or(ScramError::Malformed("expected channel binding attribute"))?;
    let nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(ScramError::Malformed("expected nonce attribute"))?;
    check_extensions(attrs)?;
    Ok(ClientFinal {
        cbind,
        nonce,
        without_proof,
        proof,
    })
}

/// Enforce the size limit and UTF-8 (RFC 5802 §7: messages are UTF-8).
fn checked_str(data: &[u8]) -> Result<&str, ScramError> {
    if data.len() > MAX_SCRAM_MESSAGE_LEN {
        return Err(ScramError::MessageTooLong);
    }
    std::str::from_utf8(data).map_err(|_| ScramError::Malformed("not UTF-8"))
}

/// Optional trailing extensions are ignored, but must be `ALPHA "=" value`
/// (RFC 5802 §7 `extensions`).
fn check_extensions<'a>(attrs: impl Iterator<Item = &'a str>) -> Result<(), ScramError> {
    for attr in attrs {
        let b = attr.as_bytes();
        if b.len() < 2 || !b[0].is_ascii_alphabetic() || b[1] != b'=' {
            return Err(ScramError::Malformed("invalid extension attribute"));
        }
    }
    Ok(())
}

/// RFC 5802 §7 `printable`: %x21-2B / %x2D-7E (no comma).
fn is_printable(b: u8) -> bool {
    matches!(b, 0x21..=0x2B | 0x2D..=0x7E)
}

fn parse_iterations(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|n| (1..=MAX_ITERATIONS).contains(n))
}

fn decode_key(s: &str) -> Option<[u8; SCRAM_KEY_LEN]> {
    // A 32-byte key is 44 base64 characters; refuse longer input before decoding.
    if s.len() != SCRAM_KEY_LEN.div_ceil(3) * 4 {
        return None;
    }
    B64.decode(s).ok()?.try_into().ok()
}

/// An HMAC-SHA-256 keyed with `key`, constructed infallibly.
///
/// RFC 2104 §2: keys longer than the block are hashed first and shorter ones
/// zero-padded, so normalising to exactly one block gives the same MAC.
fn hmac_key(key: &[u8]) -> HmacSha256 {
    let mut block = [0u8; SHA256_BLOCK_LEN];
    if key.len() > SHA256_BLOCK_LEN {
        block[..SCRAM_KEY_LEN].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    <HmacSha256 as hmac::digest::KeyInit>::new(&block.into())
}

fn hmac_once(key: &[u8], msg: &[u8]) -> [u8; SCRAM_KEY_LEN] {
    let mut mac = hmac_key(key);
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

/// `Hi(str, salt, i)` from RFC 5802 §2.2 (PBKDF2-HMAC-SHA-256, one block).
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; SCRAM_KEY_LEN] {
    let keyed = hmac_key(password);
    let mut mac = keyed.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut u: [u8; SCRAM_KEY_LEN] = mac.finalize().into_bytes().into();
    let mut out = u;
    for _ in 1..iterations {
        let mut mac = keyed.clone();
        mac.update(&u);
        u = mac.finalize().into_bytes().into();
        for (o, x) in out.iter_mut().zip(u.iter()) {
            *o ^= x;
        }
    }
    out
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
