//! A room's tick as the server runs it: world step, frame capture, and a snapshot encoded
//! for every player (each acknowledging the previous one, as on a lossless link), for 100,
//! 1,000 and 3,000 players packed in one crowd and spread over the large map. Before the
//! timings it prints snapshot bytes per player per tick for idle, moving and crowded scenes.
//!
//! `taskset -c 1 cargo bench -p tickwire-arena --bench snapshot_encode`

use std::sync::Arc;

use divan::Bencher;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::snapshot::{
    ClientSnapshots, EntityIds, SnapshotConfig, SnapshotDecoder, SnapshotEncoder, SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// Everyone inside a 14 m square (about 200 m²): the teleport burst.
    Crowd,
    /// Everyone at a random place on the 400 m map.
    Spread,
}

struct Scene {
    world: World,
    ids: EntityIds,
    encoder: SnapshotEncoder,
    clients: Vec<(PlayerKey, u16, ClientSnapshots)>,
    inputs: Vec<(PlayerKey, InputCommand)>,
    buf: Vec<u8>,
    moving: bool,
    sequence: u16,
    bytes: u64,
    /// Whether clients acknowledge snapshots (a healthy link); without acks every snapshot
    /// is a full one.
    acks: bool,
    /// Decodes the first client's snapshots, counting what it sees.
    observer: Option<Observer>,
}

/// The first client's view: its snapshot bytes and the entities they carried.
struct Observer {
    decoder: SnapshotDecoder,
    bytes: u64,
    entities: u64,
}

impl Scene {
    fn new(players: usize, layout: Layout, moving: bool) -> Self {
        Self::with_config(players, layout, moving, SnapshotConfig::default())
    }

    fn with_config(
        players: usize,
        layout: Layout,
        moving: bool,
        snapshots: SnapshotConfig,
    ) -> Self {
        let map = Arc::new(BuiltinMap::Metropolis.load().unwrap());
        let size = map.size();
        let config = WorldConfig::default();
        let schema = SnapshotSchema::new(size, config.max_health).unwrap();
        let mut world = World::new(map, config, 9).unwrap();
        let mut ids = EntityIds::new();
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        let encoder = SnapshotEncoder::new(schema, size, snapshots, 60).unwrap();
        let mut clients = Vec::new();
        let mut inputs = Vec::new();
        for i in 0..players {
            let key = PlayerKey(i as u64);
            world.join(key).unwrap();
            let id = ids.insert(key).unwrap();
            let target = match layout {
                Layout::Crowd => Vec2::new(
                    200.0 + rng.random_range(0.0..14.0),
                    200.0 + rng.random_range(0.0..14.0),
                ),
                Layout::Spread => Vec2::new(
                    rng.random_range(2.0..size.x - 2.0),
                    rng.random_range(2.0..size.y - 2.0),
                ),
            };
            world.place(key, target).unwrap();
            clients.push((key, id, encoder.new_client()));
            inputs.push((key, InputCommand::default()));
        }
        let mut scene = Self {
            world,
            ids,
            encoder,
            clients,
            inputs,
            buf: vec![0; 2048],
            moving,
            sequence: 0,
            bytes: 0,
            acks: true,
            observer: None,
        };
        for _ in 0..60 {
            scene.tick();
        }
        scene.bytes = 0;
        scene
    }

    fn tick(&mut self) {
        self.sequence = self.sequence.wrapping_add(1);
        for (i, (_, input)) in self.inputs.iter_mut().enumerate() {
            input.sequence = self.sequence;
            if self.moving {
                // Each player walks a slow circle of its own phase and fires now and then.
                let phase = (i as f32) * 0.7 + f32::from(self.sequence) * 0.02;
                input.move_x = (phase.cos() * 64.0).round() / 64.0;
                input.move_y = (phase.sin() * 64.0).round() / 64.0;
                input.aim = (phase * 1.3).sin() * 3.0;
                input.buttons = u8::from((usize::from(self.sequence) + i) % 90 == 0);
            }
        }
        self.world.step(&self.inputs);
        while self.world.poll_event().is_some() {}
        self.encoder.capture(&self.world, &self.ids);
        for index in 0..self.clients.len() {
            // As the room does: the next recipient's baseline loads during this encode.
            if let Some((_, _, next)) = self.clients.get(index + 1) {
                next.prefetch_baseline();
            }
            let (_, id, client) = &mut self.clients[index];
            let len = self.encoder.encode(client, *id, &mut self.buf).unwrap();
            self.bytes += len as u64;
            if let (0, Some(observer)) = (index, &mut self.observer) {
                let decoded = observer.decoder.decode(&self.buf[..len]).unwrap();
                observer.bytes += len as u64;
                observer.entities += decoded.entities.len() as u64;
            }
            if let (true, Some(tick)) = (self.acks, client.last_sent()) {
                let _ = client.handle_ack(tick);
            }
        }
    }
}

