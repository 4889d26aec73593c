//! A fixed, seeded workload for counting the instructions of snapshot encoding, and a
//! checksum of every snapshot byte it produced (so a faster encoder can show it writes the
//! same wire format).
//!
//! - `rooms`: 30 moving players on the courtyard (a `bench hobo` room), every player
//!   acknowledging the previous tick;
//! - `crowd`: 2,000 moving players in a 14 m square of the large map (a teleport burst).
//!
//! Warm-up ticks run first; the measured ticks go through `measured_tick`, so callgrind can
//! count them alone:
//!
//! ```text
//! cargo build --release -p tickwire-arena --example encode_count
//! valgrind --tool=callgrind --toggle-collect='*measured_tick*' \
//!     $CARGO_TARGET_DIR/release/examples/encode_count rooms
//! ```
//!
//! Instructions per snapshot = `SnapshotEncoder::encode`'s inclusive count
//! (`callgrind_annotate --inclusive=yes --threshold=100 callgrind.out.<pid>`) / the
//! snapshots it prints; the collected total also holds the frame captures and the checksum.
//! The checksum must not change when the encoder does.

#[path = "../tests/scene/mod.rs"]
mod scene;

use scene::{FNV_START, Scene, fnv_snapshot};
use tickwire_arena::BuiltinMap;
use tickwire_arena::snapshot::SnapshotConfig;

/// The scene, its tick and what it has encoded so far.
struct Workload {
    scene: Scene,
    buf: Vec<u8>,
    sequence: u16,
    /// FNV-1a over every snapshot's length and bytes.
    checksum: u64,
    snapshots: u64,
}

impl Workload {
    fn new(map: BuiltinMap, players: usize, crowd: bool) -> Self {
        Self {
            scene: Scene::new(map, players, crowd, SnapshotConfig::default()),
            buf: vec![0; 2048],
            sequence: 0,
            checksum: FNV_START,
            snapshots: 0,
        }
    }

    fn step(&mut self) {
        self.sequence = self.sequence.wrapping_add(1);
        self.scene.step(self.sequence, 90);
    }

    fn encode_all(&mut self) {
        let Scene {
            world,
            ids,
            encoder,
            clients,
            ..
        } = &mut self.scene;
        encoder.capture(world, ids);
        for index in 0..clients.len() {
            if let Some((_, next)) = clients.get(index + 1) {
                next.prefetch_baseline();
            }
            let (id, client) = &mut clients[index];
            let len = encoder.encode(client, *id, &mut self.buf).expect("fits");
            self.checksum = fnv_snapshot(self.checksum, &self.buf[..len]);
            self.snapshots += 1;
            if let Some(tick) = client.last_sent() {
                client.handle_ack(tick).expect("sent");
            }
        }
    }
}

/// One measured tick: the frame capture and every player's snapshot.
#[inline(never)]
fn measured_tick(scene: &mut Workload) {
    scene.encode_all();
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "rooms".into());
    let (mut scene, warm_up, measured) = match mode.as_str() {
        "rooms" => (Workload::new(BuiltinMap::Courtyard, 30, false), 120, 200),
        "crowd" => (Workload::new(BuiltinMap::Metropolis, 2000, true), 30, 4),
        other => panic!("unknown mode {other}: rooms or crowd"),
    };
    for _ in 0..warm_up {
        scene.step();
        scene.encode_all();
    }
    scene.snapshots = 0;
    for _ in 0..measured {
        scene.step();
        measured_tick(&mut scene);
    }
    println!(
        "{mode}: {} snapshots measured, checksum {:016x}",
        scene.snapshots, scene.checksum
    );
}
