//! Inputs are hostile until checked: garbage is refused and counted without touching the
//! world, duplicates and late packets are ignored, inputs within one tick merge, the fire
//! rate holds however often fire is pressed, and decoding arbitrary bytes never panics.

use std::sync::Arc;

use proptest::prelude::*;
use tickwire_arena::geom::Vec2;
use tickwire_arena::input::{AIM_LIMIT, InputError};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};
use tickwire_wire::{decode_exact, encode_to_vec};

const P: PlayerKey = PlayerKey(7);

fn world() -> World {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let mut world = World::new(map, WorldConfig::default(), 3).unwrap();
    world.join(P).unwrap();
    world.place(P, Vec2::new(10.0, 4.0)).unwrap();
    world
}

fn command(sequence: u16) -> InputCommand {
    InputCommand {
        sequence,
        ..InputCommand::default()
    }
}

#[test]
fn hostile_inputs_are_refused_counted_and_change_nothing() {
    let mut world = world();
    let before = world.checksum();
    let hostile = [
        InputCommand {
            move_x: f32::NAN,
            ..command(1)
        },
        InputCommand {
            move_y: f32::INFINITY,
            ..command(2)
        },
        InputCommand {
            aim: f32::NEG_INFINITY,
            ..command(3)
        },
        InputCommand {
            move_x: 1.01,
            ..command(4)
        },
        InputCommand {
            move_y: -7.0,
            ..command(5)
        },
        InputCommand {
            aim: AIM_LIMIT * 2.0,
            ..command(6)
        },
        InputCommand {
            buttons: 0b1110,
            ..command(7)
        },
    ];
    for input in &hostile {
        let error = world.handle_input(P, input).unwrap_err();
        assert!(error.is_hostile(), "{input:?} gave {error}");
    }
    assert!(matches!(
        world.handle_input(PlayerKey(99), &command(1)),
        Err(InputError::UnknownPlayer(PlayerKey(99)))
    ));
    let stats = *world.input_stats();
    assert_eq!(stats.not_finite, 3);
    assert_eq!(stats.out_of_range, 3);
    assert_eq!(stats.unknown_buttons, 1);
    assert_eq!(stats.unknown_player, 1);
    assert_eq!(stats.hostile(), 7);
    assert_eq!(stats.accepted, 0);

    // Refused inputs never reach the step: nothing moves, nothing fires, no sequence is
    // recorded. (The tick count is part of the checksum, so compare positions instead.)
    world.step(&hostile.iter().map(|input| (P, *input)).collect::<Vec<_>>());
    assert_eq!(
        world.input_stats().hostile(),
        14,
        "step counts its refusals too"
    );
    let player = world.player(P).unwrap();
    assert_eq!(player.position(), Vec2::new(10.0, 4.0));
    assert_eq!(player.last_input_sequence(), None);
    assert!(world.bullets().is_empty());
    assert_ne!(before, world.checksum(), "only the tick moved");
}

#[test]
fn duplicates_and_late_inputs_are_ignored() {
    let mut world = world();
    let right = InputCommand {
        move_x: 1.0,
        ..command(10)
    };
    world.step(&[(P, right)]);
    let after_first = world.player(P).unwrap().position();
    assert_eq!(world.player(P).unwrap().last_input_sequence(), Some(10));
    // A replay of 10 and a late 9 that would walk left: both stale.
    let left_late = InputCommand {
        move_x: -1.0,
        ..command(9)
    };
    let replay = InputCommand {
        move_x: -1.0,
        ..command(10)
    };
    assert!(matches!(
        world.handle_input(P, &left_late),
        Err(InputError::Stale {
            sequence: 9,
            applied: 10
        })
    ));
    assert!(world.handle_input(P, &replay).is_err());
    world.step(&[]);
    let player = world.player(P).unwrap();
    assert!(
        player.position().x > after_first.x,
        "still walking right (last input repeats)"
    );
    assert_eq!(world.input_stats().stale, 2);
    assert_eq!(player.last_input_sequence(), Some(10));
}

