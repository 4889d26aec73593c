//! When each of many connections (by key) next needs looking at, kept in order so a pass
//! visits only those whose time has come. The load tool's groups of bots file each bot
//! here (a walk over every bot each pass was 10 % of the UDP bots' CPU at 2,500 players),
//! and the WebTransport shard files each session's QUIC timer (a `BTreeSet` whose entry
//! was removed and inserted again after nearly every packet before).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Per key, the time it is filed under, and the same times in a heap. A key whose next
/// time moves later keeps its earlier entry: it is woken early, finds nothing due and is
/// filed again then (a QUIC connection's timer moves later with every packet, and filing
/// each move was a heap push per packet). A key whose time moves earlier is filed again;
/// its later entry no longer matches and is skipped when it comes up.
///
/// Stale entries are dropped in one pass once they outnumber the keys
/// ([`COMPACT_AT`]). A stale entry far ahead (a QUIC session's idle timeout, seconds
/// off, filed whenever nothing nearer was due, then overtaken by the next packet's loss
/// timer) otherwise stays in the heap until its time, and every push and pop pays for
/// it: with 1,000 WebTransport sessions `take_expired` was 3.0 % of the server's CPU
/// before this, 0.9 % after.
#[derive(Debug, Default)]
pub struct DueTimes {
    due: Vec<Option<Instant>>,
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
}

/// The heap is rebuilt when it holds more than this many entries per key (plus
/// [`COMPACT_SLACK`]).
const COMPACT_AT: usize = 2;
/// Entries allowed beyond [`COMPACT_AT`] per key, so that a handful of keys is not rebuilt
/// at every push.
const COMPACT_SLACK: usize = 64;

impl DueTimes {
    /// Makes room for `key` (keys are small indexes, given in order from 0 or reused), with
    /// no time yet.
    pub fn add(&mut self, key: usize) {
        if self.due.len() <= key {
            self.due.resize(key + 1, None);
        }
    }

    /// Files `key`'s next time, unless it is filed at that time or earlier already (a
    /// caller woken before its time finds nothing due and files itself again). `None`
    /// leaves an earlier time filed: the early wake finds nothing and files `None`.
    pub fn set(&mut self, key: usize, due: Option<Instant>) {
        let Some(at) = due else {
            return;
        };
        self.add(key);
        if self.due[key].is_some_and(|filed| filed <= at) {
            return;
        }
        self.due[key] = Some(at);
        self.heap.push(Reverse((at, key)));
        if self.heap.len() > COMPACT_AT * self.due.len() + COMPACT_SLACK {
            self.compact();
        }
    }

    /// Rebuilds the heap from the filed times alone, one entry per key that has one. Runs
    /// after at least as many pushes as there are keys, so it costs O(1) a push over time.
    fn compact(&mut self) {
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        entries.clear();
        entries.extend(
            (self.due.iter().enumerate()).filter_map(|(key, due)| due.map(|at| Reverse((at, key)))),
        );
        self.heap = BinaryHeap::from(entries);
    }

    /// Entries in the heap, stale ones included.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.heap.len()
    }

    /// Files every key at `at` (the load plan's start: every bot looks at its sends).
    pub fn set_all(&mut self, at: Instant) {
        for key in 0..self.due.len() {
            self.set(key, Some(at));
        }
    }

    /// Forgets `key`'s time (its connection is gone; the key may be given again): its entry
    /// is skipped when it comes up.
    pub fn forget(&mut self, key: usize) {
        if let Some(due) = self.due.get_mut(key) {
            *due = None;
        }
    }

    /// The earliest time filed; it may belong to an entry gone stale (a key filed earlier
    /// since, or forgotten), which costs a caller an early look.
    pub fn earliest(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Takes every key whose time is at or before `now` into `expired` (cleared first); each
    /// has no time until it is filed again.
    pub fn take_expired(&mut self, now: Instant, expired: &mut Vec<usize>) {
        expired.clear();
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            if self.due[key] == Some(at) {
                self.due[key] = None;
                expired.push(key);
            }
        }
    }
}

/// The earlier of two optional times.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bot_expires_once_at_its_earliest_filed_time() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let mut times = DueTimes::default();
        times.add(0);
        times.add(1);
        times.set(0, Some(later));
        times.set(0, Some(now));
        times.set(1, Some(now));
        times.set(1, Some(later));
        let mut expired = Vec::new();
        times.take_expired(now, &mut expired);
        expired.sort_unstable();
        assert_eq!(
            expired,
            vec![0, 1],
            "moved earlier, bot 0 is woken then; moved later, bot 1 is woken early"
        );
        times.take_expired(later, &mut expired);
        assert!(
            expired.is_empty(),
            "bot 0's later entry went stale, and an expired bot has no time until refiled"
        );
    }

    #[test]
    fn stale_entries_are_dropped_and_every_key_still_expires_once_at_its_time() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let mut times = DueTimes::default();
        let keys = 100;
        for key in 0..keys {
            times.add(key);
        }
        // Each key filed far ahead (an idle timeout), then nearer again and again (a loss
        // timer moving earlier): 1,000 pushes per key, every earlier entry gone stale.
        for round in 0..1_000u64 {
            for key in 0..keys {
                times.set(key, Some(ms(1_000_000 - round * 10 - key as u64)));
            }
        }
        assert!(
            times.entries() <= COMPACT_AT * keys + COMPACT_SLACK + 1,
            "stale entries bounded: {} for {keys} keys",
            times.entries()
        );
        let mut expired = Vec::new();
        times.take_expired(ms(1_000_000 - 9_990 - 100), &mut expired);
        assert!(expired.is_empty(), "nothing is due before its time");
        times.take_expired(ms(1_000_000), &mut expired);
        expired.sort_unstable();
        assert_eq!(expired, (0..keys).collect::<Vec<_>>(), "each key once");
        times.take_expired(ms(2_000_000), &mut expired);
        assert!(expired.is_empty(), "no stale entry expires a key again");
    }
}
