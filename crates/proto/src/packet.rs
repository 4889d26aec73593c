//! Packet framing: the prefix byte, the connection request, the stateless challenge token and
//! the encrypted packet envelope. Layouts are specified in `docs/PROTOCOL.md`.

use std::net::SocketAddr;

use tickwire_aead::SealBatch;

use crate::bytes_io::{ByteReader, ByteWriter};
use crate::crypto::{Cipher, KEY_BYTES, Key, NONCE_BYTES, TAG_BYTES, sequence_nonce};
use crate::token::{PRIVATE_TOKEN_BYTES, USER_DATA_BYTES, VERSION_INFO};

/// The kinds of packet, the low four bits of the prefix byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PacketType {
    /// Client → server, unencrypted, carries the sealed private token.
    Request = 0,
    /// Server → client, encrypted: the server will not take this client.
    Denied = 1,
    /// Server → client, encrypted: the challenge token to echo.
    Challenge = 2,
    /// Client → server, encrypted: the challenge token (sealed by the server), echoed.
    Response = 3,
    /// Server → client, encrypted: connected, with the connection's parameters.
    Accepted = 4,
    /// Either way, encrypted: acks and messages.
    Payload = 5,
    /// Either way, encrypted: the connection ends, with a reason.
    Disconnect = 6,
}

impl PacketType {
    fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0 => Self::Request,
            1 => Self::Denied,
            2 => Self::Challenge,
            3 => Self::Response,
            4 => Self::Accepted,
            5 => Self::Payload,
            6 => Self::Disconnect,
            _ => return None,
        })
    }

    /// The type of a datagram, from its prefix byte; `None` for an unknown type.
    pub(crate) fn of(datagram: &[u8]) -> Option<Self> {
        Self::from_bits(datagram.first()? & 0x0f)
    }
}

/// Bytes of a connection request: prefix, version, protocol id, expiry, nonce, private token.
pub(crate) const REQUEST_BYTES: usize = 1 + 13 + 8 + 8 + NONCE_BYTES + PRIVATE_TOKEN_BYTES;
/// Bytes of a sealed challenge token, tag included.
pub(crate) const CHALLENGE_TOKEN_BYTES: usize = 384;
/// Most bytes the envelope adds to an encrypted packet's body: prefix, 8 sequence bytes, tag.
pub const ENCRYPTED_OVERHEAD_MAX: usize = 1 + 8 + TAG_BYTES;
/// Bytes of a challenge packet: the envelope (always 8 sequence bytes, see
/// [`HANDSHAKE_SEQUENCE_BIT`]) around the sealed challenge token.
pub(crate) const CHALLENGE_BYTES: usize = ENCRYPTED_OVERHEAD_MAX + CHALLENGE_TOKEN_BYTES;
/// Bytes of a connection response: the same envelope and token as the challenge it answers.
pub(crate) const RESPONSE_BYTES: usize = ENCRYPTED_OVERHEAD_MAX + CHALLENGE_TOKEN_BYTES;

/// Set in the sequence of every handshake packet (challenge, denied, response) and in no
/// connection's: a connection numbers its packets from 0 and stops short of this bit, so a
/// handshake packet and a connection packet never share a nonce under one key.
pub(crate) const HANDSHAKE_SEQUENCE_BIT: u64 = 1 << 63;

/// Whether `sequence` is in the handshake packets' half of the sequence space.
pub(crate) fn is_handshake_sequence(sequence: u64) -> bool {
    sequence & HANDSHAKE_SEQUENCE_BIT != 0
}

// No amplification: every reply to a not-yet-authenticated client is smaller than the packet
// it answers. A challenge or a denial answers a request; an accepted packet (body at most 14
// bytes plus one per channel, so under 64) or a denial answers a response.
const _: () = {
    assert!(CHALLENGE_BYTES < REQUEST_BYTES);
    assert!(ENCRYPTED_OVERHEAD_MAX + 14 + crate::params::MAX_CHANNELS < RESPONSE_BYTES);
};

/// A connection request as the server reads it (the private token still sealed).
pub(crate) struct Request<'a> {
    pub(crate) protocol_id: u64,
    pub(crate) expire_timestamp: u64,
    pub(crate) nonce: [u8; NONCE_BYTES],
    pub(crate) private_token: &'a [u8; PRIVATE_TOKEN_BYTES],
}

