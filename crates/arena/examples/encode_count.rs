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

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::snapshot::{
    ClientSnapshots, EntityIds, SnapshotConfig, SnapshotEncoder, SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

struct Scene {
    world: World,
    ids: EntityIds,
    encoder: SnapshotEncoder,
    clients: Vec<(u16, ClientSnapshots)>,
    inputs: Vec<(PlayerKey, InputCommand)>,
    buf: Vec<u8>,
    sequence: u16,
    /// FNV-1a over every snapshot's length and bytes.
    checksum: u64,
    snapshots: u64,
}

impl Scene {
    fn new(map: BuiltinMap, players: usize, crowd: bool) -> Self {
        let map = Arc::new(map.load().expect("the shipped map loads"));
        let size = map.size();
        let config = WorldConfig::default();
        let schema = SnapshotSchema::new(size, config.max_health).expect("valid schema");
        let mut world = World::new(map, config, 7).expect("valid config");
        let encoder = SnapshotEncoder::new(schema, size, SnapshotConfig::default(), 60)
            .expect("valid config");
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut ids = EntityIds::new();
        let mut clients = Vec::new();
        let mut inputs = Vec::new();
        for i in 0..players {
            let key = PlayerKey(i as u64);
            world.join(key).expect("new key");
            if crowd {
                let spot = Vec2::new(
                    200.0 + rng.random_range(0.0..14.0),
                    200.0 + rng.random_range(0.0..14.0),
                );
                world.place(key, spot).expect("joined");
            }
            clients.push((ids.insert(key).expect("ids left"), encoder.new_client()));
            inputs.push((key, InputCommand::default()));
        }
        Self {
            world,
            ids,
            encoder,
            clients,
            inputs,
            buf: vec![0; 2048],
            sequence: 0,
            checksum: 0xcbf2_9ce4_8422_2325,
            snapshots: 0,
        }
    }

    fn step(&mut self) {
        self.sequence = self.sequence.wrapping_add(1);
        for (i, (_, input)) in self.inputs.iter_mut().enumerate() {
            // Each player walks a slow circle of its own phase and fires now and then.
            let phase = (i as f32) * 0.7 + f32::from(self.sequence) * 0.02;
            input.sequence = self.sequence;
            input.move_x = (phase.cos() * 64.0).round() / 64.0;
            input.move_y = (phase.sin() * 64.0).round() / 64.0;
            input.aim = (phase * 1.3).sin() * 3.0;
            input.buttons = u8::from((usize::from(self.sequence) + i) % 90 == 0);
        }
        self.world.step(&self.inputs);
        while self.world.poll_event().is_some() {}
    }

    fn encode_all(&mut self) {
        self.encoder.capture(&self.world, &self.ids);
        for index in 0..self.clients.len() {
            if let Some((_, next)) = self.clients.get(index + 1) {
                next.prefetch_baseline();
            }
            let (id, client) = &mut self.clients[index];
            let len = self
                .encoder
                .encode(client, *id, &mut self.buf)
                .expect("fits");
            for &byte in (len as u32).to_le_bytes().iter().chain(&self.buf[..len]) {
                self.checksum = (self.checksum ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
            }
            self.snapshots += 1;
            if let Some(tick) = client.last_sent() {
                client.handle_ack(tick).expect("sent");
            }
        }
    }
}

/// One measured tick: the frame capture and every player's snapshot.
#[inline(never)]
fn measured_tick(scene: &mut Scene) {
    scene.encode_all();
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "rooms".into());
    let (mut scene, warm_up, measured) = match mode.as_str() {
        "rooms" => (Scene::new(BuiltinMap::Courtyard, 30, false), 120, 200),
        "crowd" => (Scene::new(BuiltinMap::Metropolis, 2000, true), 30, 4),
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
