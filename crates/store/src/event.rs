//! What a room tells the store: the events a [`StatWriter`](crate::StatWriter) queues and
//! [`Store::apply`](crate::Store::apply) commits.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A player's id: the server's `PlayerId`, at most `i64::MAX` (the server keeps ids below
/// 2^53 so JavaScript numbers hold them exactly).
pub type PlayerId = u64;

/// Longest display name and room name, in characters (`VARCHAR(64)` on every backend).
pub const MAX_NAME_CHARS: usize = 64;
/// Most outcomes one [`MatchResult`] may carry.
pub const MAX_OUTCOMES: usize = 1024;

/// Milliseconds since the Unix epoch, the store's one time unit.
pub fn unix_ms(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// One thing worth remembering about players, emitted by a room (or the session layer) and
/// committed by the writer in a batch.
///
/// Every total has exactly one source, so nothing is counted twice: a player's kills, deaths,
/// score, play time and match count grow only from [`StatEvent::MatchEnded`] outcomes.
/// An arena room keeps each player's running counters (kills, deaths, score) during the
/// session and reports them once, when the player's session (or the match) ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StatEvent {
    /// A player connected (or renamed): creates the player if new, sets the display name and
    /// moves `last_seen` forward.
    PlayerSeen {
        /// Who.
        player: PlayerId,
        /// Display name, 1 to [`MAX_NAME_CHARS`] characters, no control characters.
        name: String,
        /// When, in Unix milliseconds.
        at_ms: i64,
    },
    /// A match, or one player's session in a drop-in room, ended: one history row, and each
    /// outcome added to its player's totals (`matches` grows by one).
    MatchEnded(MatchResult),
}

/// A finished match (or session) and how each player did in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchResult {
    /// The room it was played in (its id or name), at most [`MAX_NAME_CHARS`] characters.
    pub room: String,
    /// When it started, in Unix milliseconds.
    pub started_ms: i64,
    /// When it ended, in Unix milliseconds; also the players' `last_seen`.
    pub ended_ms: i64,
    /// One per player, each player at most once, at most [`MAX_OUTCOMES`].
    pub outcomes: Vec<Outcome>,
}

/// One player's result in one match; added to the player's totals when committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Who.
    pub player: PlayerId,
    /// Kills in this match.
    pub kills: u32,
    /// Deaths in this match.
    pub deaths: u32,
    /// Score in this match (may be negative if a game takes points away).
    pub score: i64,
    /// Milliseconds played in this match.
    pub play_time_ms: u64,
}

/// Why an event was refused before it was queued: it could never be committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEvent {
    /// The id does not fit a signed 64-bit column.
    #[error("player id {0} exceeds max {max}", max = i64::MAX)]
    PlayerId(u64),
    /// A name is empty, too long or has control characters.
    #[error(
        "{what} must be 1 to {MAX_NAME_CHARS} characters without control characters, got {len} characters"
    )]
    Name {
        /// `"player name"` or `"room"`.
        what: &'static str,
        /// Its length in characters.
        len: usize,
    },
    /// Too many outcomes in one match.
    #[error("match has {0} outcomes, max {MAX_OUTCOMES}")]
    TooManyOutcomes(usize),
    /// The same player appears twice in one match.
    #[error("player {0} appears twice in one match")]
    DuplicatePlayer(u64),
    /// A play time does not fit a signed 64-bit column.
    #[error("play time {0} ms exceeds max {max}", max = i64::MAX)]
    PlayTime(u64),
}

fn check_player(player: PlayerId) -> Result<(), InvalidEvent> {
    if player > i64::MAX as u64 {
        return Err(InvalidEvent::PlayerId(player));
    }
    Ok(())
}

fn check_name(what: &'static str, name: &str) -> Result<(), InvalidEvent> {
    let len = name.chars().count();
    if len == 0 || len > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(InvalidEvent::Name { what, len });
    }
    Ok(())
}

impl StatEvent {
    /// Checks what the database would refuse, so that one bad event can never stall a batch
    /// (and with it every event behind it).
    pub fn validate(&self) -> Result<(), InvalidEvent> {
        match self {
            Self::PlayerSeen { player, name, .. } => {
                check_player(*player)?;
                check_name("player name", name)
            }
            Self::MatchEnded(result) => {
                check_name("room", &result.room)?;
                if result.outcomes.len() > MAX_OUTCOMES {
                    return Err(InvalidEvent::TooManyOutcomes(result.outcomes.len()));
                }
                let mut seen = std::collections::HashSet::with_capacity(result.outcomes.len());
                for outcome in &result.outcomes {
                    check_player(outcome.player)?;
                    if outcome.play_time_ms > i64::MAX as u64 {
                        return Err(InvalidEvent::PlayTime(outcome.play_time_ms));
                    }
                    if !seen.insert(outcome.player) {
                        return Err(InvalidEvent::DuplicatePlayer(outcome.player));
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_value_and_the_limit() {
        let long = StatEvent::PlayerSeen {
            player: 1,
            name: "x".repeat(65),
            at_ms: 0,
        };
        let err = long.validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "player name must be 1 to 64 characters without control characters, got 65 characters"
        );
        let big = StatEvent::PlayerSeen {
            player: u64::MAX,
            name: "a".into(),
            at_ms: 0,
        };
        assert_eq!(big.validate(), Err(InvalidEvent::PlayerId(u64::MAX)));
        let twice = StatEvent::MatchEnded(MatchResult {
            room: "r".into(),
            started_ms: 0,
            ended_ms: 1,
            outcomes: vec![
                Outcome {
                    player: 3,
                    kills: 0,
                    deaths: 0,
                    score: 0,
                    play_time_ms: 0,
                };
                2
            ],
        });
        assert_eq!(twice.validate(), Err(InvalidEvent::DuplicatePlayer(3)));
    }
}
