//! When each bot of a group next needs its group's sweep, kept in order so a sweep visits
//! only the bots whose time has come (a walk over every bot each pass was 10 % of the UDP
//! bots' CPU at 2,500 players, and most of it with 50,000 idle ones).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Per bot (by key), its next time, and the same times in a heap. An entry of the heap
/// whose time no longer matches the bot's is stale and skipped, so a bot is filed again
/// without looking for its old entry.
#[derive(Debug, Default)]
pub(super) struct DueTimes {
    due: Vec<Option<Instant>>,
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl DueTimes {
    /// Makes room for bot `key` (keys are given in order, from 0), with no time yet.
    pub(super) fn add(&mut self, key: usize) {
        if self.due.len() <= key {
            self.due.resize(key + 1, None);
        }
    }

    /// Files bot `key`'s next time (its earlier entry, if any, goes stale).
    pub(super) fn set(&mut self, key: usize, due: Option<Instant>) {
        if self.due[key] == due {
            return;
        }
        self.due[key] = due;
        if let Some(at) = due {
            self.heap.push(Reverse((at, key)));
        }
    }

    /// Takes every bot whose time is at or before `now` into `expired` (cleared first); each
    /// has no time until it is filed again.
    pub(super) fn take_expired(&mut self, now: Instant, expired: &mut Vec<usize>) {
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
pub(super) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
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
    fn a_refiled_bot_expires_once_at_its_new_time() {
        let now = Instant::now();
        let mut times = DueTimes::default();
        times.add(0);
        times.add(1);
        times.set(0, Some(now));
        times.set(0, Some(now + Duration::from_secs(1)));
        times.set(1, Some(now));
        let mut expired = Vec::new();
        times.take_expired(now, &mut expired);
        assert_eq!(expired, vec![1], "bot 0's first time went stale");
        times.take_expired(now + Duration::from_secs(2), &mut expired);
        assert_eq!(expired, vec![0]);
        times.take_expired(now + Duration::from_secs(3), &mut expired);
        assert!(
            expired.is_empty(),
            "an expired bot has no time until refiled"
        );
    }
}
