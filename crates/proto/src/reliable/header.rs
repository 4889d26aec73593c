//! The 9-byte packet header: flags, packet sequence, ack and ack bitfield.

use super::error::MalformedError;

/// Bytes of the packet header that starts every payload.
pub const HEADER_LEN: usize = 9;

/// Flag: `ack` and `ack_bits` are meaningful. Clear until the first packet from the peer
/// arrives, so that "ack 0" never falsely acknowledges the peer's packet 0.
const FLAG_ACK: u8 = 0x01;
/// Flag: acknowledge this packet at once: a keepalive without frames, or a packet of
/// unreliable messages that serves as an RTT probe.
const FLAG_PING: u8 = 0x02;
const FLAGS_KNOWN: u8 = FLAG_ACK | FLAG_PING;

/// Acknowledgement of the peer's packets: `ack` was received, and bit `i` of `bits` set means
/// `ack - 1 - i` was received too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ack {
    pub(crate) ack: u16,
    pub(crate) bits: u32,
}

/// A decoded packet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PacketHeader {
    pub(crate) sequence: u16,
    pub(crate) ack: Option<Ack>,
    pub(crate) ping: bool,
}

impl PacketHeader {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    pub(crate) fn encode(&self, out: &mut [u8; HEADER_LEN]) {
        let mut flags = 0;
        let Ack { ack, bits } = match self.ack {
            Some(ack) => {
                flags |= FLAG_ACK;
                ack
            }
            None => Ack { ack: 0, bits: 0 },
        };
        if self.ping {
            flags |= FLAG_PING;
        }
        out[0] = flags;
        out[1..3].copy_from_slice(&self.sequence.to_le_bytes());
        out[3..5].copy_from_slice(&ack.to_le_bytes());
        out[5..9].copy_from_slice(&bits.to_le_bytes());
    }

    /// Reads the header at the start of `payload`; frames follow at [`HEADER_LEN`].
    pub(crate) fn decode(payload: &[u8]) -> Result<Self, MalformedError> {
        let Some(head) = payload.first_chunk::<HEADER_LEN>() else {
            return Err(MalformedError::ShortHeader {
                len: payload.len(),
                min: HEADER_LEN,
            });
        };
        let [flags, s0, s1, a0, a1, b0, b1, b2, b3] = *head;
        if flags & !FLAGS_KNOWN != 0 {
            return Err(MalformedError::ReservedFlags { flags });
        }
        let ack = u16::from_le_bytes([a0, a1]);
        let bits = u32::from_le_bytes([b0, b1, b2, b3]);
        let ack = if flags & FLAG_ACK != 0 {
            Some(Ack { ack, bits })
        } else if ack != 0 || bits != 0 {
            // Canonical form: one packet, one encoding.
            return Err(MalformedError::StrayAck { ack, bits });
        } else {
            None
        };
        Ok(Self {
            sequence: u16::from_le_bytes([s0, s1]),
            ack,
            ping: flags & FLAG_PING != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_flags_then_little_endian_fields() {
        let header = PacketHeader {
            sequence: 0x0102,
            ack: Some(Ack {
                ack: 0x0304,
                bits: 0x0506_0708,
            }),
            ping: true,
        };
        let mut out = [0; HEADER_LEN];
        header.encode(&mut out);
        assert_eq!(out, [0x03, 0x02, 0x01, 0x04, 0x03, 0x08, 0x07, 0x06, 0x05]);
        let bare = PacketHeader {
            sequence: 7,
            ack: None,
            ping: false,
        };
        bare.encode(&mut out);
        assert_eq!(out, [0, 7, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn bad_headers_are_refused() {
        assert_eq!(
            PacketHeader::decode(&[0; 8]),
            Err(MalformedError::ShortHeader { len: 8, min: 9 })
        );
        assert_eq!(
            PacketHeader::decode(&[0x04, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(MalformedError::ReservedFlags { flags: 0x04 })
        );
        assert_eq!(
            PacketHeader::decode(&[0, 0, 0, 1, 0, 0, 0, 0, 0]),
            Err(MalformedError::StrayAck { ack: 1, bits: 0 })
        );
    }

    proptest! {
        #[test]
        fn header_round_trips(
            sequence: u16, has_ack: bool, ack: u16, bits: u32, ping: bool, tail: Vec<u8>
        ) {
            let header = PacketHeader { sequence, ack: has_ack.then_some(Ack { ack, bits }), ping };
            let mut out = [0; HEADER_LEN];
            header.encode(&mut out);
            let mut packet = out.to_vec();
            packet.extend_from_slice(&tail);
            prop_assert_eq!(PacketHeader::decode(&packet), Ok(header));
        }
    }
}
