//! [`ArenaRoom`]: the arena as a `tickwire-room` [`Room`], and [`ArenaRoomFactory`] to
//! register it.
//!
//! # Lifecycle
//!
//! - **join**: the player enters the world at a spawn point, gets an entity id and a
//!   [`ServerMessage::Welcome`] on channel 0, then the roster (a [`ServerMessage::Player`]
//!   per player in the room) and the scoreboard; everyone else hears the newcomer's
//!   `Player` — while the room is within [`ArenaConfig::roster_limit`]: a crowd beyond it
//!   is known by entity id only, and hears the scoreboard with its next broadcast.
//!   Snapshots follow from the next tick. The [`StatSink`] hears
//!   [`StatEvent::Joined`] with the player's name.
//! - **message**: inputs (channel 1) go straight into the world, which merges every input
//!   of a tick (newest sequence wins, a fire press anywhere counts, stale ones ignored) and
//!   clamps them; the ack moves the player's delta baseline. Chat and pings come on channel
//!   0. Malformed messages, hostile inputs (NaN, out of range), acks from the future and
//!   unknown channels are counted ([`ArenaStats`]); past
//!   [`ArenaConfig::max_violations`] the sender is kicked.
//! - **tick**: one world step; kills are broadcast, hits go to the two players involved,
//!   respawns and teleports to the player; the [`StatSink`] hears kills; the scoreboard
//!   ([`ServerMessage::Scores`]) goes to everyone when it changed, at most every
//!   [`ArenaConfig::scoreboard_interval_ticks`].
//! - **publish** (after the turn's ticks, once their events are on their way): one frame
//!   is captured and each connected player whose turn it is gets a snapshot on channel 2.
//! - **disconnected**: the avatar stays in the world for the reconnect grace period, where
//!   it can be shot; with no inputs it stops after
//!   [`WorldConfig::idle_stop_ticks`](crate::WorldConfig::idle_stop_ticks). No snapshots
//!   are sent meanwhile.
//! - **reconnected**: a new welcome, roster and scoreboard, and every baseline is
//!   forgotten (the next snapshot is a full one: the acks of the old connection mean
//!   nothing for the new one).
//! - **leave**: everyone hears [`ServerMessage::Left`]; the avatar is removed, its id
//!   released, and the [`StatSink`] gets a
//!   [`StatEvent::SessionEnded`] with the session's kills, deaths, score and duration.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tickwire_room::room::{JoinRefused, LeaveReason, Member, PlayerId, Room, RoomContext};
use tickwire_room::shard::RoomId;
use tickwire_wire::{decode_exact, encode_to_slice};

use crate::config::{ConfigError, WorldConfig};
use crate::event::GameEvent;
use crate::map::ArenaMap;
use crate::messages::{
    ClientInput, ClientMessage, INPUT, MAX_ANNOUNCEMENT_BYTES, MAX_NAME_BYTES, MAX_SCORES,
    NO_ENTITY, PROTOCOL_VERSION, RELIABLE, SNAPSHOT, Score, ServerMessage, truncate_utf8,
};
use crate::player::PlayerKey;
use crate::snapshot::{
    EntityId, EntityIds, SchemaError, SnapshotConfig, SnapshotConfigError, SnapshotEncoder,
    SnapshotSchema,
};
use crate::world::World;

mod occupants;

use occupants::{Occupant, Occupants};

/// A publish sends at most `1 / OUT_OF_TURN_SHARE` as many snapshots out of turn as are due
/// in turn.
const OUT_OF_TURN_SHARE: usize = 4;

