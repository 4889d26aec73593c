//! Replay protection: refuses an encrypted packet whose sequence was already accepted or is
//! too old to tell.

/// Sequences remembered behind the newest one.
const WINDOW: usize = 256;
/// Marks an empty slot; `u64::MAX` is never accepted as a sequence, so it cannot collide.
const EMPTY: u64 = u64::MAX;

/// The last [`WINDOW`] accepted packet sequences of one direction of one connection.
///
/// Works across the whole `u64` range without overflow, including right below `u64::MAX`.
#[derive(Debug, Clone)]
pub(crate) struct ReplayWindow {
    newest: Option<u64>,
    slots: Box<[u64; WINDOW]>,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self {
            newest: None,
            slots: Box::new([EMPTY; WINDOW]),
        }
    }
}

impl ReplayWindow {
    /// Whether a packet with this sequence must be refused: seen before, older than the
    /// window, or the reserved `u64::MAX`. Call before decrypting is fine; call
    /// [`accept`](Self::accept) only after the packet authenticated.
    pub(crate) fn is_replay(&self, sequence: u64) -> bool {
        if sequence == EMPTY {
            return true;
        }
        if let Some(newest) = self.newest
            && newest >= WINDOW as u64
            && sequence <= newest - WINDOW as u64
        {
            return true;
        }
        let slot = self.slots[sequence as usize % WINDOW];
        slot != EMPTY && slot >= sequence
    }

    /// Records an authenticated packet's sequence.
    pub(crate) fn accept(&mut self, sequence: u64) {
        debug_assert!(!self.is_replay(sequence));
        if self.newest.is_none_or(|newest| sequence > newest) {
            self.newest = Some(sequence);
        }
        self.slots[sequence as usize % WINDOW] = sequence;
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
    fn a_newer_sequence_in_the_same_slot_replaces_the_old_one() {
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
