//! The worker's loop and state, all owned by its thread.

use std::io;
use std::time::Instant;

use tickwire_net::driver::{MIN_WAIT, sleep_until, transmit};
use tickwire_net::udp::{BatchSocket, RecvBatch, SendBatch};
use tickwire_net::ws::{
    AdmittedClient, CloseCode, WsClosed, WsLinkEvent, WsLinkId, WsLinks, WsSocket,
};
use tickwire_net::wt::{WtLinkEvent, WtLinkId};
use tickwire_proto::{ConnectionId, DisconnectReason, Server, ServerEvent};
use tokio::sync::mpsc;

use super::view::{PUBLISH_INTERVAL, WorkerLinks, WorkerView};
use super::wt::WtHost;
use super::{Control, WorkerReport};
use crate::console::{LinkQuality, PlayerSummary, PlayerTransport};
use crate::room::PlayerId;
use crate::sessions::{Admission, LinkClosed, SessionOutput, Sessions};
use crate::shard::{SeatChange, Shard};

/// Most `recvmmsg` batches one turn of the loop takes in before it answers them. Whatever
/// is already waiting in the socket when a turn starts is ready together with it: taking it
/// in the same turn lets the messages bound for one player leave in one datagram, and holds
/// nothing back, since the turn ends by sending. A server that falls behind thus takes
/// larger turns, which cost less per message, and catches up. The bound (128 × 64
/// datagrams, some 15 ms of reading) keeps a turn short enough under a flood that timers
/// and ticks still run, and takes in a crowd's warp whole: 5,000 warps with the inputs
/// and acks around them overran the 4,096 of a bound of 64, and the rest waited a tick.
const RECV_BATCHES_PER_TURN: usize = 128;

/// How a connected player is reached: the link handle the session table keys players by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Link {
    Udp(ConnectionId),
    /// A WebSocket connection this worker drives itself.
    Ws(WsLinkId),
    /// A WebTransport session this worker drives itself.
    Wt(WtLinkId),
}

pub(super) struct Worker {
    socket: BatchSocket,
    server: Server,
    /// Who each connection is and which seat is theirs; owns the shard.
    sessions: Sessions<Link>,
    links: WorkerLinks,
    ws: WsLinks,
    /// The shard's WebTransport sessions, once the runtime has handed them over.
    wt: Option<WtHost>,
    /// Events taken from `wt`, handled with the whole worker at hand.
    wt_events: Vec<WtLinkEvent>,
    inbox: RecvBatch,
    outbox: SendBatch,
    report: WorkerReport,
    next_publish: Instant,
}

