//! The corpus table format both routing corpora use: `expected |
//! statement` lines, continuation lines starting with two spaces, `#`
//! comment lines. Included by each corpus test with `#[path]`.

use gatehouse_sql::{Route, WriteReason};

/// The expected route for a corpus label.
fn expected(label: &str) -> Option<Route> {
    match label {
        "read" => Some(Route::Read),
        "begin ro" => Some(Route::Begin { read_only: true }),
        "begin rw" => Some(Route::Begin { read_only: false }),
        name => WriteReason::ALL
            .into_iter()
            .find(|r| r.name() == name)
            .map(Route::Write),
    }
}

/// The corpus as (statement, expected route, line number).
pub fn corpus(text: &str) -> Vec<(String, Route, usize)> {
    let mut out: Vec<(String, Route, usize)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(more) = line.strip_prefix("  ") {
            let last = out.last_mut().expect("continuation without a statement");
            last.0.push('\n');
            last.0.push_str(more);
            continue;
        }
        let (label, sql) = line.split_once('|').expect("line without `|`");
        let want = expected(label.trim()).unwrap_or_else(|| panic!("line {}: bad label {label:?}", i + 1));
        out.push((sql.strip_prefix(' ').unwrap_or(sql).to_owned(), want, i + 1));
    }
    out
}
