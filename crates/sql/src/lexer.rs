//! Minimal PostgreSQL tokenizer (docs §4.1 "Lexical Structure"): enough to
//! tell words, quoted identifiers, string constants and punctuation apart and
//! to skip whitespace and comments. Never fails: unterminated quotes and
//! comments run to the end of input. Token boundaries always fall on ASCII
//! bytes or the ends of input, so they are valid `str` slice indices.

/// Token class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Unquoted identifier or key word.
    Word,
    /// `"quoted identifier"`.
    QuotedIdent,
    /// `'..'`, `E'..'` or `$tag$..$tag$` string constant.
    String,
    /// Numeric constant.
    Number,
    /// Positional parameter `$n`.
    Param,
    /// Any other single character (operators, punctuation).
    Punct,
}

/// One token: its class and byte span in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: Kind,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Iterator over the tokens of a source string.
#[derive(Debug, Clone)]
pub(crate) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_ident_cont(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit() || b == b'$'
}

/// SQL whitespace: ASCII only, as in PostgreSQL's and MySQL's scanners.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// End of a quoted run starting after the opening quote at `from`: just past
/// the closing `q` (doubled `q` is an escaped quote), or the input length.
pub(crate) fn scan_quoted(b: &[u8], from: usize, q: u8, backslash: bool) -> usize {
    let mut i = from;
    while i < b.len() {
        let c = b[i];
        if backslash && c == b'\\' {
            i += 2;
        } else if c == q {
            if b.get(i + 1) == Some(&q) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Lexer { src, pos: 0 }
    }

    pub(crate) fn src(&self) -> &'a str {
        self.src
    }

    fn skip_trivia(&mut self) {
        let b = self.src.as_bytes();
        loop {
            while self.pos < b.len() && is_space(b[self.pos]) {
                self.pos += 1;
            }
            match (b.get(self.pos), b.get(self.pos + 1)) {
                (Some(b'-'), Some(b'-')) => {
                    self.pos += 2;
                    while self.pos < b.len() && !matches!(b[self.pos], b'\n' | b'\r') {
                        self.pos += 1;
                    }
                }
                (Some(b'/'), Some(b'*')) => self.pos = skip_block_comment(b, self.pos + 2),
                _ => return,
            }
        }
    }

    /// At a `$`: a positional parameter, a dollar-quoted string or a lone `$`.
    fn dollar(&mut self, start: usize) -> Kind {
        let b = self.src.as_bytes();
        let mut j = start + 1;
        if b.get(j).is_some_and(u8::is_ascii_digit) {
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            self.pos = j;
            return Kind::Param;
        }
        while b.get(j).is_some_and(|&c| c != b'$' && is_ident_cont(c)) {
            j += 1;
        }
        if b.get(j) != Some(&b'$') {
            self.pos = start + 1;
            return Kind::Punct;
        }
        let tag = &self.src[start..=j];
        self.pos = match self.src[j + 1..].find(tag) {
            Some(at) => j + 1 + at + tag.len(),
            None => b.len(),
        };
        Kind::String
    }

    fn number(&mut self, start: usize) {
        let b = self.src.as_bytes();
        let mut i = start + 1;
        while let Some(&c) = b.get(i) {
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' {
                i += 1;
            } else if matches!(c, b'+' | b'-')
                && matches!(b[i - 1], b'e' | b'E')
                && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                i += 2;
            } else {
                break;
            }
        }
        self.pos = i;
    }
}

/// Skips a (nested) block comment whose opening `/*` ends before `from`.
fn skip_block_comment(b: &[u8], from: usize) -> usize {
    let mut depth = 1usize;
    let mut i = from;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'/', Some(b'*')) => {
                depth += 1;
                i += 2;
            }
            (b'*', Some(b'/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    b.len()
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        self.skip_trivia();
        let b = self.src.as_bytes();
        let start = self.pos;
        let c = *b.get(start)?;
        let next = b.get(start + 1).copied();
        let kind = match c {
            b'\'' => {
                self.pos = scan_quoted(b, start + 1, b'\'', false);
                Kind::String
            }
            b'"' => {
                self.pos = scan_quoted(b, start + 1, b'"', false);
                Kind::QuotedIdent
            }
            b'e' | b'E' if next == Some(b'\'') => {
                self.pos = scan_quoted(b, start + 2, b'\'', true);
                Kind::String
            }
            b'$' => self.dollar(start),
            b'0'..=b'9' => {
                self.number(start);
                Kind::Number
            }
            b'.' if next.is_some_and(|n| n.is_ascii_digit()) => {
                self.number(start);
                Kind::Number
            }
            c if is_ident_start(c) => {
                let mut i = start + 1;
                while b.get(i).is_some_and(|&c| is_ident_cont(c)) {
                    i += 1;
                }
                self.pos = i;
                Kind::Word
            }
            _ => {
                self.pos = start + 1;
                Kind::Punct
            }
        };
        Some(Token {
            kind,
            start,
            end: self.pos,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<(Kind, &str)> {
        Lexer::new(s).map(|t| (t.kind, &s[t.start..t.end])).collect()
    }

    #[test]
    fn tokens_and_trivia() {
        assert_eq!(
            kinds("SELECT /* a /* b */ c */ x1$ -- hi\n, 'it''s' E'\\'' $1 $$a;b$$ $t$x$t$ \"Q\"\"\" 1.5e-3;"),
            vec![
                (Kind::Word, "SELECT"),
                (Kind::Word, "x1$"),
                (Kind::Punct, ","),
                (Kind::String, "'it''s'"),
                (Kind::String, "E'\\''"),
                (Kind::Param, "$1"),
                (Kind::String, "$$a;b$$"),
                (Kind::String, "$t$x$t$"),
                (Kind::QuotedIdent, "\"Q\"\"\""),
                (Kind::Number, "1.5e-3"),
                (Kind::Punct, ";"),
            ]
        );
    }

    #[test]
    fn unterminated_runs_to_end() {
        assert_eq!(kinds("'abc"), vec![(Kind::String, "'abc")]);
        assert_eq!(kinds("$q$abc"), vec![(Kind::String, "$q$abc")]);
        assert_eq!(kinds("a /* b"), vec![(Kind::Word, "a")]);
        assert_eq!(kinds("$ x"), vec![(Kind::Punct, "$"), (Kind::Word, "x")]);
    }
}
