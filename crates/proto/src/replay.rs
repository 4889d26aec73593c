//! Replay protection: refuses an encrypted packet whose sequence was already accepted or is
//! too old to tell.

/// Sequences remembered behind the newest one.
const WINDOW: usize = 256;
/// Reserved: never accepted as a sequence.
const RESERVED: u64 = u64::MAX;

/// The last [`WINDOW`] packet sequences of one direction of one connection, as a bitmap
/// relative to the newest accepted sequence: bit `i` set means `newest - i` was accepted.
///
/// 40 bytes instead of the 2 KiB a table of sequences takes (the table was 40 % of a
/// connection's memory; `--example connection_memory`), with the same answers. Works
/// across the whole `u64` range without overflow, including right below `u64::MAX`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplayWindow {
    newest: Option<u64>,
    /// Word 0 holds bits 0–63 (the newest and the 63 before it).
    seen: [u64; WINDOW / 64],
}

impl ReplayWindow {
    /// Whether a packet with this sequence must be refused: seen before, older than the
    /// window, or the reserved `u64::MAX`. Call [`accept`](Self::accept) only after the
    /// packet authenticated.
    pub(crate) fn is_replay(&self, sequence: u64) -> bool {
        if sequence == RESERVED {
            return true;
        }
        let Some(newest) = self.newest else {
            return false;
        };
        if sequence > newest {
            return false;
        }
        let behind = newest - sequence;
        behind >= WINDOW as u64 || self.is_set(behind as usize)
    }

    /// Records an authenticated packet's sequence.
    pub(crate) fn accept(&mut self, sequence: u64) {
        debug_assert!(!self.is_replay(sequence));
        match self.newest {
            Some(newest) if sequence <= newest => self.set((newest - sequence) as usize),
            Some(newest) => {
                self.shift(sequence - newest);
                self.newest = Some(sequence);
                self.set(0);
            }
            None => {
                self.newest = Some(sequence);
                self.set(0);
            }
        }
    }

    fn is_set(&self, behind: usize) -> bool {
        self.seen[behind / 64] & 1 << (behind % 64) != 0
    }

    fn set(&mut self, behind: usize) {
        self.seen[behind / 64] |= 1 << (behind % 64);
    }

    /// Ages every recorded sequence by `by` positions; those pushed past the window fall off.
    fn shift(&mut self, by: u64) {
        if by >= WINDOW as u64 {
            self.seen = [0; WINDOW / 64];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        for index in (0..self.seen.len()).rev() {
            let shifted = index.checked_sub(words).map_or(0, |source| {
                let carry = match source.checked_sub(1) {
                    Some(lower) if bits > 0 => self.seen[lower] >> (64 - bits),
                    _ => 0,
                };
                self.seen[source] << bits | carry
            });
            self.seen[index] = shifted;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sequence_is_accepted_once() {
        let mut window = ReplayWindow::default();
        for sequence in [0, 1, 5, 3, 2, 1000] {
            assert!(!window.is_replay(sequence), "{sequence} is new");
            window.accept(sequence);
            assert!(window.is_replay(sequence), "{sequence} is now a replay");
        }
        assert!(!window.is_replay(999), "inside the window and unseen");
    }

    #[test]
    fn sequences_older_than_the_window_are_refused() {
        let mut window = ReplayWindow::default();
        window.accept(1000);
        assert!(
            window.is_replay(1000 - WINDOW as u64),
            "exactly one window behind"
        );
        assert!(!window.is_replay(1000 - WINDOW as u64 + 1));
        assert!(window.is_replay(3));
    }

    #[test]
    fn a_sequence_a_whole_window_behind_falls_off() {
        let mut window = ReplayWindow::default();
        window.accept(7);
        assert!(!window.is_replay(7 + WINDOW as u64));
        window.accept(7 + WINDOW as u64);
        assert!(window.is_replay(7));
    }

    #[test]
    fn the_top_of_the_range_works_without_overflow() {
        let mut window = ReplayWindow::default();
        let top = u64::MAX - 1;
        for sequence in [top - 300, top - 3, top, top - 1] {
            assert!(!window.is_replay(sequence), "{sequence}");
            window.accept(sequence);
        }
        assert!(window.is_replay(top));
        assert!(
            window.is_replay(top - 300),
            "now a window behind the newest"
        );
        assert!(window.is_replay(u64::MAX), "u64::MAX is reserved");
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// The bitmap answers exactly as a set of every accepted sequence would, within the
        /// window (and refuses everything older).
        #[test]
        fn the_bitmap_matches_a_set_of_accepted_sequences(
            steps in proptest::collection::vec(
                prop_oneof![0u64..600, (u64::MAX - 600)..u64::MAX],
                1..300,
            ),
        ) {
            let mut window = ReplayWindow::default();
            let mut accepted = BTreeSet::new();
            for sequence in steps {
                let newest = accepted.last().copied();
                let too_old = newest.is_some_and(|newest: u64| newest >= sequence && newest - sequence >= WINDOW as u64);
                let expected = sequence == RESERVED || too_old || accepted.contains(&sequence);
                prop_assert_eq!(window.is_replay(sequence), expected, "sequence {}", sequence);
                if !expected {
                    window.accept(sequence);
                    accepted.insert(sequence);
                }
            }
        }
    }
}
