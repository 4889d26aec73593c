//! [`Mirror`]: a client's copy of what a [`ServerWorld`](crate::ServerWorld) sends it. Each
//! snapshot is applied to the view of its baseline tick; the mirror keeps its last
//! [`MAX_HISTORY`] views as possible baselines, answers each applied snapshot with the
//! acknowledgement to send back, and lists what changed since the view before it (added,
//! changed field by field, removed) for the game's callbacks.
//!
//! Everything read is checked: counts, ids, kinds and masks in range, ids in the order the
//! format requires, an update only for an entity held, a baseline only if held; a snapshot
//! that fails leaves the mirror as it was.

use tickwire_wire::replicate::{FieldMask, Replicate};
use tickwire_wire::{BitReader, DecodeError, bits_for_span};

use crate::EntityId;
use crate::config::{MAX_HISTORY, MAX_VIEW};
use crate::gaps::GapReader;
use crate::roster::Member;

/// What a snapshot changed, against the mirror's newest view before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// An entity came into view (spawned, or came into range).
    Added(EntityId),
    /// Fields of an entity changed: bit `i` for its `i`-th field.
    Changed(EntityId, FieldMask),
    /// An entity left the view (despawned, or out of range).
    Removed(EntityId),
}

/// Why a snapshot was not applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MirrorError {
    /// The bytes are not a snapshot of this world's types.
    #[error("malformed snapshot: {0}")]
    Malformed(#[from] DecodeError),
    /// The snapshot is not newer than the newest applied (sequenced channels drop these;
    /// other channels may deliver them late).
    #[error("snapshot of tick {tick} is not newer than tick {newest}")]
    Stale {
        /// Its tick.
        tick: u32,
        /// The newest applied.
        newest: u32,
    },
    /// Its baseline is not among the views held.
    #[error("snapshot of tick {tick} is a delta against tick {baseline}, which is not held")]
    MissingBaseline {
        /// Its tick.
        tick: u32,
        /// The baseline's.
        baseline: u32,
    },
    /// It breaks the format's rules: what it does is named.
    #[error("invalid snapshot: {0}")]
    Invalid(&'static str),
}

#[derive(Debug, Clone)]
struct View<E> {
    tick: u32,
    entities: Vec<(EntityId, E)>,
    /// The roster, by seat.
    roster: Vec<(u16, Member)>,
}

/// A client's copy of a server world of `E`.
#[derive(Debug, Clone)]
pub struct Mirror<E> {
    /// The last views, oldest overwritten first; `newest` indexes the current one.
    views: Vec<View<E>>,
    newest: Option<usize>,
    /// The slot to overwrite next once all are taken: the oldest.
    next: usize,
    /// Where a snapshot is built before it is accepted.
    building: Vec<(EntityId, E)>,
    building_roster: Vec<(u16, Member)>,
    changes: Vec<Change>,
    roster_changes: Vec<Change>,
}

impl<E> Default for Mirror<E> {
    fn default() -> Self {
        Self {
            views: Vec::new(),
            newest: None,
            next: 0,
            building: Vec::new(),
            building_roster: Vec::new(),
            changes: Vec::new(),
            roster_changes: Vec::new(),
        }
    }
}

impl<E: Replicate> Mirror<E> {
    /// An empty mirror.
    pub fn new() -> Self {
        Self::default()
    }

    /// The tick of the newest snapshot applied.
    pub fn tick(&self) -> Option<u32> {
        self.newest.map(|index| self.views[index].tick)
    }

    fn current(&self) -> &[(EntityId, E)] {
        self.newest
            .map_or(&[][..], |index| &self.views[index].entities[..])
    }

    /// An entity as the newest snapshot left it.
    pub fn get(&self, id: EntityId) -> Option<&E> {
        let current = self.current();
        let index = current.binary_search_by_key(&id, |(id, _)| *id).ok()?;
        Some(&current[index].1)
    }

    /// Every entity in view, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (EntityId, &E)> {
        self.current().iter().map(|(id, state)| (*id, state))
    }

    /// Entities in view.
    pub fn len(&self) -> usize {
        self.current().len()
    }

    /// Whether none is in view.
    pub fn is_empty(&self) -> bool {
        self.current().is_empty()
    }

    /// What the last applied snapshot changed.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// The room's members by seat, as the newest snapshot left them.
    pub fn roster(&self) -> impl Iterator<Item = (u16, &Member)> {
        let roster = self
            .newest
            .map_or(&[][..], |index| &self.views[index].roster[..]);
        roster.iter().map(|(seat, member)| (*seat, member))
    }

    /// This client's own seat, once the roster has told it.
    pub fn my_seat(&self) -> Option<u16> {
        self.roster()
            .find(|(_, member)| member.you)
            .map(|(seat, _)| seat)
    }

    /// What the last applied snapshot changed in the roster (ids are seats).
    pub fn roster_changes(&self) -> &[Change] {
        &self.roster_changes
    }

    /// Forgets everything (a reconnect: the server sends the full state again).
    pub fn clear(&mut self) {
        self.views.clear();
        self.newest = None;
        self.next = 0;
        self.changes.clear();
        self.roster_changes.clear();
    }

    /// Applies a snapshot; on success returns its tick, to acknowledge with
    /// [`ack_message`](crate::ack_message).
    pub fn apply(&mut self, bytes: &[u8]) -> Result<u32, MirrorError> {
        let mut reader = BitReader::new(bytes);
        let tick = reader.read_bits(32)?;
        if let Some(newest) = self.tick()
            && tick.wrapping_sub(newest) as i32 <= 0
        {
            return Err(MirrorError::Stale { tick, newest });
        }
        let baseline = if reader.read_bool()? {
            let age = reader.read_bits(8)?;
            if age == 0 {
                return Err(MirrorError::Invalid("a baseline 0 ticks back"));
            }
            let baseline = tick.wrapping_sub(age);
            let Some(view) = self.views.iter().find(|view| view.tick == baseline) else {
                return Err(MirrorError::MissingBaseline { tick, baseline });
            };
            Some(view)
        } else {
            None
        };
        let mut building = std::mem::take(&mut self.building);
        let mut building_roster = std::mem::take(&mut self.building_roster);
        building.clear();
        building_roster.clear();
        if let Some(view) = baseline {
            building.clone_from(&view.entities);
            building_roster.clone_from(&view.roster);
        }
        let result = read_section(&mut reader, &mut building).and_then(|()| {
            if reader.read_bool()? {
                read_section(&mut reader, &mut building_roster)?;
            }
            reader.finish()?;
            Ok(())
        });
        if let Err(error) = result {
            self.building = building;
            self.building_roster = building_roster;
            return Err(error);
        }
        self.accept(tick, building, building_roster);
        Ok(tick)
    }

    /// Makes `entities` and `roster` the newest view, of `tick`, listing what changed.
    fn accept(&mut self, tick: u32, entities: Vec<(EntityId, E)>, roster: Vec<(u16, Member)>) {
        let (before, before_roster) = match self.newest {
            Some(index) => (
                &self.views[index].entities[..],
                &self.views[index].roster[..],
            ),
            None => (&[][..], &[][..]),
        };
        diff(before, &entities, &mut self.changes);
        diff(before_roster, &roster, &mut self.roster_changes);
        let view = View {
            tick,
            entities,
            roster,
        };
        // Views arrive in tick order, so the ring's next slot holds the oldest.
        let slot = if self.views.len() < MAX_HISTORY {
            self.views.push(view);
            self.views.len() - 1
        } else {
            let slot = self.next;
            let old = std::mem::replace(&mut self.views[slot], view);
            self.building = old.entities;
            self.building_roster = old.roster;
            slot
        };
        self.next = (slot + 1) % MAX_HISTORY;
        self.newest = Some(slot);
    }
}

