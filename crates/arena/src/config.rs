//! The game's tunables: [`WorldConfig`], with defaults for a 60 Hz arena.

use crate::movement::{MAX_SUBSTEP, MovementParams};

/// The simulation's tunables. Times are in ticks (so the simulation is exact integer
/// bookkeeping), distances in metres (one tile), speeds in metres per second.
///
/// Public fields with [`Default`]; [`World::new`](crate::World::new) refuses nonsense with a
/// [`ConfigError`] (see [`WorldConfig::validate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WorldConfig {
    /// Ticks per second; the fixed step is `1 / tick_rate_hz` seconds. Default 60.
    pub tick_rate_hz: u32,
    /// Player radius. Default 0.4 m: a player fits through a one-tile gap.
    pub player_radius: f32,
    /// Speed at full input. Default 6 m/s (0.1 m per tick at 60 Hz).
    pub max_speed: f32,
    /// Health at spawn. Default 100.
    pub max_health: u16,
    /// Ticks between two shots of one player. Default 8 (7.5 shots/s at 60 Hz).
    pub fire_interval_ticks: u32,
    /// Bullet speed. Default 30 m/s; swept, so any speed is safe from tunnelling.
    pub bullet_speed: f32,
    /// Bullet radius. Default 0.1 m.
    pub bullet_radius: f32,
    /// Health a hit takes. Default 20 (five hits kill).
    pub bullet_damage: u16,
    /// Distance after which a bullet vanishes. Default 30 m.
    pub bullet_range: f32,
    /// Ticks a dead player waits before respawning. Default 180 (3 s at 60 Hz).
    pub respawn_delay_ticks: u32,
    /// Spawns land up to this far from the spawn point on each axis, so players joining
    /// together do not start stacked. Default 0.5 m.
    pub spawn_jitter: f32,
    /// Side of a player grid cell. Default 1 m: a player's neighbourhood (two radii) spans
    /// at most four cells, and a packed crowd puts few players in each.
    pub grid_cell_size: f32,
    /// Fraction of an overlap between two players removed per tick. Default 0.5: crowds
    /// relax over a few ticks instead of jittering.
    pub separation_stiffness: f32,
    /// Most a player is pushed by others in one tick. Default 0.2 m; at most
    /// [`MAX_SUBSTEP`] so that pushes cannot tunnel through walls.
    pub max_push: f32,
    /// Ticks without an input after which a player stops moving. Default 30 (0.5 s): a lost
    /// packet repeats the last movement, a lost connection does not walk on forever.
    pub idle_stop_ticks: u32,
    /// Score for a kill. Default 10.
    pub score_per_kill: u32,
    /// Score for a hit. Default 1.
    pub score_per_hit: u32,
    /// Ticks between two warps of one player ([`InputCommand::WARP`](crate::InputCommand::WARP):
    /// through the nearest teleport pad from anywhere). Default 600 (10 s at 60 Hz): a way
    /// to rejoin the action, not a way to dodge every fight.
    pub warp_cooldown_ticks: u32,
}

impl Default for WorldConfig {
    fn default() -> Self {
        Self {
            tick_rate_hz: 60,
            player_radius: 0.4,
            max_speed: 6.0,
            max_health: 100,
            fire_interval_ticks: 8,
            bullet_speed: 30.0,
            bullet_radius: 0.1,
            bullet_damage: 20,
            bullet_range: 30.0,
            respawn_delay_ticks: 180,
            spawn_jitter: 0.5,
            grid_cell_size: 1.0,
            separation_stiffness: 0.5,
            max_push: 0.2,
            idle_stop_ticks: 30,
            score_per_kill: 10,
            score_per_hit: 1,
            warp_cooldown_ticks: 600,
        }
    }
}

/// A [`WorldConfig`] field with a value the simulation cannot run with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("world config: {field} {value}: {reason}")]
pub struct ConfigError {
    /// The field.
    pub field: &'static str,
    /// Its value, printed.
    pub value: String,
    /// The rule it breaks.
    pub reason: &'static str,
}

/// Longest distance a player may move in one tick; keeps the sub-step count bounded.
const MAX_REACH_PER_TICK: f32 = 10.0;

impl WorldConfig {
    /// Seconds per tick.
    pub fn dt(&self) -> f32 {
        1.0 / self.tick_rate_hz as f32
    }

    /// Ticks a bullet lives: its range over its distance per tick, rounded up.
    pub fn bullet_lifetime_ticks(&self) -> u32 {
        (self.bullet_range / (self.bullet_speed * self.dt())).ceil() as u32
    }

