//! Counting and timing deliveries: what was expected, what arrived, how late.
//!
//! Pure bookkeeping, no clock and no socket: the engine and the tests feed it times in
//! nanoseconds since the run's epoch.

use hdrhistogram::Histogram;
use serde::Serialize;

/// The measured part of a run: messages *scheduled* in `[start_ns, end_ns)` are counted,
/// whenever they arrive (the engine keeps receiving for a drain period after `end_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First scheduled time counted, ns since the epoch.
    pub start_ns: u64,
    /// First scheduled time no longer counted.
    pub end_ns: u64,
}

impl Window {
    /// Whether a message scheduled at `scheduled_ns` is counted.
    pub fn contains(&self, scheduled_ns: u64) -> bool {
        (self.start_ns..self.end_ns).contains(&scheduled_ns)
    }
}

/// What a receiver has seen of one sender's sequence numbers: the highest, and which of the
/// 64 below it arrived. 12 bytes, one per (receiver, room member).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqWindow {
    highest: u32,
    /// Bit `i` set: `highest - 1 - i` arrived.
    below: u64,
}

/// How a sequence number compares with those seen before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Higher than any before: in order (gaps before it are losses or still to come).
    InOrder,
    /// New, but after a higher one: reordered.
    Reordered,
    /// Seen before.
    Duplicate,
    /// More than 64 below the highest: cannot tell, counted as reordered.
    TooOld,
}

impl SeqWindow {
    /// Records `seq` (from 1) and says how it compares.
    pub fn observe(&mut self, seq: u32) -> Seen {
        if seq > self.highest {
            let shift = seq - self.highest;
            self.below = if shift >= 64 {
                0
            } else {
                (self.below << shift) | (1 << (shift - 1))
            };
            // The old highest becomes bit shift - 1; when `highest` was 0 (nothing seen)
            // that bit stands for sequence 0, which is never sent.
            self.highest = seq;
            return Seen::InOrder;
        }
        if seq == self.highest {
            return Seen::Duplicate;
        }
        let back = self.highest - seq - 1;
        if back >= 64 {
            return Seen::TooOld;
        }
        let bit = 1u64 << back;
        if self.below & bit != 0 {
            Seen::Duplicate
        } else {
            self.below |= bit;
            Seen::Reordered
        }
    }
}

/// Highest latency recorded, in microseconds (a minute); later arrivals saturate.
const MAX_LATENCY_US: u64 = 60_000_000;

/// Deliveries of the messages scheduled in a [`Window`]: counts and a latency histogram
/// (microseconds, 3 significant digits). One per bot group; merged at the end.
#[derive(Debug, Clone)]
pub struct Tally {
    window: Window,
    sent: u64,
    expected: u64,
    delivered: u64,
    duplicates: u64,
    reordered: u64,
    latency_us: Histogram<u64>,
}

impl Tally {
    /// An empty tally over `window`.
    pub fn new(window: Window) -> Self {
        Self {
            window,
            sent: 0,
            expected: 0,
            delivered: 0,
            duplicates: 0,
            reordered: 0,
            latency_us: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
                .expect("constant bounds are valid"),
        }
    }

    /// The window counted.
    pub fn window(&self) -> Window {
        self.window
    }

    /// A message scheduled at `scheduled_ns` was sent, to arrive at `recipients` members.
    pub fn on_sent(&mut self, scheduled_ns: u64, recipients: u32) {
        if self.window.contains(scheduled_ns) {
            self.sent += 1;
            self.expected += u64::from(recipients);
        }
    }