/// The arena room's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ArenaConfig {
    /// The simulation.
    pub world: WorldConfig,
    /// Snapshots: budget, bandwidth, interest, view cap.
    pub snapshot: SnapshotConfig,
    /// Malformed messages, hostile inputs and bogus acks tolerated from one player before
    /// they are kicked. Default 50: a buggy client is noticed, not a single bad packet.
    pub max_violations: u32,
    /// Ticks between two chat lines of one player; faster lines are dropped and counted.
    /// Default 30 (two lines a second at 60 Hz).
    pub chat_interval_ticks: u32,
    /// Ticks between two scoreboards; one goes out only when a score, a join or a leave
    /// changed it. Default 30 (at most two a second at 60 Hz).
    pub scoreboard_interval_ticks: u32,
    /// Names ([`ServerMessage::Player`], [`ServerMessage::Left`]) are exchanged while the
    /// room holds at most this many players. Default 128. Each join costs every member a
    /// message and the newcomer one per member, so a crowd of thousands filling up would
    /// send millions; beyond the limit players are known by entity id only.
    pub roster_limit: usize,
    /// A player gets a snapshot every this many ticks. Default 1 (every tick). Above 1,
    /// players are spread over the ticks (a room of 3,000 at 3 encodes about 1,000 snapshots
    /// a tick), and a player who teleported or respawned gets one right after that tick
    /// whatever the interval, so the change is confirmed at once.
    pub snapshot_interval_ticks: u32,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        Self {
            world: WorldConfig::default(),
            snapshot: SnapshotConfig::default(),
            max_violations: 50,
            chat_interval_ticks: 30,
            scoreboard_interval_ticks: 30,
            roster_limit: 128,
            snapshot_interval_ticks: 1,
        }
    }
}

/// Why an arena room cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArenaConfigError {
    /// The world config is refused.
    #[error(transparent)]
    World(#[from] ConfigError),
    /// The snapshot config is refused.
    #[error(transparent)]
    Snapshot(#[from] SnapshotConfigError),
    /// The map or max health do not fit the snapshot format.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// Rooms tick at 1 to 128 Hz.
    #[error("tick rate {0} Hz is outside the room runtime's 1..=128")]
    TickRate(u32),
    /// Snapshots go out every 1 to 60 ticks.
    #[error("snapshot interval {0} ticks is outside 1..=60")]
    SnapshotInterval(u32),
}

/// What the persistence layer stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatEvent {
    /// A player took a seat (or came back to it after leaving): who they are.
    Joined {
        /// The room.
        room: RoomId,
        /// Who.
        player: PlayerId,
        /// Their display name.
        name: String,
    },
    /// A kill (there is one weapon, so none is named).
    Kill {
        /// Who fired the last bullet.
        killer: PlayerId,
        /// Who died.
        victim: PlayerId,
    },
    /// A player left the room: their session's totals.
    SessionEnded {
        /// The room.
        room: RoomId,
        /// Who.
        player: PlayerId,
        /// Kills in the session.
        kills: u32,
        /// Deaths in the session.
        deaths: u32,
        /// Score in the session.
        score: u32,
        /// From joining to leaving.
        duration: Duration,
    },
}

/// Receives [`StatEvent`]s on the room's shard thread; must not block (hand them to a
/// queue).
pub trait StatSink: Send + Sync + 'static {
    /// One event.
    fn record(&self, event: StatEvent);
}

/// Drops every event: the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStats;

impl StatSink for NoStats {
    fn record(&self, _event: StatEvent) {}
}

/// Counters of one room; they only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArenaStats {
    /// Messages that did not decode.
    pub malformed: u64,
    /// Inputs refused as hostile (NaN, out of range, unknown buttons).
    pub hostile_inputs: u64,
    /// Acks of ticks never sent.
    pub bad_acks: u64,
    /// Messages on a channel the arena does not use.
    pub unknown_channel: u64,
    /// Chat lines over the rate, dropped.
    pub chat_dropped: u64,
    /// Players kicked for violations.
    pub kicked: u64,
    /// Snapshots sent.
    pub snapshots: u64,
    /// Snapshot bytes sent.
    pub snapshot_bytes: u64,
}

/// Makes [`ArenaRoom`]s; the server registers [`into_factory`](Self::into_factory) with
/// its room kinds (`kinds.register("arena", 64, factory.into_factory())` on
/// `tickwire_server::runtime::RoomKinds`):
///
/// ```
/// use std::sync::Arc;
/// use tickwire_arena::room::{ArenaConfig, ArenaRoomFactory};
/// use tickwire_arena::BuiltinMap;
/// use tickwire_room::room::Room;
///
/// let map = Arc::new(BuiltinMap::Courtyard.load()?);
/// let factory = ArenaRoomFactory::new(map, ArenaConfig::default(), 7)?;
/// let make = factory.into_factory();
/// let room = make();
/// assert_eq!(room.tick_rate_hz(), ArenaConfig::default().world.tick_rate_hz);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ArenaRoomFactory {
    map: Arc<ArenaMap>,
    config: ArenaConfig,
    schema: SnapshotSchema,
    seed: u64,
    rooms: AtomicU64,
    stats: Arc<dyn StatSink>,
}

