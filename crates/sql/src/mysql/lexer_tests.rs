//! Unit tests of the MySQL tokenizer: token classes and spans.

use super::Dialect;
use super::lexer::{Kind, Lexer};

fn kinds(s: &str, d: Dialect) -> Vec<(Kind, &str)> {
    Lexer::new(s, d).map(|t| (t.kind, &s[t.start..t.end])).collect()
}

#[test]
fn tokens_and_trivia() {
    use Kind::*;
    let sql = "SELECT /* c */ a1$, 'it''s\\'', \"q\\\"\", `b``t`, @u, @'v w', @`x`, @@session.sql_mode, \
               @@`y`, ?, 1.5e-3, 0x1F, x := 2 # end\n; -- c\n --x";
    assert_eq!(
        kinds(sql, Dialect::DEFAULT),
        vec![
            (Word, "SELECT"),
            (Word, "a1$"),
            (Punct, ","),
            (String, "'it''s\\''"),
            (Punct, ","),
            (String, "\"q\\\"\""),
            (Punct, ","),
            (QuotedIdent, "`b``t`"),
            (Punct, ","),
            (UserVar, "@u"),
            (Punct, ","),
            (UserVar, "@'v w'"),
            (Punct, ","),
            (UserVar, "@`x`"),
            (Punct, ","),
            (SysVar, "@@session.sql_mode"),
            (Punct, ","),
            (SysVar, "@@`y`"),
            (Punct, ","),
            (Param, "?"),
            (Punct, ","),
            (Number, "1.5e-3"),
            (Punct, ","),
            (Number, "0x1F"),
            (Punct, ","),
            (Word, "x"),
            (Punct, ":="),
            (Number, "2"),
            (Punct, ";"),
            (Punct, "-"),
            (Punct, "-"),
            (Word, "x"),
        ]
    );
}

#[test]
fn executable_comments_are_code() {
    use Kind::*;
    let sql = "/*!40101 SET a=1 */ /*M!100100 b */ /*! c /* d */ e */ /*+ hint */ f";
    assert_eq!(
        kinds(sql, Dialect::DEFAULT),
        vec![
            (Word, "SET"),
            (Word, "a"),
            (Punct, "="),
            (Number, "1"),
            (Word, "b"),
            (Word, "c"),
            (Word, "e"),
            (Word, "f")
        ]
    );
    // Outside an executable comment `*/` is punctuation.
    assert_eq!(
        kinds("a */", Dialect::DEFAULT),
        vec![(Word, "a"), (Punct, "*"), (Punct, "/")]
    );
}

#[test]
fn accounts_and_dialects() {
    use Kind::*;
    assert_eq!(
        kinds("'u'@'h' bob@localhost INTO@x", Dialect::DEFAULT),
        vec![
            (String, "'u'"),
            (Punct, "@"),
            (String, "'h'"),
            (Word, "bob"),
            (Punct, "@"),
            (Word, "localhost"),
            (Word, "INTO"),
            (UserVar, "@x"),
        ]
    );
    let ansi = Dialect {
        ansi_quotes: true,
        no_backslash_escapes: true,
    };
    assert_eq!(
        kinds("\"a\"\"b\" 'c\\'", ansi),
        vec![(QuotedIdent, "\"a\"\"b\""), (String, "'c\\'")]
    );
}

#[test]
fn unterminated_runs_to_end() {
    let d = Dialect::DEFAULT;
    assert_eq!(kinds("'abc", d), vec![(Kind::String, "'abc")]);
    assert_eq!(kinds("'a\\", d), vec![(Kind::String, "'a\\")]);
    assert_eq!(kinds("`abc", d), vec![(Kind::QuotedIdent, "`abc")]);
    assert_eq!(kinds("a /* b", d), vec![(Kind::Word, "a")]);
    assert_eq!(kinds("@", d), vec![(Kind::Punct, "@")]);
    assert_eq!(
        kinds("é@'x", d),
        vec![(Kind::Word, "é"), (Kind::Punct, "@"), (Kind::String, "'x")]
    );
}
