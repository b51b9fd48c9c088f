//! A fast hash for map keys no client chooses: ids the proxy hands out
//! (MySQL statement ids) and names from the configuration (clusters).
//! FNV-1a, a few instructions per byte where std's SipHash costs a hundred
//! or more per look-up on the hot path. Maps keyed by what a client sends
//! (statement texts, names it makes up) keep std's randomly keyed SipHash:
//! with a fixed hash a client could choose keys that collide.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a's 64-bit offset basis and prime (Fowler, Noll, Vo).
const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(OFFSET)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
        }
    }
}

/// A map whose keys no client chooses (see the module comment).
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_1a_of_known_inputs() {
        let hash = |b: &[u8]| {
            let mut h = Fnv::default();
            h.write(b);
            h.finish()
        };
        // The published FNV-1a 64 test vectors.
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_fast_map_finds_what_it_holds() {
        let mut m: FastMap<u32, u32> = FastMap::default();
        for i in 0..1000 {
            m.insert(i, i * 2);
        }
        assert!((0..1000).all(|i| m.get(&i) == Some(&(i * 2))));
        assert_eq!(m.get(&1000), None);
    }
}