impl<'a> Request<'a> {
    /// Reads a request; `None` unless it has exactly the request's size and this version.
    pub(crate) fn read(datagram: &'a [u8]) -> Option<Self> {
        if datagram.len() != REQUEST_BYTES {
            return None;
        }
        let mut reader = ByteReader::new(datagram);
        if reader.get_u8()? != PacketType::Request as u8
            || reader.get_array::<13>()? != VERSION_INFO
        {
            return None;
        }
        Some(Self {
            protocol_id: reader.get_u64()?,
            expire_timestamp: reader.get_u64()?,
            nonce: reader.get_array()?,
            private_token: reader.get_slice(PRIVATE_TOKEN_BYTES)?.try_into().ok()?,
        })
    }

    /// Writes a request into `buf` and returns its length.
    pub(crate) fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let mut writer = ByteWriter::new(buf);
        writer.put_u8(PacketType::Request as u8)?;
        writer.put_slice(&VERSION_INFO)?;
        writer.put_u64(self.protocol_id)?;
        writer.put_u64(self.expire_timestamp)?;
        writer.put_slice(&self.nonce)?;
        writer.put_slice(self.private_token)?;
        Some(writer.position())
    }
}

/// What the server needs to create a connection once the client proves it holds the
/// session keys, sealed under a key only this server knows so no state is kept before then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChallengeToken {
    pub(crate) client_id: u64,
    /// The connect token's expiry; a challenge is no good after it either.
    pub(crate) expire_timestamp: u64,
    /// The address the request came from; a response from elsewhere is refused.
    pub(crate) client_address: SocketAddr,
    pub(crate) client_to_server_key: Key,
    pub(crate) server_to_client_key: Key,
    pub(crate) user_data: [u8; USER_DATA_BYTES],
}

fn challenge_aad(protocol_id: u64) -> [u8; 21] {
    let mut aad = [0u8; 21];
    aad[..13].copy_from_slice(&VERSION_INFO);
    aad[13..].copy_from_slice(&protocol_id.to_le_bytes());
    aad
}

impl ChallengeToken {
    /// Seals the token; `sequence` must never repeat under the same key.
    pub(crate) fn seal(
        &self,
        cipher: &Cipher,
        protocol_id: u64,
        sequence: u64,
    ) -> [u8; CHALLENGE_TOKEN_BYTES] {
        let mut sealed = [0u8; CHALLENGE_TOKEN_BYTES];
        let mut writer = ByteWriter::new(&mut sealed[..CHALLENGE_TOKEN_BYTES - TAG_BYTES]);
        let written = (|| {
            writer.put_u64(self.client_id)?;
            writer.put_u64(self.expire_timestamp)?;
            writer.put_address(self.client_address)?;
            writer.put_slice(&self.client_to_server_key.0)?;
            writer.put_slice(&self.server_to_client_key.0)?;
            writer.put_slice(&self.user_data)
        })();
        // 8 + 8 + 19 + 64 + 256 = 355 bytes of 368.
        debug_assert!(written.is_some());
        cipher.seal(
            sequence_nonce(sequence),
            &challenge_aad(protocol_id),
            &mut sealed,
        );
        sealed
    }

    /// Opens a sealed token; `None` unless this server sealed it with `sequence`.
    pub(crate) fn open(
        sealed: &[u8; CHALLENGE_TOKEN_BYTES],
        cipher: &Cipher,
        protocol_id: u64,
        sequence: u64,
    ) -> Option<Self> {
        let mut plaintext = *sealed;
        let len = cipher.open(
            sequence_nonce(sequence),
            &challenge_aad(protocol_id),
            &mut plaintext,
        )?;
        let mut reader = ByteReader::new(&plaintext[..len]);
        Some(Self {
            client_id: reader.get_u64()?,
            expire_timestamp: reader.get_u64()?,
            client_address: reader.get_address()?,
            client_to_server_key: Key(reader.get_array::<KEY_BYTES>()?),
            server_to_client_key: Key(reader.get_array::<KEY_BYTES>()?),
            user_data: reader.get_array()?,
        })
    }
}

