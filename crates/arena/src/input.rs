//! What a client sends each tick: an [`InputCommand`] (intent, never state), how the server
//! checks it, and how several arriving within one tick are merged.
//!
//! # Checks
//!
//! A command decoded from the wire is already within its declared bounds; commands built
//! in process (bots, tests, a future transport) may not be, so the world checks every one:
//! NaN or infinite values, values outside their range and undefined button bits are refused
//! ([`InputError`]) and counted ([`InputStats`]). A movement vector longer than 1 (a
//! diagonal `(1, 1)`) is legal and capped to full speed by the movement step; the fire rate is
//! enforced when firing.
//!
//! # Merging (one tick, several commands)
//!
//! Commands carry a wrapping `u16` sequence. Between two steps a player's commands merge:
//!
//! - a sequence not newer than the last one *applied* by a step is a duplicate or arrived too
//!   late: ignored and counted as stale;
//! - the newest sequence seen supplies movement and aim (latest intent wins);
//! - a fire or warp press in *any* non-stale command counts (once, rate permitting), so a
//!   press is not lost when a newer command without it arrives in the same tick;
//! - the step records the newest sequence as applied; snapshots carry it so the client can
//!   drop the inputs the server has seen and replay the rest (reconciliation).
//!
//! Newer-than uses serial-number arithmetic (RFC 1982): `a` is newer than `b` when
//! `a - b (mod 2^16)` is in `1..2^15`, so the sequence wraps every 18 minutes at 60 Hz
//! without a hitch.

use std::f64::consts::PI;

use tickwire_proto::reliable::sequence_newer;
use tickwire_wire::{Decode, Describe, Encode};

use crate::geom::Vec2;
use crate::player::PlayerKey;

/// Resolution of the movement components on the wire: 1/64, so `-1..=1` takes 8 bits and
/// every value is exact in `f32`.
pub const MOVE_RESOLUTION: f64 = 1.0 / 64.0;

/// Resolution of the aim angle on the wire: 1023 steps around the circle (10 bits), about
/// 0.35°.
pub const AIM_RESOLUTION: f64 = 2.0 * PI / 1023.0;

/// The largest aim angle (and minus the smallest): π rounded to `f32`.
pub const AIM_LIMIT: f32 = std::f32::consts::PI;

/// One client input, sent every tick (46 bits, 6 bytes on the wire).
///
/// ```
/// use tickwire_arena::input::InputCommand;
/// use tickwire_wire::{decode_exact, encode_to_vec};
///
/// let input = InputCommand { sequence: 7, move_x: 1.0, move_y: -0.5, aim: 0.8, buttons: InputCommand::FIRE };
/// let bytes = encode_to_vec(&input)?;
/// assert_eq!(bytes.len(), 6);
/// let decoded: InputCommand = decode_exact(&bytes)?;
/// // Movement multiples of 1/64 are exact; the aim lands on its grid.
/// assert_eq!((decoded.move_x, decoded.move_y), (1.0, -0.5));
/// assert!((decoded.aim - 0.8).abs() < 0.004);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default, Encode, Decode, Describe)]
pub struct InputCommand {
    /// Increments by one per command, wrapping.
    pub sequence: u16,
    /// Rightward intent in `-1..=1`; `(move_x, move_y)` longer than 1 counts as 1.
    #[wire(quantize(min = -1.0, max = 1.0, resolution = MOVE_RESOLUTION))]
    pub move_x: f32,
    /// Downward intent in `-1..=1`.
    #[wire(quantize(min = -1.0, max = 1.0, resolution = MOVE_RESOLUTION))]
    pub move_y: f32,
    /// Where the player aims, radians from `+x` towards `+y`, in `-π..=π`.
    #[wire(quantize(min = -PI, max = PI, resolution = AIM_RESOLUTION))]
    pub aim: f32,
    /// Buttons held, one bit each ([`InputCommand::FIRE`], [`InputCommand::WARP`]); 4 bits
    /// on the wire.
    #[wire(bits = 4)]
    pub buttons: u8,
}

impl InputCommand {
    /// Button bit: fire.
    pub const FIRE: u8 = 1;
    /// Button bit: warp through the nearest teleport pad, from anywhere, once the warp has
    /// cooled down ([`WorldConfig::warp_cooldown_ticks`](crate::WorldConfig::warp_cooldown_ticks)).
    pub const WARP: u8 = 2;
    /// Every defined button bit.
    pub const BUTTONS: u8 = Self::FIRE | Self::WARP;

    /// The movement intent as a vector.
    pub fn movement(&self) -> Vec2 {
        Vec2::new(self.move_x, self.move_y)
    }

    /// Whether fire is held.
    pub fn fire(&self) -> bool {
        self.buttons & Self::FIRE != 0
    }

    /// Whether warp is held.
    pub fn warp(&self) -> bool {
        self.buttons & Self::WARP != 0
    }

