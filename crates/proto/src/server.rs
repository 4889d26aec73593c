//! The server endpoint: accepts connections from clients holding connect tokens and runs
//! every established connection, without I/O.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::admission::{Admission, Binding, Refusal, SealedToken, UsedTokens};
use crate::connection::{
    Connection, ConnectionStats, DISCONNECT_REDUNDANCY, MAX_DISCONNECT_BODY, Received, Refused,
    Sender, write_disconnect,
};
use crate::crypto::{Cipher, Key};
use crate::deadlines::Deadlines;
use crate::packet::{
    CHALLENGE_BYTES, CHALLENGE_TOKEN_BYTES, ChallengeToken, EncryptedHeader,
    HANDSHAKE_SEQUENCE_BIT, PacketType, RESPONSE_BYTES, Request, is_handshake_sequence,
    write_encrypted,
};
use crate::params::{ConnectionParams, DisconnectReason, ParamsError};
use crate::reliable::{Owned, ReliabilityConfig, SendError};
use crate::staged::StagedPackets;
use crate::token::USER_DATA_BYTES;
use crate::{Transmit, UnixClock};

/// The server's lookup tables, read for every datagram. foldhash, seeded per map, rather
/// than std's SipHash: hashing a `SocketAddr` with SipHash cost more than the table lookup
/// around it. The keys a peer could choose do not reach these maps before a valid connect
/// token and a challenge answered from that address.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Largest datagram the server reads; anything longer is not a tickwire packet.
pub const MAX_DATAGRAM_BYTES: usize = 2048;
/// Handshake replies waiting for `poll_transmit`; beyond this, new requests are dropped
/// (and counted) until the driver catches up.
const MAX_PENDING_REPLIES: usize = 1024;
/// Largest handshake reply: a challenge packet.
const MAX_REPLY_BYTES: usize = CHALLENGE_BYTES;
/// Challenges waiting for their response, at most; past it, requests for new ones are
/// dropped (and counted as overloaded) until the oldest expire or are answered.
const MAX_PENDING_CHALLENGES: usize = 16_384;
/// How long a challenge may be answered (less, if the connect token expires sooner).
pub const CHALLENGE_LIFETIME: Duration = Duration::from_secs(30);
/// How often the server gives back what its queues and tables grew for a crowd that has
/// gone (5,000 connects, then 5,000 goodbyes of three replies each would otherwise stay
/// allocated for good): at most one reallocation each this often, whatever the traffic.
pub const TIDY_INTERVAL: Duration = Duration::from_secs(1);
/// Capacity a queue or table always keeps: below it, handing memory back is not worth the
/// reallocation.
const KEPT_CAPACITY: usize = 64;

/// How a server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The game's protocol id; requests for others are dropped.
    pub protocol_id: u64,
    /// The key connect tokens are sealed with (shared with the token issuer).
    pub private_key: Key,
    /// This server's public addresses; a token must name one of them.
    pub public_addresses: Vec<SocketAddr>,
    /// Most clients connected at once; others are denied with [`DisconnectReason::ServerFull`].
    pub max_clients: usize,
    /// What every client is told in the accepted packet (its tick rate may be decided per
    /// connection by [`Server::accept`]).
    pub params: ConnectionParams,
    /// The driver, not the handshake, says when a connection is accepted: the client hears
    /// the accepted packet only once [`Server::accept`] is called, with the tick rate the
    /// driver gives (a room server seats the player first and tells it its room's rate).
    /// Until then a client's resent response goes unanswered; a connection never accepted
    /// times out. Off by default: every connection is accepted with `params` as it arrives.
    pub accept_by_driver: bool,
    /// Per-connection bounds of the reliability layer (channels and payload size come from
    /// `params`).
    pub reliability: ReliabilityConfig,
    /// Connect tokens already used. A fresh set by default; give every UDP server and the
    /// WebSocket/WebTransport endpoint of one process clones of one set, so a token opens
    /// one connection on one transport.
    pub used_tokens: UsedTokens,
}

impl ServerConfig {
    /// A configuration with default parameters for `public_addresses`.
    pub fn new(protocol_id: u64, private_key: Key, public_addresses: Vec<SocketAddr>) -> Self {
        Self {
            protocol_id,
            private_key,
            public_addresses,
            max_clients: 4096,
            params: ConnectionParams::default(),
            accept_by_driver: false,
            reliability: ReliabilityConfig::default(),
            used_tokens: UsedTokens::new(16_384),
        }
    }
}

/// Identifies a connection on one server; never reused for a later connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId {
    slot: u32,
    generation: u32,
}

/// Something that happened, for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A client completed the handshake. With [`ServerConfig::accept_by_driver`], answer with
    /// [`Server::accept`] or [`Server::disconnect_saying`].
    Connected {
        /// The new connection.
        connection: ConnectionId,
        /// The client id from its connect token.
        client_id: u64,
        /// Where the client's packets come from.
        address: SocketAddr,
        /// Application data from the connect token.
        user_data: Box<[u8; USER_DATA_BYTES]>,
    },
    /// A message arrived.
    Message {
        /// From whom.
        connection: ConnectionId,
        /// On which channel.
        channel: u8,
        /// The message.
        message: Bytes,
    },
    /// A connection ended.
    Disconnected {
        /// Which connection.
        connection: ConnectionId,
        /// Its client id.
        client_id: u64,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Why [`Server::send`] did not queue a message.
#[derive(Debug, thiserror::Error)]
pub enum ServerSendError {
    /// The connection has ended (or never existed).
    #[error("no such connection")]
    UnknownConnection,
    /// The connection refused the message.
    #[error(transparent)]
    Send(#[from] SendError),
}

/// Why a datagram was dropped, counted in [`ServerStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Not a tickwire packet, or a malformed one.
    Malformed,
    /// A connection request for another protocol id.
    WrongProtocol,
    /// A connect token past its expiry.
    TokenExpired,
    /// A connect token whose private part does not authenticate.
    TokenTampered,
    /// A connect token that does not name this server.
    TokenWrongServer,
    /// A connect token already used from another address or over another transport.
    TokenReplayed,
    /// A challenge response that does not authenticate, answers no challenge pending for
    /// its address (expired, answered already, or superseded by a newer one), or expired.
    ChallengeInvalid,
    /// An encrypted packet from an address with no connection.
    UnknownAddress,
    /// An encrypted packet whose sequence was already seen.
    PacketReplayed,
    /// An encrypted packet that does not authenticate under its connection's key.
    Unauthenticated,
    /// The handshake reply queue was full.
    Overloaded,
}

/// Counters of everything the server received, sent and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Datagrams handed to `handle_datagram`.
    pub datagrams_received: u64,
    /// Bytes handed to `handle_datagram`.
    pub bytes_received: u64,
    /// Datagrams returned by `poll_transmit`.
    pub datagrams_sent: u64,
    /// Bytes returned by `poll_transmit`.
    pub bytes_sent: u64,
    /// Bytes sent in reply to packets from clients not yet connected (requests and
    /// responses); never more than the bytes those packets carried.
    pub handshake_bytes_sent: u64,
    /// Bytes of requests and responses received from clients not yet connected.
    pub handshake_bytes_received: u64,
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connection attempts denied (the server was full).
    pub connections_denied: u64,
    /// Connections replaced by a newer connection of the same client id.
    pub connections_replaced: u64,
    /// Messages given to [`Server::send`] that no packet could carry (an unreliable message
    /// longer than one packet holds): refused and dropped, the connection kept.
    pub messages_too_large: u64,
    /// Dropped datagrams, by reason.
    pub dropped: DropCounts,
}

