//! This node's part in a cluster (`[cluster] redis_url`): it joins the directory
//! ([`crate::cluster::Directory`]) under a lease it renews with its whole state, tells it
//! of every seat taken or left and every room made or gone, places players anywhere in the
//! cluster for `POST /api/matchmake`, and creates rooms when another node asks.
//!
//! One task ([`run`]) does every write of this node's own entries, in order: renewals,
//! seat changes and new rooms' listings, so a renewal never undoes a newer change. Placing
//! a player goes through the same admission as a single server: a connect token sealed
//! with the key every node derives from the cluster's secret, naming the UDP address of
//! the shard that hosts the room; the node that hosts it admits it with its one
//! `Admission`, and its `Sessions` seat the player. A token for one node names none of
//! another's addresses, so the other refuses it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use rand::Rng as _;
use ring::hmac;
use serde::{Deserialize, Serialize};
use tickwire_proto::crypto::Key;
use tickwire_proto::matchmake::WtEndpointInfo;
use tokio::sync::{mpsc, oneshot};

use super::api::{ApiError, SeatAt, SeatChoice};
use super::identity::Identity;
use super::{App, Phase};
use crate::cluster::{
    CancelOutcome, Directory, DirectoryError, MAX_RANGE, NodeInfo, NodeState, Outcome, RANGE_SHIFT,
    RoomState, Want,
};
use crate::config::ClusterConfig;
use crate::listing::{LabelFilter, RoomOptions};
use crate::matchmaker::{MatchError, MatchRequest};
use crate::room::PlayerId;
use crate::shard::{RoomId, SeatChange};

/// The connect-token key every node of the cluster derives from its secret.
pub(super) fn token_key(secret: &str) -> Key {
    Key(derive(secret, b"tickwire cluster: connect-token key v1"))
}

/// The session key every node of the cluster derives from its secret, so a session issued
/// by one node brings its player back through any.
pub(super) fn session_secret(secret: &str) -> [u8; 32] {
    derive(secret, b"tickwire cluster: session key v1")
}

fn derive(secret: &str, label: &[u8]) -> [u8; 32] {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(hmac::sign(&key, label).as_ref());
    out
}

/// What the node's task is told.
enum Note {
    /// A seat taken or left, or a room disposed of.
    Seat(SeatChange),
    /// A room this node created, to list (and its first seat, and the request it answers).
    Created {
        room: RoomState,
        reservation: Option<(u64, Duration)>,
        request: Option<String>,
        done: oneshot::Sender<Result<(), DirectoryError>>,
    },
    /// Renew now (the node began draining); told when done.
    Renew(Option<oneshot::Sender<()>>),
    /// Leave the directory and stop.
    Leave(oneshot::Sender<()>),
}

/// A message between nodes, on the receiver's channel.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Message {
    /// Create a room of `kind` with a seat for `player`, and answer `from`.
    Create {
        req: String,
        from: String,
        kind: String,
        player: String,
        /// The matchmake request's room options, validated again by the node that creates.
        #[serde(default)]
        options: BTreeMap<String, String>,
    },
    /// The room asked for exists; its seat is reserved.
    Created { req: String, room: String },
    /// The room could not be created.
    Refused { req: String, reason: String },
    /// An operator's announcement (`POST /api/admin/say` on node `from`): every room here
    /// hears it.
    Say { from: String, text: String },
}

enum Reply {
    Created,
    Refused(String),
}

#[derive(Debug, Default)]
struct Health {
    /// The last directory operation failed: why.
    unavailable: Option<String>,
    /// When that was first logged.
    logged: Option<Instant>,
}

