//! Feeds arbitrary bytes, in arbitrary read sizes, to the WebSocket frame reader that both the
//! HTTP side (the connect token, the first message) and the shard (everything after) use: it
//! must never panic, never hand out a message past its bound, and read the same items however
//! the bytes are split across reads.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire_proto::websocket::{Inbound, MessageReader};

const MAX_MESSAGE: usize = 2048;

/// Every item (or the error that ended reading) when the input arrives in `chunk`-byte reads.
fn read_all(data: &[u8], chunk: usize) -> (Vec<Inbound>, bool) {
    let mut reader = MessageReader::default();
    let mut buf = Vec::new();
    let mut items = Vec::new();
    for piece in data.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        let mut pos = 0;
        loop {
            match reader.next(&mut buf, &mut pos, MAX_MESSAGE) {
                Ok(Some(item)) => {
                    if let Inbound::Binary(message) = &item {
                        assert!(message.len() <= MAX_MESSAGE, "message past its bound");
                    }
                    items.push(item);
                }
                Ok(None) => break,
                Err(_) => return (items, true),
            }
        }
        buf.drain(..pos);
        // Unparsed input never exceeds one frame's header and bounded body.
        assert!(buf.len() <= MAX_MESSAGE + 14 + chunk, "input held past one frame");
    }
    (items, false)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let whole = read_all(data, data.len().max(1));
    let pieces = read_all(data, usize::from(split) + 1);
    assert_eq!(whole, pieces, "reads split differently gave different items");
});
