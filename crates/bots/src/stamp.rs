//! What every bot message starts with: who sent it, its sequence number, and when it was
//! *scheduled* to be sent, so a receiver measures latency open-loop.

/// Bytes of a [`Stamp`] on the wire: bot id (u32), sequence (u32), scheduled time (u64
/// nanoseconds since the run's epoch), little-endian.
pub const STAMP_BYTES: usize = 16;

/// The head of every bot message. All bots of a run share one process clock (the run's
/// epoch), so a receiver subtracts `scheduled_ns` from its own reading of that clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The sending bot's index in the run.
    pub bot: u32,
    /// The sender's message number, from 1.
    pub seq: u32,
    /// When the sender was scheduled to send it, in nanoseconds since the epoch.
    pub scheduled_ns: u64,
}

impl Stamp {
    /// Appends the stamp's [`STAMP_BYTES`] to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bot.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.scheduled_ns.to_le_bytes());
    }

    /// The stamp at the head of `message`, or `None` when it is too short to carry one.
    pub fn read(message: &[u8]) -> Option<Self> {
        let head: &[u8; STAMP_BYTES] = message.get(..STAMP_BYTES)?.try_into().ok()?;
        let (bot, rest) = head.split_at(4);
        let (seq, scheduled) = rest.split_at(4);
        Some(Self {
            bot: u32::from_le_bytes(bot.try_into().ok()?),
            seq: u32::from_le_bytes(seq.try_into().ok()?),
            scheduled_ns: u64::from_le_bytes(scheduled.try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_what_was_written_and_short_messages_carry_none() {
        let stamp = Stamp {
            bot: 2207,
            seq: 601,
            scheduled_ns: 20_000_000_123,
        };
        let mut bytes = Vec::new();
        stamp.write(&mut bytes);
        bytes.extend_from_slice(b"hello there");
        assert_eq!(bytes.len(), STAMP_BYTES + 11);
        assert_eq!(Stamp::read(&bytes), Some(stamp));
        assert_eq!(Stamp::read(&bytes[..STAMP_BYTES - 1]), None);
    }
}
