//! The full UDP protocol path on loopback, measured the way [`raw_sendmmsg`] measures the
//! kernel alone, so that the two differ only by the protocol's work.
//!
//! [`protocol_relay`] connects `destinations` [`Client`]s, each on its own loopback socket, to
//! one [`Server`] through the real handshake (untimed), then times these phases:
//!
//! 1. **out**: the server thread, pinned like the raw sender, queues one small message on the
//!    unreliable channel for every connection, drains [`Server::poll_transmit`] into a
//!    [`SendBatch`] and sends it, over and over. Each datagram is encrypted, numbered, carries
//!    the reliability header and its ack, and goes to its own destination, round-robin; the
//!    client sockets are drained by the raw benchmark's own receiver (the same sweep, no
//!    wake-ups). Keepalives or acks the server sends on top are counted apart.
//! 2. **in**: a client thread on the other CPU has every client in turn queue a message,
//!    `poll_transmit` and send it from its own socket, while the pinned server thread
//!    receives batches with `recvmmsg`, hands each datagram to [`Server::handle_datagram`]
//!    and drains [`Server::poll_event`]. When its socket is empty the server either waits
//!    for readability ([`InWait::Readiness`], as a latency-first driver does), or sleeps a
//!    millisecond between sweeps ([`InWait::Sweep`], as the raw receiver does and as a
//!    tick-driven server does once per tick). One client core cannot keep the server busy,
//!    so a readiness-woken server takes about one datagram per wake-up and pays a wake-up
//!    for each; a sweeping one takes full batches, which shows its capacity.
//! 3. **in, raw**: each in phase again with the server only receiving and counting: the
//!    kernel's part of the in path, to hold the protocol's part against.
//!
//! Taking turns with the out phase, before the in phases, it runs [`raw_sendmmsg`] with the
//! out phase's datagram length, destination count, batch and CPUs: the out path's
//! reference. The two alternate in [`RelayConfig::slices`] slices (4 of 500 ms by default),
//! so that the shared machine's drift falls on both alike.
//!
//! Before the out phase an untimed warm-up sends 256 messages to every connection, so that
//! every timed packet has a 2-byte sequence (64 bytes in all with the default message) and
//! the connections' buffers have grown to their working size. The clients never read what
//! the server sends, so they never ack it: each connection keeps its last 1024 packets in
//! flight, the reliability layer's bound, which is the costly case for the sender.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::ptr;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::{HEADER_LEN, ReliabilityConfig};
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{
    Client, ClientEvent, ConnectionId, MAX_DATAGRAM_BYTES, Server, ServerConfig, ServerEvent,
};

use super::raw::{
    RawBenchError, RawConfig, RawFigures, drain, loopback_socket, pin_current_thread, raw_sendmmsg,
    thread_cpu_time, wait_writable,
};
use tickwire_net::udp::{RECV_BUFFER_BYTES, RecvBatch, SEND_BUFFER_BYTES, SendBatch};

/// The protocol id the benchmark's server and tokens use.
const PROTOCOL_ID: u64 = 0x7157_BE4C;
/// The unreliable channel of [`tickwire_proto::ConnectionParams::default`].
const UNRELIABLE_CHANNEL: u8 = 1;
/// The longest a packet without a message can be: prefix, 8 sequence bytes, the reliability
/// header and the tag. Anything longer carries a message (messages are at least
/// [`MIN_MESSAGE_LEN`] bytes, so a message packet is always longer).
const EMPTY_PACKET_MAX: usize = 1 + 8 + HEADER_LEN + 16;
/// Smallest message the benchmark sends: a packet carrying one is always longer than any
/// packet without a message, so keepalives and lone acks can be counted by length.
pub const MIN_MESSAGE_LEN: usize = 8;
/// Largest message: it must fit one packet of the default 1200-byte MTU.
pub const MAX_MESSAGE_LEN: usize = 1024;
/// Shortest slice of the out phase or the raw loop.
const MIN_SLICE: Duration = Duration::from_millis(1);

/// What [`protocol_relay`] sends, where, and for how long.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Connected clients, each on its own loopback socket (default 256, as
    /// [`RawConfig::destinations`](super::raw::RawConfig::destinations)).
    pub destinations: usize,
    /// Bytes of each unreliable message (default 34: with a 2-byte packet sequence, the
    /// 9-byte reliability header, a 2-byte frame header and the 16-byte tag, a 64-byte
    /// datagram, the raw benchmark's default payload).
    pub message_len: usize,
    /// Datagrams per `sendmmsg` and per `recvmmsg` on the server (default 64).
    pub batch: usize,
    /// Datagrams each client sends per `sendmmsg` in the in phases (default 1: clients
    /// interleave, as real players do, and the server sees a different address every time).
    pub client_burst: usize,
    /// How long each timed phase runs (default 2 s).
    pub duration: Duration,
    /// Turns the out phase and the raw loop take, alternating, each `duration / slices`
    /// long (default 4), so that drift on a shared machine hits both alike.
    pub slices: usize,
    /// CPU the server thread is pinned to (default 1, as the raw sender).
    pub server_cpu: Option<usize>,
    /// CPU the clients' thread (draining, or sending in the in phases) is pinned to
    /// (default 0).
    pub client_cpu: Option<usize>,
    /// Longest the untimed handshakes may take before the benchmark gives up (default 10 s).
    pub handshake_timeout: Duration,
    /// Reads a process-wide allocation counter, if the binary has one, so the figures can
    /// say how many allocations each datagram cost (all threads together).
    pub allocations: Option<fn() -> u64>,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            destinations: 256,
            message_len: 34,
            batch: 64,
            client_burst: 1,
            duration: Duration::from_secs(2),
            slices: 4,
            server_cpu: Some(1),
            client_cpu: Some(0),
            handshake_timeout: Duration::from_secs(10),
            allocations: None,
        }
    }
}

