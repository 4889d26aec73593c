//! A shard: the rooms one worker thread owns, the players seated in them, and the routing
//! from rooms' commands to per-player sends. Sans-IO: transports feed it players and
//! messages, and carry out the [`ShardOutput`]s it produces.

use std::collections::{HashMap, HashSet};
use std::mem::Discriminant;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use tickwire_replicate::ReplicationProfile;
use tickwire_wire::{EncodeError, EncodeErrorKind};

use crate::host::RoomHost;
use crate::limits::{MessageLimitConfig, MessageLimiter, MessageVerdict};
use crate::listing::{Listing, RoomOptions};
use crate::room::{Command, CreateRefused, JoinRefused, LeaveReason, PlayerId, Room, Seat};
use crate::sessions::IdMap;
use crate::timestep::TickRateError;

/// What a player of a crashed room is told.
pub const ROOM_CRASHED: &str = "room crashed";
/// What a player of a disposed room is told.
pub const ROOM_CLOSED: &str = "room closed";

/// Identifies a room on this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoomId(pub u64);

impl std::fmt::Display for RoomId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How a shard treats players and rooms over time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShardConfig {
    /// How long a player whose connection dropped keeps their seat.
    pub reconnect_grace: Duration,
    /// How long an empty room lives before it is disposed of (0: at once), unless the room
    /// chose otherwise ([`RoomContext::set_auto_dispose`](crate::room::RoomContext::set_auto_dispose)).
    /// A room nobody has joined yet always waits this long for its first player.
    pub empty_room_ttl: Duration,
    /// How many messages a player may send.
    pub message_limit: MessageLimitConfig,
}

impl Default for ShardConfig {
    /// 30 s to reconnect (a phone switching networks, a browser tab reloading) and 30 s
    /// before an empty room goes (so a host who rejoins finds it).
    fn default() -> Self {
        Self {
            reconnect_grace: Duration::from_secs(30),
            empty_room_ttl: Duration::from_secs(30),
            message_limit: MessageLimitConfig::default(),
        }
    }
}

/// What the transports must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardOutput {
    /// Send a message to a player.
    Send {
        /// Recipient.
        to: PlayerId,
        /// Channel id.
        channel: u8,
        /// The message; broadcasts share one buffer among recipients.
        message: Bytes,
    },
    /// Close a player's connection.
    Disconnect {
        /// Whose.
        player: PlayerId,
        /// Shown to the player.
        reason: String,
    },
    /// A seat changed: the matchmaker must hear of it.
    Seat(SeatChange),
}

/// A change of seats or rooms the matchmaker must hear about, in the order it happened on
/// the shard. The shard says it, the session table passes it on, the worker sends it to the
/// runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeatChange {
    /// A player took a new seat (not a reconnection): the matchmaker's reservation is now a
    /// seat.
    Seated {
        /// Who.
        player: PlayerId,
        /// Where.
        room: RoomId,
    },
    /// A player's seat is free: they left, were kicked, or did not come back in time.
    Unseated {
        /// Who.
        player: PlayerId,
        /// The room they left.
        room: RoomId,
    },
    /// A room is gone: it stayed empty past its time to live, was disposed of, or crashed.
    RoomDisposed {
        /// Which.
        room: RoomId,
    },
    /// A room's lock, label or metadata changed.
    Listed {
        /// Which.
        room: RoomId,
        /// Its listing now.
        listing: Box<Listing>,
    },
}

/// A message a room asked to send that did not encode (not sent); the runtime logs the
/// first of each error kind for each room kind.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomEncodeFailure {
    /// Which room.
    pub room: RoomId,
    /// Its kind.
    pub kind: String,
    /// What went wrong, and in which field.
    pub error: EncodeError,
}

/// A room whose code panicked, disposed of alone; the runtime logs and counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomCrash {
    /// Which room.
    pub room: RoomId,
    /// Its kind.
    pub kind: String,
    /// What the panic said.
    pub panic: String,
}

/// Why a room could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// The room's tick rate is out of bounds.
    #[error(transparent)]
    TickRate(#[from] TickRateError),
    /// The room refused its options.
    #[error(transparent)]
    Refused(#[from] CreateRefused),
    /// The room's code panicked while it was created (logged and counted as a crash).
    #[error("room crashed: {0}")]
    Crashed(String),
    /// A room with that id is hosted already.
    #[error("room {0} exists already")]
    Exists(RoomId),
}

/// Called with a room kind, the duration of each of its ticks in one turn, and how many
/// ticks ran: how the runtime feeds its metrics without the shard knowing about them.
pub type TickObserver = Box<dyn FnMut(&str, Duration, u32) + Send>;

/// Why a player could not join.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// No room with that id on this shard.
    #[error("no room {0}")]
    NoSuchRoom(RoomId),
    /// The player already has a seat in a room.
    #[error("player is already in room {0}")]
    AlreadySeated(RoomId),
    /// The room refused.
    #[error(transparent)]
    Refused(#[from] JoinRefused),
}

/// A room's description for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomInfo {
    /// Its id.
    pub id: RoomId,
    /// Its kind (`relay`, `chat`, `arena`, …).
    pub kind: String,
    /// Players seated, connected or not.
    pub players: usize,
    /// Seats.
    pub capacity: u16,
    /// Its lock, label and metadata.
    pub listing: Listing,
    /// Its messages since it was created.
    pub traffic: RoomTraffic,
    /// How long its own recent ticks took.
    pub recent_ticks: RecentTicks,
}

/// Recent ticks kept per room: about two seconds at 60 Hz.
const RECENT_TICKS: usize = 128;

/// One room's most recent tick durations (each the mean of a batch of ticks run together), to
/// read that room's own p50/p99 from. The shard's histograms are per kind; a histogram per
/// room would cost kilobytes each, this costs 512 bytes and copies cheaply into the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentTicks {
    micros: [u32; RECENT_TICKS],
    len: u16,
    next: u16,
}

impl Default for RecentTicks {
    fn default() -> Self {
        Self {
            micros: [0; RECENT_TICKS],
            len: 0,
            next: 0,
        }
    }
}

impl RecentTicks {
    fn record(&mut self, tick: Duration) {
        self.micros[usize::from(self.next)] = u32::try_from(tick.as_micros()).unwrap_or(u32::MAX);
        self.next = (self.next + 1) % RECENT_TICKS as u16;
        self.len = (self.len + 1).min(RECENT_TICKS as u16);
    }

    /// Ticks kept (up to 128).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether no tick was measured yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The duration at `quantile` (0 to 1) of the ticks kept (nearest rank), `None` before
    /// the first.
    pub fn quantile(&self, quantile: f64) -> Option<Duration> {
        let mut kept = self.micros;
        let kept = &mut kept[..self.len()];
        if kept.is_empty() {
            return None;
        }
        kept.sort_unstable();
        let rank = (quantile.clamp(0.0, 1.0) * kept.len() as f64).ceil() as usize;
        Some(Duration::from_micros(u64::from(
            kept[rank.saturating_sub(1)],
        )))
    }
}

/// A room's messages, counted where the shard routes them: what its players sent it (let
/// through the rate limit) and what it sent them (a broadcast once per recipient), in
/// message bytes. Transport framing and headers belong to connections, not rooms, and are
/// not counted here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoomTraffic {
    /// Messages from players.
    pub messages_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Messages to players.
    pub messages_out: u64,
    /// Their bytes.
    pub bytes_out: u64,
}

struct HostedRoom {
    kind: String,
    host: RoomHost,
    /// Set while the room has no members: when it became empty.
    empty_since: Option<Instant>,
    /// Someone has sat in it: from then on the room's own auto-dispose delay applies.
    ever_joined: bool,
    /// Ticks ran and await the publish phase.
    unpublished: Option<Unpublished>,
    /// How long the room's last publish took, its encoding and (once the driver says,
    /// [`Shard::publish_sent`]) its share of sending the snapshots: what the next one is
    /// expected to take.
    last_publish: Duration,
    traffic: RoomTraffic,
    recent_ticks: RecentTicks,
}

