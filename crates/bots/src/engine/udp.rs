//! A group of UDP bots driven by one task: a 1 ms tick asks an epoll set of the group's
//! sockets which have data (never sleeping on it), receives and sends with
//! `recvmmsg`/`sendmmsg` through [`BatchSocket`] with one receive and one send batch for
//! the whole group, and runs due sends and protocol timers.

use std::cell::RefCell;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tickwire_client::MatchAnswer;
use tickwire_net::udp::{BatchSocket, RecvBatch, SendBatch};
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::{Client, ClientEvent, MAX_DATAGRAM_BYTES, unix_now};
use tokio::sync::Semaphore;
use tokio::time::MissedTickBehavior;

use super::{
    Command, Counted, Counts, GroupResult, GroupSpec, Live, Report, connect_interval, place,
    rtt_histogram,
};
use crate::meter::Meter;
use crate::plan::Plan;
use crate::scenario::{BotCx, BotLogic};

/// How often sends and protocol timers are looked at.
const TICK: Duration = Duration::from_millis(1);
/// Ready sockets taken per `epoll_wait`.
const EPOLL_EVENTS: usize = 256;

/// One bot: its socket, its protocol state, its scenario logic. The receive and send
/// buffers belong to the group.
struct Bot {
    id: u32,
    room: u64,
    socket: BatchSocket,
    client: Client,
    /// `client.poll_timeout()`, refreshed whenever the client is touched.
    deadline: Option<Instant>,
    /// Made when the handshake completes.
    logic: Option<Box<dyn BotLogic>>,
    connected: bool,
    ended: bool,
    dirty: bool,
}

/// An epoll set of the group's sockets, asked without waiting once per tick.
///
/// Nothing ever sleeps on it: on loopback the sender pays for waking a sleeping receiver
/// (about half of its `sendmmsg` time went to waking bots), which would count the bots'
/// wake-ups against the server. Swept every millisecond, the bots add at most 1 ms to
/// what they measure, and the server pays only for delivering the datagrams, as it would
/// to remote players.
struct Readiness {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Readiness {
    fn new() -> io::Result<Self> {
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
    fn add(&self, fd: RawFd, key: usize) -> io::Result<()> {
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
    fn ready(&mut self) -> impl Iterator<Item = usize> + '_ {
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
    spec: Rc<GroupSpec>,
    bots: Vec<Bot>,
    readiness: Readiness,
    inbox: RecvBatch,
    outbox: SendBatch,
    scratch: Box<[u8; MAX_DATAGRAM_BYTES]>,
    rng: SmallRng,
    plan: Option<Arc<Plan>>,
    meter: Meter,
    rtt_us: hdrhistogram::Histogram<u64>,
    next_rtt_sample_ns: u64,
    total: Counts,
    published: Counts,
    window: Counts,
    disconnects: u64,
    first_disconnect: Option<String>,
    send_errors: u64,
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
    let pending: Rc<RefCell<Vec<(u32, MatchAnswer)>>> = Rc::default();
    let spec = Rc::new(spec);
    tokio::task::spawn_local(matchmake_all(spec.clone(), pending.clone()));
    let rng = SmallRng::seed_from_u64(spec.config.seed ^ ((spec.index as u64 + 1) << 32));
    let mut group = Group {
        bots: Vec::with_capacity(spec.bots.len()),
        spec,
        readiness,
        inbox: RecvBatch::new(),
        outbox: SendBatch::new(),
        scratch: Box::new([0; MAX_DATAGRAM_BYTES]),
        rng,
        plan: None,
        meter: Meter::default(),
        rtt_us: rtt_histogram(),
        next_rtt_sample_ns: 0,
        total: Counts::default(),
        published: Counts::default(),
        window: Counts::default(),
        disconnects: 0,
        first_disconnect: None,
        send_errors: 0,
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut command = group.spec.command.clone();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                group.receive_ready();
                group.adopt(&pending);
                group.sweep();
                group.publish();
            }
            changed = command.changed() => {
                let next = if changed.is_ok() { command.borrow_and_update().clone() } else { Command::Abort };
                match next {
                    Command::Run(plan) => group.start(plan),
                    Command::Abort => {
                        group.close().await;
                        return None;
                    }
                    Command::Wait => {}
                }
            }
        }
        group.flush_dirty().await;
        if let Some(plan) = &group.plan
            && plan.ns(Instant::now()) >= plan.drain_end_ns
        {
            return group.finish().await;
        }
    }
}

/// Matchmakes the group's bots at the group's share of the connect rate, at most
/// `connect_concurrency` at once; answers go to `pending` for the group task to connect.
async fn matchmake_all(spec: Rc<GroupSpec>, pending: Rc<RefCell<Vec<(u32, MatchAnswer)>>>) {
    let interval = connect_interval(&spec.config, spec.bots.len(), spec.scenario.players());
    let permits = Arc::new(Semaphore::new(spec.config.connect_concurrency.max(1)));
    let mut pace = tokio::time::interval(interval);
    for bot in spec.bots.iter().copied() {
        pace.tick().await;
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let spec = spec.clone();
        let pending = pending.clone();
        tokio::task::spawn_local(async move {
            match place(&spec, bot).await {
                Ok(answer) => pending.borrow_mut().push((bot, answer)),
                Err(error) => {
                    Live::add(&spec.live.connect_failed, 1);
                    let _ = spec.reports.send(Report::Failed {
                        bot: Some(bot),
                        error,
                    });
                }
            }
            drop(permit);
        });
    }
}

impl Group {
    fn now_ns(&self, now: Instant) -> u64 {
        self.plan.as_ref().map_or(0, |plan| plan.ns(now))
    }