/// What the out phase measured.
#[derive(Debug, Clone, PartialEq)]
pub struct OutFigures {
    /// Messages the server queued with [`Server::send`].
    pub messages: u64,
    /// Datagrams the kernel accepted from the server.
    pub sent: u64,
    /// Of those, packets without a message (keepalives, lone acks).
    pub empty_packets: u64,
    /// Datagram bytes the kernel accepted.
    pub bytes: u64,
    /// Shortest and longest datagram sent.
    pub datagram_len_range: (usize, usize),
    /// Datagrams the client sockets' drain received.
    pub received: u64,
    /// Times the server found its send buffer full and waited.
    pub would_block: u64,
    /// Datagrams the kernel refused.
    pub send_errors: u64,
    /// Wall-clock time the server sent for.
    pub wall: Duration,
    /// CPU time of the server thread over that time.
    pub server_cpu_time: Duration,
    /// The part of it spent in user space (protocol, driver loop), sampled at scheduler
    /// ticks: an estimate, where `server_cpu_time` is exact.
    pub server_user_time: Duration,
    /// CPU time of the draining thread.
    pub drain_cpu_time: Duration,
    /// Allocations over the phase (all threads), when a counter was given.
    pub allocations: Option<u64>,
}

impl OutFigures {
    /// Adds another slice's figures to these.
    fn add(&mut self, other: OutFigures) {
        self.messages += other.messages;
        self.sent += other.sent;
        self.empty_packets += other.empty_packets;
        self.bytes += other.bytes;
        self.datagram_len_range = (
            self.datagram_len_range.0.min(other.datagram_len_range.0),
            self.datagram_len_range.1.max(other.datagram_len_range.1),
        );
        self.received += other.received;
        self.would_block += other.would_block;
        self.send_errors += other.send_errors;
        self.wall += other.wall;
        self.server_cpu_time += other.server_cpu_time;
        self.server_user_time += other.server_user_time;
        self.drain_cpu_time += other.drain_cpu_time;
        self.allocations = self.allocations.zip(other.allocations).map(|(a, b)| a + b);
    }

    /// Datagrams sent per second of wall clock.
    pub fn sent_pps(&self) -> f64 {
        super::raw::per_second(self.sent, self.wall)
    }

    /// Datagrams sent per second of the server thread's CPU time.
    pub fn sent_pps_per_core(&self) -> f64 {
        super::raw::per_second(self.sent, self.server_cpu_time)
    }

    /// Datagrams received per second of wall clock.
    pub fn received_pps(&self) -> f64 {
        super::raw::per_second(self.received, self.wall)
    }

    /// Mean datagram length in bytes.
    pub fn mean_datagram_len(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        self.bytes as f64 / self.sent as f64
    }

    /// Server CPU time per datagram sent, in nanoseconds.
    pub fn ns_per_datagram(&self) -> f64 {
        ns_per(self.server_cpu_time, self.sent)
    }

    /// Server user-space CPU time per datagram sent, in nanoseconds (an estimate).
    pub fn user_ns_per_datagram(&self) -> f64 {
        ns_per(self.server_user_time, self.sent)
    }
}

/// How the server waits for datagrams in an in phase when its socket is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InWait {
    /// `poll` for readability: woken by the first datagram that arrives.
    Readiness,
    /// Sleep a millisecond, then receive everything that arrived meanwhile.
    Sweep,
}

/// What an in phase measured.
#[derive(Debug, Clone, PartialEq)]
pub struct InFigures {
    /// Whether the server ran the protocol on what it received (false: it only counted).
    pub protocol: bool,
    /// How the server waited for datagrams.
    pub wait: InWait,
    /// Datagrams the clients' sockets accepted.
    pub client_sent: u64,
    /// Datagrams the server received.
    pub received: u64,
    /// Messages the server delivered as [`ServerEvent::Message`] (0 without the protocol).
    pub messages: u64,
    /// Datagrams the server dropped, whatever the reason (0 expected).
    pub dropped: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub recv_calls: u64,
    /// Times the server found nothing to receive and waited.
    pub waits: u64,
    /// Wall-clock time the server received for.
    pub wall: Duration,
    /// CPU time of the server thread over that time.
    pub server_cpu_time: Duration,
    /// The part of it spent in user space (protocol, driver loop), sampled at scheduler
    /// ticks: an estimate, where `server_cpu_time` is exact.
    pub server_user_time: Duration,
    /// CPU time of the clients' thread.
    pub client_cpu_time: Duration,
    /// Allocations over the phase (all threads), when a counter was given.
    pub allocations: Option<u64>,
}

