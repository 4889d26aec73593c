//! Scenarios: what the bots do once connected. A scenario names the room kind the bots
//! matchmake into, how many bots and rooms, and what each bot sends, how often, on which
//! channel; the engine does the rest (connecting, pacing, measuring).
//!
//! The relay scenarios are [`RelayScenario`]s. The arena scenarios (`hobo`, `teleport`,
//! `arena`) will be other implementations of [`Scenario`] once the arena's snapshot format
//! lands: they will decode snapshots in [`Scenario::on_message`] instead of counting stamped
//! messages, which is why the trait keeps the per-message hook.

use rand::Rng;
use rand::rngs::SmallRng;

use crate::stamp::STAMP_BYTES;

/// What a scenario tells the engine.
pub trait Scenario: Send + Sync + 'static {
    /// The scenario's name (`sfs`, `nettest`).
    fn name(&self) -> &str;
    /// The room kind bots matchmake into.
    fn room_kind(&self) -> &str;
    /// Bots in the run.
    fn players(&self) -> usize;
    /// Rooms the bots should fill (the server's capacity for the kind decides; the engine
    /// reports what it got).
    fn rooms(&self) -> usize;
    /// The channel each bot sends on (0 reliable, 1 unreliable, 2 unreliable-sequenced).
    fn channel(&self) -> u8;
    /// Messages per second each bot sends.
    fn rate_hz(&self) -> f64;
    /// Appends the message body after the stamp.
    fn write_body(&self, rng: &mut SmallRng, body: &mut Vec<u8>);
    /// How many members receive one member's message in a room of `members` bots.
    fn recipients(&self, members: usize) -> usize;
    /// Whether a message the scenario did not stamp is an error (relay rooms send nothing
    /// of their own) or expected traffic (an arena's snapshots).
    fn on_message(&self, _message: &[u8]) -> Unstamped {
        Unstamped::Unexpected
    }
}

/// What a message without a bot's stamp is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unstamped {
    /// Counted as a foreign message.
    Unexpected,
    /// Part of the scenario (consumed by it).
    Expected,
}

/// What a relay bot's message carries after its stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Zero bytes up to this total message size (at least the stamp).
    Padded(usize),
    /// One random sentence of 4 to 12 common words.
    Sentence,
}

/// A `relay` room scenario: `rooms × players_per_room` bots, each sending `rate_hz` stamped
/// messages a second on `channel`; the room forwards each to every other member.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayScenario {
    /// `sfs` or `nettest` (or any name for a custom shape).
    pub name: String,
    /// Rooms.
    pub rooms: usize,
    /// Bots per room.
    pub players_per_room: usize,
    /// Messages per second per bot.
    pub rate_hz: f64,
    /// Channel.
    pub channel: u8,
    /// Message body.
    pub body: Body,
}

impl RelayScenario {
    /// Seed 001 (SmartFoxServer 2X's stress test): 138 rooms × 16 players, each sending 30
    /// messages a second on the unreliable channel, every message to every other member.
    pub fn sfs() -> Self {
        Self {
            name: "sfs".into(),
            rooms: 138,
            players_per_room: 16,
            rate_hz: 30.0,
            channel: 1,
            body: Body::Padded(32),
        }
    }

    /// Seed 004 (NetTest's chat storm): 300 players in one room, each saying one random
    /// sentence a second on the reliable channel; every line to every other member.
    pub fn nettest() -> Self {
        Self {
            name: "nettest".into(),
            rooms: 1,
            players_per_room: 300,
            rate_hz: 1.0,
            channel: 0,
            body: Body::Sentence,
        }
    }

    /// The scenario named `name` with its default shape.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "sfs" => Some(Self::sfs()),
            "nettest" => Some(Self::nettest()),
            _ => None,
        }
    }
}

/// Words the chat storm's sentences are made of.
const WORDS: [&str; 32] = [
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "rush", "mid", "push", "now",
    "gg", "well", "played", "who", "has", "the", "flag", "behind", "you", "heal", "me", "please",
    "nice", "shot", "one", "more", "round", "ready", "wait", "go",
];

impl Scenario for RelayScenario {
    fn name(&self) -> &str {
        &self.name
    }

    fn room_kind(&self) -> &str {
        "relay"
    }

    fn players(&self) -> usize {
        self.rooms * self.players_per_room
    }

    fn rooms(&self) -> usize {
        self.rooms
    }

    fn channel(&self) -> u8 {
        self.channel
    }

    fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    fn write_body(&self, rng: &mut SmallRng, body: &mut Vec<u8>) {
        match self.body {
            Body::Padded(size) => body.resize(size.max(STAMP_BYTES), 0),
            Body::Sentence => {
                let words = rng.random_range(4..=12);
                for index in 0..words {
                    if index > 0 {
                        body.push(b' ');
                    }
                    body.extend_from_slice(WORDS[rng.random_range(0..WORDS.len())].as_bytes());
                }
                body.push(b'.');
            }
        }
    }

    fn recipients(&self, members: usize) -> usize {
        members.saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn the_seed_scenarios_have_their_seeds_shapes() {
        let sfs = RelayScenario::sfs();
        assert_eq!(
            (sfs.players(), sfs.channel(), sfs.rate_hz()),
            (2208, 1, 30.0)
        );
        let nettest = RelayScenario::nettest();
        assert_eq!((nettest.players(), nettest.channel()), (300, 0));
        assert_eq!(nettest.recipients(300), 299);
        assert!(RelayScenario::by_name("hobo").is_none());
    }

    #[test]
    fn bodies_follow_the_stamp() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut body = vec![0; STAMP_BYTES];
        RelayScenario::sfs().write_body(&mut rng, &mut body);
        assert_eq!(body.len(), 32);
        let mut line = vec![0; STAMP_BYTES];
        RelayScenario::nettest().write_body(&mut rng, &mut line);
        let text = std::str::from_utf8(&line[STAMP_BYTES..]).unwrap();
        assert!(
            text.ends_with('.') && text.split(' ').count() >= 4,
            "{text:?}"
        );
    }
}
