//! Operator access: the console's [`AdminOps`] over the running server, and the same
//! operations as JSON under `/api/admin/*` behind the bearer token.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::App;
use super::api::{ApiError, RoomListing, parse_player};
use crate::console::{AdminOps, PlayerSummary, PlayerTransport, StatsSnapshot};
use crate::credentials::{Refused, Via};
use crate::replicate::ReplicationProfile;
use crate::room::PlayerId;
use crate::shard::{RoomId, RoomInfo};
use crate::worker::Control;
use tokio::sync::oneshot;

/// Totals of packets in, packets out, bytes in, bytes out, over UDP and WebSocket.
pub(super) fn traffic_totals(app: &App) -> [u64; 4] {
    let ws = app.ws.stats();
    let mut totals = [
        ws.messages_received,
        ws.messages_sent,
        ws.bytes_received,
        ws.bytes_sent,
    ];
    for shard in &app.shards {
        let udp = shard.view.read().udp;
        totals[0] += udp.datagrams_received;
        totals[1] += udp.datagrams_sent;
        totals[2] += udp.bytes_received;
        totals[3] += udp.bytes_sent;
    }
    totals
}

/// The figures `stats` shows, from the workers' views.
pub(super) fn stats(app: &App) -> StatsSnapshot {
    let mut snapshot = StatsSnapshot::default();
    let mut merged: Option<hdrhistogram::Histogram<u64>> = None;
    for shard in &app.shards {
        let view = shard.view.read();
        snapshot.rooms += view.rooms.len() as u64;
        for player in &view.players {
            match player.transport {
                PlayerTransport::Udp => snapshot.players_udp += 1,
                PlayerTransport::Wt => snapshot.players_webtransport += 1,
                PlayerTransport::Ws => snapshot.players_ws += 1,
            }
        }
        for times in view.tick_times.values() {
            match &mut merged {
                Some(histogram) => {
                    let _ = histogram.add(times.histogram());
                }
                None => merged = Some(times.histogram().clone()),
            }
        }
    }
    if let Some(histogram) = merged.filter(|histogram| !histogram.is_empty()) {
        let ms = |micros: u64| micros as f64 / 1000.0;
        snapshot.tick_p50_ms = ms(histogram.value_at_quantile(0.5));
        snapshot.tick_p99_ms = ms(histogram.value_at_quantile(0.99));
        snapshot.tick_max_ms = ms(histogram.max());
    }
    let ws = app.ws.stats();
    snapshot.queue_drops = ws.sequenced_replaced + ws.unreliable_dropped + ws.closed_slow_client;
    let rates = *app
        .rates
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    [
        snapshot.packets_in_per_second,
        snapshot.packets_out_per_second,
        snapshot.bytes_in_per_second,
        snapshot.bytes_out_per_second,
    ] = rates.per_second;
    snapshot
}

fn players(app: &App) -> Vec<PlayerSummary> {
    let mut players: Vec<PlayerSummary> = app
        .shards
        .iter()
        .flat_map(|shard| shard.view.read().players)
        .collect();
    players.sort_by_key(|player| player.id);
    players
}

fn rooms(app: &App) -> Vec<RoomInfo> {
    let mut rooms: Vec<RoomInfo> = app
        .shards
        .iter()
        .flat_map(|shard| shard.view.read().rooms)
        .collect();
    rooms.sort_by_key(|room| room.id);
    rooms
}

fn room_players(app: &App, room: u64) -> Option<Vec<PlayerSummary>> {
    let exists = app
        .shards
        .iter()
        .any(|shard| shard.view.read().rooms.iter().any(|info| info.id.0 == room));
    exists.then(|| {
        players(app)
            .into_iter()
            .filter(|player| player.room == Some(room))
            .collect()
    })
}

/// Why an operation on the workers did not happen.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NotDone {
    /// No connected player with that id.
    NoSuchPlayer,
    /// A worker's control queue is full (it is far behind); try again.
    Busy,
}

fn kick(app: &App, player: PlayerId, reason: &str) -> Result<(), NotDone> {
    let shard = app
        .shards
        .iter()
        .find(|shard| shard.view.read().players.iter().any(|p| p.id == player))
        .ok_or(NotDone::NoSuchPlayer)?;
    shard
        .control
        .try_send(Control::Kick {
            player,
            reason: reason.to_string(),
        })
        .map_err(|_| NotDone::Busy)
}

/// Queues the announcement on every worker; `Busy` if any queue was full.
/// Has every room on this node announce `text` (its shards' control queues).
pub(super) fn say(app: &App, text: &str) -> Result<(), NotDone> {
    let mut all = Ok(());
    for shard in &app.shards {
        if shard
            .control
            .try_send(Control::Say(text.to_string()))
            .is_err()
        {
            all = Err(NotDone::Busy);
        }
    }
    all
}

