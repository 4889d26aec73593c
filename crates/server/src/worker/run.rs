//! The worker's loop and state, all owned by its thread.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::net::IpAddr;
use std::time::Instant;

use bytes::Bytes;
use tickwire_net::driver::{MIN_WAIT, sleep_until, transmit};
use tickwire_net::udp::{BatchSocket, RecvBatch, SendBatch};
use tickwire_net::ws::{
    Arrival, CloseCode, WsClosed, WsConnection, WsLinkEvent, WsLinkId, WsLinks, WsSender, WsSocket,
};
use tickwire_proto::token::USER_DATA_BYTES;
use tickwire_proto::{ConnectionId, DisconnectReason, MAX_DATAGRAM_BYTES, Server, ServerEvent};
use tokio::sync::mpsc;

use super::view::{PUBLISH_INTERVAL, SharedIpLimiter, WorkerEvent, WorkerLinks, WorkerView};
use super::{Control, SeatTicket, WorkerReport};
use crate::console::PlayerSummary;
use crate::room::{LeaveReason, PlayerId};
use crate::shard::{Shard, ShardOutput};

/// Messages from WebTransport players waiting for the worker; past this, their readers wait
/// and QUIC flow control holds the clients back.
const WT_EVENT_QUEUE: usize = 4096;

/// Most `recvmmsg` batches one turn of the loop takes in before it answers them. Whatever
/// is already waiting in the socket when a turn starts is ready together with it: taking it
/// in the same turn lets the messages bound for one player leave in one datagram, and holds
/// nothing back, since the turn ends by sending. A server that falls behind thus takes
/// larger turns, which cost less per message, and catches up. The bound (64 × 64
/// datagrams, some 100 ms of sfs traffic) keeps a turn short enough under a flood that
/// timers and ticks still run.
const RECV_BATCHES_PER_TURN: usize = 64;

/// Hashes the ids the worker keys its maps by with one multiply per word instead of
/// SipHash: every relayed message looks its recipient up, and SipHash showed in the shard's
/// profile. The keys are not a peer's choice (player ids are random or the game backend's,
/// connection ids the protocol server's), so colliding keys are not on offer to an attacker.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        // FxHash's step: the multiply spreads every input bit into the high bits, which the
        // table's probing reads.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by the worker's ids.
type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// What a WebTransport player's reader task reports. `attach` tells one attachment of a
/// player from a later one.
enum WtEvent {
    Message {
        player: PlayerId,
        channel: u8,
        message: Bytes,
    },
    Closed {
        player: PlayerId,
        attach: u64,
        /// The client said goodbye (see [`closing_leaves`]), rather than lost its
        /// connection or meant to come back.
        left: bool,
    },
}

/// How a connected player is reached.
enum Link {
    Udp(ConnectionId),
    /// A WebSocket connection this worker drives itself.
    Ws(WsLinkId),
    /// A WebTransport session, driven by its own tasks.
    Wt {
        sender: WsSender,
        attach: u64,
    },
}

struct Connected {
    link: Link,
    /// The address counted against the per-address limit.
    ip: Option<IpAddr>,
}

pub(super) struct Worker {
    socket: BatchSocket,
    server: Server,
    shard: Shard,
    links: WorkerLinks,
    players: IdMap<PlayerId, Connected>,
    udp_players: IdMap<ConnectionId, PlayerId>,
    ws: WsLinks,
    ws_players: IdMap<WsLinkId, PlayerId>,
    wt_events: mpsc::Receiver<WtEvent>,
    wt_events_in: mpsc::Sender<WtEvent>,
    wt_attaches: u64,
    inbox: RecvBatch,
    outbox: SendBatch,
    scratch: Box<[u8; MAX_DATAGRAM_BYTES]>,
    report: WorkerReport,
    refused_by_address: u64,
    next_publish: Instant,
}

impl Worker {
    pub(super) fn new(
        socket: BatchSocket,
        server: Server,
        shard: Shard,
        links: WorkerLinks,
    ) -> io::Result<Self> {
        let (wt_events_in, wt_events) = mpsc::channel(WT_EVENT_QUEUE);
        Ok(Self {
            socket,
            server,
            shard,
            links,
            players: IdMap::default(),
            udp_players: IdMap::default(),
            ws: WsLinks::new()?,
            ws_players: IdMap::default(),
            wt_events,
            wt_events_in,
            wt_attaches: 0,
            inbox: RecvBatch::new(),
            outbox: SendBatch::new(),
            scratch: Box::new([0; MAX_DATAGRAM_BYTES]),
            report: WorkerReport::default(),
            refused_by_address: 0,
            next_publish: Instant::now(),
        })
    }