impl InFigures {
    /// Datagrams received per second of wall clock.
    pub fn received_pps(&self) -> f64 {
        super::raw::per_second(self.received, self.wall)
    }

    /// Datagrams received per second of the server thread's CPU time.
    pub fn received_pps_per_core(&self) -> f64 {
        super::raw::per_second(self.received, self.server_cpu_time)
    }

    /// Server CPU time per datagram received, in nanoseconds.
    pub fn ns_per_datagram(&self) -> f64 {
        ns_per(self.server_cpu_time, self.received)
    }

    /// Server user-space CPU time per datagram received, in nanoseconds (an estimate).
    pub fn user_ns_per_datagram(&self) -> f64 {
        ns_per(self.server_user_time, self.received)
    }

    /// Datagrams per `recvmmsg` call that returned any.
    pub fn datagrams_per_call(&self) -> f64 {
        if self.recv_calls == 0 {
            return 0.0;
        }
        self.received as f64 / self.recv_calls as f64
    }
}

fn ns_per(time: Duration, count: u64) -> f64 {
    if count == 0 {
        return 0.0;
    }
    time.as_nanos() as f64 / count as f64
}

/// What one [`protocol_relay`] measured.
#[derive(Debug, Clone)]
pub struct RelayFigures {
    /// The configuration that produced these figures.
    pub config: RelayConfig,
    /// The datagram length the out phase sent (its mean, rounded): the raw loop's payload.
    pub datagram_len: usize,
    /// How long the untimed handshakes took.
    pub handshake: Duration,
    /// The server sending to every client.
    pub out: OutFigures,
    /// The bare `sendmmsg` loop with the out phase's datagram length, destinations and CPUs,
    /// run right after it.
    pub raw: RawFigures,
    /// Every client sending to the server, the server running the protocol and waiting for
    /// readability.
    pub inbound: InFigures,
    /// The same traffic, the server only receiving it.
    pub inbound_raw: InFigures,
    /// The same traffic, the server running the protocol and sweeping every millisecond.
    pub inbound_swept: InFigures,
    /// The same traffic, the server sweeping and only receiving.
    pub inbound_swept_raw: InFigures,
}

impl RelayFigures {
    /// The out path's datagrams per server core-second over the raw loop's per sender
    /// core-second: what fraction of the kernel's limit the protocol path reaches.
    pub fn ratio_to_raw(&self) -> f64 {
        let raw = self.raw.sent_pps_per_core();
        if raw == 0.0 {
            return 0.0;
        }
        self.out.sent_pps_per_core() / raw
    }
}

