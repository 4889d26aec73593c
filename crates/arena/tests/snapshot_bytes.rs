//! The encoder's output on seeded scenes, as a checksum of every byte: a change to how
//! snapshots are built (for speed) must leave the wire bytes exactly as they were. The
//! scenes cover creates, updates, destroys, bullets, the view cap, the bandwidth budget and
//! baselines older than one tick (acks that come late or not at all).
//!
//! Changed once on purpose (issue 18): a baseline may now be as old as the client's
//! decoder holds (the configured history, by tick) wherever the recipient's history still
//! holds its view; before, it had to be younger than the history's slot count (8 at first),
//! so a client whose acks paused for 8 ticks got a full snapshot one tick early. The old
//! age rule on the new history gave the old checksums. And again when the history started
//! at 4 slots instead of 8: a client whose acks pause for 10 ticks loses its baseline after
//! 4; with 8 first slots the same code gives the checksums before.

mod scene;

use scene::{FNV_START, Scene, fnv_snapshot};
use tickwire_arena::BuiltinMap;
use tickwire_arena::snapshot::SnapshotConfig;

/// FNV-1a over each snapshot's length and bytes, for `ticks` ticks of `players` walking
/// circles (in a 14 m square when `crowd`, at their spawn points otherwise).
fn checksum(
    map: BuiltinMap,
    players: usize,
    crowd: bool,
    ticks: u16,
    snapshots: SnapshotConfig,
) -> u64 {
    let mut scene = Scene::new(map, players, crowd, snapshots);
    let mut buf = vec![0; 1100];
    let mut hash = FNV_START;
    for sequence in 1..=ticks {
        scene.step(sequence, 20);
        let Scene {
            world,
            ids,
            encoder,
            clients,
            ..
        } = &mut scene;
        encoder.capture(world, ids);
        for (i, (id, client)) in clients.iter_mut().enumerate() {
            let len = encoder.encode(client, *id, &mut buf).unwrap();
            hash = fnv_snapshot(hash, &buf[..len]);
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
        0x59b6a1a13fabc8cb,
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
        0x19b1215d8812f8bb,
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
        0xef5fbbe5c7289e31,
        "snapshot bytes changed"
    );
}