impl Worker {
    pub(super) fn new(
        socket: BatchSocket,
        server: Server,
        shard: Shard,
        links: WorkerLinks,
    ) -> io::Result<Self> {
        let mut sessions = Sessions::new(shard);
        if let Some(limiter) = &links.limiter {
            sessions.set_address_limit(Box::new(limiter.clone()));
        }
        Ok(Self {
            socket,
            server,
            sessions,
            links,
            ws: WsLinks::new()?,
            wt: None,
            wt_events: Vec::new(),
            inbox: RecvBatch::new(),
            outbox: SendBatch::new(),
            report: WorkerReport::default(),
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
            if let Some(wt) = &mut self.wt {
                wt.handle_timeout(now);
                self.take_wt_events(now);
            }
            // Ticks, then their events on the wire, then the rooms' publish phase
            // (snapshots): a confirmation never waits behind every player's snapshot.
            self.sessions.shard_mut().tick_due(now, &mut Instant::now);
            self.route_outputs(now);
            self.flush().await?;
            // What arrived while the ticks ran, read before the publish phase: with a crowd
            // the two phases and their sends outlast what the socket's buffer holds, and a
            // datagram the kernel drops is an input or an ack lost. Nothing read here
            // changes what the publish sends (inputs wait for the next step).
            // Only when a publish follows: most turns run no tick, and a read that finds the
            // socket empty is a syscall for nothing.
            if self.sessions.shard().publish_pending() {
                self.take_waiting_datagrams()?;
            }
            self.sessions
                .shard_mut()
                .publish_due(now, &mut Instant::now);
            let sending = Instant::now();
            self.route_outputs(now);
            self.flush().await?;
            // The snapshots' sending counts toward the next publish's expected time.
            self.sessions.shard_mut().publish_sent(sending.elapsed());
            if now >= self.next_publish {
                self.publish();
                self.next_publish = now + PUBLISH_INTERVAL;
            }

            let deadline = [
                self.server.poll_timeout(),
                self.ws.poll_timeout(),
                self.wt.as_ref().and_then(|wt| wt.links.poll_timeout()),
                self.sessions.shard().next_deadline(),
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
                readable = wt_readable(self.wt.as_ref()) => {
                    readable?;
                    let now = Instant::now();
                    if let Some(wt) = &mut self.wt {
                        wt.handle_io(now);
                    }
                    self.take_wt_events(now);
                    self.route_outputs(now);
                }
                message = control.recv() => {
                    let now = Instant::now();
                    match message {
                        Some(Control::CreateRoom { id, kind, room, capacity, options, created }) => {
                            let result = self
                                .sessions
                                .shard_mut()
                                .create_room_with(now, id, kind, room, capacity, &options);
                            if let Err(error) = &result {
                                tracing::info!(?id, %error, "room not created");
                            }
                            self.route_outputs(now);
                            if let Some(created) = created {
                                let _ = created.send(result);
                            }
                        }
                        Some(Control::Lock { room, locked, done }) => {
                            let found = self.sessions.shard_mut().set_locked(now, room, locked);
                            self.route_outputs(now);
                            let _ = done.send(found);
                        }
                        Some(Control::Dispose { room, done }) => {
                            let found = self.sessions.shard_mut().dispose_room(now, room);
                            self.route_outputs(now);
                            let _ = done.send(found);
                        }
                        Some(Control::Attach(socket)) => self.attach_ws(now, socket),
                        Some(Control::WebTransport(serve)) => match WtHost::new(*serve) {
                            Ok(host) => self.wt = Some(host),
                            Err(error) => {
                                tracing::error!(%error, "webtransport sessions not served by this shard");
                            }
                        },
                        Some(Control::Kick { player, reason }) => {
                            self.sessions.kick(now, player, &reason);
                        }
                        Some(Control::Say(text)) => self.sessions.shard_mut().announce(now, &text),
                        Some(Control::Stop) | None => return self.stop().await,
                    }
                }
                () = sleep_until(deadline) => {}
            }
        }
    }

    /// Hands the batch just received to the protocol, then everything else already waiting
    /// in the socket, up to [`RECV_BATCHES_PER_TURN`] batches (none more if a tick is
    /// already due). Each batch's messages go
    /// through the shard onto connections before the next batch is read, so the event and
    /// output buffers hold one batch's worth, not a turn's; what they queued is sent at the
    /// turn's end.
    fn take_datagrams(&mut self) -> io::Result<()> {
        self.take_batches(true)
    }

    /// As [`take_datagrams`](Self::take_datagrams), between a turn's phases: whatever
    /// waits in the socket, without waiting for it.
    fn take_waiting_datagrams(&mut self) -> io::Result<()> {
        self.take_batches(false)
    }

    fn take_batches(&mut self, first_in_hand: bool) -> io::Result<()> {
        let now = Instant::now();
        // A tick already due goes first: only the batch in hand is taken, and the rest is
        // read between that tick and its publish. A whole turn's reading (9 ms after a
        // crowd's warp) would otherwise hold back the tick that confirms the warps read
        // meanwhile.
        let tick_due = || {
            let due = self.sessions.shard().next_deadline();
            due.is_some_and(|at| at <= now)
        };
        let batches = if first_in_hand && tick_due() {
            1
        } else {
            RECV_BATCHES_PER_TURN
        };
        for turn in 0..batches {
            if turn > 0 || !first_in_hand {
                match self.socket.try_recv_batch(&mut self.inbox) {
                    Ok(_) => {}
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) => return Err(error),
                }
            }
            for (from, _) in &self.inbox {
                self.server.prefetch(from);
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

    /// Connections, messages and disconnects from the protocol, into the session table.
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
                    let admission =
                        self.sessions
                            .admit(now, player, Some(address.ip()), &user_data);
                    match self.admitted(now, admission) {
                        Ok(()) => {
                            let rate = self.tick_rate_of(player);
                            self.server.accept(now, connection, rate);
                            self.sessions.bind(player, Link::Udp(connection));
                        }
                        Err(refused) => self.server.disconnect_saying(
                            now,
                            connection,
                            DisconnectReason::Kicked,
                            &refused.to_string(),
                        ),
                    }
                }
                ServerEvent::Message {
                    connection,
                    channel,
                    message,
                } => self
                    .sessions
                    .message(now, Link::Udp(connection), channel, message),
                ServerEvent::Disconnected {
                    connection, reason, ..
                } => {
                    let how = match reason {
                        DisconnectReason::Requested => LinkClosed::Goodbye,
                        // Anything else may be a network hiccup: hold the seat.
                        _ => LinkClosed::Lost,
                    };
                    let _ = self.sessions.closed(now, Link::Udp(connection), how);
                }
            }
        }
    }

    /// Messages and closes from the WebSocket connections, into the session table.
    fn take_ws_events(&mut self, now: Instant) {
        while let Some(event) = self.ws.poll_event() {
            match event {
                WsLinkEvent::Message {
                    link,
                    channel,
                    message,
                } => self.sessions.message(now, Link::Ws(link), channel, message),
                // A link the worker closed itself (a kick, a replacement) is unlisted
                // already and changes nothing.
                WsLinkEvent::Closed { link, closed } => {
                    let _ = self
                        .sessions
                        .closed(now, Link::Ws(link), link_closed(&closed));
                }
            }
        }
    }

    /// Tokens, messages and closes from the WebTransport sessions, into the session table.
    fn take_wt_events(&mut self, now: Instant) {
        let Some(wt) = &mut self.wt else {
            return;
        };
        let mut events = std::mem::take(&mut self.wt_events);
        events.extend(std::iter::from_fn(|| wt.links.poll_event()));
        for event in events.drain(..) {
            match event {
                WtLinkEvent::Token { link, token, .. } => self.attach_wt(now, link, &token),
                WtLinkEvent::Message {
                    link,
                    channel,
                    message,
                } => self.sessions.message(now, Link::Wt(link), channel, message),
                // A link the worker closed itself (a kick, a replacement) is unlisted
                // already and changes nothing.
                WtLinkEvent::Closed { link, closed } => {
                    let _ = self
                        .sessions
                        .closed(now, Link::Wt(link), link_closed(&closed));
                }
            }
        }
        self.wt_events = events;
    }

    /// Seats a client admitted by its connect token (WebSocket or WebTransport): the table's
    /// answer, carried out; see [`admitted`](Self::admitted).
    fn seat(
        &mut self,
        now: Instant,
        client: &AdmittedClient,
    ) -> Result<(), crate::sessions::Refused> {
        let player = PlayerId(client.client_id());
        let ip = client.peer_address().map(|address| address.ip());
        let admission = self.sessions.admit(now, player, ip, client.user_data());
        self.admitted(now, admission)
    }

    /// The tick rate a seated player's connection parameters carry: its room's.
    fn tick_rate_of(&self, player: PlayerId) -> u8 {
        // Rooms tick at 1..=128 Hz; a player just seated always has a room.
        let rate = self.sessions.shard().tick_rate_of(player);
        rate.and_then(|rate| u8::try_from(rate).ok())
            .unwrap_or(self.server.params().tick_rate_hz)
    }

    /// Carries out the table's answer to a link opening: closes the link it replaced;
    /// the new one is to be bound, or refused with the reason.
    fn admitted(
        &mut self,
        now: Instant,
        admission: Admission<Link>,
    ) -> Result<(), crate::sessions::Refused> {
        if let Some(older) = admission.replaced {
            self.end_link(
                now,
                older,
                DisconnectReason::AlreadyConnected,
                "connected again elsewhere",
            );
        }
        if admission.seat.is_err() {
            self.report.joins_refused = self.sessions.stats().joins_refused;
        }
        admission.seat
    }

    /// A WebSocket player admitted by the HTTP side: seated first, then attached, so the
    /// accepted message is the first thing on the socket and everything the room sends
    /// after it follows.
    fn attach_ws(&mut self, now: Instant, socket: WsSocket) {
        let player = PlayerId(socket.client().client_id());
        if let Err(refused) = self.seat(now, socket.client()) {
            self.ws
                .refuse(now, socket, CloseCode::Kicked, &refused.to_string());
            return;
        }
        let rate = self.tick_rate_of(player);
        match self.ws.attach(now, socket, rate) {
            Ok(link) => {
                self.report.ws_attached += 1;
                self.sessions.bind(player, Link::Ws(link));
                // Messages the client sent right after its token.
                self.take_ws_events(now);
            }
            Err(error) => {
                tracing::warn!(%error, "websocket not attached");
                self.sessions.abandon(now, player);
            }
        }
    }

    /// A WebTransport session whose connect token arrived: checked (the check every
    /// transport shares), seated, then accepted, so the accepted message is the first thing
    /// on its stream and everything the room sends after it follows.
    fn attach_wt(&mut self, now: Instant, link: WtLinkId, token: &[u8]) {
        let Some(wt) = &mut self.wt else {
            return;
        };
        let client = match wt.links.admit(link, token, &wt.doorman) {
            Ok(client) => client,
            Err((code, reason)) => {
                wt.links.refuse(link, code, &reason);
                return;
            }
        };
        let player = PlayerId(client.client_id());
        if let Err(refused) = self.seat(now, &client) {
            if let Some(wt) = &mut self.wt {
                wt.links
                    .refuse(link, CloseCode::Kicked, &refused.to_string());
            }
            return;
        }
        let rate = self.tick_rate_of(player);
        let Some(wt) = &mut self.wt else {
            return;
        };
        match wt.links.accept(link, &wt.doorman.accepted_at(rate)) {
            Ok(()) => {
                self.report.ws_attached += 1;
                self.sessions.bind(player, Link::Wt(link));
            }
            // Gone while it was seated (its client closed in this same turn).
            Err(_) => self.sessions.abandon(now, player),
        }
    }

    /// Ends a link the session table has unlisted, telling the client `reason` on whichever
    /// transport it uses (UDP's disconnect reason, or the WebSocket close code `4000 +` it).
    fn end_link(&mut self, now: Instant, link: Link, reason: DisconnectReason, text: &str) {
        end_link(
            &mut self.server,
            &mut self.ws,
            self.wt.as_mut(),
            now,
            link,
            reason,
            text,
        );
    }

    /// The table's sends, closes and seat changes, onto connections and the event queue.
    fn route_outputs(&mut self, now: Instant) {
        for output in self.sessions.drain_outputs() {
            match output {
                // A refused send (a full reliable queue, a slow WebSocket reader) closes
                // that connection in its transport; the close event tells the table.
                SessionOutput::Send {
                    link,
                    channel,
                    message,
                } => match link {
                    Link::Udp(connection) => {
                        let _ = self.server.send(now, connection, channel, message);
                    }
                    Link::Ws(link) => {
                        let _ = self.ws.send(link, channel, message);
                    }
                    Link::Wt(link) => {
                        if let Some(wt) = &mut self.wt {
                            let _ = wt.links.send(link, channel, message);
                        }
                    }
                },
                SessionOutput::Close { link, reason, text } => end_link(
                    &mut self.server,
                    &mut self.ws,
                    self.wt.as_mut(),
                    now,
                    link,
                    reason,
                    &text,
                ),
                SessionOutput::Seat(change) => report(&self.links, change),
            }
        }
        for crash in self.sessions.shard_mut().drain_crashes() {
            tracing::error!(
                room = %crash.room,
                kind = %crash.kind,
                panic = %crash.panic,
                "a room panicked: disposed of it alone, its players told \"room crashed\""
            );
        }
        for failure in self.sessions.shard_mut().drain_encode_failures() {
            tracing::warn!(
                room = %failure.room,
                kind = %failure.kind,
                error = %failure.error,
                "a room's message did not encode and was not sent (the first of its kind for \
                 this room kind; every one counts in tickwire_messages_unencodable_total)"
            );
        }
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.ws.flush();
        if let Some(wt) = &mut self.wt {
            wt.links.flush(Instant::now());
        }
        transmit(&mut self.server, &self.socket, &mut self.outbox).await?;
        Ok(())
    }

    /// Republishes the worker's view: rooms, connected players, counters, tick times.
    fn publish(&self) {
        let shard = self.sessions.shard();
        let mut view = WorkerView {
            rooms: shard.rooms().collect(),
            udp: self.server.stats().clone(),
            recv: *self.inbox.stats(),
            shard: shard.stats(),
            tick_times: shard.tick_times().clone(),
            replication: shard.replication_profiles().clone(),
            joins_refused: self.sessions.stats().joins_refused,
            refused_by_address: self.sessions.stats().refused_by_address,
            ..WorkerView::default()
        };
        for room in &view.rooms {
            for member in shard.members(room.id).unwrap_or_default() {
                let Some(link) = self.sessions.link_of(member.id) else {
                    view.players_held += 1;
                    continue;
                };
                view.players.push(PlayerSummary {
                    id: member.id,
                    name: member.name.clone(),
                    transport: match link {
                        Link::Udp(_) => PlayerTransport::Udp,
                        Link::Ws(_) => PlayerTransport::Ws,
                        Link::Wt(_) => PlayerTransport::Wt,
                    },
                    room: Some(room.id.0),
                    link: match link {
                        Link::Udp(connection) => {
                            self.server
                                .connection_stats(connection)
                                .map(|stats| LinkQuality {
                                    rtt: stats.reliability.rtt,
                                    loss: stats.reliability.packet_loss,
                                })
                        }
                        Link::Ws(_) | Link::Wt(_) => None,
                    },
                });
            }
        }
        self.links.view.publish(view);
    }

    async fn stop(mut self) -> io::Result<WorkerReport> {
        let now = Instant::now();
        // The rooms' last words, then every link closes with "server shutting down".
        self.sessions.shut_down(now);
        self.route_outputs(now);
        // Sockets attached to no player (refused, or closing already) go too, and
        // WebTransport sessions in any state (in their handshake, before their token).
        self.ws
            .close_all(CloseCode::ServerShutdown, "server shutting down");
        if let Some(wt) = &mut self.wt {
            wt.links
                .close_all(CloseCode::ServerShutdown, "server shutting down");
        }
        self.flush().await?;
        tokio::join!(linger_ws(&mut self.ws), linger_wt(self.wt.as_mut()));
        self.publish();
        self.report.joins_refused = self.sessions.stats().joins_refused;
        let stats = self.server.stats();
        self.report.datagrams_sent = stats.datagrams_sent;
        self.report.datagrams_received = stats.datagrams_received;
        Ok(self.report)
    }
}

