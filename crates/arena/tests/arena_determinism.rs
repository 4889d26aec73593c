//! Same seed and same inputs give the same world, bit for bit: two worlds driven in lock
//! step for 10,000 ticks through joins, leaves, wandering, shooting, kills, respawns and
//! teleports keep equal
//! checksums and emit equal events; another seed gives another world.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::{
    ArenaMap, BuiltinMap, GameEvent, InputCommand, PlayerKey, World, WorldConfig,
};

/// Drives `world` through a scripted session (the script has its own seed, independent of
/// the world's) and returns the checksum after every tick and every event.
fn run(map: Arc<ArenaMap>, world_seed: u64, ticks: u16) -> (Vec<u64>, Vec<GameEvent>) {
    let mut world = World::new(map, WorldConfig::default(), world_seed).unwrap();
    let mut script = ChaCha8Rng::seed_from_u64(77);
    let mut present: Vec<u64> = Vec::new();
    let mut next_key = 0u64;
    let mut checksums = Vec::new();
    let mut events = Vec::new();
    let mut inputs = Vec::new();
    for tick in 0..ticks {
        // Players come and go.
        if present.len() < 40 || script.random_range(0..10) == 0 {
            world.join(PlayerKey(next_key)).unwrap();
            present.push(next_key);
            next_key += 1;
        }
        if present.len() > 30 && script.random_range(0..15) == 0 {
            let gone = present.swap_remove(script.random_range(0..present.len()));
            assert!(world.leave(PlayerKey(gone)));
        }
        inputs.clear();
        for &key in &present {
            // Sometimes two inputs in one tick, sometimes none.
            for extra in 0..script.random_range(0..3u16) {
                inputs.push((
                    PlayerKey(key),
                    InputCommand {
                        sequence: tick.wrapping_mul(2).wrapping_add(extra),
                        move_x: f32::from(script.random_range(-64i8..=64)) / 64.0,
                        move_y: f32::from(script.random_range(-64i8..=64)) / 64.0,
                        aim: script.random_range(-3.0f32..3.0),
                        buttons: u8::from(script.random_range(0..3) == 0),
                    },
                ));
            }
        }
        world.step(&inputs);
        checksums.push(world.checksum());
        events.extend(std::iter::from_fn(|| world.poll_event()));
    }
    world.check_invariants().unwrap();
    (checksums, events)
}

#[test]
fn same_seed_same_inputs_same_world() {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let (checksums_a, events_a) = run(map.clone(), 5, 10_000);
    let (checksums_b, events_b) = run(map.clone(), 5, 10_000);
    if let Some(tick) = checksums_a
        .iter()
        .zip(&checksums_b)
        .position(|(a, b)| a != b)
    {
        panic!("the worlds diverged at tick {}", tick + 1);
    }
    assert_eq!(events_a, events_b);
    // The session exercised what matters: the small arena gets crowded and bloody.
    let count = |f: fn(&GameEvent) -> bool| events_a.iter().filter(|e| f(e)).count();
    let kills = count(|e| matches!(e, GameEvent::Kill { .. }));
    let respawns = count(|e| matches!(e, GameEvent::Respawn { .. }));
    let teleports = count(|e| matches!(e, GameEvent::Teleported { .. }));
    assert!(
        kills >= 10 && respawns >= 5 && teleports >= 1,
        "{kills} kills, {respawns} respawns, {teleports} teleports"
    );

    let (checksums_c, _) = run(map, 6, 1_200);
    assert_ne!(
        checksums_a[1_199], checksums_c[1_199],
        "another seed, another world"
    );
}
