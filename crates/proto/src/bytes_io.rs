//! Checked little-endian byte cursors for the protocol's byte-aligned headers and tokens.
//! Reads return `None` past the end instead of panicking; writes return `None` when full.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Bytes an address takes: a type byte, up to 16 address bytes and a port.
pub(crate) const ADDRESS_BYTES_MAX: usize = 1 + 16 + 2;

const ADDRESS_IPV4: u8 = 1;
const ADDRESS_IPV6: u8 = 2;

pub(crate) struct ByteWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> ByteWriter<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn put_slice(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.pos.checked_add(bytes.len())?;
        self.buf.get_mut(self.pos..end)?.copy_from_slice(bytes);
        self.pos = end;
        Some(())
    }

    pub(crate) fn put_u8(&mut self, value: u8) -> Option<()> {
        self.put_slice(&[value])
    }

    pub(crate) fn put_u16(&mut self, value: u16) -> Option<()> {
        self.put_slice(&value.to_le_bytes())
    }

    pub(crate) fn put_u32(&mut self, value: u32) -> Option<()> {
        self.put_slice(&value.to_le_bytes())
    }

    pub(crate) fn put_u64(&mut self, value: u64) -> Option<()> {
        self.put_slice(&value.to_le_bytes())
    }

    /// Type byte (1 = IPv4, 2 = IPv6), the address bytes in network order, the port
    /// little-endian.
    pub(crate) fn put_address(&mut self, address: SocketAddr) -> Option<()> {
        match address.ip() {
            IpAddr::V4(ip) => {
                self.put_u8(ADDRESS_IPV4)?;
                self.put_slice(&ip.octets())?;
            }
            IpAddr::V6(ip) => {
                self.put_u8(ADDRESS_IPV6)?;
                self.put_slice(&ip.octets())?;
            }
        }
        self.put_u16(address.port())
    }
}

impl ByteWriter<'_> {
    /// A count byte (1 to `max`), then each address.
    pub(crate) fn put_addresses(&mut self, addresses: &[SocketAddr], max: usize) -> Option<()> {
        if addresses.is_empty() || addresses.len() > max {
            return None;
        }
        self.put_u8(u8::try_from(addresses.len()).ok()?)?;
        addresses
            .iter()
            .try_for_each(|address| self.put_address(*address))
    }
}

pub(crate) struct ByteReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn get_slice(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let slice = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(slice)
    }

    pub(crate) fn get_array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.get_slice(N)?.try_into().ok()
    }

    pub(crate) fn get_u8(&mut self) -> Option<u8> {
        Some(self.get_array::<1>()?[0])
    }

    pub(crate) fn get_u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.get_array()?))
    }

    pub(crate) fn get_u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.get_array()?))
    }

    pub(crate) fn get_u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.get_array()?))
    }

    /// A count byte (1 to `max`), then that many addresses.
    pub(crate) fn get_addresses(&mut self, max: usize) -> Option<Vec<SocketAddr>> {
        let count = usize::from(self.get_u8()?);
        if count == 0 || count > max {
            return None;
        }
        (0..count).map(|_| self.get_address()).collect()
    }

    pub(crate) fn get_address(&mut self) -> Option<SocketAddr> {
        let ip = match self.get_u8()? {
            ADDRESS_IPV4 => IpAddr::V4(Ipv4Addr::from(self.get_array::<4>()?)),
            ADDRESS_IPV6 => IpAddr::V6(Ipv6Addr::from(self.get_array::<16>()?)),
            _ => return None,
        };
        Some(SocketAddr::new(ip, self.get_u16()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_little_endian() {
        let mut buf = [0u8; 64];
        let mut writer = ByteWriter::new(&mut buf);
        writer.put_u16(0x0102).unwrap();
        writer.put_u64(u64::MAX - 1).unwrap();
        writer
            .put_address("127.0.0.1:40000".parse().unwrap())
            .unwrap();
        writer.put_address("[::1]:9".parse().unwrap()).unwrap();
        let len = writer.position();
        assert_eq!(&buf[..2], &[0x02, 0x01]);
        assert_eq!(&buf[10..17], &[1, 127, 0, 0, 1, 0x40, 0x9c]);

        let mut reader = ByteReader::new(&buf[..len]);
        assert_eq!(reader.get_u16(), Some(0x0102));
        assert_eq!(reader.get_u64(), Some(u64::MAX - 1));
        assert_eq!(
            reader.get_address(),
            Some("127.0.0.1:40000".parse().unwrap())
        );
        assert_eq!(reader.get_address(), Some("[::1]:9".parse().unwrap()));
        assert_eq!(reader.remaining(), 0);
        assert_eq!(
            reader.get_u8(),
            None,
            "reading past the end is None, not a panic"
        );
    }

    #[test]
    fn full_buffers_and_bad_address_types_are_refused() {
        let mut buf = [0u8; 3];
        let mut writer = ByteWriter::new(&mut buf);
        assert_eq!(writer.put_u32(1), None);
        assert_eq!(ByteReader::new(&[9, 1, 2, 3, 4, 0, 0]).get_address(), None);
    }
}
