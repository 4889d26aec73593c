//! The `relay` room: every message a member sends goes to every other member, on the channel
//! it came on. The SmartFoxServer and Photon model, and what the load scenarios measure.

use bytes::Bytes;

use crate::room::{PlayerId, Room, RoomContext};

/// Forwards each message to all other connected members; the message bytes are shared, not
/// copied, across recipients.
#[derive(Debug, Clone, Copy, Default)]
pub struct RelayRoom {
    tick_rate_hz: u32,
}

impl RelayRoom {
    /// A relay room ticking at `tick_rate_hz` (ticks only pace its output).
    pub fn new(tick_rate_hz: u32) -> Self {
        Self { tick_rate_hz }
    }
}

impl Room for RelayRoom {
    fn tick_rate_hz(&self) -> u32 {
        if self.tick_rate_hz == 0 {
            60
        } else {
            self.tick_rate_hz
        }
    }

    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, channel: u8, message: Bytes) {
        ctx.broadcast_except(from, channel, message);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::host::RoomHost;
    use crate::room::Command;
    use crate::shard::RoomId;

    #[test]
    fn a_message_goes_to_every_other_member_on_its_channel() {
        let now = Instant::now();
        let mut host = RoomHost::new(RoomId(1), Box::new(RelayRoom::default()), now, 16).unwrap();
        for id in 1..=4 {
            host.join(now, PlayerId(id), format!("p{id}")).unwrap();
        }
        host.message(now, PlayerId(2), 1, Bytes::from_static(b"move"));
        let commands: Vec<_> = host.take_commands().collect();
        assert_eq!(
            commands,
            [Command::Broadcast {
                channel: 1,
                message: Bytes::from_static(b"move"),
                except: Some(PlayerId(2)),
            }]
        );
    }
}
