//! Entity ids: handed out on spawn, released on despawn. A released id rests
//! [`ID_REST_TICKS`] ticks before it is handed out again, lowest first, so no baseline a
//! member may still acknowledge holds the departed entity under a newcomer's id; a new id is
//! taken only when none is free, so ids (and every array indexed by them) stay as many as
//! the world's entities.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::EntityId;

/// Ticks a released id rests: more than any baseline can be old (a snapshot's baseline is at
/// most 255 ticks back).
pub const ID_REST_TICKS: u64 = 256;

/// Ids are `0..=MAX_ENTITY_ID`.
pub const MAX_ENTITY_ID: EntityId = u16::MAX - 1;

#[derive(Debug, Clone, Default)]
pub(crate) struct IdPool {
    /// One past the largest id handed out.
    bound: usize,
    /// Released ids and the tick of their release, oldest first.
    resting: VecDeque<(u64, EntityId)>,
    /// Ids done resting, lowest first.
    free: BinaryHeap<Reverse<EntityId>>,
    tick: u64,
    taken: usize,
}

impl IdPool {
    /// The tick now: ids released [`ID_REST_TICKS`] before it may be handed out.
    pub(crate) fn set_tick(&mut self, tick: u64) {
        self.tick = tick;
        while let Some(&(released, id)) = self.resting.front() {
            if released + ID_REST_TICKS > tick {
                break;
            }
            self.resting.pop_front();
            self.free.push(Reverse(id));
        }
    }

    /// An id, or `None` when every one is taken.
    pub(crate) fn take(&mut self) -> Option<EntityId> {
        let id = if let Some(Reverse(id)) = self.free.pop() {
            id
        } else if self.bound <= usize::from(MAX_ENTITY_ID) {
            self.bound += 1;
            (self.bound - 1) as EntityId
        } else {
            // Every id is taken or resting: the one resting longest.
            self.resting.pop_front()?.1
        };
        self.taken += 1;
        Some(id)
    }

    /// Gives `id` back, to rest.
    pub(crate) fn release(&mut self, id: EntityId) {
        self.taken -= 1;
        self.resting.push_back((self.tick, id));
    }

    /// One past the largest id handed out: the size of an array indexed by id.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_id_rests_then_the_lowest_free_one_is_handed_out() {
        let mut ids = IdPool::default();
        for expected in 0..4 {
            assert_eq!(ids.take(), Some(expected));
        }
        ids.set_tick(10);
        ids.release(2);
        ids.release(1);
        ids.set_tick(10 + ID_REST_TICKS - 1);
        assert_eq!(ids.take(), Some(4), "resting ids are not handed out");
        ids.set_tick(10 + ID_REST_TICKS);
        assert_eq!(ids.take(), Some(1), "the lowest rested id");
        assert_eq!(ids.take(), Some(2));
        assert_eq!(ids.take(), Some(5));
    }

    #[test]
    fn churn_keeps_the_bound_at_the_crowd() {
        let mut ids = IdPool::default();
        let mut live: VecDeque<EntityId> = (0..100).map(|_| ids.take().unwrap()).collect();
        for n in 0..50_000u64 {
            ids.set_tick(n * 10);
            ids.release(live.pop_front().unwrap());
            live.push_back(ids.take().unwrap());
        }
        assert!(ids.bound() <= 100 + (ID_REST_TICKS / 10 + 1) as usize);
    }

    #[test]
    fn with_every_id_taken_none_is_handed_out() {
        let mut ids = IdPool::default();
        for _ in 0..=MAX_ENTITY_ID {
            ids.take().unwrap();
        }
        assert_eq!(ids.take(), None);
        ids.release(7);
        assert_eq!(
            ids.take(),
            Some(7),
            "the longest resting, when nothing else is left"
        );
    }
}