    fn in_window(&self, now_ns: u64) -> bool {
        self.plan
            .as_ref()
            .is_some_and(|plan| plan.window().contains(now_ns))
    }

    /// Opens a socket and starts the handshake for each matchmade bot.
    fn adopt(&mut self, pending: &Rc<RefCell<Vec<(u32, MatchAnswer)>>>) {
        let answers: Vec<_> = pending.borrow_mut().drain(..).collect();
        for (id, answer) in answers {
            match self.open(id, &answer) {
                Ok(bot) => {
                    let key = self.bots.len();
                    if let Err(error) = self.readiness.add(bot.socket.as_tokio().as_raw_fd(), key) {
                        self.fail(id, format!("epoll: {error}"));
                        continue;
                    }
                    self.bots.push(bot);
                }
                Err(error) => self.fail(id, format!("socket: {error}")),
            }
        }
    }

    fn open(&self, id: u32, answer: &MatchAnswer) -> io::Result<Bot> {
        let server = answer.endpoints.udp;
        let local: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        // Default kernel buffers: a bot receives a few datagrams per tick, and thousands
        // of 4 MiB buffers (the server's setting) would be memory for nothing.
        let socket = BatchSocket::from_std(UdpSocket::bind(local)?)?;
        let client = Client::new(
            answer.token.clone(),
            Instant::now(),
            unix_now(),
            ReliabilityConfig::default(),
        );
        Ok(Bot {
            id,
            room: answer.room,
            socket,
            deadline: client.poll_timeout(),
            client,
            logic: None,
            connected: false,
            ended: false,
            dirty: true,
        })
    }

    fn fail(&mut self, id: u32, error: String) {
        Live::add(&self.spec.live.connect_failed, 1);
        let _ = self.spec.reports.send(Report::Failed {
            bot: Some(id),
            error,
        });
    }

    fn start(&mut self, plan: Arc<Plan>) {
        for bot in &mut self.bots {
            if let Some(logic) = &mut bot.logic {
                logic.start(&plan, &mut self.rng);
            }
        }
        self.meter.start(plan.window());
        self.next_rtt_sample_ns = plan.window().start_ns;
        self.plan = Some(plan);
    }

    /// Receives from every socket epoll reports readable.
    fn receive_ready(&mut self) {
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
    }

