//! An admitted WebSocket connection's socket on its way to the shard that will drive it,
//! and the non-blocking byte stream under it: plain TCP, or TCP with a rustls session
//! (native wss) whose handshake the HTTP side finished.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tickwire_proto::token::USER_DATA_BYTES;

/// Plaintext a TLS session buffers for the socket before writes count as blocked.
const TLS_BUFFER_LIMIT: usize = 64 << 10;

/// A connected, non-blocking byte stream.
pub(crate) enum ByteStream {
    Plain(TcpStream),
    Tls(Box<rustls::ServerConnection>, TcpStream),
}

/// What one read gave.
pub(crate) enum ReadOutcome {
    /// This many bytes were appended.
    Data(usize),
    /// Nothing more until the socket is readable again.
    WouldBlock,
    /// The peer closed its side.
    Closed,
}

impl ByteStream {
    pub(crate) fn plain(stream: TcpStream) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        Ok(Self::Plain(stream))
    }

    pub(crate) fn tls(session: rustls::ServerConnection, stream: TcpStream) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        let mut session = Box::new(session);
        session.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        Ok(Self::Tls(session, stream))
    }

    pub(crate) fn fd(&self) -> RawFd {
        match self {
            Self::Plain(stream) | Self::Tls(_, stream) => stream.as_raw_fd(),
        }
    }

    /// Reads what is there into `buf`.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<ReadOutcome> {
        let result = match self {
            Self::Plain(stream) => stream.read(buf),
            Self::Tls(session, stream) => read_tls(session, stream, buf),
        };
        match result {
            Ok(0) => Ok(ReadOutcome::Closed),
            Ok(n) => Ok(ReadOutcome::Data(n)),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(ReadOutcome::WouldBlock),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(ReadOutcome::Data(0)),
            Err(error) => Err(error),
        }
    }

    /// Whether a read that returned less than asked for left the socket empty. True of
    /// plain TCP; not of TLS, whose session may stop at a record's end with more bytes
    /// waiting in the socket.
    pub(crate) fn short_read_drains(&self) -> bool {
        matches!(self, Self::Plain(_))
    }

    /// Writes as much of `bytes` as the socket (and, for TLS, the session's bounded buffer)
    /// takes now; how much it took. `Ok(0)` with bytes left means blocked.
    pub(crate) fn write_some(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(stream) => match stream.write(bytes) {
                Ok(n) => Ok(n),
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    Ok(0)
                }
                Err(error) => Err(error),
            },
            Self::Tls(session, stream) => {
                flush_tls(session, stream)?;
                let taken = if session.wants_write() {
                    0
                } else {
                    session.writer().write(bytes)?
                };
                flush_tls(session, stream)?;
                Ok(taken)
            }
        }
    }

    /// Whether bytes the stream took are still waiting for the socket (TLS records).
    pub(crate) fn has_backlog(&mut self) -> io::Result<bool> {
        match self {
            Self::Plain(_) => Ok(false),
            Self::Tls(session, stream) => {
                flush_tls(session, stream)?;
                Ok(session.wants_write())
            }
        }
    }

    /// Stops sending (a FIN after what is written); the socket stays readable.
    pub(crate) fn shutdown_write(&mut self) {
        match self {
            Self::Plain(stream) => {
                let _ = stream.shutdown(std::net::Shutdown::Write);
            }
            Self::Tls(session, stream) => {
                session.send_close_notify();
                let _ = flush_tls(session, stream);
                let _ = stream.shutdown(std::net::Shutdown::Write);
            }
        }
    }
}

fn read_tls(
    session: &mut rustls::ServerConnection,
    stream: &mut TcpStream,
    out: &mut [u8],
) -> io::Result<usize> {
    loop {
        // Plaintext already decrypted comes first.
        match session.reader().read(out) {
            Ok(n) => return Ok(n),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
        match session.read_tls(stream)? {
            0 => return Ok(0),
            _ => {
                session
                    .process_new_packets()
                    .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
                // Alerts or key updates the session wants to send.
                flush_tls(session, stream)?;
            }
        }
    }
}

/// Moves the session's pending TLS records into the socket until it would block.
fn flush_tls(session: &mut rustls::ServerConnection, stream: &mut TcpStream) -> io::Result<()> {
    while session.wants_write() {
        match session.write_tls(stream) {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// A place among the endpoint's open connections, given back when dropped.
#[derive(Debug)]
pub(crate) struct ConnectionSlot(Arc<AtomicUsize>);

impl ConnectionSlot {
    /// Takes a place if fewer than `max` are taken.
    pub(crate) fn take(open: &Arc<AtomicUsize>, max: usize) -> Option<Self> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| Self(open.clone()))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Who an admitted client is, from its connect token's sealed part, and where it connected
/// from: what the shard seats it by, whichever transport it came over.
#[derive(Clone, PartialEq, Eq)]
pub struct AdmittedClient {
    client_id: u64,
    user_data: Box<[u8; USER_DATA_BYTES]>,
    peer: Option<SocketAddr>,
}

impl std::fmt::Debug for AdmittedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmittedClient")
            .field("client_id", &self.client_id)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl AdmittedClient {
    pub(crate) fn new(
        client_id: u64,
        user_data: Box<[u8; USER_DATA_BYTES]>,
        peer: Option<SocketAddr>,
    ) -> Self {
        Self {
            client_id,
            user_data,
            peer,
        }
    }

    /// The client id from the connect token's sealed part: the player's id.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// Application data from the connect token's sealed part.
    pub fn user_data(&self) -> &[u8; USER_DATA_BYTES] {
        &self.user_data
    }

    /// The client's address as the listener saw it, when it recorded one.
    pub fn peer_address(&self) -> Option<SocketAddr> {
        self.peer
    }
}

/// A WebSocket client whose connect token the endpoint admitted, not yet sent the accepted
/// message: the socket, what was read past the token, and who the token says it is. The
/// runtime hands it to the shard of the player's room, which seats the player and then
/// attaches it to its [`WsLinks`](super::WsLinks) (which sends the accepted message first),
/// or refuses it.
pub struct WsSocket {
    pub(crate) stream: ByteStream,
    /// Bytes read after the token frame.
    pub(crate) leftover: Vec<u8>,
    pub(crate) client: AdmittedClient,
    pub(crate) slot: ConnectionSlot,
    pub(crate) shared: Arc<super::endpoint::Shared>,
}

impl std::fmt::Debug for WsSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsSocket")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl WsSocket {
    /// Who the client is.
    pub fn client(&self) -> &AdmittedClient {
        &self.client
    }

    /// Refuses the client without a shard to linger on it: a close frame with `code` and
    /// `reason`, written if the socket takes it now (it is fresh, its buffers empty), then
    /// a FIN.
    pub fn refuse(mut self, code: super::CloseCode, reason: &str) {
        let mut out = Vec::new();
        tickwire_proto::websocket::write_close(&mut out, code.code(), reason);
        let _ = self.stream.write_some(&out);
        self.stream.shutdown_write();
    }
}
