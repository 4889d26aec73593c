//! [`ServerWorld`]: the entities a room replicates, and who views them.

use std::collections::HashMap;

use tickwire_wire::replicate::{KindOf, Replicate};

use crate::config::{ConfigError, ReplicationConfig};
use crate::encode::Encoder;
use crate::ids::IdPool;
use crate::profile::{PROFILE_EVERY, ReplicationProfile};
use crate::roster::Member;
use crate::viewer::{AckError, Viewer, parse_ack};
use crate::{EntityId, ViewerId};

/// Who is sent an entity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Audience {
    /// Every viewer whose interest reaches it.
    #[default]
    Everyone,
    /// Only these viewers (a team, those who can see it through the fog).
    Only(Vec<ViewerId>),
}

impl Audience {
    fn admits(&self, viewer: ViewerId) -> bool {
        match self {
            Self::Everyone => true,
            Self::Only(viewers) => viewers.contains(&viewer),
        }
    }
}

/// One live entity.
#[derive(Debug, Clone)]
pub(crate) struct Slot<E> {
    pub(crate) state: E,
    pub(crate) owner: Option<ViewerId>,
    pub(crate) audience: Audience,
}

impl<E: Replicate> Slot<E> {
    /// The fields `viewer` is sent: all of them for the owner, the rest for others.
    pub(crate) fn visible_to(&self, viewer: ViewerId) -> u64 {
        let kind = &E::KINDS[self.state.kind()];
        if self.owner == Some(viewer) {
            kind.all()
        } else {
            kind.all() & !kind.owner_only
        }
    }

    pub(crate) fn admits(&self, viewer: ViewerId) -> bool {
        self.audience.admits(viewer)
    }
}

/// Every id is taken: the world holds 65,535 entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the world holds 65,535 entities: no id is free")]
pub struct WorldFull;

/// What the world counted: for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicationStats {
    /// Snapshots written.
    pub snapshots: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Acknowledgements refused (malformed, unknown tick, not a viewer).
    pub acks_refused: u64,
    /// Entity states left out because a field could not be encoded (a value outside its
    /// declared bounds); the game's bug, counted rather than sent wrong.
    pub unencodable: u64,
    /// Changes (creates and updates) that did not fit a snapshot and waited.
    pub deferred: u64,
}

/// The entities of type `E` a room replicates, and its viewers: sans-IO. `Default` is an
/// empty world with the default [`ReplicationConfig`]. The room spawns,
/// mutates and despawns entities as its game runs, adds a viewer per member, and once per
/// tick asks for the [`snapshots`](Self::snapshots), each a delta against what that viewer
/// acknowledged, which it sends on an unreliable sequenced channel; each viewer's mirror
/// answers with [`ack_message`](crate::ack_message)s the room hands to [`ack`](Self::ack).
#[derive(Debug)]
pub struct ServerWorld<E: Replicate> {
    pub(crate) config: ReplicationConfig,
    tick_rate_hz: u32,
    /// Live entities by id.
    pub(crate) slots: Vec<Option<Slot<E>>>,
    ids: IdPool,
    len: usize,
    /// Viewers in the order added.
    viewers: Vec<(ViewerId, Viewer<E>)>,
    index: HashMap<ViewerId, usize>,
    /// The roster, by seat.
    roster: Vec<Option<Slot<Member>>>,
    encoder: Encoder<E>,
    pub(crate) stats: ReplicationStats,
    /// What the snapshots carried since the profile was last taken.
    profile: ReplicationProfile,
    /// Calls of [`snapshots`](Self::snapshots): which ones are profiled.
    sends: u64,
}

impl<E: Replicate> Default for ServerWorld<E> {
    fn default() -> Self {
        match Self::new(ReplicationConfig::default()) {
            Ok(world) => world,
            Err(error) => unreachable!("the default replication config is valid: {error}"),
        }
    }
}

