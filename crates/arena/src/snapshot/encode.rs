//! The server side: [`SnapshotEncoder`] (one per room) and [`ClientSnapshots`] (one per
//! recipient: what was sent, what was acknowledged, the bandwidth left).

use tickwire_wire::{BitWrite, BitWriter, EncodeError};

use super::frame::{Frame, OwnState};
use super::history::{History, PastStates, Record};
use super::{
    EntityId, EntityIds, EntityState, EntityView, ID_BITS_MAX, PackedState, SnapshotConfig,
    SnapshotConfigError, SnapshotSchema,
};
use crate::geom::Vec2;
use crate::world::World;

/// Why an acknowledgement was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// The tick is newer than any snapshot sent to this client: a broken or hostile client.
    #[error("ack of tick {tick}, newer than the last snapshot sent ({last_sent:?})")]
    FromTheFuture {
        /// The tick acknowledged.
        tick: u32,
        /// The newest tick sent, if any.
        last_sent: Option<u32>,
    },
}

/// One recipient's snapshot state: the last `history` snapshots sent (each a possible
/// baseline), the newest acknowledged one, and the bandwidth tokens left.
///
/// On a reliable transport (WebSocket) acks arrive in order and none is lost, so the
/// baseline trails the newest snapshot by the round trip, exactly as on UDP without loss;
/// the mechanism is the same and the room does not know the difference.
#[derive(Debug, Clone)]
pub struct ClientSnapshots {
    history: History,
    acked: Option<u32>,
    /// The history slot `acked`'s view was in when its ack came: where encode and
    /// prefetch look first (a slot moves only when the history grows).
    acked_slot: usize,
    last_sent: Option<u32>,
    tokens: i64,
}

impl ClientSnapshots {
    /// Nothing sent yet: the first snapshot will be a full one.
    pub fn new(config: &SnapshotConfig) -> Self {
        Self {
            history: History::new(config.history),
            acked: None,
            acked_slot: 0,
            last_sent: None,
            tokens: config.packet_budget as i64,
        }
    }

    /// Takes the client's "newest snapshot received" tick. An older or repeated ack is
    /// ignored (packets reorder); one the history no longer holds leaves the baseline as is
    /// (the next snapshot falls back to a full one if the baseline is too old).
    pub fn handle_ack(&mut self, tick: u32) -> Result<(), AckError> {
        let newer = |a: u32, b: u32| {
            let ahead = a.wrapping_sub(b);
            ahead != 0 && ahead < 1 << 31
        };
        match self.last_sent {
            Some(last) if !newer(tick, last) => {}
            last_sent => return Err(AckError::FromTheFuture { tick, last_sent }),
        }
        if self.acked.is_some_and(|acked| !newer(tick, acked)) {
            return Ok(());
        }
        if let Some(slot) = self.history.slot(tick) {
            self.acked = Some(tick);
            self.acked_slot = slot;
            self.history.note_ack(slot);
        } else if let Some(last) = self.last_sent
            && (last.wrapping_sub(tick) as usize) < self.history.max_slots
        {
            // Overwritten before its ack came back, though the client still holds it:
            // hold twice as many snapshots from now on.
            self.history.grow_slots(2 * self.history.slots());
        }
        Ok(())
    }

    /// Starts loading the baseline the next [`SnapshotEncoder::encode`] for this client
    /// will read: a room calls it for the next recipient before encoding the current one,
    /// so the recipients' histories (one cache miss each otherwise) stream in while it
    /// works.
    pub fn prefetch_baseline(&self) {
        if self.acked.is_some() {
            self.history.prefetch(self.acked_slot);
        }
    }

    /// Forgets every baseline (after a reconnection): the next snapshot is a full one.
    pub fn reset(&mut self) {
        self.acked = None;
        self.history.forget();
    }

    /// The newest acknowledged tick still usable as a baseline.
    pub fn acked(&self) -> Option<u32> {
        self.acked
    }

    /// Ids each history slot has room for: the largest view this recipient has had,
    /// rounded up to a power of two (0 before the first snapshot). The history's memory is
    /// `history_slots × (stride × 2 + wait_stride × 12)` bytes, besides the room's copies
    /// of its captures that its entries point into.
    pub fn history_stride(&self) -> usize {
        self.history.stride
    }

    /// Whole records each history slot has room for: the most entities one of this
    /// recipient's snapshots left waiting for the byte budget, rounded up to a power of two.
    pub fn history_wait_stride(&self) -> usize {
        self.history.wait_stride
    }

