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
#[derive(Debug, Default)]
pub struct DueTimes {
    due: Vec<Option<Instant>>,
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
}

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
}
