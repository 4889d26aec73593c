//! The `Room` trait: the one thing a game developer implements. A room is sans-IO: it sees
//! players, their messages and the clock, and answers through its [`RoomContext`]; it never
//! learns which transport (UDP, WebSocket, WebTransport) a player uses.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_wire::{Decode, Encode, EncodeError};

use crate::listing::{Listing, ListingError, RoomOptions, check_metadata};
use crate::shard::RoomId;
use crate::timers::{TimerId, Timers};

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
    /// The room was disposed of with the player in it: it asked to be
    /// ([`RoomContext::dispose`]), an operator disposed of it, or it crashed.
    Disposed,
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
    /// The room asked to be disposed of and takes no one.
    #[error("room closed")]
    Closed,
    /// The room's code panicked (perhaps in this very join) and it is being disposed of.
    #[error("room crashed")]
    Crashed,
    /// The game refused, for its own reason: the text reaches the client verbatim (the
    /// WebSocket and WebTransport close reason, cut to 123 bytes).
    #[error("{0}")]
    Game(String),
}

impl JoinRefused {
    /// The game's refusal, with the reason the player is shown.
    pub fn game(reason: impl Into<String>) -> Self {
        Self::Game(reason.into())
    }
}

/// Why a room refused the options it was created with; the text reaches the matchmaking
/// caller (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CreateRefused(pub String);

/// A room's replicated world and the channels it uses ([`Room::replication`]).
pub struct Replication<'a> {
    /// The world.
    pub world: &'a mut dyn tickwire_replicate::Replicated,
    /// Where snapshots go: an unreliable-sequenced channel (2 of the default channels).
    pub state_channel: u8,
    /// Where the mirrors' acknowledgements arrive: messages from clients on it never reach
    /// the room. By default 2 as well (unreliable-sequenced, so a late acknowledgement is
    /// dropped for the newer one), which leaves 0 (reliable) and 1 (unreliable) for the
    /// game's own messages, such as inputs.
    pub ack_channel: u8,
}