    /// Snapshots the history holds: 4 at first, doubled (up to the configured history)
    /// when an ack came back for a snapshot already overwritten that the client still held,
    /// halved when a stretch's acks needed a quarter of them.
    pub fn history_slots(&self) -> usize {
        self.history.slots()
    }

    /// The tick of the newest snapshot sent.
    pub fn last_sent(&self) -> Option<u32> {
        self.last_sent
    }
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    id: EntityId,
    /// Squared distance, scaled down for entities already in view (hysteresis).
    rank: f32,
    distance_squared: f32,
    /// Index in the baseline, or `NOT_MEMBER`.
    member: u32,
    priority: f32,
    /// Bits it takes if sent: its id at most, and `fields`.
    cost: u32,
    /// What is written after its id if sent: its full state for a newcomer, the update
    /// from its acknowledged state for a member.
    fields: Fields,
    fate: Fate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// A member whose state the client already has.
    Unchanged,
    /// Sent this time.
    Send,
    /// Did not fit: a member keeps its acknowledged state, a newcomer is not created yet.
    Wait,
}

const NOT_MEMBER: u32 = u32::MAX;

/// The interest cells around a recipient's, as offsets: ring by ring (the square of
/// Chebyshev distance `r` from it), nearest first, each ring row by row. Computed once per
/// encoder rather than found by scanning each ring's square for every recipient.
#[derive(Debug, Clone)]
struct InterestRings {
    cells: Vec<(i32, i32)>,
    /// Where each ring ends in `cells`.
    ends: Vec<usize>,
    /// Each offset's place in `cells`, row by row over the square the rings cover.
    places: Vec<u32>,
    rings: i32,
}

impl InterestRings {
    /// The rings that cover `radius` with cells of `cell_size`.
    fn new(radius: f32, cell_size: f32) -> Self {
        let rings = (radius / cell_size).ceil() as i32;
        let (mut cells, mut ends) = (Vec::new(), Vec::new());
        for ring in 0..=rings {
            for dy in -ring..=ring {
                for dx in -ring..=ring {
                    if dx.abs().max(dy.abs()) == ring {
                        cells.push((dx, dy));
                    }
                }
            }
            ends.push(cells.len());
        }
        let side = (2 * rings + 1) as usize;
        let mut places = vec![0; side * side];
        for (place, &(dx, dy)) in cells.iter().enumerate() {
            places[(dy + rings) as usize * side + (dx + rings) as usize] = place as u32;
        }
        Self {
            cells,
            ends,
            places,
            rings,
        }
    }

    /// Where the cell at offset `(dx, dy)` comes in [`cells`](Self::cells), if the rings
    /// reach it.
    fn place(&self, dx: i32, dy: i32) -> Option<u32> {
        let reach = -self.rings..=self.rings;
        if !(reach.contains(&dx) && reach.contains(&dy)) {
            return None;
        }
        let side = 2 * self.rings + 1;
        Some(self.places[((dy + self.rings) * side + dx + self.rings) as usize])
    }

    /// Each ring's cells, nearest ring first.
    fn rings(&self) -> impl Iterator<Item = &[(i32, i32)]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.cells[start..end])
    }

    /// Every cell, in ring order.
    fn cells(&self) -> &[(i32, i32)] {
        &self.cells
    }
}

/// `value` as an unsigned integer that orders like [`f32::total_cmp`]: the selection of
/// the cap's threshold is then a plain integer one, with the same result.
fn total_order_key(value: f32) -> u32 {
    // What `total_cmp` compares as an `i32`, then moved to unsigned order.
    let bits = value.to_bits() as i32;
    (bits ^ (((bits >> 31) as u32) >> 1) as i32) as u32 ^ (1 << 31)
}

/// The value of a [`total_order_key`].
fn from_total_order_key(key: u32) -> f32 {
    let ordered = (key ^ (1 << 31)) as i32;
    f32::from_bits((ordered ^ (((ordered >> 31) as u32) >> 1) as i32) as u32)
}

