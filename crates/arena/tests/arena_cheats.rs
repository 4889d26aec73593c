//! A cheater's inputs never buy more than an honest player's: sent three times a tick, with
//! twice the speed, NaN aims and bits no client defines, they move the cheater no faster than
//! the speed cap (plus the bounded push of a crowd), never off the map, and every violation
//! is counted. Only the map's pads and a respawn move a player further in one tick.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_arena::geom::Vec2;
use tickwire_arena::{BuiltinMap, GameEvent, InputCommand, PlayerKey, World, WorldConfig};

#[test]
fn cheating_inputs_move_no_faster_than_the_speed_cap_and_are_counted() {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let config = WorldConfig::default();
    let step_limit = config.max_speed / config.tick_rate_hz as f32 + config.max_push + 1e-4;
    let mut world = World::new(map.clone(), config, 21).unwrap();
    let cheater = PlayerKey(1);
    let honest: Vec<PlayerKey> = (2..=6).map(PlayerKey).collect();
    world.join(cheater).unwrap();
    for &key in &honest {
        world.join(key).unwrap();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut sequence = 0u16;
    let mut hostile_sent = 0u64;
    let mut inputs = Vec::new();
    for tick in 0..3_000 {
        inputs.clear();
        let direction = Vec2::from_angle(rng.random_range(-3.1f32..3.1));
        // Three inputs a tick (3× the rate): one legal at full speed, one claiming twice
        // the speed, one with a NaN aim or undefined buttons.
        for variant in 0..3 {
            sequence = sequence.wrapping_add(1);
            let mut input = InputCommand {
                sequence,
                move_x: direction.x,
                move_y: direction.y,
                aim: 0.5,
                buttons: InputCommand::FIRE,
            };
            match variant {
                0 => {}
                1 => {
                    input.move_x *= 2.0;
                    input.move_y *= 2.0;
                    // Only a component past ±1 is out of range; a short diagonal is legal.
                    if input.move_x.abs() > 1.0 || input.move_y.abs() > 1.0 {
                        hostile_sent += 1;
                    }
                }
                _ if tick % 2 == 0 => {
                    input.aim = f32::NAN;
                    hostile_sent += 1;
                }
                _ => {
                    input.buttons = 0b1000;
                    hostile_sent += 1;
                }
            }
            inputs.push((cheater, input));
        }
        let before = world.player(cheater).unwrap().position();
        world.step(&inputs);
        let after = world.player(cheater).unwrap().position();
        let mut moved_by_the_game = false;
        while let Some(event) = world.poll_event() {
            match event {
                GameEvent::Teleported { player, .. } | GameEvent::Respawn { player, .. }
                    if player == cheater =>
                {
                    moved_by_the_game = true;
                }
                _ => {}
            }
        }
        let moved = (after - before).length();
        assert!(
            moved_by_the_game || moved <= step_limit,
            "tick {tick}: the cheater moved {moved} m (limit {step_limit})"
        );
        let size = map.size();
        assert!(
            (0.0..=size.x).contains(&after.x) && (0.0..=size.y).contains(&after.y),
            "tick {tick}: off the map at {after:?}"
        );
    }
    assert_eq!(
        world.input_stats().hostile(),
        hostile_sent,
        "every violation is counted"
    );
    world.check_invariants().unwrap();
}
