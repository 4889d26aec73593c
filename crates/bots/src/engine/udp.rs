//! A group of UDP bots driven by one task: a 1 ms tick receives what arrived (never
//! sleeping on a socket), runs due sends and protocol timers, and sends with `sendmmsg`.
//!
//! The server tells clients apart by address, so each bot needs an address of its own.
//! Against a server on loopback (every benchmark) the group's bots share **one socket**:
//! bot `k` is `127.1.0.0 + k + 1` on that socket's port (all of `127.0.0.0/8` is local on
//! Linux), its datagrams leave from that address and arrive marked with it (`IP_PKTINFO`).
//! One `recvmmsg` then takes up to 64 datagrams for any bots and one `sendmmsg` sends 64
//! bots' inputs, where a socket per bot cost an epoll report, a `recvmmsg` and a `sendmmsg`
//! per bot per tick (40 % of the bots' CPU at 3,000 players). "One" is one per
//! [`BOTS_PER_SHARED_SOCKET`] bots: a server tick arrives as a burst of a snapshot per bot,
//! and one socket's buffer (8 MiB) overflowed with 3,000 bots' bursts. Against a remote server each
//! bot has a socket of its own (a host has one address); an epoll set asked without
//! waiting says which have data.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tickwire_client::MatchAnswer;
use tickwire_net::due::{DueTimes, earliest};
use tickwire_net::udp::{
    BatchSocket, RecvBatch, SendBatch, enable_arrival_times, enable_local_addresses,
};
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::{Client, ClientEvent, MAX_DATAGRAM_BYTES, unix_now};

use super::ledger::Ledger;
use super::{CLOSE_PACE, GroupResult, GroupSpec, OneTask, Pending, Report, close_batches, drive};
use crate::plan::Plan;
use crate::scenario::BotLogic;

/// Ready sockets taken per `epoll_wait`.
pub(super) const EPOLL_EVENTS: usize = 256;

/// Shared-socket bots' addresses start after this one.
const SHARED_BASE: Ipv4Addr = Ipv4Addr::new(127, 1, 0, 0);
/// Bots per shared socket: a tick's burst for them (a snapshot each, under 2.5 KiB of
/// kernel buffer apiece) fits its buffer many times over.
const BOTS_PER_SHARED_SOCKET: usize = 512;
/// Datagrams taken from the shared sockets per pass, all sockets together (two full
/// batches, about 0.1 ms of work): a server's tick arrives as one burst of a snapshot per
/// bot, and taking it whole would hold every due send behind it; between passes the bots
/// send what is due. A budget per socket instead let a pass grow with the bots: with 5,000
/// (ten sockets) it took 1,280 datagrams, and the teleport run's sends were 13 ms late.
const SHARED_DATAGRAMS_PER_PASS: usize = 128;

/// The wall clock in nanoseconds since the Unix epoch, as the kernel stamps arrivals.
fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// Where a bot's datagrams go in and out.
enum Wire {
    /// A socket of its own (a remote server).
    Own(BatchSocket),
    /// One of the group's shared sockets (by index), from this loopback address.
    Shared { socket: usize, source: Ipv4Addr },
}

/// The socket a group's loopback bots share, with its own batches.
struct SharedSocket {
    socket: BatchSocket,
    inbox: RecvBatch,
    outbox: SendBatch,
}

impl SharedSocket {
    fn open() -> io::Result<Self> {
        // The server's buffer sizes: this socket carries every bot of the group.
        let socket =
            BatchSocket::from_std(tickwire_net::udp::bind((Ipv4Addr::UNSPECIFIED, 0).into())?)?;
        let fd = std::os::fd::AsFd::as_fd(socket.as_tokio());
        enable_local_addresses(fd)?;
        // A datagram's time is when it reached the host, not when the group got to it: a
        // server's burst of snapshots and confirmations takes the bots milliseconds to
        // read, and that wait is theirs (`recv_lag`), not the server's.
        enable_arrival_times(fd)?;
        Ok(Self {
            socket,
            inbox: RecvBatch::with_controls(),
            outbox: SendBatch::new(),
        })
    }