/// The bullets in range of a recipient at `me` (in cell `center`) in the order the scan of
/// the rings' cells finds them, without the scan: by their cell's place in the rings, then
/// by index (a cell lists its items in index order). Only for a frame of no more bullets
/// than the scan takes, which then neither reads a cell from a rotated offset nor stops
/// early. Returns false, and leaves the scan to do it, if a bullet in range lies in a cell
/// the rings do not reach (it cannot: the rings cover the radius).
fn few_bullets_in_scan_order(
    frame: &Frame,
    rings: &InterestRings,
    center: (i32, i32),
    me: Vec2,
    radius_squared: f32,
    order: &mut Vec<(u32, u32, f32)>,
    near: &mut Vec<(f32, u32)>,
) -> bool {
    order.clear();
    for (item, bullet) in frame.bullets.iter().enumerate() {
        let (dx, dy) = (bullet.position.x - me.x, bullet.position.y - me.y);
        let d2 = dx * dx + dy * dy;
        if d2 <= radius_squared {
            let cell = frame.bullets_by_cell.cell_of(item);
            let (x, y) = ((cell % frame.columns) as i32, (cell / frame.columns) as i32);
            let Some(place) = rings.place(x - center.0, y - center.1) else {
                return false;
            };
            order.push((place, item as u32, d2));
        }
    }
    order.sort_unstable_by_key(|&(place, item, _)| (place, item));
    near.extend(order.iter().map(|&(_, item, d2)| (d2, item)));
    true
}

/// Priority of a new entity, in ticks of age: it competes as an update four ticks stale.
const NEW_ENTITY_AGE: f32 = 4.0;

/// Builds every recipient's snapshot from one [`Frame`] per tick.
///
/// Per tick: [`capture`](Self::capture) once, then [`encode`](Self::encode) for each
/// recipient with that recipient's [`ClientSnapshots`]; acks go to
/// [`ClientSnapshots::handle_ack`] whenever they arrive. Buffers are kept between calls,
/// grown to what the room's views take: once the room has reached its size, encoding
/// allocates nothing.
#[derive(Debug, Clone)]
pub struct SnapshotEncoder {
    config: SnapshotConfig,
    schema: SnapshotSchema,
    tokens_per_tick: i64,
    frame: Frame,
    marks: Vec<u32>,
    stamp: u32,
    candidates: Vec<Candidate>,
    destroys: Vec<EntityId>,
    bullets_near: Vec<(f32, u32)>,
    /// The states of the last captures, which the recipients' histories point into.
    past: PastStates,
    /// The number [`PastStates::push`] gave the frame.
    capture: u32,
    /// The recipient's baseline, each entity as the client holds it.
    baseline: Vec<Record>,
    /// The view a snapshot leaves: its ids, and those that waited.
    view_ids: Vec<EntityId>,
    view_waits: Vec<Record>,
    by_priority: Vec<u32>,
    /// Candidates' ranks as [`total_order_key`]s.
    ranks: Vec<u32>,
    rings: InterestRings,
    /// Scratch for [`few_bullets_in_scan_order`].
    bullet_order: Vec<(u32, u32, f32)>,
}