/// This node in the cluster.
pub(super) struct ClusterNode {
    directory: Directory,
    config: ClusterConfig,
    lease: Duration,
    /// The room-id range, once claimed: until then the node places no one.
    range: OnceLock<u32>,
    notes: mpsc::UnboundedSender<Note>,
    inbox: Mutex<Option<mpsc::UnboundedReceiver<Note>>>,
    pending: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
    health: Mutex<Health>,
    /// Held while this node has a new room made for a join-or-create: a burst of players
    /// arriving together fills that room instead of each making one.
    creating: tokio::sync::Mutex<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl ClusterNode {
    /// Joins nothing yet: [`run`] does, once the runtime is up.
    pub(super) fn new(config: &ClusterConfig) -> Result<Self, DirectoryError> {
        let node = if config.node_id.is_empty() {
            default_node_id()
        } else {
            config.node_id.clone()
        };
        let directory = Directory::new(
            &config.redis_url,
            &config.name,
            &node,
            Duration::from_millis(config.redis_timeout_ms),
        )?;
        let (notes, inbox) = mpsc::unbounded_channel();
        Ok(Self {
            directory,
            config: config.clone(),
            lease: Duration::from_millis(config.lease_ms),
            range: OnceLock::new(),
            notes,
            inbox: Mutex::new(Some(inbox)),
            pending: Mutex::new(HashMap::new()),
            health: Mutex::new(Health::default()),
            creating: tokio::sync::Mutex::new(()),
        })
    }

    /// This node's id in the directory.
    pub(super) fn id(&self) -> &str {
        self.directory.node()
    }

    /// The directory, for listings.
    pub(super) fn directory(&self) -> &Directory {
        &self.directory
    }

    /// A seat change the shards reported (after the local matchmaker took it in).
    pub(super) fn seat_change(&self, change: SeatChange) {
        let _ = self.notes.send(Note::Seat(change));
    }

    /// Renew at once (draining began).
    pub(super) fn renew(&self) {
        let _ = self.notes.send(Note::Renew(None));
    }

    /// Renews at once and waits until the directory has it (or the Redis timeout passed):
    /// once a drain is answered, no node places players here.
    pub(super) async fn renewed(&self) {
        let (done, renewed) = oneshot::channel();
        if self.notes.send(Note::Renew(Some(done))).is_ok() {
            let wait = Duration::from_millis(self.config.redis_timeout_ms) * 2;
            let _ = tokio::time::timeout(wait, renewed).await;
        }
    }

    /// Leaves the directory (a clean stop), within the Redis timeout.
    pub(super) async fn leave(&self) {
        let (done, left) = oneshot::channel();
        if self.notes.send(Note::Leave(done)).is_ok() {
            let wait = Duration::from_millis(self.config.redis_timeout_ms) * 2;
            let _ = tokio::time::timeout(wait, left).await;
        }
    }

    /// A line for `/readyz` while the directory is unreachable.
    pub(super) fn degraded(&self) -> Option<String> {
        if self.range.get().is_none() {
            return Some("cluster: not in the directory yet (redis unreachable?)".into());
        }
        lock(&self.health)
            .unavailable
            .as_ref()
            .map(|why| format!("cluster: directory unavailable: {why}"))
    }

    fn failed(&self, error: &DirectoryError) {
        let mut health = lock(&self.health);
        if health.unavailable.is_none() {
            tracing::warn!(%error, "cluster directory unavailable: matchmaking answers 503, rooms in progress go on");
            health.logged = Some(Instant::now());
        }
        health.unavailable = Some(error.to_string());
    }

    fn succeeded(&self) -> bool {
        let mut health = lock(&self.health);
        let was_down = health.unavailable.take().is_some();
        health.logged = None;
        was_down
    }

    fn unavailable(&self, error: DirectoryError) -> ApiError {
        self.failed(&error);
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cluster directory unavailable: {error}"),
        )
    }
}

/// The host name and a random suffix: unique per process, readable in listings.
fn default_node_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "node".into());
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
        .take(48)
        .collect();
    format!("{host}-{:06x}", rand::rng().random_range(0..0x100_0000))
}

/// Where players reach this node.
fn node_info(app: &App, id: &str) -> NodeInfo {
    let http = app.http_public;
    let mut ws = format!("ws://{http}/ws");
    let mut wss = app.https_public.map(|https| format!("wss://{https}/ws"));
    match app.config.http.public_ws_endpoint() {
        Ok(Some((true, url))) => wss = Some(url),
        Ok(Some((false, url))) => ws = url,
        Ok(None) | Err(_) => {}
    }
    NodeInfo {
        id: id.to_string(),
        http: http.to_string(),
        ws,
        wss,
        wt: app
            .shards
            .iter()
            .filter_map(|shard| shard.wt.as_ref())
            .map(|wt| WtEndpointInfo {
                url: format!("https://{}/wt", wt.public),
                cert_sha256: wt.cert.get(),
            })
            .collect(),
        udp: app.shards.iter().map(|shard| shard.udp_public).collect(),
    }
}

