//! A scripted duel on the courtyard: A shoots B until B dies; kills, deaths, score and
//! events are counted; B respawns after the delay, at a spawn point, at full health.

use std::sync::Arc;

use tickwire_arena::geom::Vec2;
use tickwire_arena::{BuiltinMap, GameEvent, InputCommand, PlayerKey, World, WorldConfig};

const A: PlayerKey = PlayerKey(1);
const B: PlayerKey = PlayerKey(2);

fn duel_world() -> World {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let mut world = World::new(map, WorldConfig::default(), 2024).unwrap();
    world.join(A).unwrap();
    world.join(B).unwrap();
    // A clear row along the top of the courtyard, 10 m apart; A aims straight right.
    world.place(A, Vec2::new(3.0, 2.5)).unwrap();
    world.place(B, Vec2::new(13.0, 2.5)).unwrap();
    world
}

fn fire_right(sequence: u16) -> InputCommand {
    InputCommand {
        sequence,
        aim: 0.0,
        buttons: InputCommand::FIRE,
        ..InputCommand::default()
    }
}

fn drain(world: &mut World) -> Vec<GameEvent> {
    std::iter::from_fn(|| world.poll_event()).collect()
}

#[test]
fn a_shoots_b_until_b_dies_and_b_respawns_after_the_delay() {
    let mut world = duel_world();
    let config = world.config().clone();
    let hits_to_kill = config.max_health.div_ceil(config.bullet_damage);
    let mut hits = Vec::new();
    let mut kill_tick = None;
    for sequence in 0..200u16 {
        world.step(&[(A, fire_right(sequence))]);
        for event in drain(&mut world) {
            match event {
                GameEvent::Hit {
                    attacker,
                    victim,
                    damage,
                    health,
                } => {
                    assert_eq!((attacker, victim), (A, B));
                    assert_eq!(damage, config.bullet_damage);
                    hits.push(health);
                }
                GameEvent::Kill { killer, victim } => {
                    assert_eq!((killer, victim), (A, B));
                    assert!(kill_tick.is_none(), "B dies once");
                    kill_tick = Some(world.tick());
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        if kill_tick.is_some() {
            break;
        }
    }
    let kill_tick = kill_tick.expect("B died within 200 ticks");
    assert_eq!(hits.len(), usize::from(hits_to_kill));
    assert_eq!(hits, [80, 60, 40, 20, 0], "health after each hit");

    let a = world.player(A).unwrap();
    let b = world.player(B).unwrap();
    assert_eq!(a.stats().kills, 1);
    assert_eq!(a.stats().hits, 5);
    assert_eq!(
        a.stats().score,
        config.score_per_kill + 5 * config.score_per_hit
    );
    assert_eq!(a.stats().deaths, 0);
    assert_eq!(b.stats().deaths, 1);
    assert_eq!(b.stats().kills, 0);
    assert!(!b.is_alive());
    assert_eq!(b.health(), 0);
    let respawn_at = kill_tick + u64::from(config.respawn_delay_ticks);
    assert_eq!(b.respawn_tick(), Some(respawn_at));
    world.check_invariants().unwrap();

    // A keeps firing: bullets fly through where B was, hitting nobody, until B is back.
    let mut sequence = 1000u16;
    while world.tick() < respawn_at - 1 {
        sequence += 1;
        world.step(&[(A, fire_right(sequence))]);
        let events = drain(&mut world);
        assert!(events.is_empty(), "tick {}: {events:?}", world.tick());
        assert!(!world.player(B).unwrap().is_alive());
    }
    world.step(&[]);
    let events = drain(&mut world);
    let b = world.player(B).unwrap();
    assert!(b.is_alive(), "respawned at tick {respawn_at}");
    assert_eq!(b.health(), config.max_health);
    match events.as_slice() {
        [GameEvent::Respawn { player, position }, ..] => {
            assert_eq!(*player, B);
            assert_eq!(*position, b.position());
            let nearest = world
                .map()
                .spawns()
                .iter()
                .map(|spawn| (*spawn - *position).length())
                .fold(f32::INFINITY, f32::min);
            assert!(
                nearest <= config.spawn_jitter * std::f32::consts::SQRT_2 + 1e-4,
                "respawned {nearest} m from the nearest spawn point"
            );
        }
        other => panic!("expected B's respawn, got {other:?}"),
    }
    world.check_invariants().unwrap();
}

#[test]
fn a_wall_between_the_players_stops_every_bullet() {
    let mut world = duel_world();
    // The divider wall at x = 20..21 runs from y = 10 to 20.
    world.place(A, Vec2::new(17.0, 15.0)).unwrap();
    world.place(B, Vec2::new(24.0, 15.0)).unwrap();
    for sequence in 0..300u16 {
        world.step(&[(A, fire_right(sequence))]);
        assert_eq!(world.pending_events(), 0, "nothing gets through");
        for bullet in world.bullets() {
            assert!(bullet.position().x < 20.0, "{bullet:?} is past the wall");
        }
    }
    assert_eq!(world.player(B).unwrap().health(), world.config().max_health);
    assert!(world.player(A).unwrap().stats().shots >= 35);
}

#[test]
fn bullets_vanish_after_their_range() {
    let mut world = duel_world();
    // Fire once down the long open row; nothing to hit within range.
    world.place(B, Vec2::new(36.0, 27.5)).unwrap();
    world.step(&[(A, fire_right(0))]);
    assert_eq!(world.bullets().len(), 1);
    let lifetime = world.config().bullet_lifetime_ticks();
    for _ in 2..lifetime {
        world.step(&[]);
    }
    let bullet = world.bullets()[0];
    let travelled = bullet.position().x - 3.0;
    assert!(
        (travelled - 29.5).abs() < 1e-3,
        "{travelled} m after {} ticks",
        lifetime - 1
    );
    world.step(&[]);
    assert!(
        world.bullets().is_empty(),
        "gone after {lifetime} ticks (30 m)"
    );
}
