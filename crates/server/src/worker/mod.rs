//! A shard worker: one thread, its own current-thread tokio runtime, and everything a shard
//! needs on its UDP port: the [`Sessions`](crate::sessions::Sessions) table (which
//! connection is which player, their seat; it owns the [`Shard`](crate::shard::Shard) and
//! its rooms), the protocol [`Server`](tickwire_proto::Server) (UDP connections) and the
//! [`WsLinks`](tickwire_net::ws::WsLinks) (WebSocket connections, read and written by this
//! thread) and the [`WtLinks`](tickwire_net::wt::WtLinks) (WebTransport sessions on the
//! shard's own WebTransport port, QUIC and HTTP/3 run by this thread). Nothing is shared
//! with other threads but bounded control queues, the seat events it reports, the view it
//! publishes ([`WorkerLinks`]) and the certificate hash ([`CertHash`]).
//!
//! A player's connect token carries a [`SeatTicket`] in its user data: the room to join and
//! the name to show. UDP players connect to the worker's port, WebTransport players to its
//! WebTransport port (both named by matchmaking for the room's shard); WebSocket players
//! are admitted by the HTTP side and their socket handed over with [`Control::Attach`], so
//! all share the rooms. When
//! the connection is established the player joins that room (or takes back their held seat);
//! their messages go to the room; the room's sends go out on their connection, whichever
//! transport it is; a lost connection holds their seat for the reconnect grace period, and
//! a newer connection of a player already connected (on either transport) replaces the older.

mod run;
mod view;
mod wt;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use tickwire_net::udp::BatchSocket;
use tickwire_net::ws::WsSocket;
pub(crate) use tickwire_proto::unix_now;
use tickwire_proto::{Server, ServerConfig};
use tokio::sync::{mpsc, oneshot};

pub use tickwire_room::ticket::{MAX_TICKET_NAME_BYTES, SeatTicket};
pub use view::{PUBLISH_INTERVAL, SharedIpLimiter, SharedView, WorkerLinks, WorkerView};
pub use wt::{CertHash, WebTransport};

use crate::room::{PlayerId, Room};
use crate::shard::{CreateError, RoomId, Shard, ShardConfig};
use tickwire_room::listing::RoomOptions;

/// Control messages a worker buffers; senders wait when it is full.
const CONTROL_QUEUE: usize = 1024;

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
        /// The options of the request that created it.
        options: RoomOptions,
        /// Told whether the room now exists (or why not), when someone waits for it.
        created: Option<oneshot::Sender<Result<(), CreateError>>>,
    },
    /// Lock or unlock a room (an operator's request).
    Lock {
        /// Which.
        room: RoomId,
        /// Locked or not.
        locked: bool,
        /// Told whether the room exists.
        done: oneshot::Sender<bool>,
    },
    /// Dispose of a room now: its players are disconnected with "room closed".
    Dispose {
        /// Which.
        room: RoomId,
        /// Told whether the room existed.
        done: oneshot::Sender<bool>,
    },
    /// A WebSocket player, admitted by the HTTP side, to seat in a room.
    Attach(WsSocket),
    /// Serve WebTransport: the shard's own sessions on its own UDP port, admitted and
    /// driven by this worker.
    WebTransport(Box<WebTransport>),
    /// Remove a player from their room and disconnect them.
    Kick {
        /// Who.
        player: PlayerId,
        /// Shown to the player.
        reason: String,
    },
    /// An operator's announcement to every room.
    Say(String),
    /// Rooms run their last tick, everyone is disconnected with "server shutting down", and
    /// the worker stops.
    Stop,
}

/// Whether a worker's thread runs: true until the thread ends, however it ends.
#[derive(Debug, Clone)]
pub struct Running(Arc<AtomicBool>);

impl Running {
    /// Whether the thread still runs.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Held by a worker's thread: dropping it (a return, an error, a panic's unwinding) marks
/// the worker stopped.
struct MarksStopped(Arc<AtomicBool>);

impl Drop for MarksStopped {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
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

/// Runs on the caller's side: the worker's address, control queue and published view.
pub struct ShardWorker {
    udp_address: SocketAddr,
    control: mpsc::Sender<Control>,
    view: SharedView,
    running: Running,
    thread: Option<JoinHandle<io::Result<WorkerReport>>>,
}

impl ShardWorker {
    /// Binds `udp_address` and starts a worker wired to nothing else; see
    /// [`spawn_linked`](Self::spawn_linked).
    pub fn spawn(
        udp_address: SocketAddr,
        shard: ShardConfig,
        configure: impl FnOnce(SocketAddr) -> ServerConfig,
    ) -> io::Result<Self> {
        Self::spawn_linked(udp_address, shard, WorkerLinks::default(), configure)
    }

    /// Binds `udp_address` and starts the worker thread. `configure` receives the bound
    /// address (with port 0 resolved) to build the protocol configuration, which must list
    /// the address players reach it at among its public addresses.
    pub fn spawn_linked(
        udp_address: SocketAddr,
        shard: ShardConfig,
        links: WorkerLinks,
        configure: impl FnOnce(SocketAddr) -> ServerConfig,
    ) -> io::Result<Self> {
        // Large socket buffers (not the kernel's 208 KiB default, which a burst of relay
        // traffic overflows within a tick); no SO_REUSEPORT, so a port in use is an error.
        let socket = tickwire_net::udp::bind(udp_address)?;
        let udp_address = socket.local_addr()?;
        let mut server_config = configure(udp_address);
        // The worker seats each player before its client hears the accepted packet, which
        // then carries the player's room's tick rate.
        server_config.accept_by_driver = true;
        let (control, inbox) = mpsc::channel(CONTROL_QUEUE);
        let view = links.view.clone();
        let flag = Arc::new(AtomicBool::new(true));
        let running = Running(flag.clone());
        let stopping = MarksStopped(flag);
        let thread = std::thread::Builder::new()
            .name(format!("tickwire-shard-{}", udp_address.port()))
            .spawn(move || {
                // Says the thread stopped however it ends: a return, an error, a panic.
                let _stopping = stopping;
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
                    let mut shard = Shard::new(shard);
                    let mut links = links;
                    if let Some(observer) = links.tick_observer.take() {
                        shard.set_tick_observer(observer);
                    }
                    run::Worker::new(socket, server, shard, links)?
                        .run(inbox)
                        .await
                })
            })?;
        Ok(Self {
            udp_address,
            control,
            view,
            running,
            thread: Some(thread),
        })
    }

    /// Whether the worker's thread still runs, for readiness.
    pub fn running(&self) -> Running {
        self.running.clone()
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

    /// The worker's state as last published (at most [`PUBLISH_INTERVAL`] old).
    pub fn view(&self) -> WorkerView {
        self.view.read()
    }

    /// The shared view itself, for readers that outlive this handle.
    pub fn shared_view(&self) -> SharedView {
        self.view.clone()
    }

    /// Queues a control message; waits while the queue is full.
    pub async fn send(&self, control: Control) -> io::Result<()> {
        self.control
            .send(control)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "shard worker has stopped"))
    }

    /// Stops the worker (rooms run their last tick, players are told the server is
    /// shutting down) and waits for it.
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