    /// A message scheduled at `scheduled_ns` arrived at `arrived_ns`; `seen` is how its
    /// sequence number compared at this receiver. Duplicates are counted apart, never as
    /// deliveries.
    pub fn on_arrival(&mut self, scheduled_ns: u64, arrived_ns: u64, seen: Seen) {
        if !self.window.contains(scheduled_ns) {
            return;
        }
        match seen {
            Seen::Duplicate => {
                self.duplicates += 1;
                return;
            }
            Seen::Reordered | Seen::TooOld => self.reordered += 1,
            Seen::InOrder => {}
        }
        self.delivered += 1;
        let latency_us = arrived_ns.saturating_sub(scheduled_ns) / 1_000;
        self.latency_us.saturating_record(latency_us.max(1));
    }

    /// Adds `other`'s counts and latencies (same window).
    pub fn merge(&mut self, other: &Tally) {
        self.sent += other.sent;
        self.expected += other.expected;
        self.delivered += other.delivered;
        self.duplicates += other.duplicates;
        self.reordered += other.reordered;
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
    }

    /// The figures.
    pub fn summary(&self) -> Delivery {
        let ms = |quantile: f64| self.latency_us.value_at_quantile(quantile) as f64 / 1_000.0;
        Delivery {
            sent: self.sent,
            expected: self.expected,
            delivered: self.delivered,
            lost: self.expected.saturating_sub(self.delivered),
            duplicates: self.duplicates,
            reordered: self.reordered,
            latency_p50_ms: ms(0.50),
            latency_p90_ms: ms(0.90),
            latency_p99_ms: ms(0.99),
            latency_p999_ms: ms(0.999),
            latency_max_ms: self.latency_us.max() as f64 / 1_000.0,
        }
    }
}

/// Deliveries of the window's messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Delivery {
    /// Messages the bots sent (scheduled in the window).
    pub sent: u64,
    /// Arrivals expected: each message times the members it should reach.
    pub expected: u64,
    /// Arrivals counted (each message at each member once).
    pub delivered: u64,
    /// `expected - delivered`.
    pub lost: u64,
    /// Arrivals of a message a member already had (not counted as delivered).
    pub duplicates: u64,
    /// Arrivals after a later message from the same sender (counted as delivered).
    pub reordered: u64,
    /// Latency from the scheduled send to arrival, median.
    pub latency_p50_ms: f64,
    /// 90th percentile.
    pub latency_p90_ms: f64,
    /// 99th percentile.
    pub latency_p99_ms: f64,
    /// 99.9th percentile.
    pub latency_p999_ms: f64,
    /// Highest.
    pub latency_max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_window_tells_in_order_reordered_and_duplicate_apart() {
        let mut window = SeqWindow::default();
        assert_eq!(window.observe(1), Seen::InOrder);
        assert_eq!(window.observe(3), Seen::InOrder);
        assert_eq!(window.observe(2), Seen::Reordered);
        assert_eq!(window.observe(2), Seen::Duplicate);
        assert_eq!(window.observe(3), Seen::Duplicate);
        assert_eq!(window.observe(1), Seen::Duplicate);
        assert_eq!(window.observe(100), Seen::InOrder);
        assert_eq!(window.observe(37), Seen::Reordered);
        assert_eq!(window.observe(36), Seen::Reordered);
        assert_eq!(window.observe(35), Seen::TooOld);
    }

    #[test]
    fn only_messages_scheduled_in_the_window_count() {
        let mut tally = Tally::new(Window {
            start_ns: 1_000,
            end_ns: 2_000,
        });
        tally.on_sent(999, 15);
        tally.on_sent(1_000, 15);
        tally.on_sent(2_000, 15);
        tally.on_arrival(999, 5_000, Seen::InOrder);
        tally.on_arrival(1_000, 3_001_000, Seen::InOrder);
        tally.on_arrival(1_000, 3_001_000, Seen::Duplicate);
        let summary = tally.summary();
        assert_eq!((summary.sent, summary.expected), (1, 15));
        assert_eq!((summary.delivered, summary.lost), (1, 14));
        assert_eq!(summary.duplicates, 1);
        assert!((summary.latency_max_ms - 3.0).abs() < 0.01, "{summary:?}");
    }
}
