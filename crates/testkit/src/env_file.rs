//! The shell-sourceable `DIR/cluster.env` file: rendering a cluster's
//! [`State`] as `KEY=value` lines (values shell-quoted when needed) and
//! parsing it back for [`crate::Cluster::attach`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::model::{Engine, Role, Server};
use crate::testbed::Testbed;
use crate::{mysql, pg, tls};

/// Everything `cluster.env` records.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct State {
    pub dir: PathBuf,
    pub servers: Vec<Server>,
    pub pg_password: String,
    pub mysql_password: String,
    pub pg_max_connections: u32,
    pub mysql_max_connections: u32,
    /// Name of the current PostgreSQL primary (changes on promote).
    pub pg_primary: Option<String>,
    /// Name of the current MariaDB primary (changes on promote).
    pub mysql_primary: Option<String>,
    /// The TLS files every server uses, when started with [`crate::Options::tls`].
    pub tls: Option<tls::Files>,
    /// Where the PostgreSQL binaries are, when not the host's own
    /// ([`crate::Options::pg_bindir`]).
    pub pg_bindir: Option<PathBuf>,
    /// The testbed the servers run on ([`crate::Options::testbed`]).
    pub testbed: Testbed,
    /// Its hosts' cgroup id, when it gives budgets or runs relays.
    pub testbed_id: Option<String>,
}

/// Quote a value for POSIX sh: bare if harmless, else single-quoted.
pub(crate) fn quote(value: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:,@+%=".contains(c);
    if !value.is_empty() && value.chars().all(plain) {
        value.to_string()
    } else if value.chars().all(|c| plain(c) || c == ' ') {
        format!("\"{value}\"")
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// Undo [`quote`] (and the common sh quoting forms): `'..'`, `".."`, `\x`.
fn unquote(raw: &str) -> Result<String> {
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next() {
                    Some('\'') => break,
                    Some(c) => out.push(c),
                    None => bail!("unterminated ' in {raw:?}"),
                }
            },
            '"' => loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => out.extend(chars.next()),
                    Some(c) => out.push(c),
                    None => bail!("unterminated \" in {raw:?}"),
                }
            },
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Parse `KEY=value` lines (comments and blank lines ignored).
pub(crate) fn parse_lines(text: &str) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, raw)) = line.split_once('=') else {
            bail!("line {}: expected KEY=value, got {line:?}", n + 1);
        };
        map.insert(
            key.to_string(),
            unquote(raw).with_context(|| format!("line {}", n + 1))?,
        );
    }
    Ok(map)
}

fn engine_prefix(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres => "PG",
        Engine::Mysql => "MYSQL",
    }
}

/// Render the whole file.
pub(crate) fn render(st: &State) -> String {
    let mut out = String::from("# Written by gatehouse-testkit; source it from a shell.\n");
    let mut put = |k: &str, v: &str| out.push_str(&format!("{k}={}\n", quote(v)));
    put("GH_DIR", &st.dir.to_string_lossy());
    if let Some(f) = &st.tls {
        put("GH_TLS_CA", &f.ca.to_string_lossy());
    }
    if let Some(dir) = &st.pg_bindir {
        put("GH_PG_BINDIR", &dir.to_string_lossy());
    }
    if let Some(id) = &st.testbed_id {
        put("GH_TESTBED_ID", id);
    }
    let bed = &st.testbed;
    if let Some(cpu) = bed.server_cpu {
        put("GH_TESTBED_SERVER_CPU", &cpu.to_string());
    }
    if let Some(lat) = bed.latency {
        put("GH_TESTBED_LATENCY_US", &lat.as_micros().to_string());
        put("GH_TESTBED_JITTER_US", &bed.jitter.as_micros().to_string());
    }
    if let Some(cpu) = bed.net_cpu {
        put("GH_TESTBED_NET_CPU", &cpu.to_string());
    }
    if let Some(bin) = &bed.relay_bin {
        put("GH_TESTBED_RELAY_BIN", &bin.to_string_lossy());
    }
    for engine in [Engine::Postgres, Engine::Mysql] {
        let p = engine_prefix(engine);
        let (user, password, max_conn, primary) = match engine {
            Engine::Postgres => (pg::USER, &st.pg_password, st.pg_max_connections, &st.pg_primary),
            Engine::Mysql => (
                mysql::USER,
                &st.mysql_password,
                st.mysql_max_connections,
                &st.mysql_primary,
            ),
        };
        let servers: Vec<&Server> = st.servers.iter().filter(|s| s.engine == engine).collect();
        put(&format!("GH_{p}_USER"), user);
        put(&format!("GH_{p}_PASSWORD"), password);
        put(&format!("GH_{p}_MAX_CONNECTIONS"), &max_conn.to_string());
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        put(&format!("GH_{p}_SERVERS"), &names.join(" "));
        if let Some(s) = primary.as_ref().and_then(|n| servers.iter().find(|s| &s.name == n)) {
            put(&format!("GH_{p}_PRIMARY"), &s.name);
            put(&format!("GH_{p}_PRIMARY_HOST"), &s.host);
            put(&format!("GH_{p}_PRIMARY_PORT"), &s.client_port.to_string());
        }
        for s in servers {
            let k = format!("GH_{}", s.name.to_uppercase());
            put(&format!("{k}_HOST"), &s.host);
            put(&format!("{k}_PORT"), &s.client_port.to_string());
            put(&format!("{k}_SERVER_PORT"), &s.port.to_string());
            put(&format!("{k}_ROLE"), s.role.as_str());
            put(&format!("{k}_DIR"), &s.dir.to_string_lossy());
        }
    }
    out
}

