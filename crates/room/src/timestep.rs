//! Fixed-rate ticks that never drift: tick `n` is due at exactly `start + n / rate` seconds,
//! computed from the tick count in integer nanoseconds rather than by adding a rounded step.

use std::time::{Duration, Instant};

/// Lowest tick rate a room may ask for.
pub const MIN_TICK_RATE_HZ: u32 = 1;
/// Highest tick rate a room may ask for.
pub const MAX_TICK_RATE_HZ: u32 = 128;

/// A tick rate outside [`MIN_TICK_RATE_HZ`]`..=`[`MAX_TICK_RATE_HZ`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("tick rate {0} Hz outside {MIN_TICK_RATE_HZ}..={MAX_TICK_RATE_HZ}")]
pub struct TickRateError(pub u32);

/// What [`FixedTimestep::advance`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Due {
    /// Ticks to run now, oldest first.
    pub ticks: u32,
    /// Ticks abandoned because the room fell further behind than it may catch up.
    pub skipped: u64,
}

/// The schedule of one room's ticks.
///
/// ```
/// use std::time::{Duration, Instant};
/// use tickwire_room::timestep::FixedTimestep;
///
/// let start = Instant::now();
/// let mut steps = FixedTimestep::new(start, 60).unwrap();
/// assert_eq!(steps.advance(start).ticks, 1); // tick 0 is due at the start
/// assert_eq!(steps.advance(start + Duration::from_millis(50)).ticks, 3); // ticks 1..=3
/// ```
#[derive(Debug, Clone)]
pub struct FixedTimestep {
    start: Instant,
    rate_hz: u32,
    /// Index of the next tick to run.
    next_tick: u64,
    max_catch_up: u32,
}

impl FixedTimestep {
    /// Ticks at `rate_hz` from `start`; catches up at most 5 ticks at once (see
    /// [`set_max_catch_up`](Self::set_max_catch_up)).
    pub fn new(start: Instant, rate_hz: u32) -> Result<Self, TickRateError> {
        if !(MIN_TICK_RATE_HZ..=MAX_TICK_RATE_HZ).contains(&rate_hz) {
            return Err(TickRateError(rate_hz));
        }
        Ok(Self {
            start,
            rate_hz,
            next_tick: 0,
            max_catch_up: 5,
        })
    }

    /// How many overdue ticks run back to back before the rest are skipped. Default 5: a
    /// room that stalled for a moment catches up smoothly, one that stalled for seconds
    /// does not replay them all and stall again.
    pub fn set_max_catch_up(&mut self, ticks: u32) {
        self.max_catch_up = ticks.max(1);
    }

    /// Ticks per second.
    pub fn rate_hz(&self) -> u32 {
        self.rate_hz
    }

    /// The simulated time one tick advances.
    pub fn step(&self) -> Duration {
        Duration::from_nanos(1_000_000_000 / u64::from(self.rate_hz))
    }

    /// Index of the next tick to run.
    pub fn next_tick(&self) -> u64 {
        self.next_tick
    }

    /// When tick `tick` is due: exact to the nanosecond however many ticks have passed.
    pub fn due_at(&self, tick: u64) -> Instant {
        let nanos = u128::from(tick) * 1_000_000_000 / u128::from(self.rate_hz);
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        self.start + Duration::from_nanos(nanos)
    }

    /// When the next tick is due; a driver sleeps until then.
    pub fn next_deadline(&self) -> Instant {
        self.due_at(self.next_tick)
    }

    /// Counts the ticks due by `now` and moves past them. When more than the catch-up limit
    /// are due, the oldest are skipped (and reported) so the room resumes on schedule.
    pub fn advance(&mut self, now: Instant) -> Due {
        if now < self.next_deadline() {
            return Due::default();
        }
        // The last tick due by `now`, exactly as `due_at` rounds: tick n is due once
        // floor(n × 1e9 / rate) ≤ elapsed, that is n × 1e9 < (elapsed + 1) × rate.
        let elapsed = now.duration_since(self.start).as_nanos();
        let last = u64::try_from(((elapsed + 1) * u128::from(self.rate_hz) - 1) / 1_000_000_000)
            .unwrap_or(u64::MAX);
        let overdue = last - self.next_tick + 1;
        let ticks = overdue.min(u64::from(self.max_catch_up));
        let skipped = overdue - ticks;
        self.next_tick = last + 1;
        Due {
            ticks: ticks as u32,
            skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_outside_the_range_are_refused() {
        let start = Instant::now();
        assert_eq!(FixedTimestep::new(start, 0).unwrap_err(), TickRateError(0));
        assert_eq!(
            FixedTimestep::new(start, 129).unwrap_err(),
            TickRateError(129)
        );
        assert!(FixedTimestep::new(start, 128).is_ok());
    }

    #[test]
    fn each_tick_runs_at_exactly_its_due_time() {
        // 1/60 s is 16,666,666.67 ns: due times are floored, so the product of the elapsed
        // time and the rate falls just short of a whole tick at each of them.
        for rate in [60, 30, 128, 7] {
            let start = Instant::now();
            let mut steps = FixedTimestep::new(start, rate).unwrap();
            assert_eq!(steps.advance(start).ticks, 1);
            for tick in 1..1_000 {
                let due = steps.due_at(tick);
                assert_eq!(steps.advance(due - Duration::from_nanos(1)).ticks, 0);
                assert_eq!(
                    steps.advance(due),
                    Due {
                        ticks: 1,
                        skipped: 0
                    },
                    "{rate} Hz, tick {tick}"
                );
            }
        }
    }

    #[test]
    fn sixty_hertz_does_not_drift_over_ten_hours() {
        let start = Instant::now();
        let steps = FixedTimestep::new(start, 60).unwrap();
        let ten_hours = 60 * 60 * 60 * 10;
        assert_eq!(steps.due_at(ten_hours), start + Duration::from_secs(36_000));
        // Adding the rounded step instead would be 0.4 ms off per 60,000 ticks.
        assert_eq!(steps.due_at(1), start + Duration::from_nanos(16_666_666));
        assert_eq!(steps.due_at(3), start + Duration::from_millis(50));
    }

    #[test]
    fn a_driver_polling_at_odd_times_runs_every_tick_once() {
        let start = Instant::now();
        let mut steps = FixedTimestep::new(start, 60).unwrap();
        let mut ran = 0u64;
        let mut now = start;
        // Poll every 7 ms for an hour of simulated time.
        while now < start + Duration::from_secs(3_600) {
            let due = steps.advance(now);
            assert_eq!(due.skipped, 0);
            ran += u64::from(due.ticks);
            now += Duration::from_millis(7);
        }
        assert_eq!(ran, steps.next_tick());
        assert_eq!(ran, 216_000, "60 Hz for an hour: ticks 0 to 215,999");
    }

    #[test]
    fn a_long_stall_catches_up_a_little_and_skips_the_rest() {
        let start = Instant::now();
        let mut steps = FixedTimestep::new(start, 60).unwrap();
        assert_eq!(steps.advance(start).ticks, 1);
        let due = steps.advance(start + Duration::from_secs(2));
        assert_eq!(
            due,
            Due {
                ticks: 5,
                skipped: 115
            }
        );
        assert_eq!(steps.next_tick(), 121);
        assert_eq!(
            steps.next_deadline(),
            start + Duration::from_nanos(2_016_666_666)
        );
        assert_eq!(
            steps.advance(start + Duration::from_secs(2)).ticks,
            0,
            "nothing twice"
        );
    }
}
