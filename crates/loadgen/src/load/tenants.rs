//! Who the virtual users log in as: one target, or one per tenant from a
//! template whose `{tenant}` placeholders (user, database, password) are
//! filled with each tenant's name (`t000`, `t001`, …). A tenant's password
//! is the template's, or a token minted for its user and database before
//! the run (HS256, valid for all of it), as an application mints its own
//! short-lived credentials.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use gatehouse_token::{IssueRequest, IssuingKey, issue, unix_seconds};

use super::client::{Target, Tls};

/// The placeholder replaced by the tenant name in targets and SQL.
pub const PLACEHOLDER: &str = "{tenant}";

/// The name of tenant `index`: `t000`, `t001`, ... (`t1000` past 999).
pub fn tenant_name(index: u32) -> String {
    format!("t{index:03}")
}

/// `template` with every `{tenant}` replaced by `tenant`; other text,
/// braces included, is kept as it is.
pub fn fill(template: &str, tenant: &str) -> String {
    template.replace(PLACEHOLDER, tenant)
}

/// What the minted tokens carry and the shared secret that signs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSpec {
    pub issuer: String,
    pub audience: String,
    pub secret_file: PathBuf,
}

impl TokenSpec {
    /// `ISSUER,AUDIENCE,HS256_SECRET_FILE` (the file name may itself
    /// contain commas). Used as a clap value parser, hence the `String`
    /// error.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut parts = raw.splitn(3, ',');
        let (Some(issuer), Some(audience), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("expected ISSUER,AUDIENCE,HS256_SECRET_FILE".to_string());
        };
        if issuer.is_empty() || audience.is_empty() || file.is_empty() {
            return Err("issuer, audience and secret file must not be empty".to_string());
        }
        Ok(Self {
            issuer: issuer.to_string(),
            audience: audience.to_string(),
            secret_file: PathBuf::from(file),
        })
    }
}

/// A token is minted for the run's length plus this (slow requests, clock
/// skew between the load generator and the proxy).
const TOKEN_MARGIN: Duration = Duration::from_secs(600);

/// How the users authenticate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// The password in the connection string.
    Password,
    /// A token per tenant, minted up front.
    Token(TokenSpec),
}

impl Auth {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Password => "password",
            Self::Token(_) => "token",
        }
    }
}

/// A tenant's name (empty without tenants), where it logs in, and from
/// when in the run (a target added mid-run, as a DNS name gains an
/// address).
pub struct Tenant {
    pub name: String,
    pub target: Target,
    /// Offset from the run's start before which no request picks it.
    pub from: Duration,
}

/// The targets of a run: `count` tenants filled into `template`, or (0)
/// the template as it is, which then must not hold `{tenant}`.
pub fn build(template: &str, count: u32, tls: Option<&Tls>, auth: &Auth, lifetime: Duration) -> Result<Vec<Tenant>> {
    let key = match auth {
        Auth::Token(spec) => Some(
            IssuingKey::hs256_from_file(&spec.secret_file, None)
                .with_context(|| format!("loading the HS256 secret {}", spec.secret_file.display()))?,
        ),
        Auth::Password => None,
    };
    let names: Vec<String> = if count == 0 {
        if template.contains(PLACEHOLDER) {
            bail!("the target holds {PLACEHOLDER}: say how many with --tenants");
        }
        vec![String::new()]
    } else {
        if !template.contains(PLACEHOLDER) {
            bail!("--tenants needs {PLACEHOLDER} in the target (the user and database of each tenant)");
        }
        (0..count).map(tenant_name).collect()
    };
    let now = unix_seconds(SystemTime::now());
    let ttl = lifetime.saturating_add(TOKEN_MARGIN);
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let target = Target::parse_with(&fill(template, &name), tls)?;
        let target = match (auth, &key) {
            (Auth::Token(spec), Some(key)) => {
                let user = target.user().context("a token needs a user in the target")?;
                let database = target.database().context("a token needs a database in the target")?;
                let request = IssueRequest {
                    issuer: spec.issuer.clone(),
                    audience: spec.audience.clone(),
                    tenant: user.to_owned(),
                    database: database.to_owned(),
                    ttl,
                    now,
                };
                let token = issue(key, &request).with_context(|| format!("minting a token for {user}"))?;
                target.with_password(&token)
            }
            _ => target,
        };
        out.push(Tenant {
            name,
            target,
            from: Duration::ZERO,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_zero_padded() {
        assert_eq!(tenant_name(0), "t000");
        assert_eq!(tenant_name(42), "t042");
        assert_eq!(tenant_name(1000), "t1000");
    }

    #[test]
    fn fill_replaces_every_placeholder_only() {
        assert_eq!(
            fill("host=127.0.0.1 user={tenant} dbname={tenant}", "t007"),
            "host=127.0.0.1 user=t007 dbname=t007"
        );
        assert_eq!(fill("{other} {tenant", "t1"), "{other} {tenant");
    }

    #[test]
    fn token_specs_have_three_parts_the_file_may_hold_commas() {
        let spec = TokenSpec::parse("iss,rw,/tmp/a,b.secret");
        assert_eq!(
            spec,
            Ok(TokenSpec {
                issuer: "iss".into(),
                audience: "rw".into(),
                secret_file: "/tmp/a,b.secret".into(),
            })
        );
        for bad in ["iss,rw", ",rw,/f", "iss,,/f", "iss,rw,"] {
            assert!(TokenSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tenants_fill_user_database_and_password() -> Result<()> {
        let tenants = build(
            "mysql://{tenant}:pw-{tenant}@127.0.0.1:3306/{tenant}",
            3,
            None,
            &Auth::Password,
            Duration::from_secs(10),
        )?;
        let names: Vec<_> = tenants.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["t000", "t001", "t002"]);
        assert_eq!(tenants[2].target.user(), Some("t002"));
        assert_eq!(tenants[2].target.database(), Some("t002"));
        let pg = build(
            "host=h user={tenant} dbname={tenant}",
            1,
            None,
            &Auth::Password,
            Duration::ZERO,
        )?;
        assert_eq!(pg[0].target.database(), Some("t000"));
        Ok(())
    }

    #[test]
    fn a_placeholder_and_a_tenant_count_go_together() {
        let none = build("mysql://u@h/{tenant}", 0, None, &Auth::Password, Duration::ZERO);
        assert!(none.is_err());
        let missing = build("mysql://u@h/db", 5, None, &Auth::Password, Duration::ZERO);
        assert!(missing.is_err());
        let one = build("mysql://u@h/db", 0, None, &Auth::Password, Duration::ZERO);
        assert!(one.is_ok_and(|t| t.len() == 1 && t[0].name.is_empty()));
    }
}
