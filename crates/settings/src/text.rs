//! Text helpers the settings' users share: cutting a text to a byte
//! budget at a character boundary (digest texts, names, statements in logs).

/// `s` cut at the last char boundary at or below `max` bytes (digest
/// texts, names, and statements in logs).
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut at = max;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    &s[..at]
}
