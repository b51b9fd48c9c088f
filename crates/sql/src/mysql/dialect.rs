//! The `sql_mode` flags that change how the server lexes SQL text (MySQL
//! Reference Manual §7.1.11 "Server SQL Modes": `ANSI_QUOTES`,
//! `NO_BACKSLASH_ESCAPES` and the combination modes that imply them;
//! MariaDB KB "SQL_MODE").

/// Lexical settings of the session. The default (both off) matches the
/// default `sql_mode` of MySQL and MariaDB. The proxy tracks `sql_mode`
/// (see [`Dialect::from_sql_mode`]) and passes the current dialect in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Dialect {
    /// `ANSI_QUOTES`: `".."` quotes identifiers instead of strings.
    pub ansi_quotes: bool,
    /// `NO_BACKSLASH_ESCAPES`: `\` is an ordinary character in strings.
    pub no_backslash_escapes: bool,
}

/// Combination modes that include `ANSI_QUOTES` (MySQL 5.7 and MariaDB).
const IMPLY_ANSI_QUOTES: [&str; 7] = ["ansi_quotes", "ansi", "db2", "maxdb", "mssql", "oracle", "postgresql"];

impl Dialect {
    /// Both flags off: the server default.
    pub const DEFAULT: Dialect = Dialect {
        ansi_quotes: false,
        no_backslash_escapes: false,
    };

    /// The dialect selected by a `sql_mode` value as it appears in a
    /// tracked change: a quoted or bare comma-separated list of mode names
    /// (`'STRICT_TRANS_TABLES,ANSI_QUOTES'`, `ANSI`, `''`), or `DEFAULT`.
    /// Mode names are case-insensitive; unknown names are ignored. Numeric
    /// `sql_mode` values never reach this function: the classifier pins
    /// them (`unrecognized`).
    pub fn from_sql_mode(value: &str) -> Dialect {
        let v = value.trim();
        let v = v.strip_prefix(['\'', '"']).unwrap_or(v);
        let v = v.strip_suffix(['\'', '"']).unwrap_or(v);
        let mut d = Dialect::DEFAULT;
        for mode in v.split(',').map(str::trim) {
            d.ansi_quotes |= IMPLY_ANSI_QUOTES.iter().any(|m| mode.eq_ignore_ascii_case(m));
            d.no_backslash_escapes |= mode.eq_ignore_ascii_case("no_backslash_escapes");
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::Dialect;

    #[test]
    fn from_sql_mode() {
        let d = |ansi_quotes, no_backslash_escapes| Dialect {
            ansi_quotes,
            no_backslash_escapes,
        };
        assert_eq!(Dialect::from_sql_mode("DEFAULT"), d(false, false));
        assert_eq!(Dialect::from_sql_mode("''"), d(false, false));
        assert_eq!(
            Dialect::from_sql_mode("'STRICT_TRANS_TABLES,ansi_quotes'"),
            d(true, false)
        );
        assert_eq!(Dialect::from_sql_mode("ANSI"), d(true, false));
        assert_eq!(Dialect::from_sql_mode("\"ORACLE\""), d(true, false));
        assert_eq!(
            Dialect::from_sql_mode("'NO_BACKSLASH_ESCAPES, ANSI_QUOTES'"),
            d(true, true)
        );
        assert_eq!(Dialect::from_sql_mode("'TRADITIONAL'"), d(false, false));
    }
}