/// The node's whole state for a renewal: the rooms it has listed (a room made but not yet
/// listed is its creator's to list), its seated players.
fn node_state(
    app: &App,
    node: &ClusterNode,
    range: u32,
    listed: &HashMap<RoomId, String>,
) -> NodeState {
    let draining = app.phase() != Phase::Running;
    let matchmaker = app.matchmaker();
    let rooms: Vec<RoomState> = matchmaker
        .room_entries()
        .filter(|(id, ..)| listed.contains_key(id))
        .map(|(id, kind, shard, seated, capacity)| {
            let listing = matchmaker.listing(id).cloned().unwrap_or_default();
            RoomState {
                id: id.0,
                kind: kind.to_string(),
                capacity,
                seated,
                joinable: !draining && !listing.locked,
                udp: app
                    .shards
                    .get(shard)
                    .map_or(app.http_public, |link| link.udp_public),
                label: listing.label,
                metadata: listing.metadata,
            }
        })
        .collect();
    let seated: Vec<(u64, u64)> = matchmaker
        .seated_players()
        .map(|(player, room)| (player.0, room.0))
        .collect();
    drop(matchmaker);
    NodeState {
        info: node_info(app, node.id()),
        kinds: app.kinds.iter().map(|(name, _)| name.to_string()).collect(),
        capacity: node.config.max_players,
        players: u32::try_from(seated.len()).unwrap_or(u32::MAX),
        draining,
        range,
        rooms,
        seated,
    }
}

/// The node's life in the cluster: claims a room-id range, then renews its lease (every
/// third of it), writes its seat changes and new rooms, answers other nodes' requests, and
/// leaves the directory when told.
pub(super) async fn run(app: Arc<App>) {
    let Some(node) = app.cluster.clone() else {
        return;
    };
    let Some(mut notes) = lock(&node.inbox).take() else {
        return;
    };
    let directory = node.directory.clone();
    let mut messages = directory.subscribe();
    // A range of room ids of this node's own: ids are unique across the cluster.
    let range = loop {
        let candidate = rand::rng().random_range(1..=MAX_RANGE);
        match directory.claim_range(candidate, node.lease).await {
            Ok(true) => break candidate,
            Ok(false) => continue,
            Err(error) => {
                node.failed(&error);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(500)) => continue,
                    note = notes.recv() => match note {
                        Some(Note::Leave(done)) => { let _ = done.send(()); return; }
                        Some(_) => continue,
                        None => return,
                    },
                }
            }
        }
    };
    app.matchmaker()
        .number_rooms_from(u64::from(range) << RANGE_SHIFT);
    let _ = node.range.set(range);
    tracing::info!(node = node.id(), range, "joined the cluster directory");

    // Rooms this node has listed, with their kind (for their removal).
    let mut listed: HashMap<RoomId, String> = HashMap::new();
    let mut renewals = tokio::time::interval(node.lease / 3);
    renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut registered = false;
    loop {
        tokio::select! {
            _ = renewals.tick() => renew(&app, &node, range, &listed, &mut registered).await,
            note = notes.recv() => match note {
                None => return,
                Some(Note::Renew(done)) => {
                    renew(&app, &node, range, &listed, &mut registered).await;
                    if let Some(done) = done {
                        let _ = done.send(());
                    }
                }
                Some(Note::Leave(done)) => {
                    match directory.leave(range).await {
                        Ok(()) => tracing::info!(node = node.id(), "left the cluster directory"),
                        Err(error) => tracing::warn!(%error, "could not leave the cluster directory; it expires with the lease"),
                    }
                    let _ = done.send(());
                    return;
                }
                Some(Note::Created { room, reservation, request, done }) => {
                    let id = RoomId(room.id);
                    let result = directory
                        .room_created(&room, node.lease, reservation, request.as_deref())
                        .await;
                    match &result {
                        Ok(()) => {
                            listed.insert(id, room.kind.clone());
                        }
                        Err(error) => node.failed(error),
                    }
                    let _ = done.send(result);
                }
                Some(Note::Seat(change)) => seat_change(&app, &node, &mut listed, change).await,
            },
            message = messages.recv() => match message {
                Some(message) => handle_message(&app, &node, &message),
                None => messages = directory.subscribe(),
            },
        }
    }
}