    /// Bot `key`'s address.
    fn address(key: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(SHARED_BASE) + key as u32 + 1)
    }

    /// The bot whose address `local` is.
    fn key(local: Ipv4Addr) -> Option<usize> {
        (u32::from(local).checked_sub(u32::from(SHARED_BASE) + 1)).map(|key| key as usize)
    }
}

/// One bot: its wire, its protocol state, its scenario logic. The receive and send
/// buffers belong to the group.
struct Bot {
    id: u32,
    room: u64,
    wire: Wire,
    client: Client,
    /// `client.poll_timeout()`, refreshed whenever the client is touched.
    deadline: Option<Instant>,
    /// Made when the handshake completes.
    logic: Option<Box<dyn BotLogic>>,
    connected: bool,
    ended: bool,
    dirty: bool,
}

impl Bot {
    /// Starts loading what taking in a datagram reads first: the connection and the logic.
    fn prefetch(&self) {
        self.client.prefetch();
        if let Some(logic) = &self.logic {
            tickwire_proto::prefetch::prefetch(&**logic);
        }
    }

    /// Takes in one datagram. Once the bot's logic exists its messages go straight to the
    /// ledger, read in place; before that they come as events after the client's
    /// `Connected`, which makes the logic (the room's welcome may share a batch with the
    /// handshake's accepted packet, and must find the logic there).
    fn take_in(
        &mut self,
        ledger: &mut Ledger,
        now: Instant,
        now_ns: u64,
        from: SocketAddr,
        datagram: &[u8],
    ) {
        if self.logic.is_some() {
            let logic = &mut self.logic;
            self.client
                .handle_datagram_with(now, from, datagram, |channel, message| {
                    ledger.arrived(logic.as_mut(), channel, message, now_ns);
                });
        } else {
            self.client.handle_datagram(now, from, datagram);
            self.events(ledger, now_ns);
        }
    }

    /// Takes the client's events: connection, messages (before the logic existed),
    /// disconnection.
    fn events(&mut self, ledger: &mut Ledger, now_ns: u64) {
        while let Some(event) = self.client.poll_event() {
            match event {
                ClientEvent::Connected { .. } => {
                    self.connected = true;
                    self.logic = Some(ledger.connected(self.id, self.room));
                }
                ClientEvent::Message { channel, message } => {
                    ledger.arrived(self.logic.as_mut(), channel, &message, now_ns);
                }
                ClientEvent::Disconnected { reason } => {
                    self.end(ledger, format!("{reason:?}"));
                }
            }
        }
    }

    /// The connection is over: a failed handshake, or a disconnect.
    fn end(&mut self, ledger: &mut Ledger, why: String) {
        if self.ended {
            return;
        }
        self.ended = true;
        ledger.ended(self.id, self.connected, &why);
    }
}

/// An epoll set of the group's sockets, asked without waiting once per tick.
///
/// Nothing ever sleeps on it: on loopback the sender pays for waking a sleeping receiver
/// (about half of its `sendmmsg` time went to waking bots), which would count the bots'
/// wake-ups against the server. Swept every millisecond, the bots add at most 1 ms to
/// what they measure, and the server pays only for delivering the datagrams, as it would
/// to remote players.
pub(super) struct Readiness {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Readiness {
    pub(super) fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the descriptor is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: `fd` was just created and is owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; EPOLL_EVENTS],
        })
    }

    /// Watches `fd` (level-triggered) under `key`.
    pub(super) fn add(&self, fd: RawFd, key: usize) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: key as u64,
        };
        // SAFETY: both descriptors are open; `event` is a valid epoll_event.
        let result =
            unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The keys of sockets with data now, without waiting.
    pub(super) fn ready(&mut self) -> impl Iterator<Item = usize> + '_ {
        // SAFETY: `events` has room for `EPOLL_EVENTS` entries; timeout 0 never blocks.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                EPOLL_EVENTS as i32,
                0,
            )
        };
        let n = usize::try_from(n).unwrap_or(0);
        self.events[..n].iter().map(|event| event.u64 as usize)
    }
}

