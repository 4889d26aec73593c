//! Feeds arbitrary bytes to every decoder of the arena's messages: what a client sends the
//! server (inputs on channel 1, messages on channel 0) and what a client decodes (server
//! messages, snapshots). None may panic; whatever decodes must encode again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire_arena::geom::Vec2;
use tickwire_arena::messages::{ClientInput, ClientMessage, ServerMessage};
use tickwire_arena::snapshot::{SnapshotConfig, SnapshotDecoder, SnapshotSchema};
use tickwire_wire::{decode_exact, encode_to_vec};

fuzz_target!(|data: &[u8]| {
    if let Ok(input) = decode_exact::<ClientInput>(data) {
        encode_to_vec(&input).expect("a decoded input encodes");
    }
    if let Ok(message) = decode_exact::<ClientMessage>(data) {
        encode_to_vec(&message).expect("a decoded client message encodes");
    }
    if let Ok(message) = decode_exact::<ServerMessage>(data) {
        encode_to_vec(&message).expect("a decoded server message encodes");
    }
    // The metropolis's size and the default health: the largest schema the server uses.
    let schema = SnapshotSchema::new(Vec2::new(400.0, 400.0), 100).expect("a valid schema");
    let mut decoder = SnapshotDecoder::new(schema, &SnapshotConfig::default());
    // Twice: the second decode may take the first as its baseline.
    let _ = decoder.decode(data);
    let _ = decoder.decode(data);
});
