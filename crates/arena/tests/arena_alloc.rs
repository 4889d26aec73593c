//! A warmed-up world steps without allocating: 1,000 players wandering and shooting on the
//! large map (hits, kills, respawns and teleports included), events polled every tick.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::{BuiltinMap, GameEvent, InputCommand, PlayerKey, World, WorldConfig};

/// Counts allocations made by the thread that switched counting on.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the thread-locals are const-initialized
// `Cell`s, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

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
    COUNTING.with(|c| c.set(true));
    for sequence in 600..1200 {
        tick(&mut world, sequence, &mut tally);
    }
    COUNTING.with(|c| c.set(false));
    let allocations = ALLOCATIONS.with(Cell::get);
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
