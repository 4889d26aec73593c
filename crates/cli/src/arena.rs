//! The arena room kind in `tickwire serve`: its `[arena]` settings, the map it loads, and
//! the bridge from its stat events to the store's write-behind queue.

use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tickwire_arena::room::{ArenaConfig, ArenaRoomFactory, StatEvent, StatSink};
use tickwire_arena::{ArenaMap, BuiltinMap};
use tickwire_store::{MatchResult, Outcome, StatWriter};

/// The `[arena]` section of `tickwire.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArenaSettings {
    /// A built-in map (`courtyard`, 40 × 30 m for a few players; `metropolis`, 400 × 400 m
    /// for thousands) or the path of a Tiled `.tmx` file.
    pub map: String,
    /// The first room's random seed (room n gets seed + n), for reproducible games; unset,
    /// a random one at start.
    pub seed: Option<u64>,
    /// A player gets a snapshot every this many ticks (1 to 60; default 1, every tick).
    /// Above 1 a big room spreads its players' snapshots over the ticks; a player who
    /// teleported or respawned still gets one right after that tick.
    pub snapshot_interval_ticks: u32,
    /// Ticks between two warps of one player (through the nearest teleport pad, from
    /// anywhere). Default 600 (10 s at 60 Hz).
    pub warp_cooldown_ticks: u32,
}

impl Default for ArenaSettings {
    fn default() -> Self {
        let config = ArenaConfig::default();
        Self {
            map: "courtyard".into(),
            seed: None,
            snapshot_interval_ticks: config.snapshot_interval_ticks,
            warp_cooldown_ticks: config.world.warp_cooldown_ticks,
        }
    }
}

impl ArenaSettings {
    /// Loads the map: a built-in by name, else a `.tmx` file. Errors name the file and what
    /// is wrong with it.
    pub fn load_map(&self) -> anyhow::Result<ArenaMap> {
        let builtin = BuiltinMap::ALL
            .into_iter()
            .find(|map| map.file_name().trim_end_matches(".tmx") == self.map);
        let map = match builtin {
            Some(builtin) => builtin.load(),
            None => ArenaMap::load(&self.map),
        };
        map.with_context(|| format!("arena.map = {:?}", self.map))
    }

    /// The arena's room factory, its stats going to `writer` when persistence is on.
    pub fn factory(&self, writer: Option<StatWriter>) -> anyhow::Result<ArenaRoomFactory> {
        self.factory_with_sink(writer.map(|writer| Arc::new(StoreSink::new(writer)) as _))
    }

    /// The arena's room factory, its stats going to `sink` (none: dropped).
    pub fn factory_with_sink(
        &self,
        sink: Option<Arc<dyn StatSink>>,
    ) -> anyhow::Result<ArenaRoomFactory> {
        let map = Arc::new(self.load_map()?);
        let seed = self.seed.unwrap_or_else(rand::random);
        let mut config = ArenaConfig {
            snapshot_interval_ticks: self.snapshot_interval_ticks,
            ..ArenaConfig::default()
        };
        config.world.warp_cooldown_ticks = self.warp_cooldown_ticks;
        let factory =
            ArenaRoomFactory::new(map, config, seed).context("the arena's configuration")?;
        Ok(match sink {
            Some(sink) => factory.with_stat_sink(sink),
            None => factory,
        })
    }
}

/// Hands the arena's stat events to the store's queue without ever waiting: a full queue
/// refuses the event, and the writer counts it (`tickwire_store_rejected_full_total`).
#[derive(Debug, Clone)]
pub struct StoreSink {
    writer: StatWriter,
}

impl StoreSink {
    /// A sink into `writer`'s queue.
    pub fn new(writer: StatWriter) -> Self {
        Self { writer }
    }
}

impl StatSink for StoreSink {
    fn record(&self, event: StatEvent) {
        if let Some(stored) = to_store(event, SystemTime::now()) {
            // Refusals are counted by the writer; the room's tick goes on.
            let _ = self.writer.try_record(stored);
        }
    }
}

/// The store's event for an arena event at `now`: a join names the player, a session's end
/// is one match in a drop-in room. Kills are not stored one by one: the session's totals
/// carry them, so a kill is never counted twice.
fn to_store(event: StatEvent, now: SystemTime) -> Option<tickwire_store::StatEvent> {
    let now_ms = tickwire_store::unix_ms(now);
    match event {
        StatEvent::Joined { player, name, .. } => Some(tickwire_store::StatEvent::PlayerSeen {
            player: player.0,
            name,
            at_ms: now_ms,
        }),
        StatEvent::SessionEnded {
            room,
            player,
            kills,
            deaths,
            score,
            duration,
        } => {
            let played_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            Some(tickwire_store::StatEvent::MatchEnded(MatchResult {
                room: format!("arena-{room}"),
                started_ms: now_ms.saturating_sub(i64::try_from(played_ms).unwrap_or(i64::MAX)),
                ended_ms: now_ms,
                outcomes: vec![Outcome {
                    player: player.0,
                    kills,
                    deaths,
                    score: i64::from(score),
                    play_time_ms: played_ms,
                }],
            }))
        }
        StatEvent::Kill { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use tickwire_server::room::PlayerId;
    use tickwire_server::shard::RoomId;

    use super::*;

    #[test]
    fn a_session_end_becomes_one_match_with_the_sessions_totals() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let stored = to_store(
            StatEvent::SessionEnded {
                room: RoomId(7),
                player: PlayerId(42),
                kills: 3,
                deaths: 1,
                score: 30,
                duration: Duration::from_secs(90),
            },
            now,
        );
        assert_eq!(
            stored,
            Some(tickwire_store::StatEvent::MatchEnded(MatchResult {
                room: "arena-7".into(),
                started_ms: 910_000,
                ended_ms: 1_000_000,
                outcomes: vec![Outcome {
                    player: 42,
                    kills: 3,
                    deaths: 1,
                    score: 30,
                    play_time_ms: 90_000,
                }],
            }))
        );
        assert_eq!(
            to_store(
                StatEvent::Kill {
                    killer: PlayerId(1),
                    victim: PlayerId(2)
                },
                now
            ),
            None,
            "kills reach the store through the session's totals only"
        );
    }

    #[test]
    fn a_snapshot_interval_the_arena_refuses_stops_the_start() {
        let settings = ArenaSettings {
            snapshot_interval_ticks: 0,
            ..ArenaSettings::default()
        };
        let error = format!("{:#}", settings.factory(None).unwrap_err());
        assert!(error.contains("snapshot interval 0"), "{error}");
    }

    #[test]
    fn maps_are_built_ins_by_name_or_files_and_a_bad_one_is_named() {
        for name in ["courtyard", "metropolis"] {
            let settings = ArenaSettings {
                map: name.into(),
                seed: Some(1),
                ..ArenaSettings::default()
            };
            settings.load_map().unwrap();
        }
        let missing = ArenaSettings {
            map: "/nowhere/castle.tmx".into(),
            ..ArenaSettings::default()
        };
        let error = format!("{:#}", missing.load_map().unwrap_err());
        assert!(
            error.contains("arena.map") && error.contains("castle.tmx"),
            "{error}"
        );
    }
}
