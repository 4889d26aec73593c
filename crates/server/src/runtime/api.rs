//! The HTTP API: matchmaking, room listing and health on the public port; `/metrics` on
//! the operator's.
//!
//! Errors are JSON `{"error": "..."}` with a status that says whose fault it is: 400 for a
//! malformed request, 401 for an identity that does not verify, 404 for a room that does
//! not exist, 409 for a full room, 429 for too many requests, 503 while draining.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::json;
use tickwire_proto::matchmake::{Endpoints, MatchmakeAnswer, MatchmakeRequest, WtEndpointInfo};
use tickwire_proto::token::TokenIssuer;
use tokio::sync::{oneshot, watch};

use super::identity::{Identity, IdentityError};
use super::{App, Phase};
use crate::matchmaker::{MatchError, MatchRequest, Placement};
use crate::room::PlayerId;
use crate::shard::CreateError;
use crate::shard::RoomId;
use crate::worker::{Control, SeatTicket, unix_now};
use tickwire_room::listing::{LabelFilter, Listing, ListingError, RoomOptions};

/// Largest request body accepted: a matchmaking request is well under a kilobyte.
const MAX_BODY_BYTES: usize = 16 * 1024;

/// The public routes. The operator's are not among them: they have a listener of their
/// own ([`operator_router`]), and the public port answers 404 for them.
pub(super) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/api/matchmake", post(matchmake))
        .route("/api/rooms", get(rooms))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(super::admin_page::moved())
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}

/// What the operator's own listener (`admin.listen`) serves: `/metrics`, `/api/admin/*`,
/// the admin page, and the health probes, answered there even when the public port is out of file
/// descriptors.
pub(super) fn operator_router(app: Arc<App>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .merge(super::admin::router(app.clone()))
        .merge(super::admin_page::router())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}

/// An error response.
pub(super) struct ApiError(StatusCode, String);

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(status, message.into())
    }

    /// What the client is told.
    pub(super) fn message(&self) -> &str {
        &self.1
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        Self(rejection.status(), rejection.body_text())
    }
}

impl From<IdentityError> for ApiError {
    fn from(error: IdentityError) -> Self {
        let status = match error {
            IdentityError::BadName => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNAUTHORIZED,
        };
        Self(status, error.to_string())
    }
}

impl From<MatchError> for ApiError {
    fn from(error: MatchError) -> Self {
        let status = match error {
            MatchError::Draining => StatusCode::SERVICE_UNAVAILABLE,
            MatchError::NoSuchRoom(_) | MatchError::UnknownKind(_) => StatusCode::NOT_FOUND,
            MatchError::RoomFull(_) | MatchError::RoomLocked(_) | MatchError::AlreadyPlaced(_) => {
                StatusCode::CONFLICT
            }
        };
        Self(status, error.to_string())
    }
}

