//! Who the virtual users log in as: one target, or one per tenant from a
//! template whose `{tenant}` placeholders (user, database, password) are
//! filled with each tenant's name (`t000`, `t001`, …). A tenant's password
//! is the template's, or a token minted for its user and database before
//! the run (HS256, valid for all of it), as an application mints its own
//! short-lived credentials.

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use gatehouse_token::{IssueRequest, IssuingKey, issue, unix_seconds};

use super::client::{Target, Tls};
use crate::tenant_storm::spec::{PLACEHOLDER, TokenSpec, fill, tenant_name};

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

/// A tenant's name (empty without tenants) and where it logs in.
pub struct Tenant {
    pub name: String,
    pub target: Target,
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
        out.push(Tenant { name, target });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
