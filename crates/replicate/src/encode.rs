//! One member's snapshot: for each section (the game's entities, then the roster),
//! selection (interest, cap), priority and budget; then the bits.
//!
//! # Selection, per member
//!
//! - **Interest**: with [`Interest::Everything`] every entity its audience admits; with
//!   [`Interest::Radius`] those within the radius of the member's focus (10% more for one
//!   already in view), from the world's grid, and every entity without a position. The
//!   roster is always sent whole.
//! - **Cap**: the `max_entities` nearest (one already in view counts as 20% nearer, so the
//!   edge does not flicker). The rest, and every entity gone, are destroyed.
//! - **Priority**: an entity whose visible fields equal what the member holds costs
//!   nothing. Changed ones are ranked by `age × weight(distance)`, `age` being the ticks since
//!   the member's acknowledged copy was current; the accumulator lives in that copy, so a
//!   lost packet does not reset it, and an entity left out wins within a few ticks.
//! - **Budget**: the header and destroys always go, then the roster's changes, then the
//!   entities' creates and updates in priority order while they fit `min(packet budget,
//!   bandwidth tokens)`. What does not fit waits: a new entity is not created yet, a changed
//!   one keeps the member's acknowledged state.
//!
//! The bits are specified in `docs/REPLICATION.md`.

use tickwire_wire::replicate::{FieldMask, Replicate};
use tickwire_wire::{BitCounter, BitWrite, BitWriter, EncodeError, bits_for_span};

use crate::config::{Interest, MAX_VIEW, ReplicationConfig};
use crate::gaps::{GapWriter, ID_BITS_MAX};
use crate::grid::Grid;
use crate::profile::{self, KindProfile, ReplicationProfile};
use crate::roster::Member;
use crate::viewer::{Record, Viewer};
use crate::world::{ReplicationStats, Slot};
use crate::{EntityId, ViewerId};

/// The age a new entity is ranked with.
const NEW_ENTITY_AGE: f32 = 4.0;

/// Bits of a snapshot's header at most: tick, baseline.
pub(crate) const HEADER_BITS: usize = 32 + 1 + 8;

/// Bits of a section's three counts.
pub(crate) const SECTION_BITS: usize = 3 * 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Unchanged,
    Create,
    Update,
    Wait,
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    id: EntityId,
    distance_squared: f32,
    /// Index in the baseline's records, if the member holds it (of the same kind).
    held: Option<u32>,
    mask: FieldMask,
    cost: u32,
    priority: f32,
    fate: Fate,
    /// The member holds values of fields it is no longer sent (it lost the entity's
    /// ownership): they are sent as their defaults.
    scrub: bool,
}

/// Which candidates a section considers.
enum Reach<'a> {
    Everything,
    Radius {
        grid: &'a Grid,
        unplaced: &'a [EntityId],
        focus: Option<[f32; 2]>,
        radius: f32,
    },
}

/// One section's scratch, kept across members and ticks so a steady state allocates
/// nothing but the records it stores.
#[derive(Debug)]
struct Section<T> {
    candidates: Vec<Candidate>,
    destroys: Vec<EntityId>,
    by_priority: Vec<u32>,
    view: Vec<Record<T>>,
}

impl<T> Default for Section<T> {
    fn default() -> Self {
        Self {
            candidates: Vec::new(),
            destroys: Vec::new(),
            by_priority: Vec::new(),
            view: Vec::new(),
        }
    }
}

