//! Teleport pads: walking onto a pad lands the player in its destination zone, and the
//! burst that seed 003 measured (5,000 players teleported into one 200 m² zone in one tick)
//! lands everyone in the zone with the grid consistent, then relaxes over the next ticks.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::{BuiltinMap, GameEvent, InputCommand, PlayerKey, World, WorldConfig};

#[test]
fn walking_onto_a_pad_teleports_to_its_zone() {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let mut world = World::new(map, WorldConfig::default(), 11).unwrap();
    let key = PlayerKey(1);
    world.join(key).unwrap();
    // West pad: (2, 19)–(4, 21); walk down onto it from just above.
    world.place(key, Vec2::new(3.0, 17.5)).unwrap();
    let west = world.map().teleports()[0].clone();
    let mut teleported = None;
    for sequence in 0..40u16 {
        let down = InputCommand {
            sequence,
            move_y: 1.0,
            ..InputCommand::default()
        };
        world.step(&[(key, down)]);
        if let Some(event) = world.poll_event() {
            teleported = Some(event);
            break;
        }
    }
    match teleported {
        Some(GameEvent::Teleported {
            player,
            teleport,
            from,
            to,
        }) => {
            assert_eq!(player, key);
            assert_eq!(teleport, 0);
            assert!(west.pad.contains(from), "{from:?} is on the pad");
            assert!(west.destination.contains(to), "{to:?} is in the zone");
            assert_eq!(world.player(key).unwrap().position(), to);
        }
        other => panic!("expected a teleport, got {other:?}"),
    }
    world.check_invariants().unwrap();
}

fn config_max_push() -> f32 {
    WorldConfig::default().max_push
}

#[test]
fn five_thousand_players_teleport_into_the_plaza_in_one_tick() {
    const PLAYERS: u64 = 5_000;
    let map = Arc::new(BuiltinMap::Metropolis.load().unwrap());
    let config = WorldConfig::default();
    let radius = config.player_radius;
    let mut world = World::new(map.clone(), config, 5000).unwrap();
    let max_push = config_max_push();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let pads = map.teleports();
    for key in 0..PLAYERS {
        world.join(PlayerKey(key)).unwrap();
        // ~208 players per 16 m² pad push each other up to max_push before the pads are
        // checked (the step separates, then teleports), so they start that far inside.
        let pad = pads[key as usize % pads.len()]
            .pad
            .expanded(-max_push - 0.01);
        let on_pad = Vec2::new(
            rng.random_range(pad.min.x..pad.max.x),
            rng.random_range(pad.min.y..pad.max.y),
        );
        world.place(PlayerKey(key), on_pad).unwrap();
    }
    world.check_invariants().unwrap();
    let plaza = pads[0].destination;

    world.step(&[]);
    let mut teleported = 0;
    while let Some(event) = world.poll_event() {
        match event {
            GameEvent::Teleported { to, .. } => {
                assert!(plaza.contains(to), "landed at {to:?}");
                teleported += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        teleported, PLAYERS,
        "everyone on a pad teleported in one tick"
    );
    let inside = plaza.expanded(-radius + 1e-4);
    for player in world.players() {
        assert!(
            inside.contains(player.position()),
            "player {} at {:?} is outside the plaza",
            player.key(),
            player.position()
        );
    }
    world.check_invariants().unwrap();

    // The crowd (25 players per m²) spreads out, at most max_push per player per tick,
    // without anyone entering a wall or leaving the grid. A packed crowd relaxes from its
    // edge inwards, so this takes seconds: overlaps halve within the first second.
    let crowding = |world: &World| {
        let mut near = Vec::new();
        let mut overlapping = 0usize;
        for player in world.players() {
            world.players_near(
                tickwire_arena::geom::Aabb::around_circle(player.position(), 2.0 * radius),
                &mut near,
            );
            overlapping += near
                .iter()
                .filter(|&&slot| {
                    let other = &world.players()[slot as usize];
                    other.key() != player.key()
                        && (other.position() - player.position()).length() < 2.0 * radius * 0.9
                })
                .count();
        }
        overlapping
    };
    let at_landing = crowding(&world);
    for _ in 0..60 {
        world.step(&[]);
    }
    world.check_invariants().unwrap();
    let a_second_later = crowding(&world);
    assert!(
        a_second_later * 2 < at_landing,
        "overlapping pairs: {at_landing} at landing, still {a_second_later} a second later"
    );
}

#[test]
fn warping_goes_through_the_nearest_pad_and_cools_down() {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let config = WorldConfig {
        warp_cooldown_ticks: 30,
        ..WorldConfig::default()
    };
    let mut world = World::new(map, config, 12).unwrap();
    let key = PlayerKey(1);
    world.join(key).unwrap();
    // Nearer the east pad (36, 19)–(38, 21) than the west one, far from both.
    world.place(key, Vec2::new(30.0, 24.0)).unwrap();
    let east = world.map().teleports()[1].clone();
    let warp = |sequence| InputCommand {
        sequence,
        buttons: InputCommand::WARP,
        ..InputCommand::default()
    };
    world.step(&[(key, warp(1))]);
    match world.poll_event() {
        Some(GameEvent::Teleported { teleport, to, .. }) => {
            assert_eq!(teleport, 1, "through the nearest pad");
            assert!(
                east.destination.contains(to),
                "{to:?} is in the east pad's zone"
            );
        }
        other => panic!("expected a warp, got {other:?}"),
    }
    // Pressed again at once: cooling down, counted, nothing happens.
    world.place(key, Vec2::new(30.0, 24.0)).unwrap();
    world.step(&[(key, warp(2))]);
    assert_eq!(world.poll_event(), None);
    assert_eq!(world.input_stats().warp_rate_limited, 1);
    for _ in 0..30 {
        world.step(&[]);
    }
    world.step(&[(key, warp(3))]);
    assert!(
        matches!(
            world.poll_event(),
            Some(GameEvent::Teleported { teleport: 1, .. })
        ),
        "the warp works again after its cooldown"
    );
    world.check_invariants().unwrap();
}
