//! The seat ticket: where a connect token sends its player.

use tickwire_proto::token::USER_DATA_BYTES;

use crate::shard::RoomId;

/// Longest name a ticket carries, in bytes.
pub const MAX_TICKET_NAME_BYTES: usize = 32;

/// What a connect token's user data says about where the player goes: room id (`u64`
/// little-endian), name length (`u8`, at most 32), the name's UTF-8 bytes, zero padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatTicket {
    /// The room to join.
    pub room: RoomId,
    /// The name to show.
    pub name: String,
}

impl SeatTicket {
    /// The ticket as token user data; `None` if the name is longer than 32 bytes.
    pub fn encode(&self) -> Option<[u8; USER_DATA_BYTES]> {
        let name = self.name.as_bytes();
        if name.len() > MAX_TICKET_NAME_BYTES {
            return None;
        }
        let mut data = [0u8; USER_DATA_BYTES];
        data[..8].copy_from_slice(&self.room.0.to_le_bytes());
        data[8] = name.len() as u8;
        data[9..9 + name.len()].copy_from_slice(name);
        Some(data)
    }

    /// Reads a ticket from token user data.
    pub fn decode(data: &[u8; USER_DATA_BYTES]) -> Option<Self> {
        let room = RoomId(u64::from_le_bytes(data[..8].try_into().ok()?));
        let len = usize::from(data[8]);
        if len > MAX_TICKET_NAME_BYTES {
            return None;
        }
        let name = std::str::from_utf8(&data[9..9 + len]).ok()?.to_string();
        Some(Self { room, name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_round_trips_and_bad_data_is_refused() {
        let ticket = SeatTicket {
            room: RoomId(0x0102_0304_0506_0708),
            name: "Zoë".into(),
        };
        let data = ticket.encode().unwrap();
        assert_eq!(SeatTicket::decode(&data), Some(ticket));
        let too_long = SeatTicket {
            room: RoomId(1),
            name: "x".repeat(33),
        };
        assert_eq!(too_long.encode(), None);
        let mut bad = data;
        bad[8] = 200;
        assert_eq!(SeatTicket::decode(&bad), None, "a length past the bound");
        bad[8] = 2;
        bad[9] = 0xff;
        assert_eq!(SeatTicket::decode(&bad), None, "not UTF-8");
    }
}