fn main() {
    println!(
        "snapshot bytes per player per tick (Metropolis, 60 ticks after a 60-tick warm-up, every snapshot acked):"
    );
    for (name, players, layout, moving) in [
        ("idle, spread", 1000, Layout::Spread, false),
        ("moving, spread", 1000, Layout::Spread, true),
        ("idle, crowd", 1000, Layout::Crowd, false),
        ("moving, crowd", 1000, Layout::Crowd, true),
        ("moving, crowd", 3000, Layout::Crowd, true),
    ] {
        let mut scene = Scene::new(players, layout, moving);
        for _ in 0..60 {
            scene.tick();
        }
        let per = scene.bytes as f64 / (60.0 * players as f64);
        println!("  {name:<15} {players:>5} players: {per:>7.1} bytes");
    }
    println!("bytes per entity in view, one player's snapshots (crowd of 1,000, 60 ticks):");
    for (name, moving, acks) in [
        ("idle, acked deltas", false, true),
        ("idle, full (no acks)", false, false),
        ("moving, acked deltas", true, true),
        ("moving, full (no acks)", true, false),
    ] {
        let mut scene = Scene::new(1000, Layout::Crowd, moving);
        scene.acks = acks;
        scene.observer = Some(Observer {
            decoder: SnapshotDecoder::new(*scene.encoder.schema(), scene.encoder.config()),
            bytes: 0,
            entities: 0,
        });
        // A decoder that joins now has no baseline: start the observed client afresh.
        scene.clients[0].2.reset();
        for _ in 0..60 {
            scene.tick();
        }
        let observer = scene.observer.as_ref().unwrap();
        println!(
            "  {name:<28} {:>6.2} bytes/entity ({:.0} bytes, {:.1} entities per snapshot)",
            observer.bytes as f64 / observer.entities.max(1) as f64,
            observer.bytes as f64 / 60.0,
            observer.entities as f64 / 60.0,
        );
    }
    divan::main();
}

#[divan::bench(args = [100, 1000, 3000], sample_count = 20)]
fn room_tick_crowd(bencher: Bencher, players: usize) {
    let mut scene = Scene::new(players, Layout::Crowd, true);
    bencher.bench_local(|| scene.tick());
}

#[divan::bench(args = [100, 1000, 3000], sample_count = 20)]
fn room_tick_spread(bencher: Bencher, players: usize) {
    let mut scene = Scene::new(players, Layout::Spread, true);
    bencher.bench_local(|| scene.tick());
}

/// The crowd with half the view (32 entities, 64 candidates): what the view cap buys.
#[divan::bench(args = [3000], sample_count = 20)]
fn room_tick_crowd_view_32(bencher: Bencher, players: usize) {
    let config = SnapshotConfig {
        max_entities: 32,
        candidates: 64,
        ..SnapshotConfig::default()
    };
    let mut scene = Scene::with_config(players, Layout::Crowd, true, config);
    bencher.bench_local(|| scene.tick());
}

/// The world step alone, for the share of the tick that is simulation.
#[divan::bench(args = [3000], sample_count = 20)]
fn world_step_only_crowd(bencher: Bencher, players: usize) {
    let mut scene = Scene::new(players, Layout::Crowd, true);
    bencher.bench_local(|| {
        scene.world.step(&scene.inputs);
        while scene.world.poll_event().is_some() {}
    });
}
