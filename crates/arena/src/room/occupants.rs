//! The room's players: one list in join order (snapshots go out in it, so a room is
//! deterministic) and an index by player id into it.
//!
//! The records sit in the list itself rather than in a map by id: a map of 30 records of
//! about 230 bytes has 64 buckets (its load factor), so it held twice the records' size,
//! about 490 bytes a player in a `bench hobo` room; the index holds 12 bytes a bucket.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::time::Instant;

use tickwire_room::room::PlayerId;

use crate::player::PlayerKey;
use crate::snapshot::{ClientSnapshots, EntityId};
use crate::world::KeyHasher;

/// A player in the room.
pub(super) struct Occupant {
    pub(super) id: PlayerId,
    pub(super) key: PlayerKey,
    pub(super) entity: EntityId,
    pub(super) name: String,
    pub(super) snapshots: ClientSnapshots,
    pub(super) connected: bool,
    pub(super) violations: u32,
    pub(super) kicked: bool,
    pub(super) joined_at: Instant,
    pub(super) next_chat_tick: u64,
    /// Snapshots go to this player on ticks where `(tick + phase) % interval == 0`.
    pub(super) phase: u32,
    /// Send a snapshot at the next publish whatever the interval (a teleport, a respawn),
    /// within that publish's budget of snapshots out of turn.
    pub(super) refresh: bool,
    /// The room heard this player's name (within the roster limit), so it hears them leave.
    pub(super) announced: bool,
}

/// Every occupant, in join order, found by id.
#[derive(Default)]
pub(super) struct Occupants {
    list: Vec<Occupant>,
    /// Each player's place in `list`.
    places: HashMap<PlayerId, u32, BuildHasherDefault<KeyHasher>>,
}

impl Occupants {
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    pub(super) fn contains(&self, id: PlayerId) -> bool {
        self.places.contains_key(&id)
    }

    pub(super) fn get(&self, id: PlayerId) -> Option<&Occupant> {
        let place = *self.places.get(&id)?;
        self.list.get(place as usize)
    }

    pub(super) fn get_mut(&mut self, id: PlayerId) -> Option<&mut Occupant> {
        let place = *self.places.get(&id)?;
        self.list.get_mut(place as usize)
    }

    /// Adds `occupant` last in join order; false (and nothing added) if its id is here.
    pub(super) fn push(&mut self, occupant: Occupant) -> bool {
        if self.places.contains_key(&occupant.id) {
            return false;
        }
        self.places.insert(occupant.id, self.list.len() as u32);
        self.list.push(occupant);
        true
    }

    /// Takes `id` out; the others keep their join order.
    pub(super) fn remove(&mut self, id: PlayerId) -> Option<Occupant> {
        let place = self.places.remove(&id)? as usize;
        let occupant = self.list.remove(place);
        for later in &self.list[place..] {
            if let Some(entry) = self.places.get_mut(&later.id) {
                *entry -= 1;
            }
        }
        Some(occupant)
    }

    /// The `place`-th in join order.
    pub(super) fn at(&self, place: usize) -> Option<&Occupant> {
        self.list.get(place)
    }

    /// In join order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Occupant> {
        self.list.iter()
    }

    /// In join order, to walk by place (a publish reads the next one ahead).
    pub(super) fn as_mut_slice(&mut self) -> &mut [Occupant] {
        &mut self.list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::SnapshotConfig;

    fn occupant(id: u64) -> Occupant {
        Occupant {
            id: PlayerId(id),
            key: PlayerKey(id),
            entity: EntityId::from(id as u16),
            name: format!("p{id}"),
            snapshots: ClientSnapshots::new(&SnapshotConfig::default()),
            connected: true,
            violations: 0,
            kicked: false,
            joined_at: Instant::now(),
            next_chat_tick: 0,
            phase: 0,
            refresh: false,
            announced: false,
        }
    }

    fn ids(occupants: &Occupants) -> Vec<u64> {
        occupants.iter().map(|o| o.id.0).collect()
    }

    #[test]
    fn a_leave_keeps_the_others_in_join_order_and_found_by_id() {
        let mut occupants = Occupants::default();
        for id in [5, 9, 2, 7] {
            assert!(occupants.push(occupant(id)));
        }
        assert!(!occupants.push(occupant(9)), "an id is seated once");
        assert_eq!(occupants.remove(PlayerId(9)).map(|o| o.id.0), Some(9));
        assert!(occupants.remove(PlayerId(9)).is_none());
        assert_eq!(ids(&occupants), [5, 2, 7]);
        for id in [5, 2, 7] {
            assert_eq!(occupants.get(PlayerId(id)).map(|o| o.id.0), Some(id));
        }
        occupants.push(occupant(1));
        occupants.get_mut(PlayerId(7)).expect("seated").phase = 3;
        assert_eq!(ids(&occupants), [5, 2, 7, 1]);
        assert_eq!(occupants.get(PlayerId(7)).map(|o| o.phase), Some(3));
        assert_eq!(occupants.len(), 4);
        assert!(!occupants.contains(PlayerId(9)));
    }
}
