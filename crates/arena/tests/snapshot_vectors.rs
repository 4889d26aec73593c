//! Golden snapshot vectors: `tests/vectors/snapshots.json` pins the exact bytes of a few
//! snapshots (a full one, deltas with creates, updates and destroys, a dead player and
//! bullets) and what they decode to, so the TypeScript port is held to the same format.
//!
//! The scenes are replayed and must produce the stored bytes; the stored bytes are then
//! decoded in order (each delta against the snapshot before it) and must give the stored
//! views. `TICKWIRE_BLESS=1 cargo test -p tickwire-arena --test snapshot_vectors` rewrites
//! the file.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tickwire_arena::geom::Vec2;
use tickwire_arena::snapshot::{
    DecodedSnapshot, EntityIds, SnapshotConfig, SnapshotDecoder, SnapshotEncoder, SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/snapshots.json")
}

/// The scenes' snapshots for player 0, in order: (name, bytes).
fn scenes() -> (SnapshotSchema, Vec<(&'static str, Vec<u8>)>) {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let config = WorldConfig::default();
    let schema = SnapshotSchema::new(map.size(), config.max_health).unwrap();
    let size = map.size();
    let mut world = World::new(map, config, 11).unwrap();
    let mut ids = EntityIds::new();
    let mut encoder = SnapshotEncoder::new(schema, size, SnapshotConfig::default(), 60).unwrap();
    let mut client = encoder.new_client();
    let places = [(0, 6.0, 6.0), (1, 8.0, 6.5), (2, 6.5, 9.0), (3, 9.5, 8.0)];
    for (key, x, y) in places {
        world.join(PlayerKey(key)).unwrap();
        ids.insert(PlayerKey(key)).unwrap();
        world.place(PlayerKey(key), Vec2::new(x, y)).unwrap();
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1100];
    let mut sequence = 0u16;
    let mut snapshot = |world: &mut World,
                        ids: &EntityIds,
                        encoder: &mut SnapshotEncoder,
                        client: &mut tickwire_arena::snapshot::ClientSnapshots,
                        inputs: &[(u64, f32, f32, f32, u8)],
                        name: &'static str,
                        ack: bool| {
        sequence += 1;
        let inputs: Vec<_> = inputs
            .iter()
            .map(|&(key, move_x, move_y, aim, buttons)| {
                (
                    PlayerKey(key),
                    InputCommand {
                        sequence,
                        move_x,
                        move_y,
                        aim,
                        buttons,
                    },
                )
            })
            .collect();
        world.step(&inputs);
        while world.poll_event().is_some() {}
        encoder.capture(world, ids);
        let len = encoder
            .encode(client, ids.get(PlayerKey(0)).unwrap(), &mut buf)
            .unwrap();
        if ack {
            client.handle_ack(client.last_sent().unwrap()).unwrap();
        }
        out.push((name, buf[..len].to_vec()));
    };
    snapshot(
        &mut world,
        &ids,
        &mut encoder,
        &mut client,
        &[(1, 0.5, 0.0, 1.0, 0)],
        "full",
        true,
    );
    snapshot(
        &mut world,
        &ids,
        &mut encoder,
        &mut client,
        &[(1, 1.0, 0.0, 1.0, 0), (2, 0.0, -0.5, -2.0, 0)],
        "delta_moves",
        true,
    );
    world.leave(PlayerKey(3));
    ids.remove(PlayerKey(3));
    world.join(PlayerKey(4)).unwrap();
    ids.insert(PlayerKey(4)).unwrap();
    world.place(PlayerKey(4), Vec2::new(7.0, 4.0)).unwrap();
    snapshot(
        &mut world,
        &ids,
        &mut encoder,
        &mut client,
        &[],
        "delta_leave_join",
        true,
    );
    // Player 0 fires at player 1: bullets in flight, one of them ours.
    snapshot(
        &mut world,
        &ids,
        &mut encoder,
        &mut client,
        &[(0, 0.0, 0.0, 0.2, 1), (2, 0.0, 0.0, -1.5, 1)],
        "delta_bullets",
        false,
    );
    // Not acknowledged: this one is again a delta against "delta_leave_join".
    snapshot(
        &mut world,
        &ids,
        &mut encoder,
        &mut client,
        &[],
        "delta_same_baseline",
        true,
    );
    (schema, out)
}

fn decoded_json(snapshot: &DecodedSnapshot) -> Value {
    json!({
        "tick": snapshot.tick,
        "baseline": snapshot.baseline,
        "last_input": snapshot.last_input,
        "me": {
            "alive": snapshot.me.alive,
            "x_bits": snapshot.me.position.x.to_bits(),
            "y_bits": snapshot.me.position.y.to_bits(),
            "aim": snapshot.me.aim,
            "health": snapshot.me.health,
            "respawn_in": snapshot.me.respawn_in,
            "kills": snapshot.me.kills,
            "deaths": snapshot.me.deaths,
            "score": snapshot.me.score,
        },
        "entities": snapshot.entities.iter().map(|e| json!([e.id, e.state.x, e.state.y, e.state.aim, e.state.health, e.state.alive])).collect::<Vec<_>>(),
        "created": snapshot.created,
        "updated": snapshot.updated,
        "destroyed": snapshot.destroyed,
        "bullets": snapshot.bullets.iter().map(|b| json!([b.x, b.y, b.direction, b.mine])).collect::<Vec<_>>(),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn snapshots_match_the_golden_vectors() {
    let (schema, snapshots) = scenes();
    let mut decoder = SnapshotDecoder::new(schema, &SnapshotConfig::default());
    let vectors: Vec<Value> = snapshots
        .iter()
        .map(|(name, bytes)| {
            let decoded = decoder.decode(bytes).unwrap();
            json!({ "name": name, "hex": hex(bytes), "decoded": decoded_json(decoded) })
        })
        .collect();
    let file = json!({
        "description": "Snapshot vectors for tickwire_arena::snapshot (format in docs/ARENA.md). Decode them in order with one decoder: each delta names its baseline tick, an earlier vector. Schema: map 40x30 m (x grid 0..=40 in 1/64 m: 12 bits; y 0..=30: 11 bits), max_health 100 (7 bits), history 32. Entities are [id, x_step, y_step, aim_step, health, alive]; bullets [x_step, y_step, direction_step, mine]; own position as f32 bits.",
        "schema": { "map_width": 40.0, "map_height": 30.0, "max_health": 100, "history": 32 },
        "vectors": vectors,
    });
    let text = serde_json::to_string_pretty(&file).unwrap() + "\n";
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        fs::write(path(), &text).unwrap();
        return;
    }
    let stored: Value = serde_json::from_str(&fs::read_to_string(path()).unwrap()).unwrap();
    // The stored bytes decode to the stored views, independently of the encoder.
    let mut decoder = SnapshotDecoder::new(schema, &SnapshotConfig::default());
    for vector in stored["vectors"].as_array().unwrap() {
        let bytes = unhex(vector["hex"].as_str().unwrap());
        let decoded = decoder.decode(&bytes).unwrap();
        assert_eq!(
            decoded_json(decoded),
            vector["decoded"],
            "vector {} decodes differently",
            vector["name"]
        );
    }
    assert_eq!(
        stored, file,
        "the encoder no longer produces tests/vectors/snapshots.json; if the format changed on purpose, bless it (TICKWIRE_BLESS=1) and update docs/ARENA.md and the TypeScript port"
    );
}