/// What changed from `before` to `after` (both in id order), into `changes`.
fn diff<T: Replicate>(before: &[(u16, T)], after: &[(u16, T)], changes: &mut Vec<Change>) {
    changes.clear();
    let (mut old, mut new) = (before.iter().peekable(), after.iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (Some((a, _)), Some((b, _))) if a < b => {
                changes.push(Change::Removed(*a));
                old.next();
            }
            (Some((a, _)), Some((b, _))) if a > b => {
                changes.push(Change::Added(*b));
                new.next();
            }
            (Some((id, then)), Some((_, now))) => {
                if then.kind() != now.kind() {
                    changes.push(Change::Removed(*id));
                    changes.push(Change::Added(*id));
                } else {
                    let mask = now.changed(then);
                    if mask != 0 {
                        changes.push(Change::Changed(*id, mask));
                    }
                }
                old.next();
                new.next();
            }
            (Some((id, _)), None) => {
                changes.push(Change::Removed(*id));
                old.next();
            }
            (None, Some((id, _))) => {
                changes.push(Change::Added(*id));
                new.next();
            }
            (None, None) => break,
        }
    }
}

/// Destroys, creates and updates over `view` (sorted by id), in place.
fn read_section<E: Replicate>(
    reader: &mut BitReader<'_>,
    view: &mut Vec<(EntityId, E)>,
) -> Result<(), MirrorError> {
    let destroys = reader.read_bits(8)?;
    let mut gaps = GapReader::default();
    for _ in 0..destroys {
        let id = gaps.read(reader)?;
        let index = view
            .binary_search_by_key(&id, |(id, _)| *id)
            .map_err(|_| MirrorError::Invalid("a destroy of an entity not in view"))?;
        view.remove(index);
    }
    let kind_bits = bits_for_span(E::KINDS.len() as u64 - 1);
    let creates = reader.read_bits(8)?;
    let mut gaps = GapReader::default();
    for _ in 0..creates {
        let id = gaps.read(reader)?;
        let kind = reader.read_bits(kind_bits)? as usize;
        let Some(info) = E::KINDS.get(kind) else {
            return Err(MirrorError::Invalid("a create of an unknown kind"));
        };
        let mask = reader.read_uint(info.fields)?;
        let state = E::decode_new(kind, mask, reader)?;
        match view.binary_search_by_key(&id, |(id, _)| *id) {
            Ok(_) => {
                return Err(MirrorError::Invalid(
                    "a create of an entity already in view",
                ));
            }
            Err(index) => view.insert(index, (id, state)),
        }
        if view.len() > MAX_VIEW {
            return Err(MirrorError::Invalid("a view of more than 255 entities"));
        }
    }
    let updates = reader.read_bits(8)?;
    let mut gaps = GapReader::default();
    for _ in 0..updates {
        let id = gaps.read(reader)?;
        let index = view
            .binary_search_by_key(&id, |(id, _)| *id)
            .map_err(|_| MirrorError::Invalid("an update of an entity not in view"))?;
        let state = &mut view[index].1;
        let mask = reader.read_uint(E::KINDS[state.kind()].fields)?;
        state.decode_fields(mask, reader)?;
    }
    Ok(())
}
