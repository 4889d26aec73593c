//! The cluster's room directory on Redis: which nodes are alive and where players reach
//! them, which rooms each hosts with how many seats taken or promised, who sits where. The
//! nodes' runtime keeps its part of it up to date (`runtime::cluster`); matchmaking on any
//! node reads it and reserves seats in it, one script per matchmake.
//!
//! Everything a node lists lives under its lease: the node's record, its rooms and its
//! seated players expire together unless the node renews them (three times per lease), so
//! a node killed with `kill -9` leaves the directory within one lease, and one slow renewal
//! loses nothing. A seat is promised by a Lua script that counts the room's seated players
//! and its unexpired reservations and adds one only if a seat is left: concurrent
//! matchmakes on any number of nodes never promise more seats than a room has.
//!
//! Keys, all under `tw:{name}:` (one hash slot per cluster):
//!
//! | key | type | what |
//! |---|---|---|
//! | `nodes` | set | node ids (dead ones are dropped when next read) |
//! | `node:{id}` | hash | `info` (JSON: addresses), `kinds`, `players`, `capacity`, `draining`, `range`, `renewed`; lease |
//! | `node:{id}:rooms` | set | the node's room ids; lease |
//! | `node:{id}:players` | hash | seated player → room; lease |
//! | `node:{id}:res` | sorted set | player → expiry (ms) of seats promised on the node: its load |
//! | `room:{id}` | hash | `node`, `kind`, `capacity`, `seated`, `joinable`, `udp`, `label` (JSON object), `metadata`; lease |
//! | `room:{id}:res` | sorted set | player → expiry (ms) of seats promised in the room |
//! | `kind:{kind}` | set | room ids of that kind (stale ones dropped when read) |
//! | `res:{player}` | string | the room a player's reservation is in; expires with it |
//! | `range:{n}` | string | the node holding room-id range `n` (ids `n << 32` on); lease |
//! | `create:{request}` | string | a create request's fate: claimed, `room:{id}` or cancelled |
//!
//! Requests between nodes (create a room here) travel on the channel `tw:{name}:rpc:{node}`.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt as _;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands as _, Script};
use serde::{Deserialize, Serialize};
use tickwire_proto::matchmake::WtEndpointInfo;
use tickwire_room::listing::{Label, LabelFilter};
use tokio::sync::mpsc;

macro_rules! script {
    ($file:literal) => {
        concat!(include_str!("lua/common.lua"), include_str!($file))
    };
}

/// The bits of a room id below a node's range: a node numbers its rooms `range << 32` on.
pub const RANGE_SHIFT: u32 = 32;
/// Room-id ranges are 1 to 2^20 − 1, so room ids stay below 2^52 (exact in JavaScript).
pub const MAX_RANGE: u32 = (1 << 20) - 1;

/// Where players reach a node: what matchmaking on another node puts in its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's id.
    pub id: String,
    /// Its public HTTP address (`host:port`): the API, `/ws`.
    pub http: String,
    /// `ws://host:port/ws`.
    pub ws: String,
    /// `wss://host:port/ws`, with TLS.
    #[serde(default)]
    pub wss: Option<String>,
    /// Each shard's WebTransport endpoint, in the order of `udp`, when served (a shard
    /// serves its own rooms' sessions on its own port).
    #[serde(default)]
    pub wt: Vec<WtEndpointInfo>,
    /// Each shard's public UDP address.
    #[serde(default)]
    pub udp: Vec<SocketAddr>,
}

impl NodeInfo {
    /// The WebTransport endpoint of the shard whose UDP address is `udp`.
    pub fn wt_of(&self, udp: SocketAddr) -> Option<WtEndpointInfo> {
        let shard = self.udp.iter().position(|address| *address == udp)?;
        self.wt.get(shard).cloned()
    }
}

/// One room as its node lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomState {
    /// Its id.
    pub id: u64,
    /// Its kind.
    pub kind: String,
    /// Seats.
    pub capacity: u16,
    /// Players seated.
    pub seated: u16,
    /// Whether matchmaking may put players in it.
    pub joinable: bool,
    /// The public UDP address of the shard hosting it (the address its tokens name).
    pub udp: SocketAddr,
    /// What matchmaking filters match (`label.mode = "ranked"`), as the room set it.
    pub label: Label,
    /// The room's free text for listings.
    pub metadata: String,
}

