//! Golden replication vectors: `tests/vectors/replication.json` pins the bytes of a scene's
//! snapshots to two viewers (full states, deltas with creates, updates and destroys, long id
//! gaps, an owner-only field, a kind change, a lost acknowledgement, roster changes) and what each viewer's
//! mirror holds after each, so the TypeScript and C# mirrors are held to the same format
//! (`docs/REPLICATION.md`).
//!
//! The scene is replayed and must produce the stored bytes; the stored bytes are then
//! applied in order by a mirror per viewer and must give the stored views and changes.
//! `TICKWIRE_BLESS=1 cargo test -p tickwire-replicate --test replication_vectors` rewrites
//! the file.

mod support;

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use support::{Entity, Runner, Score};
use tickwire_replicate::{Audience, Change, Mirror, ServerWorld, ViewerId, ack_message};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/replication.json")
}

struct Snapshot {
    name: &'static str,
    viewer: u64,
    bytes: Vec<u8>,
}

/// The scene: each step changes the world, then both viewers are sent a snapshot, and the
/// listed viewers acknowledge theirs.
fn scene() -> Vec<Snapshot> {
    let mut world = ServerWorld::<Entity>::default();
    world.set_tick_rate(30);
    let (one, two) = (ViewerId(1), ViewerId(2));
    world.add_viewer(one);
    world.add_viewer(two);
    world.set_member(0, one, "ada", true);
    world.set_member(1, two, "bo", true);
    let runner = |x: f32, y: f32, name: &str, stamina: u16| Runner {
        position: [x, y],
        name: name.into(),
        health: 100,
        stamina,
    };
    let ada = world.spawn(runner(10.0, 20.5, "ada", 700)).unwrap();
    world.set_owner(ada, Some(one));
    let bo = world.spawn(runner(30.25, 4.0, "bo", 300)).unwrap();
    world.set_owner(bo, Some(two));
    let score = world.spawn(Score { red: 0, blue: 0 }).unwrap();
    // Entities neither viewer is sent, so the visible ones that follow have long id gaps.
    let hidden: Vec<_> = (0..300)
        .map(|n| {
            let id = world.spawn(runner((n % 250) as f32, 0.0, "x", 0)).unwrap();
            world.set_audience(id, Audience::Only(vec![ViewerId(99)]));
            id
        })
        .collect();

    let mut out = Vec::new();
    let mut step =
        |world: &mut ServerWorld<Entity>, tick: u32, name: &'static str, acks: &[ViewerId]| {
            world.snapshots(tick, |viewer, bytes| {
                out.push(Snapshot {
                    name,
                    viewer: viewer.0,
                    bytes: bytes.to_vec(),
                })
            });
            for &viewer in acks {
                world.ack(viewer, &ack_message(tick)).unwrap();
            }
        };
    step(&mut world, 1, "full state", &[one, two]);

    world.kind_mut::<Runner>(ada).unwrap().position = [10.5, 20.5];
    world.kind_mut::<Runner>(ada).unwrap().stamina = 650;
    world.kind_mut::<Score>(score).unwrap().red = 1;
    step(&mut world, 2, "moves, owner-only change, score", &[one]);

    world.despawn(bo).unwrap();
    world.set_member(1, two, "bo", false);
    world.set_audience(hidden[20], Audience::Everyone);
    world.set_audience(hidden[299], Audience::Everyone);
    step(&mut world, 3, "despawn, creates after long gaps", &[two]);

    world.kind_mut::<Runner>(ada).unwrap().name = "ada lovelace".into();
    *world.get_mut(score).unwrap() = Entity::Runner(runner(1.0, 1.0, "was score", 1));
    step(
        &mut world,
        4,
        "rename, kind change, delta over a lost ack",
        &[one, two],
    );

    world.set_owner(ada, Some(two));
    world.remove_member(1);
    world.set_member(3, ViewerId(3), "cy", true);
    world.kind_mut::<Runner>(ada).unwrap().health = 0;
    step(&mut world, 5, "ownership moves", &[]);
    out
}

fn entity_json(id: u16, entity: &Entity) -> Value {
    match entity {
        Entity::Runner(runner) => json!({
            "id": id,
            "kind": "Runner",
            "fields": {
                "position": [f64::from(runner.position[0]), f64::from(runner.position[1])],
                "name": runner.name,
                "health": runner.health,
                "stamina": runner.stamina,
            },
        }),
        Entity::Score(score) => json!({
            "id": id,
            "kind": "Score",
            "fields": { "red": score.red, "blue": score.blue },
        }),
    }
}

fn change_json(change: &Change) -> Value {
    match *change {
        Change::Added(id) => json!({ "added": id }),
        Change::Removed(id) => json!({ "removed": id }),
        Change::Changed(id, mask) => json!({ "changed": id, "mask": mask }),
    }
}