/// The console's view of the server.
pub(super) struct Ops(pub(super) Arc<App>);

impl AdminOps for Ops {
    fn stats(&self) -> StatsSnapshot {
        stats(&self.0)
    }

    fn rooms(&self) -> Vec<RoomInfo> {
        rooms(&self.0)
    }

    fn room_players(&self, room: u64) -> Option<Vec<PlayerSummary>> {
        room_players(&self.0, room)
    }

    fn players(&self) -> Vec<PlayerSummary> {
        players(&self.0)
    }

    fn kick(&self, player: PlayerId) -> Result<(), String> {
        kick(&self.0, player, "kicked by an operator").map_err(|not_done| match not_done {
            NotDone::NoSuchPlayer => format!("no player {}", player.0),
            NotDone::Busy => BUSY.to_string(),
        })
    }

    fn say(&self, text: &str) -> Result<(), String> {
        say(&self.0, text).map_err(|_| BUSY.to_string())?;
        // The console answers at once; the other nodes get it in the background (a
        // failure is logged as the directory's unavailability).
        if let Some(node) = self.0.cluster.clone() {
            let text = text.to_string();
            tokio::spawn(async move {
                let _ = super::cluster::say_everywhere(&node, &text).await;
            });
        }
        Ok(())
    }

    fn drain(&self) {
        self.0.drain();
    }

    fn shutdown(&self) {
        self.0.shutdown();
    }
}

/// `/api/admin/*`, every route behind the bearer token.
pub(super) fn router(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route("/api/admin/stats", get(admin_stats))
        .route("/api/admin/rooms", get(admin_rooms))
        .route("/api/admin/rooms/{id}", get(admin_room))
        .route("/api/admin/rooms/{id}/lock", post(admin_lock))
        .route("/api/admin/rooms/{id}/unlock", post(admin_unlock))
        .route("/api/admin/rooms/{id}/dispose", post(admin_dispose))
        .route("/api/admin/players", get(admin_players))
        .route("/api/admin/replication", get(admin_replication))
        .route("/api/admin/kick/{player}", post(admin_kick))
        .route("/api/admin/say", post(admin_say))
        .route("/api/admin/drain", post(admin_drain))
        .route("/api/admin/nodes", get(admin_nodes))
        .route("/api/admin/shutdown", post(admin_shutdown))
        .route_layer(middleware::from_fn_with_state(app, require_token))
}

/// Passes only requests bearing the admin token ([`authorize`]).
async fn require_token(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    match authorize(&app, &request, Via::Api) {
        Ok(()) => next.run(request).await,
        Err(refused) => *refused,
    }
}

/// Whether `request` bears the bearer token `via` asks for; else the answer to give. A
/// source (its address, or behind a trusted proxy the client the proxy names) that
/// presented too many wrong ones is answered 429 for a while, whatever it presents. A
/// request with no token is no guess: 401, not counted.
pub(super) fn authorize(app: &App, request: &Request, via: Via) -> Result<(), Box<Response>> {
    let unauthorized = || {
        let what = match via {
            Via::Metrics => "a valid metrics bearer token is required",
            Via::Console | Via::Api => "a valid admin bearer token is required",
        };
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(json!({ "error": what })),
        )
            .into_response()
    };
    let headers = request.headers();
    let Some(presented) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return Err(Box::new(unauthorized()));
    };
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |ConnectInfo(peer)| {
            peer.ip()
        });
    let forwarded_for = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok());
    let client = app.credentials.client(peer, forwarded_for);
    match app
        .credentials
        .check(Instant::now(), client, via, presented.as_bytes())
    {
        Ok(()) => Ok(()),
        Err(Refused::Wrong) => Err(Box::new(unauthorized())),
        Err(refused @ Refused::LockedOut { .. }) => Err(Box::new(
            (
                StatusCode::TOO_MANY_REQUESTS,
                [(
                    header::RETRY_AFTER,
                    refused.retry_after_secs().unwrap_or(1).to_string(),
                )],
                axum::Json(json!({
                    "error": "too many wrong admin tokens from this address; try again later"
                })),
            )
                .into_response(),
        )),
    }
}

#[derive(Serialize)]
struct PlayerJson {
    id: u64,
    name: String,
    transport: &'static str,
    room: Option<u64>,
    /// Smoothed round-trip time, ms; `null` where the transport does not measure it.
    rtt_ms: Option<f64>,
    /// Fraction of recent packets lost (0..=1); `null` likewise.
    loss: Option<f32>,
}