impl SnapshotEncoder {
    /// An encoder for a map of `map_size`, at `tick_rate_hz` (for the bandwidth cap).
    pub fn new(
        schema: SnapshotSchema,
        map_size: Vec2,
        config: SnapshotConfig,
        tick_rate_hz: u32,
    ) -> Result<Self, SnapshotConfigError> {
        config.validate()?;
        let tokens_per_tick =
            i64::from(config.bandwidth_bytes_per_sec) / i64::from(tick_rate_hz.max(1));
        Ok(Self {
            frame: Frame::new(schema, map_size, &config),
            // Scratch grows to what the room's encodes need (a few dozen candidates in a
            // room of 30, not the 192 a crowd may take: 7.7 KB a room at the maximum).
            candidates: Vec::new(),
            destroys: Vec::new(),
            bullets_near: Vec::new(),
            past: PastStates::new(),
            capture: 0,
            baseline: Vec::new(),
            view_ids: Vec::new(),
            view_waits: Vec::new(),
            by_priority: Vec::new(),
            ranks: Vec::new(),
            bullet_order: Vec::new(),
            marks: Vec::new(),
            stamp: 0,
            rings: InterestRings::new(config.interest_radius, config.interest_cell_size),
            tokens_per_tick,
            schema,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SnapshotConfig {
        &self.config
    }

    /// The quantization grids.
    pub fn schema(&self) -> &SnapshotSchema {
        &self.schema
    }

    /// A fresh per-recipient state for this encoder's configuration.
    pub fn new_client(&self) -> ClientSnapshots {
        ClientSnapshots::new(&self.config)
    }

    /// Captures the world for this tick's snapshots.
    pub fn capture(&mut self, world: &World, ids: &EntityIds) {
        self.frame.capture(world, ids);
        self.capture = self.past.push(&self.frame.states);
        if self.marks.len() < self.frame.present.len() {
            self.marks.resize(self.frame.present.len(), 0);
        }
    }

    /// The frame captured last.
    pub fn frame(&self) -> &Frame {
        &self.frame
    }

    /// The view the snapshot of `tick` left `client` with (ordered by id), while its history
    /// holds it and this encoder the capture it was encoded from.
    pub fn view<'a>(
        &'a self,
        client: &'a ClientSnapshots,
        tick: u32,
    ) -> Option<impl Iterator<Item = EntityView> + 'a> {
        let view = client.history.view(tick)?;
        let states = self.past.states(view.capture)?;
        Some(view.records(states).map(|record| EntityView {
            id: record.id,
            state: record.state(),
        }))
    }

    /// Captures whose states this encoder holds for the recipients' baselines: twice the
    /// longest history's snapshots, a power of two (8 at first). Their memory is 8 bytes a
    /// player each.
    pub fn captures_held(&self) -> usize {
        self.past.depth()
    }

    /// Writes the snapshot of the captured tick for `recipient` into `out` (at least
    /// [`SnapshotConfig::packet_budget`] bytes) and records it in `client`; returns its
    /// length, 0 if the recipient is not in the frame (nothing is recorded then).
    pub fn encode(
        &mut self,
        client: &mut ClientSnapshots,
        recipient: EntityId,
        out: &mut [u8],
    ) -> Result<usize, EncodeError> {
        let frame = &self.frame;
        let me = usize::from(recipient);
        if !frame.present.get(me).copied().unwrap_or(false) {
            return Ok(0);
        }
        let config = &self.config;
        let tick = frame.tick as u32;
        let history = client.history.max_slots;
        client.tokens = (client.tokens + self.tokens_per_tick).min(config.packet_budget as i64);
        let budget_bits = (client.tokens.max(0) as usize).min(config.packet_budget) * 8;

        if client.history.owner != self.past.owner() {
            // A recipient new to this encoder (or one this encoder's clone had): its views
            // point into another encoder's captures, so none is a baseline here.
            client.reset();
            client.history.owner = self.past.owner();
        }
        // Every recipient gets a snapshot of each capture, so its history of `slots`
        // snapshots reaches back as many captures; twice that is held for one that missed
        // some (a baseline whose capture has gone gives a full snapshot).
        self.past.hold(2 * client.history.slots());
        self.baseline.clear();
        let baseline = client.acked.and_then(|acked| {
            let age = tick.wrapping_sub(acked);
            if !(1..history).contains(&(age as usize)) {
                return None;
            }
            let view = client.history.view_hinted(client.acked_slot, acked)?;
            let states = self.past.states(view.capture)?;
            view.read_into(states, &mut self.baseline);
            Some(age)
        });
        let has_baseline = baseline.is_some();
        let baseline_age = baseline.unwrap_or(0);
        let baseline = &self.baseline;

        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.marks.iter_mut().for_each(|mark| *mark = 0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        let marks = &mut self.marks;
        marks[me] = stamp;
        let me_position = frame.positions[me];
        let radius_squared = config.interest_radius * config.interest_radius;
        let keep_squared = radius_squared * 1.21;
        let distance_squared = |p: Vec2| {
            let (dx, dy) = (p.x - me_position.x, p.y - me_position.y);
            dx * dx + dy * dy
        };

        // Entities in the client's view: kept while in range, otherwise destroyed.
        self.candidates.clear();
        self.destroys.clear();
        for (index, record) in baseline.iter().enumerate() {
            let id = record.id;
            let present = frame.present.get(usize::from(id)).copied().unwrap_or(false);
            if !present || id == recipient {
                self.destroys.push(id);
                continue;
            }
            marks[usize::from(id)] = stamp;
            let d2 = distance_squared(frame.positions[usize::from(id)]);
            if d2 > keep_squared {
                self.destroys.push(id);
                continue;
            }
            self.candidates.push(Candidate {
                id,
                rank: d2 * 0.64,
                distance_squared: d2,
                member: index as u32,
                priority: 0.0,
                cost: 0,
                fields: Fields::default(),
                fate: Fate::Wait,
            });
        }

        // New candidates: rings of interest cells, nearest first, at most `candidates`
        // looked at; a crowded cell is read from an offset that moves every tick.
        let (cx, cy) = frame.cell_coords(me_position);
        let member_count = self.candidates.len();
        // A full view samples a quarter as many: newcomers only replace members, and the
        // rotating offsets still reach every entity of a crowd within a few ticks.
        let limit = if member_count >= config.max_entities {
            (config.candidates / 4).max(1)
        } else {
            config.candidates
        };
        let mut looked = 0usize;
        'rings: for ring in self.rings.rings() {
            let mut cells_left = ring.len();
            for &(dx, dy) in ring {
                let Some(cell) = frame.cell_at(cx + dx, cy + dy) else {
                    cells_left -= 1;
                    continue;
                };
                let players = frame.players_in_cell(cell);
                if players.is_empty() {
                    // Takes no quota: only the cells left to share it change.
                    cells_left -= 1;
                    continue;
                }
                let remaining = limit - looked;
                if remaining == 0 {
                    break 'rings;
                }
                let quota = (remaining / cells_left)
                    .max(8)
                    .min(remaining)
                    .min(players.len());
                cells_left -= 1;
                if quota == 0 {
                    continue;
                }
                let offset = if quota < players.len() {
                    (tick as usize)
                        .wrapping_mul(quota)
                        .wrapping_add(me.wrapping_mul(7919))
                        % players.len()
                } else {
                    0
                };
                // `quota` players from `offset` on, wrapping round to the cell's start.
                let (wrapped, from_offset) = players.split_at(offset);
                let first = quota.min(from_offset.len());
                for player in from_offset[..first].iter().chain(&wrapped[..quota - first]) {
                    let id = player.id;
                    let index = usize::from(id);
                    if marks[index] == stamp {
                        continue;
                    }
                    marks[index] = stamp;
                    let d2 = distance_squared(player.position);
                    if d2 <= radius_squared {
                        self.candidates.push(Candidate {
                            id,
                            rank: d2,
                            distance_squared: d2,
                            member: NOT_MEMBER,
                            priority: 0.0,
                            cost: 0,
                            fields: Fields::default(),
                            fate: Fate::Wait,
                        });
                    }
                }
                looked += quota;
            }
        }

        // The cap: the nearest `max_entities`; members pushed out are destroyed. Members
        // come first, in id order; in the common case (a full view and no newcomer nearer
        // than its farthest member) nothing is sorted.
        let max = config.max_entities;
        let newcomers_nearer = {
            let (members, newcomers) = self.candidates.split_at(member_count);
            let worst = members
                .iter()
                .map(|c| c.rank)
                .fold(f32::NEG_INFINITY, f32::max);
            newcomers.iter().any(|c| c.rank < worst)
        };
        if self.candidates.len() > max && (member_count != max || newcomers_nearer) {
            // The rank of the max-th nearest, found on a copy of the ranks; the
            // candidates themselves are filtered in place so members keep their id order.
            self.ranks.clear();
            self.ranks
                .extend(self.candidates.iter().map(|c| total_order_key(c.rank)));
            let (_, threshold, _) = self.ranks.select_nth_unstable(max - 1);
            let threshold = from_total_order_key(*threshold);
            // Everything nearer than the threshold lies before it after the selection.
            let nearer = self.ranks[..max - 1]
                .iter()
                .filter(|&&key| from_total_order_key(key) < threshold)
                .count();
            // Ties at the threshold: the first ones in candidate order fill what is left.
            let mut ties_left = max - nearer;
            let had_destroys = !self.destroys.is_empty();
            let mut dropped_members = false;
            let destroys = &mut self.destroys;
            self.candidates.retain(|c| {
                let keep = if c.rank < threshold {
                    true
                } else if c.rank == threshold && ties_left > 0 {
                    ties_left -= 1;
                    true
                } else {
                    false
                };
                if !keep && c.member != NOT_MEMBER {
                    destroys.push(c.id);
                    dropped_members = true;
                }
                keep
            });
            let members_kept = self
                .candidates
                .iter()
                .take_while(|c| c.member != NOT_MEMBER)
                .count();
            self.candidates[members_kept..].sort_unstable_by_key(|c| c.id);
            if had_destroys && dropped_members {
                self.destroys.sort_unstable();
            }
        } else if self.candidates.len() > max {
            self.candidates.truncate(member_count);
        } else {
            self.candidates[member_count..].sort_unstable_by_key(|c| c.id);
        }

        let own = &frame.own[me];
        let own_state = &EntityState::from(frame.states[me]);
        let schema = &self.schema;
        let (x_bits, y_bits) = schema.position_bits();
        let mut used = header_bits(has_baseline, own.last_input.is_some())
            + own_bits(schema, own, own_state)
            + 3 * 8
            + 6
            + self.destroys.len() * ID_BITS_MAX;

        // Bullets, nearest first.
        self.bullets_near.clear();
        let bullet_cost = (x_bits + y_bits + 10 + 1) as usize;
        if config.max_bullets > 0 && used + bullet_cost <= budget_bits {
            let limit = 2 * config.max_bullets;
            let few = frame.bullets.len() <= limit
                && few_bullets_in_scan_order(
                    frame,
                    &self.rings,
                    (cx, cy),
                    me_position,
                    radius_squared,
                    &mut self.bullet_order,
                    &mut self.bullets_near,
                );
            // A frame of more bullets than the scan takes: rings of cells, nearest first.
            if !few {
                'bullet_rings: for &(dx, dy) in self.rings.cells() {
                    let Some(cell) = frame.cell_at(cx + dx, cy + dy) else {
                        continue;
                    };
                    let items = frame.bullets_by_cell.cell(cell);
                    let offset = if items.len() > limit {
                        (tick as usize).wrapping_mul(limit) % items.len()
                    } else {
                        0
                    };
                    for j in 0..items.len() {
                        if self.bullets_near.len() == limit {
                            break 'bullet_rings;
                        }
                        let item = items[(offset + j) % items.len()];
                        let p = frame.bullets[item as usize].position;
                        let (dx, dy) = (p.x - me_position.x, p.y - me_position.y);
                        let d2 = dx * dx + dy * dy;
                        if d2 <= radius_squared {
                            self.bullets_near.push((d2, item));
                        }
                    }
                }
            }
            let fit = ((budget_bits - used) / bullet_cost).min(config.max_bullets);
            if self.bullets_near.len() > fit {
                if fit > 0 {
                    self.bullets_near.select_nth_unstable_by(fit - 1, |a, b| {
                        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
                    });
                }
                self.bullets_near.truncate(fit);
            }
            used += self.bullets_near.len() * bullet_cost;
        }

        // Unchanged members cost nothing; the rest go by priority while they fit. Each one
        // sent has its bits packed here, once: they are its cost, and what is written.
        let mut wanted = 0usize;
        for candidate in &mut self.candidates {
            let state = frame.states[usize::from(candidate.id)];
            let weight = 1.0 / (1.0 + candidate.distance_squared / 16.0);
            if candidate.member == NOT_MEMBER {
                candidate.fields = Fields::full(schema, &state);
                candidate.priority = NEW_ENTITY_AGE * weight;
            } else {
                let record = &baseline[candidate.member as usize];
                let old = record.state;
                if old == state {
                    candidate.fate = Fate::Unchanged;
                    continue;
                }
                candidate.fields = Fields::update(schema, &old, &state);
                candidate.priority = (f32::from(record.age(tick)) + 1.0) * weight;
            }
            candidate.cost = ID_BITS_MAX as u32 + candidate.fields.len;
            candidate.fate = Fate::Send;
            wanted += candidate.cost as usize;
        }
        let available = budget_bits.saturating_sub(used);
        if wanted > available {
            self.by_priority.clear();
            self.by_priority.extend(
                (0..self.candidates.len() as u32)
                    .filter(|&i| self.candidates[i as usize].fate == Fate::Send),
            );
            let candidates = &self.candidates;
            self.by_priority.sort_unstable_by(|&a, &b| {
                let (a, b) = (&candidates[a as usize], &candidates[b as usize]);
                b.priority.total_cmp(&a.priority).then(a.id.cmp(&b.id))
            });
            let mut left = available;
            for &index in &self.by_priority {
                let candidate = &mut self.candidates[index as usize];
                if candidate.cost as usize <= left {
                    left -= candidate.cost as usize;
                } else {
                    candidate.fate = Fate::Wait;
                }
            }
        }
        // Members come first, then newcomers, each part in id order.
        let members = self.candidates.partition_point(|c| c.member != NOT_MEMBER);
        let (kept, newcomers) = self.candidates.split_at(members);
        let counts = view_records(
            (&mut self.view_ids, &mut self.view_waits),
            kept,
            newcomers,
            baseline,
        );

        let mut w = BitWriter::new(out);
        w.write_uint(u64::from(tick), 32)?;
        w.write_bool(has_baseline)?;
        if has_baseline {
            w.write_uint(u64::from(baseline_age), 8)?;
        }
        w.write_bool(own.last_input.is_some())?;
        if let Some(sequence) = own.last_input {
            w.write_uint(u64::from(sequence), 16)?;
        }
        write_own(&mut w, schema, own, own_state)?;
        w.write_uint(self.destroys.len() as u64, 8)?;
        let mut ids = IdWriter::default();
        for &id in &self.destroys {
            ids.write(&mut w, id, Fields::default())?;
        }
        w.write_uint(counts.creates as u64, 8)?;
        write_sent(&mut w, newcomers)?;
        w.write_uint(counts.updates as u64, 8)?;
        write_sent(&mut w, kept)?;
        w.write_uint(self.bullets_near.len() as u64, 6)?;
        for &(_, item) in &self.bullets_near {
            let bullet = &frame.bullets[item as usize];
            let mut fields = Fields::default();
            fields.push(bullet.x, x_bits);
            fields.push(bullet.y, y_bits);
            fields.push(bullet.direction, 10);
            fields.push(u16::from(bullet.owner == recipient), 1);
            fields.write(&mut w)?;
        }
        let len = w.finish()?;

        client
            .history
            .store(tick, self.capture, &self.view_ids, &self.view_waits);
        client.last_sent = Some(tick);
        client.tokens -= len as i64;
        Ok(len)
    }
}