/// Dropped datagrams by [`DropReason`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct DropCounts {
    pub malformed: u64,
    pub wrong_protocol: u64,
    pub token_expired: u64,
    pub token_tampered: u64,
    pub token_wrong_server: u64,
    pub token_replayed: u64,
    pub challenge_invalid: u64,
    pub unknown_address: u64,
    pub packet_replayed: u64,
    pub unauthenticated: u64,
    pub overloaded: u64,
}

impl From<&Refusal> for DropReason {
    /// How a refused connect token is counted: the one mapping from admission to UDP.
    fn from(refusal: &Refusal) -> Self {
        match refusal {
            Refusal::Malformed { .. } | Refusal::PrivateMalformed => Self::Malformed,
            Refusal::WrongProtocol { .. } => Self::WrongProtocol,
            Refusal::Expired { .. } => Self::TokenExpired,
            Refusal::Tampered => Self::TokenTampered,
            Refusal::WrongServer { .. } => Self::TokenWrongServer,
            Refusal::Replayed { .. } => Self::TokenReplayed,
        }
    }
}

impl DropCounts {
    fn count(&mut self, reason: DropReason) {
        let counter = match reason {
            DropReason::Malformed => &mut self.malformed,
            DropReason::WrongProtocol => &mut self.wrong_protocol,
            DropReason::TokenExpired => &mut self.token_expired,
            DropReason::TokenTampered => &mut self.token_tampered,
            DropReason::TokenWrongServer => &mut self.token_wrong_server,
            DropReason::TokenReplayed => &mut self.token_replayed,
            DropReason::ChallengeInvalid => &mut self.challenge_invalid,
            DropReason::UnknownAddress => &mut self.unknown_address,
            DropReason::PacketReplayed => &mut self.packet_replayed,
            DropReason::Unauthenticated => &mut self.unauthenticated,
            DropReason::Overloaded => &mut self.overloaded,
        };
        *counter += 1;
    }

    /// All drops together.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.wrong_protocol
            + self.token_expired
            + self.token_tampered
            + self.token_wrong_server
            + self.token_replayed
            + self.challenge_invalid
            + self.unknown_address
            + self.packet_replayed
            + self.unauthenticated
            + self.overloaded
    }
}

/// A handshake or disconnect datagram waiting to be sent.
struct PendingReply {
    to: SocketAddr,
    len: usize,
    bytes: [u8; MAX_REPLY_BYTES],
}

/// Queues a datagram that `write` fills into a fresh reply slot; handshake replies are
/// counted against the no-amplification budget.
fn queue_reply(
    replies: &mut VecDeque<PendingReply>,
    stats: &mut ServerStats,
    to: SocketAddr,
    handshake: bool,
    write: impl FnOnce(&mut [u8]) -> Option<usize>,
) {
    let mut reply = PendingReply {
        to,
        len: 0,
        bytes: [0; MAX_REPLY_BYTES],
    };
    if let Some(len) = write(&mut reply.bytes) {
        reply.len = len;
        if handshake {
            stats.handshake_bytes_sent += len as u64;
        }
        replies.push_back(reply);
    }
}

/// Gives back most of a queue's capacity when it holds far more than `usual` (for the
/// queues whose length follows the population: a few entries per connection).
fn shrink_queue<T>(queue: &mut VecDeque<T>, usual: usize) {
    if queue.capacity() > 4 * usual.max(queue.len()).max(KEPT_CAPACITY) {
        queue.shrink_to((2 * usual).max(queue.len()).max(KEPT_CAPACITY));
    }
}

/// Gives back most of a map's capacity once a quarter of it or less is in use (room to
/// double again before it grows).
fn shrink_map<K: Eq + std::hash::Hash, V>(map: &mut FastMap<K, V>) {
    if map.capacity() > KEPT_CAPACITY && map.len() * 4 < map.capacity() {
        map.shrink_to((map.len() * 2).max(KEPT_CAPACITY));
    }
}

/// The challenges sent to one address for one connect token and not yet answered.
struct PendingChallenge {
    /// The first and the newest challenge's sequences: a repeated request (its challenge
    /// may have been lost) gets a challenge of its own sequence, and a response may answer
    /// any of them, since the client answers whichever arrived. Sequences between them went
    /// to other clients, sealed under their keys: a response claiming one does not open.
    first_sequence: u64,
    latest_sequence: u64,
    /// The key the client seals its response with, from its connect token.
    client_to_server_key: Key,
    /// The token's expiry: a request with an older token (a recorded one, replayed) does
    /// not replace this entry.
    token_expiry: u64,
    expires: Instant,
}

/// What [`PendingChallenges::insert`] did with a challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filed {
    /// Filed: the address may answer it.
    Yes,
    /// The table is full of entries that have not expired.
    Full,
    /// The address is answering a challenge for a newer token: this request's token is an
    /// older one (a recorded request, replayed to break the newer handshake).
    Superseded,
}

