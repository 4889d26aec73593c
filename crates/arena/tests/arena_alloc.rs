//! A warmed-up world steps without allocating: 1,000 players wandering and shooting on the
//! large map (hits, kills, respawns and teleports included), events polled every tick.

use std::sync::Arc;
use tickwire_alloc_count::{CountingAllocator, thread_allocations};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::{BuiltinMap, GameEvent, InputCommand, PlayerKey, World, WorldConfig};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn steady_state_steps_allocate_nothing() {
    const PLAYERS: u64 = 1000;
    let map = Arc::new(BuiltinMap::Metropolis.load().unwrap());
    let mut world = World::new(map, WorldConfig::default(), 3).unwrap();
    for key in 0..PLAYERS {
        world.join(PlayerKey(key)).unwrap();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut inputs: Vec<(PlayerKey, InputCommand)> = (0..PLAYERS)
        .map(|key| (PlayerKey(key), InputCommand::default()))
        .collect();
    let mut tally = [0u64; 4];
    let mut tick = |world: &mut World, sequence: u16, tally: &mut [u64; 4]| {
        for (i, (_, input)) in inputs.iter_mut().enumerate() {
            if rng.random_range(0..60) == 0 {
                input.move_x = f32::from(rng.random_range(-64i8..=64)) / 64.0;
                input.move_y = f32::from(rng.random_range(-64i8..=64)) / 64.0;
                input.aim = rng.random_range(-3.0f32..3.0);
            }
            input.sequence = sequence;
            input.buttons = u8::from((usize::from(sequence) + i) % 3 == 0);
        }
        world.step(&inputs);
        while let Some(event) = world.poll_event() {
            let kind = match event {
                GameEvent::Hit { .. } => 0,
                GameEvent::Kill { .. } => 1,
                GameEvent::Respawn { .. } => 2,
                GameEvent::Teleported { .. } => 3,
            };
            tally[kind] += 1;
        }
    };
    for sequence in 0..600 {
        tick(&mut world, sequence, &mut tally);
    }
    let warm = tally;
    let before = thread_allocations();
    for sequence in 600..1200 {
        tick(&mut world, sequence, &mut tally);
    }
    let allocations = thread_allocations() - before;
    let counted: Vec<u64> = tally
        .iter()
        .zip(warm)
        .map(|(all, warm)| all - warm)
        .collect();
    assert_eq!(allocations, 0, "600 steps allocated {allocations} times");
    // The counted steps did real work, not an idle world.
    assert!(
        counted[0] > 0,
        "hits, kills, respawns, teleports: {counted:?}"
    );
    assert!(!world.bullets().is_empty());
}
