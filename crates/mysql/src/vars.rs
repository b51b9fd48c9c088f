//! Tracked session variables of a MySQL session: what the client has set
//! (from the classifier's [`VarChange`]s and its handshake collation), and
//! the one `SET SESSION ...` statement that turns whatever a backend
//! connection has into what the client expects. Values are kept as the
//! client wrote them and replayed verbatim; `DEFAULT` undoes a variable.

use std::collections::BTreeMap;
use std::fmt::Write;

use gatehouse_sql::mysql::VarChange;

/// Pseudo-variable for `SET NAMES charset [COLLATE collation]`.
const NAMES: &str = "names";
/// Pseudo-variable for `SET CHARACTER SET charset`.
const CHARACTER_SET: &str = "character set";
/// A fresh `sql_mode` on a connection opened with `CLIENT_IGNORE_SPACE`:
/// the server adds `IGNORE_SPACE` to the global one at login.
const SQL_MODE_DEFAULT_IGNORE_SPACE: &str = "CONCAT_WS(',', NULLIF(@@global.sql_mode, ''), 'IGNORE_SPACE')";
/// A fresh `wait_timeout` on a connection opened with `CLIENT_INTERACTIVE`:
/// the server gives it the global `interactive_timeout` at login.
const WAIT_TIMEOUT_DEFAULT_INTERACTIVE: &str = "@@global.interactive_timeout";

/// What `DEFAULT` would not give back of a fresh session on a connection
/// opened with `caps` (its login's capabilities): the variable and the
/// value a new connection has instead.
pub fn login_defaults(caps: u32) -> impl Iterator<Item = (&'static str, &'static str)> {
    use gatehouse_proto_mysql::consts::{CLIENT_IGNORE_SPACE, CLIENT_INTERACTIVE};
    [
        (CLIENT_IGNORE_SPACE, "sql_mode", SQL_MODE_DEFAULT_IGNORE_SPACE),
        (CLIENT_INTERACTIVE, "wait_timeout", WAIT_TIMEOUT_DEFAULT_INTERACTIVE),
    ]
    .into_iter()
    .filter(move |(cap, _, _)| caps & cap != 0)
    .map(|(_, name, value)| (name, value))
}

/// Variables set on a session or a connection: name → value text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars(BTreeMap<String, String>);

impl Vars {
    /// The state of a fresh connection: nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The variables a client's handshake collation implies (`SET NAMES`),
    /// or nothing when it is the collation backend connections use.
    /// `lookup` names a collation id (the backend's own table); an id it
    /// does not know is logged and left alone.
    pub fn for_collation(id: u8, backend_default: u8, lookup: impl FnOnce(u8) -> Option<(String, String)>) -> Self {
        let mut v = Self::new();
        if id == backend_default {
            return v;
        }
        match lookup(id) {
            Some((charset, collation)) => {
                v.0.insert(NAMES.into(), format!("{charset} COLLATE {collation}"));
            }
            None => tracing::info!(collation = id, "client collation unknown to the server: not replayed"),
        }
        v
    }

    /// The `sql_mode` the client set, if it set one.
    pub fn sql_mode(&self) -> Option<&str> {
        self.0.get("sql_mode").map(String::as_str)
    }

    /// Records one change the client made.
    pub fn apply(&mut self, change: &VarChange) {
        match change {
            VarChange::Set { name, value } => {
                self.0.insert(name.to_ascii_lowercase(), value.clone());
            }
            VarChange::Reset { name } => {
                self.0.remove(&name.to_ascii_lowercase());
            }
            VarChange::Names { charset, collation } => {
                self.0.remove(CHARACTER_SET);
                if charset.eq_ignore_ascii_case("default") {
                    self.0.remove(NAMES);
                } else {
                    let value = match collation {
                        Some(c) => format!("{charset} COLLATE {c}"),
                        None => charset.clone(),
                    };
                    self.0.insert(NAMES.into(), value);
                }
            }
            VarChange::CharacterSet { charset } => {
                if charset.eq_ignore_ascii_case("default") {
                    self.0.remove(CHARACTER_SET);
                } else {
                    self.0.insert(CHARACTER_SET.into(), charset.clone());
                }
            }
        }
    }

