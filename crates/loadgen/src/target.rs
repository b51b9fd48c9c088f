//! Experiment targets: parsing `NAME=CONNINFO` command-line values into a
//! named [`tokio_postgres::Config`].

use std::str::FromStr;

use tokio_postgres::Config;

/// A named PostgreSQL endpoint (direct server or through the proxy).
#[derive(Clone, Debug)]
pub struct Target {
    pub name: String,
    pub config: Config,
}

/// Parse `NAME=CONNINFO`, splitting at the first `=`. Used as a clap value
/// parser, hence the `String` error.
pub fn parse_target(raw: &str) -> Result<Target, String> {
    let (name, conninfo) = raw
        .split_once('=')
        .ok_or_else(|| "expected NAME=CONNINFO".to_string())?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("invalid target name {name:?}"));
    }
    let config = Config::from_str(conninfo).map_err(|e| format!("bad conninfo for {name}: {e}"))?;
    Ok(Target {
        name: name.to_string(),
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_first_equals() {
        let t = parse_target("direct=host=127.0.0.1 port=5432 user=u dbname=d").unwrap();
        assert_eq!(t.name, "direct");
        assert_eq!(t.config.get_user(), Some("u"));
        assert_eq!(t.config.get_ports(), &[5432]);
    }

    #[test]
    fn rejects_bad_values() {
        assert!(parse_target("nothing").is_err());
        assert!(parse_target("=host=x").is_err());
        assert!(parse_target("a b=host=x").is_err());
        assert!(parse_target("x=port=notanumber").is_err());
    }
}