/// A node's whole state, as each renewal writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// Where players reach it.
    pub info: NodeInfo,
    /// The room kinds it hosts.
    pub kinds: Vec<String>,
    /// Players it admits at most (0: no limit).
    pub capacity: u32,
    /// Players seated.
    pub players: u32,
    /// Taking no new players.
    pub draining: bool,
    /// Its room-id range.
    pub range: u32,
    /// Its rooms.
    pub rooms: Vec<RoomState>,
    /// Seated players and their rooms.
    pub seated: Vec<(u64, u64)>,
}

/// What a player asks the directory for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want<'a> {
    /// Only a seat they hold or a reservation they have.
    Lookup,
    /// A seat in this room.
    Join(u64),
    /// A seat in a room of this kind, or a new room.
    JoinOrCreate(&'a str),
    /// A new room of this kind.
    Create(&'a str),
}

/// A seat in the directory: the room, its node, and where players reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seat {
    /// The room.
    pub room: u64,
    /// Its kind.
    pub kind: String,
    /// The node hosting it.
    pub node: String,
    /// The UDP address of its shard.
    pub udp: SocketAddr,
    /// The node's addresses.
    pub info: NodeInfo,
}

/// What a matchmake found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A seat the player holds (reconnection).
    Held(Seat),
    /// A seat reserved for the player (new, or theirs already).
    Reserved(Seat),
    /// A new room is needed, on this node; a seat on it is counted against the node.
    Create {
        /// The node.
        node: String,
        /// Where players reach it.
        info: NodeInfo,
    },
    /// The player holds nothing ([`Want::Lookup`]).
    Nothing,
    /// No such room (or its node is gone).
    NoRoom,
    /// The room takes no players (its node drains, or the room is closed).
    Closed,
    /// The room has no seat left.
    Full,
    /// No live node hosts the kind and has room for a player.
    NoNode,
}

/// A room in the cluster-wide listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomListing {
    /// Its id.
    pub id: u64,
    /// Its kind.
    pub kind: String,
    /// The node hosting it.
    pub node: String,
    /// Players seated.
    pub players: u16,
    /// Seats promised to players who have not connected yet.
    pub reserved: u16,
    /// Seats.
    pub capacity: u16,
    /// Whether matchmaking puts players in it.
    pub joinable: bool,
    /// Its label.
    #[serde(serialize_with = "label_as_map")]
    pub label: Label,
    /// Its metadata.
    pub metadata: String,
}

fn label_as_map<S: serde::Serializer>(label: &Label, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_map(label.iter())
}

/// A label as the directory stores it: a JSON object of its entries.
fn label_json(label: &Label) -> String {
    let map: serde_json::Map<String, serde_json::Value> = label
        .iter()
        .map(|(key, value)| (key.to_string(), serde_json::Value::from(value)))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// A label read back from the directory (bounded again: Redis is not trusted to hold
/// only what nodes wrote).
fn parse_label(json: &str) -> Result<Label, DirectoryError> {
    let corrupt = |what: String| DirectoryError::Corrupt(format!("room label: {what}"));
    if json.is_empty() {
        return Ok(Label::default());
    }
    let map: std::collections::BTreeMap<String, String> =
        serde_json::from_str(json).map_err(|error| corrupt(error.to_string()))?;
    Label::new(map).map_err(|error| corrupt(error.to_string()))
}

/// A filter as the matchmake script reads it: `[[key, value, "1" for = or "0" for !=], …]`.
fn filter_json(filter: &LabelFilter) -> String {
    let clauses: Vec<[&str; 3]> = filter
        .clauses()
        .map(|(key, value, equal)| [key, value, if equal { "1" } else { "0" }])
        .collect();
    json(&clauses)
}

/// A node in the cluster-wide listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeListing {
    /// Its id.
    pub id: String,
    /// Where players reach it.
    pub info: NodeInfo,
    /// Players seated.
    pub players: u32,
    /// Seats promised and not yet taken.
    pub reserved: u32,
    /// Players it admits at most (0: no limit).
    pub capacity: u32,
    /// Draining: taking no new players.
    pub draining: bool,
    /// Milliseconds left on its lease.
    pub lease_left_ms: i64,
    /// Its rooms.
    pub rooms: Vec<RoomListing>,
}

