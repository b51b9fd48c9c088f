//! Decorating a statement template for the routing property tests: its
//! tokens joined by chosen separators (whitespace, comments hiding decoy
//! key words), `{s}` replaced by decoy strings, and the case of unquoted
//! words flipped. Included by each property test with `#[path]`.

/// A dialect's separators, decoy strings, and the characters that mark a
/// token to keep as written (quoted).
pub struct Decorations {
    pub separators: &'static [&'static str],
    pub decoys: &'static [&'static str],
    pub quotes: [char; 3],
}

/// `template` with its tokens joined by chosen separators, `{s}` replaced
/// by decoys, and the case of unquoted words flipped by the bits of `case`.
pub fn decorate(d: &Decorations, template: &str, seps: &[usize], decoys: &[usize], case: u64) -> String {
    let mut out = String::new();
    for (i, tok) in template.split(' ').enumerate() {
        if i > 0 {
            out.push_str(d.separators[seps[i % seps.len()] % d.separators.len()]);
        }
        if tok == "{s}" {
            out.push_str(d.decoys[decoys[i % decoys.len()] % d.decoys.len()]);
        } else if tok.contains(d.quotes) {
            out.push_str(tok);
        } else {
            for (j, c) in tok.chars().enumerate() {
                let flip = case.rotate_left((i * 7 + j) as u32) & 1 == 1;
                out.push(if flip {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                });
            }
        }
    }
    out
}
