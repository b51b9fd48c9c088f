//! A request's SQL, with what changes from one request to the next:
//! `{tenant}` is the tenant the user logged in as, and `{ids:K:N}` is K
//! distinct random integers in 1..=N, comma-separated (the storm's
//! `SELECT * FROM t WHERE id IN ({ids:5:1000})`). Other text, braces
//! included, is sent as it is.

use anyhow::{Result, bail};
use rand::Rng;
use rand::seq::index::sample;

const TENANT: &str = "{tenant}";
const IDS: &str = "{ids:";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Tenant,
    Ids { count: u32, max: u32 },
}

/// A parsed request template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sql {
    pieces: Vec<Piece>,
}

impl Sql {
    pub fn parse(text: &str) -> Result<Self> {
        let mut pieces = Vec::new();
        let mut rest = text;
        let mut literal = String::new();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix(TENANT) {
                flush(&mut pieces, &mut literal);
                pieces.push(Piece::Tenant);
                rest = after;
            } else if let Some(after) = rest.strip_prefix(IDS) {
                let Some((spec, after)) = after.split_once('}') else {
                    bail!("{IDS} without its closing brace in {text:?}");
                };
                let parsed = spec
                    .split_once(':')
                    .and_then(|(k, n)| Some((k.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)));
                let Some((count, max)) = parsed.filter(|(k, n)| *k >= 1 && k <= n) else {
                    bail!("{IDS}{spec}}}: expected {{ids:K:N}} with 1 <= K <= N");
                };
                flush(&mut pieces, &mut literal);
                pieces.push(Piece::Ids { count, max });
                rest = after;
            } else {
                let mut chars = rest.chars();
                if let Some(c) = chars.next() {
                    literal.push(c);
                }
                rest = chars.as_str();
            }
        }
        flush(&mut pieces, &mut literal);
        Ok(Self { pieces })
    }

    /// The SQL of one request.
    pub fn render(&self, tenant: &str, rng: &mut impl Rng) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Tenant => out.push_str(tenant),
                Piece::Ids { count, max } => {
                    let picked = sample(rng, *max as usize, *count as usize);
                    for (i, id) in picked.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push_str(&(id + 1).to_string());
                    }
                }
            }
        }
        out
    }
}

fn flush(pieces: &mut Vec<Piece>, literal: &mut String) {
    if !literal.is_empty() {
        pieces.push(Piece::Text(std::mem::take(literal)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn ids_are_distinct_and_in_range() -> Result<()> {
        let sql = Sql::parse("SELECT * FROM {tenant}.t WHERE id IN ({ids:5:1000})")?;
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let text = sql.render("t001", &mut rng);
            let inner = text
                .strip_prefix("SELECT * FROM t001.t WHERE id IN (")
                .and_then(|s| s.strip_suffix(')'))
                .unwrap_or_default();
            let mut ids: Vec<u32> = inner.split(',').filter_map(|s| s.parse().ok()).collect();
            assert_eq!(ids.len(), 5, "{text}");
            assert!(ids.iter().all(|id| (1..=1000).contains(id)), "{text}");
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), 5, "distinct: {text}");
        }
        let all = Sql::parse("{ids:3:3}")?.render("", &mut rng);
        let mut ids: Vec<&str> = all.split(',').collect();
        ids.sort_unstable();
        assert_eq!(ids, ["1", "2", "3"]);
        Ok(())
    }

    #[test]
    fn other_text_and_braces_pass_as_they_are() -> Result<()> {
        let text = "SELECT '{x}', $${ids}$$, 'é'";
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(Sql::parse(text)?.render("t", &mut rng), text);
        Ok(())
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in ["{ids:5}", "{ids:0:10}", "{ids:11:10}", "{ids:a:b}", "{ids:5:10"] {
            assert!(Sql::parse(bad).is_err(), "{bad}");
        }
    }
}