async fn renew(
    app: &App,
    node: &ClusterNode,
    range: u32,
    listed: &HashMap<RoomId, String>,
    registered: &mut bool,
) {
    let state = node_state(app, node, range, listed);
    match node.directory.heartbeat(&state, node.lease).await {
        Ok(existed) => {
            let recovered = node.succeeded();
            if !existed && *registered {
                tracing::warn!(
                    rooms = state.rooms.len(),
                    players = state.players,
                    "this node was missing from the cluster directory (redis restarted, or a renewal came after the lease); listed again"
                );
            } else if recovered {
                tracing::info!(
                    rooms = state.rooms.len(),
                    "cluster directory available again"
                );
            }
            *registered = true;
        }
        Err(error) => node.failed(&error),
    }
}

async fn seat_change(
    app: &App,
    node: &ClusterNode,
    listed: &mut HashMap<RoomId, String>,
    change: SeatChange,
) {
    let result = match change {
        SeatChange::Seated { player, room } | SeatChange::Unseated { player, room } => {
            let seated = matches!(change, SeatChange::Seated { .. });
            let (in_room, on_node) = {
                let matchmaker = app.matchmaker();
                (
                    matchmaker.seated_in(room).unwrap_or(0),
                    u32::try_from(matchmaker.seated_players().count()).unwrap_or(u32::MAX),
                )
            };
            node.directory
                .seat_changed(room.0, player.0, seated, in_room, on_node, node.lease)
                .await
        }
        SeatChange::RoomDisposed { room } => match listed.remove(&room) {
            Some(kind) => node.directory.room_closed(room.0, &kind).await,
            None => Ok(()),
        },
        // A lock or unlock changes whether the room is joinable: the directory learns it
        // with the node's whole state, renewed now rather than at the next lease third.
        SeatChange::Listed { .. } => {
            node.renew();
            Ok(())
        }
    };
    if let Err(error) = result {
        // The next renewal writes the whole state again.
        node.failed(&error);
    }
}

fn handle_message(app: &Arc<App>, node: &Arc<ClusterNode>, message: &str) {
    let Ok(message) = serde_json::from_str::<Message>(message) else {
        tracing::debug!(message, "unreadable cluster message");
        return;
    };
    match message {
        Message::Create {
            req,
            from,
            kind,
            player,
            options,
        } => {
            let app = app.clone();
            let node = node.clone();
            tokio::spawn(async move {
                let reply = match create_requested(&app, &node, &req, &kind, &player, options).await
                {
                    Ok(Some(room)) => Message::Created {
                        req,
                        room: room.0.to_string(),
                    },
                    Ok(None) => return, // cancelled by its sender: nothing to say
                    Err(reason) => Message::Refused { req, reason },
                };
                if let Ok(text) = serde_json::to_string(&reply) {
                    let _ = node.directory.send(&from, &text).await;
                }
            });
        }
        Message::Created { req, .. } => {
            if let Some(waiting) = lock(&node.pending).remove(&req) {
                let _ = waiting.send(Reply::Created);
            }
        }
        Message::Refused { req, reason } => {
            if let Some(waiting) = lock(&node.pending).remove(&req) {
                let _ = waiting.send(Reply::Refused(reason));
            }
        }
        Message::Say { from, text } => {
            if super::admin::say(app, &text).is_err() {
                tracing::warn!(
                    from,
                    "an announcement from another node missed a busy shard"
                );
            }
        }
    }
}

/// Passes an operator's announcement, already made on this node, to every other live node
/// over their channels: how many nodes in all have it (this one included).
pub(super) async fn say_everywhere(node: &ClusterNode, text: &str) -> Result<u32, ApiError> {
    let nodes = node
        .directory
        .nodes()
        .await
        .map_err(|error| node.unavailable(error))?;
    let message = serde_json::to_string(&Message::Say {
        from: node.id().to_string(),
        text: text.to_string(),
    })
    .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?;
    let mut reached = 1;
    for other in nodes.iter().filter(|other| other.id != node.id()) {
        let heard = node
            .directory
            .send(&other.id, &message)
            .await
            .map_err(|error| node.unavailable(error))?;
        reached += u32::from(heard > 0);
    }
    Ok(reached)
}

