//! Poly1305 (RFC 8439, section 2.5) in 64-bit limbs.
//!
//! The accumulator is `h0 + h1·2^64 + h2·2^128` with `h2` at most 6 between blocks, and
//! `r` is two 64-bit limbs. Clamping leaves `r1` a multiple of 4, so the parts of `h·r` at
//! and above 2^130 fold back exactly as `h1·s1` and `h2·s1·2^64` with `s1 = r1 + r1/4`
//! (2^130 ≡ 5 mod p). Every product fits a `u128`: the limbs of `r` are below 2^60. The
//! code has no branch or index that depends on the key or the data, only on lengths.

use zeroize::Zeroize;

/// A Poly1305 computation under one one-time key, wiped when it is dropped.
pub(crate) struct Poly1305 {
    r0: u64,
    r1: u64,
    s1: u64,
    h0: u64,
    h1: u64,
    h2: u64,
    pad0: u64,
    pad1: u64,
}

fn le128(bytes: &[u8]) -> u128 {
    let mut block = [0u8; 16];
    block.copy_from_slice(&bytes[..16]);
    u128::from_le_bytes(block)
}

impl Drop for Poly1305 {
    fn drop(&mut self) {
        let Self {
            r0,
            r1,
            s1,
            h0,
            h1,
            h2,
            pad0,
            pad1,
        } = self;
        for limb in [r0, r1, s1, h0, h1, h2, pad0, pad1] {
            limb.zeroize();
        }
    }
}

impl Poly1305 {
    /// Starts a computation under the 32-byte one-time key `r ‖ s`, as the eight
    /// little-endian words of ChaCha20's block 0 that it is.
    pub(crate) fn new(key: &[u32; 8]) -> Self {
        let le64 = |i: usize| u64::from(key[i]) | u64::from(key[i + 1]) << 32;
        let r0 = le64(0) & 0x0fff_fffc_0fff_ffff;
        let r1 = le64(2) & 0x0fff_fffc_0fff_fffc;
        Self {
            r0,
            r1,
            s1: r1 + (r1 >> 2),
            h0: 0,
            h1: 0,
            h2: 0,
            pad0: le64(4),
            pad1: le64(6),
        }
    }

    /// Adds the block `m + high·2^128` and multiplies by `r`, partly reduced.
    #[inline(always)]
    fn block(&mut self, m: u128, high: u64) {
        // 128-bit additions compile to add-with-carry chains.
        let (h, carry) = (u128::from(self.h1) << 64 | u128::from(self.h0)).overflowing_add(m);
        let (h0, h1) = (h as u64, (h >> 64) as u64);
        let h2 = self.h2 + u64::from(carry) + high;

        let mul = |a: u64, b: u64| u128::from(a) * u128::from(b);
        let d0 = mul(h0, self.r0) + mul(h1, self.s1);
        let d1 = mul(h0, self.r1) + mul(h1, self.r0) + u128::from(h2 * self.s1) + (d0 >> 64);
        let d2 = h2 * self.r0 + (d1 >> 64) as u64;

        // What lies at and above 2^130, times 5, goes back to the bottom.
        let fold = (d2 & !3) + (d2 >> 2);
        let low = u128::from(d1 as u64) << 64 | u128::from(d0 as u64);
        let (low, carry) = low.overflowing_add(u128::from(fold));
        self.h0 = low as u64;
        self.h1 = (low >> 64) as u64;
        self.h2 = (d2 & 3) + u64::from(carry);
    }

    /// Adds `data` as 16-byte blocks, the last one zero-padded to 16 bytes: the AEAD's
    /// `pad16` (RFC 8439, 2.8), where every block carries the 2^128 bit.
    #[inline]
    pub(crate) fn update_padded(&mut self, data: &[u8]) {
        let mut blocks = data.chunks_exact(16);
        for block in &mut blocks {
            self.block(le128(block), 1);
        }
        let rest = blocks.remainder();
        if rest.is_empty() {
            return;
        }
        let block = if data.len() >= 16 {
            // The last 16 bytes, shifted down past those already taken: one load, where
            // copying a short tail into a zeroed block is two calls into libc.
            le128(&data[data.len() - 16..]) >> (8 * (16 - rest.len()))
        } else {
            let mut block = [0u8; 16];
            block[..rest.len()].copy_from_slice(rest);
            u128::from_le_bytes(block)
        };
        self.block(block, 1);
    }

    /// Adds the AEAD's closing block: the two lengths, in bytes, as 64-bit little-endian.
    #[inline]
    pub(crate) fn update_lengths(&mut self, aad_len: usize, text_len: usize) {
        self.block(
            u128::from(text_len as u64) << 64 | u128::from(aad_len as u64),
            1,
        );
    }

    /// Adds a message that is not a multiple of 16 bytes the plain Poly1305 way: its last
    /// block padded with a 1 byte then zeros, without the 2^128 bit.
    #[cfg(test)]
    fn update(&mut self, data: &[u8]) {
        let mut blocks = data.chunks_exact(16);
        for block in &mut blocks {
            self.block(le128(block), 1);
        }
        let rest = blocks.remainder();
        if !rest.is_empty() {
            let mut block = [0u8; 16];
            block[..rest.len()].copy_from_slice(rest);
            block[rest.len()] = 1;
            self.block(le128(&block), 0);
        }
    }

