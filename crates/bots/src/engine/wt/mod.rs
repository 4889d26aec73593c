//! A group of WebTransport bots driven by one task, as the server's own `WtLinks` drives
//! its sessions: every bot is a sans-IO `quinn-proto` client connection with its HTTP/3
//! and tickwire session on top ([`session`]), all on one `quinn_proto::Endpoint` per UDP
//! socket. A 1 ms tick (the UDP engine's, and for its reason: nothing sleeps on a socket,
//! so the server never pays for waking a bot) reads what arrived with `recvmmsg`, runs
//! QUIC's timers and due sends from one timer heap, and sends every touched connection's
//! packets with `sendmmsg`. No task, timer or buffer per bot: a bot is its QUIC connection,
//! its session state and its scenario logic.
//!
//! QUIC tells its connections apart by connection ID, so bots share sockets; one socket
//! carries at most [`BOTS_PER_SOCKET`] of them, so a server tick's burst (a snapshot per
//! bot) fits its receive buffer many times over.

mod session;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{ClientConfig, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig};
use tickwire_client::MatchAnswer;
use tickwire_net::due::{DueTimes, earliest};
use tickwire_net::udp::{RecvBatch, SendBatch};
use tickwire_net::ws::CloseCode;
use tickwire_net::wt::{h3, parse_cert_sha256, quic_client_config};

use self::session::{Greeting, Session, SessionEvent};
use super::ledger::Ledger;
use super::{
    CLOSE_PACE, GroupResult, GroupSpec, OneTask, Pending, Queue, TICK, close_batches, drive,
};
use crate::plan::Plan;
use crate::scenario::BotLogic;

/// Bots per socket (and endpoint): a server tick's burst for them, a snapshot each, fits
/// the socket's receive buffer many times over.
const BOTS_PER_SOCKET: usize = 512;
/// Receive batches taken from each socket per pass (64 datagrams each): a server tick
/// arrives as a burst, and taking it whole would hold every due send behind it.
const BATCHES_PER_PASS: usize = 1;
/// Send batch slots: a flush to many connections goes out in few `sendmmsg` calls.
const SEND_BATCH: usize = 256;
/// How long the closes are given to be answered by the server's QUIC close.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// One socket, its QUIC endpoint and the bots it carries.
struct Wire {
    socket: UdpSocket,
    ipv6: bool,
    endpoint: Endpoint,
    /// Bot key by quinn's connection handle.
    bots: Vec<Option<usize>>,
    outbox: SendBatch,
}

impl Wire {
    fn open(server: SocketAddr) -> io::Result<Self> {
        let local: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        // The server's buffer sizes: this socket carries hundreds of bots.
        let socket = tickwire_net::udp::bind(local)?;
        Ok(Self {
            socket,
            ipv6: local.is_ipv6(),
            endpoint: Endpoint::new(Arc::new(EndpointConfig::default()), None, false, None),
            bots: Vec::new(),
            outbox: SendBatch::with_capacity(SEND_BATCH, SendBatch::DEFAULT_SLOT_SIZE),
        })
    }

    /// Queues a transmit's datagrams (quinn may build several of one size), sending the
    /// batch whenever it fills.
    fn queue_transmit(&mut self, transmit: &quinn_proto::Transmit, buf: &[u8]) -> u64 {
        let size = transmit.size.min(buf.len());
        let segment = transmit.segment_size.unwrap_or(size).max(1);
        let mut queued = 0;
        for datagram in buf[..size].chunks(segment) {
            if self.outbox.is_full() {
                self.send();
            }
            if datagram.len() <= self.outbox.slot_size() {
                self.outbox.push(transmit.destination, datagram);
                queued += 1;
            }
        }
        queued
    }

    /// One `sendmmsg` round. A full socket buffer drops the rest: QUIC takes it as loss and
    /// sends again, and nothing waits behind it.
    fn send(&mut self) {
        if !self.outbox.is_empty() {
            let _ = self.outbox.send_to_fd(self.socket.as_fd(), self.ipv6);
            self.outbox.clear();
        }
    }
}

/// A server the group's bots connect to, worked out once for all of them.
struct Target {
    url: String,
    cert_sha256: Option<String>,
    address: SocketAddr,
    server_name: String,
    config: ClientConfig,
    greeting: Rc<Greeting>,
}