    /// The statement that makes a connection holding `have` hold `self`,
    /// or `None` when they agree. `mariadb`: the server names the
    /// transaction variables `tx_isolation` / `tx_read_only` (before 11.1).
    /// `caps`: the capabilities the connection was opened with; with
    /// `CLIENT_IGNORE_SPACE` its fresh `sql_mode` is the global one with
    /// `IGNORE_SPACE`, with `CLIENT_INTERACTIVE` its fresh `wait_timeout` is
    /// `interactive_timeout`, which `DEFAULT` alone would not give
    /// ([`login_defaults`]).
    pub fn replay_sql(&self, have: &Vars, mariadb: bool, caps: u32) -> Option<String> {
        if self == have {
            return None;
        }
        let mut parts: Vec<String> = Vec::new();
        // Charset statements first: they reset collation variables that
        // explicit assignments may then override.
        for pseudo in [NAMES, CHARACTER_SET] {
            match (self.0.get(pseudo), have.0.get(pseudo)) {
                (Some(w), h) if h != Some(w) => parts.push(format!("{} {w}", pseudo.to_ascii_uppercase())),
                (None, Some(_)) => parts.push(format!("{} DEFAULT", pseudo.to_ascii_uppercase())),
                _ => {}
            }
        }
        let name = |n: &str| -> String {
            match (mariadb, n) {
                (true, "transaction_isolation") => "tx_isolation".into(),
                (true, "transaction_read_only") => "tx_read_only".into(),
                _ => n.to_owned(),
            }
        };
        let mut assignments = String::new();
        let mut add = |n: &str, v: &str| {
            if !assignments.is_empty() {
                assignments.push_str(", ");
            }
            let _ = write!(assignments, "SESSION {} = {v}", name(n));
        };
        for (n, v) in &self.0 {
            if n != NAMES && n != CHARACTER_SET && have.0.get(n) != Some(v) {
                add(n, v);
            }
        }
        for n in have.0.keys() {
            if n != NAMES && n != CHARACTER_SET && !self.0.contains_key(n) {
                match login_defaults(caps).find(|(name, _)| name == n) {
                    Some((_, value)) => add(n, value),
                    None => add(n, "DEFAULT"),
                }
            }
        }
        let mut sql = String::new();
        for p in parts {
            let _ = write!(sql, "SET {p}; ");
        }
        if !assignments.is_empty() {
            let _ = write!(sql, "SET {assignments}");
        }
        Some(sql.trim_end_matches([' ', ';']).to_owned())
    }
}

