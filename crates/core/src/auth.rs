//! Engine-agnostic checks of a password a client sent as such (PostgreSQL's
//! cleartext password message over TLS, MySQL's clear-text plugin): either a
//! signed token, verified against `[tokens]` and bound to the tenant, the
//! database and the endpoint, or the tenant's password, checked against its
//! stored verifier. Every failure looks the same to the client; the reason
//! is only for the proxy's log. PBKDF2 runs off the network thread, a
//! bounded number at a time.

use std::sync::Arc;

use gatehouse_proto_pg::auth::md5::md5_stored;
use gatehouse_proto_pg::auth::scram::{DEFAULT_ITERATIONS, ScramVerifier};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use crate::config::{Settings, Tenant, TenantAuth};

/// Why a presented password was refused (for logs; never shown to clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("token refused: {0}")]
    Token(&'static str),
    #[error("token does not match the user name or database")]
    TokenMismatch,
    #[error("tenant does not accept tokens")]
    TokensNotAllowed,
    #[error("no such tenant, or no password method for it")]
    NoPassword,
    #[error("wrong password")]
    WrongPassword,
    #[error("password hashing was interrupted")]
    Interrupted,
}

/// What a presented password is checked against.
pub struct Check<'a> {
    pub settings: &'a Settings,
    /// Bounds concurrent PBKDF2 runs (connection storms must not starve the
    /// network thread or pile up unbounded work).
    pub hashing: &'a Arc<Semaphore>,
    /// Salt source for the mock hash run for unknown tenants.
    pub mock_seed: &'a [u8],
    pub tenant: Option<&'a Arc<Tenant>>,
    pub user: &'a str,
    pub database: &'a str,
    /// The endpoint's name: a token's audience must contain it.
    pub audience: &'a str,
}

/// Whether `password` has a JWT's shape (three base64url parts, the first
/// a JSON object): such a password is only ever checked as a token.
pub fn looks_like_token(password: &str) -> bool {
    password.starts_with("eyJ")
        && password.split('.').count() == 3
        && password
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Check<'_> {
    /// Checks `password` (a token or the tenant's password).
    pub async fn password(&self, password: &str) -> Result<(), AuthFailure> {
        if looks_like_token(password) {
            return self.token(password);
        }
        match self.tenant.and_then(|t| t.auth.as_ref()) {
            Some(TenantAuth::Scram(v)) => {
                let v = v.clone();
                let pw = zeroize::Zeroizing::new(password.to_owned());
                let ok = self.hash(move || v.verify_password(&pw)).await?;
                if ok { Ok(()) } else { Err(AuthFailure::WrongPassword) }
            }
            Some(TenantAuth::Md5(stored)) => {
                let ok: bool = md5_stored(self.user, password)
                    .as_bytes()
                    .ct_eq(stored.as_bytes())
                    .into();
                if ok { Ok(()) } else { Err(AuthFailure::WrongPassword) }
            }
            None if self.tenant.is_some_and(|t| t.mysql_native.is_some()) => {
                // A MySQL tenant stored with SHA1(SHA1(password)) only.
                let stored = self.tenant.and_then(|t| t.mysql_native).unwrap_or_default();
                let computed = gatehouse_proto_mysql::auth::native_password::stored_hash(password.as_bytes());
                if bool::from(computed.ct_eq(&stored)) {
                    Ok(())
                } else {
                    Err(AuthFailure::WrongPassword)
                }
            }
            None => {
                // The same cost as a real check, so timing does not tell
                // whether the tenant exists.
                let salt: Vec<u8> = self.mock_seed.iter().take(16).copied().collect();
                let pw = zeroize::Zeroizing::new(password.to_owned());
                self.hash(move || ScramVerifier::from_password(&pw, &salt, DEFAULT_ITERATIONS))
                    .await?;
                Err(AuthFailure::NoPassword)
            }
        }
    }

    fn token(&self, token: &str) -> Result<(), AuthFailure> {
        let Some(verifier) = &self.settings.tokens else {
            return Err(AuthFailure::Token("no [tokens] configured"));
        };
        let claims = verifier
            .verify_now(token, self.audience)
            .map_err(|e| AuthFailure::Token(token_reason(&e)))?;
        if claims.tenant != self.user || claims.database != self.database {
            return Err(AuthFailure::TokenMismatch);
        }
        if !self.tenant.is_some_and(|t| t.token) {
            return Err(AuthFailure::TokensNotAllowed);
        }
        Ok(())
    }

    /// Runs costly credential work (PBKDF2, RSA decryption) off the network
    /// threads, at most as many at once as the hashing semaphore allows.
    pub async fn hash<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, AuthFailure> {
        let _permit = self.hashing.acquire().await.map_err(|_| AuthFailure::Interrupted)?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|_| AuthFailure::Interrupted)
    }
}

fn token_reason(e: &gatehouse_token::TokenError) -> &'static str {
    use gatehouse_token::TokenError as E;
    match e {
        E::Malformed(_) => "malformed",
        E::AlgorithmNotAllowed => "algorithm not allowed",
        E::UnknownKey => "unknown key",
        E::BadSignature => "bad signature",
        E::Expired => "expired",
        E::NotYetValid => "not yet valid",
        E::WrongIssuer => "wrong issuer",
        E::WrongAudience => "wrong audience",
        E::MissingClaim(_) => "missing claim",
        _ => "invalid",
    }
}

#[cfg(test)]
mod tests {
    use super::looks_like_token;

    #[test]
    fn token_shape() {
        assert!(looks_like_token("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"));
        assert!(!looks_like_token("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0"));
        assert!(!looks_like_token("correct horse battery staple"));
        assert!(!looks_like_token("eyJ.a b.c"));
        assert!(!looks_like_token(""));
    }
}
