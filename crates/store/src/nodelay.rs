//! `TCP_NODELAY` on the database's sockets, which sqlx 0.9.0 no longer sets.
//!
//! Without it, Nagle's algorithm holds back the last, partial segment of a message until the
//! server acknowledges the previous one, and the server delays that acknowledgement by up to
//! 40 ms (Linux's delayed ACK): any statement larger than one segment, such as the writer's
//! multi-row upserts, pays that wait. sqlx set the option up to 0.8 and dropped it in 0.9.0
//! (transact-rs/sqlx#4335; fixed by #4336, unreleased as of 0.9.0), and offers no hook to
//! reach the socket. So after each connection is made ([`PoolOptions::after_connect`]), every
//! TCP socket of this process whose peer is the database's port gets `TCP_NODELAY`: the new
//! connection's among them. Setting it again on an older one changes nothing.
//!
//! Linux only (it lists `/proc/self/fd`); elsewhere it does nothing. It costs a `readlink`
//! and two `getsockopt`-sized calls per open file, once per new database connection (a few
//! milliseconds with thousands of players connected over TCP). Any other socket it might
//! match (a peer that happens to use the database's port) only gets the option every
//! latency-sensitive socket wants anyway. Remove it once the sqlx release in use sets the
//! option itself.
//!
//! [`PoolOptions::after_connect`]: sqlx::pool::PoolOptions::after_connect

/// Sets `TCP_NODELAY` on every TCP socket of this process connected to `port` (IPv4 or
/// IPv6); returns how many it set it on.
#[cfg(target_os = "linux")]
pub(crate) fn set_on_sockets_to(port: u16) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut set = 0;
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<libc::c_int>().ok())
        else {
            continue;
        };
        // Only sockets: the link reads `socket:[inode]`.
        let is_socket = std::fs::read_link(entry.path())
            .map(|target| {
                target
                    .as_os_str()
                    .as_encoded_bytes()
                    .starts_with(b"socket:")
            })
            .unwrap_or(false);
        if is_socket && peer_port(fd) == Some(port) && set_nodelay(fd) {
            set += 1;
        }
    }
    set
}

/// Not Linux: nothing to do here (see the module's documentation).
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_on_sockets_to(_port: u16) -> usize {
    0
}

/// The peer's port if `fd` is a connected TCP socket over IPv4 or IPv6.
#[cfg(target_os = "linux")]
fn peer_port(fd: libc::c_int) -> Option<u16> {
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into `kind`, which is that large. An
    // fd closed (or reused) since the directory was listed only makes the call fail or
    // answer for the new socket, which the checks below handle.
    let ok = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&raw mut kind).cast(),
            &mut len,
        )
    } == 0;
    if !ok || kind != libc::SOCK_STREAM {
        return None;
    }
    // SAFETY: all zeroes is a valid `sockaddr_storage`.
    let mut address: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername(2) writes at most `len` bytes into `address`, which is that large.
    if unsafe { libc::getpeername(fd, (&raw mut address).cast(), &mut len) } != 0 {
        return None;
    }
    match libc::c_int::from(address.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a `sockaddr_in`, which fits in it.
            let v4: libc::sockaddr_in = unsafe { std::ptr::read((&raw const address).cast()) };
            Some(u16::from_be(v4.sin_port))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a `sockaddr_in6`, which fits in it.
            let v6: libc::sockaddr_in6 = unsafe { std::ptr::read((&raw const address).cast()) };
            Some(u16::from_be(v6.sin6_port))
        }
        _ => None,
    }
}

#[cfg(target_os = "linux")]
fn set_nodelay(fd: libc::c_int) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt(2) reads `size_of::<c_int>()` bytes from `on`.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn nodelay(stream: &TcpStream) -> bool {
        stream.nodelay().unwrap()
    }

    #[test]
    fn sets_nodelay_on_sockets_to_the_port_and_leaves_others_alone() {
        let database = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let to_database = TcpStream::connect(database.local_addr().unwrap()).unwrap();
        let to_other = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(
            !nodelay(&to_database) && !nodelay(&to_other),
            "off by default"
        );

        let set = set_on_sockets_to(database.local_addr().unwrap().port());
        assert!(set >= 1, "the connection to the database's port is found");
        assert!(nodelay(&to_database), "set on the database's connection");
        assert!(
            !nodelay(&to_other),
            "another peer's connection is left alone"
        );
    }
}