/// Ticks a room ran that its publish phase has not yet followed.
#[derive(Debug, Clone, Copy)]
struct Unpublished {
    ticks: u32,
    /// The time they took.
    took: Duration,
}

struct Seated {
    room: RoomId,
    /// Set while the player's connection is lost: when their seat is given up.
    held_until: Option<Instant>,
    limiter: MessageLimiter,
}

/// Counters of a shard's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Ticks run across all rooms.
    pub ticks: u64,
    /// Ticks skipped by rooms that fell behind.
    pub ticks_skipped: u64,
    /// Turns in which a room's publish waited for its next tick, having fallen too close to
    /// it (one tick at most).
    pub publishes_waited: u64,
    /// Rooms disposed of after staying empty.
    pub rooms_disposed: u64,
    /// Seats given up because a player did not reconnect in time.
    pub seats_expired: u64,
    /// Messages from players without a seat, ignored.
    pub messages_unrouted: u64,
    /// Messages dropped by the per-player rate limit.
    pub messages_rate_limited: u64,
    /// Players disconnected for flooding.
    pub players_flooding: u64,
    /// Rooms whose code panicked, disposed of alone.
    pub rooms_crashed: u64,
    /// Messages rooms asked to send that did not encode, not sent.
    pub messages_unencodable: u64,
}

/// How long one room kind's ticks take on this shard.
#[derive(Debug, Clone)]
pub struct TickTimes {
    /// Tick durations in microseconds, 1 µs to 60 s, 2 significant digits.
    histogram: Histogram<u64>,
    /// Ticks that took longer than their step (the room cannot keep its rate).
    overruns: u64,
}

impl TickTimes {
    fn new() -> Self {
        Self {
            histogram: Histogram::new_with_bounds(1, 60_000_000, 2)
                .expect("constant bounds are valid"),
            overruns: 0,
        }
    }

    /// Ticks measured.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The duration at `quantile` (0 to 1) of the ticks measured.
    pub fn quantile(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.histogram.value_at_quantile(quantile))
    }

    /// The longest tick measured.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.histogram.max())
    }

    /// The histogram itself, in microseconds (to merge several).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.histogram
    }

    /// Ticks that took longer than their step.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    fn record(&mut self, per_tick: Duration, ticks: u32, step: Duration) {
        let micros = u64::try_from(per_tick.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, 60_000_000);
        // Saturating: a value past the bounds was clamped above, so this cannot fail.
        let _ = self.histogram.record_n(micros, u64::from(ticks));
        if per_tick > step {
            self.overruns += u64::from(ticks);
        }
    }
}

/// The rooms and players of one worker thread.
pub struct Shard {
    config: ShardConfig,
    /// The grid every room's ticks are aligned to: set when the first room is created.
    epoch: Option<Instant>,
    /// No room has anything due (a tick or its disposal) before this. Never later than the
    /// true earliest deadline: changes that may bring one forward lower it, and a pass over
    /// the rooms sets it exactly; so a turn with nothing due skips the rooms altogether.
    rooms_due: Option<Instant>,
    /// Held seats by expiry. An entry whose player came back (or left) is stale and skipped
    /// when it comes up: its expiry no longer matches the seat's.
    held: std::collections::BTreeSet<(Instant, PlayerId)>,
    /// Rooms that ticked and await their publish phase.
    unpublished: Vec<RoomId>,
    /// The rooms the last publish phase published, with how long each took to encode:
    /// what [`publish_sent`](Self::publish_sent) shares the sending time out by.
    last_published: Vec<(RoomId, Duration)>,
    rooms: IdMap<RoomId, HostedRoom>,
    players: IdMap<PlayerId, Seated>,
    outputs: Vec<ShardOutput>,
    stats: ShardStats,
    tick_times: HashMap<String, TickTimes>,
    /// What replicated worlds sent, by room kind.
    replication: HashMap<String, ReplicationProfile>,
    /// Reused every turn so routing and ticking allocate nothing in steady state.
    scratch_commands: Vec<Command>,
    scratch_rooms: Vec<RoomId>,
    tick_observer: Option<TickObserver>,
    crashes: Vec<RoomCrash>,
    /// Failures to log: the first of each error kind for each room kind.
    encode_failures: Vec<RoomEncodeFailure>,
    /// Which (room kind, error kind) pairs were logged already: bounded by the kinds
    /// registered times the few error kinds.
    encode_failures_seen: HashSet<(String, Discriminant<EncodeErrorKind>)>,
}

impl Shard {
    /// An empty shard.
    pub fn new(config: ShardConfig) -> Self {
        Self {
            config,
            epoch: None,
            rooms_due: None,
            held: std::collections::BTreeSet::new(),
            unpublished: Vec::new(),
            last_published: Vec::new(),
            rooms: IdMap::default(),
            players: IdMap::default(),
            outputs: Vec::new(),
            stats: ShardStats::default(),
            tick_times: HashMap::new(),
            replication: HashMap::new(),
            scratch_commands: Vec::new(),
            scratch_rooms: Vec::new(),
            tick_observer: None,
            crashes: Vec::new(),
            encode_failures: Vec::new(),
            encode_failures_seen: HashSet::new(),
        }
    }

    /// Also reports every timed tick to `observer` (see [`run_timed`](Self::run_timed)).
    pub fn set_tick_observer(&mut self, observer: TickObserver) {
        self.tick_observer = Some(observer);
    }

    /// Starts hosting a room, with no options.
    pub fn create_room(
        &mut self,
        now: Instant,
        id: RoomId,
        kind: impl Into<String>,
        room: Box<dyn Room>,
        capacity: u16,
    ) -> Result<(), CreateError> {
        self.create_room_with(now, id, kind, room, capacity, &RoomOptions::default())
    }

