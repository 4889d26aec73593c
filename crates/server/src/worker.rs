//! A shard worker: one thread, its own current-thread tokio runtime, and everything a shard
//! needs on its UDP port: the [`Shard`] (rooms and players) and the protocol [`Server`]
//! (connections). Nothing is shared with other threads but the bounded control queue.
//!
//! A player's connect token carries a [`SeatTicket`] in its user data: the room to join and
//! the name to show. UDP players connect to the worker's port; WebSocket players are accepted
//! by the HTTP side and handed over with [`Control::AttachWs`], so both share the rooms. When
//! the connection is established the player joins that room (or takes back their held seat);
//! their messages go to the room; the room's sends go out on their connection, whichever
//! transport it is; a lost connection holds their seat for the reconnect grace period, and
//! a player already connected on either transport is refused a second connection.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tickwire_net::driver::{MIN_WAIT, sleep_until, transmit};
use tickwire_net::udp::{BatchSocket, RecvBatch, SendBatch};
use tickwire_net::ws::{CloseCode, WsClosed, WsConnection, WsSender};
use tickwire_proto::token::USER_DATA_BYTES;
use tickwire_proto::{
    ConnectionId, DisconnectReason, MAX_DATAGRAM_BYTES, Server, ServerConfig, ServerEvent,
};
use tokio::sync::mpsc;

use crate::room::{LeaveReason, PlayerId, Room};
use crate::shard::{RoomId, Shard, ShardConfig, ShardOutput};

/// Longest name a ticket carries, in bytes.
pub const MAX_TICKET_NAME_BYTES: usize = 32;
/// Control messages a worker buffers; senders wait when it is full.
const CONTROL_QUEUE: usize = 1024;
/// Messages from WebSocket players waiting for the worker; past this, their readers wait
/// and TCP flow control holds the clients back.
const WS_EVENT_QUEUE: usize = 4096;

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

/// What the rest of the server asks of a worker.
pub enum Control {
    /// Start hosting a room.
    CreateRoom {
        /// Its id.
        id: RoomId,
        /// Its kind, for listings and tick statistics.
        kind: String,
        /// The game logic.
        room: Box<dyn Room>,
        /// Seats.
        capacity: u16,
    },
    /// A WebSocket player, authenticated by the HTTP side, to seat in a room.
    AttachWs(WsConnection),
    /// Disconnect everyone with "server shutting down" and stop.
    Stop,
}

/// What a WebSocket player's reader task reports.
enum WsEvent {
    Message {
        player: PlayerId,
        channel: u8,
        message: Bytes,
    },
    Closed {
        player: PlayerId,
        /// The client closed: they left, rather than lost their connection.
        by_client: bool,
    },
}

/// What a worker did, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Players refused: an unreadable ticket, a room that refused them, or a player already
    /// connected.
    pub joins_refused: u64,
    /// WebSocket players attached.
    pub ws_attached: u64,
    /// Datagrams sent.
    pub datagrams_sent: u64,
    /// Datagrams received.
    pub datagrams_received: u64,
}

/// Runs on the caller's side: the worker's address and control queue.
pub struct ShardWorker {
    udp_address: SocketAddr,
    control: mpsc::Sender<Control>,
    thread: Option<JoinHandle<io::Result<WorkerReport>>>,
}