impl<E: Replicate> ServerWorld<E> {
    /// An empty world. Its bandwidth budget is spread over 60 ticks a second until
    /// [`set_tick_rate`](Self::set_tick_rate) says otherwise (a room's host says so itself).
    pub fn new(config: ReplicationConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            tick_rate_hz: 60,
            slots: Vec::new(),
            ids: IdPool::default(),
            len: 0,
            viewers: Vec::new(),
            index: HashMap::new(),
            roster: Vec::new(),
            encoder: Encoder::default(),
            stats: ReplicationStats::default(),
            profile: ReplicationProfile::new::<E>(),
            sends: 0,
        })
    }

    /// The room's tick rate, which the bandwidth budget is spread over (at least 1).
    pub fn set_tick_rate(&mut self, tick_rate_hz: u32) {
        self.tick_rate_hz = tick_rate_hz.max(1);
    }

    /// The configuration.
    pub fn config(&self) -> &ReplicationConfig {
        &self.config
    }

    /// Adds `state` as a new entity, seen by everyone and owned by no one.
    pub fn spawn(&mut self, state: impl Into<E>) -> Result<EntityId, WorldFull> {
        let id = self.ids.take().ok_or(WorldFull)?;
        let index = usize::from(id);
        if self.slots.len() <= index {
            self.slots.resize_with(index + 1, || None);
        }
        self.slots[index] = Some(Slot {
            state: state.into(),
            owner: None,
            audience: Audience::Everyone,
        });
        self.len += 1;
        Ok(id)
    }

    /// Removes an entity; its id rests before it is handed out again.
    pub fn despawn(&mut self, id: EntityId) -> Option<E> {
        let slot = self.slots.get_mut(usize::from(id))?.take()?;
        self.ids.release(id);
        self.len -= 1;
        Some(slot.state)
    }

    fn slot(&self, id: EntityId) -> Option<&Slot<E>> {
        self.slots.get(usize::from(id))?.as_ref()
    }

    fn slot_mut(&mut self, id: EntityId) -> Option<&mut Slot<E>> {
        self.slots.get_mut(usize::from(id))?.as_mut()
    }

    /// An entity's state.
    pub fn get(&self, id: EntityId) -> Option<&E> {
        self.slot(id).map(|slot| &slot.state)
    }

    /// An entity's state, to change: what changed is found at the next send, field by field.
    pub fn get_mut(&mut self, id: EntityId) -> Option<&mut E> {
        self.slot_mut(id).map(|slot| &mut slot.state)
    }

    /// An entity as kind `K` (a struct of the world's enum), if it is one.
    pub fn kind<K: KindOf<E>>(&self, id: EntityId) -> Option<&K> {
        K::of(self.get(id)?)
    }

    /// An entity as kind `K`, to change.
    pub fn kind_mut<K: KindOf<E>>(&mut self, id: EntityId) -> Option<&mut K> {
        K::of_mut(self.get_mut(id)?)
    }

    /// Every entity, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (EntityId, &E)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(id, slot)| slot.as_ref().map(|slot| (id as EntityId, &slot.state)))
    }

    /// Every entity, to change, in id order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (EntityId, &mut E)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(id, slot)| slot.as_mut().map(|slot| (id as EntityId, &mut slot.state)))
    }

    /// Entities in the world.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Gives an entity an owner: the one viewer sent its `#[replicate(owner_only)]` fields.
    /// Returns false for an unknown entity.
    pub fn set_owner(&mut self, id: EntityId, owner: Option<ViewerId>) -> bool {
        self.slot_mut(id).map(|slot| slot.owner = owner).is_some()
    }

    /// An entity's owner.
    pub fn owner(&self, id: EntityId) -> Option<ViewerId> {
        self.slot(id)?.owner
    }

    /// Who is sent an entity (teams, fog of war). Returns false for an unknown entity.
    pub fn set_audience(&mut self, id: EntityId, audience: Audience) -> bool {
        self.slot_mut(id)
            .map(|slot| slot.audience = audience)
            .is_some()
    }

    /// Adds a viewer; its first snapshot is the full state. Adding one already there
    /// changes nothing.
    pub fn add_viewer(&mut self, viewer: ViewerId) {
        if self.index.contains_key(&viewer) {
            return;
        }
        let tokens = self.config.packet_budget as i64;
        self.index.insert(viewer, self.viewers.len());
        self.viewers.push((viewer, Viewer::new(tokens)));
    }

    /// Removes a viewer and everything remembered for it.
    pub fn remove_viewer(&mut self, viewer: ViewerId) {
        let Some(index) = self.index.remove(&viewer) else {
            return;
        };
        self.viewers.swap_remove(index);
        if let Some((moved, _)) = self.viewers.get(index) {
            self.index.insert(*moved, index);
        }
    }

    /// Forgets what a viewer was sent (it reconnected with an empty mirror): its next
    /// snapshot is the full state.
    pub fn reset_viewer(&mut self, viewer: ViewerId) {
        if let Some(viewer) = self.viewer_mut(viewer) {
            viewer.reset();
        }
    }

    /// Where a viewer is, for [`Interest::Radius`](crate::Interest::Radius); `None` (the
    /// start) sees only entities without a position. A non-finite position counts as none.
    pub fn set_focus(&mut self, viewer: ViewerId, focus: Option<[f32; 2]>) {
        let focus = focus.filter(|focus| focus.iter().all(|axis| axis.is_finite()));
        if let Some(viewer) = self.viewer_mut(viewer) {
            viewer.focus = focus;
        }
    }

    /// The viewers, in the order added.
    pub fn viewers(&self) -> impl Iterator<Item = ViewerId> + '_ {
        self.viewers.iter().map(|(viewer, _)| *viewer)
    }

    fn viewer_mut(&mut self, viewer: ViewerId) -> Option<&mut Viewer<E>> {
        let index = *self.index.get(&viewer)?;
        Some(&mut self.viewers[index].1)
    }

    /// Sets the roster entry of `seat`: `viewer`'s, named `name`, connected or not. The room's
    /// host calls it as members join and lose or regain their connection. A seat past 65,534
    /// is ignored.
    pub fn set_member(&mut self, seat: u16, viewer: ViewerId, name: &str, connected: bool) {
        if seat > crate::MAX_ENTITY_ID {
            return;
        }
        let index = usize::from(seat);
        if self.roster.len() <= index {
            self.roster.resize_with(index + 1, || None);
        }
        let slot = self.roster[index].get_or_insert_with(|| Slot {
            state: Member::default(),
            owner: None,
            audience: Audience::Everyone,
        });
        slot.owner = Some(viewer);
        slot.state.name.clear();
        slot.state.name.push_str(name);
        slot.state.connected = connected;
        slot.state.you = true;
    }

    /// Empties `seat` in the roster (its member left).
    pub fn remove_member(&mut self, seat: u16) {
        if let Some(slot) = self.roster.get_mut(usize::from(seat)) {
            *slot = None;
        }
    }

    /// The viewer whose seat it is.
    pub fn seat_owner(&self, seat: u16) -> Option<ViewerId> {
        self.roster.get(usize::from(seat))?.as_ref()?.owner
    }

    /// The roster: each seat's member, in seat order.
    pub fn roster(&self) -> impl Iterator<Item = (u16, &Member)> {
        self.roster
            .iter()
            .enumerate()
            .filter_map(|(seat, slot)| slot.as_ref().map(|slot| (seat as u16, &slot.state)))
    }

    /// Hands the world a viewer's acknowledgement message (from its mirror). Refusals are
    /// counted ([`ReplicationStats::acks_refused`]) and change nothing.
    pub fn ack(&mut self, viewer: ViewerId, message: &[u8]) -> Result<(), AckError> {
        let result = parse_ack(message).and_then(|tick| {
            self.viewer_mut(viewer)
                .ok_or(AckError::NotViewer)?
                .ack(tick)
        });
        if result.is_err() {
            self.stats.acks_refused += 1;
        }
        result
    }

    /// Writes one snapshot of `tick` per viewer and hands each to `send` with its viewer.
    /// Ticks must increase from call to call; a room that sends every tick passes its tick.
    pub fn snapshots(&mut self, tick: u32, mut send: impl FnMut(ViewerId, &[u8])) {
        self.ids.set_tick(u64::from(tick));
        let refill = i64::from(self.config.bandwidth_bytes_per_sec) / i64::from(self.tick_rate_hz);
        let cap = 2 * self.config.packet_budget as i64;
        self.encoder.prepare(&self.slots, &self.config);
        let profiled = self.sends.is_multiple_of(PROFILE_EVERY);
        self.sends += 1;
        for (id, viewer) in &mut self.viewers {
            let ticks = viewer
                .last_tick
                .map_or(1, |last| tick.wrapping_sub(last).max(1));
            viewer.tokens = (viewer.tokens + refill * i64::from(ticks)).min(cap);
            viewer.last_tick = Some(tick);
            let bytes = self.encoder.encode(
                &self.slots,
                &self.roster,
                &self.config,
                *id,
                viewer,
                tick,
                &mut self.stats,
                profiled.then_some(&mut self.profile),
            );
            viewer.tokens -= bytes.len() as i64;
            self.stats.snapshots += 1;
            self.profile.snapshots += 1;
            self.stats.bytes += bytes.len() as u64;
            send(*id, bytes);
        }
    }

    /// What the world counted.
    pub fn stats(&self) -> ReplicationStats {
        self.stats
    }

    /// What the snapshots carried since the last call, by kind and field (estimated from
    /// one send in [`PROFILE_EVERY`]); `None` if none was written.
    pub fn take_profile(&mut self) -> Option<ReplicationProfile> {
        (self.profile.snapshots > 0).then(|| self.profile.take())
    }

    /// Entity records held for a viewer across its history: bounded by
    /// `(history + 1) × max_entities`.
    pub fn records_held(&self, viewer: ViewerId) -> Option<usize> {
        let index = *self.index.get(&viewer)?;
        Some(self.viewers[index].1.records_held())
    }

    /// One past the largest id handed out.
    pub fn id_bound(&self) -> usize {
        self.ids.bound()
    }
}

