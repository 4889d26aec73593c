//! Splitting large reliable messages into fragments and putting them back together.
//!
//! A message of `total_len` bytes in fragments of `fragment_size` has
//! `ceil(total_len / fragment_size)` fragments; fragment `i` holds bytes
//! `i * fragment_size .. min((i + 1) * fragment_size, total_len)`. The receiver allocates the
//! whole message once, on the first fragment it sees, after the caller has checked
//! `total_len` against `max_message_size` and the connection's reassembly budget.

use std::ops::Range;

use bytes::Bytes;

/// Number of fragments of a message.
#[inline]
pub(crate) fn fragment_count(total_len: usize, fragment_size: usize) -> usize {
    total_len.div_ceil(fragment_size)
}

/// Bytes of the message that fragment `index` holds. Empty when `index` is past the end.
#[inline]
pub(crate) fn fragment_range(total_len: usize, fragment_size: usize, index: u16) -> Range<usize> {
    let start = usize::from(index)
        .saturating_mul(fragment_size)
        .min(total_len);
    start..start.saturating_add(fragment_size).min(total_len)
}

/// One message being reassembled.
#[derive(Debug)]
pub(crate) struct Reassembly {
    data: Vec<u8>,
    fragment_size: u16,
    /// Bit `i` set: fragment `i` arrived.
    received: Vec<u64>,
    missing: usize,
}

impl Reassembly {
    /// Starts a message. The caller has validated both values (the frame reader checks the
    /// fragment size and count; the receiver checks `total_len` against its bounds) because
    /// this allocates `total_len` bytes.
    pub(crate) fn new(total_len: u32, fragment_size: u16) -> Self {
        let count = fragment_count(total_len as usize, usize::from(fragment_size));
        Self {
            data: vec![0; total_len as usize],
            fragment_size,
            received: vec![0; count.div_ceil(64)],
            missing: count,
        }
    }

    /// True when a fragment with these values belongs to this message.
    pub(crate) fn matches(&self, total_len: u32, fragment_size: u16) -> bool {
        self.data.len() == total_len as usize && self.fragment_size == fragment_size
    }

    /// Stores fragment `index`; a repeat is ignored. Returns true once every fragment is in.
    /// A fragment whose length disagrees with its slot is ignored (the reader computes the
    /// length from the same values, so this only guards against misuse).
    pub(crate) fn insert(&mut self, index: u16, bytes: &[u8]) -> bool {
        let range = fragment_range(self.data.len(), usize::from(self.fragment_size), index);
        let word = usize::from(index / 64);
        let bit = 1u64 << (index % 64);
        let (Some(seen), Some(slot)) = (self.received.get_mut(word), self.data.get_mut(range))
        else {
            return self.missing == 0;
        };
        if *seen & bit == 0 && slot.len() == bytes.len() && !slot.is_empty() {
            slot.copy_from_slice(bytes);
            *seen |= bit;
            self.missing -= 1;
        }
        self.missing == 0
    }

    /// The reassembled message, without copying.
    pub(crate) fn into_bytes(self) -> Bytes {
        Bytes::from(self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_message_exactly_once() {
        for (total, size) in [(1usize, 64usize), (64, 64), (65, 64), (200 * 1024, 1130)] {
            let count = fragment_count(total, size);
            let mut next = 0;
            for index in 0..count {
                let range = fragment_range(total, size, index as u16);
                assert_eq!(
                    range.start, next,
                    "fragment {index} of {total}/{size} leaves a gap"
                );
                assert!(
                    !range.is_empty(),
                    "fragment {index} of {total}/{size} is empty"
                );
                next = range.end;
            }
            assert_eq!(next, total, "fragments of {total}/{size} stop short");
            assert!(fragment_range(total, size, count as u16).is_empty());
        }
    }

    #[test]
    fn reassembles_out_of_order_and_ignores_repeats() {
        let message: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let mut reassembly = Reassembly::new(1000, 64);
        assert!(reassembly.matches(1000, 64) && !reassembly.matches(1000, 65));
        let count = fragment_count(1000, 64);
        let order: Vec<u16> = (0..count as u16).rev().collect();
        for (n, &index) in order.iter().enumerate() {
            let range = fragment_range(1000, 64, index);
            let done = reassembly.insert(index, &message[range.clone()]);
            // Repeating a fragment, or handing it the wrong length, changes nothing.
            reassembly.insert(index, &[0; 64][..range.len()]);
            reassembly.insert(index, &[1; 3]);
            assert_eq!(
                done,
                n + 1 == count,
                "completion after {} of {count}",
                n + 1
            );
        }
        assert_eq!(reassembly.into_bytes(), Bytes::from(message));
    }
}
