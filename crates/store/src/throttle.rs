//! How the store keeps a failing database from flooding the log: at most one line per
//! interval for a kind of failure, the next line saying how many were left out.

use std::time::Duration;

use tokio::time::Instant;

/// Lets through one log line per [`Throttle::INTERVAL`] and counts the rest.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    last: Option<Instant>,
    skipped: u64,
}

impl Throttle {
    /// One line a minute: a database down for an hour is 60 lines at most, and an operator
    /// still hears of a new failure within a minute of the last one.
    pub(crate) const INTERVAL: Duration = Duration::from_secs(60);

    /// `Some(lines left out since the last one)` if a line may be logged now; otherwise
    /// counts this one as left out.
    pub(crate) fn admit(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < Self::INTERVAL)
        {
            self.skipped += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.skipped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_next_counts_the_rest() {
        let mut throttle = Throttle::default();
        let start = Instant::now();
        assert_eq!(throttle.admit(start), Some(0), "the first line goes out");
        assert_eq!(throttle.admit(start + Duration::from_secs(1)), None);
        assert_eq!(throttle.admit(start + Duration::from_secs(59)), None);
        assert_eq!(
            throttle.admit(start + Throttle::INTERVAL),
            Some(2),
            "a minute on, a line that says two were left out"
        );
        assert_eq!(throttle.admit(start + Throttle::INTERVAL), None);
    }
}
