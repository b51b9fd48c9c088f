//! A peekable, allocation-free token cursor over one MySQL statement, with
//! the key-word matching helpers the classifiers share.

use super::Dialect;
use super::lexer::{Kind, Lexer, Token};

/// Cursor over the tokens of one statement.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    lex: Lexer<'a>,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(src: &'a str, dialect: Dialect) -> Self {
        Cursor {
            lex: Lexer::new(src, dialect),
        }
    }

    pub(crate) fn text(&self, tok: Token) -> &'a str {
        &self.lex.src()[tok.start..tok.end]
    }

    /// The source text between two byte offsets of this statement.
    pub(crate) fn span(&self, start: usize, end: usize) -> &'a str {
        &self.lex.src()[start..end]
    }

    /// The source text from `start` to the end of the statement.
    pub(crate) fn rest(&self, start: usize) -> &'a str {
        &self.lex.src()[start..]
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

    /// True if `tok` is the punctuation `p` (`:=` is one token).
    pub(crate) fn is_punct(&self, tok: Option<Token>, p: &str) -> bool {
        tok.is_some_and(|t| t.kind == Kind::Punct && self.text(t) == p)
    }

    /// True if `tok` is `=` or `:=`.
    pub(crate) fn is_assign(&self, tok: Option<Token>) -> bool {
        self.is_punct(tok, "=") || self.is_punct(tok, ":=")
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

    /// Consumes the next token if it is the punctuation `p`.
    pub(crate) fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.is_punct(self.peek(), p);
        if hit {
            self.lex.next();
        }
        hit
    }

    /// Consumes tokens up to and including the key words `kws` in sequence;
    /// true if they were found.
    pub(crate) fn find_words(&mut self, kws: &[&str]) -> bool {
        loop {
            if self.eat_words(kws) {
                return true;
            }
            if self.next().is_none() {
                return false;
            }
        }
    }
}

impl Iterator for Cursor<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        self.lex.next()
    }
}
