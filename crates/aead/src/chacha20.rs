//! The ChaCha20 block function (RFC 8439, section 2.3) for sixteen blocks at once, each
//! with a key, nonce and counter of its own.
//!
//! The sixteen states are held word-major: `rows[w][lane]` is word `w` of lane `lane`'s
//! state, so each step of a quarter round is one operation on a row of sixteen lanes. With
//! AVX-512 a row is one register and a rotation one instruction; the portable code is the
//! same arithmetic on arrays (the reference the tests hold the vector code to). With AVX2
//! a register holds half a row, so the sixteen lanes go through in two passes of eight,
//! each pass's sixteen rows in the sixteen registers AVX2 has. The keystream comes out
//! lane-major, one 64-byte block per lane, as a packet reads it.

/// Blocks computed by one call.
pub(crate) const LANES: usize = 16;

/// "expand 32-byte k", the first four words of every state.
const CONSTANTS: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Sixteen input states, word-major: `rows[w][lane]`.
pub(crate) type Rows = [[u32; LANES]; 16];

/// Sixteen keystream blocks, lane-major: `blocks[lane][w]` is word `w` of that lane's block
/// (its bytes are the word little-endian).
pub(crate) type Blocks = [[u32; 16]; LANES];

/// Rows with the constants in place and every other word zero.
pub(crate) fn empty_rows() -> Rows {
    let mut rows = [[0; LANES]; 16];
    for (row, constant) in rows.iter_mut().zip(CONSTANTS) {
        *row = [constant; LANES];
    }
    rows
}

/// Sets `lane`'s key, counter and nonce words (key and nonce as RFC 8439 reads their
/// bytes: little-endian words).
#[inline]
pub(crate) fn set_lane(
    rows: &mut Rows,
    lane: usize,
    key: &[u32; 8],
    counter: u32,
    nonce: &[u32; 3],
) {
    for (w, &word) in key.iter().enumerate() {
        rows[4 + w][lane] = word;
    }
    rows[12][lane] = counter;
    for (w, &word) in nonce.iter().enumerate() {
        rows[13 + w][lane] = word;
    }
}

/// Which code seals a batch. Every one gives the same bytes; the tests run each the
/// machine can (`TICKWIRE_REQUIRE_ALL_BACKENDS=1` makes one it has but they cannot run a
/// failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The lanes in AVX-512F intrinsics: a row of sixteen lanes per register, rotations in
    /// one instruction (x86-64 only).
    Avx512,
    /// The lanes in AVX2 intrinsics, eight at a time, for packets of up to
    /// [`AVX2_LANES_MAX_BYTES`](crate::AVX2_LANES_MAX_BYTES); longer ones go through `ring`,
    /// which is quicker for them on AVX2 (x86-64 only).
    Avx2,
    /// One packet at a time through `ring` (its AVX2, SSE or NEON code): where neither
    /// AVX-512 nor AVX2 is.
    Ring,
    /// The lanes in plain Rust: the reference the vector code is held to, and slow.
    Portable,
}

impl Backend {
    /// The fastest backend this processor runs.
    pub fn detect() -> Self {
        if Self::Avx512.is_available() {
            Self::Avx512
        } else if Self::Avx2.is_available() {
            Self::Avx2
        } else {
            Self::Ring
        }
    }

    /// Whether `self` seals a plaintext of `len` bytes in its lanes (otherwise through
    /// `ring`).
    pub(crate) fn seals_in_lanes(self, len: usize) -> bool {
        match self {
            Self::Avx512 | Self::Portable => true,
            Self::Avx2 => len <= crate::AVX2_LANES_MAX_BYTES,
            Self::Ring => false,
        }
    }

    /// Whether this processor can run `self`.
    pub fn is_available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            Self::Avx512 | Self::Avx2 => false,
            Self::Ring | Self::Portable => true,
        }
    }

    /// Computes the sixteen blocks of `rows` into `out`: with AVX-512 or AVX2 where `self`
    /// is that and the processor has it, the portable way otherwise.
    pub(crate) fn blocks(self, rows: &Rows, out: &mut Blocks) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Avx512 if self.is_available() => {
                // SAFETY: the processor has AVX-512F, checked just above.
                unsafe { x86::blocks_avx512(rows, out) }
            }
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 if self.is_available() => {
                // SAFETY: the processor has AVX2, checked just above.
                unsafe { x86::blocks_avx2(rows, out) }
            }
            _ => blocks_generic(rows, out),
        }
    }
}