fn header_bits(baseline: bool, input: bool) -> usize {
    32 + 1 + if baseline { 8 } else { 0 } + 1 + if input { 16 } else { 0 }
}

pub(crate) fn varint_bits(value: u32) -> usize {
    let significant = 32 - value.leading_zeros() as usize;
    8 * significant.div_ceil(7).max(1)
}

fn own_bits(schema: &SnapshotSchema, own: &OwnState, state: &EntityState) -> usize {
    1 + 64
        + 10
        + schema.health_bits() as usize
        + if state.alive {
            0
        } else {
            varint_bits(own.respawn_in)
        }
        + varint_bits(own.kills)
        + varint_bits(own.deaths)
        + varint_bits(own.score)
}

fn write_own(
    w: &mut BitWriter<'_>,
    schema: &SnapshotSchema,
    own: &OwnState,
    state: &EntityState,
) -> Result<(), EncodeError> {
    w.write_bool(state.alive)?;
    w.write_f32(own.position.x)?;
    w.write_f32(own.position.y)?;
    w.write_uint(u64::from(state.aim), 10)?;
    w.write_uint(u64::from(state.health), schema.health_bits())?;
    if !state.alive {
        w.write_varint(u64::from(own.respawn_in))?;
    }
    w.write_varint(u64::from(own.kills))?;
    w.write_varint(u64::from(own.deaths))?;
    w.write_varint(u64::from(own.score))
}