#[test]
fn inputs_within_one_tick_merge_and_a_fire_press_is_not_lost() {
    let mut world = world();
    let inputs = [
        (
            P,
            InputCommand {
                buttons: InputCommand::FIRE,
                aim: 1.0,
                ..command(1)
            },
        ),
        (
            P,
            InputCommand {
                move_y: 1.0,
                aim: 0.5,
                ..command(2)
            },
        ),
        (
            P,
            InputCommand {
                move_x: 1.0,
                aim: -0.5,
                ..command(3)
            },
        ),
    ];
    world.step(&inputs);
    let player = world.player(P).unwrap();
    assert_eq!(
        player.last_input_sequence(),
        Some(3),
        "the highest sequence"
    );
    assert_eq!(
        player.movement(),
        Vec2::new(1.0, 0.0),
        "the latest movement wins"
    );
    assert_eq!(player.aim(), -0.5);
    assert!((player.position().x - 10.1).abs() < 1e-4 && player.position().y == 4.0);
    assert_eq!(
        world.bullets().len(),
        1,
        "the press in the first input fired"
    );
    assert_eq!(player.stats().shots, 1);
    let stats = world.input_stats();
    assert_eq!((stats.accepted, stats.merged), (3, 2));
}

#[test]
fn sequences_wrap_around() {
    let mut world = world();
    for sequence in (65530..=65535).chain(0..5) {
        world.step(&[(P, command(sequence))]);
        assert_eq!(
            world.player(P).unwrap().last_input_sequence(),
            Some(sequence)
        );
    }
    assert_eq!(world.input_stats().stale, 0);
    assert_eq!(world.input_stats().accepted, 11);
}

#[test]
fn fire_rate_is_enforced_however_often_fire_is_pressed() {
    let mut world = world();
    let interval = world.config().fire_interval_ticks;
    let ticks = 240u16;
    let mut sequence = 0u16;
    for _ in 0..ticks {
        // A cheating client sends four fire presses per tick.
        let inputs: Vec<_> = (0..4)
            .map(|_| {
                sequence += 1;
                (
                    P,
                    InputCommand {
                        buttons: InputCommand::FIRE,
                        aim: -1.5,
                        ..command(sequence)
                    },
                )
            })
            .collect();
        world.step(&inputs);
    }
    let shots = world.player(P).unwrap().stats().shots;
    let expected = u32::from(ticks).div_ceil(interval);
    assert_eq!(shots, expected, "one shot per {interval} ticks");
    assert_eq!(
        world.input_stats().fire_rate_limited,
        u64::from(u32::from(ticks) - shots),
        "one dropped press per tick fire was held but not ready"
    );
}

proptest! {
    /// Arbitrary bytes decode to a command or an error, never a panic; whatever decodes
    /// re-encodes to the same bytes and has finite, in-range floats. Only undefined button
    /// bits (the wire has 4, one is defined) get past decoding, and validation catches them.
    #[test]
    fn arbitrary_bytes_decode_to_valid_commands_or_errors(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
        if let Ok(command) = decode_exact::<InputCommand>(&bytes) {
            prop_assert_eq!(encode_to_vec(&command).unwrap(), bytes);
            match command.validate() {
                Ok(()) => {}
                Err(InputError::UnknownButtons { buttons }) => {
                    prop_assert!(buttons & !InputCommand::BUTTONS != 0);
                }
                Err(other) => prop_assert!(false, "decoded {command:?} fails with {other}"),
            }
        }
    }

    /// Any command that validates round-trips through the wire onto its grid.
    #[test]
    fn valid_commands_round_trip(
        sequence in any::<u16>(),
        move_x in -1.0f32..=1.0,
        move_y in -1.0f32..=1.0,
        aim in -AIM_LIMIT..=AIM_LIMIT,
        fire in any::<bool>(),
    ) {
        let command = InputCommand { sequence, move_x, move_y, aim, buttons: u8::from(fire) };
        prop_assert_eq!(command.validate(), Ok(()));
        let decoded: InputCommand = decode_exact(&encode_to_vec(&command).unwrap()).unwrap();
        prop_assert_eq!(decoded.sequence, sequence);
        prop_assert!((decoded.move_x - move_x).abs() <= 1.0 / 128.0 + 1e-6);
        prop_assert!((decoded.aim - aim).abs() <= 0.0031 + 1e-6);
        prop_assert_eq!(decoded.fire(), fire);
        prop_assert_eq!(decoded.validate(), Ok(()));
    }
}
