//! Wrap-around arithmetic for the u16 packet sequences, message ids and sequenced-channel
//! numbers.
//!
//! The u16 space is treated as a circle split in two halves: `a` is newer than `b` when it is
//! 1..=32767 steps ahead of `b`. Exactly 32768 apart is neither newer nor older, so the
//! relation is antisymmetric (Fiedler's classic form treats that case as "newer" both ways).

/// Half of the u16 circle: differences at or past this count as "behind".
pub(crate) const HALF: u16 = 0x8000;

/// True when `a` is newer than `b`: `(a - b) mod 65536` is in `1..=32767`. The one
/// definition of "newer" for every u16 sequence in tickwire: packets, sequenced channels,
/// WebTransport datagrams, the arena's input commands.
#[inline]
pub fn sequence_newer(a: u16, b: u16) -> bool {
    let ahead = a.wrapping_sub(b);
    ahead != 0 && ahead < HALF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_across_wrap_around() {
        assert!(sequence_newer(1, 0));
        assert!(sequence_newer(0, u16::MAX), "0 follows 65535");
        assert!(sequence_newer(5, 65530), "5 is 11 steps after 65530");
        assert!(!sequence_newer(65530, 5));
        assert!(!sequence_newer(7, 7), "a sequence is not newer than itself");
        assert!(sequence_newer(32767, 0));
        assert!(!sequence_newer(0, 32767));
        assert!(
            !sequence_newer(32768, 0) && !sequence_newer(0, 32768),
            "half the circle apart is ambiguous and must count as neither"
        );
    }

    #[test]
    fn newer_is_antisymmetric_everywhere() {
        for b in [0u16, 1, 100, 32767, 32768, 40000, 65535] {
            for step in [1u16, 2, 1000, 32766, 32767, 32768, 32769, 65535] {
                let a = b.wrapping_add(step);
                assert!(
                    !(sequence_newer(a, b) && sequence_newer(b, a)),
                    "{a} and {b} both newer than each other"
                );
            }
        }
    }
}