    /// Most bullets one player can have in flight at once.
    pub fn bullets_per_player(&self) -> usize {
        self.bullet_lifetime_ticks()
            .div_ceil(self.fire_interval_ticks) as usize
    }

    /// The movement parameters a client needs to predict its player on a map of `bounds`.
    pub fn movement_params(&self, bounds: crate::geom::Vec2) -> MovementParams {
        MovementParams {
            radius: self.player_radius,
            max_speed: self.max_speed,
            dt: self.dt(),
            bounds,
        }
    }

    /// Checks every field against what the simulation relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn check(
            ok: bool,
            field: &'static str,
            value: impl ToString,
            reason: &'static str,
        ) -> Result<(), ConfigError> {
            if ok {
                Ok(())
            } else {
                Err(ConfigError {
                    field,
                    value: value.to_string(),
                    reason,
                })
            }
        }
        let positive = |value: f32| value.is_finite() && value > 0.0;
        check(
            (1..=128).contains(&self.tick_rate_hz),
            "tick_rate_hz",
            self.tick_rate_hz,
            "must be 1 to 128",
        )?;
        check(
            positive(self.player_radius) && self.player_radius < 0.5,
            "player_radius",
            self.player_radius,
            "must be above 0 and below 0.5 m (a player must fit through a one-tile gap)",
        )?;
        check(
            positive(self.max_speed) && self.max_speed * self.dt() <= MAX_REACH_PER_TICK,
            "max_speed",
            self.max_speed,
            "must be positive and at most 10 m per tick",
        )?;
        check(
            self.max_health > 0,
            "max_health",
            self.max_health,
            "must be at least 1",
        )?;
        check(
            self.fire_interval_ticks > 0,
            "fire_interval_ticks",
            self.fire_interval_ticks,
            "must be at least 1",
        )?;
        check(
            positive(self.bullet_speed),
            "bullet_speed",
            self.bullet_speed,
            "must be positive",
        )?;
        check(
            positive(self.bullet_radius) && self.bullet_radius < self.player_radius,
            "bullet_radius",
            self.bullet_radius,
            "must be positive and below the player radius",
        )?;
        check(
            self.bullet_damage > 0,
            "bullet_damage",
            self.bullet_damage,
            "must be at least 1",
        )?;
        check(
            positive(self.bullet_range) && self.bullet_lifetime_ticks() <= 60 * 128,
            "bullet_range",
            self.bullet_range,
            "must be positive and reached within 60 s",
        )?;
        check(
            (0.0..=1.0).contains(&self.spawn_jitter),
            "spawn_jitter",
            self.spawn_jitter,
            "must be 0 to 1 m",
        )?;
        check(
            positive(self.grid_cell_size) && self.grid_cell_size >= 2.0 * self.player_radius,
            "grid_cell_size",
            self.grid_cell_size,
            "must be at least a player's diameter",
        )?;
        check(
            positive(self.separation_stiffness) && self.separation_stiffness <= 1.0,
            "separation_stiffness",
            self.separation_stiffness,
            "must be above 0 and at most 1",
        )?;
        check(
            positive(self.max_push) && self.max_push <= MAX_SUBSTEP,
            "max_push",
            self.max_push,
            "must be above 0 and at most MAX_SUBSTEP (0.25 m), or pushes could tunnel through walls",
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_derive_sensible_figures() {
        let config = WorldConfig::default();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.bullet_lifetime_ticks(), 60);
        assert_eq!(config.bullets_per_player(), 8);
    }

    #[test]
    fn nonsense_is_refused_with_the_field_named() {
        let error = WorldConfig {
            max_push: 1.0,
            ..WorldConfig::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(error.field, "max_push");
        assert!(
            error.to_string().starts_with("world config: max_push 1:"),
            "{error}"
        );
        for broken in [
            WorldConfig {
                tick_rate_hz: 0,
                ..WorldConfig::default()
            },
            WorldConfig {
                player_radius: f32::NAN,
                ..WorldConfig::default()
            },
            WorldConfig {
                max_speed: 1000.0,
                ..WorldConfig::default()
            },
            WorldConfig {
                bullet_radius: 0.5,
                ..WorldConfig::default()
            },
            WorldConfig {
                grid_cell_size: 0.1,
                ..WorldConfig::default()
            },
            WorldConfig {
                spawn_jitter: -1.0,
                ..WorldConfig::default()
            },
        ] {
            assert!(broken.validate().is_err(), "{broken:?}");
        }
    }
}