fn player_json(players: Vec<PlayerSummary>) -> Vec<PlayerJson> {
    players
        .into_iter()
        .map(|player| PlayerJson {
            id: player.id.0,
            name: player.name,
            transport: player.transport.name(),
            room: player.room,
            rtt_ms: player.link.map(|link| link.rtt.as_secs_f64() * 1000.0),
            loss: player.link.map(|link| link.loss),
        })
        .collect()
}

async fn admin_stats(State(app): State<Arc<App>>) -> Response {
    let stats = stats(&app);
    axum::Json(json!({
        "phase": app.phase().name(),
        "players": { "udp": stats.players_udp, "ws": stats.players_ws, "webtransport": stats.players_webtransport },
        "rooms": stats.rooms,
        "packets_in_per_second": stats.packets_in_per_second,
        "packets_out_per_second": stats.packets_out_per_second,
        "bytes_in_per_second": stats.bytes_in_per_second,
        "bytes_out_per_second": stats.bytes_out_per_second,
        "tick_p50_ms": stats.tick_p50_ms,
        "tick_p99_ms": stats.tick_p99_ms,
        "tick_max_ms": stats.tick_max_ms,
        "queue_drops": stats.queue_drops,
    }))
    .into_response()
}

/// A room as the admin API lists it: the public listing, plus how long ticks take.
#[derive(Serialize)]
struct AdminRoomJson {
    #[serde(flatten)]
    listing: RoomListing,
    /// The shard that hosts it.
    shard: usize,
    /// How long its own recent ticks took, ms (the newest 128, each the mean of a batch
    /// of ticks run together); `null` before the first.
    tick_p50_ms: Option<f64>,
    tick_p99_ms: Option<f64>,
    /// Its messages since it was created (counters: a rate is two readings apart), as of
    /// the shard's last view.
    messages_in: u64,
    bytes_in: u64,
    messages_out: u64,
    bytes_out: u64,
}

async fn admin_rooms(State(app): State<Arc<App>>) -> Response {
    let mut listing = Vec::new();
    let now = std::time::Instant::now();
    let matchmaker = app.matchmaker();
    for (index, shard) in app.shards.iter().enumerate() {
        let view = shard.view.read();
        for room in view.rooms {
            let reserved = matchmaker.reserved_in(room.id, now);
            let ms = |quantile: f64| {
                let tick = room.recent_ticks.quantile(quantile)?;
                Some(tick.as_secs_f64() * 1000.0)
            };
            let players = u16::try_from(room.players).unwrap_or(u16::MAX);
            listing.push(AdminRoomJson {
                shard: index,
                tick_p50_ms: ms(0.5),
                tick_p99_ms: ms(0.99),
                messages_in: room.traffic.messages_in,
                bytes_in: room.traffic.bytes_in,
                messages_out: room.traffic.messages_out,
                bytes_out: room.traffic.bytes_out,
                listing: RoomListing::new(
                    room.id,
                    room.kind,
                    (players, reserved),
                    room.capacity,
                    &room.listing,
                ),
            });
        }
    }
    drop(matchmaker);
    listing.sort_by_key(|room| room.listing.id);
    axum::Json(listing).into_response()
}

async fn admin_room(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return ApiError::new(StatusCode::BAD_REQUEST, format!("bad room id {id:?}"))
            .into_response();
    };
    match room_players(&app, id) {
        Some(players) => {
            axum::Json(json!({ "id": id, "players": player_json(players) })).into_response()
        }
        None => ApiError::new(StatusCode::NOT_FOUND, format!("no room {id}")).into_response(),
    }
}

/// What an operator asks of one room.
enum RoomOp {
    Lock(bool),
    Dispose,
}

/// Carries out `op` on the room's shard (the matchmaker knows which) and waits for the
/// shard's answer: 200 with the room's id, 404 if no shard hosts it.
async fn room_op(app: &App, id: &str, op: RoomOp) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return ApiError::new(StatusCode::BAD_REQUEST, format!("bad room id {id:?}"))
            .into_response();
    };
    let room = RoomId(id);
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, format!("no room {id}"));
    let shard = app.matchmaker().shard_of(room);
    let Some(link) = shard.and_then(|shard| app.shards.get(shard)) else {
        return not_found().into_response();
    };
    let (done, answer) = oneshot::channel();
    let (control, reply) = match op {
        RoomOp::Lock(locked) => (
            Control::Lock { room, locked, done },
            json!({ "id": id, "locked": locked }),
        ),
        RoomOp::Dispose => (
            Control::Dispose { room, done },
            json!({ "id": id, "disposed": true }),
        ),
    };
    if link.control.try_send(control).is_err() {
        return busy().into_response();
    }
    match answer.await {
        Ok(true) => axum::Json(reply).into_response(),
        Ok(false) => not_found().into_response(),
        Err(_) => busy().into_response(),
    }
}