impl ShardWorker {
    /// Binds `udp_address` and starts the worker thread. `server` must list the bound
    /// address among its public addresses; `configure` receives it (with port 0 resolved)
    /// to build the protocol configuration.
    pub fn spawn(
        udp_address: SocketAddr,
        shard: ShardConfig,
        configure: impl FnOnce(SocketAddr) -> ServerConfig,
    ) -> io::Result<Self> {
        let socket = std::net::UdpSocket::bind(udp_address)?;
        socket.set_nonblocking(true)?;
        let udp_address = socket.local_addr()?;
        let server_config = configure(udp_address);
        let (control, inbox) = mpsc::channel(CONTROL_QUEUE);
        let thread = std::thread::Builder::new()
            .name(format!("tickwire-shard-{}", udp_address.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    let socket = BatchSocket::from_std(socket)?;
                    let server =
                        Server::new(server_config, Instant::now(), unix_now(), &mut rand::rng())
                            .map_err(|error| {
                                io::Error::new(io::ErrorKind::InvalidInput, error.to_string())
                            })?;
                    Worker::new(socket, server, Shard::new(shard))
                        .run(inbox)
                        .await
                })
            })?;
        Ok(Self {
            udp_address,
            control,
            thread: Some(thread),
        })
    }

    /// The UDP address players connect to.
    pub fn udp_address(&self) -> SocketAddr {
        self.udp_address
    }

    /// A sender for control messages, for tasks that feed the worker (the WebSocket
    /// hand-off).
    pub fn control(&self) -> mpsc::Sender<Control> {
        self.control.clone()
    }

    /// Queues a control message; waits while the queue is full.
    pub async fn send(&self, control: Control) -> io::Result<()> {
        self.control
            .send(control)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "shard worker has stopped"))
    }

    /// Stops the worker (players are told the server is shutting down) and waits for it.
    pub async fn stop(mut self) -> io::Result<WorkerReport> {
        let _ = self.control.send(Control::Stop).await;
        let thread = self.thread.take();
        tokio::task::spawn_blocking(move || match thread.map(JoinHandle::join) {
            Some(Ok(report)) => report,
            Some(Err(_)) => Err(io::Error::other("shard worker panicked")),
            None => Ok(WorkerReport::default()),
        })
        .await
        .map_err(io::Error::other)?
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// The worker's state, all owned by its thread.
struct Worker {
    socket: BatchSocket,
    server: Server,
    shard: Shard,
    players: HashMap<PlayerId, ConnectionId>,
    connections: HashMap<ConnectionId, PlayerId>,
    ws_players: HashMap<PlayerId, WsSender>,
    ws_events: mpsc::Receiver<WsEvent>,
    ws_events_in: mpsc::Sender<WsEvent>,
    inbox: RecvBatch,
    outbox: SendBatch,
    scratch: Box<[u8; MAX_DATAGRAM_BYTES]>,
    report: WorkerReport,
}

impl Worker {
    fn new(socket: BatchSocket, server: Server, shard: Shard) -> Self {
        let (ws_events_in, ws_events) = mpsc::channel(WS_EVENT_QUEUE);
        Self {
            ws_players: HashMap::new(),
            ws_events,
            ws_events_in,
            socket,
            server,
            shard,
            players: HashMap::new(),
            connections: HashMap::new(),
            inbox: RecvBatch::new(),
            outbox: SendBatch::new(),
            scratch: Box::new([0; MAX_DATAGRAM_BYTES]),
            report: WorkerReport::default(),
        }
    }

    async fn run(mut self, mut control: mpsc::Receiver<Control>) -> io::Result<WorkerReport> {
        loop {
            let now = Instant::now();
            if self.server.poll_timeout().is_some_and(|at| at <= now) {
                self.server.handle_timeout(now);
            }
            self.take_events(now);
            self.shard.run_timed(now, &mut Instant::now);
            self.route_outputs(now);
            self.flush().await?;

            let deadline = [self.server.poll_timeout(), self.shard.next_deadline()]
                .into_iter()
                .flatten()
                .min()
                .map(|at| at.max(now + MIN_WAIT));
            tokio::select! {
                received = self.socket.recv_batch(&mut self.inbox) => {
                    received?;
                    let now = Instant::now();
                    for (from, datagram) in &self.inbox {
                        self.server.handle_datagram(now, from, datagram);
                    }
                }
                event = self.ws_events.recv() => {
                    let now = Instant::now();
                    match event {
                        Some(WsEvent::Message { player, channel, message }) => {
                            self.shard.message(now, player, channel, message);
                        }
                        // A closed connection still in the map was not kicked: a client's
                        // own close means they left; anything else holds their seat.
                        Some(WsEvent::Closed { player, by_client })
                            if self.ws_players.remove(&player).is_some() =>
                        {
                            if by_client {
                                self.shard.leave(now, player, LeaveReason::Left);
                            } else {
                                self.shard.connection_lost(now, player);
                            }
                        }
                        // Kicked players were removed already; and the worker holds a sender
                        // itself, so the queue never closes.
                        Some(WsEvent::Closed { .. }) | None => {}
                    }
                }
                message = control.recv() => match message {
                    Some(Control::CreateRoom { id, kind, room, capacity }) => {
                        if let Err(error) = self.shard.create_room(Instant::now(), id, kind, room, capacity) {
                            tracing::warn!(?id, %error, "room not created");
                        }
                    }
                    Some(Control::AttachWs(connection)) => self.attach_ws(Instant::now(), connection),
                    Some(Control::Stop) | None => return self.stop().await,
                },
                () = sleep_until(deadline) => {}
            }
        }
    }

    /// Connections, messages and disconnects from the protocol, into the shard.
    fn take_events(&mut self, now: Instant) {
        while let Some(event) = self.server.poll_event() {
            match event {
                ServerEvent::Connected {
                    connection,
                    client_id,
                    user_data,
                    ..
                } => self.seat(now, connection, PlayerId(client_id), &user_data),
                ServerEvent::Message {
                    connection,
                    channel,
                    message,
                } => {
                    if let Some(player) = self.connections.get(&connection) {
                        self.shard.message(now, *player, channel, message);
                    }
                }
                ServerEvent::Disconnected {
                    connection, reason, ..
                } => {
                    let Some(player) = self.connections.remove(&connection) else {
                        continue;
                    };
                    self.players.remove(&player);
                    match reason {
                        DisconnectReason::Requested => {
                            self.shard.leave(now, player, LeaveReason::Left)
                        }
                        // Anything else may be a network hiccup: hold the seat.
                        _ => self.shard.connection_lost(now, player),
                    }
                }
            }
        }
    }

    /// Seats a newly connected player from their ticket: their held seat back, or a new one
    /// in the ticket's room. False when they cannot be seated or are already connected.
    fn take_seat(
        &mut self,
        now: Instant,
        player: PlayerId,
        user_data: &[u8; USER_DATA_BYTES],
    ) -> bool {
        if self.players.contains_key(&player) || self.ws_players.contains_key(&player) {
            self.report.joins_refused += 1;
            return false;
        }
        let seated = match SeatTicket::decode(user_data) {
            Some(ticket) => match self.shard.room_of(player) {
                Some(_) => self.shard.reconnect(now, player).is_some(),
                None => self
                    .shard
                    .join(now, ticket.room, player, ticket.name)
                    .is_ok(),
            },
            None => false,
        };
        if !seated {
            self.report.joins_refused += 1;
        }
        seated
    }

    fn attach_ws(&mut self, now: Instant, mut connection: WsConnection) {
        let player = PlayerId(connection.client_id());
        let user_data = *connection.user_data();
        if !self.take_seat(now, player, &user_data) {
            connection.close(CloseCode::Kicked, "no seat for this player");
            return;
        }
        self.report.ws_attached += 1;
        self.ws_players.insert(player, connection.sender());
        let events = self.ws_events_in.clone();
        tokio::spawn(async move {
            loop {
                let event = match connection.recv().await {
                    Ok((channel, message)) => WsEvent::Message {
                        player,
                        channel,
                        message,
                    },
                    Err(closed) => WsEvent::Closed {
                        player,
                        by_client: matches!(closed, WsClosed::ByClient { .. }),
                    },
                };
                let closed = matches!(event, WsEvent::Closed { .. });
                if events.send(event).await.is_err() || closed {
                    return;
                }
            }
        });
    }

    fn seat(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: PlayerId,
        user_data: &[u8; USER_DATA_BYTES],
    ) {
        if self.take_seat(now, player, user_data) {
            self.players.insert(player, connection);
            self.connections.insert(connection, player);
        } else {
            self.server
                .disconnect(now, connection, DisconnectReason::Kicked);
        }
    }

    /// The shard's sends and disconnects, onto connections.
    fn route_outputs(&mut self, now: Instant) {
        for output in self.shard.drain_outputs() {
            match output {
                ShardOutput::Send {
                    to,
                    channel,
                    message,
                } => {
                    // A refused send (a full reliable queue, a slow WebSocket reader) closes
                    // that connection in its transport; the close event tells the shard.
                    if let Some(connection) = self.players.get(&to) {
                        let _ = self.server.send(now, *connection, channel, message);
                    } else if let Some(sender) = self.ws_players.get(&to) {
                        let _ = sender.send(channel, message);
                    }
                }
                ShardOutput::Disconnect { player, reason } => {
                    if let Some(connection) = self.players.remove(&player) {
                        self.connections.remove(&connection);
                        self.server
                            .disconnect(now, connection, DisconnectReason::Kicked);
                    } else if let Some(sender) = self.ws_players.remove(&player) {
                        sender.close(CloseCode::Kicked, &reason);
                    }
                }
            }
        }
    }

    async fn flush(&mut self) -> io::Result<()> {
        transmit(
            &mut self.server,
            &self.socket,
            &mut self.outbox,
            &mut self.scratch[..],
        )
        .await?;
        Ok(())
    }

    async fn stop(mut self) -> io::Result<WorkerReport> {
        let now = Instant::now();
        for (player, connection) in self.players.drain() {
            self.server
                .disconnect(now, connection, DisconnectReason::ServerShutdown);
            self.shard.leave(now, player, LeaveReason::Shutdown);
        }
        for (player, sender) in self.ws_players.drain() {
            sender.close(CloseCode::ServerShutdown, "server shutting down");
            self.shard.leave(now, player, LeaveReason::Shutdown);
        }
        self.flush().await?;
        let stats = self.server.stats();
        self.report.datagrams_sent = stats.datagrams_sent;
        self.report.datagrams_received = stats.datagrams_received;
        Ok(self.report)
    }
}