/// A directory operation that failed: Redis unreachable, slow, or answering nonsense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    /// Redis did not answer within the timeout.
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// Redis answered with an error, or the connection failed.
    #[error("redis: {0}")]
    Redis(String),
    /// An answer the directory cannot read.
    #[error("unreadable directory entry: {0}")]
    Corrupt(String),
}

impl From<redis::RedisError> for DirectoryError {
    fn from(error: redis::RedisError) -> Self {
        Self::Redis(error.to_string())
    }
}

/// The fate of a create request whose answer did not come in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Cancelled before the node took it: no room will be created.
    Cancelled,
    /// The node created the room.
    Created(u64),
    /// The node took the request and has not finished.
    InProgress,
}

struct Scripts {
    matchmake: Script,
    created: Script,
    seat: Script,
    room_gone: Script,
    heartbeat: Script,
    claim_range: Script,
    listing: Script,
    leave: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            matchmake: Script::new(script!("lua/matchmake.lua")),
            created: Script::new(script!("lua/created.lua")),
            seat: Script::new(script!("lua/seat.lua")),
            room_gone: Script::new(script!("lua/room_gone.lua")),
            heartbeat: Script::new(script!("lua/heartbeat.lua")),
            claim_range: Script::new(script!("lua/claim_range.lua")),
            listing: Script::new(script!("lua/listing.lua")),
            leave: Script::new(script!("lua/leave.lua")),
        }
    }
}

/// One node's handle on the directory. Cheap to clone; every operation is bounded by the
/// timeout, and fails (rather than waits) while Redis is away.
#[derive(Clone)]
pub struct Directory {
    client: redis::Client,
    connection: ConnectionManager,
    prefix: String,
    node: String,
    timeout: Duration,
    scripts: std::sync::Arc<Scripts>,
}