struct Group {
    bots: Vec<Bot>,
    readiness: Readiness,
    /// Opened as bots whose server is on IPv4 loopback arrive, one per
    /// [`BOTS_PER_SHARED_SOCKET`].
    shared: Vec<SharedSocket>,
    /// The shared socket the next pass reads first ([`read_in_turn`]), so each is read in
    /// turn however long the sockets' queues are.
    next_shared: usize,
    /// Bots that received in this pass, for their events.
    touched: Vec<usize>,
    /// Per bot (by key), when it next needs the sweep: the earliest of its protocol
    /// deadline and its next send (or earlier: see [`DueTimes`]).
    due: DueTimes,
    /// Bots due in this sweep, taken off `due` before any is handled.
    expired: Vec<usize>,
    /// Bots with something to send, each listed once (its `dirty` flag set).
    dirty: Vec<usize>,
    inbox: RecvBatch,
    outbox: SendBatch,
    scratch: Box<[u8; MAX_DATAGRAM_BYTES]>,
    ledger: Ledger,
}

pub(super) async fn run(spec: GroupSpec) -> Option<GroupResult> {
    let readiness = match Readiness::new() {
        Ok(readiness) => readiness,
        Err(error) => {
            for _ in &spec.bots {
                let _ = spec.reports.send(Report::Failed {
                    bot: None,
                    error: format!("epoll: {error}"),
                });
            }
            return None;
        }
    };
    drive(Group::new(spec, readiness), Pending::default()).await
}

/// One pass over `sockets` shared sockets, starting at `*next`: `read(index)` takes one
/// batch from socket `index` and says how many datagrams it held and how many it could have
/// (`None` when the socket was empty). Sockets are read in turn, each until it is empty,
/// until [`SHARED_DATAGRAMS_PER_PASS`] have been taken. The next pass starts after the last
/// socket read, so a socket that is never empty (its bots' server ticks arriving back to
/// back) does not keep the others waiting. True if a socket may hold more.
fn read_in_turn(
    sockets: usize,
    next: &mut usize,
    mut read: impl FnMut(usize) -> Option<(usize, usize)>,
) -> bool {
    let mut budget = SHARED_DATAGRAMS_PER_PASS;
    for step in 0..sockets {
        let index = (*next + step) % sockets;
        if budget == 0 {
            // This socket has not had its turn: the next pass starts with it.
            *next = index;
            return true;
        }
        loop {
            match read(index) {
                Some((count, capacity)) if count == capacity => {
                    budget = budget.saturating_sub(count);
                    if budget == 0 {
                        // It had its turn and may hold more: the others go first.
                        *next = (index + 1) % sockets;
                        return true;
                    }
                }
                // A short batch emptied the socket.
                Some((count, _)) => {
                    budget = budget.saturating_sub(count);
                    break;
                }
                None => break,
            }
        }
    }
    false
}

impl OneTask for Group {
    fn ledger(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    async fn tick(&mut self, pending: &Pending) {
        loop {
            let more = self.receive_ready();
            self.adopt(pending);
            self.sweep();
            self.ledger.publish();
            self.flush_dirty().await;
            if !more {
                break;
            }
        }
    }

    fn start(&mut self, plan: Arc<Plan>) {
        let logics = self.bots.iter_mut().filter_map(|bot| bot.logic.as_mut());
        self.ledger.start(plan, logics);
        self.due.set_all(Instant::now());
    }

    /// Tells the server every bot leaves, paced ([`close_batches`]).
    async fn close(&mut self) {
        for batch in close_batches(self.bots.len()) {
            let now = Instant::now();
            for key in batch {
                let bot = &mut self.bots[key];
                if !bot.ended {
                    bot.client.disconnect(now);
                    if !bot.dirty {
                        bot.dirty = true;
                        self.dirty.push(key);
                    }
                }
            }
            self.flush_dirty().await;
            tokio::time::sleep(CLOSE_PACE).await;
        }
        for bot in &mut self.bots {
            bot.ended = true;
        }
    }

    fn into_ledger(self) -> Ledger {
        self.ledger
    }
}

impl Group {
    /// A group with no bot yet: they join as their tokens come.
    fn new(spec: GroupSpec, readiness: Readiness) -> Self {
        Self {
            bots: Vec::with_capacity(spec.bots.len()),
            readiness,
            shared: Vec::new(),
            next_shared: 0,
            touched: Vec::new(),
            due: DueTimes::default(),
            expired: Vec::new(),
            dirty: Vec::new(),
            inbox: RecvBatch::new(),
            outbox: SendBatch::new(),
            scratch: Box::new([0; MAX_DATAGRAM_BYTES]),
            ledger: Ledger::new(Rc::new(spec)),
        }
    }

