//! What players feel of the physics: a player pressed into a corner stays outside the walls,
//! and players standing on top of each other separate.

use std::sync::Arc;

use tickwire_arena::geom::Vec2;
use tickwire_arena::physics::contact::circle_aabb;
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};

fn courtyard() -> World {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    World::new(map, WorldConfig::default(), 11).unwrap()
}

/// How far `key` is inside any wall (0 when clear of them all).
fn wall_penetration(world: &World, key: PlayerKey) -> f32 {
    let player = world.player(key).unwrap();
    let radius = world.config().player_radius;
    world
        .map()
        .walls()
        .boxes()
        .iter()
        .filter_map(|wall| circle_aabb(player.position(), radius, *wall))
        .map(|contact| contact.depth)
        .fold(0.0, f32::max)
}

#[test]
fn a_player_pressed_into_a_corner_stays_outside_the_walls() {
    let mut world = courtyard();
    let key = PlayerKey(1);
    world.join(key).unwrap();
    // The courtyard's top-left inner corner is at (1, 1); press into it diagonally for 10 s.
    world.place(key, Vec2::new(3.0, 3.0)).unwrap();
    let radius = world.config().player_radius;
    for sequence in 1..=600u16 {
        let press = InputCommand {
            sequence,
            move_x: -1.0,
            move_y: -1.0,
            ..InputCommand::default()
        };
        world.step(&[(key, press)]);
        let depth = wall_penetration(&world, key);
        assert!(depth < 1e-3, "tick {sequence}: {depth} m inside a wall");
    }
    let resting = world.player(key).unwrap().position();
    assert!(
        (resting.x - (1.0 + radius)).abs() < 0.01 && (resting.y - (1.0 + radius)).abs() < 0.01,
        "settles against both walls, at {resting:?}"
    );
}

#[test]
fn players_standing_on_top_of_each_other_separate() {
    let mut world = courtyard();
    let spot = Vec2::new(20.0, 15.0);
    let keys: Vec<PlayerKey> = (1..=12).map(PlayerKey).collect();
    for &key in &keys {
        world.join(key).unwrap();
        world.place(key, spot).unwrap();
    }
    for _ in 0..240 {
        world.step(&[]);
    }
    let diameter = 2.0 * world.config().player_radius;
    for (i, &a) in keys.iter().enumerate() {
        assert!(wall_penetration(&world, a) < 1e-3);
        for &b in &keys[i + 1..] {
            let gap = (world.player(a).unwrap().position() - world.player(b).unwrap().position())
                .length();
            assert!(
                gap >= diameter - 0.02,
                "{a:?} and {b:?} still overlap: {gap} m apart after 4 s"
            );
        }
    }
    world.check_invariants().unwrap();
}
