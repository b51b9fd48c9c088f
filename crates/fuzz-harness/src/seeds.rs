//! The hand-made seed inputs of every target, written with the codecs' own
//! encoders in the layout each harness reads (see the harness docs). They
//! are committed as `fuzz/corpus/<target>/seed-<name>`; the replay test
//! checks that the files match, and its ignored `write_the_seed_corpus`
//! rewrites them.
//!
//! The seeds are built per family, as the targets are: [`pg`] (the
//! PostgreSQL codec), [`mysql`] (the MySQL codec and its reply tracker),
//! [`sql`] (the classifiers and digests of both dialects) and [`token`]
//! (login tokens); the helpers they share are here.

mod mysql;
mod pg;
mod sql;
mod token;

use bytes::BytesMut;

/// One seed: target, file name (without the `seed-` prefix), bytes.
pub type Seed = (&'static str, &'static str, Vec<u8>);

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// The bytes `build` writes into an empty buffer (a codec's `put_*` or
/// `encode`).
fn encoded(build: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut b = BytesMut::new();
    build(&mut b);
    b.to_vec()
}

/// A one-byte-length-prefixed chunk, as [`crate::input::Input::chunk`] reads it.
fn chunk(b: &[u8]) -> Vec<u8> {
    let n = u8::try_from(b.len()).expect("seed chunks are short");
    cat(&[&[n], b])
}

/// Every seed of every target.
pub fn seeds() -> Vec<Seed> {
    let mut s = Vec::new();
    s.extend(pg::pg_seeds());
    s.extend(mysql::mysql_seeds());
    s.extend(mysql::tracker_seeds());
    s.extend(sql::sql_seeds());
    s.extend(token::token_seeds());
    s
}