/// A [`ServerWorld`] of any entity type, as its room's host drives it (object safe): the
/// host adds and removes viewers as members come and go, hands it their acknowledgements
/// and has it write the snapshots.
pub trait Replicated {
    /// [`ServerWorld::add_viewer`].
    fn add_viewer(&mut self, viewer: ViewerId);
    /// [`ServerWorld::remove_viewer`].
    fn remove_viewer(&mut self, viewer: ViewerId);
    /// [`ServerWorld::reset_viewer`].
    fn reset_viewer(&mut self, viewer: ViewerId);
    /// [`ServerWorld::ack`].
    fn ack(&mut self, viewer: ViewerId, message: &[u8]) -> Result<(), AckError>;
    /// [`ServerWorld::set_tick_rate`], then [`ServerWorld::snapshots`].
    fn send_snapshots(
        &mut self,
        tick: u32,
        tick_rate_hz: u32,
        send: &mut dyn FnMut(ViewerId, &[u8]),
    );
    /// [`ServerWorld::stats`].
    fn replication_stats(&self) -> ReplicationStats;
    /// [`ServerWorld::take_profile`].
    fn take_profile(&mut self) -> Option<ReplicationProfile>;
    /// [`ServerWorld::set_member`].
    fn set_member(&mut self, seat: u16, viewer: ViewerId, name: &str, connected: bool);
    /// [`ServerWorld::remove_member`].
    fn remove_member(&mut self, seat: u16);
}

