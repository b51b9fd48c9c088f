//! A peekable, allocation-free token cursor over one statement, with the
//! key-word matching helpers the classifiers share.

use crate::lexer::{Kind, Lexer, Token};

/// Cursor over the tokens of one statement.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    lex: Lexer<'a>,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Cursor { lex: Lexer::new(src) }
    }

    pub(crate) fn text(&self, tok: Token) -> &'a str {
        &self.lex.src()[tok.start..tok.end]
    }

    /// The source text between two byte offsets of this statement.
    pub(crate) fn span(&self, start: usize, end: usize) -> &'a str {
        &self.lex.src()[start..end]
    }

    pub(crate) fn peek(&self) -> Option<Token> {
        self.lex.clone().next()
    }

    /// The token after the next one.
    pub(crate) fn peek2(&self) -> Option<Token> {
        let mut lex = self.lex.clone();
        lex.next();
        lex.next()
    }

    pub(crate) fn at_end(&self) -> bool {
        self.peek().is_none()
    }

    /// True if `tok` is the unquoted key word `kw` (given in lower case).
    pub(crate) fn is_word(&self, tok: Option<Token>, kw: &str) -> bool {
        tok.is_some_and(|t| t.kind == Kind::Word && self.text(t).eq_ignore_ascii_case(kw))
    }

    /// True if `tok` is the punctuation character `c`.
    pub(crate) fn is_punct(&self, tok: Option<Token>, c: u8) -> bool {
        tok.is_some_and(|t| t.kind == Kind::Punct && self.lex.src().as_bytes()[t.start] == c)
    }

    pub(crate) fn peek_word(&self, kw: &str) -> bool {
        self.is_word(self.peek(), kw)
    }

    /// Consumes the next token if it is the key word `kw`.
    pub(crate) fn eat_word(&mut self, kw: &str) -> bool {
        let hit = self.peek_word(kw);
        if hit {
            self.lex.next();
        }
        hit
    }

    /// Consumes the key words `kws` if the next tokens are exactly those.
    pub(crate) fn eat_words(&mut self, kws: &[&str]) -> bool {
        let mut ahead = self.clone();
        if kws.iter().all(|kw| ahead.eat_word(kw)) {
            *self = ahead;
            return true;
        }
        false
    }

    /// Consumes the next token if it is the punctuation character `c`.
    pub(crate) fn eat_punct(&mut self, c: u8) -> bool {
        let hit = self.is_punct(self.peek(), c);
        if hit {
            self.lex.next();
        }
        hit
    }

    /// True if the next token is `=` or the key word `TO`.
    pub(crate) fn peek_assign(&self) -> bool {
        let t = self.peek();
        self.is_punct(t, b'=') || self.is_word(t, "to")
    }
}

impl Iterator for Cursor<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        self.lex.next()
    }
}
