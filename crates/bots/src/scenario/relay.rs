//! The relay scenarios (seeds 001 and 004): bots in `relay` rooms, each sending stamped
//! messages on a fixed schedule; the room forwards each to every other member, and every
//! member counts what it got from whom ([`SeqWindow`] per member) and how late.

use bytes::Bytes;
use rand::Rng;
use rand::rngs::SmallRng;

use super::{BotCx, BotLogic, Outbox, Scenario};
use crate::plan::Plan;
use crate::stamp::{STAMP_BYTES, Stamp};
use crate::tally::SeqWindow;

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

impl Body {
    /// Appends the message body after the stamp.
    fn write(self, rng: &mut SmallRng, body: &mut Vec<u8>) {
        match self {
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
}

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

    fn validate(&self) -> Result<(), String> {
        if !(self.rate_hz > 0.0 && self.rate_hz <= 1000.0) {
            return Err(format!(
                "rate {} per second is outside (0, 1000]",
                self.rate_hz
            ));
        }
        if self.channel > 2 {
            return Err(format!("channel {} is not 0, 1 or 2", self.channel));
        }
        Ok(())
    }

    fn bot(&self, bot: u32) -> Box<dyn BotLogic> {
        Box::new(RelayBot {
            id: bot,
            channel: self.channel,
            body: self.body,
            next_send_ns: u64::MAX,
            period_ns: (1e9 / self.rate_hz) as u64,
            send_end_ns: 0,
            recipients: 0,
            seq: 0,
            seen: Box::new([]),
        })
    }
}

/// One relay bot: its schedule, and per member of its room the sequence numbers seen.
struct RelayBot {
    id: u32,
    channel: u8,
    body: Body,
    next_send_ns: u64,
    period_ns: u64,
    send_end_ns: u64,
    /// Members each of this bot's messages should reach.
    recipients: u32,
    seq: u32,
    seen: Box<[SeqWindow]>,
}

impl BotLogic for RelayBot {
    fn start(&mut self, plan: &Plan, rng: &mut SmallRng) {
        // A random phase within one period, then a fixed period: no drift, no bunching.
        self.next_send_ns = plan.start_ns() + rng.random_range(0..self.period_ns.max(1));
        self.send_end_ns = plan.send_end_ns();
        let members = plan.room_size_of(self.id);
        self.recipients = members.saturating_sub(1) as u32;
        self.seen = vec![SeqWindow::default(); members].into_boxed_slice();
    }

    fn next_send_ns(&self) -> u64 {
        if self.next_send_ns < self.send_end_ns {
            self.next_send_ns
        } else {
            u64::MAX
        }
    }

    fn send_due(&mut self, now_ns: u64, cx: &mut BotCx<'_>, out: &mut dyn Outbox) {
        while self.next_send_ns <= now_ns && self.next_send_ns < self.send_end_ns {
            let scheduled_ns = self.next_send_ns;
            self.next_send_ns += self.period_ns;
            self.seq += 1;
            let mut message = Vec::with_capacity(64);
            Stamp {
                bot: self.id,
                seq: self.seq,
                scheduled_ns,
            }
            .write(&mut message);
            self.body.write(cx.rng, &mut message);
            if out.send(self.channel, Bytes::from(message))
                && let Some(tally) = cx.meter.tally.as_mut()
            {
                tally.on_sent(scheduled_ns, self.recipients);
            }
        }
    }

    fn on_message(&mut self, _channel: u8, message: &[u8], now_ns: u64, cx: &mut BotCx<'_>) {
        let (Some(stamp), Some(plan), Some(tally)) =
            (Stamp::read(message), cx.plan, cx.meter.tally.as_mut())
        else {
            cx.meter.foreign += 1;
            return;
        };
        match plan
            .slot_in_room_of(stamp.bot, self.id)
            .and_then(|slot| self.seen.get_mut(slot))
        {
            Some(seen) => tally.on_arrival(stamp.scheduled_ns, now_ns, seen.observe(stamp.seq)),
            None => cx.meter.foreign += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn the_seed_scenarios_have_their_seeds_shapes() {
        let sfs = RelayScenario::sfs();
        assert_eq!((sfs.players(), sfs.channel, sfs.rate_hz), (2208, 1, 30.0));
        let nettest = RelayScenario::nettest();
        assert_eq!((nettest.players(), nettest.channel), (300, 0));
        assert!(RelayScenario::by_name("hobo").is_none());
        let mut bad = RelayScenario::sfs();
        bad.rate_hz = 0.0;
        assert!(bad.validate().is_err());
    }

    #[test]
    fn bodies_follow_the_stamp() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut body = vec![0; STAMP_BYTES];
        RelayScenario::sfs().body.write(&mut rng, &mut body);
        assert_eq!(body.len(), 32);
        let mut line = vec![0; STAMP_BYTES];
        RelayScenario::nettest().body.write(&mut rng, &mut line);
        let text = std::str::from_utf8(&line[STAMP_BYTES..]).unwrap();
        assert!(
            text.ends_with('.') && text.split(' ').count() >= 4,
            "{text:?}"
        );
    }
}
