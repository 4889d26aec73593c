//! The server's connection deadlines: a binary min-heap with one entry per connection slot
//! and each slot's position in it, so a deadline that moves is sifted in place.
//!
//! Why not a heap with lazy invalidation: a connection's deadline moves later with almost
//! every packet (its keepalive follows its last send), and a lazy heap either grows an entry
//! per packet or wakes for deadlines that moved on (one false wake per connection per
//! keepalive interval). Here [`Deadlines::earliest`] is exact, memory is one entry per slot,
//! and an unchanged deadline costs one comparison.

use std::time::Instant;

/// `position` of a slot with no deadline.
const ABSENT: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    /// `(deadline, slot)`, a min-heap on the deadline.
    heap: Vec<(Instant, u32)>,
    /// Index in `heap` of each slot's entry, or [`ABSENT`].
    position: Vec<u32>,
}

impl Deadlines {
    /// The earliest deadline and its slot.
    pub(crate) fn earliest(&self) -> Option<(Instant, u32)> {
        self.heap.first().copied()
    }

    /// Sets `slot`'s deadline, adding the slot if it had none.
    pub(crate) fn set(&mut self, slot: u32, at: Instant) {
        let index = slot as usize;
        if index >= self.position.len() {
            self.position.resize(index + 1, ABSENT);
        }
        match self.position[index] {
            ABSENT => {
                self.heap.push((at, slot));
                self.position[index] = (self.heap.len() - 1) as u32;
                self.sift_up(self.heap.len() - 1);
            }
            at_index => {
                let at_index = at_index as usize;
                let old = self.heap[at_index].0;
                if at == old {
                    return;
                }
                self.heap[at_index].0 = at;
                if at < old {
                    self.sift_up(at_index);
                } else {
                    self.sift_down(at_index);
                }
            }
        }
    }

    /// Forgets `slot`'s deadline, if it has one.
    pub(crate) fn remove(&mut self, slot: u32) {
        let Some(&at_index) = self.position.get(slot as usize) else {
            return;
        };
        if at_index == ABSENT {
            return;
        }
        self.position[slot as usize] = ABSENT;
        let at_index = at_index as usize;
        let last = self.heap.len() - 1;
        if at_index == last {
            self.heap.pop();
            return;
        }
        self.heap.swap(at_index, last);
        self.heap.pop();
        self.position[self.heap[at_index].1 as usize] = at_index as u32;
        // The entry moved in from the end may belong above or below its new place.
        self.sift_up(at_index);
        self.sift_down(at_index);
    }

    /// Entries, for tests.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// `slot`'s deadline, for tests.
    #[cfg(test)]
    pub(crate) fn get(&self, slot: u32) -> Option<Instant> {
        let index = *self.position.get(slot as usize)?;
        (index != ABSENT).then(|| self.heap[index as usize].0)
    }

    fn sift_up(&mut self, mut index: usize) {
        let entry = self.heap[index];
        while index > 0 {
            let parent = (index - 1) / 2;
            if self.heap[parent].0 <= entry.0 {
                break;
            }
            self.heap[index] = self.heap[parent];
            self.position[self.heap[index].1 as usize] = index as u32;
            index = parent;
        }
        self.heap[index] = entry;
        self.position[entry.1 as usize] = index as u32;
    }

    fn sift_down(&mut self, mut index: usize) {
        let entry = self.heap[index];
        let len = self.heap.len();
        loop {
            let left = 2 * index + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.heap[right].0 < self.heap[left].0 {
                right
            } else {
                left
            };
            if entry.0 <= self.heap[child].0 {
                break;
            }
            self.heap[index] = self.heap[child];
            self.position[self.heap[index].1 as usize] = index as u32;
            index = child;
        }
        self.heap[index] = entry;
        self.position[entry.1 as usize] = index as u32;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    use super::*;

    /// Random sets and removes, checked against a plain map after every step.
    #[test]
    fn earliest_matches_a_scan_of_every_deadline() {
        let start = Instant::now();
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut deadlines = Deadlines::default();
        let mut model: Vec<Option<Instant>> = vec![None; 64];
        for step in 0..20_000 {
            let slot = rng.random_range(0..64u32);
            if rng.random_bool(0.2) {
                deadlines.remove(slot);
                model[slot as usize] = None;
            } else {
                let at = start + Duration::from_millis(rng.random_range(0..1000));
                deadlines.set(slot, at);
                model[slot as usize] = Some(at);
            }
            let expected = model.iter().flatten().min().copied();
            assert_eq!(
                deadlines.earliest().map(|(at, _)| at),
                expected,
                "step {step}: the heap's earliest deadline differs from the scan's"
            );
            if let Some((at, slot)) = deadlines.earliest() {
                assert_eq!(
                    model[slot as usize],
                    Some(at),
                    "step {step}: wrong slot on top"
                );
            }
            assert_eq!(deadlines.len(), model.iter().flatten().count());
        }
    }

    #[test]
    fn removing_an_absent_or_unknown_slot_does_nothing() {
        let now = Instant::now();
        let mut deadlines = Deadlines::default();
        deadlines.remove(7);
        deadlines.set(2, now);
        deadlines.remove(5);
        deadlines.remove(2);
        deadlines.remove(2);
        assert_eq!(deadlines.earliest(), None);
    }
}
