//! The cache of verified tokens, so a connection storm presenting the same
//! token verifies its signature once.
//!
//! Entries are keyed by a SHA-256 digest of the token text and the audience
//! (never the text itself), live until the token's `exp` (not `exp` plus the
//! leeway), and are bounded in number. `moka`'s per-entry expiry drops an entry
//! on its own clock; independently, every lookup compares the entry's `exp`
//! with the caller's `now`, so an entry past its expiry is never returned
//! whatever the two clocks say.

use std::time::{Duration, Instant};

use moka::Expiry;
use moka::sync::Cache;
use sha2::{Digest, Sha256};

use crate::claims::Claims;

pub(crate) type CacheKey = [u8; 32];

#[derive(Clone)]
struct Entry {
    claims: Claims,
    not_before: Option<u64>,
    ttl: Duration,
}

/// Expires each entry after its own time to live, set when it was inserted.
struct UntilTokenExpiry;

impl Expiry<CacheKey, Entry> for UntilTokenExpiry {
    fn expire_after_create(&self, _key: &CacheKey, value: &Entry, _created_at: Instant) -> Option<Duration> {
        Some(value.ttl)
    }

    fn expire_after_update(
        &self,
        _key: &CacheKey,
        value: &Entry,
        _updated_at: Instant,
        _duration_until_expiry: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// A bounded cache of verified claims; capacity 0 disables it.
pub(crate) struct TokenCache {
    inner: Option<Cache<CacheKey, Entry>>,
}

impl TokenCache {
    pub(crate) fn new(capacity: u64) -> Self {
        let inner = (capacity > 0).then(|| {
            Cache::builder()
                .max_capacity(capacity)
                .expire_after(UntilTokenExpiry)
                .build()
        });
        TokenCache { inner }
    }

    /// SHA-256 over the token's length, the token and the audience. The
    /// length prefix keeps (token, audience) pairs from colliding by moving
    /// bytes between the two.
    pub(crate) fn key(token: &str, audience: &str) -> CacheKey {
        let mut hasher = Sha256::new();
        hasher.update((token.len() as u64).to_be_bytes());
        hasher.update(token.as_bytes());
        hasher.update(audience.as_bytes());
        hasher.finalize().into()
    }

    /// The cached claims, if present and still valid at `now`.
    pub(crate) fn get(&self, key: &CacheKey, now: u64, leeway: u64) -> Option<Claims> {
        let cache = self.inner.as_ref()?;
        let entry = cache.get(key)?;
        if entry.claims.expires_at <= now {
            cache.invalidate(key);
            return None;
        }
        if entry.not_before.is_some_and(|nbf| nbf > now.saturating_add(leeway)) {
            // Only reachable when the caller's clock went backwards.
            return None;
        }
        Some(entry.claims)
    }

    /// Caches claims verified at `now` until their `exp`; tokens accepted
    /// only thanks to the leeway past `exp` are not cached.
    pub(crate) fn insert(&self, key: CacheKey, claims: &Claims, not_before: Option<u64>, now: u64) {
        let Some(cache) = &self.inner else { return };
        let Some(remaining) = claims.expires_at.checked_sub(now).filter(|&s| s > 0) else {
            return;
        };
        cache.insert(
            key,
            Entry {
                claims: claims.clone(),
                not_before,
                ttl: Duration::from_secs(remaining),
            },
        );
    }
}
