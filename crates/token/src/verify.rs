//! Token verification, [`Verifier`]: header and algorithm checks, key choice,
//! signature, then the payload checks of `claims.rs`, with verified tokens
//! served from the cache of `cache.rs` until they expire.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::alg::Alg;
use crate::cache::TokenCache;
use crate::claims::{self, Claims, Expect};
use crate::error::TokenError;
use crate::keys::KeySet;

/// Longer tokens are refused before any decoding. Real tokens of this
/// crate's shape are a few hundred bytes; RS256 with an 8192-bit key
/// stays under 2 KiB.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// Default tolerance for clock skew on `exp` and `nbf`.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);

/// Default number of verified tokens kept in the cache.
pub const DEFAULT_CACHE_CAPACITY: u64 = 10_000;

/// Everything a [`Verifier`] needs.
pub struct VerifierConfig {
    /// The only accepted `iss`.
    pub issuer: String,
    /// Tolerance on `exp` and `nbf`, in whole seconds.
    pub leeway: Duration,
    /// The verifying keys.
    pub keys: KeySet,
    /// Most verified tokens kept; 0 disables the cache.
    pub cache_capacity: u64,
}

impl VerifierConfig {
    /// A config with the default leeway (30 s) and cache capacity.
    pub fn new(issuer: impl Into<String>, keys: KeySet) -> Self {
        VerifierConfig {
            issuer: issuer.into(),
            leeway: DEFAULT_LEEWAY,
            keys,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
        }
    }
}

/// The header fields this crate reads. Others (`typ`, `cty`, `jku`, `jwk`,
/// `x5u`, ...) are ignored: keys only ever come from the [`KeySet`].
#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    /// RFC 7515 §4.1.11: a recipient that does not understand the listed
    /// extensions must refuse the token, and this crate understands none.
    #[serde(default)]
    crit: Option<IgnoredAny>,
}

/// Verifies tokens against one issuer and one key set, caching the results.
pub struct Verifier {
    issuer: String,
    leeway: u64,
    keys: KeySet,
    cache: TokenCache,
    cache_hits: AtomicU64,
    verifications: AtomicU64,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.issuer)
            .field("leeway", &self.leeway)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// Seconds since the Unix epoch; 0 for times before it.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Verifier {
    /// Refuses a config without keys or without an issuer.
    pub fn new(config: VerifierConfig) -> Result<Self, TokenError> {
        if config.keys.is_empty() {
            return Err(TokenError::KeyLoad("no verifying key configured".to_owned()));
        }
        if config.issuer.is_empty() {
            return Err(TokenError::KeyLoad("no issuer configured".to_owned()));
        }
        Ok(Verifier {
            issuer: config.issuer,
            leeway: config.leeway.as_secs(),
            keys: config.keys,
            cache: TokenCache::new(config.cache_capacity),
            cache_hits: AtomicU64::new(0),
            verifications: AtomicU64::new(0),
        })
    }

    /// Verifies `token` for the endpoint `audience` at `now` (seconds since
    /// the Unix epoch), from the cache when it was verified before.
    pub fn verify(&self, token: &str, audience: &str, now: u64) -> Result<Claims, TokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Malformed("token is too long"));
        }
        let key = TokenCache::key(token, audience);
        if let Some(claims) = self.cache.get(&key, now, self.leeway) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(claims);
        }
        self.verifications.fetch_add(1, Ordering::Relaxed);
        let checked = self.verify_uncached(token, audience, now)?;
        self.cache.insert(key, &checked.claims, checked.not_before, now);
        Ok(checked.claims)
    }

    /// [`Verifier::verify`] at the current system time.
    pub fn verify_now(&self, token: &str, audience: &str) -> Result<Claims, TokenError> {
        self.verify(token, audience, unix_seconds(SystemTime::now()))
    }

    /// How many verifications were answered from the cache.
    pub fn cache_hits(&self) -> u64 {
        self.cache_hits.load(Ordering::Relaxed)
    }

    /// How many verifications ran in full (cache misses), whatever their
    /// outcome.
    pub fn verifications(&self) -> u64 {
        self.verifications.load(Ordering::Relaxed)
    }

    fn verify_uncached(&self, token: &str, audience: &str, now: u64) -> Result<claims::Checked, TokenError> {
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("token is not three dot-separated parts"));
        };
        let header = URL_SAFE_NO_PAD
            .decode(header_b64)
            .map_err(|_| TokenError::Malformed("header is not base64url"))?;
        let header: Header =
            serde_json::from_slice(&header).map_err(|_| TokenError::Malformed("header is not a valid JOSE header"))?;

        // The algorithm is checked before anything else is done with the
        // token: `none` and unlisted algorithms never reach a key.
        let alg = Alg::from_header(&header.alg).ok_or(TokenError::AlgorithmNotAllowed)?;
        if header.crit.is_some() {
            return Err(TokenError::Malformed("critical header extensions are not supported"));
        }
        let candidates = self.keys.candidates(alg, header.kid.as_deref())?;

        if signature.is_empty() {
            return Err(TokenError::BadSignature);
        }
        let signed = &token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()];
        let verified = candidates.iter().any(|key| {
            // An undecodable signature is simply one that does not verify.
            jsonwebtoken::crypto::verify(signature, signed, &key.key, alg.to_jwt()).unwrap_or(false)
        });
        if !verified {
            return Err(TokenError::BadSignature);
        }

        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| TokenError::Malformed("payload is not base64url"))?;
        claims::check(
            &payload,
            &Expect {
                issuer: &self.issuer,
                audience,
                leeway: self.leeway,
                now,
            },
        )
    }
}