/// The challenges waiting for a response, by client address: a request with a newer token
/// from the address replaces its entry, and an answered entry is removed, so the challenges
/// of one request open at most one connection and a recorded response is worth nothing once
/// used. Bounded by [`MAX_PENDING_CHALLENGES`]; each entry expires [`CHALLENGE_LIFETIME`]
/// after its first challenge.
#[derive(Default)]
struct PendingChallenges {
    by_address: FastMap<SocketAddr, PendingChallenge>,
    /// `(expiry, address, sequence)` in the order challenges were sent, to expire them
    /// oldest first; an entry whose address has since moved on to a newer challenge (or
    /// none) is skipped.
    order: VecDeque<(Instant, SocketAddr, u64)>,
}

impl PendingChallenges {
    fn expire(&mut self, now: Instant) {
        while let Some(&(expires, address, sequence)) = self.order.front()
            && expires <= now
        {
            self.order.pop_front();
            if self
                .by_address
                .get(&address)
                .is_some_and(|pending| pending.first_sequence == sequence)
            {
                self.by_address.remove(&address);
            }
        }
    }

    /// Files challenge `sequence` for `address` and the token whose client-to-server key is
    /// `key` and expiry `token_expiry`: one more for the entry of that token, or a new entry
    /// replacing an older token's.
    fn insert(
        &mut self,
        now: Instant,
        address: SocketAddr,
        sequence: u64,
        key: &Key,
        token_expiry: u64,
        lifetime: Duration,
    ) -> Filed {
        self.expire(now);
        if let Some(pending) = self.by_address.get_mut(&address)
            && pending.expires > now
        {
            if pending.client_to_server_key == *key {
                pending.latest_sequence = sequence;
                return Filed::Yes;
            }
            if token_expiry < pending.token_expiry {
                return Filed::Superseded;
            }
        }
        if self.by_address.len() >= MAX_PENDING_CHALLENGES
            && !self.by_address.contains_key(&address)
        {
            return Filed::Full;
        }
        let expires = now + lifetime;
        self.order.push_back((expires, address, sequence));
        self.by_address.insert(
            address,
            PendingChallenge {
                first_sequence: sequence,
                latest_sequence: sequence,
                client_to_server_key: key.clone(),
                token_expiry,
                expires,
            },
        );
        Filed::Yes
    }

    /// The key a response from `address` claiming challenge `sequence` must be sealed
    /// with, if that challenge may be answered.
    fn key_for(&self, now: Instant, address: SocketAddr, sequence: u64) -> Option<Key> {
        self.by_address
            .get(&address)
            .filter(|pending| {
                (pending.first_sequence..=pending.latest_sequence).contains(&sequence)
                    && pending.expires > now
            })
            .map(|pending| pending.client_to_server_key.clone())
    }

    /// `address` answered its challenge: it cannot be answered again.
    fn answered(&mut self, address: SocketAddr) {
        self.by_address.remove(&address);
    }

    fn tidy(&mut self, now: Instant) {
        self.expire(now);
        shrink_map(&mut self.by_address);
        shrink_queue(&mut self.order, self.by_address.len());
    }
}

struct Slot {
    generation: u32,
    /// Boxed: a connection is about 2 KB, and slots are never given back (a freed one waits
    /// for the next connection), so inline they would keep a crowd's peak in memory for
    /// good; boxed, a slot that outlives its connection costs a few bytes.
    connection: Option<Box<Connection>>,
    /// The slot is in the ready queue. It stays there when its connection ends (and may be
    /// visited for a later connection in the same slot), so this is about the slot.
    ready: bool,
    /// The tick rate the connection's accepted packet carries, once it is accepted.
    accepted_tick_rate_hz: Option<u8>,
}

/// The server endpoint of the tickwire protocol.
///
/// Sans-IO: the driver owns the socket and the clock. Its loop, for every batch of datagrams:
///
/// 1. [`handle_datagram`](Self::handle_datagram) for each datagram received;
/// 2. [`poll_event`](Self::poll_event) until `None`, handing connections, messages and
///    disconnects to the game, which calls [`send`](Self::send) and
///    [`disconnect`](Self::disconnect);
/// 3. [`handle_timeout`](Self::handle_timeout) when the time from
///    [`poll_timeout`](Self::poll_timeout) has come (keepalives, resends, timeouts), then
///    `poll_event` again;
/// 4. [`poll_transmit`](Self::poll_transmit) until `None`, sending each datagram;
/// 5. sleep until the next datagram or `poll_timeout`.
///
/// Neither `poll_transmit` nor the timers visit every connection: a connection enters a
/// ready queue when it is given something to send ([`send`](Self::send), a datagram that
/// wants an ack, a keepalive or resend that came due in `handle_timeout`), and its next
/// deadline (keepalive, resend, timeout) sits in a heap keyed by slot, so each call costs
/// the connections it serves, not the connections there are.
pub struct Server {
    config: ServerConfig,
    admission: Admission,
    challenge_cipher: Cipher,
    /// The next challenge's or denial's sequence: from a random point of the handshake half
    /// of the sequence space ([`HANDSHAKE_SEQUENCE_BIT`]), up by one each time, so no two
    /// handshake packets of this server share a nonce, nor (the start being random) two
    /// servers' packets for one client that tries both.
    handshake_sequence: u64,
    /// The challenge each address may answer, and the key its answer is sealed with.
    pending: PendingChallenges,
    clock: UnixClock,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    by_address: FastMap<SocketAddr, u32>,
    by_client_id: FastMap<u64, u32>,
    replies: VecDeque<PendingReply>,
    events: VecDeque<ServerEvent>,
    /// Slots whose connection may have a packet to write, each at most once, served in
    /// turn: a connection with more after its packet goes to the back, so a busy one
    /// cannot starve the rest.
    ready: VecDeque<u32>,
    /// Each connection's next deadline, unless it is in `ready` after its deadline came
    /// (it gets one back when `poll_transmit` serves it). Every live connection is in one
    /// or both.
    deadlines: Deadlines,
    /// When `poll_transmit` next gives back what a crowd left ([`TIDY_INTERVAL`]).
    next_tidy: Instant,
    scratch: Box<[u8; MAX_DATAGRAM_BYTES]>,
    /// Payload packets written ahead and sealed together, handed out by `poll_transmit`.
    staged: StagedPackets,
    stats: ServerStats,
}

