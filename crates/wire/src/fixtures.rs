//! Sample message types shared by the benchmarks, fuzz targets, golden vectors and tests
//! (enabled by the `fixtures` feature).

use crate::{Decode, Encode};

/// The entity of seed 002 (Fiedler-style serialization in Go), declared with realistic
/// bounds: a name of at most 32 bytes and stats of at most 1000.
#[derive(Debug, Clone, PartialEq, Eq, Default, Encode, Decode)]
pub struct SeedEntity {
    /// Display name.
    #[wire(max_len = 32)]
    pub name: String,
    /// Current and maximum health.
    #[wire(min = 0, max = 1000)]
    pub health: [u16; 2],
    /// Current and maximum mana.
    #[wire(min = 0, max = 1000)]
    pub mana: [u16; 2],
    /// Current and maximum stamina.
    #[wire(min = 0, max = 1000)]
    pub stamina: [u16; 2],
    /// Whether the entity is dead.
    pub dead: bool,
}

impl SeedEntity {
    /// The value the seed's benchmark serializes.
    pub fn casey() -> Self {
        Self {
            name: "Casey".into(),
            health: [100, 100],
            mana: [50, 50],
            stamina: [75, 75],
            dead: false,
        }
    }
}

/// A snapshot-shaped composite message exercising every codec: varints, bit counts,
/// quantized floats, bounded strings, byte arrays, sequences, options and an enum.
#[derive(Debug, Clone, PartialEq, Default, Encode, Decode)]
pub struct SampleSnapshot {
    /// Server tick the snapshot describes.
    #[wire(varint)]
    pub tick: u64,
    /// Players in view.
    #[wire(max_len = 64)]
    pub players: Vec<SamplePlayer>,
    /// Things that happened since the last snapshot.
    #[wire(max_len = 16)]
    pub events: Vec<SampleEvent>,
    /// Opaque bytes for the game.
    #[wire(max_len = 32)]
    pub blob: Vec<u8>,
}

/// One player's state in a [`SampleSnapshot`].
#[derive(Debug, Clone, PartialEq, Default, Encode, Decode)]
pub struct SamplePlayer {
    /// Player id.
    #[wire(bits = 12)]
    pub id: u16,
    /// Position in world units.
    #[wire(quantize(min = -512.0, max = 512.0, resolution = 0.01))]
    pub position: [f32; 2],
    /// Health, 0 to 100.
    #[wire(min = 0, max = 100)]
    pub health: u8,
    /// Score since the match started.
    #[wire(varint)]
    pub score: i32,
    /// Shown name, if the player set one.
    #[wire(max_len = 16)]
    pub name: Option<String>,
    /// Raw speed, sent as an IEEE 754 float.
    pub speed: f32,
}

/// An event in a [`SampleSnapshot`].
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub enum SampleEvent {
    /// A player joined.
    Joined {
        /// Who.
        #[wire(bits = 12)]
        id: u16,
    },
    /// A chat line.
    Chat(#[wire(max_len = 64)] String),
    /// A shot fired at an angle in turns.
    Shot {
        /// Angle, 0 to 1 turn.
        #[wire(quantize(min = 0.0, max = 1.0, resolution = 0.001))]
        angle: f32,
    },
    /// The match ended.
    Ended,
}
