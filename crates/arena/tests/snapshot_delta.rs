//! Delta snapshots: whatever the link loses, applying a snapshot to the baseline it names
//! reproduces exactly the view the server recorded for it, with players joining, leaving,
//! dying and moving in between.

use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::snapshot::{
    EntityIds, EntityView, SnapshotConfig, SnapshotDecoder, SnapshotEncoder, SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

struct Scene {
    world: World,
    ids: EntityIds,
    encoder: SnapshotEncoder,
    next_key: u64,
}

fn scene(seed: u64, players: u64, config: SnapshotConfig) -> Scene {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let world_config = WorldConfig::default();
    let schema = SnapshotSchema::new(map.size(), world_config.max_health).unwrap();
    let size = map.size();
    let mut world = World::new(map, world_config, seed).unwrap();
    let mut ids = EntityIds::new();
    for key in 0..players {
        world.join(PlayerKey(key)).unwrap();
        ids.insert(PlayerKey(key)).unwrap();
    }
    let encoder = SnapshotEncoder::new(schema, size, config, 60).unwrap();
    Scene {
        world,
        ids,
        encoder,
        next_key: players,
    }
}

/// Runs a scene and returns how many snapshots were deltas, and the creates and destroys.
fn run(seed: u64, loss_percent: u32, ack_loss_percent: u32, ticks: u32) -> (u32, usize, usize) {
    let mut scene = scene(seed, 12, SnapshotConfig::default());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let me = PlayerKey(0);
    let my_id = scene.ids.get(me).unwrap();
    let mut client = scene.encoder.new_client();
    let mut decoder = SnapshotDecoder::new(*scene.encoder.schema(), scene.encoder.config());
    let mut buf = vec![0u8; 2048];
    let mut inputs: Vec<(PlayerKey, InputCommand)> = Vec::new();
    let (mut deltas, mut creates, mut destroys) = (0, 0, 0);
    for tick in 0..ticks {
        // Churn: someone joins or leaves now and then (never the recipient).
        if rng.random_range(0..20) == 0 {
            let key = PlayerKey(scene.next_key);
            scene.next_key += 1;
            scene.world.join(key).unwrap();
            scene.ids.insert(key).unwrap();
        }
        if rng.random_range(0..8) == 0 && scene.world.players().len() > 2 {
            let players = scene.world.players();
            let key = players[rng.random_range(0..players.len())].key();
            if key != me {
                scene.world.leave(key);
                scene.ids.remove(key);
            }
        }
        inputs.clear();
        for player in scene.world.players() {
            inputs.push((
                player.key(),
                InputCommand {
                    sequence: tick as u16,
                    move_x: f32::from(rng.random_range(-64i8..=64)) / 64.0,
                    move_y: f32::from(rng.random_range(-64i8..=64)) / 64.0,
                    aim: rng.random_range(-3.0f32..3.0),
                    buttons: u8::from(rng.random_range(0..4) == 0),
                },
            ));
        }
        scene.world.step(&inputs);
        while scene.world.poll_event().is_some() {}
        scene.encoder.capture(&scene.world, &scene.ids);
        let len = scene.encoder.encode(&mut client, my_id, &mut buf).unwrap();
        assert!(len > 0 && len <= 1100, "snapshot of {len} bytes");
        let sent_tick = client.last_sent().unwrap();
        if rng.random_range(0..100) < loss_percent {
            continue;
        }
        let decoded = decoder
            .decode(&buf[..len])
            .unwrap_or_else(|error| panic!("tick {sent_tick}: {error}"));
        if decoded.baseline.is_some() {
            deltas += 1;
        }
        creates += decoded.created.len();
        destroys += decoded.destroyed.len();
        let server_view: Vec<EntityView> =
            scene.encoder.view(&client, sent_tick).unwrap().collect();
        assert_eq!(
            decoded.entities, server_view,
            "tick {sent_tick}: the client's view differs from what the server recorded"
        );
        let frame = scene.encoder.frame();
        for id in decoded.created.iter().chain(&decoded.updated) {
            let entity = decoded.entities.iter().find(|e| e.id == *id).unwrap();
            assert_eq!(
                Some(entity.state),
                frame.state(*id),
                "entity {id} sent stale"
            );
        }
        for entity in &decoded.entities {
            assert!(
                frame.state(entity.id).is_some(),
                "entity {} left the world but is still in view",
                entity.id
            );
        }
        let mine = scene.world.player(me).unwrap();
        assert_eq!(
            decoded.me.position,
            mine.position(),
            "own position is exact"
        );
        assert_eq!(decoded.last_input, mine.last_input_sequence());
        if rng.random_range(0..100) >= ack_loss_percent {
            client.handle_ack(decoder.newest().unwrap()).unwrap();
        }
    }
    (deltas, creates, destroys)
}

#[test]
fn a_lossless_link_reproduces_every_view() {
    let (deltas, creates, destroys) = run(1, 0, 0, 600);
    assert!(deltas > 500, "only {deltas} deltas on a lossless link");
    assert!(
        creates > 0 && destroys > 0,
        "creates {creates}, destroys {destroys}"
    );
}

#[test]
fn heavy_loss_of_snapshots_and_acks_falls_back_cleanly() {
    let (deltas, creates, destroys) = run(2, 50, 50, 600);
    assert!(deltas > 0, "no delta snapshot was exercised");
    assert!(
        creates > 0 && destroys > 0,
        "creates {creates}, destroys {destroys}"
    );
    // Acks all lost: every snapshot is a full one.
    let (deltas, _, _) = run(3, 0, 100, 200);
    assert_eq!(deltas, 0, "a delta against a baseline never acknowledged");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn any_loss_pattern_reproduces_the_acked_view(
        seed in any::<u64>(),
        loss in 0u32..70,
        ack_loss in 0u32..70,
    ) {
        run(seed, loss, ack_loss, 300);
    }
}

/// Player 0's snapshots in a 12-player scene over `ticks` ticks, one every `every` ticks,
/// each acked once `late(tick)` more have gone out. Returns, from tick `counted_from` on,
/// the snapshots sent and the deltas among them, and the history's slots at the end.
fn late_acks(
    ticks: u32,
    every: u32,
    late: impl Fn(u32) -> usize,
    counted_from: u32,
) -> (usize, usize, usize) {
    let mut scene = scene(4, 12, SnapshotConfig::default());
    let my_id = scene.ids.get(PlayerKey(0)).unwrap();
    let mut client = scene.encoder.new_client();
    let mut decoder = SnapshotDecoder::new(*scene.encoder.schema(), scene.encoder.config());
    let mut buf = vec![0u8; 2048];
    let mut in_flight = std::collections::VecDeque::new();
    let (mut sent, mut deltas) = (0, 0);
    for tick in 0..ticks {
        scene.world.step(&[]);
        while scene.world.poll_event().is_some() {}
        if tick % every != 0 {
            continue;
        }
        scene.encoder.capture(&scene.world, &scene.ids);
        let len = scene.encoder.encode(&mut client, my_id, &mut buf).unwrap();
        let decoded = decoder.decode(&buf[..len]).unwrap();
        if tick >= counted_from {
            sent += 1;
            deltas += usize::from(decoded.baseline.is_some());
        }
        in_flight.push_back(client.last_sent().unwrap());
        while in_flight.len() > late(tick) {
            client.handle_ack(in_flight.pop_front().unwrap()).unwrap();
        }
    }
    (sent, deltas, client.history_slots())
}

/// Acks that come back 20 ticks late (a third of a second at 60 Hz, past the 4 snapshots a
/// recipient's history starts with): the first finds its snapshot overwritten, the history
/// grows, and from then on every snapshot is a delta again.
#[test]
fn late_acks_grow_the_history_until_deltas_resume() {
    let (sent, deltas, slots) = late_acks(300, 1, |_| 20, 100);
    assert_eq!(
        (sent, deltas),
        (200, 200),
        "after the history grew, every snapshot is a delta against a 20-tick-old ack"
    );
    assert!(slots >= 32, "{slots} slots");
}

/// A slow spell, then prompt acks again: the history grown for the spell halves at each
/// review back to the 4 slots it started with, and no snapshot loses its delta on the way.
#[test]
fn a_history_grown_by_a_slow_spell_shrinks_back() {
    let (sent, deltas, slots) = late_acks(900, 1, |tick| if tick < 300 { 20 } else { 1 }, 100);
    assert_eq!(
        deltas, sent,
        "every snapshot a delta, through the shrinking"
    );
    assert_eq!(slots, 4, "back to the first slots");
}

/// One snapshot every third tick (seed 003's plaza) with acks 9 ticks late (3 snapshots):
/// the history's 4 slots hold the last 4 snapshots whatever their ticks, so every snapshot
/// is a delta and the history does not grow. Before, the slots were ticks: a 9-tick-old
/// baseline was refused as older than the 8 slots, and every snapshot went out whole.
#[test]
fn sparse_snapshots_keep_deltas_with_the_first_slots() {
    let (sent, deltas, slots) = late_acks(300, 3, |_| 3, 60);
    assert_eq!(
        deltas, sent,
        "every snapshot a delta against a 9-tick-old ack"
    );
    assert_eq!(slots, 4, "the history did not grow");
}

/// A recipient's history points into the captures of the encoder that stored it: moved to
/// another encoder (here a clone, whose captures then go their own way), its next snapshot
/// is a full one that the client decodes to the view the new encoder recorded, and deltas
/// resume from there.
#[test]
fn a_recipient_moved_to_another_encoder_gets_a_full_snapshot_then_deltas() {
    let mut scene = scene(5, 12, SnapshotConfig::default());
    let my_id = scene.ids.get(PlayerKey(0)).unwrap();
    let mut client = scene.encoder.new_client();
    let mut decoder = SnapshotDecoder::new(*scene.encoder.schema(), scene.encoder.config());
    let mut buf = vec![0u8; 2048];
    let mut step_and_send =
        |scene: &mut Scene,
         encoder: Option<&mut SnapshotEncoder>,
         client: &mut tickwire_arena::snapshot::ClientSnapshots| {
            scene.world.step(&[]);
            while scene.world.poll_event().is_some() {}
            let encoder = encoder.unwrap_or(&mut scene.encoder);
            encoder.capture(&scene.world, &scene.ids);
            let len = encoder.encode(client, my_id, &mut buf).unwrap();
            let decoded = decoder.decode(&buf[..len]).unwrap();
            let tick = client.last_sent().unwrap();
            let recorded: Vec<EntityView> = encoder.view(client, tick).unwrap().collect();
            assert_eq!(decoded.entities, recorded, "tick {tick}");
            client.handle_ack(tick).unwrap();
            decoded.baseline
        };
    step_and_send(&mut scene, None, &mut client);
    assert!(
        step_and_send(&mut scene, None, &mut client).is_some(),
        "a delta"
    );
    let mut other = scene.encoder.clone();
    assert_eq!(
        step_and_send(&mut scene, Some(&mut other), &mut client),
        None,
        "the first snapshot from another encoder is a full one"
    );
    assert!(
        step_and_send(&mut scene, Some(&mut other), &mut client).is_some(),
        "then deltas again"
    );
}