impl Server {
    /// A server whose clock reads `unix_time` seconds at `now`. `rng` supplies the key that
    /// seals challenge tokens, fresh for every server so challenge nonces never repeat
    /// under one key.
    pub fn new(
        config: ServerConfig,
        now: Instant,
        unix_time: u64,
        rng: &mut (impl rand::CryptoRng + ?Sized),
    ) -> Result<Self, ParamsError> {
        config.params.validate()?;
        Ok(Self {
            admission: Admission::new(
                config.protocol_id,
                &config.private_key,
                config.public_addresses.clone(),
                config.used_tokens.clone(),
            ),
            challenge_cipher: Cipher::new(&Key::random(rng)),
            handshake_sequence: HANDSHAKE_SEQUENCE_BIT | (rng.next_u64() >> 2),
            pending: PendingChallenges::default(),
            clock: UnixClock::new(now, unix_time),
            slots: Vec::new(),
            free_slots: Vec::new(),
            by_address: FastMap::default(),
            by_client_id: FastMap::default(),
            replies: VecDeque::new(),
            events: VecDeque::new(),
            ready: VecDeque::new(),
            deadlines: Deadlines::new(now),
            next_tidy: now + TIDY_INTERVAL,
            scratch: Box::new([0; MAX_DATAGRAM_BYTES]),
            staged: StagedPackets::new(),
            stats: ServerStats::default(),
            config,
        })
    }

    /// Counters of traffic and drops.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Clients connected now.
    pub fn connection_count(&self) -> usize {
        self.by_address.len()
    }

    /// Figures about one connection.
    pub fn connection_stats(&self, id: ConnectionId) -> Option<ConnectionStats> {
        self.connection(id).map(Connection::stats)
    }

    fn connection(&self, id: ConnectionId) -> Option<&Connection> {
        let slot = self.slots.get(id.slot as usize)?;
        (slot.generation == id.generation)
            .then_some(slot.connection.as_deref())
            .flatten()
    }

    fn connection_mut(&mut self, id: ConnectionId) -> Option<&mut Connection> {
        let slot = self.slots.get_mut(id.slot as usize)?;
        (slot.generation == id.generation)
            .then_some(slot.connection.as_deref_mut())
            .flatten()
    }

    fn id_of(&self, slot: u32) -> ConnectionId {
        ConnectionId {
            slot,
            generation: self.slots[slot as usize].generation,
        }
    }

    fn drop_datagram(&mut self, reason: DropReason) {
        self.stats.dropped.count(reason);
    }

    /// Starts loading the state of the connection at `from`, if there is one, without
    /// waiting: a driver with a batch of datagrams calls it for each before handing them
    /// to [`handle_datagram`](Self::handle_datagram), so the connections' cache misses
    /// overlap instead of being waited out one after another (see
    /// [`prefetch`](crate::prefetch)). A hint; it changes nothing.
    #[inline]
    pub fn prefetch(&self, from: SocketAddr) {
        if let Some(&slot) = self.by_address.get(&from) {
            self.prefetch_slot(slot);
        }
    }

    #[inline]
    fn prefetch_slot(&self, slot: u32) {
        if let Some(connection) = self.live(slot) {
            crate::prefetch::prefetch(connection);
        }
    }

    /// The connection in `slot`, if it has one.
    fn live(&self, slot: u32) -> Option<&Connection> {
        self.slots.get(slot as usize)?.connection.as_deref()
    }