    /// Refuses values no honest client sends (see the module docs).
    pub fn validate(&self) -> Result<(), InputError> {
        for (field, value, limit) in [
            ("move_x", self.move_x, 1.0),
            ("move_y", self.move_y, 1.0),
            ("aim", self.aim, AIM_LIMIT),
        ] {
            if !value.is_finite() {
                return Err(InputError::NotFinite { field, value });
            }
            if !(-limit..=limit).contains(&value) {
                return Err(InputError::OutOfRange {
                    field,
                    value,
                    min: -limit,
                    max: limit,
                });
            }
        }
        if self.buttons & !Self::BUTTONS != 0 {
            return Err(InputError::UnknownButtons {
                buttons: self.buttons,
            });
        }
        Ok(())
    }
}

/// Why the world did not take an input. Every case is counted in [`InputStats`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum InputError {
    /// No player with this key is in the world.
    #[error("no player {0} in the world")]
    UnknownPlayer(PlayerKey),
    /// The sequence is not newer than the last one applied: a duplicate or a late arrival.
    #[error("input sequence {sequence} is not newer than {applied}, the last applied")]
    Stale {
        /// The command's sequence.
        sequence: u16,
        /// The last sequence a step applied.
        applied: u16,
    },
    /// A float field is NaN or infinite.
    #[error("input {field} is {value}, not a finite number")]
    NotFinite {
        /// Which field.
        field: &'static str,
        /// What it held.
        value: f32,
    },
    /// A float field is outside its range.
    #[error("input {field} {value} is outside {min}..={max}")]
    OutOfRange {
        /// Which field.
        field: &'static str,
        /// What it held.
        value: f32,
        /// Smallest allowed.
        min: f32,
        /// Largest allowed.
        max: f32,
    },
    /// Button bits no button is defined for.
    #[error("input buttons {buttons:#010b} set undefined bits")]
    UnknownButtons {
        /// The bits sent.
        buttons: u8,
    },
}

impl InputError {
    /// Whether the input could only come from a broken or hostile client (not a late or
    /// duplicated packet, nor a player who just left).
    pub fn is_hostile(&self) -> bool {
        matches!(
            self,
            InputError::NotFinite { .. }
                | InputError::OutOfRange { .. }
                | InputError::UnknownButtons { .. }
        )
    }
}

/// Per-world input counters; they only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InputStats {
    /// Commands taken (merged into the player's next step).
    pub accepted: u64,
    /// Accepted commands that arrived when the player already had one waiting for the step.
    pub merged: u64,
    /// Duplicates and late arrivals, ignored.
    pub stale: u64,
    /// For a player not in the world.
    pub unknown_player: u64,
    /// NaN or infinite values, refused.
    pub not_finite: u64,
    /// Values outside their range, refused.
    pub out_of_range: u64,
    /// Undefined button bits, refused.
    pub unknown_buttons: u64,
    /// Fire presses ignored because the player's weapon was not ready.
    pub fire_rate_limited: u64,
    /// Warp presses ignored because the player's warp was cooling down.
    pub warp_rate_limited: u64,
}

impl InputStats {
    /// Counts a refusal.
    pub(crate) fn count(&mut self, error: &InputError) {
        let counter = match error {
            InputError::UnknownPlayer(_) => &mut self.unknown_player,
            InputError::Stale { .. } => &mut self.stale,
            InputError::NotFinite { .. } => &mut self.not_finite,
            InputError::OutOfRange { .. } => &mut self.out_of_range,
            InputError::UnknownButtons { .. } => &mut self.unknown_buttons,
        };
        *counter += 1;
    }

    /// All refused commands that only a broken or hostile client sends.
    pub fn hostile(&self) -> u64 {
        self.not_finite + self.out_of_range + self.unknown_buttons
    }
}

/// One player's inputs between two steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingInput {
    /// The newest sequence applied by a step; `None` until the first.
    applied: Option<u16>,
    /// The newest command since the last step.
    newest: Option<InputCommand>,
    /// The buttons any command since the last step held.
    pressed: u8,
}

/// What a step takes from a player's pending inputs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TakenInput {
    /// The newest command, if any arrived since the last step.
    pub(crate) newest: Option<InputCommand>,
    /// The buttons any of them held.
    pub(crate) pressed: u8,
}

impl PendingInput {
    /// Merges a validated command; returns whether another was already waiting.
    pub(crate) fn merge(&mut self, command: &InputCommand) -> Result<bool, InputError> {
        if let Some(applied) = self.applied
            && !sequence_newer(command.sequence, applied)
        {
            return Err(InputError::Stale {
                sequence: command.sequence,
                applied,
            });
        }
        self.pressed |= command.buttons;
        let waiting = self.newest.is_some();
        match &mut self.newest {
            Some(newest) if !sequence_newer(command.sequence, newest.sequence) => {}
            slot => *slot = Some(*command),
        }
        Ok(waiting)
    }