impl fmt::Debug for Directory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Directory")
            .field("prefix", &self.prefix)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Directory {
    /// A handle for node `node` of cluster `name` on the Redis at `url`. Connects lazily:
    /// a Redis that is down now is no error until an operation needs it (and reconnects
    /// by itself when it is back). Must be called within a tokio runtime.
    pub fn new(
        url: &str,
        name: &str,
        node: &str,
        timeout: Duration,
    ) -> Result<Self, DirectoryError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(timeout);
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        Ok(Self {
            client,
            connection,
            prefix: format!("tw:{{{name}}}:"),
            node: node.to_string(),
            timeout,
            scripts: std::sync::Arc::new(Scripts::new()),
        })
    }

    /// This node's id.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The key prefix, `tw:{name}:`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    async fn bounded<T>(
        &self,
        operation: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, DirectoryError> {
        match tokio::time::timeout(self.timeout, operation).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(DirectoryError::Timeout(self.timeout)),
        }
    }

    /// Claims room-id range `range` for this node (under `lease`): false when a live node
    /// holds it.
    pub async fn claim_range(&self, range: u32, lease: Duration) -> Result<bool, DirectoryError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.claim_range.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(&self.node)
            .arg(range)
            .arg(millis(lease));
        let claimed: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(claimed == 1)
    }

    /// Renews the node's lease with its whole state; true when the node was listed
    /// already, false when this renewal listed it anew (first start, or Redis came back
    /// empty).
    pub async fn heartbeat(
        &self,
        state: &NodeState,
        lease: Duration,
    ) -> Result<bool, DirectoryError> {
        let info = serde_json::to_string(&state.info)
            .map_err(|error| DirectoryError::Corrupt(error.to_string()))?;
        let kinds = format!(",{},", state.kinds.join(","));
        let rooms: Vec<[String; 8]> = state
            .rooms
            .iter()
            .map(|room| {
                [
                    room.id.to_string(),
                    room.kind.clone(),
                    room.capacity.to_string(),
                    room.seated.to_string(),
                    if room.joinable { "1" } else { "0" }.to_string(),
                    room.udp.to_string(),
                    label_json(&room.label),
                    room.metadata.clone(),
                ]
            })
            .collect();
        let seated: Vec<[String; 2]> = state
            .seated
            .iter()
            .map(|(player, room)| [player.to_string(), room.to_string()])
            .collect();
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.heartbeat.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(&self.node)
            .arg(millis(lease))
            .arg(info)
            .arg(kinds)
            .arg(state.players)
            .arg(if state.draining { "1" } else { "0" })
            .arg(state.capacity)
            .arg(json(&rooms))
            .arg(json(&seated))
            .arg(state.range);
        let existed: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(existed == 1)
    }

    /// One matchmake for `player` (see [`Want`]); a seat found is reserved for
    /// `reservation` unless the player takes it.
    pub async fn matchmake(
        &self,
        player: u64,
        want: Want<'_>,
        reservation: Duration,
    ) -> Result<Outcome, DirectoryError> {
        self.matchmake_filtered(player, want, &LabelFilter::default(), reservation)
            .await
    }

    /// [`matchmake`](Self::matchmake), where join-or-create offers only rooms whose label
    /// `filter` matches (a new room is made when none does).
    pub async fn matchmake_filtered(
        &self,
        player: u64,
        want: Want<'_>,
        filter: &LabelFilter,
        reservation: Duration,
    ) -> Result<Outcome, DirectoryError> {
        let (mode, target) = match want {
            Want::Lookup => ("lookup", String::new()),
            Want::Join(room) => ("join", room.to_string()),
            Want::JoinOrCreate(kind) => ("join_or_create", kind.to_string()),
            Want::Create(kind) => ("create", kind.to_string()),
        };
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.matchmake.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(player.to_string())
            .arg(mode)
            .arg(target)
            .arg(millis(reservation))
            .arg(filter_json(filter));
        let answer: Vec<String> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        let status = answer.first().map(String::as_str).unwrap_or_default();
        let field = |index: usize| answer.get(index).map(String::as_str).unwrap_or_default();
        let info = || -> Result<NodeInfo, DirectoryError> {
            serde_json::from_str(field(5)).map_err(|error| {
                DirectoryError::Corrupt(format!("node {:?}'s info: {error}", field(2)))
            })
        };
        let seat = || -> Result<Seat, DirectoryError> {
            Ok(Seat {
                room: field(1)
                    .parse()
                    .map_err(|_| DirectoryError::Corrupt(format!("room id {:?}", field(1))))?,
                kind: field(4).to_string(),
                node: field(2).to_string(),
                udp: field(3)
                    .parse()
                    .map_err(|_| DirectoryError::Corrupt(format!("udp address {:?}", field(3))))?,
                info: info()?,
            })
        };
        Ok(match status {
            "held" => Outcome::Held(seat()?),
            "reserved" => Outcome::Reserved(seat()?),
            "create" => Outcome::Create {
                node: field(2).to_string(),
                info: info()?,
            },
            "none" => Outcome::Nothing,
            "no_room" => Outcome::NoRoom,
            "closed" => Outcome::Closed,
            "full" => Outcome::Full,
            "no_node" => Outcome::NoNode,
            other => return Err(DirectoryError::Corrupt(format!("matchmake said {other:?}"))),
        })
    }

    /// Lists a room this node just created, under `lease`; with `reservation`, its first
    /// seat promised to that player; with `request`, the create request it answers.
    pub async fn room_created(
        &self,
        room: &RoomState,
        lease: Duration,
        reservation: Option<(u64, Duration)>,
        request: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let (player, ttl) = reservation.map_or((String::new(), 0), |(player, ttl)| {
            (player.to_string(), millis(ttl))
        });
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.created.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(&self.node)
            .arg(room.id.to_string())
            .arg(&room.kind)
            .arg(room.capacity)
            .arg(room.udp.to_string())
            .arg(millis(lease))
            .arg(player)
            .arg(ttl)
            .arg(request.unwrap_or_default())
            .arg(label_json(&room.label))
            .arg(&room.metadata);
        let _: String = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(())
    }

    /// A player took (`seated`) or left their seat in `room` on this node, which now seats
    /// `in_room` players there and `on_node` in all.
    pub async fn seat_changed(
        &self,
        room: u64,
        player: u64,
        seated: bool,
        in_room: u16,
        on_node: u32,
        lease: Duration,
    ) -> Result<(), DirectoryError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.seat.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(&self.node)
            .arg(room.to_string())
            .arg(player.to_string())
            .arg(in_room)
            .arg(on_node)
            .arg(millis(lease))
            .arg(if seated { "1" } else { "0" });
        let _: String = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(())
    }

    /// A room of this node was disposed of.
    pub async fn room_closed(&self, room: u64, kind: &str) -> Result<(), DirectoryError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.room_gone.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(&self.node)
            .arg(room.to_string())
            .arg(kind);
        let _: String = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(())
    }

    /// Takes this node and its rooms out of the directory (a clean stop).
    pub async fn leave(&self, range: u32) -> Result<(), DirectoryError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.leave.prepare_invoke();
        invocation.arg(&self.prefix).arg(&self.node).arg(range);
        let _: String = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(())
    }

    /// Every live node with its rooms.
    pub async fn nodes(&self) -> Result<Vec<NodeListing>, DirectoryError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.listing.prepare_invoke();
        invocation.arg(&self.prefix);
        let json: String = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_listing(&json)
    }

    /// Every room of every live node.
    pub async fn rooms(&self) -> Result<Vec<RoomListing>, DirectoryError> {
        let mut rooms: Vec<RoomListing> = self
            .nodes()
            .await?
            .into_iter()
            .flat_map(|node| node.rooms)
            .collect();
        rooms.sort_by_key(|room| room.id);
        Ok(rooms)
    }

    fn channel(&self, node: &str) -> String {
        format!("{}rpc:{node}", self.prefix)
    }

    /// Sends `message` to node `node`; the number of subscribers that got it (0: the node
    /// is not listening).
    pub async fn send(&self, node: &str, message: &str) -> Result<u32, DirectoryError> {
        let mut connection = self.connection.clone();
        let channel = self.channel(node);
        self.bounded(connection.publish(channel, message)).await
    }

    /// Takes create request `request` for this node: false when its sender cancelled it
    /// first (or another node took it), and then the room must not be created.
    pub async fn claim_create(&self, request: &str) -> Result<bool, DirectoryError> {
        let mut connection = self.connection.clone();
        let key = format!("{}create:{request}", self.prefix);
        let set: Option<String> = self
            .bounded(
                redis::cmd("SET")
                    .arg(key)
                    .arg(format!("claimed:{}", self.node))
                    .arg("NX")
                    .arg("PX")
                    .arg(60_000)
                    .query_async(&mut connection),
            )
            .await?;
        Ok(set.is_some())
    }

    /// Cancels create request `request` unless its node took it first; then says how far
    /// it got.
    pub async fn cancel_create(&self, request: &str) -> Result<CancelOutcome, DirectoryError> {
        let mut connection = self.connection.clone();
        let key = format!("{}create:{request}", self.prefix);
        let set: Option<String> = self
            .bounded(
                redis::cmd("SET")
                    .arg(&key)
                    .arg("cancelled")
                    .arg("NX")
                    .arg("PX")
                    .arg(60_000)
                    .query_async(&mut connection),
            )
            .await?;
        if set.is_some() {
            return Ok(CancelOutcome::Cancelled);
        }
        let fate: Option<String> = self.bounded(connection.get(&key)).await?;
        Ok(
            match fate
                .as_deref()
                .and_then(|fate| fate.strip_prefix("room:"))
                .and_then(|room| room.parse().ok())
            {
                Some(room) => CancelOutcome::Created(room),
                None => CancelOutcome::InProgress,
            },
        )
    }

    /// Messages sent to this node, for as long as the receiver is kept: the subscription
    /// is made again whenever the connection to Redis is lost.
    pub fn subscribe(&self) -> mpsc::Receiver<String> {
        let (sender, receiver) = mpsc::channel(1024);
        let client = self.client.clone();
        let channel = self.channel(&self.node);
        let timeout = self.timeout;
        tokio::spawn(async move {
            while !sender.is_closed() {
                let subscribed = async {
                    let mut pubsub = client.get_async_pubsub().await?;
                    pubsub.subscribe(&channel).await?;
                    Ok::<_, redis::RedisError>(pubsub)
                };
                let pubsub = match tokio::time::timeout(timeout, subscribed).await {
                    Ok(Ok(pubsub)) => pubsub,
                    _ => {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        continue;
                    }
                };
                let mut messages = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        message = messages.next() => {
                            let Some(message) = message else { break };
                            let Ok(payload) = message.get_payload::<String>() else { continue };
                            if sender.send(payload).await.is_err() {
                                return;
                            }
                        }
                        () = sender.closed() => return,
                    }
                }
            }
        });
        receiver
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Lists of strings as JSON (cannot fail).
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".into())
}

