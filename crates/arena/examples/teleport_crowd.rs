//! The 5,000-player teleport burst, followed for 15 seconds: per-tick step time and how many
//! players still overlap as the crowd spreads out of the 200 m² plaza.
//!
//! `cargo run --release -p tickwire-arena --example teleport_crowd [-- <players>]`
//! (pin it with `taskset -c 1`). Timings come from the wall clock on a shared machine; the
//! divan bench `arena_step` is the measurement of record.

use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::{Aabb, Vec2};
use tickwire_arena::{BuiltinMap, PlayerKey, World, WorldConfig};

fn main() {
    let players: u64 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(5000);
    let map = Arc::new(
        BuiltinMap::Metropolis
            .load()
            .expect("the shipped map loads"),
    );
    let config = WorldConfig::default();
    let (radius, inset) = (config.player_radius, config.max_push + 0.01);
    let mut world = World::new(map.clone(), config, 5000).expect("valid config");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let pads = map.teleports();
    for key in 0..players {
        world.join(PlayerKey(key)).expect("new key");
        let pad = pads[key as usize % pads.len()].pad.expanded(-inset);
        let spot = Vec2::new(
            rng.random_range(pad.min.x..pad.max.x),
            rng.random_range(pad.min.y..pad.max.y),
        );
        world.place(PlayerKey(key), spot).expect("joined");
    }
    // Pairs of players closer than 90% of a diameter.
    let overlapping = |world: &World| {
        let mut near = Vec::new();
        let mut pairs = 0usize;
        for (slot, player) in world.players().iter().enumerate() {
            world.players_near(
                Aabb::around_circle(player.position(), 2.0 * radius),
                &mut near,
            );
            pairs += near
                .iter()
                .filter(|&&other| {
                    other as usize > slot
                        && (world.players()[other as usize].position() - player.position()).length()
                            < 1.8 * radius
                })
                .count();
        }
        pairs
    };
    println!("tick  step_us  overlapping_pairs  events");
    for tick in 1..=900 {
        let started = Instant::now();
        world.step(&[]);
        let micros = started.elapsed().as_micros();
        let events = world.pending_events();
        while world.poll_event().is_some() {}
        if tick <= 5 || tick % 60 == 0 {
            println!("{tick:4}  {micros:7}  {:17}  {events}", overlapping(&world));
        }
    }
}