    pub(super) async fn run(
        mut self,
        mut control: mpsc::Receiver<Control>,
    ) -> io::Result<WorkerReport> {
        loop {
            let now = Instant::now();
            if self.server.poll_timeout().is_some_and(|at| at <= now) {
                self.server.handle_timeout(now);
            }
            self.take_events(now);
            if self.ws.poll_timeout().is_some_and(|at| at <= now) {
                self.ws.handle_timeout(now);
                self.take_ws_events(now);
            }
            // Ticks, then their events on the wire, then the rooms' publish phase
            // (snapshots): a confirmation never waits behind every player's snapshot.
            self.shard.tick_due(now, &mut Instant::now);
            self.route_outputs(now);
            self.flush().await?;
            self.shard.publish_due(now, &mut Instant::now);
            self.route_outputs(now);
            self.flush().await?;
            if now >= self.next_publish {
                self.publish();
                self.next_publish = now + PUBLISH_INTERVAL;
            }

            let deadline = [
                self.server.poll_timeout(),
                self.ws.poll_timeout(),
                self.shard.next_deadline(),
                Some(self.next_publish),
            ]
            .into_iter()
            .flatten()
            .min()
            .map(|at| at.max(now + MIN_WAIT));
            tokio::select! {
                received = self.socket.recv_batch(&mut self.inbox) => {
                    received?;
                    self.take_datagrams()?;
                }
                readable = self.ws.readable() => {
                    readable?;
                    let now = Instant::now();
                    self.ws.handle_io(now);
                    self.take_ws_events(now);
                    self.route_outputs(now);
                }
                event = self.wt_events.recv() => {
                    // The worker holds a sender itself, so the queue never closes.
                    if let Some(event) = event {
                        self.wt_event(Instant::now(), event);
                    }
                }
                message = control.recv() => {
                    let now = Instant::now();
                    match message {
                        Some(Control::CreateRoom { id, kind, room, capacity, created }) => {
                            let result = self.shard.create_room(now, id, kind, room, capacity);
                            if let Err(error) = &result {
                                tracing::warn!(?id, %error, "room not created");
                            }
                            if let Some(created) = created {
                                let _ = created.send(result.is_ok());
                            }
                        }
                        Some(Control::Attach(Arrival::WebSocket(socket))) => self.attach_ws(now, socket),
                        Some(Control::Attach(Arrival::WebTransport(session))) => {
                            self.attach_wt(now, session)
                        }
                        Some(Control::Kick { player, reason }) => {
                            self.shard.kick(now, player, &reason);
                        }
                        Some(Control::Say(text)) => self.shard.announce(now, &text),
                        Some(Control::Stop) | None => return self.stop().await,
                    }
                }
                () = sleep_until(deadline) => {}
            }
        }
    }

