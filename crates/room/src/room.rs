//! The `Room` trait: the one thing a game developer implements. A room is sans-IO: it sees
//! players, their messages and the clock, and answers through its [`RoomContext`]; it never
//! learns which transport (UDP, WebSocket, WebTransport) a player uses.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::shard::RoomId;

/// A player's identity on this server (from the connect token's client id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlayerId(pub u64);

/// A player's place in a room, from 0; kept while the player reconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Seat(pub u16);

/// A player in a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Who.
    pub id: PlayerId,
    /// Where they sit.
    pub seat: Seat,
    /// Display name.
    pub name: String,
    /// False while the player's connection is lost and their seat held for them.
    pub connected: bool,
}

/// Why a player left a room for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// The player left or disconnected deliberately.
    Left,
    /// The connection was lost and the player did not come back within the grace period.
    GraceExpired,
    /// The room or an operator removed the player.
    Kicked,
    /// The server is shutting down.
    Shutdown,
}

/// Why a room refused a player.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefused {
    /// Every seat is taken.
    #[error("room is full ({capacity} seats)")]
    Full {
        /// Seats in the room.
        capacity: u16,
    },
    /// The player is already in the room.
    #[error("player is already in the room")]
    AlreadyMember,
    /// The game refused, for its own reason.
    #[error("refused: {0}")]
    Game(String),
}

/// What a room asks the runtime to do; collected during a call and carried out after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Send a message to one player.
    Send {
        /// Recipient.
        to: PlayerId,
        /// Channel id; its kind (reliable, unreliable, sequenced) is the server's config.
        channel: u8,
        /// The message, shared rather than copied when sent to many.
        message: Bytes,
    },
    /// Send a message to every connected member, optionally but one.
    Broadcast {
        /// Channel id.
        channel: u8,
        /// The message, encoded once for all recipients.
        message: Bytes,
        /// A member not to send it to (typically the one it came from).
        except: Option<PlayerId>,
    },
    /// Remove a player from the room and disconnect them.
    Kick {
        /// Who.
        player: PlayerId,
        /// Shown to the player.
        reason: String,
    },
}

/// A room's view of the world during one call: the time, its members, and the commands it
/// issues.
pub struct RoomContext<'a> {
    room: RoomId,
    now: Instant,
    tick: u64,
    step: Duration,
    members: &'a [Member],
    commands: &'a mut Vec<Command>,
}

impl<'a> RoomContext<'a> {
    pub(crate) fn new(
        room: RoomId,
        now: Instant,
        tick: u64,
        step: Duration,
        members: &'a [Member],
        commands: &'a mut Vec<Command>,
    ) -> Self {
        Self {
            room,
            now,
            tick,
            step,
            members,
            commands,
        }
    }

    /// Which room this is (the id matchmaking and the admin API use).
    pub fn room(&self) -> RoomId {
        self.room
    }

    /// The time of this call (for a tick: when the tick was due, not when it ran).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Index of the current or next tick.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The simulated time one tick advances.
    pub fn step(&self) -> Duration {
        self.step
    }

    /// Everyone in the room, including players whose seats are held while they reconnect.
    pub fn members(&self) -> &[Member] {
        self.members
    }

    /// A member by id.
    pub fn member(&self, id: PlayerId) -> Option<&Member> {
        self.members.iter().find(|member| member.id == id)
    }

    /// Sends `message` to one player.
    pub fn send(&mut self, to: PlayerId, channel: u8, message: Bytes) {
        self.commands.push(Command::Send {
            to,
            channel,
            message,
        });
    }

    /// Sends `message` to every connected member.
    pub fn broadcast(&mut self, channel: u8, message: Bytes) {
        self.commands.push(Command::Broadcast {
            channel,
            message,
            except: None,
        });
    }

    /// Sends `message` to every connected member but `except`.
    pub fn broadcast_except(&mut self, except: PlayerId, channel: u8, message: Bytes) {
        self.commands.push(Command::Broadcast {
            channel,
            message,
            except: Some(except),
        });
    }

    /// Removes a player from the room and disconnects them with `reason`.
    pub fn kick(&mut self, player: PlayerId, reason: impl Into<String>) {
        self.commands.push(Command::Kick {
            player,
            reason: reason.into(),
        });
    }
}

/// Game logic for one room. Every method has a default that does nothing, so a room
/// implements only what it needs.
///
/// The runtime calls these on the room's shard thread, one at a time, in this order within a
/// turn: players joining and leaving, their messages in arrival order, then due ticks, then
/// (once the ticks' messages are on their way) [`publish`](Room::publish).
///
/// ```
/// use bytes::Bytes;
/// use tickwire_room::room::{PlayerId, Room, RoomContext};
///
/// /// Echoes every message back to its sender.
/// struct Echo;
///
/// impl Room for Echo {
///     fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, channel: u8, message: Bytes) {
///         ctx.send(from, channel, message);
///     }
/// }
/// ```
pub trait Room: Send + 'static {
    /// Ticks per second, 1 to 128; read once when the room starts.
    fn tick_rate_hz(&self) -> u32 {
        60
    }

    /// A player takes a seat; refusing keeps them out.
    fn join(&mut self, ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        let _ = (ctx, member);
        Ok(())
    }

    /// A player's connection was lost; their seat is held while they may reconnect.
    fn disconnected(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId) {
        let _ = (ctx, player);
    }

    /// A player whose connection was lost is back in their seat.
    fn reconnected(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId) {
        let _ = (ctx, player);
    }

    /// A player left for good; their seat is free once this returns.
    fn leave(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId, reason: LeaveReason) {
        let _ = (ctx, player, reason);
    }

    /// A player sent a message (an input, a chat line, anything the game defines).
    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, channel: u8, message: Bytes) {
        let _ = (ctx, from, channel, message);
    }

    /// One fixed step of simulation; send events from here, and snapshots too unless the
    /// room sends them from [`publish`](Room::publish).
    fn tick(&mut self, ctx: &mut RoomContext<'_>) {
        let _ = ctx;
    }

    /// After the turn's ticks (one call however many ran), once the runtime has handed what
    /// they sent to the transports: the place for the costly per-player work that can wait
    /// for it, such as encoding snapshots, so that a tick's events (a hit, a confirmed
    /// teleport) do not wait behind every player's snapshot. Counted in the room's tick time.
    fn publish(&mut self, ctx: &mut RoomContext<'_>) {
        let _ = ctx;
    }

    /// An operator's announcement to every player (the console's `say`). By default the
    /// text's UTF-8 bytes go to every connected member on channel 0; a game with its own
    /// message format wraps it in that format instead.
    fn announce(&mut self, ctx: &mut RoomContext<'_>, text: &str) {
        ctx.broadcast(0, Bytes::copy_from_slice(text.as_bytes()));
    }
}
