//! The pure side of the tenant-storm experiment: tenant names, `{tenant}`
//! template substitution, parsing of the `--target*` command-line values,
//! assembling them into one [`TargetSpec`] per target, and reading a
//! process's CPU ticks out of `/proc/PID/stat` text.

use std::path::PathBuf;
use std::str::FromStr;

use tokio_postgres::Config;

/// The placeholder replaced by the tenant name in templates.
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

/// How a target's virtual users authenticate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// A password template (`pw-{tenant}`).
    Password(String),
    /// A token minted per tenant up front.
    Token(TokenSpec),
}

/// `ISSUER,AUDIENCE,HS256_SECRET_FILE`: what the minted tokens carry and the
/// shared secret that signs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSpec {
    pub issuer: String,
    pub audience: String,
    pub secret_file: PathBuf,
}

/// One fully described target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSpec {
    pub name: String,
    /// libpq key=value string with `{tenant}` placeholders.
    pub template: String,
    pub credential: Credential,
    /// A process whose CPU time is measured while this target runs (the
    /// proxy in front of it).
    pub pid: Option<u32>,
}

/// `NAME=VALUE`, split at the first `=`; the name must be non-empty and
/// without whitespace. Used as a clap value parser, hence the `String` error.
pub fn parse_named(raw: &str) -> Result<(String, String), String> {
    let (name, value) = raw.split_once('=').ok_or_else(|| "expected NAME=VALUE".to_string())?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("invalid target name {name:?}"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// `--target NAME=CONNINFO_TEMPLATE`: the template must parse as a libpq
/// string once filled in.
pub fn parse_target(raw: &str) -> Result<(String, String), String> {
    let (name, template) = parse_named(raw)?;
    config_for(&template, &tenant_name(0)).map_err(|e| format!("target {name}: {e}"))?;
    Ok((name, template))
}

/// `--target-token NAME=ISSUER,AUDIENCE,HS256_SECRET_FILE` (the file name may
/// itself contain commas).
pub fn parse_token(raw: &str) -> Result<(String, TokenSpec), String> {
    let (name, value) = parse_named(raw)?;
    let mut parts = value.splitn(3, ',');
    let (Some(issuer), Some(audience), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("target {name}: expected ISSUER,AUDIENCE,HS256_SECRET_FILE"));
    };
    if issuer.is_empty() || audience.is_empty() || file.is_empty() {
        return Err(format!(
            "target {name}: issuer, audience and secret file must not be empty"
        ));
    }
    Ok((
        name,
        TokenSpec {
            issuer: issuer.to_string(),
            audience: audience.to_string(),
            secret_file: PathBuf::from(file),
        },
    ))
}

/// `--target-pid NAME=PID`.
pub fn parse_pid(raw: &str) -> Result<(String, u32), String> {
    let (name, value) = parse_named(raw)?;
    let pid = value
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("target {name}: {value:?} is not a process id"))?;
    Ok((name, pid))
}

/// The connection settings of `tenant` on a target.
pub fn config_for(template: &str, tenant: &str) -> Result<Config, String> {
    Config::from_str(&fill(template, tenant)).map_err(|e| format!("bad conninfo: {e}"))
}

/// The database a connection opens: `dbname`, else the user name (as libpq).
pub fn database_of(config: &Config) -> Option<&str> {
    config.get_dbname().or(config.get_user())
}

/// Joins the per-target options into one spec per `--target`, in order.
/// Every target needs exactly one credential (password or token);
/// credentials and pids must name a known target, once.
pub fn assemble(
    targets: Vec<(String, String)>,
    passwords: Vec<(String, String)>,
    tokens: Vec<(String, TokenSpec)>,
    pids: Vec<(String, u32)>,
) -> Result<Vec<TargetSpec>, String> {
    for (i, (name, _)) in targets.iter().enumerate() {
        if targets[..i].iter().any(|(other, _)| other == name) {
            return Err(format!("target name {name:?} given twice"));
        }
    }
    let known = |name: &str, option: &str| -> Result<(), String> {
        if targets.iter().any(|(t, _)| t == name) {
            Ok(())
        } else {
            Err(format!("{option} names unknown target {name:?}"))
        }
    };
    for (name, _) in &passwords {
        known(name, "--target-password")?;
    }
    for (name, _) in &tokens {
        known(name, "--target-token")?;
    }
    for (i, (name, _)) in pids.iter().enumerate() {
        known(name, "--target-pid")?;
        if pids[..i].iter().any(|(other, _)| other == name) {
            return Err(format!("--target-pid given twice for {name:?}"));
        }
    }
    let mut out = Vec::with_capacity(targets.len());
    for (name, template) in targets {
        let mut found: Vec<Credential> = passwords
            .iter()
            .filter(|(t, _)| *t == name)
            .map(|(_, p)| Credential::Password(p.clone()))
            .collect();
        found.extend(
            tokens
                .iter()
                .filter(|(t, _)| *t == name)
                .map(|(_, s)| Credential::Token(s.clone())),
        );
        let credential = match found.len() {
            1 => found.remove(0),
            0 => return Err(format!("target {name}: needs --target-password or --target-token")),
            _ => return Err(format!("target {name}: more than one credential given")),
        };
        let pid = pids.iter().find(|(t, _)| *t == name).map(|&(_, p)| p);
        out.push(TargetSpec {
            name,
            template,
            credential,
            pid,
        });
    }
    Ok(out)
}

