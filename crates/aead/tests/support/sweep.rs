//! The inputs of the length sweep: for each plaintext length, a key, nonce, associated data
//! and plaintext that follow from the length alone, so that another implementation (the C#
//! SDK's test) can make the same ones.
//!
//! The bytes come from SplitMix64 seeded with the length: each output, little-endian, eight
//! bytes in turn. The key takes the first 32, the nonce the next 12, the associated data the
//! next `length mod 29` (0 to 28: the protocol's 22 and every padding of Poly1305's
//! blocks), the plaintext the next `length`.

/// Longest plaintext swept: a full datagram's payload.
pub(crate) const MAX_LEN: usize = 1472;

/// One length's inputs.
#[derive(Debug)]
pub(crate) struct Inputs {
    pub(crate) key: [u8; 32],
    pub(crate) nonce: [u8; 12],
    pub(crate) aad: Vec<u8>,
    pub(crate) plaintext: Vec<u8>,
}

/// The inputs for a plaintext of `len` bytes.
pub(crate) fn inputs(len: usize) -> Inputs {
    let mut stream = SplitMix64 {
        state: len as u64,
        word: [0; 8],
        used: 8,
    };
    let mut take = |n: usize| -> Vec<u8> { (0..n).map(|_| stream.byte()).collect() };
    let key = take(32).try_into().unwrap();
    let nonce = take(12).try_into().unwrap();
    let aad = take(len % 29);
    let plaintext = take(len);
    Inputs {
        key,
        nonce,
        aad,
        plaintext,
    }
}

struct SplitMix64 {
    state: u64,
    word: [u8; 8],
    used: usize,
}

impl SplitMix64 {
    fn byte(&mut self) -> u8 {
        if self.used == 8 {
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            self.word = (z ^ (z >> 31)).to_le_bytes();
            self.used = 0;
        }
        self.used += 1;
        self.word[self.used - 1]
    }
}
