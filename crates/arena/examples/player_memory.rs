//! Heap bytes per arena player, by part: the room's state for a player (its entity in the
//! world, its occupant record, its name), and its snapshot history (the baselines a delta
//! may be taken against). The connection's part is
//! `cargo run --release -p tickwire-proto --example connection_memory`.
//!
//! `cargo run --release -p tickwire-arena --example player_memory [-- <rooms> <per room>]`
//! (default 100 rooms of 30: the shape of `tickwire bench hobo --players 3000`). The rooms
//! run two seconds of ticks so every player's view and history reach their size; the same
//! crowd is then built with the smallest history (2), and the difference is the history's
//! cost. Heap counted by the counting allocator, the rooms only (no sockets, no runtime).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tickwire_alloc_count::{CountingAllocator, live_bytes};
use tickwire_arena::BuiltinMap;
use tickwire_arena::room::{ArenaConfig, ArenaRoomFactory};
use tickwire_room::host::RoomHost;
use tickwire_room::room::PlayerId;
use tickwire_room::shard::RoomId;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Heap bytes per player of `rooms × per_room` players after two seconds of ticks.
fn bytes_per_player(config: &ArenaConfig, rooms: u64, per_room: u64) -> f64 {
    let map = Arc::new(BuiltinMap::Courtyard.load().expect("the shipped map loads"));
    let factory = ArenaRoomFactory::new(map, config.clone(), 7).expect("valid config");
    let start = Instant::now();
    let before = live_bytes();
    let mut hosts: Vec<RoomHost> = (0..rooms)
        .map(|n| {
            let room = Box::new(factory.create());
            RoomHost::new(RoomId(n), room, start, per_room as u16).expect("tick rate")
        })
        .collect();
    for (n, host) in hosts.iter_mut().enumerate() {
        for p in 0..per_room {
            let id = PlayerId(n as u64 * per_room + p);
            host.join(start, id, format!("bot-{}", id.0))
                .expect("a seat");
            // The shard routes a room's commands after each call into it.
            host.take_commands().for_each(drop);
        }
    }
    for step in 1..=120u32 {
        let now = start + Duration::from_micros(u64::from(step) * 16_667);
        for host in &mut hosts {
            host.advance(now);
            host.publish(now);
            // What the rooms send leaves with the runtime; dropped here.
            host.take_commands().for_each(drop);
        }
    }
    let held = live_bytes() - before;
    drop(hosts);
    held as f64 / (rooms * per_room) as f64
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let rooms = args.next().flatten().unwrap_or(100);
    let per_room = args.next().flatten().unwrap_or(30);
    let config = ArenaConfig::default();
    let total = bytes_per_player(&config, rooms, per_room);
    let mut small = config.clone();
    small.snapshot.history = 2;
    let without_history = bytes_per_player(&small, rooms, per_room);
    println!(
        "{rooms} rooms of {per_room}: {total:.0} heap bytes per player in the room \
         (history {}): snapshot history {:.0}, the rest of the room's state {without_history:.0}",
        config.snapshot.history,
        total - without_history,
    );
}
