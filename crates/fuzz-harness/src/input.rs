//! A cursor over fuzz input that never fails: reads past the end yield
//! zeros or empty slices, so every byte string is a valid input of every
//! harness and the fuzzer never wastes runs on rejected shapes.

/// Reads fixed and length-prefixed fields off the front of fuzz input.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// The next byte, 0 at the end.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// True for one byte value in `n` (`n` > 0).
    pub fn one_in(&mut self, n: u8) -> bool {
        self.u8().is_multiple_of(n)
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// Little-endian, zero-padded at the end.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// Little-endian, zero-padded at the end.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Little-endian, zero-padded at the end.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// Exactly `N` bytes, zero-padded at the end.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let got = self.bytes(N);
        out[..got.len()].copy_from_slice(got);
        out
    }

    /// A field prefixed with its one-byte length.
    pub fn chunk(&mut self) -> &'a [u8] {
        let n = usize::from(self.u8());
        self.bytes(n)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Input;

    #[test]
    fn reading_past_the_end_yields_zeros_and_empty_slices() {
        let mut i = Input::new(&[1, 2, 3]);
        assert_eq!(i.u16(), 0x0201);
        assert_eq!(i.u32(), 3);
        assert_eq!(i.chunk(), b"");
        assert_eq!(i.array::<2>(), [0, 0]);
        assert!(i.is_empty());
    }

    #[test]
    fn a_chunk_is_its_length_byte_then_that_many_bytes() {
        let mut i = Input::new(&[2, b'a', b'b', b'c']);
        assert_eq!(i.chunk(), b"ab");
        assert_eq!(i.rest(), b"c");
    }
}
