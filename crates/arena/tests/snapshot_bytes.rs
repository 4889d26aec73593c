//! The encoder's output on seeded scenes, as a checksum of every byte: a change to how
//! snapshots are built (for speed) must leave the wire bytes exactly as they were. The
//! scenes cover creates, updates, destroys, bullets, the view cap, the bandwidth budget and
//! baselines older than one tick (acks that come late or not at all).

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::snapshot::{EntityIds, SnapshotConfig, SnapshotEncoder, SnapshotSchema};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

/// FNV-1a over each snapshot's length and bytes, for `ticks` ticks of `players` walking
/// circles (in a 14 m square when `crowd`, at their spawn points otherwise).
fn checksum(
    map: BuiltinMap,
    players: usize,
    crowd: bool,
    ticks: u16,
    snapshots: SnapshotConfig,
) -> u64 {
    let map = Arc::new(map.load().unwrap());
    let size = map.size();
    let config = WorldConfig::default();
    let schema = SnapshotSchema::new(size, config.max_health).unwrap();
    let mut world = World::new(map, config, 7).unwrap();
    let mut encoder = SnapshotEncoder::new(schema, size, snapshots, 60).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut ids = EntityIds::new();
    let mut clients = Vec::new();
    let mut inputs = Vec::new();
    for i in 0..players {
        let key = PlayerKey(i as u64);
        world.join(key).unwrap();
        if crowd {
            let spot = Vec2::new(
                200.0 + rng.random_range(0.0..14.0),
                200.0 + rng.random_range(0.0..14.0),
            );
            world.place(key, spot).unwrap();
        }
        clients.push((ids.insert(key).unwrap(), encoder.new_client()));
        inputs.push((key, InputCommand::default()));
    }
    let mut buf = vec![0; 1100];
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for sequence in 1..=ticks {
        for (i, (_, input)) in inputs.iter_mut().enumerate() {
            let phase = (i as f32) * 0.7 + f32::from(sequence) * 0.02;
            input.sequence = sequence;
            input.move_x = (phase.cos() * 64.0).round() / 64.0;
            input.move_y = (phase.sin() * 64.0).round() / 64.0;
            input.aim = (phase * 1.3).sin() * 3.0;
            input.buttons = u8::from((usize::from(sequence) + i) % 20 == 0);
        }
        world.step(&inputs);
        while world.poll_event().is_some() {}
        encoder.capture(&world, &ids);
        for (i, (id, client)) in clients.iter_mut().enumerate() {
            let len = encoder.encode(client, *id, &mut buf).unwrap();
            for &byte in (len as u32).to_le_bytes().iter().chain(&buf[..len]) {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
            }
            // Some clients ack every tick, some every third, some lose a stretch.
            let acks = match i % 4 {
                0 | 1 => true,
                2 => sequence % 3 == 0,
                _ => sequence % 40 >= 10,
            };
            if let (true, Some(tick)) = (acks, client.last_sent()) {
                client.handle_ack(tick).unwrap();
            }
        }
    }
    hash
}

#[test]
fn a_room_of_30_on_the_courtyard_encodes_the_same_bytes() {
    assert_eq!(
        checksum(
            BuiltinMap::Courtyard,
            30,
            false,
            150,
            SnapshotConfig::default()
        ),
        0x3042b6693becb8fc,
        "snapshot bytes changed"
    );
}

#[test]
fn a_crowd_of_300_encodes_the_same_bytes() {
    assert_eq!(
        checksum(
            BuiltinMap::Metropolis,
            300,
            true,
            60,
            SnapshotConfig::default()
        ),
        0xbd417e063fcb88ee,
        "snapshot bytes changed"
    );
}

/// A quarter of the default bandwidth: most snapshots leave changes waiting.
#[test]
fn a_crowd_of_300_on_a_thin_link_encodes_the_same_bytes() {
    let thin = SnapshotConfig {
        bandwidth_bytes_per_sec: 12_000,
        ..SnapshotConfig::default()
    };
    assert_eq!(
        checksum(BuiltinMap::Metropolis, 300, true, 60, thin),
        0xdb444eb60fd0eaec,
        "snapshot bytes changed"
    );
}