    /// Gives each matchmade bot its wire and starts its handshake.
    fn adopt(&mut self, pending: &Pending) {
        let answers: Vec<_> = pending.borrow_mut().drain(..).collect();
        for (id, answer) in answers {
            match self.wire(&answer) {
                Ok(wire) => {
                    let key = self.bots.len();
                    if let Wire::Own(socket) = &wire
                        && let Err(error) = self.readiness.add(socket.as_tokio().as_raw_fd(), key)
                    {
                        self.ledger.fail(id, format!("epoll: {error}"));
                        continue;
                    }
                    let bot = Self::open(id, &answer, wire);
                    self.bots.push(bot);
                    self.due.add(key);
                    self.dirty.push(key);
                    self.due.set(key, Some(Instant::now()));
                }
                Err(error) => self.ledger.fail(id, format!("socket: {error}")),
            }
        }
    }

    /// The next bot's wire: an address on the shared socket for a server on IPv4
    /// loopback, else a socket of its own.
    fn wire(&mut self, answer: &MatchAnswer) -> io::Result<Wire> {
        let server = answer.endpoints.udp;
        if let SocketAddr::V4(v4) = server
            && v4.ip().is_loopback()
        {
            let key = self.bots.len();
            let socket = key / BOTS_PER_SHARED_SOCKET;
            if socket == self.shared.len() {
                self.shared.push(SharedSocket::open()?);
            }
            return Ok(Wire::Shared {
                socket,
                source: SharedSocket::address(key),
            });
        }
        let local: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        // Default kernel buffers: a bot receives a few datagrams per tick, and thousands
        // of 4 MiB buffers (the server's setting) would be memory for nothing.
        let socket = UdpSocket::bind(local)?;
        if server.is_ipv4() {
            tickwire_net::udp::set_dont_fragment(&socket)?;
        }
        Ok(Wire::Own(BatchSocket::from_std(socket)?))
    }

    fn open(id: u32, answer: &MatchAnswer, wire: Wire) -> Bot {
        let client = Client::new(
            answer.token.clone(),
            Instant::now(),
            unix_now(),
            ReliabilityConfig::default(),
        );
        Bot {
            id,
            room: answer.room,
            wire,
            deadline: client.poll_timeout(),
            client,
            logic: None,
            connected: false,
            ended: false,
            dirty: true,
        }
    }

    /// Receives what arrived: on the shared socket (one pass; true if it has more), then
    /// on every own socket epoll reports readable.
    fn receive_ready(&mut self) -> bool {
        let more = self.receive_shared();
        // Level-triggered: a socket whose data tokio has not yet seen is reported again on
        // the next pass, so a bounded number of passes never spins.
        for _ in 0..8 {
            let ready: Vec<usize> = self.readiness.ready().collect();
            let full = ready.len() == EPOLL_EVENTS;
            for key in ready {
                self.receive(key);
            }
            if !full {
                break;
            }
        }
        more
    }