/// Another node asks this one for a room: taken only if its sender has not cancelled.
async fn create_requested(
    app: &App,
    node: &ClusterNode,
    request: &str,
    kind: &str,
    player: &str,
    options: BTreeMap<String, String>,
) -> Result<Option<RoomId>, String> {
    let player: u64 = player.parse().map_err(|_| "bad player id".to_string())?;
    let options = RoomOptions::new(options).map_err(|error| error.to_string())?;
    if app.phase() != Phase::Running {
        return Err(format!("node {} is draining", node.id()));
    }
    match node.directory.claim_create(request).await {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(error) => return Err(error.to_string()),
    }
    create_here(
        app,
        node,
        kind,
        PlayerId(player),
        Some(request.to_string()),
        &options,
    )
    .await
    .map(Some)
    .map_err(|error| error.message().to_string())
}

/// Creates a room of `kind` on this node with a seat reserved for `player`, and lists it.
async fn create_here(
    app: &App,
    node: &ClusterNode,
    kind: &str,
    player: PlayerId,
    request: Option<String>,
    options: &RoomOptions,
) -> Result<RoomId, ApiError> {
    let placement = app.matchmaker().place(
        Instant::now(),
        player,
        &MatchRequest::Create {
            kind: kind.to_string(),
        },
    )?;
    if let Err(error) = super::api::create_room(app, &placement, options).await {
        app.matchmaker().room_closed(placement.room);
        return Err(error);
    }
    let capacity = app.kinds.capacity(kind).unwrap_or(1);
    // The label its `create` set, if the shard has reported it yet; else the renewal that
    // the report brings lists it.
    let listing = app
        .matchmaker()
        .listing(placement.room)
        .cloned()
        .unwrap_or_default();
    let room = RoomState {
        id: placement.room.0,
        kind: kind.to_string(),
        capacity,
        seated: 0,
        joinable: true,
        udp: app.shards[placement.shard].udp_public,
        label: listing.label,
        metadata: listing.metadata,
    };
    let (done, listed) = oneshot::channel();
    let ttl = Duration::from_secs(app.config.udp.token_validity_secs);
    let _ = node.notes.send(Note::Created {
        room,
        reservation: Some((player.0, ttl)),
        request,
        done,
    });
    match listed.await {
        Ok(Ok(())) => Ok(placement.room),
        Ok(Err(error)) => Err(node.unavailable(error)),
        Err(_) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node is leaving the cluster",
        )),
    }
}

/// Asks node `target` for a room of `kind` with a seat for `player`, within the create
/// timeout. Past it the request is cancelled unless the node has taken it; a cancelled
/// request is never carried out, so a timeout never leaves a second room behind.
async fn create_there(
    node: &ClusterNode,
    target: &str,
    kind: &str,
    player: PlayerId,
    options: &RoomOptions,
) -> Result<(), ApiError> {
    let mut id = [0u8; 12];
    rand::rng().fill(&mut id);
    let request = hex::encode(id);
    let (answer, mut answered) = oneshot::channel();
    lock(&node.pending).insert(request.clone(), answer);
    let message = Message::Create {
        req: request.clone(),
        from: node.id().to_string(),
        kind: kind.to_string(),
        player: player.0.to_string(),
        options: options
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect(),
    };
    let text = serde_json::to_string(&message).unwrap_or_default();
    let timeout = Duration::from_millis(node.config.create_timeout_ms);
    let outcome = async {
        let delivered = node
            .directory
            .send(target, &text)
            .await
            .map_err(|error| node.unavailable(error))?;
        if delivered > 0
            && let Ok(Ok(reply)) = tokio::time::timeout(timeout, &mut answered).await
        {
            return match reply {
                Reply::Created => Ok(()),
                Reply::Refused(reason) => Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("node {target} could not create the room: {reason}"),
                )),
            };
        }
        // No answer in time (or no one listening): cancel, unless the node took it.
        match node
            .directory
            .cancel_create(&request)
            .await
            .map_err(|error| node.unavailable(error))?
        {
            CancelOutcome::Created(_) => Ok(()),
            CancelOutcome::Cancelled => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("node {target} did not create the room within {timeout:?}; try again"),
            )),
            CancelOutcome::InProgress => match tokio::time::timeout(timeout, &mut answered).await {
                Ok(Ok(Reply::Created)) => Ok(()),
                _ => Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("node {target} is slow to create the room; try again"),
                )),
            },
        }
    }
    .await;
    lock(&node.pending).remove(&request);
    outcome
}

