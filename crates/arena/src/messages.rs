//! The arena's messages, per channel (every byte through `tickwire-wire`):
//!
//! | channel | kind | direction | message |
//! |---|---|---|---|
//! | 0 | reliable | client → server | [`ClientMessage`] (chat, ping) |
//! | 0 | reliable | server → client | [`ServerMessage`] (welcome, events, chat, announcements, roster, scores) |
//! | 1 | unreliable | client → server | [`ClientInput`] (snapshot ack + up to 4 recent inputs) |
//! | 2 | unreliable-sequenced | server → client | a snapshot ([`crate::snapshot`]) |
//!
//! Every decoder is bounded: the longest message of each kind is fixed by the format
//! (inputs 4, strings 160 or 512 bytes), so hostile bytes cost a failed decode at most.

use tickwire_wire::schema::Layout;
use tickwire_wire::{BitReader, BitWrite, Decode, DecodeError, Describe, Encode, EncodeError};

use crate::input::InputCommand;
use crate::snapshot::EntityId;

/// Channel of [`ClientMessage`] and [`ServerMessage`].
pub const RELIABLE: u8 = 0;
/// Channel of [`ClientInput`].
pub const INPUT: u8 = 1;
/// Channel of snapshots.
pub const SNAPSHOT: u8 = 2;

/// Version of this message set, sent in the welcome. 2 added the roster
/// ([`ServerMessage::Player`], [`ServerMessage::Left`]) and [`ServerMessage::Scores`].
pub const PROTOCOL_VERSION: u8 = 2;
/// Most inputs one [`ClientInput`] carries.
pub const MAX_INPUTS: usize = 4;
/// Longest chat line, bytes.
pub const MAX_CHAT_BYTES: usize = 160;
/// Longest announcement, bytes.
pub const MAX_ANNOUNCEMENT_BYTES: usize = 512;
/// Longest map name, bytes.
pub const MAX_MAP_NAME_BYTES: usize = 64;
/// Entity id meaning "nobody" (a killer who has left).
pub const NO_ENTITY: EntityId = u16::MAX;
/// Longest player name, bytes (the server's seat tickets hold at most 32).
pub const MAX_NAME_BYTES: usize = 32;
/// Most lines in one [`ServerMessage::Scores`]: the top of the table.
pub const MAX_SCORES: usize = 32;

/// Sent every tick on channel 1: the newest snapshot received (the server's delta
/// baseline) and the newest inputs, newest first; older ones repeat what earlier packets
/// carried, so a lost packet loses no input. 1 + 32 + 2 + 46 × count bits.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ClientInput {
    /// Tick of the newest snapshot the client decoded.
    pub ack: Option<u32>,
    inputs: [InputCommand; MAX_INPUTS],
    len: u8,
}

impl ClientInput {
    /// No inputs yet; `ack` as given.
    pub fn new(ack: Option<u32>) -> Self {
        Self {
            ack,
            ..Self::default()
        }
    }

    /// Adds an input (push the newest first); false if already full.
    pub fn push(&mut self, input: InputCommand) -> bool {
        let len = usize::from(self.len);
        if len == MAX_INPUTS {
            return false;
        }
        self.inputs[len] = input;
        self.len += 1;
        true
    }

    /// The inputs, newest first.
    pub fn inputs(&self) -> &[InputCommand] {
        &self.inputs[..usize::from(self.len)]
    }
}

impl Encode for ClientInput {
    fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
        writer.write_bool(self.ack.is_some())?;
        if let Some(ack) = self.ack {
            writer.write_uint(u64::from(ack), 32)?;
        }
        // 1..=4 inputs in 2 bits; an input message always carries one.
        writer.write_range(i128::from(self.len), 1, MAX_INPUTS as i128)?;
        for input in self.inputs() {
            input.encode(writer)?;
        }
        Ok(())
    }
}

impl Decode for ClientInput {
    fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let ack = if reader.read_bool()? {
            Some(reader.read_uint(32)? as u32)
        } else {
            None
        };
        let len = reader.read_range(1, MAX_INPUTS as i128)? as u8;
        let mut message = Self::new(ack);
        for _ in 0..len {
            message.push(InputCommand::decode(reader)?);
        }
        Ok(message)
    }
}