/// Why the relay benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum RelayBenchError {
    /// Too few or too many clients.
    #[error("destination count {0} is outside 1..=4096")]
    Destinations(usize),
    /// A message too short to tell from a keepalive, or too long for one packet.
    #[error("message length {0} is outside {MIN_MESSAGE_LEN}..={MAX_MESSAGE_LEN}")]
    MessageLen(usize),
    /// The batch is empty or larger than the kernel takes per call.
    #[error("batch size {0} is outside 1..=1024")]
    Batch(usize),
    /// A client burst outside the batch bounds.
    #[error("client burst {0} is outside 1..=1024")]
    ClientBurst(usize),
    /// Slices outside 1..=64, or shorter than a millisecond each.
    #[error("{slices} slices of {duration:?} are outside 1..=64 or shorter than 1 ms each")]
    Slices {
        /// Slices asked for.
        slices: usize,
        /// The phase duration to cut into them.
        duration: Duration,
    },
    /// Opening or configuring a loopback socket failed (too many open files, say).
    #[error("opening a loopback socket failed: {0}")]
    Socket(#[source] io::Error),
    /// The protocol refused the benchmark's setup or a message (a bug, not the machine).
    #[error("protocol: {0}")]
    Protocol(String),
    /// Not every client connected in time.
    #[error("only {connected} of {wanted} clients connected within {timeout:?}")]
    Handshake {
        /// Clients connected when time ran out.
        connected: usize,
        /// Clients asked for.
        wanted: usize,
        /// The time allowed.
        timeout: Duration,
    },
    /// A thread could not be pinned (the CPU does not exist or is not allowed).
    #[error("pinning the {thread} thread to cpu {cpu} failed: {source}")]
    Pin {
        /// `"server"` or `"client"`.
        thread: &'static str,
        /// The CPU asked for.
        cpu: usize,
        /// The error from `sched_setaffinity`.
        source: io::Error,
    },
    /// A socket call failed with something other than a full or empty buffer.
    #[error("{call} failed: {source}")]
    Io {
        /// The call (`"sendmmsg"`, `"recvmmsg"`, …).
        call: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The raw reference loop failed.
    #[error("the raw sendmmsg loop: {0}")]
    Raw(#[from] RawBenchError),
    /// A benchmark thread could not be started.
    #[error("starting a thread failed: {0}")]
    Spawn(#[source] io::Error),
    /// A benchmark thread panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// Runs the handshakes, the phases and the raw loop described in the [module docs](self).
/// Blocks for about six times `config.duration` plus the handshakes.
pub fn protocol_relay(config: &RelayConfig) -> Result<RelayFigures, RelayBenchError> {
    if !(1..=4096).contains(&config.destinations) {
        return Err(RelayBenchError::Destinations(config.destinations));
    }
    if !(MIN_MESSAGE_LEN..=MAX_MESSAGE_LEN).contains(&config.message_len) {
        return Err(RelayBenchError::MessageLen(config.message_len));
    }
    if !(1..=1024).contains(&config.batch) {
        return Err(RelayBenchError::Batch(config.batch));
    }
    if !(1..=1024).contains(&config.client_burst) {
        return Err(RelayBenchError::ClientBurst(config.client_burst));
    }
    if !(1..=64).contains(&config.slices) || config.duration / (config.slices as u32) < MIN_SLICE {
        return Err(RelayBenchError::Slices {
            slices: config.slices,
            duration: config.duration,
        });
    }
    let setup_start = Instant::now();
    let mut relay = Relay::connect(config)?;
    let handshake = setup_start.elapsed();
    relay.warm_up()?;
    // The out phase and the raw loop take turns, a slice each, so that both see the same
    // mix of quiet and busy moments on a shared machine.
    let slice = config.duration / config.slices as u32;
    let mut out = relay.out_phase(slice)?;
    let datagram_len = out.mean_datagram_len().round() as usize;
    let raw_config = RawConfig {
        payload_len: datagram_len,
        destinations: config.destinations,
        batch: config.batch,
        duration: slice,
        sender_cpu: config.server_cpu,
        receiver_cpu: config.client_cpu,
    };
    let mut raw = raw_sendmmsg(&raw_config)?;
    for _ in 1..config.slices {
        out.add(relay.out_phase(slice)?);
        add_raw(&mut raw, raw_sendmmsg(&raw_config)?);
    }
    raw.config.duration = config.duration;
    let inbound = relay.in_phase(true, InWait::Readiness)?;
    let inbound_raw = relay.in_phase(false, InWait::Readiness)?;
    let inbound_swept = relay.in_phase(true, InWait::Sweep)?;
    let inbound_swept_raw = relay.in_phase(false, InWait::Sweep)?;
    Ok(RelayFigures {
        config: config.clone(),
        datagram_len,
        handshake,
        out,
        raw,
        inbound,
        inbound_raw,
        inbound_swept,
        inbound_swept_raw,
    })
}

/// The connected server and clients, with their sockets.
struct Relay<'c> {
    config: &'c RelayConfig,
    server: Server,
    socket: UdpSocket,
    ids: Vec<ConnectionId>,
    clients: Vec<Client>,
    client_sockets: Vec<UdpSocket>,
}

fn socket_error(error: io::Error) -> RelayBenchError {
    RelayBenchError::Socket(error)
}

fn io_error(call: &'static str) -> impl FnOnce(io::Error) -> RelayBenchError {
    move |source| RelayBenchError::Io { call, source }
}

fn pin(thread: &'static str, cpu: Option<usize>) -> Result<(), RelayBenchError> {
    match cpu {
        Some(cpu) => pin_current_thread(cpu).map_err(|source| RelayBenchError::Pin {
            thread,
            cpu,
            source,
        }),
        None => Ok(()),
    }
}

fn allocations(config: &RelayConfig) -> Option<u64> {
    config.allocations.map(|count| count())
}

impl<'c> Relay<'c> {
    /// Binds every socket and runs every handshake to completion.
    fn connect(config: &'c RelayConfig) -> Result<Self, RelayBenchError> {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let socket = loopback_socket(loopback, RECV_BUFFER_BYTES, SEND_BUFFER_BYTES)
            .map_err(socket_error)?;
        let server_address = socket.local_addr().map_err(socket_error)?;
        let client_sockets = (0..config.destinations)
            .map(|_| loopback_socket(loopback, RECV_BUFFER_BYTES, 0))
            .collect::<io::Result<Vec<_>>>()
            .map_err(socket_error)?;

        let mut rng = rand::rng();
        let key = Key::random(&mut rng);
        let now = Instant::now();
        let unix_now = tickwire_proto::unix_now();
        let mut server_config = ServerConfig::new(PROTOCOL_ID, key.clone(), vec![server_address]);
        // No connection may time out because a phase leaves it silent: the clients send
        // nothing during the warm-up, the out phase and the raw loop (default 10 s; three
        // phases' worth plus slack covers that at any duration).
        server_config.params.timeout = server_config
            .params
            .timeout
            .max(config.duration * 3 + Duration::from_secs(10));
        server_config.max_clients = config.destinations;
        let server = Server::new(server_config, now, unix_now, &mut rng)
            .map_err(|e| RelayBenchError::Protocol(format!("server config: {e}")))?;
        let issuer = TokenIssuer {
            protocol_id: PROTOCOL_ID,
            key,
            server_addresses: vec![server_address],
            validity_seconds: 3600,
            timeout_seconds: config.handshake_timeout.as_secs().max(1) as u32,
        };
        let clients = (0..config.destinations)
            .map(|i| {
                let token = issuer
                    .issue(&mut rng, unix_now, i as u64, &[])
                    .map_err(|e| RelayBenchError::Protocol(format!("issuing a token: {e}")))?;
                Ok(Client::new(
                    token,
                    now,
                    unix_now,
                    ReliabilityConfig::default(),
                ))
            })
            .collect::<Result<Vec<_>, RelayBenchError>>()?;
        let mut relay = Self {
            config,
            server,
            socket,
            ids: Vec::new(),
            clients,
            client_sockets,
        };
        relay.handshake()?;
        Ok(relay)
    }

    /// Drives every endpoint with nonblocking calls until all clients are connected.
    fn handshake(&mut self) -> Result<(), RelayBenchError> {
        let wanted = self.clients.len();
        let deadline = Instant::now() + self.config.handshake_timeout;
        let mut ids: Vec<Option<ConnectionId>> = vec![None; wanted];
        let mut connected = vec![false; wanted];
        let mut connected_count = 0;
        let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
        let mut inbox = RecvBatch::with_capacity(64, MAX_DATAGRAM_BYTES);
        loop {
            let now = Instant::now();
            for (client, socket) in self.clients.iter_mut().zip(&self.client_sockets) {
                client.handle_timeout(now);
                while let Some(transmit) = client.poll_transmit(now, &mut buf) {
                    send_one(socket, &buf[..transmit.len], transmit.destination)?;
                }
            }
            loop {
                match inbox.recv_from_fd(self.socket.as_fd()) {
                    Ok(_) => {
                        for (from, datagram) in &inbox {
                            self.server.handle_datagram(now, from, datagram);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(io_error("recvmmsg")(e)),
                }
            }
            while let Some(event) = self.server.poll_event() {
                match event {
                    ServerEvent::Connected {
                        connection,
                        client_id,
                        ..
                    } => {
                        if let Some(slot) = ids.get_mut(client_id as usize) {
                            *slot = Some(connection);
                        }
                    }
                    ServerEvent::Disconnected {
                        client_id, reason, ..
                    } => {
                        return Err(RelayBenchError::Protocol(format!(
                            "the server dropped client {client_id} during setup: {reason:?}"
                        )));
                    }
                    ServerEvent::Message { .. } => {}
                }
            }
            while let Some(transmit) = self.server.poll_transmit(now, &mut buf) {
                send_one(&self.socket, &buf[..transmit.len], transmit.destination)?;
            }
            for (i, (client, socket)) in self
                .clients
                .iter_mut()
                .zip(&self.client_sockets)
                .enumerate()
            {
                loop {
                    match socket.recv_from(&mut buf) {
                        Ok((len, from)) => client.handle_datagram(now, from, &buf[..len]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(io_error("recvfrom")(e)),
                    }
                }
                while let Some(event) = client.poll_event() {
                    match event {
                        ClientEvent::Connected { .. } if !connected[i] => {
                            connected[i] = true;
                            connected_count += 1;
                        }
                        ClientEvent::Disconnected { reason } => {
                            return Err(RelayBenchError::Protocol(format!(
                                "client {i} could not connect: {reason:?}"
                            )));
                        }
                        _ => {}
                    }
                }
            }
            if connected_count == wanted && ids.iter().all(Option::is_some) {
                self.ids = ids.into_iter().flatten().collect();
                return Ok(());
            }
            if now >= deadline {
                return Err(RelayBenchError::Handshake {
                    connected: connected_count,
                    wanted,
                    timeout: self.config.handshake_timeout,
                });
            }
            thread::sleep(Duration::from_micros(200));
        }
    }

    /// Sends 256 messages to every connection, untimed and unpinned, so that every packet of
    /// the timed phase has a 2-byte sequence (the first 256 of a connection have 1) and the
    /// connections' buffers have grown to their working size; then throws away what arrived.
    fn warm_up(&mut self) -> Result<(), RelayBenchError> {
        let payload = Bytes::from(vec![0xA5; self.config.message_len]);
        let mut batch = SendBatch::with_capacity(self.config.batch, MAX_DATAGRAM_BYTES);
        let mut scratch = vec![0u8; MAX_DATAGRAM_BYTES];
        for _ in 0..256 {
            let now = Instant::now();
            queue_round(&mut self.server, &self.ids, now, &payload)?;
            while let Some(transmit) = self.server.poll_transmit(now, &mut scratch) {
                batch.push(transmit.destination, &scratch[..transmit.len]);
                if batch.is_full() {
                    send_all(&self.socket, &mut batch)?;
                }
            }
            send_all(&self.socket, &mut batch)?;
            // Keep the client sockets' buffers from overflowing.
            discard(&self.client_sockets);
        }
        discard(&self.client_sockets);
        Ok(())
    }

    /// The out phase: see the module docs.
    fn out_phase(&mut self, duration: Duration) -> Result<OutFigures, RelayBenchError> {
        let config = self.config;
        let stop = AtomicBool::new(false);
        let slot = MAX_DATAGRAM_BYTES;
        let allocs_before = allocations(config);
        let (sent, drained) = thread::scope(|scope| {
            let sinks = &self.client_sockets;
            let stop = &stop;
            let drainer = spawn(scope, "tw-drain", move || {
                pin("client", config.client_cpu)?;
                Ok(drain(sinks, slot, stop))
            })?;
            let server = &mut self.server;
            let socket = &self.socket;
            let ids = &self.ids;
            let sent = spawn(scope, "tw-server-out", move || {
                pin("server", config.server_cpu)?;
                serve_out(server, socket, ids, config, duration)
            })
            .map(|server| join(server, "server"));
            // The drain must stop even if the server failed.
            stop.store(true, Ordering::Release);
            Ok::<_, RelayBenchError>((sent?, join(drainer, "client")))
        })?;
        let allocs_after = allocations(config);
        let mut out = sent?;
        let (received, drain_cpu_time) = drained?;
        out.received = received;
        out.drain_cpu_time = drain_cpu_time;
        out.allocations = allocs_before.zip(allocs_after).map(|(a, b)| b - a);
        Ok(out)
    }

    /// An in phase: see the module docs.
    fn in_phase(&mut self, protocol: bool, wait: InWait) -> Result<InFigures, RelayBenchError> {
        let config = self.config;
        // Anything the clients sent earlier (keepalives) is taken in untimed.
        let mut inbox = RecvBatch::with_capacity(config.batch, MAX_DATAGRAM_BYTES);
        let now = Instant::now();
        while inbox.recv_from_fd(self.socket.as_fd()).is_ok_and(|n| n > 0) {
            for (from, datagram) in &inbox {
                self.server.handle_datagram(now, from, datagram);
            }
        }
        while self.server.poll_event().is_some() {}

        let stop = AtomicBool::new(false);
        let start = Barrier::new(2);
        let allocs_before = allocations(config);
        let (received, sent) = thread::scope(|scope| {
            let clients = &mut self.clients;
            let sockets = &self.client_sockets;
            let stop = &stop;
            let start = &start;
            let sender = spawn(scope, "tw-clients", move || {
                let pinned = pin("client", config.client_cpu);
                start.wait();
                pinned?;
                clients_send(clients, sockets, config, stop)
            })?;
            let server = &mut self.server;
            let socket = &self.socket;
            let thread_name = match (protocol, wait) {
                (true, InWait::Readiness) => "tw-in-woken",
                (false, InWait::Readiness) => "tw-in-woken-raw",
                (true, InWait::Sweep) => "tw-in-swept",
                (false, InWait::Sweep) => "tw-in-swept-raw",
            };
            let received = spawn(scope, thread_name, move || {
                let pinned = pin("server", config.server_cpu);
                start.wait();
                pinned?;
                serve_in(server, socket, config, protocol, wait)
            })
            .map(|server| join(server, "server"));
            // The clients must stop even if the server failed; if it never started, they
            // still wait for it at the barrier.
            if received.is_err() {
                start.wait();
            }
            stop.store(true, Ordering::Release);
            Ok::<_, RelayBenchError>((received?, join(sender, "client")))
        })?;
        let allocs_after = allocations(config);
        let mut figures = received?;
        let (client_sent, client_cpu_time) = sent?;
        figures.client_sent = client_sent;
        figures.client_cpu_time = client_cpu_time;
        figures.allocations = allocs_before.zip(allocs_after).map(|(a, b)| b - a);
        Ok(figures)
    }
}

/// Spawns a named scoped thread (the name shows in `perf report --sort comm`).
fn spawn<'scope, T: Send + 'scope>(
    scope: &'scope thread::Scope<'scope, '_>,
    name: &str,
    f: impl FnOnce() -> Result<T, RelayBenchError> + Send + 'scope,
) -> Result<thread::ScopedJoinHandle<'scope, Result<T, RelayBenchError>>, RelayBenchError> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn_scoped(scope, f)
        .map_err(RelayBenchError::Spawn)
}

/// Waits for a benchmark thread and returns what it returned.
fn join<T>(
    handle: thread::ScopedJoinHandle<'_, Result<T, RelayBenchError>>,
    thread: &'static str,
) -> Result<T, RelayBenchError> {
    handle
        .join()
        .unwrap_or(Err(RelayBenchError::Panicked(thread)))
}

/// Queues one message for every connection.
fn queue_round(
    server: &mut Server,
    ids: &[ConnectionId],
    now: Instant,
    payload: &Bytes,
) -> Result<(), RelayBenchError> {
    for &id in ids {
        server
            .send(now, id, UNRELIABLE_CHANNEL, payload.clone())
            .map_err(|e| RelayBenchError::Protocol(format!("queueing a message: {e}")))?;
    }
    Ok(())
}

/// The server's side of the out phase, on the pinned thread.
fn serve_out(
    server: &mut Server,
    socket: &UdpSocket,
    ids: &[ConnectionId],
    config: &RelayConfig,
    duration: Duration,
) -> Result<OutFigures, RelayBenchError> {
    let fd = socket.as_fd();
    let payload = Bytes::from(vec![0xA5; config.message_len]);
    let mut batch = SendBatch::with_capacity(config.batch, MAX_DATAGRAM_BYTES);
    let mut messages = 0u64;
    let mut empty_packets = 0u64;
    let mut shortest = usize::MAX;
    let mut longest = 0;

    let (user_start, _) = thread_user_system();
    let cpu_start = thread_cpu_time();
    let start = Instant::now();
    let deadline = start + duration;
    let mut now = start;
    // The first round is queued before the first `poll_transmit`, so that a connection the
    // untimed setup left quiet for a keepalive interval sends its message, not a keepalive.
    queue_round(server, ids, now, &payload)?;
    messages += ids.len() as u64;
    while now < deadline {
        while !batch.is_full() {
            // As the shard's driver does: each datagram written straight into its slot.
            let mut written = None;
            batch.push_addressed(|slot| {
                let transmit = server.poll_transmit(now, slot)?;
                written = Some(transmit.len);
                Some((transmit.destination, transmit.len))
            });
            match written {
                Some(len) => {
                    empty_packets += u64::from(len <= EMPTY_PACKET_MAX);
                    shortest = shortest.min(len);
                    longest = longest.max(len);
                }
                None => {
                    // Every connection has sent its message: a new round, as a tick would
                    // start one. The driver checks timers once per round, as it would per
                    // tick (nothing is due: every connection sent within the last round).
                    if server.poll_timeout().is_some_and(|at| at <= now) {
                        server.handle_timeout(now);
                    }
                    queue_round(server, ids, now, &payload)?;
                    messages += ids.len() as u64;
                }
            }
        }
        match batch.send_to_fd(fd, false) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_writable(socket.as_raw_fd(), 100);
            }
            Err(e) => return Err(io_error("sendmmsg")(e)),
        }
        now = Instant::now();
    }
    let wall = start.elapsed();
    let server_cpu_time = thread_cpu_time().saturating_sub(cpu_start);
    let server_user_time = thread_user_system().0.saturating_sub(user_start);
    let stats = batch.stats();
    Ok(OutFigures {
        messages,
        sent: stats.datagrams,
        empty_packets,
        bytes: stats.bytes,
        datagram_len_range: (shortest.min(longest), longest),
        received: 0,
        would_block: stats.would_block,
        send_errors: stats.dropped(),
        wall,
        server_cpu_time,
        server_user_time,
        drain_cpu_time: Duration::ZERO,
        allocations: None,
    })
}

/// The server's side of an in phase, on the pinned thread.
fn serve_in(
    server: &mut Server,
    socket: &UdpSocket,
    config: &RelayConfig,
    protocol: bool,
    wait: InWait,
) -> Result<InFigures, RelayBenchError> {
    let fd = socket.as_fd();
    let mut inbox = RecvBatch::with_capacity(config.batch, RecvBatch::DEFAULT_SLOT_SIZE);
    let dropped_before = server.stats().dropped.total();
    let mut messages = 0u64;
    let mut waits = 0u64;

    let (user_start, _) = thread_user_system();
    let cpu_start = thread_cpu_time();
    let start = Instant::now();
    let deadline = start + config.duration;
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        match inbox.recv_from_fd(fd) {
            Ok(_) if protocol => {
                for (from, datagram) in &inbox {
                    server.handle_datagram(now, from, datagram);
                }
                while let Some(event) = server.poll_event() {
                    messages += u64::from(matches!(event, ServerEvent::Message { .. }));
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                waits += 1;
                match wait {
                    InWait::Readiness => {
                        let left = deadline.saturating_duration_since(now);
                        wait_readable(socket.as_raw_fd(), left.as_millis().min(100) as i32 + 1);
                    }
                    InWait::Sweep => thread::sleep(Duration::from_millis(1)),
                }
            }
            Err(e) => return Err(io_error("recvmmsg")(e)),
        }
    }
    let wall = start.elapsed();
    let server_cpu_time = thread_cpu_time().saturating_sub(cpu_start);
    let server_user_time = thread_user_system().0.saturating_sub(user_start);
    let stats = inbox.stats();
    Ok(InFigures {
        protocol,
        wait,
        client_sent: 0,
        received: stats.datagrams,
        messages,
        dropped: server.stats().dropped.total() - dropped_before,
        recv_calls: stats.syscalls,
        waits,
        wall,
        server_cpu_time,
        server_user_time,
        client_cpu_time: Duration::ZERO,
        allocations: None,
    })
}

/// The clients' side of an in phase: each client in turn queues a message, writes its packet
/// and sends it from its own socket (`client_burst` at a time), until `stop`.
fn clients_send(
    clients: &mut [Client],
    sockets: &[UdpSocket],
    config: &RelayConfig,
    stop: &AtomicBool,
) -> Result<(u64, Duration), RelayBenchError> {
    let payload = Bytes::from(vec![0x5A; config.message_len]);
    let mut batch = SendBatch::with_capacity(config.client_burst, MAX_DATAGRAM_BYTES);
    let mut scratch = vec![0u8; MAX_DATAGRAM_BYTES];
    let cpu_start = thread_cpu_time();
    'sending: loop {
        let now = Instant::now();
        for (client, socket) in clients.iter_mut().zip(sockets) {
            if stop.load(Ordering::Relaxed) {
                break 'sending;
            }
            for _ in 0..config.client_burst {
                client
                    .send(UNRELIABLE_CHANNEL, payload.clone())
                    .map_err(|e| RelayBenchError::Protocol(format!("a client's send: {e}")))?;
                if let Some(transmit) = client.poll_transmit(now, &mut scratch) {
                    batch.push(transmit.destination, &scratch[..transmit.len]);
                }
            }
            while !batch.is_empty() {
                match batch.send_to_fd(socket.as_fd(), false) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        wait_writable(socket.as_raw_fd(), 100);
                    }
                    Err(e) => return Err(io_error("sendmmsg")(e)),
                }
            }
        }
    }
    Ok((
        batch.stats().datagrams,
        thread_cpu_time().saturating_sub(cpu_start),
    ))
}