// Four rows read and written at each lane: an index per lane says that plainest.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn quarter_round(s: &mut Rows, a: usize, b: usize, c: usize, d: usize) {
    for l in 0..LANES {
        s[a][l] = s[a][l].wrapping_add(s[b][l]);
        s[d][l] = (s[d][l] ^ s[a][l]).rotate_left(16);
    }
    for l in 0..LANES {
        s[c][l] = s[c][l].wrapping_add(s[d][l]);
        s[b][l] = (s[b][l] ^ s[c][l]).rotate_left(12);
    }
    for l in 0..LANES {
        s[a][l] = s[a][l].wrapping_add(s[b][l]);
        s[d][l] = (s[d][l] ^ s[a][l]).rotate_left(8);
    }
    for l in 0..LANES {
        s[c][l] = s[c][l].wrapping_add(s[d][l]);
        s[b][l] = (s[b][l] ^ s[c][l]).rotate_left(7);
    }
}

/// Twenty rounds, the input added back, then each lane's words gathered into its block.
#[inline(always)]
fn blocks_generic(rows: &Rows, out: &mut Blocks) {
    let mut s = *rows;
    for _ in 0..10 {
        quarter_round(&mut s, 0, 4, 8, 12);
        quarter_round(&mut s, 1, 5, 9, 13);
        quarter_round(&mut s, 2, 6, 10, 14);
        quarter_round(&mut s, 3, 7, 11, 15);
        quarter_round(&mut s, 0, 5, 10, 15);
        quarter_round(&mut s, 1, 6, 11, 12);
        quarter_round(&mut s, 2, 7, 8, 13);
        quarter_round(&mut s, 3, 4, 9, 14);
    }
    for (w, row) in s.iter().enumerate() {
        for (l, word) in row.iter().enumerate() {
            out[l][w] = word.wrapping_add(rows[w][l]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_or_si256,
        _mm256_permute2x128_si256, _mm256_set_epi8, _mm256_shuffle_epi8, _mm256_slli_epi32,
        _mm256_srli_epi32, _mm256_storeu_si256, _mm256_unpackhi_epi32, _mm256_unpackhi_epi64,
        _mm256_unpacklo_epi32, _mm256_unpacklo_epi64, _mm256_xor_si256, _mm512_add_epi32,
        _mm512_loadu_si512, _mm512_rol_epi32, _mm512_shuffle_i32x4, _mm512_storeu_si512,
        _mm512_unpackhi_epi32, _mm512_unpackhi_epi64, _mm512_unpacklo_epi32, _mm512_unpacklo_epi64,
        _mm512_xor_si512,
    };

    use super::{Blocks, LANES, Rows};

    macro_rules! quarter_round {
        ($x:ident, $a:expr, $b:expr, $c:expr, $d:expr) => {
            $x[$a] = _mm512_add_epi32($x[$a], $x[$b]);
            $x[$d] = _mm512_rol_epi32::<16>(_mm512_xor_si512($x[$d], $x[$a]));
            $x[$c] = _mm512_add_epi32($x[$c], $x[$d]);
            $x[$b] = _mm512_rol_epi32::<12>(_mm512_xor_si512($x[$b], $x[$c]));
            $x[$a] = _mm512_add_epi32($x[$a], $x[$b]);
            $x[$d] = _mm512_rol_epi32::<8>(_mm512_xor_si512($x[$d], $x[$a]));
            $x[$c] = _mm512_add_epi32($x[$c], $x[$d]);
            $x[$b] = _mm512_rol_epi32::<7>(_mm512_xor_si512($x[$b], $x[$c]));
        };
    }

    /// Sixteen states in sixteen registers (and their inputs in sixteen more: AVX-512 has
    /// 32), then a 16 × 16 transpose of 32-bit words in four steps, so each lane's block is
    /// stored whole.
    #[target_feature(enable = "avx512f")]
    pub(super) fn blocks_avx512(rows: &Rows, out: &mut Blocks) {
        let init: [__m512i; 16] = std::array::from_fn(|w| {
            const { assert!(size_of::<[u32; LANES]>() == size_of::<__m512i>()) };
            // SAFETY: a row is 16 u32s, 64 bytes (asserted above); the load is unaligned.
            unsafe { _mm512_loadu_si512(rows[w].as_ptr().cast()) }
        });
        let mut x = init;
        for _ in 0..10 {
            quarter_round!(x, 0, 4, 8, 12);
            quarter_round!(x, 1, 5, 9, 13);
            quarter_round!(x, 2, 6, 10, 14);
            quarter_round!(x, 3, 7, 11, 15);
            quarter_round!(x, 0, 5, 10, 15);
            quarter_round!(x, 1, 6, 11, 12);
            quarter_round!(x, 2, 7, 8, 13);
            quarter_round!(x, 3, 4, 9, 14);
        }
        for (word, input) in x.iter_mut().zip(init) {
            *word = _mm512_add_epi32(*word, input);
        }
        // Step 1: pairs of rows interleaved by word. t[2i] holds rows 2i and 2i+1's words
        // 0,1 of each 128-bit quarter (lanes 4k, 4k+1), t[2i+1] their words 2,3.
        let mut t = x;
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
        }
        // Step 2: quads of rows interleaved by 64 bits. Quarter k of u[4i + j] now holds
        // rows 4i..4i+4 of lane 4k + j.
        let mut u = t;
        for i in 0..4 {
            u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
            u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
            u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
            u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
        }
        // Steps 3 and 4: whole quarters moved, so that lane 4k + j's four quarters (rows
        // 0..4, 4..8, 8..12, 12..16) come together in one register.
        let mut v = u;
        for j in 0..4 {
            v[j] = _mm512_shuffle_i32x4::<0x88>(u[j], u[4 + j]);
            v[4 + j] = _mm512_shuffle_i32x4::<0xdd>(u[j], u[4 + j]);
            v[8 + j] = _mm512_shuffle_i32x4::<0x88>(u[8 + j], u[12 + j]);
            v[12 + j] = _mm512_shuffle_i32x4::<0xdd>(u[8 + j], u[12 + j]);
        }
        for j in 0..4 {
            let lanes = [
                (j, _mm512_shuffle_i32x4::<0x88>(v[j], v[8 + j])),
                (8 + j, _mm512_shuffle_i32x4::<0xdd>(v[j], v[8 + j])),
                (4 + j, _mm512_shuffle_i32x4::<0x88>(v[4 + j], v[12 + j])),
                (12 + j, _mm512_shuffle_i32x4::<0xdd>(v[4 + j], v[12 + j])),
            ];
            for (lane, block) in lanes {
                // SAFETY: a block is 16 u32s, 64 bytes; the store is unaligned.
                unsafe { _mm512_storeu_si512(out[lane].as_mut_ptr().cast(), block) };
            }
        }
    }

    /// One quarter round on four rows of eight lanes, each row one register: rotations by
    /// 16 and 8 are byte shuffles (`$rot16`, `$rot8`), by 12 and 7 two shifts and an OR.
    macro_rules! quarter_round_avx2 {
        ($x:ident, $a:expr, $b:expr, $c:expr, $d:expr, $rot16:ident, $rot8:ident) => {
            $x[$a] = _mm256_add_epi32($x[$a], $x[$b]);
            $x[$d] = _mm256_shuffle_epi8(_mm256_xor_si256($x[$d], $x[$a]), $rot16);
            $x[$c] = _mm256_add_epi32($x[$c], $x[$d]);
            $x[$b] = rotate_avx2!(_mm256_xor_si256($x[$b], $x[$c]), 12, 20);
            $x[$a] = _mm256_add_epi32($x[$a], $x[$b]);
            $x[$d] = _mm256_shuffle_epi8(_mm256_xor_si256($x[$d], $x[$a]), $rot8);
            $x[$c] = _mm256_add_epi32($x[$c], $x[$d]);
            $x[$b] = rotate_avx2!(_mm256_xor_si256($x[$b], $x[$c]), 7, 25);
        };
    }

    /// Each 32-bit word of `$x` rotated left by `$left` (`$right` is `32 - $left`: the
    /// shift counts must be constants).
    macro_rules! rotate_avx2 {
        ($x:expr, $left:literal, $right:literal) => {{
            let x = $x;
            _mm256_or_si256(
                _mm256_slli_epi32::<$left>(x),
                _mm256_srli_epi32::<$right>(x),
            )
        }};
    }

    /// The sixteen lanes in two passes of eight: a pass's sixteen rows (half a row each)
    /// fill AVX2's sixteen registers, then two 8 × 8 transposes of 32-bit words give each
    /// of its lanes the two halves of its block.
    #[target_feature(enable = "avx2")]
    pub(super) fn blocks_avx2(rows: &Rows, out: &mut Blocks) {
        const HALF: usize = LANES / 2;
        // Byte shuffles that rotate each 32-bit word left by 16 and by 8.
        let rot16 = _mm256_set_epi8(
            13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2, 13, 12, 15, 14, 9, 8, 11, 10, 5,
            4, 7, 6, 1, 0, 3, 2,
        );
        let rot8 = _mm256_set_epi8(
            14, 13, 12, 15, 10, 9, 8, 11, 6, 5, 4, 7, 2, 1, 0, 3, 14, 13, 12, 15, 10, 9, 8, 11, 6,
            5, 4, 7, 2, 1, 0, 3,
        );
        for pass in 0..2 {
            let first = pass * HALF;
            let init: [__m256i; 16] = std::array::from_fn(|w| {
                const { assert!(size_of::<[u32; LANES / 2]>() == size_of::<__m256i>()) };
                // SAFETY: eight u32s from `first` (0 or 8) lie within the row of sixteen;
                // the load is unaligned.
                unsafe { _mm256_loadu_si256(rows[w][first..].as_ptr().cast()) }
            });
            let mut x = init;
            for _ in 0..10 {
                quarter_round_avx2!(x, 0, 4, 8, 12, rot16, rot8);
                quarter_round_avx2!(x, 1, 5, 9, 13, rot16, rot8);
                quarter_round_avx2!(x, 2, 6, 10, 14, rot16, rot8);
                quarter_round_avx2!(x, 3, 7, 11, 15, rot16, rot8);
                quarter_round_avx2!(x, 0, 5, 10, 15, rot16, rot8);
                quarter_round_avx2!(x, 1, 6, 11, 12, rot16, rot8);
                quarter_round_avx2!(x, 2, 7, 8, 13, rot16, rot8);
                quarter_round_avx2!(x, 3, 4, 9, 14, rot16, rot8);
            }
            for (word, input) in x.iter_mut().zip(init) {
                *word = _mm256_add_epi32(*word, input);
            }
            // Rows 0..8 give each lane's words 0..8, rows 8..16 its words 8..16.
            for half in 0..2 {
                let r = &x[8 * half..8 * half + 8];
                // Pairs of rows interleaved by word: within each 128-bit half, t[2i] holds
                // rows 2i, 2i+1 of lanes 0, 1 (4, 5 in the upper half), t[2i+1] of lanes
                // 2, 3 (6, 7).
                let t: [__m256i; 8] = std::array::from_fn(|i| {
                    let (a, b) = (r[i & !1], r[i | 1]);
                    if i % 2 == 0 {
                        _mm256_unpacklo_epi32(a, b)
                    } else {
                        _mm256_unpackhi_epi32(a, b)
                    }
                });
                // Quads of rows by 64 bits: u[4q + j] holds rows 4q..4q+4 of lane j in its
                // lower half and of lane 4 + j in its upper half.
                let u: [__m256i; 8] = std::array::from_fn(|i| {
                    let (q, j) = (i / 4, i % 4);
                    let (a, b) = (t[4 * q + j / 2], t[4 * q + 2 + j / 2]);
                    if j % 2 == 0 {
                        _mm256_unpacklo_epi64(a, b)
                    } else {
                        _mm256_unpackhi_epi64(a, b)
                    }
                });
                for j in 0..4 {
                    let low = _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j]);
                    let high = _mm256_permute2x128_si256::<0x31>(u[j], u[4 + j]);
                    for (lane, words) in [(first + j, low), (first + 4 + j, high)] {
                        // SAFETY: eight u32s at word 0 or 8 of a 16-word block; unaligned.
                        unsafe {
                            _mm256_storeu_si256(out[lane][8 * half..].as_mut_ptr().cast(), words)
                        };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::rfc8439::{
        IETF_SUBMISSION, IETF_SUBMISSION_CIPHERTEXT, JABBERWOCKY, SUNSCREEN,
    };

    fn words<const N: usize>(hex: &str) -> [u32; N] {
        crate::words(&hex::decode(hex).unwrap())
    }

    /// The backends whose lanes these tests hold to the vectors (`ring` computes none).
    fn lane_backends() -> Vec<Backend> {
        crate::support::backends::under_test()
            .into_iter()
            .filter(|&backend| backend != Backend::Ring)
            .collect()
    }

    /// ChaCha20 alone (RFC 8439, 2.4): `data` XORed with the keystream from `counter` on,
    /// its blocks computed sixteen lanes at a time by `backend`.
    fn chacha20(backend: Backend, key: &str, nonce: &str, counter: u32, data: &[u8]) -> String {
        let (key, nonce) = (words(key), words(nonce));
        let mut out = data.to_vec();
        for (round, chunk) in out.chunks_mut(64 * LANES).enumerate() {
            let mut rows = empty_rows();
            for lane in 0..LANES {
                let block = (round * LANES + lane) as u32;
                set_lane(&mut rows, lane, &key, counter + block, &nonce);
            }
            let mut blocks = [[0; 16]; LANES];
            backend.blocks(&rows, &mut blocks);
            for (text, block) in chunk.chunks_mut(64).zip(&blocks) {
                let keystream: [u8; 64] = crate::bytes(block);
                for (byte, key) in text.iter_mut().zip(keystream) {
                    *byte ^= key;
                }
            }
        }
        hex::encode(out)
    }

    /// RFC 8439, 2.3.2: the block for key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00,
    /// counter 1, in every lane, by every backend this machine has.
    #[test]
    fn every_backend_computes_rfc_8439_block_2_3_2() {
        let key = words("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
        let nonce = words("000000090000004a00000000");
        let expected: [u32; 16] = words(
            "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e\
             d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e",
        );
        let mut rows = empty_rows();
        for lane in 0..LANES {
            set_lane(&mut rows, lane, &key, 1, &nonce);
        }
        for backend in lane_backends() {
            let mut out = [[0; 16]; LANES];
            backend.blocks(&rows, &mut out);
            for (lane, block) in out.iter().enumerate() {
                assert_eq!(*block, expected, "{backend:?}, lane {lane}");
            }
        }
    }

    /// RFC 8439, A.1: the five block-function vectors, each in every lane it can take (lane
    /// `l` holds vector `l mod 5`, so neighbouring lanes differ), by every backend.
    #[test]
    fn every_backend_computes_the_rfc_8439_a_1_blocks() {
        let zero = "00".repeat(32);
        let vectors: [(String, &str, u32, &str); 5] = [
            (
                zero.clone(),
                "000000000000000000000000",
                0,
                "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7\
                 da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586",
            ),
            (
                zero.clone(),
                "000000000000000000000000",
                1,
                "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed\
                 29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f",
            ),
            (
                format!("{}01", "00".repeat(31)),
                "000000000000000000000000",
                1,
                "3aeb5224ecf849929b9d828db1ced4dd832025e8018b8160b82284f3c949aa5a\
                 8eca00bbb4a73bdad192b5c42f73f2fd4e273644c8b36125a64addeb006c13a0",
            ),
            (
                format!("00ff{}", "00".repeat(30)),
                "000000000000000000000000",
                2,
                "72d54dfbf12ec44b362692df94137f328fea8da73990265ec1bbbea1ae9af0ca\
                 13b25aa26cb4a648cb9b9d1be65b2c0924a66c54d545ec1b7374f4872e99f096",
            ),
            (
                zero,
                "000000000000000000000002",
                0,
                "c2c64d378cd536374ae204b9ef933fcd1a8b2288b3dfa49672ab765b54ee27c7\
                 8a970e0e955c14f3a88e741b97c286f75f8fc299e8148362fa198a39531bed6d",
            ),
        ];
        let mut rows = empty_rows();
        for lane in 0..LANES {
            let (key, nonce, counter, _) = &vectors[lane % vectors.len()];
            set_lane(&mut rows, lane, &words(key), *counter, &words(nonce));
        }
        for backend in lane_backends() {
            let mut out = [[0; 16]; LANES];
            backend.blocks(&rows, &mut out);
            for (lane, block) in out.iter().enumerate() {
                let vector = lane % vectors.len();
                assert_eq!(
                    hex::encode(crate::bytes::<64>(block)),
                    vectors[vector].3,
                    "{backend:?}, lane {lane}: A.1 vector {}",
                    vector + 1
                );
            }
        }
    }

    /// RFC 8439, A.2 (the three encryption vectors, counters 0, 1 and 42) and 2.4.2 (the
    /// sunscreen text), by every backend: the keystream of consecutive counters.
    #[test]
    fn every_backend_encrypts_the_rfc_8439_a_2_and_2_4_2_vectors() {
        struct Vector {
            name: &'static str,
            key: String,
            nonce: &'static str,
            counter: u32,
            plaintext: &'static [u8],
            ciphertext: &'static str,
        }
        let vectors = [
            Vector {
                name: "A.2 vector 1",
                key: "00".repeat(32),
                nonce: "000000000000000000000000",
                counter: 0,
                plaintext: &[0; 64],
                ciphertext: "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7\
                 da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586",
            },
            Vector {
                name: "A.2 vector 2",
                key: format!("{}01", "00".repeat(31)),
                nonce: "000000000000000000000002",
                counter: 1,
                plaintext: IETF_SUBMISSION,
                ciphertext: IETF_SUBMISSION_CIPHERTEXT,
            },
            Vector {
                name: "A.2 vector 3",
                key: "1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0".to_string(),
                nonce: "000000000000000000000002",
                counter: 42,
                plaintext: JABBERWOCKY,
                ciphertext: "62e6347f95ed87a45ffae7426f27a1df5fb69110044c0d73118effa95b01e5cf\
                 166d3df2d721caf9b21e5fb14c616871fd84c54f9d65b283196c7fe4f60553eb\
                 f39c6402c42234e32a356b3e764312a61a5532055716ead6962568f87d3f3f77\
                 04c6a8d1bcd1bf4d50d6154b6da731b187b58dfd728afa36757a797ac188d1",
            },
            Vector {
                name: "2.4.2",
                key: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f".to_string(),
                nonce: "000000000000004a00000000",
                counter: 1,
                plaintext: SUNSCREEN,
                ciphertext: "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b\
                 f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8\
                 07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736\
                 5af90bbf74a35be6b40b8eedf2785e42874d",
            },
        ];
        for backend in lane_backends() {
            for v in &vectors {
                assert_eq!(
                    chacha20(backend, &v.key, v.nonce, v.counter, v.plaintext),
                    v.ciphertext,
                    "{backend:?}, {}",
                    v.name
                );
            }
        }
    }

    /// Every lane its own key, counter and nonce: each backend's transpose puts every
    /// lane's block where the portable code does.
    #[test]
    fn lanes_are_independent_and_land_in_their_own_block() {
        let mut rows = empty_rows();
        for lane in 0..LANES {
            let l = lane as u32;
            let key = std::array::from_fn(|w| (w as u32 + 1).wrapping_mul(0x9e37_79b9) ^ l);
            let nonce = [l * 3, !l, l << 20];
            set_lane(&mut rows, lane, &key, l * 7 + 1, &nonce);
        }
        let mut expected = [[0; 16]; LANES];
        blocks_generic(&rows, &mut expected);
        for lane in 1..LANES {
            assert_ne!(
                expected[lane], expected[0],
                "lane {lane} differs from lane 0"
            );
        }
        for backend in lane_backends() {
            let mut out = [[0; 16]; LANES];
            backend.blocks(&rows, &mut out);
            assert_eq!(out, expected, "the {backend:?} lanes and transpose");
        }
    }

    /// The AVX2 lanes take packets up to 256 bytes; from 257 on, `ring` does.
    #[test]
    fn the_avx2_lanes_stop_at_256_bytes() {
        assert_eq!(crate::AVX2_LANES_MAX_BYTES, 256);
        assert!(
            Backend::Avx2.seals_in_lanes(256),
            "256 bytes in the AVX2 lanes"
        );
        assert!(!Backend::Avx2.seals_in_lanes(257), "257 bytes through ring");
        for len in [0, 257, 1472] {
            assert!(
                Backend::Avx512.seals_in_lanes(len),
                "AVX-512 seals {len} in its lanes"
            );
            assert!(!Backend::Ring.seals_in_lanes(len), "ring seals {len} alone");
        }
    }
}
