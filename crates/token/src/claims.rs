//! The claims of a verified token, [`Claims`], and the checks of a token's
//! payload after its signature verified: `exp`, `nbf`, `iss`, `aud`, `sub`
//! and `db`.

use serde::Deserialize;

use crate::error::TokenError;

/// What a verified token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The tenant, from `sub`.
    pub tenant: String,
    /// The one database the token allows, from `db`.
    pub database: String,
    /// `exp`, in seconds since the Unix epoch.
    pub expires_at: u64,
}

/// The payload as sent. Unknown claims are ignored; a claim of the wrong
/// type or a repeated claim makes the payload malformed.
#[derive(Deserialize)]
struct Payload {
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    db: Option<String>,
    #[serde(default)]
    exp: Option<serde_json::Number>,
    #[serde(default)]
    nbf: Option<serde_json::Number>,
    #[serde(default)]
    iat: Option<serde_json::Number>,
    /// Must be a string when present; its value is not used.
    #[serde(default, rename = "jti")]
    _jti: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn contains(&self, audience: &str) -> bool {
        match self {
            Audience::One(one) => one == audience,
            Audience::Many(many) => many.iter().any(|a| a == audience),
        }
    }
}

/// What the payload checks need besides the payload.
pub(crate) struct Expect<'a> {
    pub issuer: &'a str,
    pub audience: &'a str,
    pub leeway: u64,
    pub now: u64,
}

/// The checked claims, plus `nbf` so the cache can recheck it.
pub(crate) struct Checked {
    pub claims: Claims,
    pub not_before: Option<u64>,
}

/// A NumericDate (RFC 7519 §2): seconds since the epoch, possibly with a
/// fraction, which is dropped.
fn numeric_date(value: &serde_json::Number) -> Result<u64, TokenError> {
    if let Some(secs) = value.as_u64() {
        return Ok(secs);
    }
    match value.as_f64() {
        // `as` saturates at u64::MAX, which is what a far-future date means.
        Some(secs) if secs.is_finite() && secs >= 0.0 => Ok(secs as u64),
        _ => Err(TokenError::Malformed("a date claim is not a non-negative number")),
    }
}

fn required(value: Option<String>, name: &'static str) -> Result<String, TokenError> {
    value.filter(|v| !v.is_empty()).ok_or(TokenError::MissingClaim(name))
}

/// Checks a decoded payload. The order is fixed: dates, issuer, audience,
/// then the tenant and database, so an expired token never gets as far as
/// saying anything about its subject.
pub(crate) fn check(payload: &[u8], expect: &Expect<'_>) -> Result<Checked, TokenError> {
    let payload: Payload =
        serde_json::from_slice(payload).map_err(|_| TokenError::Malformed("payload is not a valid claims object"))?;

    let exp = payload
        .exp
        .as_ref()
        .ok_or(TokenError::MissingClaim("exp"))
        .and_then(numeric_date)?;
    if expect.now >= exp.saturating_add(expect.leeway) {
        return Err(TokenError::Expired);
    }
    let not_before = payload.nbf.as_ref().map(numeric_date).transpose()?;
    if not_before.is_some_and(|nbf| nbf > expect.now.saturating_add(expect.leeway)) {
        return Err(TokenError::NotYetValid);
    }
    if let Some(iat) = &payload.iat {
        numeric_date(iat)?;
    }

    let issuer = payload.iss.ok_or(TokenError::MissingClaim("iss"))?;
    if issuer != expect.issuer {
        return Err(TokenError::WrongIssuer);
    }
    let audience = payload.aud.ok_or(TokenError::MissingClaim("aud"))?;
    if !audience.contains(expect.audience) {
        return Err(TokenError::WrongAudience);
    }

    let tenant = required(payload.sub, "sub")?;
    let database = required(payload.db, "db")?;
    Ok(Checked {
        claims: Claims {
            tenant,
            database,
            expires_at: exp,
        },
        not_before,
    })
}