impl std::fmt::Debug for ArenaRoomFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArenaRoomFactory")
            .field("map", &self.map.name())
            .field("config", &self.config)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl ArenaRoomFactory {
    /// Rooms on `map` with `config`; room `n` (from 0) is seeded with `seed + n`.
    pub fn new(
        map: Arc<ArenaMap>,
        config: ArenaConfig,
        seed: u64,
    ) -> Result<Self, ArenaConfigError> {
        config.world.validate()?;
        config.snapshot.validate()?;
        if !(1..=128).contains(&config.world.tick_rate_hz) {
            return Err(ArenaConfigError::TickRate(config.world.tick_rate_hz));
        }
        if !(1..=60).contains(&config.snapshot_interval_ticks) {
            return Err(ArenaConfigError::SnapshotInterval(
                config.snapshot_interval_ticks,
            ));
        }
        let schema = SnapshotSchema::new(map.size(), config.world.max_health)?;
        // Catches what only a world on this map refuses (grid size).
        World::new(map.clone(), config.world.clone(), seed)?;
        Ok(Self {
            map,
            config,
            schema,
            seed,
            rooms: AtomicU64::new(0),
            stats: Arc::new(NoStats),
        })
    }

    /// Sends every room's [`StatEvent`]s to `sink`.
    pub fn with_stat_sink(mut self, sink: Arc<dyn StatSink>) -> Self {
        self.stats = sink;
        self
    }

    /// A new room.
    pub fn create(&self) -> ArenaRoom {
        let n = self.rooms.fetch_add(1, Ordering::Relaxed);
        ArenaRoom::new(
            self.map.clone(),
            self.config.clone(),
            self.schema,
            self.seed.wrapping_add(n),
            self.stats.clone(),
        )
    }

    /// The factory `RoomKinds::register` takes.
    pub fn into_factory(self) -> impl Fn() -> Box<dyn Room> + Send + Sync + 'static {
        move || Box::new(self.create())
    }
}

/// The arena game as a room (see the module docs for its lifecycle).
pub struct ArenaRoom {
    world: World,
    ids: EntityIds,
    encoder: SnapshotEncoder,
    config: ArenaConfig,
    occupants: Occupants,
    /// The next joiner's snapshot phase.
    next_phase: u32,
    /// The tick of the last publish: a turn that ran several ticks publishes once, for
    /// every player due in any of them.
    published_tick: u64,
    sink: Arc<dyn StatSink>,
    stats: ArenaStats,
    /// A score, a join or a leave changed the scoreboard since it was last sent.
    scores_changed: bool,
    packet: Vec<u8>,
    message: Vec<u8>,
    /// Snapshots are cut from here; once the transports drop last tick's, its space is
    /// reused and a tick allocates nothing for them.
    arena: BytesMut,
    /// What the last publish's snapshots took, bytes: the arena is sized on it.
    published_bytes: usize,
}