/// Associated data of an encrypted packet: version, protocol id and the prefix byte, so a
/// packet cannot be moved to another protocol or have its type or sequence size changed.
fn packet_aad(protocol_id: u64, prefix: u8) -> [u8; 22] {
    let mut aad = [0u8; 22];
    aad[..13].copy_from_slice(&VERSION_INFO);
    aad[13..21].copy_from_slice(&protocol_id.to_le_bytes());
    aad[21] = prefix;
    aad
}

/// Bytes needed for `sequence` little-endian without its zero high bytes (at least one).
fn sequence_bytes(sequence: u64) -> usize {
    (8 - sequence.leading_zeros() as usize / 8).max(1)
}

/// Writes an encrypted packet into `buf`: `fill` writes the body into the slice it is given
/// and returns the body's length (or `None` to write nothing). Returns the packet's length.
pub(crate) fn write_encrypted(
    buf: &mut [u8],
    packet_type: PacketType,
    sequence: u64,
    cipher: &Cipher,
    protocol_id: u64,
    fill: impl FnOnce(&mut [u8]) -> Option<usize>,
) -> Option<usize> {
    let packet = write_unsealed(buf, packet_type, sequence, fill)?;
    packet.seal(buf, cipher, protocol_id);
    Some(packet.len)
}

/// An encrypted packet written in the clear: its header, its body, and room for the tag,
/// waiting to be sealed with others ([`queue`](Self::queue)).
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnsealedPacket {
    /// The whole packet's length, the tag's room included.
    pub(crate) len: usize,
    header_len: usize,
    sequence: u64,
}

impl UnsealedPacket {
    /// Seals the packet, written at the start of `buf`, at once.
    pub(crate) fn seal(&self, buf: &mut [u8], cipher: &Cipher, protocol_id: u64) {
        cipher.seal(
            sequence_nonce(self.sequence),
            &packet_aad(protocol_id, buf[0]),
            &mut buf[self.header_len..self.len],
        );
    }

    /// Queues the packet, written at `offset` of the buffer `batch` will seal, to be sealed
    /// under `key`: the same nonce and associated data as [`write_encrypted`].
    pub(crate) fn queue(
        &self,
        batch: &mut SealBatch,
        key: &Key,
        protocol_id: u64,
        buf: &[u8],
        offset: usize,
    ) {
        batch.push(
            &key.0,
            &sequence_nonce(self.sequence),
            &packet_aad(protocol_id, buf[offset]),
            offset + self.header_len,
            self.len - self.header_len - TAG_BYTES,
        );
    }
}

/// [`write_encrypted`] without the sealing: the header and body, and the tag's room left
/// as it was.
pub(crate) fn write_unsealed(
    buf: &mut [u8],
    packet_type: PacketType,
    sequence: u64,
    fill: impl FnOnce(&mut [u8]) -> Option<usize>,
) -> Option<UnsealedPacket> {
    let sequence_len = sequence_bytes(sequence);
    let header_len = 1 + sequence_len;
    let body_room = buf.len().checked_sub(header_len + TAG_BYTES)?;
    let body_len = fill(&mut buf[header_len..header_len + body_room])?;
    if body_len > body_room {
        return None;
    }
    buf[0] = (sequence_len as u8) << 4 | packet_type as u8;
    buf[1..header_len].copy_from_slice(&sequence.to_le_bytes()[..sequence_len]);
    Some(UnsealedPacket {
        len: header_len + body_len + TAG_BYTES,
        header_len,
        sequence,
    })
}

/// The cleartext header of an encrypted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EncryptedHeader {
    pub(crate) packet_type: PacketType,
    pub(crate) sequence: u64,
    len: usize,
}

impl EncryptedHeader {
    /// Reads the prefix and sequence; `None` for a malformed packet or a request (the one
    /// type sent in the clear).
    pub(crate) fn read(datagram: &[u8]) -> Option<Self> {
        let prefix = *datagram.first()?;
        let packet_type = PacketType::from_bits(prefix & 0x0f)?;
        if packet_type == PacketType::Request {
            return None;
        }
        let sequence_len = usize::from(prefix >> 4);
        if !(1..=8).contains(&sequence_len) {
            return None;
        }
        let mut sequence = [0u8; 8];
        sequence[..sequence_len].copy_from_slice(datagram.get(1..1 + sequence_len)?);
        if datagram.len() < 1 + sequence_len + TAG_BYTES {
            return None;
        }
        Some(Self {
            packet_type,
            sequence: u64::from_le_bytes(sequence),
            len: 1 + sequence_len,
        })
    }

