//! The `relay` room: every message a member sends goes to every other member, on the channel
//! it came on. The SmartFoxServer and Photon model, and what the load scenarios measure.
//!
//! Messages are relayed on the room's tick, not as they arrive: what the members sent
//! during one tick reaches each other member together, so it leaves in one datagram (or
//! one WebSocket frame per message, but one write) instead of one per turn of the shard.
//! A message waits at most one tick (16.7 ms at the default 60 Hz); in exchange a member
//! of a busy room costs the server one datagram a tick, whatever the others send.

use bytes::Bytes;

use crate::room::{PlayerId, Room, RoomContext};

/// Ticks per second of a relay room made without a rate (`RelayRoom::default()`, or 0).
pub const DEFAULT_TICK_RATE_HZ: u32 = 60;

/// Messages held for the next tick at most; past this the held ones go at once, so a room
/// whose members' limits allow a flood holds a bounded amount whatever they send.
const MAX_HELD: usize = 4096;

/// Forwards each message to all other connected members on its tick; the message bytes are
/// shared, not copied, across recipients.
#[derive(Debug, Clone, Default)]
pub struct RelayRoom {
    tick_rate_hz: u32,
    /// Messages received since the last tick, in arrival order.
    held: Vec<Held>,
}

#[derive(Debug, Clone)]
struct Held {
    from: PlayerId,
    channel: u8,
    message: Bytes,
}

impl RelayRoom {
    /// A relay room ticking at `tick_rate_hz` (ticks only pace its output; 0 is
    /// [`DEFAULT_TICK_RATE_HZ`]).
    pub fn new(tick_rate_hz: u32) -> Self {
        Self {
            tick_rate_hz,
            held: Vec::new(),
        }
    }

    /// Sends everything held, oldest first.
    fn relay_held(&mut self, ctx: &mut RoomContext<'_>) {
        for held in self.held.drain(..) {
            ctx.broadcast_except(held.from, held.channel, held.message);
        }
    }
}

impl Room for RelayRoom {
    fn tick_rate_hz(&self) -> u32 {
        if self.tick_rate_hz == 0 {
            DEFAULT_TICK_RATE_HZ
        } else {
            self.tick_rate_hz
        }
    }

    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, channel: u8, message: Bytes) {
        if self.held.len() >= MAX_HELD {
            self.relay_held(ctx);
        }
        self.held.push(Held {
            from,
            channel,
            message,
        });
    }

    fn tick(&mut self, ctx: &mut RoomContext<'_>) {
        self.relay_held(ctx);
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::host::RoomHost;
    use crate::room::Command;
    use crate::shard::RoomId;

    fn relay_with_members(now: Instant, members: u64) -> RoomHost {
        let mut host = RoomHost::new(RoomId(1), Box::new(RelayRoom::default()), now, 16).unwrap();
        for id in 1..=members {
            host.join(now, PlayerId(id), format!("p{id}")).unwrap();
        }
        // Tick 0, due at the start.
        host.advance(now);
        let _ = host.take_commands().count();
        host
    }

    fn broadcast(from: u64, channel: u8, message: &'static [u8]) -> Command {
        Command::Broadcast {
            channel,
            message: Bytes::from_static(message),
            except: Some(PlayerId(from)),
        }
    }

    #[test]
    fn messages_go_to_every_other_member_on_their_channel_at_the_next_tick_in_order() {
        let now = Instant::now();
        let mut host = relay_with_members(now, 4);
        host.message(now, PlayerId(2), 1, Bytes::from_static(b"move"));
        host.message(now, PlayerId(3), 0, Bytes::from_static(b"hello"));
        host.message(now, PlayerId(2), 1, Bytes::from_static(b"move again"));
        assert_eq!(host.take_commands().count(), 0, "held until the tick");

        let ms = Duration::from_millis;
        assert_eq!(host.advance(now + ms(17)).ticks, 1);
        let commands: Vec<_> = host.take_commands().collect();
        assert_eq!(
            commands,
            [
                broadcast(2, 1, b"move"),
                broadcast(3, 0, b"hello"),
                broadcast(2, 1, b"move again"),
            ]
        );
        // Nothing is sent twice.
        assert_eq!(host.advance(now + ms(34)).ticks, 1);
        assert_eq!(host.take_commands().count(), 0);
    }

    #[test]
    fn a_flood_between_ticks_is_relayed_early_rather_than_held_without_bound() {
        let now = Instant::now();
        let mut host = relay_with_members(now, 2);
        for _ in 0..MAX_HELD {
            host.message(now, PlayerId(1), 1, Bytes::from_static(b"x"));
        }
        assert_eq!(host.take_commands().count(), 0);
        host.message(now, PlayerId(1), 1, Bytes::from_static(b"y"));
        assert_eq!(
            host.take_commands().count(),
            MAX_HELD,
            "the held ones went at once"
        );
        host.advance(now + Duration::from_millis(17));
        let commands: Vec<_> = host.take_commands().collect();
        assert_eq!(commands, [broadcast(1, 1, b"y")]);
    }
}