async fn matchmake(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::Json<MatchmakeAnswer>, ApiError> {
    let ip = peer.ip().to_canonical();
    if !app.config.limits.exempt.contains(&ip) {
        let mut limiter = app
            .matchmake_limiter
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let admitted = limiter.try_open(Instant::now(), ip).is_ok();
        limiter.closed(ip);
        if !admitted {
            app.metrics.matchmake_rate_limited();
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too many matchmaking requests from this address",
            ));
        }
    }
    let body = body?;
    let request: MatchmakeRequest = serde_json::from_slice(&body)
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, format!("bad request: {error}")))?;
    let options = RoomOptions::new(request.options)
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, format!("options: {error}")))?;
    let filter: LabelFilter = request
        .filter
        .as_deref()
        .unwrap_or_default()
        .parse()
        .map_err(|error: ListingError| ApiError::new(StatusCode::BAD_REQUEST, error.to_string()))?;
    if !filter.is_empty() && (request.create || request.kind.is_none()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "\"filter\" goes with a room kind to join or create",
        ));
    }
    let wanted = match (request.kind, request.room) {
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "give either kind or room, not both",
            ));
        }
        (None, _) if request.create => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "\"create\" needs a room kind (\"kind\")",
            ));
        }
        (Some(kind), None) if request.create => MatchRequest::Create { kind },
        (Some(kind), None) => MatchRequest::JoinOrCreate { kind, filter },
        (None, Some(room)) => MatchRequest::Join { room: RoomId(room) },
        (None, None) if request.session.is_some() => MatchRequest::JoinOrCreate {
            kind: String::new(),
            filter,
        },
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "give a room kind (\"kind\") or a room id (\"room\")",
            ));
        }
    };
    let now = unix_now();
    let (identity, session) = app.identities.resolve(
        request.session.as_deref(),
        request.identity.as_ref(),
        request.name.as_deref(),
        now,
    )?;
    let seat = match &app.cluster {
        Some(node) => super::cluster::place(&app, node, &identity, &wanted, &options).await?,
        None => place(&app, &identity, &wanted, &options).await?,
    };
    app.metrics.matchmade();

    let ticket = SeatTicket {
        room: seat.room,
        name: identity.name.clone(),
    }
    .encode()
    .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "name too long"))?;
    let (udp, endpoints) = match seat.at {
        SeatAt::Shard(shard) => (
            app.shards[shard].udp_public,
            local_endpoints(&app, &headers, shard),
        ),
        // A room on another node of the cluster: its addresses as it listed them.
        SeatAt::Node { udp, info } => (
            udp,
            Endpoints {
                udp,
                wt: info.wt_of(udp),
                ws: info.ws,
                wss: info.wss,
            },
        ),
    };
    let issuer = TokenIssuer {
        protocol_id: app.config.udp.protocol_id,
        key: app.key.clone(),
        // The room's shard's UDP address only: a UDP client tries the token's addresses in
        // order, and a TCP port among them cost it a handshake timeout. The WebSocket and
        // WebTransport endpoints are in the answer's `endpoints`.
        server_addresses: vec![udp],
        validity_seconds: app.config.udp.token_validity_secs,
        timeout_seconds: app.config.udp.handshake_timeout_secs,
    };
    let token = issuer
        .issue(&mut rand::rng(), now, identity.player.0, &ticket)
        .and_then(|token| token.to_bytes())
        .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?;
    Ok(axum::Json(MatchmakeAnswer {
        player_id: identity.player.0,
        session,
        name: identity.name,
        room: seat.room.0,
        kind: seat.kind,
        reconnect: seat.reconnect,
        token: STANDARD.encode(token.as_slice()),
        expires_at: now + app.config.udp.token_validity_secs,
        endpoints,
    }))
}

/// This server's endpoints for a room on `shard`: the name the client used to reach us (so
/// a browser's page and socket agree), with each listener's own port (the request may have
/// come through either), and the shard's own UDP and WebTransport ports.
fn local_endpoints(app: &App, headers: &HeaderMap, shard: usize) -> Endpoints {
    let link = &app.shards[shard];
    let udp = link.udp_public;
    let host = request_host(headers).unwrap_or_else(|| app.http_public.to_string());
    let host_name = host_without_port(&host);
    let mut ws = format!("ws://{host_name}:{}/ws", app.http_public.port());
    let mut wss = app
        .https_public
        .map(|https| format!("wss://{host_name}:{}/ws", https.port()));
    // Behind a proxy, the address players use for it (validated at start).
    match app.config.http.public_ws_endpoint() {
        Ok(Some((true, url))) => wss = Some(url),
        Ok(Some((false, url))) => ws = url,
        Ok(None) | Err(_) => {}
    }
    let wt = link.wt.as_ref().map(|wt| {
        let cert_sha256 = wt.cert.get();
        // A browser checks a pinned self-signed certificate by its hash, not its name, so
        // any address of the listener will do; an operator's certificate names the host.
        let wt_host = match cert_sha256 {
            Some(_) => udp_host_name(host_name, wt.bound),
            None => host_name.to_string(),
        };
        WtEndpointInfo {
            url: format!("https://{wt_host}:{}/wt", wt.public.port()),
            cert_sha256,
        }
    });
    Endpoints { udp, ws, wss, wt }
}

/// Where a player goes.
pub(super) struct SeatChoice {
    pub(super) room: RoomId,
    pub(super) kind: String,
    pub(super) reconnect: bool,
    pub(super) at: SeatAt,
}