/// How a WebSocket or WebTransport connection ended, for the session table to decide
/// leave or hold.
fn link_closed(closed: &WsClosed) -> LinkClosed {
    match closed {
        WsClosed::ByClient { code, .. } => LinkClosed::Code(*code),
        _ => LinkClosed::Lost,
    }
}

/// Ends a link the session table has unlisted, telling the client `reason` on whichever
/// transport it uses (UDP's disconnect reason, or the WebSocket close code `4000 +` it).
fn end_link(
    server: &mut Server,
    ws: &mut WsLinks,
    wt: Option<&mut WtHost>,
    now: Instant,
    link: Link,
    reason: DisconnectReason,
    text: &str,
) {
    let code = CloseCode::from_disconnect_reason(reason);
    match link {
        Link::Udp(connection) => server.disconnect_saying(now, connection, reason, text),
        Link::Ws(link) => ws.close(link, code, text),
        Link::Wt(link) => {
            if let Some(wt) = wt {
                wt.links.close(link, code, text);
            }
        }
    }
}

/// Resolves when `wt`'s socket may hold datagrams; never without WebTransport.
async fn wt_readable(wt: Option<&WtHost>) -> io::Result<()> {
    match wt {
        Some(wt) => wt.readable().await,
        None => std::future::pending().await,
    }
}