    /// Takes in one datagram. Never fails: whatever is wrong with it is counted in
    /// [`stats`](Self::stats) and the datagram dropped.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        if datagram.len() > MAX_DATAGRAM_BYTES {
            return self.drop_datagram(DropReason::Malformed);
        }
        if let Some(&slot) = self.by_address.get(&from) {
            return self.handle_connected(now, slot, datagram);
        }
        match PacketType::of(datagram) {
            Some(PacketType::Request) => self.handle_request(now, from, datagram),
            Some(PacketType::Response) => self.handle_response(now, from, datagram),
            Some(_) => self.drop_datagram(DropReason::UnknownAddress),
            None => self.drop_datagram(DropReason::Malformed),
        }
    }

    fn handle_connected(&mut self, now: Instant, slot: u32, datagram: &[u8]) {
        let id = self.id_of(slot);
        if PacketType::of(datagram) == Some(PacketType::Response) {
            // The client has not seen our accepted packet yet; say it again, but only for a
            // response sealed with the connection's key: anything less would let a spoofed
            // byte buy a larger reply.
            let genuine = datagram.len() == RESPONSE_BYTES
                && EncryptedHeader::read(datagram).is_some_and(|header| {
                    is_handshake_sequence(header.sequence)
                        && self.slots[slot as usize]
                            .connection
                            .as_ref()
                            .is_some_and(|connection| {
                                connection.authenticates(header, datagram, &mut self.scratch[..])
                            })
                });
            if genuine {
                return self.send_accepted(now, slot);
            }
            return self.drop_datagram(DropReason::ChallengeInvalid);
        }
        let Some(header) = EncryptedHeader::read(datagram) else {
            return self.drop_datagram(DropReason::Malformed);
        };
        let Some(connection) = self.slots[slot as usize].connection.as_mut() else {
            return;
        };
        let events = &mut self.events;
        let mut deliver = Owned(|channel, message| {
            events.push_back(ServerEvent::Message {
                connection: id,
                channel,
                message,
            });
        });
        match connection.handle_datagram(
            now,
            header,
            datagram,
            &mut self.scratch[..],
            &mut deliver,
            Sender::Client,
        ) {
            Ok(Received::Payload) => {
                // Acks may have freed the window or moved the resend timer, and the packet
                // may want an ack of its own.
                self.touch(slot, now);
            }
            Ok(Received::Disconnect(reason, _)) => self.remove(slot, reason, None, now),
            Ok(Received::Other) => self.touch(slot, now),
            Err(Refused::Replay) => self.drop_datagram(DropReason::PacketReplayed),
            Err(Refused::Unauthenticated) => self.drop_datagram(DropReason::Unauthenticated),
            Err(Refused::Malformed | Refused::NotOnConnection) => {
                self.drop_datagram(DropReason::Malformed)
            }
            Err(Refused::Fatal(reason)) => self.remove(slot, reason, Some(""), now),
        }
    }

    fn handle_request(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        let Some(request) = Request::read(datagram) else {
            return self.drop_datagram(DropReason::Malformed);
        };
        let token = SealedToken {
            protocol_id: request.protocol_id,
            expire_timestamp: request.expire_timestamp,
            nonce: request.nonce,
            private_token: request.private_token,
        };
        let unix_now = self.clock.unix_seconds(now);
        let binding = Binding::Address(from);
        let admitted = match self.admission.check(token, binding, unix_now) {
            Ok(admitted) => admitted,
            Err(refusal) => return self.drop_datagram(DropReason::from(&refusal)),
        };
        if self.replies.len() >= MAX_PENDING_REPLIES {
            return self.drop_datagram(DropReason::Overloaded);
        }
        self.stats.handshake_bytes_received += datagram.len() as u64;
        let server_to_client = Cipher::new(&admitted.server_to_client_key);
        // A client id already connected may be the same client on a new address: it is
        // let through, and replaces the old connection if it completes the handshake. A
        // client turned away keeps its token (it is not claimed) for a server with room.
        if self.by_address.len() >= self.config.max_clients
            && !self.by_client_id.contains_key(&admitted.client_id)
        {
            return self.deny(from, &server_to_client, DisconnectReason::ServerFull);
        }
        if let Err(refusal) = self.admission.claim(token, binding, unix_now) {
            return self.drop_datagram(DropReason::from(&refusal));
        }
        let Some(sequence) = self.next_handshake_sequence() else {
            return self.drop_datagram(DropReason::Overloaded);
        };
        let token_life = Duration::from_secs(request.expire_timestamp.saturating_sub(unix_now));
        let lifetime = token_life.min(CHALLENGE_LIFETIME);
        match self.pending.insert(
            now,
            from,
            sequence,
            &admitted.client_to_server_key,
            request.expire_timestamp,
            lifetime,
        ) {
            Filed::Yes => {}
            Filed::Full => return self.drop_datagram(DropReason::Overloaded),
            Filed::Superseded => return self.drop_datagram(DropReason::TokenReplayed),
        }
        let challenge = ChallengeToken {
            client_id: admitted.client_id,
            expire_timestamp: request.expire_timestamp,
            client_address: from,
            client_to_server_key: admitted.client_to_server_key,
            server_to_client_key: admitted.server_to_client_key,
            user_data: *admitted.user_data,
        };
        // The challenge token is sealed with the challenge packet's own sequence: unique
        // under the challenge key as under the client's.
        let sealed = challenge.seal(&self.challenge_cipher, self.config.protocol_id, sequence);
        let protocol_id = self.config.protocol_id;
        queue_reply(&mut self.replies, &mut self.stats, from, true, |buf| {
            write_encrypted(
                buf,
                PacketType::Challenge,
                sequence,
                &server_to_client,
                protocol_id,
                |body| {
                    body.get_mut(..CHALLENGE_TOKEN_BYTES)?
                        .copy_from_slice(&sealed);
                    Some(CHALLENGE_TOKEN_BYTES)
                },
            )
        });
    }

    /// The next handshake packet's sequence; `None` once the handshake half of the
    /// sequence space is spent (2^62 packets after a random start: never, in practice).
    fn next_handshake_sequence(&mut self) -> Option<u64> {
        let sequence = self.handshake_sequence;
        self.handshake_sequence = sequence.checked_add(1)?;
        Some(sequence)
    }

    fn deny(&mut self, to: SocketAddr, cipher: &Cipher, reason: DisconnectReason) {
        let Some(sequence) = self.next_handshake_sequence() else {
            return self.drop_datagram(DropReason::Overloaded);
        };
        self.stats.connections_denied += 1;
        let protocol_id = self.config.protocol_id;
        queue_reply(&mut self.replies, &mut self.stats, to, true, |buf| {
            write_encrypted(
                buf,
                PacketType::Denied,
                sequence,
                cipher,
                protocol_id,
                |body| {
                    *body.first_mut()? = reason.code();
                    Some(1)
                },
            )
        });
    }

    /// A response's challenge token, if the response answers the challenge pending for
    /// `from`, authenticates under that client's key, and its token opens and is current.
    fn open_response(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Option<ChallengeToken> {
        if datagram.len() != RESPONSE_BYTES {
            return None;
        }
        let header = EncryptedHeader::read(datagram)?;
        let key = self.pending.key_for(now, from, header.sequence)?;
        let body = header.open(
            datagram,
            &Cipher::new(&key),
            self.config.protocol_id,
            &mut self.scratch[..],
        )?;
        let challenge = ChallengeToken::open(
            body.try_into().ok()?,
            &self.challenge_cipher,
            self.config.protocol_id,
            header.sequence,
        )?;
        (challenge.expire_timestamp > self.clock.unix_seconds(now)
            && challenge.client_address == from)
            .then_some(challenge)
    }

    fn handle_response(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        let Some(challenge) = self.open_response(now, from, datagram) else {
            return self.drop_datagram(DropReason::ChallengeInvalid);
        };
        self.pending.answered(from);
        self.stats.handshake_bytes_received += datagram.len() as u64;
        // The same client id from another address with a fresh, single-use token is that
        // client again (a phone that changed networks): the newer connection replaces the
        // older rather than waiting for it to time out. Only the token issuer can cause
        // this, since it alone issues tokens for the id.
        if let Some(&older) = self.by_client_id.get(&challenge.client_id) {
            self.stats.connections_replaced += 1;
            self.remove(older, DisconnectReason::AlreadyConnected, Some(""), now);
        }
        if self.by_address.len() >= self.config.max_clients {
            let cipher = Cipher::new(&challenge.server_to_client_key);
            return self.deny(from, &cipher, DisconnectReason::ServerFull);
        }
        let connection = match Connection::new(
            now,
            from,
            challenge.client_id,
            self.config.protocol_id,
            &challenge.server_to_client_key,
            &challenge.client_to_server_key,
            &self.config.params,
            &self.config.reliability,
        ) {
            Ok(connection) => connection,
            Err(_) => return self.drop_datagram(DropReason::Overloaded),
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                let entry = &mut self.slots[slot as usize];
                entry.connection = Some(Box::new(connection));
                entry.accepted_tick_rate_hz = None;
                slot
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    connection: Some(Box::new(connection)),
                    ready: false,
                    accepted_tick_rate_hz: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.by_address.insert(from, slot);
        self.by_client_id.insert(challenge.client_id, slot);
        self.stats.connections_accepted += 1;
        self.events.push_back(ServerEvent::Connected {
            connection: self.id_of(slot),
            client_id: challenge.client_id,
            address: from,
            user_data: Box::new(challenge.user_data),
        });
        if self.config.accept_by_driver {
            if let Some(connection) = self.slots[slot as usize].connection.as_ref() {
                self.deadlines.set(slot, connection.next_timeout());
            }
        } else {
            let rate = self.config.params.tick_rate_hz;
            self.accept_slot(now, slot, rate);
        }
    }

    /// The parameters every client is told (the tick rate may be decided per connection by
    /// [`accept`](Self::accept)).
    pub fn params(&self) -> &ConnectionParams {
        &self.config.params
    }

    /// Accepts a connection whose [`ServerEvent::Connected`] came under
    /// [`ServerConfig::accept_by_driver`]: the client is told the configured parameters with
    /// `tick_rate_hz` as the rate ([`ConnectionParams::with_tick_rate`]). A connection is
    /// accepted once; later calls, and calls for a connection that is gone, do nothing.
    pub fn accept(&mut self, now: Instant, id: ConnectionId, tick_rate_hz: u8) {
        if self.connection(id).is_some()
            && self.slots[id.slot as usize].accepted_tick_rate_hz.is_none()
        {
            self.accept_slot(now, id.slot, tick_rate_hz);
        }
    }

    fn accept_slot(&mut self, now: Instant, slot: u32, tick_rate_hz: u8) {
        self.slots[slot as usize].accepted_tick_rate_hz = Some(tick_rate_hz);
        self.send_accepted(now, slot);
    }

    fn send_accepted(&mut self, now: Instant, slot: u32) {
        let Some(tick_rate_hz) = self.slots[slot as usize].accepted_tick_rate_hz else {
            return;
        };
        if self.replies.len() >= MAX_PENDING_REPLIES {
            return self.drop_datagram(DropReason::Overloaded);
        }
        let mut body = [0u8; 64];
        let params = self.config.params.with_tick_rate(tick_rate_hz);
        let Some(body_len) = params.write(&mut body) else {
            return;
        };
        let Some(connection) = self.slots[slot as usize].connection.as_mut() else {
            return;
        };
        let to = connection.address;
        queue_reply(&mut self.replies, &mut self.stats, to, true, |buf| {
            connection.write_control(now, PacketType::Accepted, &body[..body_len], buf)
        });
        self.deadlines.set(slot, connection.next_timeout());
    }

    /// Puts a slot in the ready queue unless it is there already.
    fn enqueue(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        if !entry.ready {
            entry.ready = true;
            self.ready.push_back(slot);
        }
    }

    /// After a connection took in a datagram: queues it if it has something to send now
    /// and files its new deadline.
    fn touch(&mut self, slot: u32, now: Instant) {
        let Some(connection) = self.slots[slot as usize].connection.as_ref() else {
            return;
        };
        let deadline = connection.next_timeout();
        if connection.wants_to_send() || deadline <= now {
            self.enqueue(slot);
        }
        self.deadlines.set(slot, deadline);
    }

    /// Queues `message` for a connection on `channel`. A reliable channel that overflows
    /// its bound disconnects the client with [`DisconnectReason::ReliableQueueFull`] (a slow
    /// client must not grow the server's memory) and returns the error.
    pub fn send(
        &mut self,
        now: Instant,
        id: ConnectionId,
        channel: u8,
        message: Bytes,
    ) -> Result<(), ServerSendError> {
        let Some(connection) = self.connection_mut(id) else {
            return Err(ServerSendError::UnknownConnection);
        };
        match connection.send(channel, message) {
            Ok(()) => {
                self.enqueue(id.slot);
                Ok(())
            }
            Err(error @ SendError::QueueFull { .. }) => {
                self.remove(id.slot, DisconnectReason::ReliableQueueFull, Some(""), now);
                Err(ServerSendError::Send(error))
            }
            Err(error @ SendError::TooLarge { .. }) => {
                self.stats.messages_too_large += 1;
                Err(ServerSendError::Send(error))
            }
            Err(error) => Err(ServerSendError::Send(error)),
        }
    }

    /// Ends a connection, telling the client why (redundantly, so one lost packet does not
    /// matter). A [`ServerEvent::Disconnected`] follows.
    pub fn disconnect(&mut self, now: Instant, id: ConnectionId, reason: DisconnectReason) {
        self.disconnect_saying(now, id, reason, "");
    }

    /// [`disconnect`](Self::disconnect), with words for the player after the reason code
    /// (a room's refusal, a kick's reason), cut to 123 bytes as a WebSocket close reason is.
    pub fn disconnect_saying(
        &mut self,
        now: Instant,
        id: ConnectionId,
        reason: DisconnectReason,
        text: &str,
    ) {
        // A connection refused before it was accepted hears the disconnect alone: a client
        // still sending responses ends its handshake with the disconnect's reason.
        if self.connection(id).is_some() {
            self.remove(id.slot, reason, Some(text), now);
        }
    }

    /// Drops a connection; `notify` is the text to send the client with the reason, or
    /// `None` to send nothing (it left, or timed out).
    fn remove(&mut self, slot: u32, reason: DisconnectReason, notify: Option<&str>, now: Instant) {
        let id = self.id_of(slot);
        let entry = &mut self.slots[slot as usize];
        let Some(mut connection) = entry.connection.take() else {
            return;
        };
        entry.generation = entry.generation.wrapping_add(1);
        self.free_slots.push(slot);
        self.deadlines.remove(slot);
        self.by_address.remove(&connection.address);
        self.by_client_id.remove(&connection.client_id);
        if let Some(text) = notify {
            let mut body = [0u8; MAX_DISCONNECT_BODY];
            let len = write_disconnect(reason, text, &mut body);
            for _ in 0..DISCONNECT_REDUNDANCY {
                let to = connection.address;
                queue_reply(&mut self.replies, &mut self.stats, to, false, |buf| {
                    connection.write_control(now, PacketType::Disconnect, &body[..len], buf)
                });
            }
        }
        self.events.push_back(ServerEvent::Disconnected {
            connection: id,
            client_id: connection.client_id,
            reason,
        });
    }

    /// Runs the deadlines that have come: drops connections that timed out, and queues
    /// those owing a keepalive or a resend for `poll_transmit`. Visits only those.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some((at, slot)) = self.deadlines.earliest() {
            if at > now {
                break;
            }
            // The connection leaves the heap until `poll_transmit` serves it (or for good).
            self.deadlines.remove(slot);
            let timed_out = match self.slots[slot as usize].connection.as_ref() {
                Some(connection) => connection.is_timed_out(now),
                None => continue,
            };
            if timed_out {
                self.remove(slot, DisconnectReason::TimedOut, None, now);
            } else {
                self.enqueue(slot);
            }
        }
    }

    /// The earliest deadline of any connection (a keepalive, a resend, a timeout): when
    /// `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.earliest().map(|(at, _)| at)
    }

    /// The next thing that happened.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Writes the next datagram to send into `buf` (at least the MTU; a packet written
    /// ahead for a longer buffer is cut to a shorter one) and says where it goes. Payload
    /// packets are written several connections at a time and sealed together, then handed
    /// out one per call in the order they were written.
    ///
    /// Inlined: most calls hand out a packet already written, a copy and two counts, and
    /// the caller then reads the returned address. Returned through the stack by a call,
    /// that read waited out a failed store-to-load forward (the address is copied in two
    /// overlapping halves), 7 % of a driver's user time per datagram.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.staged.is_empty() {
            return self.poll_transmit_unstaged(now, buf);
        }
        self.pop_staged(buf)
    }

    /// The oldest packet written ahead, copied into `buf` and counted as sent.
    #[inline]
    fn pop_staged(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let transmit = self.staged.pop_into(buf)?;
        self.count_sent(transmit.len);
        Some(transmit)
    }

    /// [`poll_transmit`](Self::poll_transmit) when nothing written ahead is left: a reply,
    /// or a new staging round.
    #[inline(never)]
    fn poll_transmit_unstaged(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        // Datagrams leave in the order they were written: payload packets staged before a
        // reply was queued go first (a connection's last payload before its disconnect), and
        // replies queued before a staging leave before it (a connection's accepted packet
        // before its first payload).
        if let Some(reply) = self.replies.pop_front() {
            let len = reply.len.min(buf.len());
            buf[..len].copy_from_slice(&reply.bytes[..len]);
            return Some(self.sent(reply.to, len));
        }
        self.stage_payloads(now, buf.len());
        if let Some(transmit) = self.pop_staged(buf) {
            return Some(transmit);
        }
        if now >= self.next_tidy {
            self.tidy(now);
        }
        None
    }

    /// Writes the next packet of each connection ready now, in turn, until the staging
    /// area is full, then seals them all in one batch. One round of the ready queue at
    /// most: a connection with more goes to the back, after those that became ready since,
    /// and waits for the next round, so one connection's backlog is never written ahead of
    /// the others.
    fn stage_payloads(&mut self, now: Instant, buf_len: usize) {
        let mtu = usize::from(self.config.params.mtu).min(buf_len);
        for _ in 0..self.ready.len() {
            if !self.staged.has_room(mtu) {
                break;
            }
            let Some(slot) = self.ready.pop_front() else {
                break;
            };
            // The next connections' state loads while this one's packet is written: each is
            // a chain of cache misses otherwise, a turn's sends touching every connection in
            // turn. Two ahead, the connection itself; one ahead, already loaded, what it
            // points to (its channels, its messages, its sent-packet ring).
            if let Some(after_next) = self.ready.get(1).and_then(|&slot| self.live(slot)) {
                after_next.prefetch_for_send();
            }
            if let Some(next) = self.ready.front().and_then(|&next| self.live(next)) {
                next.prefetch_for_write();
            }
            let entry = &mut self.slots[slot as usize];
            entry.ready = false;
            let Some(connection) = entry.connection.as_mut() else {
                continue;
            };
            let written = self
                .staged
                .stage(connection.address, mtu, |buf, offset, end, batch| {
                    connection.stage_payload(now, buf, offset, end, batch)
                });
            // One packet per turn: a connection with more goes to the back of the queue.
            if written.is_some() && connection.wants_to_send() {
                entry.ready = true;
                self.ready.push_back(slot);
            }
            self.deadlines.set(slot, connection.next_timeout());
        }
        self.staged.seal();
    }

    /// Gives back the capacity a crowd that has gone left in the queues and tables; a slot's
    /// connection is boxed, so the slots themselves hold little.
    fn tidy(&mut self, now: Instant) {
        self.next_tidy = now + TIDY_INTERVAL;
        let population = self.by_address.len();
        shrink_map(&mut self.by_address);
        shrink_map(&mut self.by_client_id);
        shrink_queue(&mut self.ready, population);
        shrink_queue(&mut self.events, population);
        // Handshake replies wait a batch at most; goodbyes are three per connection.
        shrink_queue(&mut self.replies, population);
        self.pending.tidy(now);
    }

    fn sent(&mut self, destination: SocketAddr, len: usize) -> Transmit {
        self.count_sent(len);
        Transmit { destination, len }
    }

    #[inline]
    fn count_sent(&mut self, len: usize) {
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += len as u64;
    }

    /// The connection at `address`, if one is established.
    pub fn connection_at(&self, address: SocketAddr) -> Option<ConnectionId> {
        self.by_address.get(&address).map(|&slot| self.id_of(slot))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    use super::*;
    use crate::sim::{Link, LinkConfig};
    use crate::token::TokenIssuer;
    use crate::{Client, ClientState};

    const PROTOCOL_ID: u64 = 0x7157_0003;
    const UNIX_TIME: u64 = 1_800_000_000;

    impl Server {
        /// What the ready queue and the heap promise, checked against a scan of every
        /// connection, after `handle_timeout(now)` and a full `poll_transmit` drain.
        fn check_drained(&self, now: Instant) {
            let mut earliest = None::<Instant>;
            for (slot, entry) in self.slots.iter().enumerate() {
                let slot = slot as u32;
                let Some(connection) = entry.connection.as_ref() else {
                    assert_eq!(self.deadlines.get(slot), None, "slot {slot} is empty");
                    continue;
                };
                assert!(
                    !connection.wants_to_send(),
                    "slot {slot} still has something to send after the drain"
                );
                let deadline = connection.next_timeout();
                assert!(
                    deadline > now,
                    "slot {slot}'s deadline {:?} passed without being served",
                    now - deadline
                );
                assert_eq!(
                    self.deadlines.get(slot),
                    Some(deadline),
                    "slot {slot}'s filed deadline is not its real one"
                );
                earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
            }
            assert_eq!(
                self.poll_timeout(),
                earliest,
                "poll_timeout must be the earliest deadline of any connection"
            );
            assert!(self.ready.is_empty(), "the ready queue was drained");
        }
    }

    /// Many connections over a lossy, jittery, reordering link, with random traffic on
    /// every channel both ways and some clients falling silent: after every turn, a scan
    /// of every connection finds nothing the ready queue and the heap missed.
    #[test]
    fn ready_queue_and_deadlines_agree_with_a_scan_of_every_connection() {
        let start = Instant::now();
        let mut now = start;
        let mut rng = ChaCha20Rng::seed_from_u64(42);
        let server_address: SocketAddr = "127.0.0.1:40000".parse().expect("valid");
        let key = Key([9; 32]);
        let mut config = ServerConfig::new(PROTOCOL_ID, key.clone(), vec![server_address]);
        config.params.timeout = Duration::from_secs(2);
        let mut server = Server::new(config, now, UNIX_TIME, &mut rng).expect("valid config");
        let issuer = TokenIssuer {
            protocol_id: PROTOCOL_ID,
            key,
            server_addresses: vec![server_address],
            validity_seconds: 60,
            timeout_seconds: 5,
        };
        let count = 40;
        let addresses: Vec<SocketAddr> = (0..count)
            .map(|i| SocketAddr::from(([127, 0, 0, 2], 2000 + i as u16)))
            .collect();
        let mut clients: Vec<Client> = (0..count)
            .map(|i| {
                let token = issuer
                    .issue(&mut rng, UNIX_TIME, i as u64, &[])
                    .expect("token issues");
                Client::new(token, now, UNIX_TIME, ReliabilityConfig::default())
            })
            .collect();
        let mut link = Link::new(
            LinkConfig {
                latency: Duration::from_millis(20),
                jitter: Duration::from_millis(8),
                loss: 0.1,
                duplicate: 0.02,
                reorder: 0.05,
                mtu: 1500,
            },
            42,
        );
        // Clients 30.. fall silent at 4 s, so their connections time out on the server.
        let silent_from = start + Duration::from_secs(4);
        let mut ids: Vec<Option<ConnectionId>> = vec![None; count];
        let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
        let mut timed_out = 0;
        let mut next_traffic = start;
        while now < start + Duration::from_secs(10) {
            while let Some(datagram) = link.deliver(now) {
                if datagram.to == server_address {
                    server.handle_datagram(now, datagram.from, &datagram.bytes);
                } else if let Some(i) = addresses.iter().position(|a| *a == datagram.to) {
                    clients[i].handle_datagram(now, server_address, &datagram.bytes);
                }
            }
            if now >= next_traffic {
                next_traffic = now + Duration::from_millis(rng.random_range(5..40));
                for _ in 0..rng.random_range(0..30) {
                    let i = rng.random_range(0..count);
                    let channel = rng.random_range(0..3u8);
                    let len = if rng.random_bool(0.05) {
                        rng.random_range(1200..5000)
                    } else {
                        rng.random_range(1..200)
                    };
                    let message = Bytes::from(vec![i as u8; len]);
                    let len = if channel == 0 { len } else { len.min(900) };
                    if rng.random_bool(0.5) {
                        if let Some(id) = ids[i] {
                            let _ = server.send(now, id, channel, message.slice(..len));
                        }
                    } else if i < 30 || now < silent_from {
                        let _ = clients[i].send(channel, message.slice(..len));
                    }
                }
            }
            if server.poll_timeout().is_some_and(|at| at <= now) {
                server.handle_timeout(now);
            }
            while let Some(event) = server.poll_event() {
                match event {
                    ServerEvent::Connected {
                        connection,
                        client_id,
                        ..
                    } => ids[client_id as usize] = Some(connection),
                    ServerEvent::Disconnected {
                        client_id, reason, ..
                    } => {
                        assert_eq!(reason, DisconnectReason::TimedOut);
                        assert!(client_id >= 30, "only the silent clients time out");
                        ids[client_id as usize] = None;
                        timed_out += 1;
                    }
                    ServerEvent::Message { .. } => {}
                }
            }
            while let Some(transmit) = server.poll_transmit(now, &mut buf) {
                link.send(
                    now,
                    server_address,
                    transmit.destination,
                    &buf[..transmit.len],
                );
            }
            server.check_drained(now);
            for (i, client) in clients.iter_mut().enumerate() {
                if i >= 30 && now >= silent_from {
                    continue;
                }
                client.handle_timeout(now);
                while client.poll_event().is_some() {}
                while let Some(transmit) = client.poll_transmit(now, &mut buf) {
                    link.send(
                        now,
                        addresses[i],
                        transmit.destination,
                        &buf[..transmit.len],
                    );
                }
            }
            let next = [
                link.next_delivery(),
                server.poll_timeout(),
                Some(next_traffic),
            ]
            .into_iter()
            .chain(clients.iter().map(Client::poll_timeout))
            .flatten()
            .filter(|at| *at > now)
            .min()
            .expect("something is always next");
            now = next;
        }
        assert_eq!(
            timed_out, 10,
            "every silent client timed out, and only those"
        );
        assert!(
            clients[..30]
                .iter()
                .all(|client| client.state() == ClientState::Connected),
            "the talking clients stayed connected"
        );
    }
}
