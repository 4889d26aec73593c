//! Interest and budget: a far player is never in my snapshot and a near one is; a crowd of
//! 2,000 in view never pushes a snapshot over the packet budget, the view stays capped,
//! and every entity in view is brought up to date within a bounded number of ticks.

use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::snapshot::{
    ClientSnapshots, EntityIds, SnapshotConfig, SnapshotDecoder, SnapshotEncoder, SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

fn world(players: &[Vec2]) -> (World, EntityIds, SnapshotEncoder) {
    let map = Arc::new(BuiltinMap::Metropolis.load().unwrap());
    let config = WorldConfig::default();
    let schema = SnapshotSchema::new(map.size(), config.max_health).unwrap();
    let size = map.size();
    let mut world = World::new(map, config, 21).unwrap();
    let mut ids = EntityIds::new();
    for (key, position) in players.iter().enumerate() {
        let key = PlayerKey(key as u64);
        world.join(key).unwrap();
        ids.insert(key).unwrap();
        world.place(key, *position).unwrap();
    }
    let encoder = SnapshotEncoder::new(schema, size, SnapshotConfig::default(), 60).unwrap();
    (world, ids, encoder)
}

#[test]
fn a_far_player_is_never_in_view_and_a_near_one_is() {
    let (mut world, ids, mut encoder) = world(&[
        Vec2::new(100.0, 100.0),
        Vec2::new(105.0, 102.0),
        Vec2::new(300.0, 300.0),
        Vec2::new(126.0, 100.0),
    ]);
    let near = ids.get(PlayerKey(1)).unwrap();
    let far = ids.get(PlayerKey(2)).unwrap();
    let just_out = ids.get(PlayerKey(3)).unwrap();
    let me = ids.get(PlayerKey(0)).unwrap();
    let mut client = encoder.new_client();
    let mut decoder = SnapshotDecoder::new(*encoder.schema(), encoder.config());
    let mut buf = vec![0; 1100];
    for _ in 0..30 {
        world.step(&[]);
        encoder.capture(&world, &ids);
        let len = encoder.encode(&mut client, me, &mut buf).unwrap();
        let view = &decoder.decode(&buf[..len]).unwrap().entities;
        assert!(
            view.iter().any(|e| e.id == near),
            "a player 5 m away is not in view"
        );
        assert!(
            !view.iter().any(|e| e.id == far),
            "a player 280 m away is in view"
        );
        assert!(
            !view.iter().any(|e| e.id == just_out),
            "a player 26 m away (radius 20 m) is in view"
        );
        assert!(
            !view.iter().any(|e| e.id == me),
            "I am listed among the others"
        );
        client.handle_ack(decoder.newest().unwrap()).unwrap();
    }
}

#[test]
fn a_crowd_of_5000_in_one_zone_stays_within_budget_and_every_entity_in_view_is_refreshed() {
    let worst = crowd(SnapshotConfig::default(), 5000);
    assert_eq!(worst, 0, "the default budget keeps a crowd's view current");
}

#[test]
fn a_tight_budget_delays_updates_but_priorities_reach_everyone() {
    let worst = crowd(
        SnapshotConfig {
            packet_budget: 420,
            bandwidth_bytes_per_sec: 9_000,
            ..SnapshotConfig::default()
        },
        2000,
    );
    assert!(worst > 0, "the tight budget never held an update back");
}

/// Runs a moving crowd of `players` in one 14 × 14 m zone (≈ 200 m², seed 003's) with
/// `config`; returns the worst staleness seen.
fn crowd(config: SnapshotConfig, players: usize) -> u32 {
    const OBSERVERS: usize = 40;
    /// Most consecutive snapshots an entity in view may show a stale state.
    const MAX_STALE: u32 = 12;
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    let places: Vec<Vec2> = (0..players)
        .map(|_| {
            Vec2::new(
                200.0 + rng.random_range(0.0..14.0),
                200.0 + rng.random_range(0.0..14.0),
            )
        })
        .collect();
    let (mut world, ids, encoder) = world(&places);
    let mut encoder = SnapshotEncoder::new(
        *encoder.schema(),
        Vec2::new(400.0, 400.0),
        config.clone(),
        60,
    )
    .unwrap();
    let mut observers: Vec<(u16, ClientSnapshots, SnapshotDecoder, HashMap<u16, u32>)> = (0
        ..OBSERVERS)
        .map(|i| {
            (
                ids.get(PlayerKey((i * players / OBSERVERS) as u64))
                    .unwrap(),
                encoder.new_client(),
                SnapshotDecoder::new(*encoder.schema(), &config),
                HashMap::new(),
            )
        })
        .collect();
    let mut buf = vec![0; config.packet_budget];
    let mut inputs: Vec<(PlayerKey, InputCommand)> = (0..players)
        .map(|key| (PlayerKey(key as u64), InputCommand::default()))
        .collect();
    let (mut bytes, mut snapshots, mut worst_stale) = (0usize, 0usize, 0u32);
    for tick in 0..240u16 {
        for (_, input) in &mut inputs {
            input.sequence = tick;
            if rng.random_range(0..30) == 0 {
                input.move_x = f32::from(rng.random_range(-64i8..=64)) / 64.0;
                input.move_y = f32::from(rng.random_range(-64i8..=64)) / 64.0;
                input.aim = rng.random_range(-3.0f32..3.0);
            }
        }
        world.step(&inputs);
        while world.poll_event().is_some() {}
        encoder.capture(&world, &ids);
        for (me, client, decoder, stale) in &mut observers {
            let len = encoder.encode(client, *me, &mut buf).unwrap();
            assert!(
                len <= config.packet_budget,
                "a {len}-byte snapshot over the {}-byte budget",
                config.packet_budget
            );
            bytes += len;
            snapshots += 1;
            let decoded = decoder.decode(&buf[..len]).unwrap();
            assert!(decoded.entities.len() <= config.max_entities);
            let frame = encoder.frame();
            stale.retain(|id, _| decoded.entities.iter().any(|e| e.id == *id));
            for entity in &decoded.entities {
                let behind = stale.entry(entity.id).or_insert(0);
                if frame.state(entity.id) == Some(entity.state) {
                    *behind = 0;
                } else {
                    *behind += 1;
                    worst_stale = worst_stale.max(*behind);
                }
            }
            if tick > 30 {
                // A newcomer that displaced a member may wait for room in the budget.
                assert!(
                    decoded.entities.len() >= config.max_entities * 3 / 4,
                    "a crowd fills the view: {} of {}",
                    decoded.entities.len(),
                    config.max_entities
                );
            }
            client.handle_ack(decoder.newest().unwrap()).unwrap();
        }
    }
    let average = bytes as f64 / snapshots as f64;
    println!(
        "crowd of {players}: {average:.0} bytes per snapshot, worst staleness {worst_stale} ticks"
    );
    assert!(
        worst_stale <= MAX_STALE,
        "an entity in view stayed stale for {worst_stale} snapshots (bound {MAX_STALE})"
    );
    let per_tick = f64::from(config.bandwidth_bytes_per_sec) / 60.0;
    assert!(
        average <= per_tick + 1.0,
        "{average:.0} bytes per snapshot exceed the bandwidth cap's {per_tick:.0} per tick"
    );
    worst_stale
}
