//! Results: how each driver outcome (simple-query messages, typed rows, row
//! counts, errors) is rendered into one comparable string, and how the two
//! runs' strings are compared and the differences reported.

use std::fmt::Display;

use anyhow::{Result, bail};
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::{Error, Row, SimpleQueryMessage};

use super::workload::Op;

fn err(e: &Error) -> String {
    match e.code() {
        Some(code) => format!("ERR:{}", code.code()),
        None => format!("ERR:<{e}>"),
    }
}

pub(super) fn render_simple(r: Result<Vec<SimpleQueryMessage>, Error>) -> String {
    match r {
        Err(e) => err(&e),
        Ok(msgs) => msgs
            .iter()
            .map(|m| match m {
                SimpleQueryMessage::Row(row) => (0..row.len())
                    .map(|i| row.get(i).unwrap_or("NULL"))
                    .collect::<Vec<_>>()
                    .join(","),
                SimpleQueryMessage::CommandComplete(n) => format!("#{n}"),
                SimpleQueryMessage::RowDescription(cols) => {
                    let names: Vec<&str> = cols.iter().map(|c| c.name()).collect();
                    format!("[{}]", names.join(","))
                }
                _ => "?".to_string(),
            })
            .collect::<Vec<_>>()
            .join(";"),
    }
}

fn cell<'a, T: FromSql<'a> + Display>(row: &'a Row, i: usize) -> String {
    match row.try_get::<_, Option<T>>(i) {
        Ok(Some(v)) => v.to_string(),
        Ok(None) => "NULL".to_string(),
        Err(e) => format!("<{e}>"),
    }
}

pub(super) fn render_rows(r: Result<Vec<Row>, Error>) -> String {
    let rows = match r {
        Err(e) => return err(&e),
        Ok(rows) => rows,
    };
    let rendered: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .columns()
                .iter()
                .enumerate()
                .map(|(i, col)| {
                    let v = match *col.type_() {
                        Type::INT2 => cell::<i16>(row, i),
                        Type::INT4 => cell::<i32>(row, i),
                        Type::INT8 => cell::<i64>(row, i),
                        Type::FLOAT4 => cell::<f32>(row, i),
                        Type::FLOAT8 => cell::<f64>(row, i),
                        Type::BOOL => cell::<bool>(row, i),
                        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => cell::<String>(row, i),
                        ref t => format!("<{t}>"),
                    };
                    format!("{}={v}", col.name())
                })
                .collect();
            cells.join(",")
        })
        .collect();
    format!("{}rows:{}", rows.len(), rendered.join(";"))
}

pub(super) fn render_count(r: Result<u64, Error>) -> String {
    match r {
        Ok(n) => format!("n={n}"),
        Err(e) => err(&e),
    }
}

fn short(s: &str) -> String {
    const MAX: usize = 400;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

/// Fails, listing each client's first difference, unless every client saw
/// the same results in both runs.
pub(super) fn compare(ops: &[Vec<Op>], direct: &[Vec<String>], proxy: &[Vec<String>]) -> Result<()> {
    // A client's first difference is the interesting one: later ones often follow from it.
    let mut total = 0;
    let mut firsts = Vec::new();
    for (idx, (d, x)) in direct.iter().zip(proxy).enumerate() {
        let mut differing = d.iter().zip(x).enumerate().filter(|(_, (dr, pr))| dr != pr);
        if let Some((i, (dr, pr))) = differing.next() {
            total += 1 + differing.count();
            firsts.push(format!(
                "client {idx}, op {i}: {:?}\n  direct: {}\n  proxy:  {}",
                ops[idx][i],
                short(dr),
                short(pr)
            ));
        }
    }
    if !firsts.is_empty() {
        let clients = firsts.len();
        firsts.truncate(12);
        bail!(
            "{total} results of {clients} clients differ between direct and proxy; first difference of {} of them:\n{}",
            firsts.len(),
            firsts.join("\n")
        );
    }
    Ok(())
}
