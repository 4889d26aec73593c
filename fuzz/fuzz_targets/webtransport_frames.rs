//! Feeds arbitrary bytes to the WebTransport session's decoders: the control stream's frames
//! (a length prefix checked before the body is read, then the body) and datagrams. Nothing may
//! panic; a data frame re-encodes to the bytes it came from; a sequenced channel never
//! accepts a datagram that is not newer than the last one it accepted.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tickwire_proto::reliable::{ChannelKind, sequence_newer};
use tickwire_proto::webtransport::{
    DatagramReceiver, FRAME_HEADER_BYTES, Frame, check_frame_length, parse_frame,
    put_data_frame,
};

const CHANNELS: [ChannelKind; 3] = [
    ChannelKind::Reliable,
    ChannelKind::Unreliable,
    ChannelKind::UnreliableSequenced,
];
const MAX_FRAME: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let (stream, datagrams) = data.split_at(usize::from(split).min(data.len()));

    // The control stream, frame by frame, as the endpoint reads it.
    let mut rest = stream;
    while rest.len() >= FRAME_HEADER_BYTES {
        let prefix = [rest[0], rest[1], rest[2], rest[3]];
        let Ok(len) = check_frame_length(prefix, MAX_FRAME) else {
            break;
        };
        assert!((1..=MAX_FRAME).contains(&len), "length {len} passed the check");
        let Some(body) = rest.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len) else {
            break;
        };
        if let Ok(Frame::Data(channel, message)) =
            parse_frame(Bytes::copy_from_slice(body), CHANNELS.len())
        {
            let mut again = BytesMut::new();
            put_data_frame(&mut again, channel, &message);
            assert_eq!(&again[FRAME_HEADER_BYTES..], body, "a data frame re-encodes");
        }
        rest = &rest[FRAME_HEADER_BYTES + len..];
    }

    // Datagrams: each a length byte, then the bytes.
    let mut receiver = DatagramReceiver::new(CHANNELS.len());
    let mut newest: Option<u16> = None;
    let mut rest = datagrams;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let datagram = Bytes::copy_from_slice(&tail[..len]);
        rest = &tail[len..];
        if let Ok((channel, _)) = receiver.accept(datagram.clone(), &CHANNELS) {
            assert_ne!(CHANNELS[usize::from(channel)], ChannelKind::Reliable);
            if CHANNELS[usize::from(channel)] == ChannelKind::UnreliableSequenced {
                let sequence = u16::from_le_bytes([datagram[1], datagram[2]]);
                if let Some(last) = newest {
                    assert!(sequence_newer(sequence, last), "a stale datagram accepted");
                }
                newest = Some(sequence);
            }
        }
    }
});