impl Target {
    fn new(url: &str, cert_sha256: Option<&str>) -> Result<Self, String> {
        let authority = url
            .strip_prefix("https://")
            .and_then(|rest| rest.split('/').next())
            .filter(|authority| !authority.is_empty())
            .ok_or_else(|| format!("{url:?} is not an https URL"))?;
        let address = authority
            .to_socket_addrs()
            .map_err(|error| format!("{authority}: {error}"))?
            .next()
            .ok_or_else(|| format!("{authority} has no address"))?;
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host);
        let hash = match cert_sha256 {
            Some(hex) => Some(
                parse_cert_sha256(hex)
                    .ok_or_else(|| format!("cert_sha256 {hex:?} is not 64 hex digits"))?,
            ),
            None => None,
        };
        let config = quic_client_config(hash).map_err(|error| error.to_string())?;
        let request = h3::connect_request(url).map_err(|error| format!("{url}: {error:?}"))?;
        Ok(Self {
            url: url.to_owned(),
            cert_sha256: cert_sha256.map(str::to_owned),
            address,
            server_name: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            config,
            greeting: Rc::new(Greeting {
                control: h3::control_stream_opening(),
                request,
            }),
        })
    }
}

/// One bot: its connection and session, its scenario logic.
struct Bot {
    id: u32,
    room: u64,
    wire: usize,
    handle: ConnectionHandle,
    /// `None` once quinn has forgotten the connection.
    session: Option<Session>,
    greeting: Rc<Greeting>,
    /// Made when the server accepts the token.
    logic: Option<Box<dyn BotLogic>>,
    /// Until connected: when the handshake counts as failed.
    handshake_deadline: Option<Instant>,
    connected: bool,
    ended: bool,
    dirty: bool,
    touched: bool,
}

/// A bot's session and the group's datagram buffers: what the logic's sends go into.
struct Outgoing<'a> {
    session: &'a mut Session,
    arena: &'a mut BytesMut,
    scratch: &'a mut Vec<u8>,
}

impl Queue for Outgoing<'_> {
    fn queue(&mut self, channel: u8, message: bytes::Bytes) -> bool {
        self.session
            .queue(channel, &message, self.arena, self.scratch)
    }
}

struct Group {
    wires: Vec<Wire>,
    targets: Vec<Target>,
    bots: Vec<Bot>,
    due: DueTimes,
    expired: Vec<usize>,
    /// Bots that received or timed out in this pass, for their events.
    touched: Vec<usize>,
    /// Bots with something to send, each listed once (its `dirty` flag set).
    dirty: Vec<usize>,
    /// Taken while its datagrams are handled.
    inbox: Option<RecvBatch>,
    /// Received datagrams are copied here and split off, and outgoing datagrams built here,
    /// so quinn gets owned buffers without an allocation per datagram.
    arena: BytesMut,
    scratch: Vec<u8>,
    /// Where quinn writes a transmit.
    transmit: Vec<u8>,
    ledger: Ledger,
}

pub(super) async fn run(spec: GroupSpec) -> Option<GroupResult> {
    let group = Group {
        bots: Vec::with_capacity(spec.bots.len()),
        wires: Vec::new(),
        targets: Vec::new(),
        due: DueTimes::default(),
        expired: Vec::new(),
        touched: Vec::new(),
        dirty: Vec::new(),
        inbox: Some(RecvBatch::new()),
        arena: BytesMut::new(),
        scratch: Vec::new(),
        transmit: Vec::new(),
        ledger: Ledger::new(Rc::new(spec)),
    };
    drive(group, Pending::default()).await
}