impl<T: Replicate> Section<T> {
    /// Interest, cap, destroys, and each candidate's change and cost; returns the bits the
    /// creates and updates want.
    #[allow(clippy::too_many_arguments)]
    fn select(
        &mut self,
        slots: &[Option<Slot<T>>],
        reach: Reach<'_>,
        cap: usize,
        member: ViewerId,
        baseline: &[Record<T>],
        tick: u32,
        stats: &mut ReplicationStats,
    ) -> usize {
        let held = |id: EntityId| {
            baseline
                .binary_search_by_key(&id, |record| record.id)
                .ok()
                .map(|index| index as u32)
        };

        self.candidates.clear();
        let mut consider = |id: EntityId, distance_squared: f32| {
            let Some(slot) = &slots[usize::from(id)] else {
                return;
            };
            if slot.admits(member) {
                self.candidates.push(Candidate {
                    id,
                    distance_squared,
                    held: held(id),
                    mask: 0,
                    cost: 0,
                    priority: 0.0,
                    fate: Fate::Unchanged,
                    scrub: false,
                });
            }
        };
        match reach {
            Reach::Everything => {
                for (id, slot) in slots.iter().enumerate() {
                    if slot.is_some() {
                        consider(id as EntityId, 0.0);
                    }
                }
            }
            Reach::Radius {
                grid,
                unplaced,
                focus,
                radius,
            } => {
                for &id in unplaced {
                    consider(id, 0.0);
                }
                if let Some(focus) = focus {
                    let reach = radius * 1.1;
                    grid.near(focus, reach, |id, distance_squared| {
                        if distance_squared <= radius * radius
                            || (distance_squared <= reach * reach && held(id).is_some())
                        {
                            consider(id, distance_squared);
                        }
                    });
                }
            }
        }

        // Cap: the nearest, those in view counting as 20% nearer.
        if self.candidates.len() > cap {
            let rank = |candidate: &Candidate| {
                let factor = if candidate.held.is_some() { 0.64 } else { 1.0 };
                candidate.distance_squared * factor
            };
            self.candidates.select_nth_unstable_by(cap - 1, |a, b| {
                rank(a).total_cmp(&rank(b)).then(a.id.cmp(&b.id))
            });
            self.candidates.truncate(cap);
        }
        self.candidates
            .sort_unstable_by_key(|candidate| candidate.id);

        // Destroys: held, and no longer a candidate of the same kind.
        self.destroys.clear();
        let mut next = self.candidates.iter().peekable();
        for record in baseline {
            while next.next_if(|candidate| candidate.id < record.id).is_some() {}
            let kept = next.peek().is_some_and(|candidate| {
                candidate.id == record.id
                    && slots[usize::from(record.id)]
                        .as_ref()
                        .is_some_and(|slot| slot.state.kind() == record.state.kind())
            });
            if !kept {
                self.destroys.push(record.id);
            }
        }

        // What changed, what it costs, how urgent it is.
        let kind_bits = bits_for_span(T::KINDS.len() as u64 - 1);
        let mut wanted = 0usize;
        for candidate in &mut self.candidates {
            let Some(slot) = &slots[usize::from(candidate.id)] else {
                continue;
            };
            let state = &slot.state;
            let kind = &T::KINDS[state.kind()];
            let visible = slot.visible_to(member);
            let weight = 1.0 / (1.0 + candidate.distance_squared / 16.0);
            let record = candidate
                .held
                .map(|index| &baseline[index as usize])
                .filter(|record| record.state.kind() == state.kind());
            let hidden = kind.all() & !visible;
            let header_bits = match record {
                Some(record) => {
                    let stale = record.state.non_default(hidden);
                    candidate.scrub = stale != 0;
                    candidate.mask = (state.changed(&record.state) & visible) | stale;
                    if candidate.mask == 0 {
                        candidate.fate = Fate::Unchanged;
                        continue;
                    }
                    candidate.fate = Fate::Update;
                    let age = tick.wrapping_sub(record.refreshed).min(u32::from(u16::MAX));
                    candidate.priority = (age as f32 + 1.0) * weight;
                    kind.fields
                }
                None => {
                    candidate.held = None;
                    candidate.mask = visible;
                    candidate.fate = Fate::Create;
                    candidate.priority = NEW_ENTITY_AGE * weight;
                    kind_bits + kind.fields
                }
            };
            let mut counter = BitCounter::default();
            let encoded = match candidate.scrub {
                false => state.encode_fields(candidate.mask, &mut counter),
                true => scrubbed(state, hidden).encode_fields(candidate.mask, &mut counter),
            };
            if encoded.is_err() {
                // Not sent: a new entity is not created, a held one keeps the member's copy.
                stats.unencodable += 1;
                candidate.fate = Fate::Wait;
                continue;
            }
            candidate.cost = (ID_BITS_MAX + header_bits as usize + counter.bits_written()) as u32;
            wanted += candidate.cost as usize;
        }
        wanted
    }

    /// Bits the section always takes: its counts and destroys.
    fn fixed_bits(&self) -> usize {
        SECTION_BITS + self.destroys.len() * ID_BITS_MAX
    }