    /// The tag: `h` fully reduced mod 2^130 − 5, plus `s`, mod 2^128.
    pub(crate) fn finish(self) -> [u8; 16] {
        // h < 5·2^128 < 2p here, so one conditional subtraction of p reduces it: h − p =
        // (h + 5) − 2^130, taken when h + 5 reaches 2^130.
        let (g0, carry) = self.h0.overflowing_add(5);
        let (g1, carry) = self.h1.overflowing_add(u64::from(carry));
        let g2 = self.h2 + u64::from(carry);
        let take_g = 0u64.wrapping_sub(g2 >> 2);
        let h0 = (self.h0 & !take_g) | (g0 & take_g);
        let h1 = (self.h1 & !take_g) | (g1 & take_g);
        let (t0, carry) = h0.overflowing_add(self.pad0);
        let t1 = h1.wrapping_add(self.pad1).wrapping_add(u64::from(carry));
        let mut tag = [0u8; 16];
        tag[..8].copy_from_slice(&t0.to_le_bytes());
        tag[8..].copy_from_slice(&t1.to_le_bytes());
        tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::rfc8439::{IETF_SUBMISSION, JABBERWOCKY};

    fn mac(key: &str, message: &[u8]) -> String {
        let key = hex::decode(key).unwrap();
        let mut poly = Poly1305::new(&crate::words(&key));
        poly.update(message);
        hex::encode(poly.finish())
    }

    /// RFC 8439, A.3, vectors 1 to 4: a zero key, an `r` or an `s` of zero, and a whole
    /// key over a message that is not a multiple of 16 bytes.
    #[test]
    fn rfc_8439_a_3_vectors_1_to_4() {
        assert_eq!(
            IETF_SUBMISSION.len(),
            375,
            "the IETF text as the RFC has it"
        );
        assert_eq!(JABBERWOCKY.len(), 127, "the poem as the RFC has it");
        let s = "36e5f6b5c5e06070f0efca96227a863e";
        let zero16 = "00".repeat(16);
        let cases: [(String, &[u8], &str); 4] = [
            (
                "00".repeat(32),
                &[0; 64],
                "00000000000000000000000000000000",
            ),
            (format!("{zero16}{s}"), IETF_SUBMISSION, s),
            (
                format!("{s}{zero16}"),
                IETF_SUBMISSION,
                "f3477e7cd95417af89a6b8794c310cf0",
            ),
            (
                "1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0".to_string(),
                JABBERWOCKY,
                "4541669a7eaaee61e708dc7cbcc5eb62",
            ),
        ];
        for (i, (key, message, tag)) in cases.iter().enumerate() {
            assert_eq!(mac(key, message), *tag, "A.3 vector {}", i + 1);
        }
    }

    #[test]
    fn rfc_8439_2_5_2() {
        assert_eq!(
            mac(
                "85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b",
                b"Cryptographic Forum Research Group"
            ),
            "a8061dc1305136c6c22b8baf0c0127a9"
        );
    }

    /// RFC 8439, A.3, vectors 5 to 11: the edge cases of the reduction (h at or just past
    /// p, carries through every limb).
    #[test]
    fn rfc_8439_a_3_reduction_edge_cases() {
        let ff = "ffffffffffffffffffffffffffffffff";
        let r2 = format!("02{}", "00".repeat(31));
        let r1 = format!("01{}", "00".repeat(31));
        let cases: [(String, String, &str); 7] = [
            (
                r2.clone(),
                ff.to_string(),
                "03000000000000000000000000000000",
            ),
            (
                format!("02{}{ff}", "00".repeat(15)),
                format!("02{}", "00".repeat(15)),
                "03000000000000000000000000000000",
            ),
            (
                r1.clone(),
                format!("{ff}f0{}11{}", "ff".repeat(15), "00".repeat(15)),
                "05000000000000000000000000000000",
            ),
            (
                r1.clone(),
                format!("{ff}fbfefefefefefefefefefefefefefefe{}", "01".repeat(16)),
                "00000000000000000000000000000000",
            ),
            (
                r2.clone(),
                format!("fd{}", "ff".repeat(15)),
                "faffffffffffffffffffffffffffffff",
            ),
            (
                format!("0100000000000000040000000000000000{}", "00".repeat(15)),
                format!(
                    "e33594d7505e43b900000000000000003394d7505e4379cd01000000000000000000000000000000000000000000000001{}",
                    "00".repeat(15)
                ),
                "14000000000000005500000000000000",
            ),
            (
                format!("0100000000000000040000000000000000{}", "00".repeat(15)),
                format!(
                    "e33594d7505e43b900000000000000003394d7505e4379cd0100000000000000{}",
                    "00".repeat(16)
                ),
                "13000000000000000000000000000000",
            ),
        ];
        for (i, (key, message, tag)) in cases.iter().enumerate() {
            assert_eq!(
                mac(key, &hex::decode(message).unwrap()),
                *tag,
                "A.3 vector {}",
                i + 5
            );
        }
    }
}