impl<E: Replicate> Replicated for ServerWorld<E> {
    fn add_viewer(&mut self, viewer: ViewerId) {
        ServerWorld::add_viewer(self, viewer);
    }

    fn remove_viewer(&mut self, viewer: ViewerId) {
        ServerWorld::remove_viewer(self, viewer);
    }

    fn reset_viewer(&mut self, viewer: ViewerId) {
        ServerWorld::reset_viewer(self, viewer);
    }

    fn ack(&mut self, viewer: ViewerId, message: &[u8]) -> Result<(), AckError> {
        ServerWorld::ack(self, viewer, message)
    }

    fn send_snapshots(
        &mut self,
        tick: u32,
        tick_rate_hz: u32,
        send: &mut dyn FnMut(ViewerId, &[u8]),
    ) {
        self.set_tick_rate(tick_rate_hz);
        self.snapshots(tick, send);
    }

    fn replication_stats(&self) -> ReplicationStats {
        self.stats
    }

    fn take_profile(&mut self) -> Option<ReplicationProfile> {
        ServerWorld::take_profile(self)
    }

    fn set_member(&mut self, seat: u16, viewer: ViewerId, name: &str, connected: bool) {
        ServerWorld::set_member(self, seat, viewer, name, connected);
    }

    fn remove_member(&mut self, seat: u16) {
        ServerWorld::remove_member(self, seat);
    }
}