    /// Keeps the creates and updates that fit `available` bits, by priority; returns the
    /// bits they take.
    fn fit(&mut self, wanted: usize, available: usize, stats: &mut ReplicationStats) -> usize {
        if wanted <= available {
            return wanted;
        }
        self.by_priority.clear();
        self.by_priority
            .extend((0..self.candidates.len() as u32).filter(|&index| {
                matches!(
                    self.candidates[index as usize].fate,
                    Fate::Create | Fate::Update
                )
            }));
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
                stats.deferred += 1;
            }
        }
        available - left
    }

    /// The view this snapshot leaves the member with, in [`Section::view`].
    fn build_view(
        &mut self,
        slots: &[Option<Slot<T>>],
        member: ViewerId,
        baseline: &[Record<T>],
        tick: u32,
    ) {
        self.view.clear();
        for candidate in &self.candidates {
            let Some(slot) = &slots[usize::from(candidate.id)] else {
                continue;
            };
            let record = match (candidate.fate, candidate.held) {
                (Fate::Create | Fate::Update, _) => {
                    // Fields the member is not sent are at their defaults in its mirror: they
                    // were never sent, or were just sent as defaults (`scrub`).
                    let hidden = T::KINDS[slot.state.kind()].all() & !slot.visible_to(member);
                    Record {
                        id: candidate.id,
                        state: scrubbed(&slot.state, hidden),
                        refreshed: tick,
                    }
                }
                (Fate::Unchanged, Some(index)) => Record {
                    refreshed: tick,
                    ..baseline[index as usize].clone()
                },
                (Fate::Wait, Some(index)) => baseline[index as usize].clone(),
                (Fate::Unchanged | Fate::Wait, None) => continue,
            };
            self.view.push(record);
        }
    }

    /// Whether the section has nothing to write.
    fn is_empty(&self) -> bool {
        self.destroys.is_empty()
            && self
                .candidates
                .iter()
                .all(|candidate| matches!(candidate.fate, Fate::Unchanged | Fate::Wait))
    }

    /// Destroys, creates and updates.
    /// Destroys, creates and updates; with `profile` (one entry per kind), what each entity
    /// written costs is added to its kind's.
    fn write(
        &self,
        writer: &mut BitWriter<'_>,
        slots: &[Option<Slot<T>>],
        member: ViewerId,
        mut profile: Option<&mut [KindProfile]>,
    ) -> Result<(), EncodeError> {
        let kind_bits = bits_for_span(T::KINDS.len() as u64 - 1);
        writer.write_uint(self.destroys.len() as u64, 8)?;
        let mut gaps = GapWriter::default();
        for &id in &self.destroys {
            gaps.write(writer, id)?;
        }
        for fate in [Fate::Create, Fate::Update] {
            let sent = || self.candidates.iter().filter(move |c| c.fate == fate);
            writer.write_uint(sent().count() as u64, 8)?;
            let mut gaps = GapWriter::default();
            for candidate in sent() {
                let Some(slot) = &slots[usize::from(candidate.id)] else {
                    continue;
                };
                let kind = slot.state.kind();
                let start = writer.bits_written();
                gaps.write(writer, candidate.id)?;
                if fate == Fate::Create {
                    writer.write_uint(kind as u64, kind_bits)?;
                }
                writer.write_uint(candidate.mask, T::KINDS[kind].fields)?;
                if let Some(kind_profile) = profile.as_deref_mut().and_then(|p| p.get_mut(kind)) {
                    let framing = writer.bits_written() - start;
                    profile::add_entity(kind_profile, &slot.state, candidate.mask, framing);
                }
                match candidate.scrub {
                    false => slot.state.encode_fields(candidate.mask, writer)?,
                    true => {
                        let hidden = T::KINDS[kind].all() & !slot.visible_to(member);
                        scrubbed(&slot.state, hidden).encode_fields(candidate.mask, writer)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// `state` as a member who is not sent the fields in `hidden` holds it: those at their
/// defaults.
fn scrubbed<T: Replicate>(state: &T, hidden: FieldMask) -> T {
    let mut state = state.clone();
    if hidden != 0 {
        state.reset_fields(hidden);
    }
    state
}

/// Scratch kept across members and ticks.
#[derive(Debug)]
pub(crate) struct Encoder<E> {
    grid: Grid,
    /// Entities without a position, for radius interest.
    unplaced: Vec<EntityId>,
    entities: Section<E>,
    roster: Section<Member>,
    out: Vec<u8>,
}

impl<E> Default for Encoder<E> {
    fn default() -> Self {
        Self {
            grid: Grid::default(),
            unplaced: Vec::new(),
            entities: Section::default(),
            roster: Section::default(),
            out: Vec::new(),
        }
    }
}

impl<E: Replicate> Encoder<E> {
    /// Once per send: the grid every member's radius interest reads.
    pub(crate) fn prepare(&mut self, slots: &[Option<Slot<E>>], config: &ReplicationConfig) {
        let Interest::Radius { cell_size, .. } = config.interest else {
            return;
        };
        self.grid.clear(cell_size);
        self.unplaced.clear();
        for (id, slot) in slots.iter().enumerate() {
            let Some(slot) = slot else { continue };
            match slot.state.position() {
                Some(position) => self.grid.insert(id as EntityId, position),
                None => self.unplaced.push(id as EntityId),
            }
        }
    }

    /// The member's snapshot of `tick`; the views it leaves are stored in its history. With
    /// `profile`, what it carries is measured into it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn encode(
        &mut self,
        slots: &[Option<Slot<E>>],
        roster: &[Option<Slot<Member>>],
        config: &ReplicationConfig,
        member: ViewerId,
        viewer: &mut Viewer<E>,
        tick: u32,
        stats: &mut ReplicationStats,
        mut profile: Option<&mut ReplicationProfile>,
    ) -> &[u8] {
        let baseline_age = viewer.baseline_age(tick, config.history);
        let (entity_baseline, roster_baseline) = match baseline_age {
            Some(_) => (viewer.entities.baseline(), viewer.roster.baseline()),
            None => (&[][..], &[][..]),
        };
        let reach = match config.interest {
            Interest::Everything => Reach::Everything,
            Interest::Radius { radius, .. } => Reach::Radius {
                grid: &self.grid,
                unplaced: &self.unplaced,
                focus: viewer.focus,
                radius,
            },
        };
        let entities_wanted = self.entities.select(
            slots,
            reach,
            config.max_entities,
            member,
            entity_baseline,
            tick,
            stats,
        );
        let roster_wanted = self.roster.select(
            roster,
            Reach::Everything,
            MAX_VIEW,
            member,
            roster_baseline,
            tick,
            stats,
        );

        // Budget: the header, both sections' counts and destroys, then the roster, then the
        // entities.
        let budget_bytes = config.packet_budget.min(viewer.tokens.max(0) as usize);
        let fixed = HEADER_BITS + self.entities.fixed_bits() + 1 + self.roster.fixed_bits();
        let mut available = (budget_bytes * 8).saturating_sub(fixed);
        available -= self.roster.fit(roster_wanted, available, stats);
        self.entities.fit(entities_wanted, available, stats);

        self.entities
            .build_view(slots, member, entity_baseline, tick);
        self.roster
            .build_view(roster, member, roster_baseline, tick);

        // Room for a full-budget snapshot whatever the tokens (the budget bounds what was
        // chosen), or for more when destroys alone exceed it (a crowd leaving at once).
        self.out
            .resize(config.packet_budget.max(fixed.div_ceil(8)) + 8, 0);
        let accounted_before = profile.as_deref().map(ReplicationProfile::total_bytes);
        let mut writer = BitWriter::new(&mut self.out);
        let written = (|| {
            writer.write_uint(u64::from(tick), 32)?;
            writer.write_bool(baseline_age.is_some())?;
            if let Some(age) = baseline_age {
                writer.write_uint(u64::from(age), 8)?;
            }
            let kinds = profile.as_deref_mut().map(|p| &mut p.kinds[..]);
            self.entities.write(&mut writer, slots, member, kinds)?;
            let roster_changed = !self.roster.is_empty();
            writer.write_bool(roster_changed)?;
            if roster_changed {
                let seats = profile
                    .as_deref_mut()
                    .map(|p| std::slice::from_mut(&mut p.roster));
                self.roster.write(&mut writer, roster, member, seats)?;
            }
            writer.finish()
        })();
        // Every part was measured against the budget, and the buffer holds more than it.
        let len = written.unwrap_or(0);
        if let (Some(profile), Some(before)) = (profile, accounted_before) {
            let entities = profile.total_bytes() - before;
            profile::add_overhead(profile, len * 8, entities);
        }
        viewer.store(
            tick,
            &mut self.entities.view,
            &mut self.roster.view,
            config.history,
        );
        &self.out[..len]
    }
}
