//! Round-trip time and packet loss estimates, and the resend timeout derived from them.
//!
//! RTT follows RFC 6298: the first sample `r` sets `srtt = r`, `rttvar = r / 2`; later ones
//! update `rttvar = 3/4 rttvar + 1/4 |srtt - r|`, then `srtt = 7/8 srtt + 1/8 r`. The resend
//! timeout is `srtt + max(4 rttvar, 10 ms)`, clamped to 10 ms..=1 s: the floor keeps a
//! perfectly steady link from resending at the very moment the ack is due, and the ceiling
//! keeps a game message from waiting more than a second after a loss (RFC 6298's 1 s minimum
//! suits bulk transfer, not a 60 Hz game).

use std::time::Duration;

use super::acks::Bits256;

/// Shortest resend timeout.
pub const MIN_RESEND_TIMEOUT: Duration = Duration::from_millis(10);
/// Longest resend timeout.
pub const MAX_RESEND_TIMEOUT: Duration = Duration::from_secs(1);
/// Smoothed RTT assumed before the first sample.
pub const INITIAL_RTT: Duration = Duration::from_millis(100);
/// Least headroom above `srtt` in the resend timeout (RFC 6298's clock granularity `G`).
const RESEND_MARGIN: Duration = Duration::from_millis(10);

/// Smoothed round-trip time and its variance.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RttEstimator {
    smoothed: Duration,
    variance: Duration,
    sampled: bool,
    /// Derived from the two above at each sample: every packet written reads it.
    resend_timeout: Duration,
}

impl Default for RttEstimator {
    fn default() -> Self {
        // Until a sample: 100 ms ± 50 ms, so a first resend after 300 ms.
        Self::with(INITIAL_RTT, INITIAL_RTT / 2, false)
    }
}

impl RttEstimator {
    fn with(smoothed: Duration, variance: Duration, sampled: bool) -> Self {
        Self {
            smoothed,
            variance,
            sampled,
            resend_timeout: (smoothed + (variance * 4).max(RESEND_MARGIN))
                .clamp(MIN_RESEND_TIMEOUT, MAX_RESEND_TIMEOUT),
        }
    }

    pub(crate) fn sample(&mut self, rtt: Duration) {
        *self = if self.sampled {
            let deviation = self.smoothed.abs_diff(rtt);
            Self::with(
                (self.smoothed * 7 + rtt) / 8,
                (self.variance * 3 + deviation) / 4,
                true,
            )
        } else {
            Self::with(rtt, rtt / 2, true)
        };
    }

    pub(crate) fn smoothed(&self) -> Duration {
        self.smoothed
    }

    pub(crate) fn variance(&self) -> Duration {
        self.variance
    }

    /// How long an unacked reliable unit waits before it is sent again.
    pub(crate) fn resend_timeout(&self) -> Duration {
        self.resend_timeout
    }

    /// How long an unacked packet waits before it counts as lost in the loss estimate: two
    /// resend timeouts plus the longest the peer may hold an ack, so late acks (jitter, the
    /// peer's tick, a delayed ack) are not miscounted as losses.
    pub(crate) fn loss_delay(&self) -> Duration {
        self.resend_timeout() * 2 + super::MAX_ACK_DELAY
    }
}

/// Packets in the loss estimate's window.
pub const LOSS_WINDOW: u32 = 256;

/// Fraction of the last [`LOSS_WINDOW`] decided ack-eliciting packets that were lost.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LossEstimator {
    /// Bit set: that packet was lost. A ring indexed by `head`.
    outcomes: Bits256,
    head: u32,
    len: u32,
    lost: u32,
}

impl LossEstimator {
    pub(crate) fn record(&mut self, lost: bool) {
        if self.len == LOSS_WINDOW {
            if self.outcomes.get(self.head) {
                self.lost -= 1;
            }
        } else {
            self.len += 1;
        }
        self.outcomes.set(self.head, lost);
        if lost {
            self.lost += 1;
        }
        self.head = (self.head + 1) % LOSS_WINDOW;
    }

    /// 0.0 until a packet is decided.
    pub(crate) fn loss(&self) -> f32 {
        if self.len == 0 {
            0.0
        } else {
            self.lost as f32 / self.len as f32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn follows_rfc_6298() {
        let mut rtt = RttEstimator::default();
        assert_eq!(
            rtt.resend_timeout(),
            ms(300),
            "before any sample: 100 ms + 4 × 50 ms"
        );
        rtt.sample(ms(200));
        assert_eq!((rtt.smoothed(), rtt.variance()), (ms(200), ms(100)));
        rtt.sample(ms(120));
        // rttvar = (3 × 100 + |200 − 120|) / 4 = 95; srtt = (7 × 200 + 120) / 8 = 190.
        assert_eq!((rtt.smoothed(), rtt.variance()), (ms(190), ms(95)));
        assert_eq!(rtt.resend_timeout(), ms(570));
    }

    #[test]
    fn resend_timeout_is_clamped_and_floored() {
        let mut rtt = RttEstimator::default();
        rtt.sample(Duration::ZERO);
        assert_eq!(rtt.resend_timeout(), MIN_RESEND_TIMEOUT);
        let mut rtt = RttEstimator::default();
        for _ in 0..100 {
            rtt.sample(ms(50));
        }
        assert!(rtt.variance() < ms(1));
        assert_eq!(
            rtt.resend_timeout(),
            ms(60),
            "steady 50 ms: srtt + the 10 ms margin"
        );
        rtt.sample(ms(5000));
        assert_eq!(rtt.resend_timeout(), MAX_RESEND_TIMEOUT);
    }

    #[test]
    fn loss_is_the_fraction_lost_over_the_window() {
        let mut loss = LossEstimator::default();
        assert_eq!(loss.loss(), 0.0);
        for i in 0..1000 {
            loss.record(i % 4 == 0);
        }
        assert_eq!(loss.loss(), 0.25);
        for _ in 0..LOSS_WINDOW {
            loss.record(false);
        }
        assert_eq!(loss.loss(), 0.0, "old losses must leave the window");
    }
}