    /// Receives one pass from the shared sockets ([`read_in_turn`]): each datagram to the
    /// bot whose address it was sent to, then the bots' events. True if a socket may hold
    /// more.
    fn receive_shared(&mut self) -> bool {
        self.touched.clear();
        let mut received = 0u64;
        let any_more = read_in_turn(self.shared.len(), &mut self.next_shared, |index| {
            let shared = &mut self.shared[index];
            // Empty; any other error on a socket of ours would repeat on the next tick,
            // where the bots' protocol timers notice what went missing.
            let count = shared.socket.try_recv_batch(&mut shared.inbox).ok()?;
            // Every addressed bot's state is asked for before any datagram is taken in,
            // so their cache misses overlap instead of following one another.
            for datagram in shared.inbox.iter_received() {
                if let Some(bot) = datagram
                    .local
                    .and_then(SharedSocket::key)
                    .and_then(|key| self.bots.get(key))
                {
                    bot.prefetch();
                }
            }
            let now = Instant::now();
            let now_ns = self.ledger.now_ns(now);
            let wall_now_ns = unix_now_ns();
            for datagram in shared.inbox.iter_received() {
                let Some(key) = datagram.local.and_then(SharedSocket::key) else {
                    continue;
                };
                let Some(bot) = self.bots.get_mut(key) else {
                    continue;
                };
                // When it arrived, on the plan's clock: what its messages are timed by. The
                // wait since is counted only where the kernel said when.
                let arrived_ns = match datagram.arrived_ns {
                    Some(arrived) => {
                        let at = now_ns.saturating_sub(wall_now_ns.saturating_sub(arrived));
                        self.ledger.recv_lag(at, now_ns);
                        at
                    }
                    None => now_ns,
                };
                bot.take_in(
                    &mut self.ledger,
                    now,
                    arrived_ns,
                    datagram.from,
                    datagram.payload,
                );
                // A bot's events are drained whole, so a repeat here finds none.
                if self.touched.last() != Some(&key) {
                    self.touched.push(key);
                }
                received += 1;
            }
            Some((count, shared.inbox.capacity()))
        });
        let now_ns = self.ledger.now_ns(Instant::now());
        self.ledger.datagrams(true, received, now_ns);
        let now = Instant::now();
        for index in 0..self.touched.len() {
            let key = self.touched[index];
            self.events(key, now_ns);
            self.after_receive(key, now);
        }
        any_more
    }