/// Fields packed least significant first, as the wire stores them: pushing `a` then `b`
/// and writing the result once puts the same bits on the wire as writing `a` then `b`, in
/// one or two writer calls rather than one per field. Holds at most 64 bits (an update
/// takes at most 58: `3 + 2 × (1 + 16) + 10 + 11`).
#[derive(Debug, Clone, Copy, Default)]
struct Fields {
    value: u64,
    len: u32,
}

impl Fields {
    /// A newcomer's whole state.
    fn full(schema: &SnapshotSchema, state: &PackedState) -> Self {
        let (x_bits, y_bits) = schema.position_bits();
        let mut fields = Self::default();
        fields.push(state.x, x_bits);
        fields.push(state.y, y_bits);
        fields.push(state.aim, 10);
        fields.push_vitals(schema, state);
        fields
    }

    /// A member's change from `old`: a flag per group, then the groups that changed.
    fn update(schema: &SnapshotSchema, old: &PackedState, new: &PackedState) -> Self {
        let (x_bits, y_bits) = schema.position_bits();
        let mut fields = Self::default();
        let moved = (old.x, old.y) != (new.x, new.y);
        fields.push(u16::from(moved), 1);
        if moved {
            fields.push_axis(old.x, new.x, x_bits);
            fields.push_axis(old.y, new.y, y_bits);
        }
        let aimed = old.aim != new.aim;
        fields.push(u16::from(aimed), 1);
        if aimed {
            fields.push(new.aim, 10);
        }
        let vitals = old.vitals != new.vitals;
        fields.push(u16::from(vitals), 1);
        if vitals {
            fields.push_vitals(schema, new);
        }
        fields
    }