/// After a shutdown's close frames: waits (within their close timeout) for the clients'
/// close answers, so no socket is dropped with unread data (a reset that can destroy the
/// close frame in flight).
async fn linger_ws(ws: &mut WsLinks) {
    while !ws.is_empty() {
        let now = Instant::now();
        ws.handle_timeout(now);
        let wake = ws
            .poll_timeout()
            .map_or(now + MIN_WAIT, |at| at.max(now + MIN_WAIT));
        tokio::select! {
            readable = ws.readable() => {
                if readable.is_err() {
                    return;
                }
                ws.handle_io(Instant::now());
            }
            () = sleep_until(Some(wake)) => {}
        }
        while ws.poll_event().is_some() {}
        ws.flush();
    }
}

/// After a shutdown's close frames: drives the WebTransport sessions until each has sent
/// its QUIC close (the client answered its close frame, the frame was acknowledged, or the
/// close timeout passed), so every client reads its close code rather than a lost
/// connection.
async fn linger_wt(wt: Option<&mut WtHost>) {
    let Some(wt) = wt else {
        return;
    };
    loop {
        let now = Instant::now();
        wt.handle_timeout(now);
        while wt.links.poll_event().is_some() {}
        wt.links.flush(now);
        // Checked after the timers ran and the flush: the last close may have just gone
        // out. Sessions that have sent their QUIC close are only draining (seconds of
        // QUIC's own timers), which the clients do not wait for.
        if wt.links.all_closed() {
            return;
        }
        let wake = wt
            .links
            .poll_timeout()
            .map_or(now + MIN_WAIT, |at| at.max(now + MIN_WAIT));
        tokio::select! {
            readable = wt.readable() => {
                if readable.is_err() {
                    return;
                }
                wt.handle_io(Instant::now());
            }
            () = sleep_until(Some(wake)) => {}
        }
    }
}

/// Sends a seat change to the matchmaker. The queue is unbounded on purpose: every event
/// stems from one connection's join or leave (bounded by the connection limits), the
/// consumer only updates a map, and a lost event would leave a seat counted forever.
fn report(links: &WorkerLinks, event: SeatChange) {
    if let Some(events) = &links.events {
        let _ = events.send(event);
    }
}