impl std::fmt::Debug for ArenaRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArenaRoom")
            .field("tick", &self.world.tick())
            .field("players", &self.occupants.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl ArenaRoom {
    fn new(
        map: Arc<ArenaMap>,
        config: ArenaConfig,
        schema: SnapshotSchema,
        seed: u64,
        sink: Arc<dyn StatSink>,
    ) -> Self {
        let size = map.size();
        let world = match World::new(map, config.world.clone(), seed) {
            Ok(world) => world,
            // The factory made a world with this very map and config.
            Err(error) => unreachable!("config validated by the factory: {error}"),
        };
        let encoder = match SnapshotEncoder::new(
            schema,
            size,
            config.snapshot.clone(),
            config.world.tick_rate_hz,
        ) {
            Ok(encoder) => encoder,
            Err(error) => unreachable!("config validated by the factory: {error}"),
        };
        Self {
            packet: vec![0; config.snapshot.packet_budget],
            message: vec![0; 1024],
            world,
            ids: EntityIds::new(),
            encoder,
            config,
            occupants: Occupants::default(),
            next_phase: 0,
            published_tick: 0,
            sink,
            stats: ArenaStats::default(),
            scores_changed: false,
            arena: BytesMut::new(),
            published_bytes: 0,
        }
    }

    /// The simulation.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The room's counters.
    pub fn stats(&self) -> &ArenaStats {
        &self.stats
    }

    /// A player's entity id.
    pub fn entity_of(&self, player: PlayerId) -> Option<EntityId> {
        self.occupants.get(player).map(|o| o.entity)
    }

    fn encode_message(&mut self, message: &ServerMessage) -> Option<Bytes> {
        // Every message is bounded well under the buffer; a failure is a bug, not a peer.
        let len = encode_to_slice(message, &mut self.message).ok()?;
        Some(Bytes::copy_from_slice(&self.message[..len]))
    }

    fn welcome(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId) {
        let Some(entity) = self.entity_of(player) else {
            return;
        };
        let map = self.world.map();
        let config = self.world.config();
        let welcome = ServerMessage::Welcome {
            protocol: PROTOCOL_VERSION,
            you: entity,
            map: truncate_utf8(map.name(), 64).to_owned(),
            map_width: map.size().x,
            map_height: map.size().y,
            tick_rate_hz: config.tick_rate_hz as u16,
            tick: self.world.tick() as u32,
            max_health: config.max_health,
            max_speed: config.max_speed,
            player_radius: config.player_radius,
            snapshot_history: self.config.snapshot.history as u8,
        };
        if let Some(bytes) = self.encode_message(&welcome) {
            ctx.send(player, RELIABLE, bytes);
        }
    }

    /// Tells `player` who every player in the room is (themself included).
    fn roster(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId) {
        for index in 0..self.occupants.len() {
            let Some(occupant) = self.occupants.at(index) else {
                continue;
            };
            let message = ServerMessage::Player {
                id: occupant.entity,
                name: occupant.name.clone(),
            };
            if let Some(bytes) = self.encode_message(&message) {
                ctx.send(player, RELIABLE, bytes);
            }
        }
    }

    /// Whether names are exchanged in a room of this many players.
    fn within_roster_limit(&self, players: usize) -> bool {
        players <= self.config.roster_limit
    }

    /// The scoreboard: the best [`MAX_SCORES`] by score, then kills, then id.
    fn scoreboard(&self) -> ServerMessage {
        let mut scores: Vec<Score> = self
            .occupants
            .iter()
            .filter_map(|occupant| {
                let stats = self.world.player(occupant.key)?.stats();
                Some(Score {
                    id: occupant.entity,
                    kills: stats.kills,
                    deaths: stats.deaths,
                    score: stats.score,
                })
            })
            .collect();
        let best_first = |a: &Score, b: &Score| {
            (b.score, b.kills)
                .cmp(&(a.score, a.kills))
                .then(a.id.cmp(&b.id))
        };
        // The top of thousands without sorting them all.
        if scores.len() > MAX_SCORES {
            scores.select_nth_unstable_by(MAX_SCORES, best_first);
            scores.truncate(MAX_SCORES);
        }
        scores.sort_unstable_by(best_first);
        ServerMessage::Scores { scores }
    }

    fn violation(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId) {
        let max = self.config.max_violations;
        let Some(occupant) = self.occupants.get_mut(player) else {
            return;
        };
        occupant.violations += 1;
        if occupant.violations > max && !occupant.kicked {
            occupant.kicked = true;
            self.stats.kicked += 1;
            ctx.kick(
                player,
                format!("more than {max} malformed or hostile messages"),
            );
        }
    }

    fn entity_or_none(&self, key: PlayerKey) -> EntityId {
        self.ids.get(key).unwrap_or(NO_ENTITY)
    }

    fn handle_event(&mut self, ctx: &mut RoomContext<'_>, event: GameEvent) {
        let message = match event {
            GameEvent::Kill { killer, victim } => {
                self.scores_changed = true;
                self.sink.record(StatEvent::Kill {
                    killer: PlayerId(killer.0),
                    victim: PlayerId(victim.0),
                });
                let message = ServerMessage::Kill {
                    killer: self.entity_or_none(killer),
                    victim: self.entity_or_none(victim),
                };
                if let Some(bytes) = self.encode_message(&message) {
                    ctx.broadcast(RELIABLE, bytes);
                }
                return;
            }
            GameEvent::Hit {
                attacker,
                victim,
                damage,
                health,
            } => {
                self.scores_changed = true;
                let message = ServerMessage::Hit {
                    attacker: self.entity_or_none(attacker),
                    victim: self.entity_or_none(victim),
                    damage,
                    health,
                };
                if let Some(bytes) = self.encode_message(&message) {
                    for key in [attacker, victim] {
                        if self.connected(PlayerId(key.0)) {
                            ctx.send(PlayerId(key.0), RELIABLE, bytes.clone());
                        }
                    }
                }
                return;
            }
            GameEvent::Respawn { player, position } => (
                self.refresh(player),
                ServerMessage::Respawn {
                    x: position.x,
                    y: position.y,
                },
            ),
            GameEvent::Teleported {
                player,
                teleport,
                to,
                ..
            } => (
                self.refresh(player),
                ServerMessage::Teleported {
                    teleport,
                    x: to.x,
                    y: to.y,
                },
            ),
        };
        let (player, message) = message;
        if self.connected(PlayerId(player.0))
            && let Some(bytes) = self.encode_message(&message)
        {
            ctx.send(PlayerId(player.0), RELIABLE, bytes);
        }
    }

    /// Marks `player` for a snapshot out of turn, right after this tick unless a crowd was
    /// marked too; returns the player.
    fn refresh(&mut self, player: PlayerKey) -> PlayerKey {
        if let Some(occupant) = self.occupants.get_mut(PlayerId(player.0)) {
            occupant.refresh = true;
        }
        player
    }

    fn connected(&self, player: PlayerId) -> bool {
        self.occupants.get(player).is_some_and(|o| o.connected)
    }

    fn handle_input(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, message: &[u8]) {
        let Ok(input) = decode_exact::<ClientInput>(message) else {
            self.stats.malformed += 1;
            return self.violation(ctx, from);
        };
        let Some(occupant) = self.occupants.get_mut(from) else {
            return;
        };
        let key = occupant.key;
        let mut violations = 0;
        if let Some(ack) = input.ack
            && occupant.snapshots.handle_ack(ack).is_err()
        {
            self.stats.bad_acks += 1;
            violations += 1;
        }
        // Oldest first, so the newest sequence is the one the step applies.
        for command in input.inputs().iter().rev() {
            if let Err(error) = self.world.handle_input(key, command)
                && error.is_hostile()
            {
                self.stats.hostile_inputs += 1;
                violations += 1;
            }
        }
        for _ in 0..violations {
            self.violation(ctx, from);
        }
    }

    fn handle_reliable(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, message: &[u8]) {
        let Ok(message) = decode_exact::<ClientMessage>(message) else {
            self.stats.malformed += 1;
            return self.violation(ctx, from);
        };
        let tick = self.world.tick();
        let interval = u64::from(self.config.chat_interval_ticks);
        let Some(occupant) = self.occupants.get_mut(from) else {
            return;
        };
        match message {
            ClientMessage::Chat { text } => {
                if tick < occupant.next_chat_tick {
                    self.stats.chat_dropped += 1;
                    return;
                }
                occupant.next_chat_tick = tick + interval;
                let chat = ServerMessage::Chat {
                    from: occupant.entity,
                    text,
                };
                if let Some(bytes) = self.encode_message(&chat) {
                    ctx.broadcast(RELIABLE, bytes);
                }
            }
            ClientMessage::Ping { nonce } => {
                let pong = ServerMessage::Pong {
                    nonce,
                    tick: tick as u32,
                };
                if let Some(bytes) = self.encode_message(&pong) {
                    ctx.send(from, RELIABLE, bytes);
                }
            }
        }
    }
}

impl Room for ArenaRoom {
    fn tick_rate_hz(&self) -> u32 {
        self.config.world.tick_rate_hz
    }

    fn join(&mut self, ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        let key = PlayerKey(member.id.0);
        if self.occupants.contains(member.id) {
            return Err(JoinRefused::AlreadyMember);
        }
        let Some(entity) = self.ids.insert(key) else {
            return Err(JoinRefused::Game("no entity id left".into()));
        };
        if let Err(error) = self.world.join(key) {
            self.ids.remove(key);
            return Err(JoinRefused::Game(error.to_string()));
        }
        self.occupants.push(Occupant {
            id: member.id,
            key,
            entity,
            snapshots: self.encoder.new_client(),
            connected: member.connected,
            violations: 0,
            kicked: false,
            joined_at: ctx.now(),
            next_chat_tick: 0,
            name: truncate_utf8(&member.name, MAX_NAME_BYTES).to_owned(),
            phase: self.next_phase,
            refresh: false,
            announced: false,
        });
        self.next_phase = (self.next_phase + 1) % self.config.snapshot_interval_ticks;
        self.sink.record(StatEvent::Joined {
            room: ctx.room(),
            player: member.id,
            name: member.name.clone(),
        });
        self.welcome(ctx, member.id);
        self.scores_changed = true;
        if !self.within_roster_limit(self.occupants.len()) {
            // A crowd: no names, and the next scoreboard broadcast reaches the newcomer.
            return Ok(());
        }
        self.roster(ctx, member.id);
        let newcomer = ServerMessage::Player {
            id: entity,
            name: truncate_utf8(&member.name, MAX_NAME_BYTES).to_owned(),
        };
        if let Some(bytes) = self.encode_message(&newcomer) {
            ctx.broadcast_except(member.id, RELIABLE, bytes);
        }
        if let Some(occupant) = self.occupants.get_mut(member.id) {
            occupant.announced = true;
        }
        let scores = self.scoreboard();
        if let Some(bytes) = self.encode_message(&scores) {
            ctx.send(member.id, RELIABLE, bytes);
        }
        Ok(())
    }

    fn disconnected(&mut self, _ctx: &mut RoomContext<'_>, player: PlayerId) {
        if let Some(occupant) = self.occupants.get_mut(player) {
            occupant.connected = false;
        }
    }

    fn reconnected(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId) {
        if let Some(occupant) = self.occupants.get_mut(player) {
            occupant.connected = true;
            occupant.snapshots.reset();
        }
        self.welcome(ctx, player);
        if !self.within_roster_limit(self.occupants.len()) {
            self.scores_changed = true;
            return;
        }
        self.roster(ctx, player);
        let scores = self.scoreboard();
        if let Some(bytes) = self.encode_message(&scores) {
            ctx.send(player, RELIABLE, bytes);
        }
    }

    fn leave(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId, _reason: LeaveReason) {
        let Some(occupant) = self.occupants.remove(player) else {
            return;
        };
        if let Some(avatar) = self.world.player(occupant.key) {
            let stats = avatar.stats();
            self.sink.record(StatEvent::SessionEnded {
                room: ctx.room(),
                player,
                kills: stats.kills,
                deaths: stats.deaths,
                score: stats.score,
                duration: ctx.now().saturating_duration_since(occupant.joined_at),
            });
        }
        self.world.leave(occupant.key);
        self.ids.remove(occupant.key);
        self.scores_changed = true;
        if occupant.announced {
            let left = ServerMessage::Left {
                id: occupant.entity,
            };
            if let Some(bytes) = self.encode_message(&left) {
                ctx.broadcast_except(player, RELIABLE, bytes);
            }
        }
    }

    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, channel: u8, message: Bytes) {
        if !self.occupants.contains(from) {
            return;
        }
        match channel {
            INPUT => self.handle_input(ctx, from, &message),
            RELIABLE => self.handle_reliable(ctx, from, &message),
            _ => {
                self.stats.unknown_channel += 1;
                self.violation(ctx, from);
            }
        }
    }

    fn tick(&mut self, ctx: &mut RoomContext<'_>) {
        self.world.step(&[]);
        self.ids.set_tick(self.world.tick());
        while let Some(event) = self.world.poll_event() {
            self.handle_event(ctx, event);
        }
        let scoreboard_every = u64::from(self.config.scoreboard_interval_ticks.max(1));
        if self.scores_changed && self.world.tick().is_multiple_of(scoreboard_every) {
            self.scores_changed = false;
            let scores = self.scoreboard();
            if let Some(bytes) = self.encode_message(&scores) {
                ctx.broadcast(RELIABLE, bytes);
            }
        }
    }

    /// Snapshots of the newest tick, once its events are on their way.
    fn publish(&mut self, ctx: &mut RoomContext<'_>) {
        self.encoder.capture(&self.world, &self.ids);
        let interval = u64::from(self.config.snapshot_interval_ticks);
        let tick = self.world.tick();
        let ticks_since = tick.saturating_sub(self.published_tick).max(1);
        self.published_tick = tick;
        // Snapshots out of turn (after a warp or a respawn) at most a quarter as many as are
        // due in turn: 5,000 players warping in one tick then cost the next publish a
        // quarter more, not 5,000 snapshots at once while their inputs pile up unread, nor
        // twice a publish, which held the next tick (and the warps it confirms) back by as
        // much. The others keep their flag for the next publish, or get their snapshot in
        // turn first, within the interval; a lone warp is still shown at once.
        let in_turn = self.occupants.len().div_ceil(interval as usize);
        let mut out_of_turn = in_turn.div_ceil(OUT_OF_TURN_SHARE).max(1);
        let mut published = 0;
        let occupants = self.occupants.as_mut_slice();
        let recipients = occupants.len();
        for index in 0..recipients {
            // The next recipient's baseline loads while this one's snapshot is encoded:
            // each is a cache miss otherwise (9 % of a crowd's tick in `snapshot_encode`).
            if let Some(next) = occupants.get(index + 1) {
                next.snapshots.prefetch_baseline();
            }
            let occupant = &mut occupants[index];
            if !occupant.connected {
                continue;
            }
            // Due on one of the ticks since the last publish: `tick - k` for a `k` below
            // `ticks_since` makes `(tick - k + phase) % interval` zero.
            let due = (tick + u64::from(occupant.phase)) % interval < ticks_since;
            if !due {
                if !occupant.refresh || out_of_turn == 0 {
                    continue;
                }
                out_of_turn -= 1;
            }
            occupant.refresh = false;
            let len = match self.encoder.encode(
                &mut occupant.snapshots,
                occupant.entity,
                &mut self.packet,
            ) {
                Ok(len) => len,
                // The buffer is the budget the encoder never exceeds; nothing to send.
                Err(_) => continue,
            };
            if len == 0 {
                continue;
            }
            if self.arena.capacity() < len {
                // A fresh block, room for a publish like the last one and a quarter more
                // (the first: this snapshot's size for every recipient left): sized on
                // what snapshots take (a few hundred bytes in a small room), not on the
                // budget each may take. The old block goes once its snapshots are sent;
                // `reserve` would have reclaimed it whole, so a room kept its largest
                // publish for life (its first, sized on the budget: 1,100 bytes a player).
                let expected = match self.published_bytes {
                    0 => len * (recipients - index),
                    last => last + last / 4,
                };
                self.arena = BytesMut::with_capacity(expected.max(len));
            }
            published += len;
            self.arena.extend_from_slice(&self.packet[..len]);
            let snapshot = self.arena.split().freeze();
            self.stats.snapshots += 1;
            self.stats.snapshot_bytes += len as u64;
            ctx.send(occupant.id, SNAPSHOT, snapshot);
        }
        if published > 0 {
            self.published_bytes = published;
        }
    }

    fn announce(&mut self, ctx: &mut RoomContext<'_>, text: &str) {
        let message = ServerMessage::Announcement {
            text: truncate_utf8(text, MAX_ANNOUNCEMENT_BYTES).to_owned(),
        };
        if let Some(bytes) = self.encode_message(&message) {
            ctx.broadcast(RELIABLE, bytes);
        }
    }
}
