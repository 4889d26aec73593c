//! A seeded arena scene for the snapshot workloads: players on a built-in map (in a 14 m
//! square when crowded, at their spawn points otherwise), each with an entity id and a
//! snapshot client, walking slow circles of their own phase. `tests/snapshot_bytes.rs`
//! pins its snapshot bytes and `examples/encode_count.rs` counts its instructions (it
//! includes this file by `#[path]`), so the counts are taken on the scene the checksums
//! hold.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::snapshot::{
    ClientSnapshots, EntityId, EntityIds, SnapshotConfig, SnapshotEncoder, SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

/// FNV-1a's starting value.
pub(crate) const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds a snapshot (its length, then its bytes) into an FNV-1a hash.
pub(crate) fn fnv_snapshot(hash: u64, snapshot: &[u8]) -> u64 {
    (snapshot.len() as u32)
        .to_le_bytes()
        .iter()
        .chain(snapshot)
        .fold(hash, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
        })
}

pub(crate) struct Scene {
    pub(crate) world: World,
    pub(crate) ids: EntityIds,
    pub(crate) encoder: SnapshotEncoder,
    pub(crate) clients: Vec<(EntityId, ClientSnapshots)>,
    pub(crate) inputs: Vec<(PlayerKey, InputCommand)>,
}

impl Scene {
    pub(crate) fn new(
        map: BuiltinMap,
        players: usize,
        crowd: bool,
        snapshots: SnapshotConfig,
    ) -> Self {
        let map = Arc::new(map.load().expect("the shipped map loads"));
        let size = map.size();
        let config = WorldConfig::default();
        let schema = SnapshotSchema::new(size, config.max_health).expect("valid schema");
        let mut world = World::new(map, config, 7).expect("valid config");
        let encoder = SnapshotEncoder::new(schema, size, snapshots, 60).expect("valid config");
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
        }
    }

    /// Steps the world on tick `sequence`'s inputs: each player walks a slow circle of its
    /// own phase and fires every `fire_every` ticks (each at its own offset).
    pub(crate) fn step(&mut self, sequence: u16, fire_every: usize) {
        for (i, (_, input)) in self.inputs.iter_mut().enumerate() {
            let phase = (i as f32) * 0.7 + f32::from(sequence) * 0.02;
            input.sequence = sequence;
            input.move_x = (phase.cos() * 64.0).round() / 64.0;
            input.move_y = (phase.sin() * 64.0).round() / 64.0;
            input.aim = (phase * 1.3).sin() * 3.0;
            input.buttons = u8::from((usize::from(sequence) + i) % fire_every == 0);
        }
        self.world.step(&self.inputs);
        while self.world.poll_event().is_some() {}
    }
}