/// Places a player anywhere in the cluster: their held seat or reservation, a seat in a
/// room with one free, or a new room on the node with the fewest players.
pub(super) async fn place(
    app: &App,
    node: &ClusterNode,
    identity: &Identity,
    wanted: &MatchRequest,
    options: &RoomOptions,
) -> Result<SeatChoice, ApiError> {
    if app.phase() != Phase::Running {
        return Err(MatchError::Draining.into());
    }
    if node.range.get().is_none() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "cluster directory unavailable: this node has not joined it yet ({})",
                lock(&node.health).unavailable.clone().unwrap_or_default()
            ),
        ));
    }
    let no_filter = LabelFilter::default();
    let filter = match wanted {
        MatchRequest::JoinOrCreate { filter, .. } => filter,
        _ => &no_filter,
    };
    let want = match wanted {
        MatchRequest::JoinOrCreate { kind, .. } if kind.is_empty() => Want::Lookup,
        MatchRequest::JoinOrCreate { kind, .. } | MatchRequest::Create { kind } => {
            if app.kinds.capacity(kind).is_none() {
                return Err(MatchError::UnknownKind(kind.clone()).into());
            }
            match wanted {
                MatchRequest::Create { .. } => Want::Create(kind),
                _ => Want::JoinOrCreate(kind),
            }
        }
        MatchRequest::Join { room } => Want::Join(room.0),
    };
    let ttl = Duration::from_secs(app.config.udp.token_validity_secs);
    let player = identity.player;
    let mut outcome = node
        .directory
        .matchmake_filtered(player.0, want, filter, ttl)
        .await
        .map_err(|error| node.unavailable(error))?;
    node.succeeded();
    // One new room at a time from this node for join-or-create; a player who waited for
    // one asks again, and most often finds a seat in it.
    let _creating = match (&outcome, want) {
        (Outcome::Create { .. }, Want::JoinOrCreate(_)) => {
            let guard = node.creating.lock().await;
            outcome = node
                .directory
                .matchmake_filtered(player.0, want, filter, ttl)
                .await
                .map_err(|error| node.unavailable(error))?;
            Some(guard)
        }
        _ => None,
    };
    let seat = match outcome {
        Outcome::Held(seat) => return Ok(choice(app, node, seat, true)),
        Outcome::Reserved(seat) => return Ok(choice(app, node, seat, false)),
        Outcome::Create { node: target, .. } => {
            let kind = match want {
                Want::JoinOrCreate(kind) | Want::Create(kind) => kind,
                _ => unreachable!("only a kind asks for a new room"),
            };
            if target == node.id() {
                create_here(app, node, kind, player, None, options).await?;
            } else {
                create_there(node, &target, kind, player, options).await?;
            }
            match node
                .directory
                .matchmake(player.0, Want::Lookup, ttl)
                .await
                .map_err(|error| node.unavailable(error))?
            {
                Outcome::Reserved(seat) | Outcome::Held(seat) => seat,
                _ => {
                    return Err(ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the new room's seat was lost (its node left); try again",
                    ));
                }
            }
        }
        Outcome::Nothing => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "no seat is held for this session; give a room kind or room id",
            ));
        }
        Outcome::NoRoom => {
            let room = match want {
                Want::Join(room) => room,
                _ => 0,
            };
            return Err(MatchError::NoSuchRoom(RoomId(room)).into());
        }
        Outcome::Full => {
            let room = match want {
                Want::Join(room) => room,
                _ => 0,
            };
            return Err(MatchError::RoomFull(RoomId(room)).into());
        }
        Outcome::Closed => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "the room takes no new players (its node is draining)",
            ));
        }
        Outcome::NoNode => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no node in the cluster can take a new room now",
            ));
        }
    };
    Ok(choice(app, node, seat, false))
}

fn choice(
    app: &App,
    node: &ClusterNode,
    seat: crate::cluster::Seat,
    reconnect: bool,
) -> SeatChoice {
    let room = RoomId(seat.room);
    let local = (seat.node == node.id())
        .then(|| app.matchmaker().shard_of(room))
        .flatten();
    let at = match local {
        Some(shard) => SeatAt::Shard(shard),
        None => SeatAt::Node {
            udp: seat.udp,
            info: seat.info,
        },
    };
    SeatChoice {
        room,
        kind: seat.kind,
        reconnect,
        at,
    }
}