async fn admin_lock(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    room_op(&app, &id, RoomOp::Lock(true)).await
}

async fn admin_unlock(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    room_op(&app, &id, RoomOp::Lock(false)).await
}

async fn admin_dispose(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    room_op(&app, &id, RoomOp::Dispose).await
}

/// What rooms' replicated worlds have sent since the server started, per room kind: bytes
/// by entity kind and field (estimated from one send in eight), largest first, so a game's
/// developer sees what its state costs. The page turns two readings into bytes per second.
async fn admin_replication(State(app): State<Arc<App>>) -> Response {
    let mut kinds: HashMap<String, ReplicationProfile> = HashMap::new();
    for shard in &app.shards {
        for (kind, profile) in &shard.view.read().replication {
            kinds.entry(kind.clone()).or_default().merge(profile);
        }
    }
    let mut kinds: Vec<_> = kinds.into_iter().collect();
    kinds.sort_by(|a, b| a.0.cmp(&b.0));
    let kinds: Vec<_> = kinds
        .iter()
        .map(|(kind, profile)| {
            let mut rows: Vec<_> = super::metrics::replication_rows(profile)
                .map(|(entity, field, bytes)| json!({ "entity": entity, "field": field, "bytes": bytes.round() }))
                .collect();
            rows.sort_by(|a, b| b["bytes"].as_f64().partial_cmp(&a["bytes"].as_f64()).unwrap_or(std::cmp::Ordering::Equal));
            json!({
                "kind": kind,
                "snapshots": profile.snapshots,
                "bytes": profile.total_bytes().round(),
                "rows": rows,
            })
        })
        .collect();
    axum::Json(json!({ "kinds": kinds })).into_response()
}

async fn admin_players(State(app): State<Arc<App>>) -> Response {
    axum::Json(player_json(players(&app))).into_response()
}

async fn admin_kick(State(app): State<Arc<App>>, Path(player): Path<String>) -> Response {
    let player = match parse_player(&player) {
        Ok(player) => player,
        Err(error) => return error.into_response(),
    };
    match kick(&app, player, "kicked by an operator") {
        Ok(()) => axum::Json(json!({ "kicked": player.0 })).into_response(),
        Err(NotDone::NoSuchPlayer) => {
            ApiError::new(StatusCode::NOT_FOUND, format!("no player {}", player.0)).into_response()
        }
        Err(NotDone::Busy) => busy().into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SayRequest {
    text: String,
}

async fn admin_say(
    State(app): State<Arc<App>>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return ApiError::from(rejection).into_response(),
    };
    match serde_json::from_slice::<SayRequest>(&body) {
        Ok(request) if !request.text.trim().is_empty() => {
            if say(&app, &request.text).is_err() {
                return busy().into_response();
            }
            // In a cluster every other node's rooms hear it too, over the nodes' channels.
            let nodes = match &app.cluster {
                Some(node) => match super::cluster::say_everywhere(node, &request.text).await {
                    Ok(nodes) => nodes,
                    Err(error) => return error.into_response(),
                },
                None => 1,
            };
            axum::Json(json!({ "sent": true, "nodes": nodes })).into_response()
        }
        Ok(_) => ApiError::new(StatusCode::BAD_REQUEST, "text is empty").into_response(),
        Err(error) => {
            ApiError::new(StatusCode::BAD_REQUEST, format!("bad request: {error}")).into_response()
        }
    }
}

const BUSY: &str = "a shard's control queue is full; try again";

fn busy() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, BUSY)
}

async fn admin_drain(State(app): State<Arc<App>>) -> Response {
    app.drain();
    // In a cluster, answered once the directory knows: no node sends players here after.
    if let Some(node) = &app.cluster {
        node.renewed().await;
    }
    axum::Json(json!({ "phase": app.phase().name() })).into_response()
}

/// `GET /api/admin/nodes`: the cluster's live nodes with their load and rooms (this
/// server alone, as the one node `local`, when it is not in a cluster).
async fn admin_nodes(State(app): State<Arc<App>>) -> Response {
    let Some(node) = &app.cluster else {
        let rooms = rooms(&app);
        let players: usize = rooms.iter().map(|room| room.players).sum();
        return axum::Json(json!([{
            "id": "local",
            "players": players,
            "rooms": rooms.len(),
            "draining": app.phase() != super::Phase::Running,
        }]))
        .into_response();
    };
    match node.directory().nodes().await {
        Ok(nodes) => axum::Json(nodes).into_response(),
        Err(error) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cluster directory unavailable: {error}"),
        )
        .into_response(),
    }
}

async fn admin_shutdown(State(app): State<Arc<App>>) -> Response {
    app.shutdown();
    axum::Json(json!({ "phase": app.phase().name() })).into_response()
}