    /// Health, then the in-play bit.
    #[inline]
    fn push_vitals(&mut self, schema: &SnapshotSchema, state: &PackedState) {
        self.push(state.health(), schema.health_bits());
        self.push(u16::from(state.alive()), 1);
    }

    /// An 8-bit delta when the step moved by less than 128, else the new step whole.
    #[inline]
    fn push_axis(&mut self, old: u16, new: u16, full: u32) {
        let delta = i32::from(new) - i32::from(old);
        if (-128..=127).contains(&delta) {
            self.push(1 | ((delta + 128) as u16) << 1, 9);
        } else {
            self.push(0, 1);
            self.push(new, full);
        }
    }

    /// Appends `value`, which fits in `bits` (the schema's grids guarantee it).
    #[inline(always)]
    fn push(&mut self, value: u16, bits: u32) {
        debug_assert!(u64::from(value) >> bits == 0, "{value} in {bits} bits");
        self.value |= u64::from(value) << self.len;
        self.len += bits;
    }

    #[inline(always)]
    fn write(self, w: &mut BitWriter<'_>) -> Result<(), EncodeError> {
        w.write_wide(self.value, self.len)
    }
}

/// How many creates and updates a snapshot carries.
#[derive(Debug, Default)]
struct Sent {
    creates: usize,
    updates: usize,
}