    /// Authenticates and decrypts the packet into `scratch` and returns the body; `None`
    /// when the packet does not authenticate under `cipher`.
    pub(crate) fn open<'s>(
        &self,
        datagram: &[u8],
        cipher: &Cipher,
        protocol_id: u64,
        scratch: &'s mut [u8],
    ) -> Option<&'s [u8]> {
        let sealed = &datagram[self.len..];
        let scratch = scratch.get_mut(..sealed.len())?;
        scratch.copy_from_slice(sealed);
        let len = cipher.open(
            sequence_nonce(self.sequence),
            &packet_aad(protocol_id, datagram[0]),
            scratch,
        )?;
        Some(&scratch[..len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROTOCOL: u64 = 0x7157;

    #[test]
    fn sequences_take_their_minimal_bytes() {
        assert_eq!(sequence_bytes(0), 1);
        assert_eq!(sequence_bytes(255), 1);
        assert_eq!(sequence_bytes(256), 2);
        assert_eq!(sequence_bytes(u64::MAX), 8);
    }

    #[test]
    fn encrypted_packets_round_trip_and_authenticate_their_header() {
        let cipher = Cipher::new(&Key([9; KEY_BYTES]));
        let mut buf = [0u8; 64];
        let len = write_encrypted(
            &mut buf,
            PacketType::Payload,
            300,
            &cipher,
            PROTOCOL,
            |body| {
                body[..5].copy_from_slice(b"hello");
                Some(5)
            },
        )
        .unwrap();
        assert_eq!(len, 1 + 2 + 5 + TAG_BYTES);
        assert_eq!(buf[0], 0x25, "2 sequence bytes, type 5");

        let header = EncryptedHeader::read(&buf[..len]).unwrap();
        assert_eq!(header.packet_type, PacketType::Payload);
        assert_eq!(header.sequence, 300);
        let mut scratch = [0u8; 64];
        assert_eq!(
            header.open(&buf[..len], &cipher, PROTOCOL, &mut scratch),
            Some(&b"hello"[..])
        );
        assert_eq!(
            header.open(&buf[..len], &cipher, PROTOCOL + 1, &mut scratch),
            None
        );

        // Changing the type in the prefix breaks the tag.
        let mut forged = buf;
        forged[0] = 0x26;
        let header = EncryptedHeader::read(&forged[..len]).unwrap();
        assert_eq!(
            header.open(&forged[..len], &cipher, PROTOCOL, &mut scratch),
            None
        );
    }

    #[test]
    fn malformed_headers_are_refused() {
        assert_eq!(EncryptedHeader::read(&[]), None);
        assert_eq!(
            EncryptedHeader::read(&[0x05; 10]),
            None,
            "zero sequence bytes"
        );
        assert_eq!(
            EncryptedHeader::read(&[0x95; 40]),
            None,
            "nine sequence bytes"
        );
        assert_eq!(
            EncryptedHeader::read(&[0x15, 0, 1]),
            None,
            "shorter than a tag"
        );
        assert_eq!(
            EncryptedHeader::read(&[0x10; 40]),
            None,
            "a request is not encrypted"
        );
        assert_eq!(EncryptedHeader::read(&[0x1f; 40]), None, "unknown type");
    }

    #[test]
    fn challenge_tokens_open_only_with_their_key_and_sequence() {
        let cipher = Cipher::new(&Key([1; KEY_BYTES]));
        let token = ChallengeToken {
            client_id: 77,
            expire_timestamp: 1_000,
            client_address: "127.0.0.1:5000".parse().unwrap(),
            client_to_server_key: Key([2; KEY_BYTES]),
            server_to_client_key: Key([3; KEY_BYTES]),
            user_data: [4; USER_DATA_BYTES],
        };
        let sealed = token.seal(&cipher, PROTOCOL, 12);
        assert_eq!(
            ChallengeToken::open(&sealed, &cipher, PROTOCOL, 12),
            Some(token)
        );
        assert_eq!(ChallengeToken::open(&sealed, &cipher, PROTOCOL, 13), None);
        let other = Cipher::new(&Key([5; KEY_BYTES]));
        assert_eq!(ChallengeToken::open(&sealed, &other, PROTOCOL, 12), None);
    }
}