/// The room's host: a shard of this server, or another node of the cluster.
pub(super) enum SeatAt {
    /// This server's shard.
    Shard(usize),
    /// Another node: the UDP address of the room's shard there, and the node's addresses.
    Node {
        udp: SocketAddr,
        info: crate::cluster::NodeInfo,
    },
}

/// The player's held seat, their pending reservation, or a new placement (creating the
/// room on its shard first).
async fn place(
    app: &App,
    identity: &Identity,
    wanted: &MatchRequest,
    options: &RoomOptions,
) -> Result<SeatChoice, ApiError> {
    let placement = {
        let mut matchmaker = app.matchmaker();
        if let Some((room, shard, kind)) = matchmaker.seat_of(identity.player) {
            return Ok(SeatChoice {
                room,
                kind,
                reconnect: true,
                at: SeatAt::Shard(shard),
            });
        }
        if let Some((room, shard, kind)) =
            matchmaker.reservation_of(Instant::now(), identity.player)
        {
            return Ok(SeatChoice {
                room,
                kind,
                reconnect: false,
                at: SeatAt::Shard(shard),
            });
        }
        if matches!(wanted, MatchRequest::JoinOrCreate { kind, .. } if kind.is_empty()) {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "no seat is held for this session; give a room kind or room id",
            ));
        }
        let placement = matchmaker.place(Instant::now(), identity.player, wanted)?;
        // Registered under the matchmaker's lock, so whoever is placed in the room after
        // this finds it and waits for the shard's confirmation.
        let mut creating = app.creating();
        let creation = if placement.create {
            let (confirm, confirmed) = watch::channel(None);
            creating.insert(placement.room, confirmed);
            Creation::Ours(confirm)
        } else {
            creating
                .get(&placement.room)
                .cloned()
                .map_or(Creation::Done, Creation::Theirs)
        };
        (placement, creation)
    };
    let (placement, creation) = placement;
    match creation {
        Creation::Ours(confirm) => {
            // Unlisted however this ends, a dropped request included: its waiters then see
            // the sender gone (a refusal), and the map keeps no stale entry.
            let _listed = Creating {
                app,
                room: placement.room,
            };
            let created = create_room(app, &placement, options).await;
            confirm.send_replace(Some(created.is_ok()));
            if let Err(error) = created {
                app.matchmaker().room_closed(placement.room);
                return Err(error);
            }
        }
        // Placed in a room another request is creating: a token now could reach the shard
        // before the room does (and be refused there: "no seat").
        Creation::Theirs(mut confirmed) => {
            let created = confirmed
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|c| *c);
            if created != Some(true) {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the room could not be created",
                ));
            }
        }
        Creation::Done => {}
    }
    Ok(SeatChoice {
        room: placement.room,
        kind: placement.kind,
        reconnect: false,
        at: SeatAt::Shard(placement.shard),
    })
}

/// A placement's room as the shard sees it: this request creates it, another request is
/// creating it, or it exists.
enum Creation {
    Ours(watch::Sender<Option<bool>>),
    Theirs(watch::Receiver<Option<bool>>),
    Done,
}

/// Removes a room from [`App::creating`] when its creating request ends.
struct Creating<'a> {
    app: &'a App,
    room: RoomId,
}

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.app.creating().remove(&self.room);
    }
}

/// Asks a shard to host a new room with the request's options and waits until it does,
/// so a player who connects at once finds it. A room that refuses its options is a 400
/// with the room's reason.
pub(super) async fn create_room(
    app: &App,
    placement: &Placement,
    options: &RoomOptions,
) -> Result<(), ApiError> {
    let unavailable = || {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the room could not be created",
        )
    };
    let kind = placement.kind.as_str();
    let (Some(link), Some(game)) = (app.shards.get(placement.shard), app.kinds.create(kind)) else {
        return Err(unavailable());
    };
    let capacity = app.kinds.capacity(kind).unwrap_or(1);
    let (created, confirmed) = oneshot::channel();
    link.control
        .send(Control::CreateRoom {
            id: placement.room,
            kind: kind.to_string(),
            room: game,
            capacity,
            options: options.clone(),
            created: Some(created),
        })
        .await
        .map_err(|_| unavailable())?;
    match confirmed.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(CreateError::Refused(refused))) => {
            Err(ApiError::new(StatusCode::BAD_REQUEST, refused.to_string()))
        }
        Ok(Err(_)) | Err(_) => Err(unavailable()),
    }
}