/// Adds another slice's raw figures to `total`.
fn add_raw(total: &mut RawFigures, slice: RawFigures) {
    total.sent += slice.sent;
    total.received += slice.received;
    total.would_block += slice.would_block;
    total.send_errors += slice.send_errors;
    total.wall += slice.wall;
    total.sender_cpu_time += slice.sender_cpu_time;
    total.receiver_cpu_time += slice.receiver_cpu_time;
}

/// Sends everything in `batch`, waiting out a full send buffer.
fn send_all(socket: &UdpSocket, batch: &mut SendBatch) -> Result<(), RelayBenchError> {
    while !batch.is_empty() {
        match batch.send_to_fd(socket.as_fd(), false) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_writable(socket.as_raw_fd(), 100);
            }
            Err(e) => return Err(io_error("sendmmsg")(e)),
        }
    }
    Ok(())
}

/// Sends one handshake datagram; a full buffer loses it, which the handshake's resends cover.
fn send_one(socket: &UdpSocket, datagram: &[u8], to: SocketAddr) -> Result<(), RelayBenchError> {
    match socket.send_to(datagram, to) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(io_error("sendto")(e)),
    }
}

/// Empties every socket in `sockets` without looking at what it held.
fn discard(sockets: &[UdpSocket]) {
    let mut buf = [0u8; MAX_DATAGRAM_BYTES];
    for socket in sockets {
        while socket.recv(&mut buf).is_ok() {}
    }
}