    /// Hands the merged inputs to the step and records the newest sequence as applied.
    pub(crate) fn take(&mut self) -> TakenInput {
        let taken = TakenInput {
            newest: self.newest.take(),
            pressed: std::mem::take(&mut self.pressed),
        };
        if let Some(newest) = taken.newest {
            self.applied = Some(newest.sequence);
        }
        taken
    }

    /// The newest sequence a step applied.
    pub(crate) fn applied(&self) -> Option<u16> {
        self.applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwire_wire::{bit_len, decode_exact, encode_to_vec};

    fn command(sequence: u16, move_x: f32, fire: bool) -> InputCommand {
        InputCommand {
            sequence,
            move_x,
            buttons: if fire { InputCommand::FIRE } else { 0 },
            ..InputCommand::default()
        }
    }

    #[test]
    fn wire_size_and_round_trip() {
        let input = InputCommand {
            sequence: 65535,
            move_x: -1.0,
            move_y: 0.015625,
            aim: -AIM_LIMIT,
            buttons: InputCommand::FIRE,
        };
        assert_eq!(bit_len(&input).unwrap(), 46);
        let decoded: InputCommand = decode_exact(&encode_to_vec(&input).unwrap()).unwrap();
        assert_eq!(decoded.move_x, -1.0);
        assert_eq!(decoded.move_y, 0.015625, "multiples of 1/64 are exact");
        assert_eq!(decoded.sequence, 65535);
        assert!((decoded.aim + AIM_LIMIT).abs() < 1e-6);
        let aim = InputCommand {
            aim: AIM_LIMIT,
            ..input
        };
        assert!(encode_to_vec(&aim).is_ok(), "π itself encodes");
    }

    #[test]
    fn validation_refuses_garbage_and_accepts_diagonals() {
        let ok = InputCommand {
            move_x: 1.0,
            move_y: 1.0,
            aim: 3.0,
            ..InputCommand::default()
        };
        assert_eq!(ok.validate(), Ok(()));
        let bad = [
            InputCommand {
                move_x: f32::NAN,
                ..ok
            },
            InputCommand {
                move_y: f32::NEG_INFINITY,
                ..ok
            },
            InputCommand { move_x: 1.5, ..ok },
            InputCommand { aim: 4.0, ..ok },
            InputCommand {
                buttons: 0b1000,
                ..ok
            },
        ];
        let errors: Vec<InputError> = bad.iter().map(|c| c.validate().unwrap_err()).collect();
        assert!(matches!(
            errors[0],
            InputError::NotFinite {
                field: "move_x",
                ..
            }
        ));
        assert!(matches!(
            errors[1],
            InputError::NotFinite {
                field: "move_y",
                ..
            }
        ));
        assert!(matches!(
            errors[2],
            InputError::OutOfRange {
                field: "move_x",
                ..
            }
        ));
        assert!(matches!(
            errors[3],
            InputError::OutOfRange { field: "aim", .. }
        ));
        assert!(matches!(
            errors[4],
            InputError::UnknownButtons { buttons: 8 }
        ));
        assert!(errors.iter().all(InputError::is_hostile));
        assert_eq!(errors[2].to_string(), "input move_x 1.5 is outside -1..=1");
    }

    #[test]
    fn newest_movement_wins_and_any_fire_press_counts() {
        let mut pending = PendingInput::default();
        assert_eq!(pending.merge(&command(1, 0.25, true)), Ok(false));
        assert_eq!(pending.merge(&command(3, 0.75, false)), Ok(true));
        // 2 arrives after 3: newer than what was applied, so its press counts, but its
        // movement is older than 3's.
        assert_eq!(pending.merge(&command(2, -1.0, false)), Ok(true));
        let taken = pending.take();
        assert_eq!(taken.newest.unwrap().sequence, 3);
        assert_eq!(taken.newest.unwrap().move_x, 0.75);
        assert_eq!(taken.pressed, InputCommand::FIRE);
        assert_eq!(pending.applied(), Some(3));
        let taken = pending.take();
        assert!(taken.newest.is_none() && taken.pressed == 0, "nothing new");
        assert_eq!(pending.applied(), Some(3), "kept across empty ticks");
    }

    #[test]
    fn duplicates_and_late_arrivals_are_stale() {
        let mut pending = PendingInput::default();
        pending.merge(&command(65534, 0.0, false)).unwrap();
        pending.take();
        for late in [65534, 65000, 40000] {
            assert_eq!(
                pending.merge(&command(late, 0.0, true)),
                Err(InputError::Stale {
                    sequence: late,
                    applied: 65534
                })
            );
        }
        assert!(pending.merge(&command(1, 0.0, false)).is_ok(), "wrapped");
        assert!(pending.take().pressed == 0, "stale presses are not merged");
    }
}