impl<'a> Replication<'a> {
    /// `world` on the default channels: snapshots to clients on 2 (unreliable-sequenced),
    /// their acknowledgements back on 2.
    pub fn new(world: &'a mut dyn tickwire_replicate::Replicated) -> Self {
        Self {
            world,
            state_channel: 2,
            ack_channel: 2,
        }
    }
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

/// What a room controls about itself beyond its players, kept by its host and changed
/// through its [`RoomContext`].
#[derive(Debug, Default)]
pub(crate) struct RoomState {
    pub(crate) listing: Listing,
    /// The listing changed since the runtime last copied it to the matchmaker.
    pub(crate) listing_changed: bool,
    pub(crate) timers: Timers,
    /// The room asked to be disposed of.
    pub(crate) dispose_requested: bool,
    /// How long the room lives once empty: `None` for the shard's default, `Some(None)`
    /// for never.
    pub(crate) auto_dispose: Option<Option<Duration>>,
    /// Messages that did not decode as the type the room asked for.
    pub(crate) messages_malformed: u64,
    /// Messages the room asked to send that did not encode (values outside their type's
    /// bounds), not sent.
    pub(crate) messages_unencodable: u64,
    /// The first such failure since the shard last looked, and how many there were since,
    /// for it to count and log.
    pub(crate) unencodable: Option<(EncodeError, u64)>,
}

impl RoomState {
    /// Counts a message that did not encode and keeps the failure for the log.
    fn unencodable(&mut self, error: EncodeError) -> EncodeError {
        self.messages_unencodable += 1;
        match &mut self.unencodable {
            Some((_, count)) => *count += 1,
            None => self.unencodable = Some((error.clone(), 1)),
        }
        error
    }
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
    state: &'a mut RoomState,
}

impl<'a> RoomContext<'a> {
    pub(crate) fn new(
        room: RoomId,
        now: Instant,
        (tick, step): (u64, Duration),
        members: &'a [Member],
        commands: &'a mut Vec<Command>,
        state: &'a mut RoomState,
    ) -> Self {
        Self {
            room,
            now,
            tick,
            step,
            members,
            commands,
            state,
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

    /// Encodes `message` with its [`Encode`] and sends it to one player. An error is the
    /// game's own bug (a value outside the bounds its type declares: a name longer than its
    /// `max_len`, say); nothing is sent, and the failure is never silent whatever the game
    /// does with the result: it is counted
    /// ([`RoomStats::messages_unencodable`](crate::host::RoomStats), and the server's
    /// `tickwire_messages_unencodable_total`) and the server logs the first of each kind
    /// for each room kind.
    pub fn send_message<M: Encode>(
        &mut self,
        to: PlayerId,
        channel: u8,
        message: &M,
    ) -> Result<(), EncodeError> {
        let bytes =
            tickwire_wire::encode_to_vec(message).map_err(|error| self.state.unencodable(error))?;
        self.send(to, channel, Bytes::from(bytes));
        Ok(())
    }

    /// Encodes `message` once and sends it to every connected member; an error as for
    /// [`send_message`](Self::send_message).
    pub fn broadcast_message<M: Encode>(
        &mut self,
        channel: u8,
        message: &M,
    ) -> Result<(), EncodeError> {
        let bytes =
            tickwire_wire::encode_to_vec(message).map_err(|error| self.state.unencodable(error))?;
        self.broadcast(channel, Bytes::from(bytes));
        Ok(())
    }

    /// Decodes a player's message as `M` (the game's message enum, `#[derive(Decode)]`),
    /// the whole message and nothing else. `None` for bytes that do not decode: they are
    /// counted ([`RoomStats::messages_malformed`](crate::host::RoomStats)) and dropped, so a
    /// room matches on its own type and never on bytes.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use tickwire_room::room::{PlayerId, Room, RoomContext};
    /// use tickwire_wire::{Decode, Encode};
    ///
    /// #[derive(Encode, Decode)]
    /// enum Input {
    ///     Move { #[wire(min = 0, max = 6)] column: u8 },
    ///     Say { #[wire(max_len = 64)] text: String },
    /// }
    ///
    /// struct Game;
    ///
    /// impl Room for Game {
    ///     fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, _: u8, bytes: Bytes) {
    ///         let Some(input) = ctx.decode::<Input>(&bytes) else { return };
    ///         match input {
    ///             Input::Move { column } => { /* the rules, for `from` and `column` */ }
    ///             Input::Say { text } => {
    ///                 // Decoded within the bounds it is encoded with, so this cannot fail;
    ///                 // a failure would be counted and logged by the server all the same.
    ///                 if ctx.broadcast_message(0, &Input::Say { text }).is_err() {
    ///                     ctx.kick(from, "a message the room could not pass on");
    ///                 }
    ///             }
    ///         }
    ///     }
    /// }
    /// ```
    pub fn decode<M: Decode>(&mut self, message: &[u8]) -> Option<M> {
        match tickwire_wire::decode_exact::<M>(message) {
            Ok(decoded) => Some(decoded),
            Err(_) => {
                self.state.messages_malformed += 1;
                None
            }
        }
    }

    /// Stops matchmaking from offering this room (a game that has started); its players
    /// stay, and a player holding a seat may still reconnect.
    pub fn lock(&mut self) {
        self.set_locked(true);
    }

    /// Lets matchmaking offer this room again.
    pub fn unlock(&mut self) {
        self.set_locked(false);
    }

    fn set_locked(&mut self, locked: bool) {
        if self.state.listing.locked != locked {
            self.state.listing.locked = locked;
            self.state.listing_changed = true;
        }
    }

    /// Whether the room is locked.
    pub fn is_locked(&self) -> bool {
        self.state.listing.locked
    }

    /// Sets one entry of the room's label, which matchmaking filters
    /// (`label.mode = "ranked"`) and listings show.
    pub fn set_label(&mut self, key: &str, value: &str) -> Result<(), ListingError> {
        if self.state.listing.label.get(key) != Some(value) {
            self.state.listing.label.set(key, value)?;
            self.state.listing_changed = true;
        }
        Ok(())
    }

    /// Removes one entry of the room's label.
    pub fn remove_label(&mut self, key: &str) {
        if self.state.listing.label.remove(key) {
            self.state.listing_changed = true;
        }
    }

    /// Sets the room's metadata: free text (JSON, say) listings show, at most
    /// [`MAX_METADATA_BYTES`](crate::listing::MAX_METADATA_BYTES).
    pub fn set_metadata(&mut self, metadata: impl Into<String>) -> Result<(), ListingError> {
        let metadata = metadata.into();
        check_metadata(&metadata)?;
        if self.state.listing.metadata != metadata {
            self.state.listing.metadata = metadata;
            self.state.listing_changed = true;
        }
        Ok(())
    }

    /// The room's lock, label and metadata.
    pub fn listing(&self) -> &Listing {
        &self.state.listing
    }

    /// Calls [`Room::timer`] with `timer` once, `after` from now on the room's clock.
    /// Setting a timer that is pending reschedules it.
    pub fn delay(&mut self, timer: TimerId, after: Duration) {
        self.state.timers.set(self.now, timer, after, None);
    }

    /// Calls [`Room::timer`] with `timer` every `period` (at least 1 ms) from now until
    /// [`cancel`](Self::cancel)led; a period missed while the server was busy is skipped,
    /// not repeated.
    pub fn every(&mut self, timer: TimerId, period: Duration) {
        self.state.timers.set(self.now, timer, period, Some(period));
    }

    /// Cancels a pending timer; false if none was pending.
    pub fn cancel(&mut self, timer: TimerId) -> bool {
        self.state.timers.cancel(timer)
    }

    /// Whether a timer is pending.
    pub fn is_pending(&self, timer: TimerId) -> bool {
        self.state.timers.is_pending(timer)
    }

    /// Disposes of the room once this call returns: [`Room::dispose`] runs, then every
    /// member leaves with [`LeaveReason::Disposed`] and is disconnected ("room closed").
    pub fn dispose(&mut self) {
        self.state.dispose_requested = true;
    }

    /// How long the room lives once its last player has left: `Some(Duration::ZERO)` to
    /// go at once, `None` never (a persistent lobby). Until set, the server's
    /// `rooms.empty_room_ttl_secs`. A room nobody joined yet waits that long regardless,
    /// so the player who asked for it has time to arrive.
    pub fn set_auto_dispose(&mut self, after: Option<Duration>) {
        self.state.auto_dispose = Some(after);
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

    /// The room starts, before anyone joins, with the options of the matchmaking request
    /// that created it (bounded already; their meaning is the room's to check). Refusing
    /// means the room is never hosted and the request is answered 400 with the reason.
    /// The place to set a label, lock, timers.
    fn create(
        &mut self,
        ctx: &mut RoomContext<'_>,
        options: &RoomOptions,
    ) -> Result<(), CreateRefused> {
        let _ = (ctx, options);
        Ok(())
    }

    /// A player takes a seat; refusing keeps them out, and the refusal's text reaches their
    /// client. The joiner is already in `ctx.members()` during this call.
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

    /// A timer set with [`RoomContext::delay`] or [`RoomContext::every`] is due; `ctx.now()`
    /// is when it was due.
    fn timer(&mut self, ctx: &mut RoomContext<'_>, timer: TimerId) {
        let _ = (ctx, timer);
    }

    /// The room is going: empty past its time, disposed of by itself or an operator, or the
    /// server is stopping. Every player has left already (with `Disposed` or `Shutdown`).
    /// The last call, and the last chance to persist the game's results.
    fn dispose(&mut self, ctx: &mut RoomContext<'_>) {
        let _ = ctx;
    }

    /// The room's replicated world, if it keeps one ([`tickwire_replicate::ServerWorld`]). The
    /// host then does the rest: each member becomes a viewer when it joins (full state
    /// first), is sent the full state again when it reconnects, and is removed when it
    /// leaves; messages on the ack channel are the mirrors' acknowledgements, handed to the
    /// world and never to [`message`](Room::message); and after [`publish`](Room::publish)
    /// every connected member is sent its snapshot on the state channel.
    ///
    /// ```
    /// use tickwire_room::replicate::{ReplicationConfig, ServerWorld};
    /// use tickwire_room::room::{Replication, Room};
    /// use tickwire_wire::Replicate;
    ///
    /// #[derive(Debug, Clone, PartialEq, Replicate)]
    /// struct Ball {
    ///     #[wire(quantize(min = 0.0, max = 100.0, resolution = 0.01))]
    ///     x: f32,
    /// }
    ///
    /// struct Pong {
    ///     world: ServerWorld<Ball>,
    /// }
    ///
    /// impl Room for Pong {
    ///     fn replication(&mut self) -> Option<Replication<'_>> {
    ///         Some(Replication::new(&mut self.world))
    ///     }
    /// }
    /// ```
    fn replication(&mut self) -> Option<Replication<'_>> {
        None
    }

    /// An operator's announcement to every player (the console's `say`). By default the
    /// text's UTF-8 bytes go to every connected member on channel 0; a game with its own
    /// message format wraps it in that format instead.
    fn announce(&mut self, ctx: &mut RoomContext<'_>, text: &str) {
        ctx.broadcast(0, Bytes::copy_from_slice(text.as_bytes()));
    }
}