impl OneTask for Group {
    fn ledger(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    async fn tick(&mut self, pending: &Pending) {
        self.adopt(pending);
        self.turn();
    }

    fn start(&mut self, plan: Arc<Plan>) {
        let logics = self.bots.iter_mut().filter_map(|bot| bot.logic.as_mut());
        self.ledger.start(plan, logics);
        self.due.set_all(Instant::now());
    }

    /// Every bot leaves: its close frame, paced ([`close_batches`]), answered by the
    /// server's QUIC close; the closes not answered within [`CLOSE_WAIT`] become QUIC
    /// closes (4001) of this side.
    async fn close(&mut self) {
        for batch in close_batches(self.bots.len()) {
            let now = Instant::now();
            for key in batch {
                let bot = &mut self.bots[key];
                bot.ended = true;
                if let Some(session) = bot.session.as_mut() {
                    session.close(now);
                    self.mark_dirty(key);
                }
            }
            self.turn();
            tokio::time::sleep(CLOSE_PACE).await;
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        while Instant::now() < deadline && self.bots.iter().any(Self::awaits_close) {
            self.turn();
            tokio::time::sleep(TICK).await;
        }
        let now = Instant::now();
        for key in 0..self.bots.len() {
            if let Some(session) = self.bots[key].session.as_mut()
                && !session.quic.is_closed()
            {
                session.close_quic(CloseCode::Requested, now);
                self.mark_dirty(key);
            }
        }
        self.flush();
    }

    fn into_ledger(self) -> Ledger {
        self.ledger
    }
}

impl Group {
    /// One tick's work: receive a pass from every socket, run what is due, send; again
    /// while a socket had more waiting.
    fn turn(&mut self) {
        loop {
            let more = self.receive();
            self.sweep();
            self.flush();
            self.ledger.publish();
            if !more {
                break;
            }
        }
    }

    /// Starts each matchmade bot's QUIC connection.
    fn adopt(&mut self, pending: &Pending) {
        let answers: Vec<_> = pending.borrow_mut().drain(..).collect();
        for (id, answer) in answers {
            if let Err(error) = self.open(id, &answer) {
                self.ledger.fail(id, error);
            }
        }
    }

    fn open(&mut self, id: u32, answer: &MatchAnswer) -> Result<(), String> {
        let endpoint = answer
            .endpoints
            .wt
            .as_ref()
            .ok_or("the server offers no WebTransport")?;
        let token = answer
            .token
            .to_bytes()
            .map_err(|error| format!("token: {error}"))?;
        let target = self.target(&endpoint.url, endpoint.cert_sha256.as_deref())?;
        let key = self.bots.len();
        let wire = key / BOTS_PER_SOCKET;
        if wire == self.wires.len() {
            let address = self.targets[target].address;
            self.wires
                .push(Wire::open(address).map_err(|error| format!("socket: {error}"))?);
        }
        let now = Instant::now();
        let target = &self.targets[target];
        let (handle, quic) = self.wires[wire]
            .endpoint
            .connect(
                now,
                target.config.clone(),
                target.address,
                &target.server_name,
            )
            .map_err(|error| format!("connect: {error}"))?;
        let by_handle = &mut self.wires[wire].bots;
        if by_handle.len() <= handle.0 {
            by_handle.resize(handle.0 + 1, None);
        }
        by_handle[handle.0] = Some(key);
        let token: Box<[u8]> = token.to_vec().into_boxed_slice();
        self.bots.push(Bot {
            id,
            room: answer.room,
            wire,
            handle,
            session: Some(Session::new(quic, token)),
            greeting: target.greeting.clone(),
            logic: None,
            handshake_deadline: Some(now + self.ledger.spec.config.connect_timeout),
            connected: false,
            ended: false,
            dirty: false,
            touched: false,
        });
        self.due.add(key);
        self.mark_dirty(key);
        Ok(())
    }

    /// The index of the target for `url` and `cert_sha256`, made on first use (a renewed
    /// certificate makes another).
    fn target(&mut self, url: &str, cert_sha256: Option<&str>) -> Result<usize, String> {
        if let Some(index) = self
            .targets
            .iter()
            .position(|t| t.url == url && t.cert_sha256.as_deref() == cert_sha256)
        {
            return Ok(index);
        }
        self.targets.push(Target::new(url, cert_sha256)?);
        Ok(self.targets.len() - 1)
    }

    fn mark_dirty(&mut self, key: usize) {
        let bot = &mut self.bots[key];
        if !bot.dirty {
            bot.dirty = true;
            self.dirty.push(key);
        }
    }

    fn touch(&mut self, key: usize) {
        let bot = &mut self.bots[key];
        if !bot.touched {
            bot.touched = true;
            self.touched.push(key);
        }
    }

    /// Receives one pass from every socket into the endpoints, then runs the touched bots'
    /// sessions; true if a socket may hold more.
    fn receive(&mut self) -> bool {
        let Some(mut inbox) = self.inbox.take() else {
            return false;
        };
        let mut more = false;
        let mut received = 0u64;
        for index in 0..self.wires.len() {
            let mut drained = false;
            for _ in 0..BATCHES_PER_PASS {
                match inbox.recv_from_fd(self.wires[index].socket.as_fd()) {
                    Ok(_) => {}
                    // Empty; any other error on a socket of ours would repeat on the next
                    // tick, where QUIC's timers notice what went missing.
                    Err(_) => {
                        drained = true;
                        break;
                    }
                }
                let now = Instant::now();
                for (from, datagram) in inbox.iter() {
                    self.datagram(index, now, from, datagram);
                    received += 1;
                }
                if inbox.len() < inbox.capacity() {
                    drained = true;
                    break;
                }
            }
            more |= !drained;
        }
        self.inbox = Some(inbox);
        let now_ns = self.ledger.now_ns(Instant::now());
        self.ledger.datagrams(true, received, now_ns);
        self.drive_touched();
        more
    }

    /// One datagram into its socket's endpoint, which routes it to its connection.
    fn datagram(&mut self, wire: usize, now: Instant, from: SocketAddr, data: &[u8]) {
        self.arena.reserve(data.len());
        self.arena.extend_from_slice(data);
        let data = self.arena.split();
        let mut buf = std::mem::take(&mut self.transmit);
        buf.clear();
        let wire_state = &mut self.wires[wire];
        match wire_state
            .endpoint
            .handle(now, from, None, None, data, &mut buf)
        {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                let key = wire_state.bots.get(handle.0).copied().flatten();
                if let Some(key) = key
                    && let Some(session) = self.bots[key].session.as_mut()
                {
                    session.quic.handle_event(event);
                    self.touch(key);
                }
            }
            // A stateless reset or a version negotiation for a connection gone.
            Some(DatagramEvent::Response(transmit)) => {
                let sent = wire_state.queue_transmit(&transmit, &buf);
                let now_ns = self.ledger.now_ns(now);
                self.ledger.datagrams(false, sent, now_ns);
            }
            // A client endpoint accepts no connections.
            Some(DatagramEvent::NewConnection(incoming)) => wire_state.endpoint.ignore(incoming),
            None => {}
        }
        self.transmit = buf;
    }

    fn drive_touched(&mut self) {
        let now = Instant::now();
        let now_ns = self.ledger.now_ns(now);
        let touched = std::mem::take(&mut self.touched);
        for &key in &touched {
            self.bots[key].touched = false;
            self.drive(key, now, now_ns);
        }
        let mut touched = touched;
        touched.clear();
        self.touched = touched;
    }

    /// Runs a bot's session after QUIC took something (a datagram, a timeout): its events
    /// to the bot, its endpoint events to the endpoint.
    fn drive(&mut self, key: usize, now: Instant, now_ns: u64) {
        let bot = &mut self.bots[key];
        let Some(session) = bot.session.as_mut() else {
            return;
        };
        session.drive(&bot.greeting, now);
        while let Some(event) = self.bots[key]
            .session
            .as_mut()
            .and_then(Session::poll_event)
        {
            match event {
                SessionEvent::Connected => self.connected(key),
                SessionEvent::Message { channel, message } => {
                    let logic = self.bots[key].logic.as_mut();
                    self.ledger.arrived(logic, channel, &message, now_ns);
                }
                SessionEvent::Ended(why) => self.end(key, why),
            }
        }
        self.forward_endpoint_events(key);
        self.mark_dirty(key);
    }

    fn connected(&mut self, key: usize) {
        let bot = &mut self.bots[key];
        bot.connected = true;
        bot.handshake_deadline = None;
        bot.logic = Some(self.ledger.connected(bot.id, bot.room));
    }

    /// A bot's session is over: a failed handshake, or a disconnect.
    fn end(&mut self, key: usize, why: String) {
        let bot = &mut self.bots[key];
        if bot.ended {
            return;
        }
        bot.ended = true;
        bot.handshake_deadline = None;
        self.ledger.ended(bot.id, bot.connected, &why);
    }

    /// Hands a connection's endpoint events to its endpoint and the answers back; once
    /// quinn has drained the connection, the bot lets it go.
    fn forward_endpoint_events(&mut self, key: usize) {
        let bot = &mut self.bots[key];
        let Some(session) = bot.session.as_mut() else {
            return;
        };
        let wire = &mut self.wires[bot.wire];
        let mut drained = false;
        while let Some(event) = session.quic.poll_endpoint_events() {
            drained |= event.is_drained();
            if let Some(answer) = wire.endpoint.handle_event(bot.handle, event) {
                session.quic.handle_event(answer);
            }
        }
        if drained {
            wire.bots[bot.handle.0] = None;
            bot.session = None;
        }
    }

    /// Due QUIC timers, handshake deadlines and sends; round-trip samples once a second.
    fn sweep(&mut self) {
        let now = Instant::now();
        let now_ns = self.ledger.now_ns(now);
        if self.ledger.rtt_sample_due(now_ns) {
            self.sample_rtt();
        }
        let mut expired = std::mem::take(&mut self.expired);
        self.due.take_expired(now, &mut expired);
        for &key in &expired {
            self.run_due(key, now, now_ns);
            // A bot with something to send is filed again when it is flushed (its QUIC
            // timers move then); any other is filed now.
            if !self.bots[key].dirty {
                self.refresh_due(key);
            }
        }
        self.expired = expired;
    }

    fn sample_rtt(&mut self) {
        for bot in &self.bots {
            if let Some(session) = &bot.session
                && bot.connected
                && !bot.ended
            {
                self.ledger
                    .record_rtt(session.quic.rtt().as_micros() as u64);
            }
        }
    }

    /// Bot `key`'s time has come: its QUIC timer or handshake deadline if due, then its
    /// sends if due.
    fn run_due(&mut self, key: usize, now: Instant, now_ns: u64) {
        let bot = &mut self.bots[key];
        let Some(session) = bot.session.as_mut() else {
            return;
        };
        if session.quic.poll_timeout().is_some_and(|at| at <= now) {
            session.quic.handle_timeout(now);
            self.drive(key, now, now_ns);
        }
        let bot = &mut self.bots[key];
        if bot.handshake_deadline.is_some_and(|at| at <= now) {
            bot.handshake_deadline = None;
            if let Some(session) = bot.session.as_mut() {
                session.close_quic(CloseCode::HandshakeTimedOut, now);
            }
            let why = format!(
                "no session within {:?}",
                self.ledger.spec.config.connect_timeout
            );
            self.end(key, why);
            self.mark_dirty(key);
            return;
        }
        let bot = &mut self.bots[key];
        let (Some(logic), Some(session)) = (bot.logic.as_mut(), bot.session.as_mut()) else {
            return;
        };
        if !bot.connected || bot.ended {
            return;
        }
        let mut outgoing = Outgoing {
            session,
            arena: &mut self.arena,
            scratch: &mut self.scratch,
        };
        let sent = self.ledger.send_due(logic.as_mut(), &mut outgoing, now_ns);
        if sent > 0 {
            self.mark_dirty(key);
        }
    }

    /// Recomputes when bot `key` next needs the sweep.
    fn refresh_due(&mut self, key: usize) {
        let bot = &mut self.bots[key];
        let due = match bot.session.as_mut() {
            None => None,
            Some(session) => {
                let send = match (self.ledger.plan.as_deref(), &bot.logic) {
                    (Some(plan), Some(logic)) if bot.connected && !bot.ended => {
                        let ns = logic.next_send_ns();
                        (ns != u64::MAX).then(|| plan.at(ns))
                    }
                    _ => None,
                };
                earliest(
                    earliest(session.quic.poll_timeout(), bot.handshake_deadline),
                    send,
                )
            }
        };
        self.due.set(key, due);
    }

    /// Builds the packets of every bot touched since the last flush and sends them, 256
    /// datagrams per `sendmmsg` whoever they are from.
    fn flush(&mut self) {
        let now = Instant::now();
        let mut buf = std::mem::take(&mut self.transmit);
        let mut sent = 0u64;
        let dirty = std::mem::take(&mut self.dirty);
        for &key in &dirty {
            let bot = &mut self.bots[key];
            bot.dirty = false;
            let wire = &mut self.wires[bot.wire];
            if let Some(session) = bot.session.as_mut() {
                session.write_out();
                loop {
                    let room = (wire.outbox.capacity() - wire.outbox.len()).clamp(1, 16);
                    buf.clear();
                    let Some(transmit) = session.quic.poll_transmit(now, room, &mut buf) else {
                        break;
                    };
                    sent += wire.queue_transmit(&transmit, &buf);
                }
                // See the UDP engine's flush: a burst's sends leave over milliseconds.
                if let Some(logic) = bot.logic.as_mut() {
                    logic.left(self.ledger.now_ns(Instant::now()));
                }
            }
            // Sending moves QUIC's timers and may have finished a close.
            self.forward_endpoint_events(key);
            self.refresh_due(key);
        }
        let mut dirty = dirty;
        dirty.clear();
        self.dirty = dirty;
        self.transmit = buf;
        for wire in &mut self.wires {
            wire.send();
        }
        let now_ns = self.ledger.now_ns(now);
        self.ledger.datagrams(false, sent, now_ns);
    }

    /// Whether a bot's close is still unanswered.
    fn awaits_close(bot: &Bot) -> bool {
        bot.session
            .as_ref()
            .is_some_and(|session| !session.is_ended() && !session.quic.is_closed())
    }
}