    fn receive(&mut self, key: usize) {
        loop {
            let Some(bot) = self.bots.get_mut(key) else {
                return;
            };
            match bot.socket.try_recv_batch(&mut self.inbox) {
                Ok(count) => {
                    let now = Instant::now();
                    for (from, datagram) in &self.inbox {
                        bot.client.handle_datagram(now, from, datagram);
                    }
                    bot.dirty = true;
                    self.total.datagrams_in += count as u64;
                    let now_ns = self.now_ns(now);
                    if self.in_window(now_ns) {
                        self.window.datagrams_in += count as u64;
                    }
                    self.events(key, now_ns);
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

    /// Takes the client's events: connection, messages, disconnection.
    fn events(&mut self, key: usize, now_ns: u64) {
        while let Some(event) = self.bots[key].client.poll_event() {
            match event {
                ClientEvent::Connected { .. } => {
                    let bot = &mut self.bots[key];
                    bot.connected = true;
                    bot.logic = Some(self.spec.scenario.bot(bot.id));
                    Live::add(&self.spec.live.connected, 1);
                    let _ = self.spec.reports.send(Report::Connected {
                        bot: bot.id,
                        room: bot.room,
                    });
                }
                ClientEvent::Message { channel, message } => {
                    self.arrived(key, channel, &message, now_ns);
                }
                ClientEvent::Disconnected { reason } => {
                    self.end(key, format!("{reason:?}"));
                }
            }
        }
    }

    fn arrived(&mut self, key: usize, channel: u8, message: &[u8], now_ns: u64) {
        self.total.messages_in += 1;
        if self.in_window(now_ns) {
            self.window.messages_in += 1;
        }
        let Some(logic) = self.bots[key].logic.as_mut() else {
            return;
        };
        let mut cx = BotCx {
            plan: self.plan.as_deref(),
            meter: &mut self.meter,
            rng: &mut self.rng,
        };
        logic.on_message(channel, message, now_ns, &mut cx);
    }

    /// A bot's connection is over: a failed handshake, or a disconnect.
    fn end(&mut self, key: usize, why: String) {
        let bot = &mut self.bots[key];
        if bot.ended {
            return;
        }
        bot.ended = true;
        if bot.connected {
            self.disconnects += 1;
            Live::add(&self.spec.live.disconnects, 1);
            self.first_disconnect
                .get_or_insert_with(|| format!("bot {}: {why}", bot.id));
        } else {
            let id = bot.id;
            self.fail(id, format!("handshake: {why}"));
        }
    }

    /// Due protocol timers and due sends, for every bot; round-trip samples once a second.
    fn sweep(&mut self) {
        let now = Instant::now();
        let now_ns = self.now_ns(now);
        let sample_rtt = self.in_window(now_ns) && now_ns >= self.next_rtt_sample_ns;
        if sample_rtt {
            self.next_rtt_sample_ns = now_ns + 1_000_000_000;
        }
        for key in 0..self.bots.len() {
            let bot = &mut self.bots[key];
            if bot.ended {
                continue;
            }
            if bot.deadline.is_some_and(|at| at <= now) {
                bot.client.handle_timeout(now);
                bot.dirty = true;
                self.events(key, now_ns);
            }
            let bot = &mut self.bots[key];
            let (Some(plan), Some(logic)) = (self.plan.as_deref(), bot.logic.as_mut()) else {
                continue;
            };
            if !bot.connected || bot.ended {
                continue;
            }
            let due_ns = logic.next_send_ns();
            if due_ns <= now_ns {
                self.meter.send_lag(due_ns, now_ns);
                let mut cx = BotCx {
                    plan: Some(plan),
                    meter: &mut self.meter,
                    rng: &mut self.rng,
                };
                let mut out = Counted::new(&mut bot.client);
                logic.send_due(now_ns, &mut cx, &mut out);
                let (sent, refused) = (out.sent, out.refused);
                self.send_errors += refused;
                self.total.messages_out += sent;
                if plan.window().contains(now_ns) {
                    self.window.messages_out += sent;
                }
                bot.dirty |= sent > 0;
            }
            if sample_rtt
                && let Some(stats) = bot.client.stats()
                && stats.reliability.packets_acked > 0
            {
                let rtt_us = stats.reliability.rtt.as_micros() as u64;
                self.rtt_us.saturating_record(rtt_us.max(1));
                Live::add(&self.spec.live.rtt_us_sum, rtt_us);
                Live::add(&self.spec.live.rtt_samples, 1);
            }
        }
    }

    /// Sends what every touched bot has ready: one `sendmmsg` per bot.
    async fn flush_dirty(&mut self) {
        let now = Instant::now();
        let now_ns = self.now_ns(now);
        let in_window = self.in_window(now_ns);
        for key in 0..self.bots.len() {
            let bot = &mut self.bots[key];
            if !bot.dirty {
                continue;
            }
            bot.dirty = false;
            let mut sent = 0u64;
            let mut failed = None;
            while let Some(transmit) = bot.client.poll_transmit(now, &mut self.scratch[..]) {
                let datagram = &self.scratch[..transmit.len];
                if !self.outbox.push(transmit.destination, datagram) {
                    sent += self.outbox.len() as u64;
                    if let Err(error) = bot.socket.send_batch(&mut self.outbox).await {
                        failed = Some(error);
                    }
                    self.outbox.push(transmit.destination, datagram);
                }
            }
            if !self.outbox.is_empty() {
                sent += self.outbox.len() as u64;
                if let Err(error) = bot.socket.send_batch(&mut self.outbox).await {
                    failed = Some(error);
                }
            }
            self.outbox.clear();
            bot.deadline = bot.client.poll_timeout();
            self.total.datagrams_out += sent;
            if in_window {
                self.window.datagrams_out += sent;
            }
            if let Some(error) = failed {
                self.end(key, format!("send: {error}"));
            }
        }
    }

    fn publish(&mut self) {
        let live = &self.spec.live;
        Live::add(
            &live.datagrams_out,
            self.total.datagrams_out - self.published.datagrams_out,
        );
        Live::add(
            &live.datagrams_in,
            self.total.datagrams_in - self.published.datagrams_in,
        );
        Live::add(
            &live.messages_out,
            self.total.messages_out - self.published.messages_out,
        );
        Live::add(
            &live.messages_in,
            self.total.messages_in - self.published.messages_in,
        );
        self.published = self.total;
    }

    /// Tells the server every bot leaves.
    async fn close(&mut self) {
        let now = Instant::now();
        for bot in &mut self.bots {
            if !bot.ended {
                bot.client.disconnect(now);
                bot.dirty = true;
            }
        }
        self.flush_dirty().await;
        for bot in &mut self.bots {
            bot.ended = true;
        }
    }

    async fn finish(mut self) -> Option<GroupResult> {
        self.publish();
        self.close().await;
        Some(GroupResult {
            meter: self.meter,
            rtt_us: self.rtt_us,
            window: self.window,
            disconnects: self.disconnects,
            first_disconnect: self.first_disconnect,
            send_errors: self.send_errors,
        })
    }
}