/// Character set and collation names of common collation ids (MySQL
/// `information_schema.COLLATIONS`), for clients whose handshake asks for
/// another collation than the backend connections use.
/// Names of common collation ids, used until the server's own table
/// (`information_schema.COLLATIONS`, read by the first probe) is known.
pub fn builtin_collation_name(id: u8) -> Option<(&'static str, &'static str)> {
    Some(match id {
        8 => ("latin1", "latin1_swedish_ci"),
        11 => ("ascii", "ascii_general_ci"),
        33 => ("utf8mb3", "utf8mb3_general_ci"),
        45 => ("utf8mb4", "utf8mb4_general_ci"),
        46 => ("utf8mb4", "utf8mb4_bin"),
        47 => ("latin1", "latin1_bin"),
        63 => ("binary", "binary"),
        83 => ("utf8mb3", "utf8mb3_bin"),
        192 => ("utf8mb3", "utf8mb3_unicode_ci"),
        224 => ("utf8mb4", "utf8mb4_unicode_ci"),
        // MySQL 8's default; MariaDB lacks it and its clients fall back.
        255 => ("utf8mb4", "utf8mb4_general_ci"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, value: &str) -> VarChange {
        VarChange::Set {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn replay_sets_differences_and_defaults_the_rest() {
        let mut want = Vars::new();
        want.apply(&set("sql_mode", "'ANSI'"));
        want.apply(&set("time_zone", "'+02:00'"));
        let mut have = Vars::new();
        have.apply(&set("time_zone", "'+02:00'"));
        have.apply(&set("autocommit", "0"));
        assert_eq!(
            want.replay_sql(&have, true, 0).as_deref(),
            Some("SET SESSION sql_mode = 'ANSI', SESSION autocommit = DEFAULT")
        );
        assert_eq!(want.replay_sql(&want.clone(), true, 0), None);
    }

    /// A connection opened with CLIENT_IGNORE_SPACE: a client that set no
    /// `sql_mode` gets the global one with IGNORE_SPACE, as at its login,
    /// where `DEFAULT` would give the global one alone.
    #[test]
    fn sql_mode_back_to_a_fresh_connections_keeps_ignore_space() {
        let mut have = Vars::new();
        have.apply(&set("sql_mode", "'ANSI'"));
        let fresh = Vars::new();
        assert_eq!(
            fresh
                .replay_sql(&have, true, gatehouse_proto_mysql::consts::CLIENT_IGNORE_SPACE)
                .as_deref(),
            Some("SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@global.sql_mode, ''), 'IGNORE_SPACE')")
        );
        assert_eq!(
            fresh.replay_sql(&have, true, 0).as_deref(),
            Some("SET SESSION sql_mode = DEFAULT")
        );
    }

    /// A connection opened with CLIENT_INTERACTIVE: a client that set no
    /// `wait_timeout` gets `interactive_timeout`, as at its login.
    #[test]
    fn wait_timeout_back_to_a_fresh_interactive_connections() {
        let mut have = Vars::new();
        have.apply(&set("wait_timeout", "5"));
        let fresh = Vars::new();
        assert_eq!(
            fresh
                .replay_sql(&have, true, gatehouse_proto_mysql::consts::CLIENT_INTERACTIVE)
                .as_deref(),
            Some("SET SESSION wait_timeout = @@global.interactive_timeout")
        );
        assert_eq!(
            fresh.replay_sql(&have, true, 0).as_deref(),
            Some("SET SESSION wait_timeout = DEFAULT")
        );
    }

    #[test]
    fn names_and_transaction_variables() {
        let mut want = Vars::new();
        want.apply(&VarChange::Names {
            charset: "latin1".into(),
            collation: None,
        });
        want.apply(&set("transaction_isolation", "'READ-COMMITTED'"));
        assert_eq!(
            want.replay_sql(&Vars::new(), true, 0).as_deref(),
            Some("SET NAMES latin1; SET SESSION tx_isolation = 'READ-COMMITTED'")
        );
        assert_eq!(
            Vars::new().replay_sql(&want, false, 0).as_deref(),
            Some("SET NAMES DEFAULT; SET SESSION transaction_isolation = DEFAULT")
        );
        let mut reset = want.clone();
        reset.apply(&VarChange::Reset {
            name: "transaction_isolation".into(),
        });
        reset.apply(&VarChange::Names {
            charset: "DEFAULT".into(),
            collation: None,
        });
        assert_eq!(reset, Vars::new());
    }

    #[test]
    fn handshake_collation() {
        let builtin = |id| builtin_collation_name(id).map(|(a, b)| (a.to_owned(), b.to_owned()));
        assert_eq!(Vars::for_collation(45, 45, builtin), Vars::new());
        let latin = Vars::for_collation(8, 45, builtin);
        assert_eq!(
            latin.replay_sql(&Vars::new(), true, 0).as_deref(),
            Some("SET NAMES latin1 COLLATE latin1_swedish_ci")
        );
    }
}