    /// Starts hosting a room with the options of the request that created it: the room's
    /// [`create`](Room::create) runs now, and a refusal (or a panic) means no room.
    pub fn create_room_with(
        &mut self,
        now: Instant,
        id: RoomId,
        kind: impl Into<String>,
        room: Box<dyn Room>,
        capacity: u16,
        options: &RoomOptions,
    ) -> Result<(), CreateError> {
        if self.rooms.contains_key(&id) {
            return Err(CreateError::Exists(id));
        }
        let kind = kind.into();
        // The first call into the game's code: a panic here, as in `create`, is a crash of
        // a room that never was, rather than of the shard.
        let rate =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| room.tick_rate_hz())) {
                Ok(rate) => rate,
                Err(_) => return Err(self.crashed_creating(id, kind, "tick_rate_hz panicked")),
            };
        let start = self.aligned_start(now, rate);
        let mut host = RoomHost::new(id, room, start, capacity)?;
        if let Err(refused) = host.create(now, options) {
            return Err(match host.crashed() {
                Some(panic) => self.crashed_creating(id, kind, panic),
                None => refused.into(),
            });
        }
        self.rooms.insert(
            id,
            HostedRoom {
                kind,
                host,
                empty_since: Some(now),
                ever_joined: false,
                unpublished: None,
                last_publish: Duration::ZERO,
                traffic: RoomTraffic::default(),
                recent_ticks: RecentTicks::default(),
            },
        );
        // What `create` sent goes nowhere (no one is seated); its label and lock go to the
        // matchmaker, and a room that disposed of itself at once goes.
        self.route(id, now);
        Ok(())
    }

    /// Records a room that panicked before it was hosted, for the worker to log.
    fn crashed_creating(&mut self, room: RoomId, kind: String, panic: &str) -> CreateError {
        self.stats.rooms_crashed += 1;
        self.crashes.push(RoomCrash {
            room,
            kind,
            panic: panic.to_string(),
        });
        CreateError::Crashed(panic.to_string())
    }

    /// When an empty room is to be disposed of: `None` while it has members or if it
    /// chose to live on empty.
    fn disposal_at(config: &ShardConfig, hosted: &HostedRoom) -> Option<Instant> {
        let since = hosted.empty_since?;
        let ttl = match (hosted.ever_joined, hosted.host.auto_dispose()) {
            (true, Some(chosen)) => chosen?,
            _ => config.empty_room_ttl,
        };
        Some(since + ttl)
    }

    /// Something in a room may be due as early as `at`.
    fn lower_rooms_due(&mut self, at: Instant) {
        self.rooms_due = Some(self.rooms_due.map_or(at, |due| due.min(at)));
    }

    /// When a room created at `now` ticking at `rate_hz` starts: the first instant at or
    /// after `now` on the shard's grid for that rate. Rooms of a rate then tick in the same
    /// turn of the worker, which wakes once per tick for all of them and sends their
    /// snapshots in one batch, instead of once per room at a phase of its own (a hundred
    /// small rooms made six thousand wake-ups and small `sendmmsg` calls a second). The
    /// cost: a room waits for the rooms ticked before it in that turn, a few milliseconds
    /// at most on a full shard.
    fn aligned_start(&mut self, now: Instant, rate_hz: u32) -> Instant {
        let epoch = *self.epoch.get_or_insert(now);
        let rate = u128::from(rate_hz.max(1));
        let elapsed = now.saturating_duration_since(epoch).as_nanos();
        let tick = (elapsed * rate).div_ceil(1_000_000_000);
        let offset = u64::try_from(tick * 1_000_000_000 / rate).unwrap_or(u64::MAX);
        epoch + Duration::from_nanos(offset)
    }

    /// Seats a player in a room.
    pub fn join(
        &mut self,
        now: Instant,
        room: RoomId,
        player: PlayerId,
        name: String,
    ) -> Result<Seat, JoinError> {
        if let Some(seated) = self.players.get(&player) {
            return Err(JoinError::AlreadySeated(seated.room));
        }
        let hosted = self
            .rooms
            .get_mut(&room)
            .ok_or(JoinError::NoSuchRoom(room))?;
        let seat = match hosted.host.join(now, player, name) {
            Ok(seat) => seat,
            Err(refused) => {
                // What the room sent while refusing goes out; a crash in `join` closes it.
                self.route(room, now);
                return Err(refused.into());
            }
        };
        hosted.empty_since = None;
        hosted.ever_joined = true;
        self.players.insert(
            player,
            Seated {
                room,
                held_until: None,
                limiter: MessageLimiter::new(now, self.config.message_limit),
            },
        );
        self.outputs
            .push(ShardOutput::Seat(SeatChange::Seated { player, room }));
        self.route(room, now);
        Ok(seat)
    }

    /// A message from a player; ignored (and counted) unless they are seated and connected.
    pub fn message(&mut self, now: Instant, player: PlayerId, channel: u8, message: Bytes) {
        let Some(seated) = self
            .players
            .get_mut(&player)
            .filter(|seated| seated.held_until.is_none())
        else {
            self.stats.messages_unrouted += 1;
            return;
        };
        match seated.limiter.check(now) {
            MessageVerdict::Allow => {}
            MessageVerdict::Drop => {
                self.stats.messages_rate_limited += 1;
                return;
            }
            MessageVerdict::Disconnect => {
                self.stats.messages_rate_limited += 1;
                self.stats.players_flooding += 1;
                self.kick(now, player, "message flood");
                return;
            }
        }
        let room = seated.room;
        if let Some(hosted) = self.rooms.get_mut(&room) {
            hosted.traffic.messages_in += 1;
            hosted.traffic.bytes_in += message.len() as u64;
            hosted.host.message(now, player, channel, message);
            // Most messages leave nothing to route (inputs wait for the tick): skip
            // `route`'s two more lookups of the room, but not a timer the call set.
            if hosted.host.has_output() {
                self.route(room, now);
            } else {
                let next = hosted.host.next_deadline();
                self.lower_rooms_due(next);
            }
        }
    }

    /// A player's connection dropped: their seat is held for the reconnect grace period.
    pub fn connection_lost(&mut self, now: Instant, player: PlayerId) {
        let Some(seated) = self.players.get_mut(&player) else {
            return;
        };
        let until = now + self.config.reconnect_grace;
        seated.held_until = Some(until);
        self.held.insert((until, player));
        let room = seated.room;
        if let Some(hosted) = self.rooms.get_mut(&room) {
            hosted.host.disconnected(now, player);
            self.route(room, now);
        }
    }

    /// A player whose seat is held is back; their room and seat, if still held.
    pub fn reconnect(&mut self, now: Instant, player: PlayerId) -> Option<(RoomId, Seat)> {
        let seated = self.players.get_mut(&player)?;
        seated.held_until = None;
        let room = seated.room;
        let seat = self.rooms.get_mut(&room)?.host.reconnected(now, player)?;
        self.route(room, now);
        Some((room, seat))
    }

    /// A player leaves their room for good.
    pub fn leave(&mut self, now: Instant, player: PlayerId, reason: LeaveReason) {
        let Some(seated) = self.players.remove(&player) else {
            return;
        };
        self.outputs.push(ShardOutput::Seat(SeatChange::Unseated {
            player,
            room: seated.room,
        }));
        if let Some(hosted) = self.rooms.get_mut(&seated.room) {
            hosted.host.leave(now, player, reason);
            if hosted.host.members().is_empty() && hosted.empty_since.is_none() {
                hosted.empty_since = Some(now);
                if let Some(at) = Self::disposal_at(&self.config, hosted) {
                    self.lower_rooms_due(at);
                }
            }
            self.route(seated.room, now);
        }
    }

    /// Runs every room's due ticks, then the publish phase of the rooms that ticked, gives
    /// up expired held seats and disposes of rooms empty for longer than their time to live.
    pub fn run(&mut self, now: Instant) {
        self.tick_rooms(now, None);
        self.publish_rooms(now, None);
    }

    /// [`run`](Self::run), timing each room's ticks with `clock` (the driver passes
    /// `Instant::now`) into a histogram per room kind; a tick slower than its step counts
    /// as an overrun. One room's overrun delays only the rooms after it on this shard.
    pub fn run_timed(&mut self, now: Instant, clock: &mut dyn FnMut() -> Instant) {
        self.tick_rooms(now, Some(&mut *clock));
        self.publish_rooms(now, Some(clock));
    }

    /// The first half of [`run_timed`](Self::run_timed): expired seats, disposals and due
    /// ticks. A driver that hands the outputs to its transports before calling
    /// [`publish_due`](Self::publish_due) gets every tick's events on their way before any
    /// room's [`publish`](crate::room::Room::publish) work (snapshots) begins.
    pub fn tick_due(&mut self, now: Instant, clock: &mut dyn FnMut() -> Instant) {
        self.tick_rooms(now, Some(clock));
    }

    /// The second half of [`run_timed`](Self::run_timed): the publish phase of every room
    /// that ticked since the last call, and the rooms' tick times (tick plus publish).
    pub fn publish_due(&mut self, now: Instant, clock: &mut dyn FnMut() -> Instant) {
        self.publish_rooms(now, Some(clock));
    }

    /// The driver took `sent` to send what the last [`publish_due`](Self::publish_due)
    /// queued. Each room that published then expects its next publish to take its encoding
    /// plus its share of that (by encoding time), which is what the deferral check weighs
    /// against the next tick. Counting the encoding alone, a crowd's publish after a warp
    /// (5 ms to encode, 4 ms to send) started 5 ms before the next tick and held that
    /// tick, and the warps it confirms, back by 4.9 ms.
    pub fn publish_sent(&mut self, sent: Duration) {
        let encoded: Duration = self.last_published.iter().map(|&(_, took)| took).sum();
        let rooms = self.last_published.len() as u32;
        for &(id, took) in &self.last_published {
            let share = if encoded.is_zero() {
                sent / rooms
            } else {
                sent.mul_f64(took.as_secs_f64() / encoded.as_secs_f64())
            };
            if let Some(hosted) = self.rooms.get_mut(&id) {
                hosted.last_publish = took + share;
            }
        }
        self.last_published.clear();
    }

    /// Whether rooms ticked since the last [`publish_due`](Self::publish_due).
    pub fn publish_pending(&self) -> bool {
        !self.unpublished.is_empty()
    }

    /// Tick durations by room kind.
    pub fn tick_times(&self) -> &HashMap<String, TickTimes> {
        &self.tick_times
    }

    /// What rooms' replicated worlds have sent, by room kind, entity kind and field, since
    /// the shard started (bytes, estimated: `tickwire_replicate::ReplicationProfile`).
    pub fn replication_profiles(&self) -> &HashMap<String, ReplicationProfile> {
        &self.replication
    }

    fn tick_rooms(&mut self, now: Instant, mut clock: Option<&mut dyn FnMut() -> Instant>) {
        while let Some(&(until, player)) = self.held.first() {
            if until > now {
                break;
            }
            self.held.pop_first();
            let still_held = self
                .players
                .get(&player)
                .is_some_and(|seated| seated.held_until == Some(until));
            if still_held {
                self.stats.seats_expired += 1;
                self.leave(now, player, LeaveReason::GraceExpired);
            }
        }
        if self.rooms_due.is_some_and(|due| due > now) {
            return;
        }
        let mut ids = std::mem::take(&mut self.scratch_rooms);
        ids.extend(self.rooms.keys().copied());
        let mut due_next: Option<Instant> = None;
        for id in ids.drain(..) {
            let Some(hosted) = self.rooms.get_mut(&id) else {
                continue;
            };
            let disposal = Self::disposal_at(&self.config, hosted);
            if disposal.is_some_and(|at| at <= now) {
                self.close_room(now, id, ROOM_CLOSED);
                continue;
            }
            if hosted.host.next_deadline() <= now {
                let started = clock.as_mut().map(|clock| clock());
                let due = hosted.host.advance(now);
                if due.ticks > 0 {
                    let took = match (started, clock.as_mut()) {
                        (Some(started), Some(clock)) => clock().saturating_duration_since(started),
                        _ => Duration::ZERO,
                    };
                    match &mut hosted.unpublished {
                        Some(pending) => {
                            pending.ticks += due.ticks;
                            pending.took += took;
                        }
                        None => {
                            hosted.unpublished = Some(Unpublished {
                                ticks: due.ticks,
                                took,
                            });
                            self.unpublished.push(id);
                        }
                    }
                }
                self.stats.ticks += u64::from(due.ticks);
                self.stats.ticks_skipped += due.skipped;
                self.route(id, now);
            }
            // The room may have emptied while routing; its disposal is then `now` + ttl.
            if let Some(hosted) = self.rooms.get(&id) {
                let next = hosted.host.next_deadline();
                let next = match Self::disposal_at(&self.config, hosted) {
                    Some(at) => next.min(at),
                    None => next,
                };
                due_next = Some(due_next.map_or(next, |due| due.min(next)));
            }
        }
        self.scratch_rooms = ids;
        // Whatever lowered the bound meanwhile (a room emptied by a kick) still counts.
        self.rooms_due = match (due_next, self.rooms_due) {
            (Some(next), Some(lowered)) if lowered > now => Some(next.min(lowered)),
            (next, _) => next,
        };
    }

    fn publish_rooms(&mut self, now: Instant, mut clock: Option<&mut dyn FnMut() -> Instant>) {
        let mut ids = std::mem::take(&mut self.unpublished);
        self.last_published.clear();
        let mut waiting = 0;
        for index in 0..ids.len() {
            let id = ids[index];
            let Some(hosted) = self.rooms.get_mut(&id) else {
                continue;
            };
            let Some(Unpublished { ticks, took }) = hosted.unpublished else {
                continue;
            };
            let started = clock.as_mut().map(|clock| clock());
            // A publish that would run into the room's next tick waits for it (for one
            // tick at most): that tick's events (a crowd's warp confirmations) then leave
            // before these snapshots instead of a publish and its sends later, and the
            // publish after it covers both ticks (a room publishes its newest state).
            let runs_into_tick = started
                .is_some_and(|started| started + hosted.last_publish >= hosted.host.next_tick_at());
            if runs_into_tick && ticks < 2 {
                self.stats.publishes_waited += 1;
                ids[waiting] = id;
                waiting += 1;
                continue;
            }
            hosted.unpublished = None;
            hosted.host.publish(now);
            if let Some(profile) = hosted.host.take_replication_profile(now) {
                // Look up before inserting: `entry` would clone the kind on every turn.
                match self.replication.get_mut(&hosted.kind) {
                    Some(total) => total.merge(&profile),
                    None => {
                        self.replication.insert(hosted.kind.clone(), profile);
                    }
                }
            }
            if let (Some(started), Some(clock)) = (started, clock.as_mut()) {
                let published = clock().saturating_duration_since(started);
                hosted.last_publish = published;
                self.last_published.push((id, published));
                let per_tick = (took + published) / ticks;
                let step =
                    Duration::from_nanos(1_000_000_000 / u64::from(hosted.host.tick_rate_hz()));
                if let Some(observer) = self.tick_observer.as_mut() {
                    observer(&hosted.kind, per_tick, ticks);
                }
                hosted.recent_ticks.record(per_tick);
                // Look up before inserting: `entry` would clone the kind on every turn.
                match self.tick_times.get_mut(&hosted.kind) {
                    Some(times) => times.record(per_tick, ticks, step),
                    None => {
                        let mut times = TickTimes::new();
                        times.record(per_tick, ticks, step);
                        self.tick_times.insert(hosted.kind.clone(), times);
                    }
                }
            }
            self.route(id, now);
        }
        ids.truncate(waiting);
        self.unpublished = ids;
    }

    /// Turns a room's commands into sends and disconnects, passes a changed listing on to
    /// the matchmaker, and disposes of a room that crashed or asked to go.
    fn route(&mut self, id: RoomId, now: Instant) {
        self.route_commands(id, now);
        let Some(hosted) = self.rooms.get_mut(&id) else {
            return;
        };
        if let Some(listing) = hosted.host.take_listing_change() {
            let listing = Box::new(listing.clone());
            self.outputs
                .push(ShardOutput::Seat(SeatChange::Listed { room: id, listing }));
        }
        if let Some((error, count)) = hosted.host.take_unencodable() {
            self.stats.messages_unencodable += count;
            let seen = (hosted.kind.clone(), std::mem::discriminant(&error.kind));
            if self.encode_failures_seen.insert(seen) {
                self.encode_failures.push(RoomEncodeFailure {
                    room: id,
                    kind: hosted.kind.clone(),
                    error,
                });
            }
        }
        if let Some(panic) = hosted.host.crashed() {
            self.stats.rooms_crashed += 1;
            self.crashes.push(RoomCrash {
                room: id,
                kind: hosted.kind.clone(),
                panic: panic.to_string(),
            });
            self.close_room(now, id, ROOM_CRASHED);
        } else if hosted.host.is_closing() {
            self.close_room(now, id, ROOM_CLOSED);
        } else {
            // A timer set in this call may be due before anything else on the shard.
            let next = hosted.host.next_deadline();
            self.lower_rooms_due(next);
        }
    }

    /// Disposes of a room now: its members leave with [`LeaveReason::Disposed`] and are
    /// disconnected with `reason`, its [`dispose`](Room::dispose) runs (unless it
    /// crashed), and the matchmaker hears it is gone.
    fn close_room(&mut self, now: Instant, id: RoomId, reason: &str) {
        let Some(hosted) = self.rooms.get_mut(&id) else {
            return;
        };
        let seated = hosted.host.dispose(now);
        // The last words of its `leave` and `dispose`, to the players still listed.
        self.route_commands(id, now);
        for player in seated {
            if self.players.remove(&player).is_some() {
                self.outputs
                    .push(ShardOutput::Seat(SeatChange::Unseated { player, room: id }));
                self.outputs.push(ShardOutput::Disconnect {
                    player,
                    reason: reason.to_string(),
                });
            }
        }
        self.rooms.remove(&id);
        self.stats.rooms_disposed += 1;
        self.outputs
            .push(ShardOutput::Seat(SeatChange::RoomDisposed { room: id }));
    }

    /// Disposes of a room at an operator's request (see [`close_room`](Self::close_room));
    /// false if there is no such room.
    pub fn dispose_room(&mut self, now: Instant, id: RoomId) -> bool {
        if !self.rooms.contains_key(&id) {
            return false;
        }
        self.close_room(now, id, ROOM_CLOSED);
        true
    }

    /// Locks or unlocks a room at an operator's request; false if there is no such room.
    pub fn set_locked(&mut self, now: Instant, id: RoomId, locked: bool) -> bool {
        let Some(hosted) = self.rooms.get_mut(&id) else {
            return false;
        };
        hosted.host.set_locked(locked);
        self.route(id, now);
        true
    }

    /// The rooms that crashed since the last call, to log.
    pub fn drain_crashes(&mut self) -> std::vec::Drain<'_, RoomCrash> {
        self.crashes.drain(..)
    }

    /// Messages that did not encode since the last call, to log: the first of each error
    /// kind for each room kind (all of them are counted in
    /// [`ShardStats::messages_unencodable`]).
    pub fn drain_encode_failures(&mut self) -> std::vec::Drain<'_, RoomEncodeFailure> {
        self.encode_failures.drain(..)
    }

    /// The sends and disconnects of a room's commands.
    fn route_commands(&mut self, id: RoomId, now: Instant) {
        let Some(hosted) = self.rooms.get_mut(&id) else {
            return;
        };
        let mut kicked = Vec::new();
        // Seated here with a live connection, and not kicked by an earlier command (the
        // host has removed those already). A map lookup: scanning the members for every
        // send was quadratic in a room's size.
        let players = &self.players;
        let connected = |player: PlayerId, kicked: &[PlayerId]| {
            players
                .get(&player)
                .is_some_and(|seated| seated.room == id && seated.held_until.is_none())
                && !kicked.contains(&player)
        };
        let mut commands = std::mem::take(&mut self.scratch_commands);
        commands.extend(hosted.host.take_commands());
        for command in commands.drain(..) {
            match command {
                Command::Send {
                    to,
                    channel,
                    message,
                } => {
                    if connected(to, &kicked) {
                        hosted.traffic.messages_out += 1;
                        hosted.traffic.bytes_out += message.len() as u64;
                        self.outputs.push(ShardOutput::Send {
                            to,
                            channel,
                            message,
                        });
                    }
                }
                Command::Broadcast {
                    channel,
                    message,
                    except,
                } => {
                    for member in hosted.host.members() {
                        if member.connected && Some(member.id) != except {
                            hosted.traffic.messages_out += 1;
                            hosted.traffic.bytes_out += message.len() as u64;
                            self.outputs.push(ShardOutput::Send {
                                to: member.id,
                                channel,
                                message: message.clone(),
                            });
                        }
                    }
                }
                Command::Kick { player, reason } => {
                    kicked.push(player);
                    self.outputs
                        .push(ShardOutput::Disconnect { player, reason });
                }
            }
        }
        self.scratch_commands = commands;
        let emptied = hosted.host.members().is_empty() && hosted.empty_since.is_none();
        if emptied {
            hosted.empty_since = Some(now);
        }
        let disposal = Self::disposal_at(&self.config, hosted);
        for player in kicked {
            // The host already removed them from the room.
            if self.players.remove(&player).is_some() {
                self.outputs
                    .push(ShardOutput::Seat(SeatChange::Unseated { player, room: id }));
            }
        }
        if let Some(at) = disposal.filter(|_| emptied) {
            self.lower_rooms_due(at);
        }
    }

    /// What the transports must do, in order.
    pub fn drain_outputs(&mut self) -> std::vec::Drain<'_, ShardOutput> {
        self.outputs.drain(..)
    }

    /// When `run` next has work: a tick, a held seat's expiry or an empty room's disposal.
    /// Kept current as rooms and seats change, so a driver asks every turn for nothing.
    pub fn next_deadline(&self) -> Option<Instant> {
        let seat = self.held.first().map(|(until, _)| *until);
        match (self.rooms_due, seat) {
            (Some(rooms), Some(seat)) => Some(rooms.min(seat)),
            (rooms, seat) => rooms.or(seat),
        }
    }

    /// The rooms, for listings and matchmaking.
    pub fn rooms(&self) -> impl Iterator<Item = RoomInfo> + '_ {
        self.rooms.iter().map(|(id, hosted)| RoomInfo {
            id: *id,
            kind: hosted.kind.clone(),
            players: hosted.host.members().len(),
            capacity: hosted.host.capacity(),
            listing: hosted.host.listing().clone(),
            traffic: hosted.traffic,
            recent_ticks: hosted.recent_ticks,
        })
    }

    /// Everyone seated in a room, connected or not.
    pub fn members(&self, room: RoomId) -> Option<&[crate::room::Member]> {
        self.rooms.get(&room).map(|hosted| hosted.host.members())
    }

    /// An operator's announcement, to every room.
    pub fn announce(&mut self, now: Instant, text: &str) {
        let mut ids = std::mem::take(&mut self.scratch_rooms);
        ids.extend(self.rooms.keys().copied());
        for id in ids.drain(..) {
            if let Some(hosted) = self.rooms.get_mut(&id) {
                hosted.host.announce(now, text);
                self.route(id, now);
            }
        }
        self.scratch_rooms = ids;
    }

    /// Removes a player from their room and disconnects them; false if they have no seat.
    pub fn kick(&mut self, now: Instant, player: PlayerId, reason: &str) -> bool {
        if !self.players.contains_key(&player) {
            return false;
        }
        self.leave(now, player, LeaveReason::Kicked);
        self.outputs.push(ShardOutput::Disconnect {
            player,
            reason: reason.to_string(),
        });
        true
    }

    /// The server is stopping: rooms run the ticks due by `now` (their last), then every
    /// player leaves with [`LeaveReason::Shutdown`], so games record their final results.
    pub fn shut_down(&mut self, now: Instant) {
        self.run(now);
        let players: Vec<PlayerId> = self.players.keys().copied().collect();
        for player in players {
            self.leave(now, player, LeaveReason::Shutdown);
        }
        let rooms: Vec<RoomId> = self.rooms.keys().copied().collect();
        for room in rooms {
            self.close_room(now, room, ROOM_CLOSED);
        }
    }

    /// The room a player is seated in.
    pub fn room_of(&self, player: PlayerId) -> Option<RoomId> {
        self.players.get(&player).map(|seated| seated.room)
    }

    /// The tick rate of the room a player is seated in: what its connection parameters
    /// tell its client.
    pub fn tick_rate_of(&self, player: PlayerId) -> Option<u32> {
        let room = self.room_of(player)?;
        self.rooms
            .get(&room)
            .map(|hosted| hosted.host.tick_rate_hz())
    }

    /// Counters of the shard's work.
    pub fn stats(&self) -> ShardStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MessageLimitConfig;
    use crate::room::Room;
    use crate::rooms::relay::RelayRoom;

    fn shard_with_relay(players: u64) -> (Shard, Instant) {
        let now = Instant::now();
        let mut shard = Shard::new(ShardConfig::default());
        shard
            .create_room(now, RoomId(1), "relay", Box::new(RelayRoom::default()), 16)
            .unwrap();
        for id in 1..=players {
            shard
                .join(now, RoomId(1), PlayerId(id), format!("p{id}"))
                .unwrap();
        }
        shard.drain_outputs().for_each(drop);
        (shard, now)
    }

    /// A relay room's next tick after `now` (60 Hz), when it relays what it received.
    fn tick_after(now: Instant) -> Instant {
        now + Duration::from_millis(17)
    }

    fn sends(shard: &mut Shard) -> Vec<(PlayerId, u8, Bytes)> {
        shard
            .drain_outputs()
            .filter_map(|output| match output {
                ShardOutput::Send {
                    to,
                    channel,
                    message,
                } => Some((to, channel, message)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_players_tick_rate_is_its_rooms() {
        let now = Instant::now();
        let mut shard = Shard::new(ShardConfig::default());
        shard
            .create_room(now, RoomId(1), "relay", Box::new(RelayRoom::new(20)), 4)
            .unwrap();
        shard.join(now, RoomId(1), PlayerId(7), "p".into()).unwrap();
        assert_eq!(shard.tick_rate_of(PlayerId(7)), Some(20));
        assert_eq!(shard.tick_rate_of(PlayerId(8)), None, "not seated");
    }

    #[test]
    fn a_relayed_message_reaches_the_others_sharing_one_buffer() {
        let (mut shard, now) = shard_with_relay(4);
        let message = Bytes::from(vec![7u8; 100]);
        shard.message(now, PlayerId(3), 2, message.clone());
        shard.run(tick_after(now));
        let sent = sends(&mut shard);
        let recipients: Vec<_> = sent.iter().map(|(to, ..)| to.0).collect();
        assert_eq!(recipients.len(), 3);
        assert!(!recipients.contains(&3), "not echoed to the sender");
        for (_, channel, bytes) in &sent {
            assert_eq!(*channel, 2, "on the channel it came on");
            assert_eq!(
                bytes.as_ptr(),
                message.as_ptr(),
                "one buffer for all recipients"
            );
        }
    }

    #[test]
    fn recent_ticks_keep_the_newest_128_and_read_quantiles_by_rank() {
        let mut recent = RecentTicks::default();
        assert_eq!(recent.quantile(0.5), None, "nothing before the first tick");
        for micros in 1..=100 {
            recent.record(Duration::from_micros(micros));
        }
        assert_eq!(recent.quantile(0.5), Some(Duration::from_micros(50)));
        assert_eq!(recent.quantile(0.99), Some(Duration::from_micros(99)));
        // 100 more, from 1,001 µs: only the newest 128 count, 28 of the first run among them.
        for micros in 1_001..=1_100 {
            recent.record(Duration::from_micros(micros));
        }
        assert_eq!(recent.len(), 128);
        assert_eq!(recent.quantile(0.0), Some(Duration::from_micros(73)));
        assert_eq!(recent.quantile(1.0), Some(Duration::from_micros(1_100)));
    }

    #[test]
    fn a_rooms_traffic_counts_each_message_in_and_each_copy_out() {
        let (mut shard, now) = shard_with_relay(4);
        let traffic = |shard: &Shard| shard.rooms().next().unwrap().traffic;
        let before = traffic(&shard);
        shard.message(now, PlayerId(3), 2, Bytes::from(vec![7u8; 100]));
        shard.run(tick_after(now));
        assert_eq!(sends(&mut shard).len(), 3);
        let after = traffic(&shard);
        assert_eq!(
            (
                after.messages_in - before.messages_in,
                after.bytes_in - before.bytes_in,
                after.messages_out - before.messages_out,
                after.bytes_out - before.bytes_out,
            ),
            (1, 100, 3, 300),
            "one message of 100 bytes in, relayed to three players"
        );
        // A player without a seat reaches no room, so no room counts it.
        shard.message(now, PlayerId(99), 2, Bytes::from(vec![7u8; 100]));
        assert_eq!(traffic(&shard), after);
    }

    #[test]
    fn a_dropped_player_keeps_their_seat_through_the_grace_period() {
        let (mut shard, now) = shard_with_relay(2);
        shard.connection_lost(now, PlayerId(1));
        shard.message(now, PlayerId(1), 0, Bytes::from_static(b"ghost"));
        assert_eq!(shard.stats().messages_unrouted, 1);
        shard.message(now, PlayerId(2), 0, Bytes::from_static(b"hello?"));
        shard.run(tick_after(now));
        assert!(
            sends(&mut shard).is_empty(),
            "nothing is sent to a dropped player"
        );

        let later = now + Duration::from_secs(20);
        shard.run(later);
        assert_eq!(
            shard.reconnect(later, PlayerId(1)),
            Some((RoomId(1), Seat(0)))
        );
        shard.message(later, PlayerId(2), 0, Bytes::from_static(b"welcome back"));
        shard.run(tick_after(later));
        assert_eq!(sends(&mut shard).len(), 1);
    }

    #[test]
    fn a_seat_held_again_expires_on_its_latest_hold_only() {
        let (mut shard, now) = shard_with_relay(2);
        let secs = |s| now + Duration::from_secs(s);
        shard.connection_lost(now, PlayerId(1));
        assert!(shard.reconnect(secs(5), PlayerId(1)).is_some());
        shard.connection_lost(secs(10), PlayerId(1));
        // The first hold (expiring at 30 s) is stale: the seat now lasts until 40 s.
        shard.run(secs(31));
        assert_eq!(shard.stats().seats_expired, 0);
        assert_eq!(shard.room_of(PlayerId(1)), Some(RoomId(1)));
        shard.run(secs(41));
        assert_eq!(shard.stats().seats_expired, 1);
        assert_eq!(shard.room_of(PlayerId(1)), None);
        // Player 2 is still seated, so the room lives on; its next tick is the deadline.
        let next = shard.next_deadline().unwrap();
        assert!(next > secs(41) && next <= secs(41) + Duration::from_millis(17));
    }

    #[test]
    fn a_seat_not_reclaimed_in_time_is_given_up() {
        let (mut shard, now) = shard_with_relay(2);
        shard.connection_lost(now, PlayerId(1));
        assert_eq!(
            shard
                .next_deadline()
                .map(|at| at <= now + Duration::from_secs(30)),
            Some(true)
        );
        shard.run(now + Duration::from_secs(31));
        assert_eq!(shard.stats().seats_expired, 1);
        assert_eq!(shard.room_of(PlayerId(1)), None);
        assert_eq!(
            shard.reconnect(now + Duration::from_secs(31), PlayerId(1)),
            None
        );
        let seat = shard.join(
            now + Duration::from_secs(31),
            RoomId(1),
            PlayerId(3),
            "p3".into(),
        );
        assert_eq!(seat, Ok(Seat(0)), "the seat is free again");
    }

    #[test]
    fn an_empty_room_is_disposed_of_after_its_time_to_live() {
        let (mut shard, now) = shard_with_relay(1);
        shard.leave(now, PlayerId(1), LeaveReason::Left);
        shard.run(now + Duration::from_secs(29));
        assert_eq!(shard.rooms().count(), 1, "still there within the ttl");
        shard.run(now + Duration::from_secs(30));
        assert_eq!(shard.rooms().count(), 0);
        assert_eq!(shard.stats().rooms_disposed, 1);
        assert_eq!(
            shard.join(now, RoomId(1), PlayerId(1), "p1".into()),
            Err(JoinError::NoSuchRoom(RoomId(1)))
        );
    }

    #[test]
    fn a_player_sits_in_one_room_at_a_time() {
        let (mut shard, now) = shard_with_relay(1);
        shard
            .create_room(now, RoomId(2), "relay", Box::new(RelayRoom::default()), 4)
            .unwrap();
        assert_eq!(
            shard.join(now, RoomId(2), PlayerId(1), "p1".into()),
            Err(JoinError::AlreadySeated(RoomId(1)))
        );
    }

    #[test]
    fn a_flooding_player_is_rate_limited_then_disconnected() {
        let now = Instant::now();
        let mut shard = Shard::new(ShardConfig {
            message_limit: MessageLimitConfig {
                rate: 10.0,
                burst: 5,
                max_violations: 20,
                violation_window: Duration::from_secs(1),
            },
            ..ShardConfig::default()
        });
        shard
            .create_room(now, RoomId(1), "relay", Box::new(RelayRoom::default()), 4)
            .unwrap();
        shard
            .join(now, RoomId(1), PlayerId(1), "flood".into())
            .unwrap();
        shard
            .join(now, RoomId(1), PlayerId(2), "calm".into())
            .unwrap();
        shard.drain_outputs().for_each(drop);
        for _ in 0..5 {
            shard.message(now, PlayerId(1), 0, Bytes::from_static(b"x"));
        }
        shard.run(tick_after(now));
        assert_eq!(sends(&mut shard).len(), 5, "the burst goes through");
        for _ in 0..20 {
            shard.message(now, PlayerId(1), 0, Bytes::from_static(b"x"));
        }
        // The relay's next tick: anything it had taken would go now.
        shard.run(tick_after(tick_after(now)));
        let outputs: Vec<_> = shard.drain_outputs().collect();
        assert!(
            outputs
                .iter()
                .all(|output| !matches!(output, ShardOutput::Send { .. })),
            "nothing over the limit is relayed"
        );
        assert!(outputs.contains(&ShardOutput::Seat(SeatChange::Unseated {
            player: PlayerId(1),
            room: RoomId(1)
        })));
        assert!(outputs.contains(&ShardOutput::Disconnect {
            player: PlayerId(1),
            reason: "message flood".into()
        }));
        assert_eq!(shard.room_of(PlayerId(1)), None);
        assert_eq!(shard.stats().messages_rate_limited, 20);
        assert_eq!(shard.stats().players_flooding, 1);
    }

    /// Says nothing to a message but sets a timer, and rings when it fires.
    struct Alarm;

    impl Room for Alarm {
        fn tick_rate_hz(&self) -> u32 {
            1
        }

        fn message(
            &mut self,
            ctx: &mut crate::room::RoomContext<'_>,
            _: PlayerId,
            _: u8,
            _: Bytes,
        ) {
            ctx.delay(crate::timers::TimerId(1), Duration::from_millis(5));
        }

        fn timer(&mut self, ctx: &mut crate::room::RoomContext<'_>, _: crate::timers::TimerId) {
            ctx.broadcast(0, Bytes::from_static(b"ring"));
        }
    }

    #[test]
    fn a_timer_set_by_a_message_that_sends_nothing_still_fires_on_time() {
        let now = Instant::now();
        let mut shard = Shard::new(ShardConfig::default());
        shard
            .create_room(now, RoomId(1), "alarm", Box::new(Alarm), 4)
            .unwrap();
        shard
            .join(now, RoomId(1), PlayerId(1), "p1".into())
            .unwrap();
        shard.run(now);
        shard.drain_outputs().for_each(drop);
        // The next tick is a second away; the timer 5 ms.
        shard.message(now, PlayerId(1), 0, Bytes::from_static(b"set"));
        assert!(sends(&mut shard).is_empty());
        let due = shard.next_deadline().unwrap();
        assert!(
            due <= now + Duration::from_millis(5),
            "the shard wakes for it"
        );
        shard.run(due);
        let sent = sends(&mut shard);
        assert_eq!(sent, [(PlayerId(1), 0, Bytes::from_static(b"ring"))]);
    }

    /// What the shard sent since the last call, as text.
    fn texts(shard: &mut Shard) -> Vec<String> {
        sends(shard)
            .into_iter()
            .map(|(_, _, message)| String::from_utf8(message.to_vec()).unwrap())
            .collect()
    }

    /// Sends "tick n" from each tick and "publish after n" from its publish phase.
    #[derive(Default)]
    struct Phases {
        ticks: u32,
    }

    impl Room for Phases {
        fn tick(&mut self, ctx: &mut crate::room::RoomContext<'_>) {
            self.ticks += 1;
            ctx.broadcast(0, Bytes::from(format!("tick {}", self.ticks)));
        }

        fn publish(&mut self, ctx: &mut crate::room::RoomContext<'_>) {
            ctx.broadcast(0, Bytes::from(format!("publish after {}", self.ticks)));
        }
    }

    #[test]
    fn rooms_created_apart_tick_on_one_grid() {
        let start = Instant::now();
        let mut shard = Shard::new(ShardConfig::default());
        shard
            .create_room(start, RoomId(1), "phases", Box::new(Phases::default()), 4)
            .unwrap();
        // 5 ms later, between two 60 Hz ticks: the second room starts on the next one.
        let later = start + Duration::from_millis(5);
        shard
            .create_room(later, RoomId(2), "phases", Box::new(Phases::default()), 4)
            .unwrap();
        let next = |shard: &Shard, id| shard.rooms[&RoomId(id)].host.next_deadline();
        assert_eq!(next(&shard, 1), start);
        assert_eq!(
            next(&shard, 2),
            start + Duration::from_nanos(16_666_666),
            "the second room waits for the shard's next 60 Hz tick"
        );
        shard.run(start);
        assert_eq!(
            next(&shard, 1).saturating_duration_since(next(&shard, 2)),
            Duration::ZERO,
            "both rooms are next due together"
        );
        assert!(
            next(&shard, 2).saturating_duration_since(next(&shard, 1)) <= Duration::from_nanos(1)
        );
    }

    #[test]
    fn publish_follows_the_ticks_of_a_turn_once() {
        let start = Instant::now();
        let mut shard = Shard::new(ShardConfig::default());
        shard
            .create_room(start, RoomId(1), "phases", Box::new(Phases::default()), 4)
            .unwrap();
        shard
            .join(start, RoomId(1), PlayerId(1), "a".into())
            .unwrap();
        shard.drain_outputs().for_each(drop);
        let mut clock = Instant::now;
        // Three ticks due at once (0, 1 and 2 at 60 Hz): their events, and nothing more,
        // until the publish phase, which runs once.
        shard.tick_due(start + Duration::from_millis(40), &mut clock);
        assert_eq!(texts(&mut shard), ["tick 1", "tick 2", "tick 3"]);
        shard.publish_due(start + Duration::from_millis(40), &mut clock);
        assert_eq!(texts(&mut shard), ["publish after 3"]);
        shard.publish_due(start + Duration::from_millis(41), &mut clock);
        assert!(texts(&mut shard).is_empty(), "no tick, no publish");
        shard.run(start + Duration::from_millis(50));
        assert_eq!(texts(&mut shard), ["tick 4", "publish after 4"]);
        assert_eq!(shard.tick_times()["phases"].count(), 3, "timed ticks only");
    }

    /// As [`Phases`], its publish taking a fixed time on a fake clock.
    struct SlowPublish {
        phases: Phases,
        cost: Duration,
        clock: std::sync::Arc<std::sync::Mutex<Instant>>,
    }

    impl Room for SlowPublish {
        fn tick(&mut self, ctx: &mut crate::room::RoomContext<'_>) {
            self.phases.tick(ctx);
        }

        fn publish(&mut self, ctx: &mut crate::room::RoomContext<'_>) {
            self.phases.publish(ctx);
            *self.clock.lock().unwrap() += self.cost;
        }
    }

    /// A fake clock in milliseconds from `start`.
    struct FakeClock {
        start: Instant,
        now: std::sync::Arc<std::sync::Mutex<Instant>>,
    }

    impl FakeClock {
        fn at(&self, ms: f64) -> Instant {
            self.start + Duration::from_secs_f64(ms / 1e3)
        }

        fn set(&self, ms: f64) {
            *self.now.lock().unwrap() = self.at(ms);
        }

        /// A tick due at `tick` ms, then the publish phase at `publish` ms.
        fn turn(&self, shard: &mut Shard, tick: f64, publish: f64) {
            let mut clock = || *self.now.lock().unwrap();
            self.set(tick);
            shard.tick_due(self.at(tick), &mut clock);
            self.set(publish);
            shard.publish_due(self.at(tick), &mut clock);
        }
    }

    /// A shard holding one [`SlowPublish`] room of one player, whose publish takes `cost`.
    fn slow_publish_shard(cost: Duration) -> (Shard, FakeClock) {
        let start = Instant::now();
        let fake = FakeClock {
            start,
            now: std::sync::Arc::new(std::sync::Mutex::new(start)),
        };
        let room = SlowPublish {
            phases: Phases::default(),
            cost,
            clock: fake.now.clone(),
        };
        let mut shard = Shard::new(ShardConfig::default());
        shard
            .create_room(start, RoomId(1), "slow", Box::new(room), 4)
            .unwrap();
        shard
            .join(start, RoomId(1), PlayerId(1), "a".into())
            .unwrap();
        shard.drain_outputs().for_each(drop);
        (shard, fake)
    }

    #[test]
    fn a_publish_that_would_run_into_the_next_tick_waits_for_it_once() {
        let (mut shard, fake) = slow_publish_shard(Duration::from_millis(5));

        // Tick 1 at 0 ms, its publish at 1 ms: 5 ms, well before tick 2 (16.7 ms).
        fake.turn(&mut shard, 0.0, 1.0);
        assert_eq!(texts(&mut shard), ["tick 1", "publish after 1"]);

        // Tick 2 at 16.7 ms; its sends and reading ran long, and its publish would start at
        // 30 ms: with the last one's 5 ms it would run past tick 3 (33.3 ms). It waits.
        fake.turn(&mut shard, 16.7, 30.0);
        assert_eq!(texts(&mut shard), ["tick 2"]);
        assert!(shard.publish_pending());
        assert_eq!(shard.stats().publishes_waited, 1);

        // Tick 3 goes first; the publish after it covers both ticks, however near tick 4.
        fake.turn(&mut shard, 33.4, 49.0);
        assert_eq!(texts(&mut shard), ["tick 3", "publish after 3"]);
        assert!(!shard.publish_pending());
        assert_eq!(shard.stats().publishes_waited, 1);
        assert_eq!(shard.tick_times()["slow"].count(), 3, "every tick timed");

        // Back on time: tick 4 at 50 ms, its publish at 51 ms.
        fake.turn(&mut shard, 50.1, 51.0);
        assert_eq!(texts(&mut shard), ["tick 4", "publish after 4"]);
    }

    /// The same room, its snapshots taking 6 ms to send after its 5 ms publish: the next
    /// publish is expected to take 11 ms, and one that starts 7.3 ms before the next tick
    /// waits for it, where the encoding's 5 ms alone would have let it start. Each publish
    /// sets the estimate anew.
    #[test]
    fn a_publish_expects_its_sends_as_well_as_its_encoding() {
        let (mut shard, fake) = slow_publish_shard(Duration::from_millis(5));

        fake.turn(&mut shard, 0.0, 1.0);
        shard.publish_sent(Duration::from_millis(6));
        assert_eq!(texts(&mut shard), ["tick 1", "publish after 1"]);

        // Tick 2 at 16.7 ms, its publish at 26 ms: 26 + 5 is before tick 3 (33.3 ms), 26 + 11
        // is not.
        fake.turn(&mut shard, 16.7, 26.0);
        assert_eq!(
            texts(&mut shard),
            ["tick 2"],
            "the publish waits for tick 3"
        );
        assert_eq!(shard.stats().publishes_waited, 1);

        // The publish after tick 3 covers both ticks; its sends take 1 ms, so the next is
        // expected to take 6 ms, not the 11 before: at 59 ms it fits before tick 5
        // (66.7 ms), where 11 ms would not.
        shard.publish_sent(Duration::ZERO);
        fake.turn(&mut shard, 33.4, 34.0);
        shard.publish_sent(Duration::from_millis(1));
        assert_eq!(texts(&mut shard), ["tick 3", "publish after 3"]);
        fake.turn(&mut shard, 50.1, 59.0);
        assert_eq!(texts(&mut shard), ["tick 4", "publish after 4"]);
        assert_eq!(shard.stats().publishes_waited, 1);
    }

    /// A room whose every tick takes a fixed time on a fake clock.
    struct Busy {
        cost: Duration,
        clock: std::sync::Arc<std::sync::Mutex<Instant>>,
    }

    impl Room for Busy {
        fn tick(&mut self, _ctx: &mut crate::room::RoomContext<'_>) {
            *self.clock.lock().unwrap() += self.cost;
        }
    }

    #[test]
    fn tick_times_are_recorded_per_kind_and_overruns_counted() {
        let start = Instant::now();
        let fake = std::sync::Arc::new(std::sync::Mutex::new(start));
        let mut shard = Shard::new(ShardConfig::default());
        let quick = Busy {
            cost: Duration::from_millis(2),
            clock: fake.clone(),
        };
        let slow = Busy {
            cost: Duration::from_millis(25),
            clock: fake.clone(),
        };
        shard
            .create_room(start, RoomId(1), "quick", Box::new(quick), 4)
            .unwrap();
        shard
            .create_room(start, RoomId(2), "slow", Box::new(slow), 4)
            .unwrap();
        shard
            .join(start, RoomId(1), PlayerId(1), "a".into())
            .unwrap();
        shard
            .join(start, RoomId(2), PlayerId(2), "b".into())
            .unwrap();
        let mut clock = || *fake.lock().unwrap();
        for ms in (0..=1_000).step_by(10) {
            shard.run_timed(start + Duration::from_millis(ms), &mut clock);
        }
        // This clock only adds the ticks' costs, so it runs ahead of the turns (27 ms of
        // ticks in every 16.7 ms): each publish waits for the room's next tick, and the
        // last one still waits. It runs with the clock back at its turn's time.
        *fake.lock().unwrap() = start + Duration::from_millis(1_000);
        shard.publish_due(start + Duration::from_millis(1_000), &mut clock);
        assert!(!shard.publish_pending());
        let times = shard.tick_times();
        let quick = &times["quick"];
        let slow = &times["slow"];
        assert_eq!(quick.count(), 61, "60 Hz for one second, tick 0 included");
        assert_eq!(quick.overruns(), 0);
        assert!(
            quick.quantile(0.99) >= Duration::from_micros(1_990)
                && quick.max() <= Duration::from_micros(2_010)
        );
        assert_eq!(
            slow.overruns(),
            slow.count(),
            "25 ms ticks overrun a 16.7 ms step"
        );
        assert!(slow.quantile(0.5) >= Duration::from_millis(24));
    }

    #[test]
    fn rooms_tick_on_schedule_inside_the_shard() {
        let (mut shard, now) = shard_with_relay(1);
        for ms in (0..=100).step_by(10) {
            shard.run(now + Duration::from_millis(ms));
        }
        assert_eq!(shard.stats().ticks, 7, "60 Hz: ticks 0..=6 by 100 ms");
        assert_eq!(shard.stats().ticks_skipped, 0);
        assert_eq!(
            shard.next_deadline(),
            Some(now + Duration::from_nanos(116_666_666))
        );
    }
}