/// User and system CPU time the calling thread has used so far (`RUSAGE_THREAD`). The split
/// is sampled at scheduler ticks, so over a short phase it is an estimate; the sum is exact.
fn thread_user_system() -> (Duration, Duration) {
    // SAFETY: an all-zero `rusage` is a valid value for the kernel to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_THREAD is supported on Linux.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let time = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    (time(usage.ru_utime), time(usage.ru_stime))
}

/// Waits up to `timeout_ms` for `fd` to have something to read.
fn wait_readable(fd: RawFd, timeout_ms: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, and nfds says one.
    unsafe { libc::poll(ptr::from_mut(&mut pfd), 1, timeout_ms) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short() -> RelayConfig {
        RelayConfig {
            destinations: 8,
            duration: Duration::from_millis(100),
            // Unpinned, so the test runs on a machine of any size.
            server_cpu: None,
            client_cpu: None,
            ..RelayConfig::default()
        }
    }

    #[test]
    fn a_short_relay_moves_datagrams_in_every_phase() {
        let figures = protocol_relay(&short()).expect("the relay runs");
        let out = &figures.out;
        assert_eq!(
            figures.datagram_len, 64,
            "34-byte messages make 64-byte datagrams"
        );
        assert_eq!(
            out.datagram_len_range,
            (64, 64),
            "every datagram has one message"
        );
        assert_eq!(
            out.empty_packets, 0,
            "no keepalive or lone ack in the out phase"
        );
        assert!(out.sent > 0, "the server sent nothing: {out:?}");
        assert!(
            out.messages >= out.sent,
            "a datagram without a queued message: {out:?}"
        );
        assert!(
            out.received > 0 && out.received <= out.sent,
            "the clients' sockets received {} of {}",
            out.received,
            out.sent
        );
        assert_eq!(out.send_errors, 0);
        assert_eq!(
            figures.raw.config.payload_len, 64,
            "the raw loop sends the same size"
        );
        assert!(figures.raw.sent > 0 && figures.ratio_to_raw() > 0.0);
        for (phase, protocol) in [
            (&figures.inbound, true),
            (&figures.inbound_raw, false),
            (&figures.inbound_swept, true),
            (&figures.inbound_swept_raw, false),
        ] {
            assert_eq!(phase.protocol, protocol);
            assert!(phase.received > 0, "the server received nothing: {phase:?}");
            assert!(phase.received <= phase.client_sent, "{phase:?}");
            assert_eq!(
                phase.dropped, 0,
                "the server refused valid datagrams: {phase:?}"
            );
            let expected = if protocol { phase.received } else { 0 };
            assert_eq!(
                phase.messages, expected,
                "one message per datagram with the protocol, none without: {phase:?}"
            );
        }
    }

    #[test]
    fn bad_configurations_are_refused_before_any_socket_opens() {
        let refused = |config: RelayConfig| protocol_relay(&config).map(|_| ()).unwrap_err();
        assert!(matches!(
            refused(RelayConfig {
                destinations: 0,
                ..short()
            }),
            RelayBenchError::Destinations(0)
        ));
        assert!(matches!(
            refused(RelayConfig {
                message_len: 4,
                ..short()
            }),
            RelayBenchError::MessageLen(4)
        ));
        assert!(matches!(
            refused(RelayConfig {
                batch: 0,
                ..short()
            }),
            RelayBenchError::Batch(0)
        ));
    }
}