    fn receive(&mut self, key: usize) {
        loop {
            let Some(bot) = self.bots.get_mut(key) else {
                return;
            };
            let Wire::Own(socket) = &bot.wire else {
                return;
            };
            match socket.try_recv_batch(&mut self.inbox) {
                Ok(count) => {
                    let now = Instant::now();
                    let now_ns = self.ledger.now_ns(now);
                    for (from, datagram) in &self.inbox {
                        bot.take_in(&mut self.ledger, now, now_ns, from, datagram);
                    }
                    self.ledger.datagrams(true, count as u64, now_ns);
                    self.events(key, now_ns);
                    self.after_receive(key, now);
                    if count < self.inbox.capacity() {
                        return;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error) => {
                    self.end(key, format!("receive: {error}"));
                    return;
                }
            }
        }
    }

    /// After bot `key` took in datagrams and its events: flushed if it has something to
    /// send at once (an owed ack, an answer, the handshake's next step); otherwise only its
    /// timer is filed again. A snapshot asks nothing back, and polling every receiving bot
    /// for a packet it did not have cost a write attempt per datagram received.
    fn after_receive(&mut self, key: usize, now: Instant) {
        let bot = &mut self.bots[key];
        if bot.client.wants_to_send(now) {
            if !bot.dirty {
                bot.dirty = true;
                self.dirty.push(key);
            }
        } else if !bot.dirty {
            bot.deadline = bot.client.poll_timeout();
            self.refresh_due(key);
        }
    }

    /// Takes bot `key`'s events: connection and disconnection.
    fn events(&mut self, key: usize, now_ns: u64) {
        self.bots[key].events(&mut self.ledger, now_ns);
    }

    /// Bot `key`'s connection is over: a failed handshake, or a disconnect.
    fn end(&mut self, key: usize, why: String) {
        self.bots[key].end(&mut self.ledger, why);
    }

    /// Due protocol timers and due sends, for every bot; round-trip samples once a second.
    fn sweep(&mut self) {
        let now = Instant::now();
        let now_ns = self.ledger.now_ns(now);
        if self.ledger.rtt_sample_due(now_ns) {
            for bot in &self.bots {
                if let Some(stats) = bot.client.stats()
                    && stats.reliability.packets_acked > 0
                {
                    self.ledger
                        .record_rtt(stats.reliability.rtt.as_micros() as u64);
                }
            }
        }
        self.due.take_expired(now, &mut self.expired);
        for index in 0..self.expired.len() {
            let key = self.expired[index];
            self.run_due(key, now, now_ns);
            // A bot with something to send is filed again when it is flushed (its protocol
            // deadline moves then); any other is filed now.
            if !self.bots[key].dirty {
                self.refresh_due(key);
            }
        }
    }

    /// Bot `key`'s time has come: its protocol timer if due, then its sends if due.
    fn run_due(&mut self, key: usize, now: Instant, now_ns: u64) {
        let bot = &mut self.bots[key];
        if bot.ended {
            return;
        }
        if bot.deadline.is_some_and(|at| at <= now) {
            bot.client.handle_timeout(now);
            if !bot.dirty {
                bot.dirty = true;
                self.dirty.push(key);
            }
            self.events(key, now_ns);
        }
        let bot = &mut self.bots[key];
        let Some(logic) = bot.logic.as_mut() else {
            return;
        };
        if !bot.connected || bot.ended {
            return;
        }
        let sent = self
            .ledger
            .send_due(logic.as_mut(), &mut bot.client, now_ns);
        if sent > 0 && !bot.dirty {
            bot.dirty = true;
            self.dirty.push(key);
        }
    }

    /// Recomputes when bot `key` next needs the sweep (after anything that may move it:
    /// a send, a timer, a flush).
    fn refresh_due(&mut self, key: usize) {
        let bot = &self.bots[key];
        let due = if bot.ended {
            None
        } else {
            let send = match (self.ledger.plan.as_deref(), &bot.logic) {
                (Some(plan), Some(logic)) if bot.connected => {
                    let ns = logic.next_send_ns();
                    (ns != u64::MAX).then(|| plan.at(ns))
                }
                _ => None,
            };
            earliest(bot.deadline, send)
        };
        self.due.set(key, due);
    }

    /// Sends what every touched bot has ready: shared-socket bots together, 64 datagrams
    /// per `sendmmsg` whoever they are from; a bot with its own socket with one of its own.
    ///
    /// The bots go by key, so each shared socket's bots come as one run (a socket holds a
    /// range of keys) and its last, partial batch leaves as the run ends. In the order they
    /// became due, a crowd's warp spread every socket's bots over the whole flush, and a
    /// partial batch taken early waited the 12 ms until the flush's end.
    async fn flush_dirty(&mut self) {
        let now = Instant::now();
        let now_ns = self.ledger.now_ns(now);
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        let mut run: Option<usize> = None;
        for &key in &dirty {
            if let Wire::Shared { socket, .. } = self.bots[key].wire
                && let Some(previous) = run.replace(socket)
                && previous != socket
            {
                self.send_shared(previous).await;
            }
            let bot = &mut self.bots[key];
            if !bot.dirty {
                continue;
            }
            bot.dirty = false;
            let mut sent = 0u64;
            let mut failed = None;
            let (outbox, socket, source) = match &bot.wire {
                Wire::Shared { socket, source } => {
                    let shared = &mut self.shared[*socket];
                    (&mut shared.outbox, &shared.socket, Some(*source))
                }
                Wire::Own(socket) => (&mut self.outbox, socket, None),
            };
            while let Some(transmit) = bot.client.poll_transmit(now, &mut self.scratch[..]) {
                let datagram = &self.scratch[..transmit.len];
                let copy = |slot: &mut [u8]| {
                    slot[..datagram.len()].copy_from_slice(datagram);
                    datagram.len()
                };
                // A batch is never left full, so the push always finds a free slot.
                let pushed = outbox.push_from_with(source, transmit.destination, copy);
                debug_assert!(pushed, "a full batch is sent at once");
                sent += 1;
                // A full batch leaves at once. Sent only when the next datagram for its
                // socket came, the batch that completed a shared socket's 512 bots waited
                // out the rest of the flush (12 ms of a crowd's warp, behind the other
                // sockets' bots) while its bots counted their sends as gone.
                if outbox.is_full() {
                    if let Err(error) = socket.send_batch(outbox).await {
                        failed = Some(error);
                    }
                    outbox.clear();
                }
            }
            if source.is_none() && !outbox.is_empty() {
                if let Err(error) = socket.send_batch(outbox).await {
                    failed = Some(error);
                }
                outbox.clear();
            }
            // A burst's flush runs for milliseconds: each bot's sends left when it came to
            // them (at most a batch before the `sendmmsg` that wrote them).
            if sent > 0
                && let Some(logic) = bot.logic.as_mut()
            {
                logic.left(self.ledger.now_ns(Instant::now()));
            }
            bot.deadline = bot.client.poll_timeout();
            self.refresh_due(key);
            self.ledger.datagrams(false, sent, now_ns);
            if let Some(error) = failed {
                self.end(key, format!("send: {error}"));
            }
        }
        dirty.clear();
        self.dirty = dirty;
        if let Some(last) = run {
            self.send_shared(last).await;
        }
    }

    /// Sends what shared socket `index` has queued.
    async fn send_shared(&mut self, index: usize) {
        let shared = &mut self.shared[index];
        if shared.outbox.is_empty() {
            return;
        }
        // Only a broken socket fails here (a full one is waited for): the bots' own
        // timers then see what never left.
        if let Err(error) = shared.socket.send_batch(&mut shared.outbox).await {
            self.ledger.send_failed(shared.outbox.len() as u64);
            eprintln!("warning: the bots' shared socket failed to send: {error}");
        }
        shared.outbox.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCH: usize = 64;

    /// A group with `bots` bots on its shared sockets, each with a connect token for
    /// `server`, so each has its handshake's first packet to send.
    fn group_of(bots: usize, server: SocketAddr) -> Group {
        use tickwire_client::MatchAnswer;
        use tickwire_proto::crypto::Key;
        use tickwire_proto::matchmake::Endpoints;
        use tickwire_proto::token::TokenIssuer;

        let (reports, _) = std::sync::mpsc::channel();
        let (_, command) = tokio::sync::watch::channel(super::super::Command::Wait);
        let spec = GroupSpec {
            index: 0,
            bots: (0..bots as u32).collect(),
            config: super::super::RunConfig::default(),
            scenario: Arc::new(crate::scenario::ArenaScenario::hobo()),
            live: Arc::default(),
            directory: Arc::new(super::super::RoomDirectory::new(1)),
            reports,
            command,
        };
        let mut group = Group::new(spec, Readiness::new().unwrap());
        let mut rng = rand::rng();
        let issuer = TokenIssuer {
            protocol_id: 1,
            key: Key::random(&mut rng),
            server_addresses: vec![server],
            validity_seconds: 60,
            timeout_seconds: 10,
        };
        for id in 0..bots as u32 {
            let answer = MatchAnswer {
                player_id: u64::from(id),
                name: String::new(),
                room: 1,
                kind: "arena".into(),
                reconnect: false,
                session: String::new(),
                token: issuer
                    .issue(&mut rng, unix_now(), u64::from(id), &[])
                    .unwrap(),
                expires_at: unix_now() + 60,
                endpoints: Endpoints {
                    udp: server,
                    ws: String::new(),
                    wss: None,
                    wt: None,
                },
            };
            let wire = group.wire(&answer).unwrap();
            group.bots.push(Group::open(id, &answer, wire));
        }
        group
    }

    /// Bots on three shared sockets, due in an order that goes back and forth between
    /// them (as a sweep's timer hands them over), flushed at once: the server gets them in
    /// key order, each socket's bots as one run. Before, a socket's batch left only when
    /// the next push for that socket found it full, and its last one at the flush's end:
    /// the batch that completed a socket's 512 bots, and batches filled early, waited
    /// behind the other sockets' bots (12 ms of a crowd's warp), stamped as gone.
    #[tokio::test(flavor = "current_thread")]
    async fn a_flush_sends_each_shared_sockets_bots_as_one_run_in_key_order() {
        let server = tickwire_net::udp::bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
        server.set_nonblocking(true).unwrap();
        let bots = 2 * BOTS_PER_SHARED_SOCKET + 100;
        let mut group = group_of(bots, server.local_addr().unwrap());
        assert_eq!(group.shared.len(), 3);
        // Every third key, then the next: each socket's bots spread over the whole flush.
        group.dirty = (0..3).flat_map(|start| (start..bots).step_by(3)).collect();
        group.flush_dirty().await;

        let mut keys = Vec::with_capacity(bots);
        let mut buffer = [0u8; MAX_DATAGRAM_BYTES];
        while let Ok((_, from)) = server.recv_from(&mut buffer) {
            let SocketAddr::V4(from) = from else {
                panic!("an IPv4 sender");
            };
            keys.push(SharedSocket::key(*from.ip()).expect("a shared bot's address"));
        }
        assert_eq!(keys.len(), bots, "one handshake packet per bot");
        let in_order = keys.windows(2).all(|pair| pair[0] < pair[1]);
        assert!(
            in_order,
            "sent in key order: {:?}",
            &keys[..keys.len().min(200)]
        );
    }

    /// Sockets with `queued` datagrams each, read by passes of [`read_in_turn`] until all
    /// are empty; each pass's datagrams per socket.
    fn passes(queued: &[usize]) -> Vec<Vec<usize>> {
        let mut queued = queued.to_vec();
        let mut next = 0;
        let mut passes = Vec::new();
        loop {
            let mut taken = vec![0; queued.len()];
            let more = read_in_turn(queued.len(), &mut next, |index| {
                if queued[index] == 0 {
                    return None;
                }
                let count = queued[index].min(BATCH);
                queued[index] -= count;
                taken[index] += count;
                Some((count, BATCH))
            });
            passes.push(taken);
            if !more {
                assert!(
                    queued.iter().all(|&left| left == 0),
                    "a pass said nothing was left, but datagrams were"
                );
                return passes;
            }
            assert!(passes.len() < 1000, "passes never ended");
        }
    }

    #[test]
    fn a_pass_takes_its_budget_from_all_sockets_together() {
        // Ten sockets' bursts (5,000 bots' snapshots): every pass stays within the budget
        // plus one batch, however many sockets there are.
        let all = passes(&[500; 10]);
        for pass in &all {
            let total: usize = pass.iter().sum();
            assert!(total <= SHARED_DATAGRAMS_PER_PASS + BATCH, "{pass:?}");
        }
        let taken: usize = all.iter().flatten().sum();
        assert_eq!(taken, 5000, "everything is read");
    }

    #[test]
    fn the_next_pass_starts_after_the_last_socket_read() {
        // The first socket's burst is three passes' worth; the second's few datagrams are
        // read in the second pass, before the first socket's rest.
        let all = passes(&[300, 10]);
        assert_eq!(all, vec![vec![128, 0], vec![128, 10], vec![44, 0]]);
        // Sockets that empty with budget left are all read in one pass.
        assert_eq!(passes(&[5, 0, 7]), vec![vec![5, 0, 7]]);
    }

    #[test]
    fn a_socket_never_empty_does_not_starve_the_others() {
        // The first socket is refilled before every pass; the others are read anyway,
        // each within as many passes as there are sockets.
        let mut queued = [0usize, 10, 10, 10];
        let mut next = 0;
        let mut first_read = [None; 4];
        for pass in 0..4 {
            queued[0] = 1000;
            read_in_turn(queued.len(), &mut next, |index| {
                if queued[index] == 0 {
                    return None;
                }
                let count = queued[index].min(BATCH);
                queued[index] -= count;
                first_read[index].get_or_insert(pass);
                Some((count, BATCH))
            });
        }
        assert!(
            first_read.iter().all(Option::is_some),
            "every socket read within 4 passes: {first_read:?}"
        );
    }
}
