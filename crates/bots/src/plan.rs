//! The run's schedule as every bot sees it: one epoch for all clocks, the measured window,
//! and who shares a room with whom.

use std::time::{Duration, Instant};

use crate::tally::Window;

/// Made once every bot has connected, and shared by all of them. Times are nanoseconds
/// since [`Plan::epoch`], one clock for the whole process, so a message stamped by one bot
/// is timed by another.
#[derive(Debug)]
pub struct Plan {
    pub(crate) epoch: Instant,
    pub(crate) window: Window,
    /// When sending starts (warm-up begins).
    pub(crate) start_ns: u64,
    pub(crate) send_end_ns: u64,
    pub(crate) drain_end_ns: u64,
    /// Per bot: its room (index into the plan's rooms), `u32::MAX` if not connected.
    pub(crate) room: Vec<u32>,
    /// Per bot: its place among its room's members.
    pub(crate) slot: Vec<u32>,
    /// Per room: members.
    pub(crate) room_size: Vec<u32>,
}

impl Plan {
    /// A plan for `rooms_of` (each bot's server room, `None` if it did not connect):
    /// sending starts 100 ms from now, then `warmup`, the window of `duration`, and `drain`
    /// for what is still in flight.
    pub fn new(
        rooms_of: &[Option<u64>],
        warmup: Duration,
        duration: Duration,
        drain: Duration,
    ) -> Self {
        let mut room_index: std::collections::HashMap<u64, u32> = Default::default();
        let mut room_size: Vec<u32> = Vec::new();
        let mut room = vec![u32::MAX; rooms_of.len()];
        let mut slot = vec![0; rooms_of.len()];
        for (bot, server_room) in rooms_of.iter().enumerate() {
            let Some(server_room) = server_room else {
                continue;
            };
            let index = *room_index.entry(*server_room).or_insert_with(|| {
                room_size.push(0);
                room_size.len() as u32 - 1
            });
            room[bot] = index;
            slot[bot] = room_size[index as usize];
            room_size[index as usize] += 1;
        }
        // Groups start sending a little after they hear the plan.
        let start_ns = 100_000_000;
        let window_start = start_ns + warmup.as_nanos() as u64;
        let window_end = window_start + duration.as_nanos() as u64;
        Self {
            epoch: Instant::now(),
            window: Window {
                start_ns: window_start,
                end_ns: window_end,
            },
            start_ns,
            send_end_ns: window_end,
            drain_end_ns: window_end + drain.as_nanos() as u64,
            room,
            slot,
            room_size,
        }
    }

    /// Nanoseconds from the epoch to `at` (0 before it).
    pub fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// The instant `ns` after the epoch.
    pub fn at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// The measured window: what is scheduled in it is counted.
    pub fn window(&self) -> Window {
        self.window
    }

    /// When sending starts (the warm-up's beginning).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// When sending stops (the window's end).
    pub fn send_end_ns(&self) -> u64 {
        self.send_end_ns
    }

    /// Rooms the bots landed in.
    pub fn rooms(&self) -> usize {
        self.room_size.len()
    }

    /// Members of `bot`'s room (0 if it has none).
    pub fn room_size_of(&self, bot: u32) -> usize {
        self.room
            .get(bot as usize)
            .and_then(|room| self.room_size.get(*room as usize))
            .map_or(0, |size| *size as usize)
    }

    /// The sender's place in `receiver`'s room, if they share one.
    pub fn slot_in_room_of(&self, sender: u32, receiver: u32) -> Option<usize> {
        let room = *self.room.get(sender as usize)?;
        (room != u32::MAX && Some(&room) == self.room.get(receiver as usize))
            .then(|| self.slot[sender as usize] as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_groups_bots_by_room() {
        let rooms_of = [Some(7), Some(9), Some(7), Some(9), Some(7), None];
        let plan = Plan::new(
            &rooms_of,
            Duration::from_secs(3),
            Duration::from_secs(20),
            Duration::from_secs(2),
        );
        assert_eq!(plan.room_size, [3, 2]);
        assert_eq!(plan.room_size_of(4), 3);
        assert_eq!(plan.room_size_of(5), 0, "not connected");
        assert_eq!(plan.slot_in_room_of(4, 0), Some(2));
        assert_eq!(plan.slot_in_room_of(1, 0), None);
        assert_eq!(plan.slot_in_room_of(5, 5), None);
        assert_eq!(plan.window.end_ns - plan.window.start_ns, 20_000_000_000);
        assert_eq!(plan.window.start_ns - plan.start_ns, 3_000_000_000);
    }
}