/// Applies the snapshots in order, a mirror per viewer, recording what each holds after.
fn applied(snapshots: &[Snapshot]) -> Vec<Value> {
    let mut mirrors = [Mirror::<Entity>::new(), Mirror::<Entity>::new()];
    snapshots
        .iter()
        .map(|snapshot| {
            let mirror = &mut mirrors[snapshot.viewer as usize - 1];
            let tick = mirror.apply(&snapshot.bytes).unwrap();
            json!({
                "name": snapshot.name,
                "viewer": snapshot.viewer,
                "tick": tick,
                "hex": hex::encode(&snapshot.bytes),
                "view": mirror.iter().map(|(id, e)| entity_json(id, e)).collect::<Vec<_>>(),
                "changes": mirror.changes().iter().map(change_json).collect::<Vec<_>>(),
                "roster": mirror.roster().map(|(seat, member)| json!({
                    "seat": seat,
                    "name": member.name,
                    "connected": member.connected,
                    "you": member.you,
                })).collect::<Vec<_>>(),
                "roster_changes": mirror.roster_changes().iter().map(change_json).collect::<Vec<_>>(),
            })
        })
        .collect()
}

#[test]
fn the_scene_produces_the_stored_snapshots_and_views() {
    let snapshots = scene();
    let file = json!({
        "format": "docs/REPLICATION.md 1.0",
        "types": "crates/replicate/tests/support/mod.rs: Entity = Runner | Score",
        "snapshots": applied(&snapshots),
    });
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        fs::create_dir_all(path().parent().unwrap()).unwrap();
        fs::write(path(), serde_json::to_string_pretty(&file).unwrap() + "\n").unwrap();
    }
    let stored: Value = serde_json::from_str(&fs::read_to_string(path()).unwrap()).unwrap();
    let stale = "the engine no longer produces tests/vectors/replication.json; if the format changed on purpose, bless it (TICKWIRE_BLESS=1) and update docs/REPLICATION.md and the TypeScript and C# mirrors";
    let (stored, made) = (&stored["snapshots"], &file["snapshots"]);
    assert_eq!(
        stored.as_array().map(Vec::len),
        made.as_array().map(Vec::len),
        "{stale}"
    );
    for (stored, made) in stored
        .as_array()
        .unwrap()
        .iter()
        .zip(made.as_array().unwrap())
    {
        assert!(
            stored == made,
            "{stale}: {} for viewer {}",
            made["name"],
            made["viewer"]
        );
    }
}

/// The stored bytes, applied by a fresh mirror, give the stored views: the file is
/// self-consistent whatever the engine does now.
#[test]
fn the_stored_snapshots_apply_to_the_stored_views() {
    let stored: Value = serde_json::from_str(&fs::read_to_string(path()).unwrap()).unwrap();
    let snapshots: Vec<Snapshot> = stored["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|snapshot| Snapshot {
            name: "",
            viewer: snapshot["viewer"].as_u64().unwrap(),
            bytes: hex::decode(snapshot["hex"].as_str().unwrap()).unwrap(),
        })
        .collect();
    for (got, want) in applied(&snapshots)
        .iter()
        .zip(stored["snapshots"].as_array().unwrap())
    {
        assert_eq!(got["view"], want["view"]);
        assert_eq!(got["changes"], want["changes"]);
        assert_eq!(got["roster"], want["roster"]);
        assert_eq!(got["tick"], want["tick"]);
    }
}

/// The TypeScript mirror's tests read the vector types from a generated file: it must be
/// what the generator writes now.
#[test]
fn the_typescript_fixture_is_generated_from_the_types() {
    use tickwire_replicate::Replicate;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/ts/test/generated/replication_fixture.ts");
    let generated =
        tickwire_wire::schema::typescript_replicated("Entity", &Entity::layout()).unwrap();
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &generated).unwrap();
    }
    let committed = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: TICKWIRE_BLESS=1 cargo test -p tickwire-replicate --test replication_vectors\n{generated}",
        path.display()
    );
}

/// The C# mirror's tests read the vector types from a generated file, the reference output of
/// the C# generator (`clients/csharp/src/Tickwire/Replication/Mirror.cs` documents its
/// shape): it must be what the generator writes now.
#[test]
fn the_csharp_fixture_is_generated_from_the_types() {
    use tickwire_replicate::Replicate;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/csharp/Tests~/Generated/ReplicationFixture.cs");
    let generated = tickwire_wire::schema::csharp_replicated(
        "Tickwire.Tests.Generated",
        "Entity",
        &Entity::layout(),
    )
    .unwrap();
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &generated).unwrap();
    }
    let committed = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: TICKWIRE_BLESS=1 cargo test -p tickwire-replicate --test replication_vectors\n{generated}",
        path.display()
    );
}