/// User plus system CPU ticks from the text of `/proc/PID/stat` (fields 14
/// and 15; the command name in parentheses may contain spaces).
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(issuer: &str) -> TokenSpec {
        TokenSpec {
            issuer: issuer.into(),
            audience: "rw".into(),
            secret_file: "/s".into(),
        }
    }

    #[test]
    fn names_are_zero_padded() {
        assert_eq!(tenant_name(0), "t000");
        assert_eq!(tenant_name(42), "t042");
        assert_eq!(tenant_name(199), "t199");
        assert_eq!(tenant_name(1000), "t1000");
    }

    #[test]
    fn fill_replaces_every_placeholder_only() {
        assert_eq!(
            fill("host=127.0.0.1 user={tenant} dbname={tenant}", "t007"),
            "host=127.0.0.1 user=t007 dbname=t007"
        );
        assert_eq!(fill("pw-{tenant}", "t1"), "pw-t1");
        assert_eq!(fill("{other} {tenant", "t1"), "{other} {tenant");
        assert_eq!(fill("fixed", "t1"), "fixed");
    }

    #[test]
    fn config_and_database_come_from_the_filled_template() {
        let c = config_for("host=127.0.0.1 port=6432 user={tenant} dbname=db_{tenant}", "t003").unwrap();
        assert_eq!(c.get_user(), Some("t003"));
        assert_eq!(database_of(&c), Some("db_t003"));
        assert_eq!(c.get_ports(), &[6432]);
        let c = config_for("host=127.0.0.1 user={tenant}", "t004").unwrap();
        assert_eq!(database_of(&c), Some("t004"));
        assert!(config_for("port=notaport user={tenant}", "t0").is_err());
    }

    #[test]
    fn parses_target_values() {
        let (name, template) = parse_target("gh=host=127.0.0.1 user={tenant}").unwrap();
        assert_eq!(name, "gh");
        assert_eq!(template, "host=127.0.0.1 user={tenant}");
        assert!(parse_target("nothing").is_err());
        assert!(parse_target("=host=x").is_err());
        assert!(parse_target("a b=host=x").is_err());
        assert!(parse_target("x=port=bad").is_err());

        let (name, spec) = parse_token("gh=iss,rw,/tmp/a,b.secret").unwrap();
        assert_eq!(name, "gh");
        assert_eq!(spec.issuer, "iss");
        assert_eq!(spec.audience, "rw");
        assert_eq!(spec.secret_file, PathBuf::from("/tmp/a,b.secret"));
        assert!(parse_token("gh=iss,rw").is_err());
        assert!(parse_token("gh=,rw,/f").is_err());

        assert_eq!(parse_pid("gh= 123").unwrap(), ("gh".to_string(), 123));
        assert!(parse_pid("gh=x").is_err());
        assert_eq!(
            parse_named("d=pw-{tenant}=x").unwrap(),
            ("d".to_string(), "pw-{tenant}=x".to_string())
        );
    }

    #[test]
    fn assembles_one_spec_per_target_in_order() {
        let specs = assemble(
            vec![
                ("direct".into(), "user={tenant}".into()),
                ("gh".into(), "port=1".into()),
            ],
            vec![("direct".into(), "pw-{tenant}".into())],
            vec![("gh".into(), token("iss"))],
            vec![("gh".into(), 42)],
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].name, "direct");
        assert_eq!(specs[0].credential, Credential::Password("pw-{tenant}".into()));
        assert_eq!(specs[0].pid, None);
        assert_eq!(specs[1].credential, Credential::Token(token("iss")));
        assert_eq!(specs[1].pid, Some(42));
    }

    #[test]
    fn assemble_rejects_inconsistent_options() {
        let targets = || vec![("a".to_string(), "x".to_string())];
        let pw = |n: &str| vec![(n.to_string(), "p".to_string())];
        // No credential, two credentials, unknown names, duplicates.
        assert!(assemble(targets(), vec![], vec![], vec![]).is_err());
        assert!(assemble(targets(), pw("a"), vec![("a".into(), token("i"))], vec![]).is_err());
        assert!(assemble(targets(), pw("b"), vec![], vec![]).is_err());
        assert!(assemble(targets(), pw("a"), vec![("b".into(), token("i"))], vec![]).is_err());
        assert!(assemble(targets(), pw("a"), vec![], vec![("b".into(), 1)]).is_err());
        assert!(assemble(targets(), pw("a"), vec![], vec![("a".into(), 1), ("a".into(), 2)]).is_err());
        let twice = vec![("a".to_string(), "x".to_string()), ("a".to_string(), "y".to_string())];
        assert!(assemble(twice, pw("a"), vec![], vec![]).is_err());
        assert!(assemble(targets(), pw("a"), vec![], vec![("a".into(), 1)]).is_ok());
    }

    #[test]
    fn cpu_ticks_sums_utime_and_stime() {
        let stat = "1234 (gate house) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 3 0 100 0 0";
        assert_eq!(cpu_ticks(stat), Some(325));
        assert_eq!(cpu_ticks("1234 (x) S 1 2"), None);
        assert_eq!(cpu_ticks("garbage"), None);
    }
}
