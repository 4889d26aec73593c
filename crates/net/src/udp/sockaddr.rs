//! Socket addresses in the C layout that `recvmmsg`/`sendmmsg` read and write.

use std::mem;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

/// Room for either IPv4 or IPv6 address, 28 bytes instead of `sockaddr_storage`'s 128: the
/// batches hold one per datagram, and these are the only families a UDP socket reports.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

/// The length the kernel may write into a [`RawAddr`] (`msg_namelen` before a receive).
pub(crate) const RAW_ADDR_LEN: libc::socklen_t = mem::size_of::<RawAddr>() as libc::socklen_t;

const V4_LEN: libc::socklen_t = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
const V6_LEN: libc::socklen_t = mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;

impl RawAddr {
    /// All zeroes, through the larger variant so that every byte of the union is initialized
    /// (which is what makes reading either variant later sound).
    pub(crate) const ZEROED: RawAddr = RawAddr {
        v6: libc::sockaddr_in6 {
            sin6_family: 0,
            sin6_port: 0,
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr { s6_addr: [0; 16] },
            sin6_scope_id: 0,
        },
    };

    /// Writes `addr` in the layout the socket expects and returns its length. An IPv6 socket
    /// gets IPv4 destinations as v4-mapped addresses (`::ffff:a.b.c.d`), which a dual-stack
    /// socket sends as IPv4.
    pub(crate) fn encode(&mut self, addr: SocketAddr, socket_is_ipv6: bool) -> libc::socklen_t {
        let v6 = match addr {
            SocketAddr::V4(a) if !socket_is_ipv6 => {
                self.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                return V4_LEN;
            }
            SocketAddr::V4(a) => SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0),
            SocketAddr::V6(a) => a,
        };
        // flowinfo and scope id are passed through as std does (no byte swapping).
        self.v6 = libc::sockaddr_in6 {
            sin6_family: libc::AF_INET6 as libc::sa_family_t,
            sin6_port: v6.port().to_be(),
            sin6_flowinfo: v6.flowinfo(),
            sin6_addr: libc::in6_addr {
                s6_addr: v6.ip().octets(),
            },
            sin6_scope_id: v6.scope_id(),
        };
        V6_LEN
    }

    /// Reads the address the kernel wrote (`len` is the returned `msg_namelen`). v4-mapped
    /// IPv6 addresses come back as IPv4, so a peer has one address whichever socket family
    /// received it. `None` for anything that is not a complete IPv4 or IPv6 address.
    pub(crate) fn decode(&self, len: libc::socklen_t) -> Option<SocketAddr> {
        // SAFETY: both variants are plain integer structs without padding, for which every
        // bit pattern is valid, and every byte of the union is initialized (it starts as
        // `ZEROED` and is only overwritten), so reading either variant is sound.
        let (v4, v6) = unsafe { (self.v4, self.v6) };
        match i32::from(v6.sin6_family) {
            libc::AF_INET if len >= V4_LEN => Some(SocketAddr::V4(SocketAddrV4::new(
                v4.sin_addr.s_addr.to_ne_bytes().into(),
                u16::from_be(v4.sin_port),
            ))),
            libc::AF_INET6 if len >= V6_LEN => {
                let ip = std::net::Ipv6Addr::from(v6.sin6_addr.s6_addr);
                let port = u16::from_be(v6.sin6_port);
                Some(match ip.to_ipv4_mapped() {
                    Some(ip4) => SocketAddr::V4(SocketAddrV4::new(ip4, port)),
                    None => SocketAddr::V6(SocketAddrV6::new(
                        ip,
                        port,
                        v6.sin6_flowinfo,
                        v6.sin6_scope_id,
                    )),
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_v4_v6_and_mapped() {
        let cases: [(&str, bool, &str); 4] = [
            ("127.0.0.1:4000", false, "127.0.0.1:4000"),
            ("[::1]:65535", true, "[::1]:65535"),
            // An IPv4 peer on a dual-stack socket is sent to as v4-mapped and reads back as v4.
            ("10.1.2.3:7", true, "10.1.2.3:7"),
            ("[fe80::1%3]:9", true, "[fe80::1%3]:9"),
        ];
        for (input, ipv6_socket, expected) in cases {
            let mut raw = RawAddr::ZEROED;
            let len = raw.encode(input.parse().unwrap(), ipv6_socket);
            let decoded = raw.decode(len);
            assert_eq!(decoded, Some(expected.parse().unwrap()), "{input}");
        }
    }

    #[test]
    fn rejects_unknown_family_and_short_length() {
        let raw = RawAddr::ZEROED;
        assert_eq!(raw.decode(RAW_ADDR_LEN), None, "family 0 is not an address");
        let mut raw = RawAddr::ZEROED;
        let len = raw.encode("127.0.0.1:1".parse().unwrap(), false);
        assert_eq!(
            raw.decode(len - 1),
            None,
            "a truncated sockaddr_in is not an address"
        );
    }
}
