//! Byte search a word (eight bytes) at a time, for the prefilters every
//! statement goes through: a word with no byte of interest is skipped with
//! a few arithmetic operations, and only the bytes of a word that has one
//! are looked at one by one.

/// Bytes read at once.
const WORD: usize = 8;

/// `b` in every byte of a word.
pub(crate) const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; WORD])
}

/// The high bit of each byte of `w` that may be zero: the lowest one set
/// is exactly the first zero byte; a higher one may be a byte just above a
/// zero byte, so each candidate is checked.
pub(crate) const fn zero_bytes(w: u64) -> u64 {
    w.wrapping_sub(splat(0x01)) & !w & splat(0x80)
}

/// The candidate bytes (see [`zero_bytes`]) of `w` that are `b`.
pub(crate) const fn bytes_of(w: u64, b: u8) -> u64 {
    zero_bytes(w ^ splat(b))
}

/// Whether `at` holds for some index of `hay`, asking it only at the
/// candidates `candidates` marks in each word (the high bit of a byte,
/// as [`bytes_of`] gives them: every index where `at` may hold must be
/// marked) and at each index of the last, partial word.
pub(crate) fn any_index(hay: &[u8], candidates: impl Fn(u64) -> u64, mut at: impl FnMut(usize) -> bool) -> bool {
    let mut chunks = hay.chunks_exact(WORD);
    let mut base = 0;
    for chunk in chunks.by_ref() {
        let mut bytes = [0u8; WORD];
        bytes.copy_from_slice(chunk);
        // Byte k of the word is bits 8k..8k+8 (little-endian order).
        let mut marked = candidates(u64::from_le_bytes(bytes));
        while marked != 0 {
            if at(base + marked.trailing_zeros() as usize / 8) {
                return true;
            }
            marked &= marked - 1;
        }
        base += WORD;
    }
    (base..base + chunks.remainder().len()).any(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bytes_of_marks_every_byte_that_is_b_and_first_exactly(bytes in proptest::array::uniform8(any::<u8>()), b in any::<u8>()) {
            let marked = bytes_of(u64::from_le_bytes(bytes), b);
            for (k, &x) in bytes.iter().enumerate() {
                if x == b {
                    prop_assert!(marked & (0x80 << (8 * k)) != 0, "byte {} not marked", k);
                }
            }
            prop_assert_eq!(marked != 0, bytes.contains(&b));
            if marked != 0 {
                prop_assert_eq!(bytes[marked.trailing_zeros() as usize / 8], b);
            }
        }

        #[test]
        fn any_index_finds_what_every_index_finds(hay in proptest::collection::vec(any::<u8>(), 0..40), b in any::<u8>()) {
            let found = any_index(&hay, |w| bytes_of(w, b), |i| hay[i] == b);
            prop_assert_eq!(found, hay.contains(&b));
        }
    }
}