/// Parse a file produced by [`render`].
pub(crate) fn parse(text: &str) -> Result<State> {
    let map = parse_lines(text)?;
    let get = |k: &str| map.get(k).with_context(|| format!("cluster.env lacks {k}"));
    let mut st = State {
        dir: PathBuf::from(get("GH_DIR")?),
        servers: Vec::new(),
        pg_password: get("GH_PG_PASSWORD")?.clone(),
        mysql_password: get("GH_MYSQL_PASSWORD")?.clone(),
        pg_max_connections: get("GH_PG_MAX_CONNECTIONS")?.parse()?,
        mysql_max_connections: get("GH_MYSQL_MAX_CONNECTIONS")?.parse()?,
        pg_primary: map.get("GH_PG_PRIMARY").cloned(),
        mysql_primary: map.get("GH_MYSQL_PRIMARY").cloned(),
        tls: map.get("GH_TLS_CA").map(|ca| tls::Files::beside(ca.into())),
        pg_bindir: map.get("GH_PG_BINDIR").map(PathBuf::from),
        testbed: Testbed {
            server_cpu: map.get("GH_TESTBED_SERVER_CPU").map(|v| v.parse()).transpose()?,
            latency: map
                .get("GH_TESTBED_LATENCY_US")
                .map(|v| v.parse().map(Duration::from_micros))
                .transpose()?,
            jitter: map
                .get("GH_TESTBED_JITTER_US")
                .map(|v| v.parse().map(Duration::from_micros))
                .transpose()?
                .unwrap_or_default(),
            net_cpu: map.get("GH_TESTBED_NET_CPU").map(|v| v.parse()).transpose()?,
            relay_bin: map.get("GH_TESTBED_RELAY_BIN").map(PathBuf::from),
            open: map.contains_key("GH_TESTBED_ID"),
        },
        testbed_id: map.get("GH_TESTBED_ID").cloned(),
    };
    for engine in [Engine::Postgres, Engine::Mysql] {
        let p = engine_prefix(engine);
        for name in get(&format!("GH_{p}_SERVERS"))?.split_whitespace() {
            let k = format!("GH_{}", name.to_uppercase());
            let role = match get(&format!("{k}_ROLE"))?.as_str() {
                "primary" => Role::Primary,
                "replica" => Role::Replica,
                other => bail!("{k}_ROLE: unknown role {other:?}"),
            };
            let client_port = get(&format!("{k}_PORT"))?
                .parse()
                .with_context(|| format!("{k}_PORT"))?;
            let port = match map.get(&format!("{k}_SERVER_PORT")) {
                Some(p) => p.parse().with_context(|| format!("{k}_SERVER_PORT"))?,
                None => client_port,
            };
            st.servers.push(Server {
                name: name.to_string(),
                engine,
                host: get(&format!("{k}_HOST"))?.clone(),
                port,
                client_port,
                role,
                dir: PathBuf::from(get(&format!("{k}_DIR"))?),
            });
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_round_trips() {
        for v in ["plain", "a b c", "it's", "$HOME `x` \"q\"", "", "/tmp/dir with space"] {
            let line = format!("K={}", quote(v));
            assert_eq!(parse_lines(&line).unwrap()["K"], v, "{line}");
        }
        assert_eq!(quote("pg0 pg1"), "\"pg0 pg1\"");
    }

    #[test]
    fn render_parse_round_trip() {
        let st = State {
            dir: "/tmp/x y".into(),
            servers: vec![
                Server {
                    name: "pg0".into(),
                    engine: Engine::Postgres,
                    host: "127.0.0.1".into(),
                    port: 20001,
                    client_port: 20003,
                    role: Role::Primary,
                    dir: "/tmp/x y/pg0".into(),
                },
                Server {
                    name: "my1".into(),
                    engine: Engine::Mysql,
                    host: "127.0.0.1".into(),
                    port: 20002,
                    client_port: 20002,
                    role: Role::Replica,
                    dir: "/tmp/x y/my1".into(),
                },
            ],
            pg_password: "pw1".into(),
            mysql_password: "pw2".into(),
            pg_max_connections: 50,
            mysql_max_connections: 60,
            pg_primary: Some("pg0".into()),
            mysql_primary: None,
            tls: Some(tls::Files::under("/tmp/x y".as_ref())),
            pg_bindir: Some("/var/tmp/pg 17/bin".into()),
            testbed: Testbed {
                server_cpu: Some(0.25),
                latency: Some(Duration::from_micros(500)),
                jitter: Duration::from_micros(50),
                net_cpu: Some(0.3),
                relay_bin: Some("/x/gatehouse-loadgen".into()),
                open: true,
            },
            testbed_id: Some("x-y-1".into()),
        };
        let text = render(&st);
        // The client side's port (a relay's, with a latency) is the port
        // scripts see; the server's own is recorded beside it.
        assert!(text.contains("GH_PG_PRIMARY_PORT=20003\n"), "{text}");
        assert!(text.contains("GH_PG0_SERVER_PORT=20001\n"), "{text}");
        assert!(text.contains("GH_TLS_CA=\"/tmp/x y/tls/ca.pem\"\n"), "{text}");
        assert!(text.contains("GH_MY1_ROLE=replica\n"), "{text}");
        assert_eq!(parse(&text).unwrap(), st);
    }
}
