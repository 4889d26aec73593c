//! A room's timers: delayed and repeated calls on the room's clock (the time the runtime
//! passes in), so a game counts seconds, not ticks. The host fires them between ticks in
//! the order they fall due.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Names a room's timer; the room chooses the numbers (an enum cast is handy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(pub u32);

/// The shortest period of a repeating timer: a zero period would fire without end.
const MIN_PERIOD: Duration = Duration::from_millis(1);
/// How many periods a repeating timer may fall behind and still fire each of them (as the
/// fixed timestep runs overdue ticks); further behind, the missed ones are skipped.
const MAX_CATCH_UP: u32 = 5;

#[derive(Debug, Clone, Copy)]
struct Pending {
    due: Instant,
    /// Orders timers due at the same instant by when they were set.
    order: u64,
    period: Option<Duration>,
}

/// Pending timers by due time, and by id to cancel or reset one.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    by_due: BTreeSet<(Instant, u64, TimerId)>,
    by_id: HashMap<TimerId, Pending>,
    next_order: u64,
}

impl Timers {
    /// (Re)schedules `id` at `now + after`, repeating every `period` if given.
    pub(crate) fn set(
        &mut self,
        now: Instant,
        id: TimerId,
        after: Duration,
        period: Option<Duration>,
    ) {
        self.cancel(id);
        let period = period.map(|period| period.max(MIN_PERIOD));
        let after = period.map_or(after, |period| after.max(period));
        self.insert(id, now + after, period);
    }

    fn insert(&mut self, id: TimerId, due: Instant, period: Option<Duration>) {
        let order = self.next_order;
        self.next_order += 1;
        self.by_due.insert((due, order, id));
        self.by_id.insert(id, Pending { due, order, period });
    }

    pub(crate) fn cancel(&mut self, id: TimerId) -> bool {
        match self.by_id.remove(&id) {
            Some(pending) => self.by_due.remove(&(pending.due, pending.order, id)),
            None => false,
        }
    }

    pub(crate) fn is_pending(&self, id: TimerId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// When the earliest timer is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.by_due.first().map(|(due, ..)| *due)
    }

    /// The earliest timer due by `now`, and when it was due; a repeating one is scheduled
    /// again a period later, or a period after `now` if it fell more than
    /// [`MAX_CATCH_UP`] periods behind.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, TimerId)> {
        let &(due, order, id) = self.by_due.first().filter(|(due, ..)| *due <= now)?;
        self.by_due.remove(&(due, order, id));
        let pending = self.by_id.remove(&id)?;
        if let Some(period) = pending.period {
            let mut next = due + period;
            if now.saturating_duration_since(next) > period * MAX_CATCH_UP {
                next = now + period;
            }
            self.insert(id, next, Some(period));
        }
        Some((due, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_due_order_and_repeats_far_behind_are_skipped() {
        let start = Instant::now();
        let ms = |n| Duration::from_millis(n);
        let mut timers = Timers::default();
        timers.set(start, TimerId(1), ms(30), None);
        timers.set(start, TimerId(2), ms(10), Some(ms(10)));
        timers.set(start, TimerId(3), ms(30), None);
        let mut fired = Vec::new();
        while let Some((due, id)) = timers.pop_due(start + ms(30)) {
            fired.push((due - start, id.0));
        }
        assert_eq!(
            fired,
            [
                (ms(10), 2),
                (ms(20), 2),
                (ms(30), 1),
                (ms(30), 3),
                (ms(30), 2)
            ],
            "by due time, then by when set (the repeat at 30 ms was set at 20 ms)"
        );
        // A second of silence: the repeating timer fires once, then keeps its period.
        assert_eq!(
            timers.pop_due(start + ms(1030)),
            Some((start + ms(40), TimerId(2)))
        );
        assert_eq!(timers.pop_due(start + ms(1030)), None);
        assert_eq!(timers.next_due(), Some(start + ms(1040)));
        assert!(timers.cancel(TimerId(2)));
        assert!(!timers.cancel(TimerId(2)));
        assert_eq!(timers.next_due(), None);
    }

    #[test]
    fn setting_a_pending_timer_reschedules_it() {
        let start = Instant::now();
        let mut timers = Timers::default();
        timers.set(start, TimerId(7), Duration::from_secs(1), None);
        timers.set(start, TimerId(7), Duration::from_secs(5), None);
        assert_eq!(timers.pop_due(start + Duration::from_secs(2)), None);
        assert!(timers.is_pending(TimerId(7)));
        assert_eq!(
            timers.pop_due(start + Duration::from_secs(5)),
            Some((start + Duration::from_secs(5), TimerId(7)))
        );
        assert!(!timers.is_pending(TimerId(7)));
    }
}
