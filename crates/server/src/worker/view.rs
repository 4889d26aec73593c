//! What a worker shares with the rest of the server without sharing its state: events as
//! they happen, and a view of itself republished a few times a second.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tickwire_proto::ServerStats;
use tokio::sync::mpsc;

use crate::console::PlayerSummary;
use crate::limits::IpLimiter;
use crate::sessions::AddressLimit;
use crate::shard::{RoomInfo, SeatChange, ShardStats, TickObserver, TickTimes};

/// How often a worker republishes its [`WorkerView`].
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(250);

/// A worker's state as last published, for the console, the admin API and `/metrics`.
/// Reading it never touches the worker's thread.
#[derive(Debug, Clone, Default)]
pub struct WorkerView {
    /// Rooms hosted.
    pub rooms: Vec<RoomInfo>,
    /// Connected players.
    pub players: Vec<PlayerSummary>,
    /// Players whose connection is lost and whose seat is held for them.
    pub players_held: u64,
    /// The UDP protocol's counters.
    pub udp: ServerStats,
    /// The UDP socket's receive counters (datagrams over a receive slot, 2048 bytes, are
    /// dropped there, before the protocol sees them).
    pub recv: tickwire_net::udp::RecvStats,
    /// The shard's counters.
    pub shard: ShardStats,
    /// Tick durations by room kind.
    pub tick_times: HashMap<String, TickTimes>,
    /// What replicated worlds sent, by room kind, entity kind and field.
    pub replication: HashMap<String, tickwire_room::replicate::ReplicationProfile>,
    /// Players refused a seat (an unreadable ticket, a room that refused them, a player
    /// already connected, a per-address limit).
    pub joins_refused: u64,
    /// Players refused by the per-address connection limit.
    pub refused_by_address: u64,
    /// Views published so far: a worker whose count stops moving has stopped (a health
    /// check's signal that the shard still turns).
    pub publications: u64,
}

/// A [`WorkerView`] shared between the worker that writes it and the readers.
#[derive(Debug, Clone, Default)]
pub struct SharedView(Arc<Mutex<WorkerView>>);

impl SharedView {
    /// The view as last published.
    pub fn read(&self) -> WorkerView {
        self.lock().clone()
    }

    pub(crate) fn publish(&self, mut view: WorkerView) {
        let mut published = self.lock();
        view.publications = published.publications + 1;
        *published = view;
    }

    fn lock(&self) -> MutexGuard<'_, WorkerView> {
        self.0.lock().unwrap_or_else(|poison| poison.into_inner())
    }
}

/// Connection count and rate per address, shared by every worker and both transports.
/// Locked once per connection and per disconnection, never per message.
#[derive(Debug, Clone)]
pub struct SharedIpLimiter {
    limiter: Arc<Mutex<IpLimiter>>,
    exempt: Arc<[IpAddr]>,
}

impl SharedIpLimiter {
    /// Shares `limiter`; addresses in `exempt` (a trusted proxy, the load-test host) are
    /// never limited.
    pub fn new(limiter: IpLimiter, exempt: Vec<IpAddr>) -> Self {
        Self {
            limiter: Arc::new(Mutex::new(limiter)),
            exempt: exempt.into(),
        }
    }

    /// Admits a connection from `ip`; true if it may stay.
    pub fn try_open(&self, now: std::time::Instant, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.exempt.contains(&ip) || self.lock().try_open(now, ip).is_ok()
    }

    /// An admitted connection from `ip` ended.
    pub fn closed(&self, ip: IpAddr) {
        let ip = ip.to_canonical();
        if !self.exempt.contains(&ip) {
            self.lock().closed(ip);
        }
    }

    fn lock(&self) -> MutexGuard<'_, IpLimiter> {
        self.limiter
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// The session table counts every link's address through this.
impl AddressLimit for SharedIpLimiter {
    fn try_open(&self, now: std::time::Instant, ip: IpAddr) -> bool {
        SharedIpLimiter::try_open(self, now, ip)
    }

    fn closed(&self, ip: IpAddr) {
        SharedIpLimiter::closed(self, ip);
    }
}

/// How a worker is wired into a whole server; the default wires it to nothing (tests of a
/// lone worker).
#[derive(Default)]
pub struct WorkerLinks {
    /// Where seat changes go.
    pub events: Option<mpsc::UnboundedSender<SeatChange>>,
    /// Where the worker publishes its view.
    pub view: SharedView,
    /// Per-address connection limits, for both transports.
    pub limiter: Option<SharedIpLimiter>,
    /// Told about every tick (for metrics).
    pub tick_observer: Option<TickObserver>,
}
