//! Nothing passes through a wall: players moving at (and far above) the speed cap and
//! bullets of any speed, from random positions and angles towards a one-tile wall, never end
//! up on the other side. Failing cases proptest finds are kept in
//! `tests/arena_tunneling.proptest-regressions`.

use std::sync::Arc;

use proptest::prelude::*;
use tickwire_arena::geom::{Aabb, Vec2};
use tickwire_arena::movement::{MovementParams, step_movement};
use tickwire_arena::physics::BoxIndex;
use tickwire_arena::{ArenaMap, InputCommand, PlayerKey, World, WorldConfig};

/// The thinnest wall a map can have: one tile, x = 10..11, the whole height of the map.
const WALL: Aabb = Aabb::from_coords(10.0, 0.0, 11.0, 20.0);
const SIZE: Vec2 = Vec2::new(20.0, 20.0);
const RADIUS: f32 = 0.4;

fn walls() -> BoxIndex {
    BoxIndex::new(vec![WALL], SIZE, 4.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A player left of the wall, heading anywhere rightwards at up to 1.5 m per tick (15
    /// times the default cap of 0.1), for long enough to cross it many times over.
    #[test]
    fn players_never_cross_a_one_tile_wall(
        x in 0.5f32..9.6,
        y in 0.5f32..19.5,
        angle in -1.5f32..1.5,
        reach in 0.01f32..1.5,
        ticks in 1usize..120,
    ) {
        let params = MovementParams { radius: RADIUS, max_speed: reach * 60.0, dt: 1.0 / 60.0, bounds: SIZE };
        let walls = walls();
        let mut scratch = Vec::new();
        let mut position = Vec2::new(x, y);
        let direction = Vec2::from_angle(angle);
        for tick in 0..ticks {
            position = step_movement(position, direction, &params, &walls, &mut scratch);
            prop_assert!(
                position.x <= WALL.min.x - RADIUS + 1e-4,
                "tick {tick}: centre at {position:?}, past the wall's near face"
            );
        }
    }

    /// The same from the other side, with directions snapped to the wire's grid and capped
    /// at the default speed, through the world (separation and bounds included).
    #[test]
    fn players_in_a_world_never_cross(
        x in 11.5f32..19.5,
        y in 0.5f32..19.5,
        move_x in -64i8..=-1,
        move_y in -64i8..=64,
    ) {
        let map = Arc::new(ArenaMap::new("wall", SIZE, vec![WALL], vec![Vec2::new(x, y)], Vec::new()).unwrap());
        let mut world = World::new(map, WorldConfig { spawn_jitter: 0.0, ..WorldConfig::default() }, 1).unwrap();
        let key = PlayerKey(1);
        world.join(key).unwrap();
        for sequence in 0..240u16 {
            let input = InputCommand {
                sequence,
                move_x: f32::from(move_x) / 64.0,
                move_y: f32::from(move_y) / 64.0,
                ..InputCommand::default()
            };
            world.step(&[(key, input)]);
            let position = world.player(key).unwrap().position();
            prop_assert!(position.x >= WALL.max.x + RADIUS - 1e-4, "tick {sequence}: {position:?}");
        }
    }

    /// Bullets at up to 600 m/s (10 m per tick, ten times the wall's thickness) fired at the
    /// wall from random spots stop at it, and never hit the player standing behind it.
    #[test]
    fn bullets_never_cross_a_one_tile_wall(
        x in 0.5f32..9.0,
        y in 1.0f32..19.0,
        aim in -1.2f32..1.2,
        speed in 5.0f32..600.0,
    ) {
        let map = Arc::new(
            ArenaMap::new("wall", SIZE, vec![WALL], vec![Vec2::new(x, y), Vec2::new(15.0, 10.0)], Vec::new())
                .unwrap(),
        );
        let config = WorldConfig { bullet_speed: speed, bullet_range: 100.0, spawn_jitter: 0.0, ..WorldConfig::default() };
        let mut world = World::new(map, config, 1).unwrap();
        let (shooter, target) = (PlayerKey(1), PlayerKey(2));
        world.join(shooter).unwrap();
        world.join(target).unwrap();
        world.place(shooter, Vec2::new(x, y)).unwrap();
        world.place(target, Vec2::new(15.0, y.clamp(1.0, 19.0))).unwrap();
        for sequence in 0..60u16 {
            let fire = InputCommand { sequence, aim, buttons: InputCommand::FIRE, ..InputCommand::default() };
            world.step(&[(shooter, fire)]);
            for bullet in world.bullets() {
                prop_assert!(bullet.position().x < WALL.min.x, "{bullet:?} is past the wall");
            }
            prop_assert_eq!(world.pending_events(), 0, "nothing was hit");
        }
        prop_assert!(world.player(shooter).unwrap().stats().shots > 0);
    }
}
