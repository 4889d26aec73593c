//! Steady-state snapshot encoding allocates nothing but the rare growth of a player's
//! history (when its view is larger than any it had) or of the captures held for it: 1,000
//! players wandering and shooting on the large map, a frame captured and a snapshot encoded
//! for every one of them each tick, each acknowledged (deltas, creates, destroys and the
//! priority path included).

use std::sync::Arc;
use tickwire_alloc_count::{CountingAllocator, thread_allocations};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::snapshot::{
    ClientSnapshots, EntityIds, SnapshotConfig, SnapshotEncoder, SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn steady_state_encoding_allocates_only_to_grow_a_players_history() {
    const PLAYERS: u64 = 1000;
    let map = Arc::new(BuiltinMap::Metropolis.load().unwrap());
    let config = WorldConfig::default();
    let schema = SnapshotSchema::new(map.size(), config.max_health).unwrap();
    let size = map.size();
    let mut world = World::new(map, config, 3).unwrap();
    let mut ids = EntityIds::new();
    for key in 0..PLAYERS {
        world.join(PlayerKey(key)).unwrap();
        ids.insert(PlayerKey(key)).unwrap();
    }
    // A tight budget too, so that the priority path runs.
    let snapshot_config = SnapshotConfig {
        bandwidth_bytes_per_sec: 12_000,
        ..SnapshotConfig::default()
    };
    let mut encoder = SnapshotEncoder::new(schema, size, snapshot_config, 60).unwrap();
    let mut clients: Vec<_> = (0..PLAYERS)
        .map(|key| (ids.get(PlayerKey(key)).unwrap(), encoder.new_client()))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut inputs: Vec<(PlayerKey, InputCommand)> = (0..PLAYERS)
        .map(|key| (PlayerKey(key), InputCommand::default()))
        .collect();
    let mut buf = vec![0u8; 1100];
    let mut bytes = 0usize;
    let mut tick = |sequence: u16,
                    encoder: &mut SnapshotEncoder,
                    clients: &mut [(u16, ClientSnapshots)],
                    bytes: &mut usize| {
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
        while world.poll_event().is_some() {}
        encoder.capture(&world, &ids);
        for (i, (id, client)) in clients.iter_mut().enumerate() {
            *bytes += encoder.encode(client, *id, &mut buf).unwrap();
            // Some clients ack only now and then: old baselines and full snapshots too.
            if (i + usize::from(sequence)) % (1 + i % 7) == 0 {
                client.handle_ack(client.last_sent().unwrap()).unwrap();
            }
        }
    };
    for sequence in 0..300 {
        tick(sequence, &mut encoder, &mut clients, &mut bytes);
    }
    bytes = 0;
    // What may grow: each player's two history blocks (ids, and records of entities that
    // waited), and the encoder's copies of its past captures.
    let sizes = |clients: &[(u16, ClientSnapshots)], encoder: &SnapshotEncoder| {
        let mut sizes: Vec<usize> = clients
            .iter()
            .flat_map(|(_, c)| [c.history_stride(), c.history_wait_stride()])
            .collect();
        sizes.push(encoder.captures_held());
        sizes
    };
    let sizes_before = sizes(&clients, &encoder);
    let before = thread_allocations();
    for sequence in 300..600 {
        tick(sequence, &mut encoder, &mut clients, &mut bytes);
    }
    let allocations = thread_allocations() - before;
    // The one allocation encoding may make: a player's history growing to hold a larger view
    // (or more waiting entities) than it ever had, doubling, at most log2(max_entities) + 1
    // times in its life; and the captures held doubling for a longer history.
    let doublings: u32 = sizes(&clients, &encoder)
        .iter()
        .zip(&sizes_before)
        .map(|(&after, &before)| {
            after.max(1).ilog2() - before.max(1).ilog2() + u32::from(before == 0 && after > 0)
        })
        .sum();
    assert!(
        allocations <= u64::from(doublings),
        "300 ticks of 1,000 snapshots allocated {allocations} times, \
         beyond the {doublings} growths of players' histories"
    );
    assert!(
        doublings < 1000,
        "{doublings} history growths in 300 steady ticks: a history that keeps regrowing"
    );
    assert!(
        bytes > 300 * 1000 * 20,
        "the counted ticks sent almost nothing: {bytes} bytes"
    );
}