/// Fills `ids` with the view the snapshot leaves the client with, in id order: a member
/// (its state now if sent or unchanged, its acknowledged one while it waits) and a newcomer
/// if sent; and `waits` with the members that wait, whole (the others hold the frame's
/// state). Members (`kept`) and newcomers are each in id order, so they are merged.
fn view_records(
    (ids, waits): (&mut Vec<EntityId>, &mut Vec<Record>),
    kept: &[Candidate],
    newcomers: &[Candidate],
    baseline: &[Record],
) -> Sent {
    ids.clear();
    waits.clear();
    let mut sent = Sent::default();
    let mut created = newcomers.iter().filter(|c| c.fate == Fate::Send).peekable();
    for member in kept {
        while let Some(newcomer) = created.next_if(|c| c.id < member.id) {
            ids.push(newcomer.id);
            sent.creates += 1;
        }
        ids.push(member.id);
        match member.fate {
            Fate::Send => sent.updates += 1,
            Fate::Unchanged => {}
            Fate::Wait => waits.push(baseline[member.member as usize]),
        }
    }
    for newcomer in created {
        ids.push(newcomer.id);
        sent.creates += 1;
    }
    sent
}

/// Writes the candidates of `part` (newcomers: the creates; members: the updates) that
/// are sent, each as its id and its packed fields.
fn write_sent(w: &mut BitWriter<'_>, part: &[Candidate]) -> Result<(), EncodeError> {
    let mut ids = IdWriter::default();
    for candidate in part.iter().filter(|c| c.fate == Fate::Send) {
        ids.write(w, candidate.id, candidate.fields)?;
    }
    Ok(())
}

/// Writes ascending ids as gaps from the previous one (see [`ID_BITS_MAX`]).
#[derive(Default)]
struct IdWriter {
    next: u32,
}

impl IdWriter {
    /// Writes `id`'s gap, then `fields` (in one writer call when both fit 64 bits).
    #[inline(always)]
    fn write(
        &mut self,
        w: &mut BitWriter<'_>,
        id: EntityId,
        fields: Fields,
    ) -> Result<(), EncodeError> {
        let gap = u32::from(id) - self.next;
        let mut packed = Fields::default();
        if gap < 16 {
            packed.push(0b0, 1);
            packed.push(gap as u16, 4);
        } else if gap < 272 {
            packed.push(0b01, 2);
            packed.push((gap - 16) as u16, 8);
        } else {
            packed.push(0b11, 2);
            packed.push(gap as u16, 16);
        }
        self.next = u32::from(id) + 1;
        if packed.len + fields.len <= 64 {
            packed.value |= fields.value << packed.len;
            packed.len += fields.len;
            packed.write(w)
        } else {
            packed.write(w)?;
            fields.write(w)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_12_bytes_and_gives_back_the_state_it_packed() {
        assert_eq!(std::mem::size_of::<Record>(), 12);
        for (health, alive) in [
            (0, false),
            (0, true),
            (1023, true),
            (1023, false),
            (77, true),
        ] {
            let state = EntityState {
                x: u16::MAX,
                y: 1,
                aim: 1023,
                health,
                alive,
            };
            let record = Record::new(9, &state, 70_000);
            assert_eq!((record.id, record.state()), (9, state));
        }
    }

    #[test]
    fn total_order_keys_order_like_total_cmp_and_give_the_value_back() {
        let values = [
            f32::NEG_INFINITY,
            -1e30,
            -1.0,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            0.64,
            1.0,
            400.0,
            f32::INFINITY,
            f32::NAN,
            -f32::NAN,
        ];
        for a in values {
            assert_eq!(
                from_total_order_key(total_order_key(a)).to_bits(),
                a.to_bits()
            );
            for b in values {
                assert_eq!(
                    total_order_key(a).cmp(&total_order_key(b)),
                    a.total_cmp(&b),
                    "{a} against {b}"
                );
            }
        }
    }

    #[test]
    fn a_records_age_is_counted_across_the_16_bit_wrap() {
        let record = Record::new(1, &EntityState::default(), 65_530);
        assert_eq!(record.age(65_530), 0);
        assert_eq!(record.age(65_540), 10);
        assert_eq!(record.age(65_536 * 3 + 2), 8);
    }
}
