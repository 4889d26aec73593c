//! The server's connection deadlines: a 4-ary min-heap with one entry per connection slot
//! and each slot's position in it, so a deadline that moves is sifted in place.
//!
//! Why not a heap with lazy invalidation: a connection's deadline moves later with almost
//! every packet (its keepalive follows its last send), and a lazy heap either grows an entry
//! per packet or wakes for deadlines that moved on (one false wake per connection per
//! keepalive interval). Here [`Deadlines::earliest`] is exact, memory is one entry per slot,
//! and an unchanged deadline costs one comparison.
//!
//! Why four children and times as integers: a deadline that moves later (nearly every one)
//! sinks to the bottom, and each level is a cache miss in a crowd's heap. An entry is 16
//! bytes (nanoseconds since the heap's epoch and the slot), so a node's four children share
//! one cache line, and the heap is half as deep as a binary one: 3,000 connections in six
//! levels, not twelve.

use std::time::{Duration, Instant};

/// `position` of a slot with no deadline.
const ABSENT: u32 = u32::MAX;
/// Children per node.
const ARITY: usize = 4;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Nanoseconds from the epoch.
    at: u64,
    slot: u32,
}

#[derive(Debug)]
pub(crate) struct Deadlines {
    /// What `Entry::at` counts from; a deadline before it counts as the epoch itself (due
    /// early rather than late: the server looks, finds nothing due, and sets it again).
    epoch: Instant,
    /// A min-heap on `at`: each node at most its children `ARITY * i + 1 ..= ARITY * i + ARITY`.
    heap: Vec<Entry>,
    /// Index in `heap` of each slot's entry, or [`ABSENT`].
    position: Vec<u32>,
}

impl Deadlines {
    /// No deadlines; times are counted from `epoch`, the earliest any will be.
    pub(crate) fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            heap: Vec::new(),
            position: Vec::new(),
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.epoch);
        // `as_nanos`, without its 128-bit product: u64 nanoseconds last 584 years.
        since
            .as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(since.subsec_nanos()))
    }

    fn instant(&self, at: u64) -> Instant {
        self.epoch + Duration::from_nanos(at)
    }

    /// The earliest deadline and its slot.
    pub(crate) fn earliest(&self) -> Option<(Instant, u32)> {
        self.heap
            .first()
            .map(|entry| (self.instant(entry.at), entry.slot))
    }

    /// Sets `slot`'s deadline, adding the slot if it had none.
    pub(crate) fn set(&mut self, slot: u32, at: Instant) {
        let at = self.nanos(at);
        let index = slot as usize;
        if index >= self.position.len() {
            self.position.resize(index + 1, ABSENT);
        }
        match self.position[index] {
            ABSENT => {
                self.heap.push(Entry { at, slot });
                self.position[index] = (self.heap.len() - 1) as u32;
                self.sift_up(self.heap.len() - 1);
            }
            at_index => {
                let at_index = at_index as usize;
                let old = self.heap[at_index].at;
                if at == old {
                    return;
                }
                self.heap[at_index].at = at;
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
        self.position[self.heap[at_index].slot as usize] = at_index as u32;
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
        (index != ABSENT).then(|| self.instant(self.heap[index as usize].at))
    }

    /// Puts `entry` at `index` and notes where its slot now is.
    fn place(&mut self, index: usize, entry: Entry) {
        self.heap[index] = entry;
        self.position[entry.slot as usize] = index as u32;
    }

    fn sift_up(&mut self, mut index: usize) {
        let entry = self.heap[index];
        while index > 0 {
            let parent = (index - 1) / ARITY;
            if self.heap[parent].at <= entry.at {
                break;
            }
            self.place(index, self.heap[parent]);
            index = parent;
        }
        self.place(index, entry);
    }

    fn sift_down(&mut self, mut index: usize) {
        let entry = self.heap[index];
        let len = self.heap.len();
        loop {
            let first = ARITY * index + 1;
            if first >= len {
                break;
            }
            let mut child = first;
            for other in first + 1..(first + ARITY).min(len) {
                if self.heap[other].at < self.heap[child].at {
                    child = other;
                }
            }
            if entry.at <= self.heap[child].at {
                break;
            }
            self.place(index, self.heap[child]);
            index = child;
        }
        self.place(index, entry);
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
        let mut deadlines = Deadlines::new(start);
        // 300 slots: five levels of four children, the last one part full.
        let mut model: Vec<Option<Instant>> = vec![None; 300];
        for step in 0..20_000 {
            let slot = rng.random_range(0..300u32);
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
        let mut deadlines = Deadlines::new(now);
        deadlines.remove(7);
        deadlines.set(2, now);
        deadlines.remove(5);
        deadlines.remove(2);
        deadlines.remove(2);
        assert_eq!(deadlines.earliest(), None);
    }
}
