//! Divan benchmarks of the arena simulation on the metropolis map:
//! `cargo bench -p tickwire-arena --bench arena_step` (pin it: `taskset -c 1`).
//!
//! - `step_players`: one steady-state step with N players wandering and shooting (each turns
//!   every second or so, fires every fourth tick, rate-limited to every eighth);
//! - `teleport_5000`: the step in which 5,000 players standing on the 24 pads all teleport
//!   into the 200 m² plaza;
//! - `crowd_after_teleport`: the step after it, when the 5,000 landed players first push
//!   apart (the densest the grid gets);
//! - `step_movement`: one player's movement step, the function the client ports;
//! - `broadphase_grid` / `broadphase_brute_force`: one step with N players using the uniform
//!   grid (1 m cells) versus one cell spanning the whole map (every player checked against
//!   every other: brute force), the same world otherwise.

use std::sync::{Arc, OnceLock};

use divan::{Bencher, black_box};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::movement::step_movement;
use tickwire_arena::{ArenaMap, BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

fn main() {
    divan::main();
}

fn metropolis() -> Arc<ArenaMap> {
    static MAP: OnceLock<Arc<ArenaMap>> = OnceLock::new();
    MAP.get_or_init(|| {
        Arc::new(
            BuiltinMap::Metropolis
                .load()
                .expect("the shipped map loads"),
        )
    })
    .clone()
}

/// Wandering, shooting players: their inputs, rewritten in place each tick so the bench loop
/// allocates nothing.
struct Bots {
    rng: ChaCha8Rng,
    inputs: Vec<(PlayerKey, InputCommand)>,
    tick: u16,
}

impl Bots {
    fn new(players: u64) -> Self {
        let mut bots = Self {
            rng: ChaCha8Rng::seed_from_u64(99),
            inputs: (0..players)
                .map(|key| (PlayerKey(key), InputCommand::default()))
                .collect(),
            tick: 0,
        };
        for i in 0..bots.inputs.len() {
            bots.turn(i);
        }
        bots
    }

    fn turn(&mut self, i: usize) {
        let input = &mut self.inputs[i].1;
        // Directions and aims on the wire's grids, as a real client would send.
        input.move_x = f32::from(self.rng.random_range(-64i8..=64)) / 64.0;
        input.move_y = f32::from(self.rng.random_range(-64i8..=64)) / 64.0;
        input.aim = self.rng.random_range(-3.1f32..3.1);
    }

    fn next_tick(&mut self) -> &[(PlayerKey, InputCommand)] {
        self.tick = self.tick.wrapping_add(1);
        for i in 0..self.inputs.len() {
            if self.rng.random_range(0..60) == 0 {
                self.turn(i);
            }
            let input = &mut self.inputs[i].1;
            input.sequence = self.tick;
            input.buttons = if (usize::from(self.tick) + i) % 4 == 0 {
                InputCommand::FIRE
            } else {
                0
            };
        }
        &self.inputs
    }
}

fn drain(world: &mut World) {
    while world.poll_event().is_some() {}
}

#[divan::bench(args = [1000, 3000, 5000], sample_count = 50)]
fn step_players(bencher: Bencher<'_, '_>, players: u64) {
    let mut world = World::new(metropolis(), WorldConfig::default(), 1).expect("valid config");
    for key in 0..players {
        world.join(PlayerKey(key)).expect("new key");
    }
    let mut bots = Bots::new(players);
    // Warm up: players leave their spawn points, bullets fill the air (they live 60 ticks).
    for _ in 0..120 {
        world.step(bots.next_tick());
        drain(&mut world);
    }
    bencher.bench_local(|| {
        world.step(bots.next_tick());
        drain(&mut world);
    });
}

/// One step with `players` wandering players and grid cells of `cell_size` metres, after 30
/// ticks of warm-up (players off their spawn points, bullets in the air).
fn step_with_cells(bencher: Bencher<'_, '_>, players: u64, cell_size: f32) {
    let config = WorldConfig {
        grid_cell_size: cell_size,
        ..WorldConfig::default()
    };
    let mut world = World::new(metropolis(), config, 1).expect("valid config");
    for key in 0..players {
        world.join(PlayerKey(key)).expect("new key");
    }
    let mut bots = Bots::new(players);
    for _ in 0..30 {
        world.step(bots.next_tick());
        drain(&mut world);
    }
    bencher.bench_local(|| {
        world.step(bots.next_tick());
        drain(&mut world);
    });
}

#[divan::bench(args = [100, 1000, 3000, 10000], sample_count = 20)]
fn broadphase_grid(bencher: Bencher<'_, '_>, players: u64) {
    step_with_cells(bencher, players, 1.0);
}

#[divan::bench(args = [100, 1000, 3000, 10000], sample_count = 5, sample_size = 1)]
fn broadphase_brute_force(bencher: Bencher<'_, '_>, players: u64) {
    // One cell wider than the 400 m map: every query visits every player.
    step_with_cells(bencher, players, 512.0);
}

/// 5,000 players standing on the pads (not yet stepped).
fn on_pads() -> World {
    let map = metropolis();
    let config = WorldConfig::default();
    let inset = config.max_push + 0.01;
    let mut world = World::new(map.clone(), config, 5000).expect("valid config");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let pads = map.teleports();
    for key in 0..5000u64 {
        world.join(PlayerKey(key)).expect("new key");
        let pad = pads[key as usize % pads.len()].pad.expanded(-inset);
        let spot = Vec2::new(
            rng.random_range(pad.min.x..pad.max.x),
            rng.random_range(pad.min.y..pad.max.y),
        );
        world.place(PlayerKey(key), spot).expect("joined");
    }
    world
}

#[divan::bench(sample_count = 30)]
fn teleport_5000(bencher: Bencher<'_, '_>) {
    let world = on_pads();
    bencher
        .with_inputs(|| world.clone())
        .bench_local_values(|mut world| {
            world.step(&[]);
            assert_eq!(world.pending_events(), 5000);
            world
        });
}

#[divan::bench(sample_count = 30)]
fn crowd_after_teleport(bencher: Bencher<'_, '_>) {
    let mut world = on_pads();
    world.step(&[]);
    drain(&mut world);
    bencher
        .with_inputs(|| world.clone())
        .bench_local_values(|mut world| {
            world.step(&[]);
            world
        });
}

#[divan::bench]
fn movement_step(bencher: Bencher<'_, '_>) {
    let map = metropolis();
    let params = WorldConfig::default().movement_params(map.size());
    let start = map.spawns()[0];
    let mut scratch = Vec::new();
    bencher.bench_local(|| {
        step_movement(
            black_box(start),
            black_box(Vec2::new(1.0, 0.5)),
            &params,
            map.walls(),
            &mut scratch,
        )
    });
}