/// What `listing.lua` returns: strings throughout (see `lua/common.lua`); an empty Lua
/// table is `{}` in JSON.
#[derive(Deserialize)]
struct RawNode {
    id: String,
    info: String,
    players: String,
    draining: String,
    capacity: String,
    reserved: String,
    ttl: String,
    #[serde(default)]
    rooms: serde_json::Value,
}

#[derive(Deserialize)]
struct RawRoom {
    id: String,
    kind: String,
    seated: String,
    reserved: String,
    capacity: String,
    joinable: String,
    #[serde(default)]
    label: String,
    #[serde(default)]
    metadata: String,
}

fn parse_listing(json: &str) -> Result<Vec<NodeListing>, DirectoryError> {
    let corrupt = |what: &str| DirectoryError::Corrupt(what.to_string());
    let raw: serde_json::Value =
        serde_json::from_str(json).map_err(|error| corrupt(&error.to_string()))?;
    let nodes: Vec<RawNode> = match raw {
        serde_json::Value::Array(_) => {
            serde_json::from_value(raw).map_err(|error| corrupt(&error.to_string()))?
        }
        _ => Vec::new(),
    };
    let number = |text: &str| -> Result<u64, DirectoryError> {
        text.parse()
            .map_err(|_| corrupt(&format!("number {text:?}")))
    };
    let mut listings = Vec::with_capacity(nodes.len());
    for node in nodes {
        let info: NodeInfo = serde_json::from_str(&node.info)
            .map_err(|error| corrupt(&format!("node {:?}'s info: {error}", node.id)))?;
        let rooms: Vec<RawRoom> = match node.rooms {
            serde_json::Value::Array(_) => {
                serde_json::from_value(node.rooms).map_err(|error| corrupt(&error.to_string()))?
            }
            _ => Vec::new(),
        };
        let mut listed = Vec::with_capacity(rooms.len());
        for room in rooms {
            listed.push(RoomListing {
                id: number(&room.id)?,
                kind: room.kind,
                node: node.id.clone(),
                players: u16::try_from(number(&room.seated)?).unwrap_or(u16::MAX),
                reserved: u16::try_from(number(&room.reserved)?).unwrap_or(u16::MAX),
                capacity: u16::try_from(number(&room.capacity)?).unwrap_or(u16::MAX),
                joinable: room.joinable == "1",
                label: parse_label(&room.label)?,
                metadata: room.metadata,
            });
        }
        listed.sort_by_key(|room| room.id);
        listings.push(NodeListing {
            id: node.id,
            info,
            players: u32::try_from(number(&node.players)?).unwrap_or(u32::MAX),
            reserved: u32::try_from(number(&node.reserved)?).unwrap_or(u32::MAX),
            capacity: u32::try_from(number(&node.capacity)?).unwrap_or(u32::MAX),
            draining: node.draining == "1",
            lease_left_ms: node.ttl.parse().unwrap_or(-1),
            rooms: listed,
        });
    }
    listings.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(listings)
}