/// The `Host` header if it looks like a host (letters, digits, `.-:[]`), for building the
/// WebSocket URL the page should use.
fn request_host(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let plausible = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b".-:[]".contains(&byte));
    plausible.then(|| host.to_string())
}

/// The name a browser should use to reach a UDP listener bound to `bound` (WebTransport):
/// `host_name`, except `localhost`, which a browser may resolve to `::1` first and, unlike a
/// TCP connection, does not retry on `127.0.0.1` over QUIC. It becomes the loopback address of
/// the listener's family (or the listener's own address, when it is bound to one).
fn udp_host_name(host_name: &str, bound: SocketAddr) -> String {
    let lower = host_name.to_ascii_lowercase();
    if lower != "localhost" && !lower.ends_with(".localhost") {
        return host_name.to_string();
    }
    let ip = match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

fn host_without_port(host: &str) -> &str {
    if let Some(end) = host.strip_prefix('[').and_then(|rest| rest.find(']')) {
        return &host[..end + 2];
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// A room in `/api/rooms` and `/api/admin/rooms`.
#[derive(Debug, Serialize)]
pub(super) struct RoomListing {
    pub(super) id: u64,
    pub(super) kind: String,
    /// Players seated (connected, or holding their seat while they reconnect).
    pub(super) players: u16,
    /// Seats matchmaking promised to players who have not connected yet.
    pub(super) reserved: u16,
    pub(super) capacity: u16,
    /// Matchmaking does not offer it.
    pub(super) locked: bool,
    /// What filters match, by key.
    pub(super) label: BTreeMap<String, String>,
    /// The room's free text.
    pub(super) metadata: String,
    /// The node hosting it, in a cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) node: Option<String>,
}

impl RoomListing {
    pub(super) fn new(
        id: RoomId,
        kind: String,
        (players, reserved): (u16, u16),
        capacity: u16,
        listing: &Listing,
    ) -> Self {
        Self {
            id: id.0,
            kind,
            players,
            reserved,
            capacity,
            locked: listing.locked,
            label: listing
                .label
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            metadata: listing.metadata.clone(),
            node: None,
        }
    }
}

/// `GET /api/rooms[?filter=label.mode = "ranked"]`: every room with seats taken or
/// promised, those whose label matches the filter if one is given; in a cluster, every room
/// of every live node (while the directory is unreachable: 503 with the reason).
async fn rooms(
    State(app): State<Arc<App>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<axum::Json<Vec<RoomListing>>, ApiError> {
    let filter: LabelFilter = query
        .get("filter")
        .map_or("", String::as_str)
        .parse()
        .map_err(|error: ListingError| ApiError::new(StatusCode::BAD_REQUEST, error.to_string()))?;
    if let Some(node) = &app.cluster {
        return cluster_rooms(node, &filter).await.map(axum::Json);
    }
    let rooms = app
        .matchmaker()
        .rooms(Instant::now(), &filter)
        .into_iter()
        .map(|room| {
            RoomListing::new(
                room.id,
                room.kind,
                (room.seated, room.reserved),
                room.capacity,
                &room.listing,
            )
        })
        .collect();
    Ok(axum::Json(rooms))
}

/// The cluster directory's rooms whose label matches `filter`.
async fn cluster_rooms(
    node: &super::cluster::ClusterNode,
    filter: &LabelFilter,
) -> Result<Vec<RoomListing>, ApiError> {
    let rooms = node.directory().rooms().await.map_err(|error| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cluster directory unavailable: {error}"),
        )
    })?;
    Ok(rooms
        .into_iter()
        .filter(|room| filter.matches(&room.label))
        .map(|room| {
            let listing = Listing {
                locked: !room.joinable,
                label: room.label,
                metadata: room.metadata,
            };
            RoomListing {
                node: Some(room.node),
                ..RoomListing::new(
                    RoomId(room.id),
                    room.kind,
                    (room.players, room.reserved),
                    room.capacity,
                    &listing,
                )
            }
        })
        .collect())
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// The phase decides the status, and a shard whose thread stopped makes a running server
/// not ready (its rooms are gone, matchmaking would send players to it); the embedder's
/// degraded parts add a line each.
async fn readyz(State(app): State<Arc<App>>) -> (StatusCode, String) {
    let stopped: Vec<usize> = app
        .shards
        .iter()
        .enumerate()
        .filter(|(_, shard)| !shard.running.get())
        .map(|(index, _)| index)
        .collect();
    let (status, mut body) = readiness(app.phase(), &stopped);
    if let Some(note) = app.cluster.as_ref().and_then(|node| node.degraded()) {
        body.push_str(&note);
        body.push('\n');
    }
    for note in app.extras_readiness.iter().filter_map(|note| note()) {
        body.push_str(&note);
        body.push('\n');
    }
    (status, body)
}

/// The status and first lines of `/readyz` for a server in `phase` whose shards
/// `stopped` have ended.
fn readiness(phase: Phase, stopped: &[usize]) -> (StatusCode, String) {
    let (mut status, phase) = match phase {
        Phase::Running => (StatusCode::OK, "ready"),
        Phase::Draining => (StatusCode::SERVICE_UNAVAILABLE, "draining"),
        Phase::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
    };
    let mut body = String::new();
    if stopped.is_empty() {
        body.push_str(phase);
    } else {
        status = StatusCode::SERVICE_UNAVAILABLE;
        let shards: Vec<String> = stopped.iter().map(usize::to_string).collect();
        body.push_str(&format!("degraded: shard {} stopped", shards.join(", ")));
    }
    body.push('\n');
    (status, body)
}

/// `/metrics`, behind `admin.metrics_token` when one is set.
async fn metrics(State(app): State<Arc<App>>, request: axum::extract::Request) -> Response {
    if !app.credentials.metrics_open()
        && let Err(refused) =
            super::admin::authorize(&app, &request, crate::credentials::Via::Metrics)
    {
        return *refused;
    }
    let mut text = app.metrics.render(&app);
    for write in &app.extras_metrics {
        write(&mut text);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// A player id from a path segment.
pub(super) fn parse_player(text: &str) -> Result<PlayerId, ApiError> {
    text.parse()
        .map(PlayerId)
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, format!("bad player id {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_shard_makes_a_running_server_not_ready() {
        assert_eq!(
            readiness(Phase::Running, &[]),
            (StatusCode::OK, "ready\n".to_string())
        );
        assert_eq!(
            readiness(Phase::Running, &[1]),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "degraded: shard 1 stopped\n".to_string()
            )
        );
        assert_eq!(
            readiness(Phase::Draining, &[]).0,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn hosts_lose_their_port_and_odd_hosts_are_ignored() {
        assert_eq!(host_without_port("example.com:8080"), "example.com");
        assert_eq!(host_without_port("example.com"), "example.com");
        assert_eq!(host_without_port("[::1]:8080"), "[::1]");
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "game.example:8080".parse().unwrap());
        assert_eq!(request_host(&headers).as_deref(), Some("game.example:8080"));
        headers.insert(header::HOST, "evil/path".parse().unwrap());
        assert_eq!(request_host(&headers), None);
    }

    #[test]
    fn localhost_names_an_address_the_webtransport_socket_has() {
        let any_v4: SocketAddr = "0.0.0.0:4433".parse().unwrap();
        let any_v6: SocketAddr = "[::]:4433".parse().unwrap();
        assert_eq!(udp_host_name("localhost", any_v4), "127.0.0.1");
        assert_eq!(udp_host_name("LocalHost", any_v4), "127.0.0.1");
        assert_eq!(udp_host_name("game.localhost", any_v4), "127.0.0.1");
        assert_eq!(udp_host_name("localhost", any_v6), "[::1]");
        let one: SocketAddr = "127.0.0.2:4433".parse().unwrap();
        assert_eq!(udp_host_name("localhost", one), "127.0.0.2");
        // Any other name is the page's, as the browser resolved it.
        assert_eq!(udp_host_name("game.example", any_v4), "game.example");
        assert_eq!(udp_host_name("[::1]", any_v6), "[::1]");
        assert_eq!(udp_host_name("notlocalhost", any_v4), "notlocalhost");
    }
}
