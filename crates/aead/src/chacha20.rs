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
/// machine can.
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

    fn words(hex: &str) -> Vec<u32> {
        hex::decode(hex)
            .unwrap()
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// RFC 8439, 2.3.2: the block for key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00,
    /// counter 1, in every lane, by every backend this machine has.
    #[test]
    fn every_backend_computes_rfc_8439_block_2_3_2() {
        let key: [u32; 8] =
            words("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
                .try_into()
                .unwrap();
        let nonce: [u32; 3] = words("000000090000004a00000000").try_into().unwrap();
        let expected = words(
            "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e\
             d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e",
        );
        let mut rows = empty_rows();
        for lane in 0..LANES {
            set_lane(&mut rows, lane, &key, 1, &nonce);
        }
        for backend in [Backend::Portable, Backend::Avx512, Backend::Avx2] {
            if !backend.is_available() {
                continue;
            }
            let mut out = [[0; 16]; LANES];
            backend.blocks(&rows, &mut out);
            for (lane, block) in out.iter().enumerate() {
                assert_eq!(block.as_slice(), expected, "{backend:?}, lane {lane}");
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
        for backend in [Backend::Avx512, Backend::Avx2] {
            if backend.is_available() {
                let mut out = [[0; 16]; LANES];
                backend.blocks(&rows, &mut out);
                assert_eq!(out, expected, "the {backend:?} lanes and transpose");
            }
        }
    }
}