    /// Hands the batch just received to the protocol, then everything else already waiting
    /// in the socket, up to [`RECV_BATCHES_PER_TURN`] batches. Each batch's messages go
    /// through the shard onto connections before the next batch is read, so the event and
    /// output buffers hold one batch's worth, not a turn's; what they queued is sent at the
    /// turn's end.
    fn take_datagrams(&mut self) -> io::Result<()> {
        let now = Instant::now();
        for turn in 0..RECV_BATCHES_PER_TURN {
            if turn > 0 {
                match self.socket.try_recv_batch(&mut self.inbox) {
                    Ok(_) => {}
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) => return Err(error),
                }
            }
            for (from, datagram) in &self.inbox {
                self.server.handle_datagram(now, from, datagram);
            }
            self.take_events(now);
            self.route_outputs(now);
            if self.inbox.len() < self.inbox.capacity() {
                // A short batch emptied the socket.
                break;
            }
        }
        Ok(())
    }

    /// Connections, messages and disconnects from the protocol, into the shard.
    fn take_events(&mut self, now: Instant) {
        while let Some(event) = self.server.poll_event() {
            match event {
                ServerEvent::Connected {
                    connection,
                    client_id,
                    address,
                    user_data,
                } => {
                    let player = PlayerId(client_id);
                    if self
                        .take_seat(now, player, Some(address.ip()), &user_data)
                        .is_ok()
                    {
                        self.udp_players.insert(connection, player);
                        self.players.insert(
                            player,
                            Connected {
                                link: Link::Udp(connection),
                                ip: Some(address.ip()),
                            },
                        );
                    } else {
                        self.server
                            .disconnect(now, connection, DisconnectReason::Kicked);
                    }
                }
                ServerEvent::Message {
                    connection,
                    channel,
                    message,
                } => {
                    if let Some(player) = self.udp_players.get(&connection) {
                        self.shard.message(now, *player, channel, message);
                    }
                }
                ServerEvent::Disconnected {
                    connection, reason, ..
                } => {
                    let Some(player) = self.udp_players.remove(&connection) else {
                        continue;
                    };
                    self.release(player);
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

    /// Messages and closes from the WebSocket connections, into the shard.
    fn take_ws_events(&mut self, now: Instant) {
        while let Some(event) = self.ws.poll_event() {
            match event {
                WsLinkEvent::Message {
                    link,
                    channel,
                    message,
                } => {
                    if let Some(player) = self.ws_players.get(&link) {
                        self.shard.message(now, *player, channel, message);
                    }
                }
                WsLinkEvent::Closed { link, closed } => {
                    // A link the worker closed itself (a kick, a replacement) is unlisted
                    // already and reports nothing.
                    let Some(player) = self.ws_players.get(&link).copied() else {
                        continue;
                    };
                    self.release(player);
                    if matches!(closed, WsClosed::ByClient { code, .. } if closing_leaves(code)) {
                        self.shard.leave(now, player, LeaveReason::Left);
                    } else {
                        self.shard.connection_lost(now, player);
                    }
                }
            }
        }
    }

    fn wt_event(&mut self, now: Instant, event: WtEvent) {
        match event {
            WtEvent::Message {
                player,
                channel,
                message,
            } => self.shard.message(now, player, channel, message),
            WtEvent::Closed {
                player,
                attach,
                left,
            } => {
                // Only the attachment still linked counts: a kicked player was unlinked
                // already, and a newer attachment is not this one.
                let current = matches!(
                    self.players.get(&player),
                    Some(Connected { link: Link::Wt { attach: linked, .. }, .. }) if *linked == attach
                );
                if !current {
                    return;
                }
                self.release(player);
                if left {
                    self.shard.leave(now, player, LeaveReason::Left);
                } else {
                    self.shard.connection_lost(now, player);
                }
            }
        }
    }

    /// Seats a newly connected player from their ticket: their held seat back, or a new one
    /// in the ticket's room; otherwise why not, to tell them.
    fn take_seat(
        &mut self,
        now: Instant,
        player: PlayerId,
        ip: Option<IpAddr>,
        user_data: &[u8; USER_DATA_BYTES],
    ) -> Result<(), &'static str> {
        // A newer connection from the address of the one it replaces inherits that one's
        // place in the per-address limit; any other must be admitted before the old
        // connection is closed, so a refusal never costs the player both.
        let inherits = self
            .players
            .get(&player)
            .is_some_and(|connected| connected.ip.is_some() && connected.ip == ip);
        if !inherits
            && let (Some(limiter), Some(ip)) = (&self.links.limiter, ip)
            && !limiter.try_open(now, ip)
        {
            self.refused_by_address += 1;
            self.report.joins_refused += 1;
            return Err("too many connections from this address");
        }
        // Connected already (on the other transport, or on this one before its old
        // connection timed out): the newer connection, with its fresh token, wins.
        if let Some(older) = self.players.remove(&player) {
            if !inherits && let (Some(limiter), Some(ip)) = (&self.links.limiter, older.ip) {
                limiter.closed(ip);
            }
            match &older.link {
                Link::Udp(connection) => {
                    self.udp_players.remove(connection);
                }
                Link::Ws(link) => {
                    self.ws_players.remove(link);
                }
                Link::Wt { .. } => {}
            }
            end_link(
                &mut self.server,
                &mut self.ws,
                now,
                older.link,
                DisconnectReason::AlreadyConnected,
                "connected again elsewhere",
            );
            self.shard.connection_lost(now, player);
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
            if let (Some(limiter), Some(ip)) = (&self.links.limiter, ip) {
                limiter.closed(ip);
            }
            return Err("no seat for this player");
        }
        Ok(())
    }

    fn release(&mut self, player: PlayerId) -> Option<Link> {
        release(
            &mut self.players,
            &mut self.udp_players,
            &mut self.ws_players,
            self.links.limiter.as_ref(),
            player,
        )
    }

    /// A WebSocket player admitted by the HTTP side: seated first, then attached, so the
    /// accepted message is the first thing on the socket and everything the room sends
    /// after it follows.
    fn attach_ws(&mut self, now: Instant, socket: WsSocket) {
        let player = PlayerId(socket.client_id());
        let user_data = *socket.user_data();
        let ip = socket.peer_address().map(|address| address.ip());
        if let Err(reason) = self.take_seat(now, player, ip, &user_data) {
            self.ws.refuse(now, socket, CloseCode::Kicked, reason);
            return;
        }
        match self.ws.attach(now, socket) {
            Ok(link) => {
                self.report.ws_attached += 1;
                self.ws_players.insert(link, player);
                self.players.insert(
                    player,
                    Connected {
                        link: Link::Ws(link),
                        ip,
                    },
                );
                // Messages the client sent right after its token.
                self.take_ws_events(now);
            }
            Err(error) => {
                tracing::warn!(%error, "websocket not attached");
                if let (Some(limiter), Some(ip)) = (&self.links.limiter, ip) {
                    limiter.closed(ip);
                }
                self.shard.connection_lost(now, player);
            }
        }
    }

    fn attach_wt(&mut self, now: Instant, mut connection: WsConnection) {
        let player = PlayerId(connection.client_id());
        let user_data = *connection.user_data();
        let ip = connection.peer_address().map(|address| address.ip());
        if let Err(reason) = self.take_seat(now, player, ip, &user_data) {
            connection.close(CloseCode::Kicked, reason);
            return;
        }
        self.report.ws_attached += 1;
        self.wt_attaches += 1;
        let attach = self.wt_attaches;
        self.players.insert(
            player,
            Connected {
                link: Link::Wt {
                    sender: connection.sender(),
                    attach,
                },
                ip,
            },
        );
        let events = self.wt_events_in.clone();
        tokio::spawn(async move {
            loop {
                let event = match connection.recv().await {
                    Ok((channel, message)) => WtEvent::Message {
                        player,
                        channel,
                        message,
                    },
                    Err(closed) => WtEvent::Closed {
                        player,
                        attach,
                        left: matches!(closed, WsClosed::ByClient { code, .. } if closing_leaves(code)),
                    },
                };
                let closed = matches!(event, WtEvent::Closed { .. });
                if events.send(event).await.is_err() || closed {
                    return;
                }
            }
        });
    }

    /// The shard's sends, disconnects and seat changes, onto connections and the event
    /// queue.
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
                    match self.players.get(&to).map(|connected| &connected.link) {
                        Some(Link::Udp(connection)) => {
                            let _ = self.server.send(now, *connection, channel, message);
                        }
                        Some(Link::Ws(link)) => {
                            let _ = self.ws.send(*link, channel, message);
                        }
                        Some(Link::Wt { sender, .. }) => {
                            let _ = sender.send(channel, message);
                        }
                        None => {}
                    }
                }
                ShardOutput::Disconnect { player, reason } => {
                    if let Some(link) = release(
                        &mut self.players,
                        &mut self.udp_players,
                        &mut self.ws_players,
                        self.links.limiter.as_ref(),
                        player,
                    ) {
                        end_link(
                            &mut self.server,
                            &mut self.ws,
                            now,
                            link,
                            DisconnectReason::Kicked,
                            &reason,
                        );
                    }
                }
                ShardOutput::Seated { player, room } => {
                    report(&self.links, WorkerEvent::Seated { player, room });
                }
                ShardOutput::Unseated { player, room } => {
                    report(&self.links, WorkerEvent::Unseated { player, room });
                }
                ShardOutput::RoomDisposed { room } => {
                    report(&self.links, WorkerEvent::RoomClosed { room });
                }
            }
        }
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.ws.flush(Instant::now());
        transmit(
            &mut self.server,
            &self.socket,
            &mut self.outbox,
            &mut self.scratch[..],
        )
        .await?;
        Ok(())
    }

    /// Republishes the worker's view: rooms, connected players, counters, tick times.
    fn publish(&self) {
        let mut view = WorkerView {
            rooms: self.shard.rooms().collect(),
            udp: self.server.stats().clone(),
            shard: self.shard.stats(),
            tick_times: self.shard.tick_times().clone(),
            joins_refused: self.report.joins_refused,
            refused_by_address: self.refused_by_address,
            ..WorkerView::default()
        };
        for room in &view.rooms {
            for member in self.shard.members(room.id).unwrap_or_default() {
                let Some(connected) = self.players.get(&member.id) else {
                    view.players_held += 1;
                    continue;
                };
                view.players.push(PlayerSummary {
                    id: member.id,
                    name: member.name.clone(),
                    transport: match &connected.link {
                        Link::Udp(_) => "udp",
                        Link::Ws(_) => "ws",
                        Link::Wt { sender, .. } => sender.transport(),
                    }
                    .to_string(),
                    room: Some(room.id.0),
                });
            }
        }
        self.links.view.publish(view);
    }

    /// After a shutdown's close frames: waits (within their close timeout) for the clients'
    /// close answers, so no socket is dropped with unread data (a reset that can destroy the
    /// close frame in flight).
    async fn linger_ws(&mut self) {
        while !self.ws.is_empty() {
            let now = Instant::now();
            self.ws.handle_timeout(now);
            let wake = self
                .ws
                .poll_timeout()
                .map_or(now + MIN_WAIT, |at| at.max(now + MIN_WAIT));
            tokio::select! {
                readable = self.ws.readable() => {
                    if readable.is_err() {
                        return;
                    }
                    self.ws.handle_io(Instant::now());
                }
                () = sleep_until(Some(wake)) => {}
            }
            while self.ws.poll_event().is_some() {}
            self.ws.flush(Instant::now());
        }
    }

    async fn stop(mut self) -> io::Result<WorkerReport> {
        let now = Instant::now();
        self.shard.shut_down(now);
        self.route_outputs(now);
        let players: Vec<PlayerId> = self.players.keys().copied().collect();
        for player in players {
            if let Some(link) = self.release(player) {
                end_link(
                    &mut self.server,
                    &mut self.ws,
                    now,
                    link,
                    DisconnectReason::ServerShutdown,
                    "server shutting down",
                );
            }
        }
        // Sockets attached to no player (refused, or closing already) go too.
        self.ws
            .close_all(CloseCode::ServerShutdown, "server shutting down");
        self.flush().await?;
        self.linger_ws().await;
        self.publish();
        let stats = self.server.stats();
        self.report.datagrams_sent = stats.datagrams_sent;
        self.report.datagrams_received = stats.datagrams_received;
        Ok(self.report)
    }
}