/// What a client sends on channel 0.
#[derive(Debug, Clone, PartialEq, Encode, Decode, Describe)]
pub enum ClientMessage {
    /// A chat line for everyone in the room (rate-limited by the room).
    Chat {
        /// UTF-8, at most 160 bytes.
        #[wire(max_len = 160)]
        text: String,
    },
    /// Asks for a [`ServerMessage::Pong`] (clock sync, round trip).
    Ping {
        /// Echoed back.
        nonce: u32,
    },
}

/// One line of the scoreboard ([`ServerMessage::Scores`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Encode, Decode, Describe)]
pub struct Score {
    /// The player's entity id.
    pub id: u16,
    /// Kills this session.
    #[wire(varint)]
    pub kills: u32,
    /// Deaths this session.
    #[wire(varint)]
    pub deaths: u32,
    /// Points this session.
    #[wire(varint)]
    pub score: u32,
}

/// What the server sends on channel 0.
#[derive(Debug, Clone, PartialEq, Encode, Decode, Describe)]
pub enum ServerMessage {
    /// First message after joining (and after reconnecting): who you are and the
    /// constants snapshots are quantized with (see `docs/ARENA.md`).
    Welcome {
        /// [`PROTOCOL_VERSION`].
        protocol: u8,
        /// Your entity id (snapshots never list you among the others).
        you: u16,
        /// The map's name.
        #[wire(max_len = 64)]
        map: String,
        /// Map width, metres: the x grid is `0..=width` in 1/64 m steps.
        map_width: f32,
        /// Map height, metres.
        map_height: f32,
        /// Ticks per second.
        tick_rate_hz: u16,
        /// The current tick (low 32 bits).
        tick: u32,
        /// Health at spawn; health takes `ceil(log2(max_health + 1))` bits.
        max_health: u16,
        /// Metres per second at full input (for prediction).
        max_speed: f32,
        /// Player radius, metres (for prediction).
        player_radius: f32,
        /// Snapshots the client must keep as possible baselines.
        snapshot_history: u8,
    },
    /// A player killed another (broadcast).
    Kill {
        /// The killer's entity id, [`NO_ENTITY`] if they have left.
        killer: u16,
        /// The victim's entity id.
        victim: u16,
    },
    /// A hit (sent to the attacker and the victim).
    Hit {
        /// Entity id of who fired, [`NO_ENTITY`] if they have left.
        attacker: u16,
        /// Entity id of who was hit.
        victim: u16,
        /// Health taken.
        damage: u16,
        /// Health left.
        health: u16,
    },
    /// You are back in play, here.
    Respawn {
        /// Metres.
        x: f32,
        /// Metres.
        y: f32,
    },
    /// You stepped on a teleport pad and landed here.
    Teleported {
        /// Index of the pad in the map.
        teleport: u16,
        /// Metres.
        x: f32,
        /// Metres.
        y: f32,
    },
    /// A chat line.
    Chat {
        /// Entity id of the sender.
        from: u16,
        /// At most 160 bytes.
        #[wire(max_len = 160)]
        text: String,
    },
    /// An operator's announcement.
    Announcement {
        /// At most 512 bytes (longer ones are cut at a character boundary).
        #[wire(max_len = 512)]
        text: String,
    },
    /// Answer to [`ClientMessage::Ping`].
    Pong {
        /// The ping's nonce.
        nonce: u32,
        /// The server tick (low 32 bits) when answered.
        tick: u32,
    },
    /// A player in the room: who an entity id is. Everyone hears it when a player joins;
    /// a player who joins or reconnects hears it for every player in the room (themself
    /// included).
    Player {
        /// Entity id.
        id: u16,
        /// Display name, at most 32 bytes.
        #[wire(max_len = MAX_NAME_BYTES)]
        name: String,
    },
    /// A player left the room for good (their id may be reused later).
    Left {
        /// Entity id.
        id: u16,
    },
    /// The scoreboard: the top [`MAX_SCORES`] players by score (then kills, then id),
    /// sent to everyone when it changed, at most every `scoreboard_interval_ticks`, and
    /// to a player who joins or reconnects.
    Scores {
        /// Best first.
        #[wire(max_len = MAX_SCORES)]
        scores: Vec<Score>,
    },
}

/// The arena's messages as data, for `tickwire codegen ts`: the input command and the two
/// channel-0 enums (with `Score`). `ClientInput` is written by hand (its count is `1..=4`),
/// and so is its TypeScript.
pub fn layouts() -> Vec<Layout> {
    vec![
        InputCommand::layout(),
        ClientMessage::layout(),
        ServerMessage::layout(),
    ]
}

/// `text` cut to at most `max` bytes at a character boundary.
pub fn truncate_utf8(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