/// Whether a client's close frame gives up the seat. 1001 (going away: what a browser sends
/// when its page closes or reloads) and the application codes 4000–4999 other than 4001 (a
/// client that gave up on a silent server closes with 4002 and comes back) are treated as a
/// lost connection: the seat is held for the reconnection grace. No code, 1000, 4001 and
/// anything else mean the player left.
fn closing_leaves(code: Option<u16>) -> bool {
    !matches!(code, Some(1001 | 4000 | 4002..=4999))
}

/// Forgets a player's connection and gives back its place in the per-address limit; the
/// link, to close if the caller is the one ending it.
fn release(
    players: &mut IdMap<PlayerId, Connected>,
    udp_players: &mut IdMap<ConnectionId, PlayerId>,
    ws_players: &mut IdMap<WsLinkId, PlayerId>,
    limiter: Option<&SharedIpLimiter>,
    player: PlayerId,
) -> Option<Link> {
    let connected = players.remove(&player)?;
    if let (Some(limiter), Some(ip)) = (limiter, connected.ip) {
        limiter.closed(ip);
    }
    match &connected.link {
        Link::Udp(connection) => {
            udp_players.remove(connection);
        }
        Link::Ws(link) => {
            ws_players.remove(link);
        }
        Link::Wt { .. } => {}
    }
    Some(connected.link)
}

/// Ends a link the worker has unlisted, telling the client `reason` on whichever transport
/// it uses (UDP's disconnect reason, or the WebSocket close code `4000 +` it).
fn end_link(
    server: &mut Server,
    ws: &mut WsLinks,
    now: Instant,
    link: Link,
    reason: DisconnectReason,
    text: &str,
) {
    let code = CloseCode::from_disconnect_reason(reason);
    match link {
        Link::Udp(connection) => server.disconnect(now, connection, reason),
        Link::Ws(link) => ws.close(link, code, text),
        Link::Wt { sender, .. } => sender.close(code, text),
    }
}

/// Sends a seat change to the matchmaker. The queue is unbounded on purpose: every event
/// stems from one connection's join or leave (bounded by the connection limits), the
/// consumer only updates a map, and a lost event would leave a seat counted forever.
fn report(links: &WorkerLinks, event: WorkerEvent) {
    if let Some(events) = &links.events {
        let _ = events.send(event);
    }
}
