//! The Room API through a whole running server: create options from the matchmaking
//! request, a label that `/api/rooms` and matchmaking filter on, a room that locks itself,
//! a join refusal whose reason reaches the client in the close frame, the operator's lock,
//! unlock and dispose; and rooms that panic in `tick`, `message` and `join`, disposed of
//! alone while the shard's other room goes on; and a placement in a room still being created,
//! answered once the room exists.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::WAIT;
use common::serve::{
    ADMIN_TOKEN, WsClient, WsPlayer, answer_token, http, matchmake, metrics_until, test_config,
    ws_connect, ws_present,
};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tickwire_server::listing::RoomOptions;
use tickwire_server::room::{CreateRefused, JoinRefused, Member, PlayerId, Room, RoomContext};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

/// Takes a `mode` option into its label, refuses players named "cheater", locks when two
/// are seated.
#[derive(Default)]
struct Lobby;

impl Room for Lobby {
    fn create(
        &mut self,
        ctx: &mut RoomContext<'_>,
        options: &RoomOptions,
    ) -> Result<(), CreateRefused> {
        let rounds: u8 = options.parse_or("rounds", 3).map_err(CreateRefused)?;
        ctx.set_label("mode", options.get("mode").unwrap_or("casual"))
            .map_err(|error| CreateRefused(error.to_string()))?;
        ctx.set_metadata(format!("{{\"rounds\":{rounds}}}"))
            .map_err(|error| CreateRefused(error.to_string()))?;
        Ok(())
    }

    fn join(&mut self, ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        if member.name == "cheater" {
            return Err(JoinRefused::game("cheaters may not play here"));
        }
        if ctx.members().len() == 2 {
            ctx.lock();
        }
        Ok(())
    }
}

/// Panics in the hook its `hook` option names, once a player called "trigger" is about.
#[derive(Default)]
struct Fragile {
    hook: String,
    armed: bool,
}

impl Room for Fragile {
    fn create(
        &mut self,
        _: &mut RoomContext<'_>,
        options: &RoomOptions,
    ) -> Result<(), CreateRefused> {
        self.hook = options.get("hook").unwrap_or_default().to_string();
        Ok(())
    }

    fn join(&mut self, _ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        if member.name == "trigger" {
            if self.hook == "join" {
                panic!("join blew up");
            }
            self.armed = true;
        }
        Ok(())
    }

    fn message(&mut self, _: &mut RoomContext<'_>, _: PlayerId, _: u8, _: Bytes) {
        if self.hook == "message" {
            panic!("message blew up");
        }
    }

    fn tick(&mut self, _ctx: &mut RoomContext<'_>) {
        if self.hook == "tick" && self.armed {
            panic!("tick blew up");
        }
    }
}

/// How long [`Slow`]'s `create` holds its shard.
const SLOW_CREATE: Duration = Duration::from_millis(1500);

/// Takes its time to start: its `create` holds the shard's thread for [`SLOW_CREATE`], so
/// a room of this kind stays "being created" long enough for a second placement in it.
#[derive(Default)]
struct Slow;

impl Room for Slow {
    fn create(&mut self, _: &mut RoomContext<'_>, _: &RoomOptions) -> Result<(), CreateRefused> {
        std::thread::sleep(SLOW_CREATE);
        Ok(())
    }
}

fn kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("slow", 4, || Box::new(Slow));
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds.register("lobby", 4, || Box::new(Lobby));
    kinds.register("fragile", 4, || Box::new(Fragile::default()));
    kinds
}

async fn post_matchmake(address: SocketAddr, request: Value) -> (u16, Value) {
    let reply = http(
        address,
        "POST",
        "/api/matchmake",
        None,
        Some(&request.to_string()),
    )
    .await;
    (reply.status, reply.json())
}

/// Reads until the server closes: the close code and reason.
async fn close_frame(client: &mut WsClient) -> (u16, String) {
    let closed = async {
        loop {
            match client.next().await {
                Some(Ok(Message::Close(Some(frame)))) => {
                    return (u16::from(frame.code), frame.reason.to_string());
                }
                Some(Ok(_)) => continue,
                other => panic!("expected a close frame, got {other:?}"),
            }
        }
    };
    timeout(WAIT, closed).await.expect("a close in time")
}

/// Polls `path` until `ready` holds (listings follow the shards within a moment).
async fn until(
    address: SocketAddr,
    path: &str,
    bearer: Option<&str>,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let reply = http(address, "GET", path, bearer, None).await;
        let body = reply.json();
        if ready(&body) {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path} never got there: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn room_in(rooms: &Value, id: &Value) -> Option<Value> {
    rooms
        .as_array()?
        .iter()
        .find(|room| room["id"] == *id)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_labels_locks_refusals_and_the_operators_room_controls() {
    let runtime = Runtime::start(test_config(), kinds()).await.unwrap();
    let address = runtime.addresses().http;

    // Options are bounded by the server, their meaning checked by the room.
    let (status, body) = post_matchmake(
        address,
        json!({"kind": "lobby", "create": true, "options": {"rounds": "many"}}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("option rounds = \"many\" is not valid"))
    );
    let (status, body) = post_matchmake(
        address,
        json!({"kind": "lobby", "options": {"Bad Key": "x"}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) =
        post_matchmake(address, json!({"kind": "lobby", "filter": "mode = ranked"})).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("expected label.KEY"),
        "{body}"
    );

    let ada = matchmake(
        address,
        json!({"kind": "lobby", "name": "ada", "options": {"mode": "ranked", "rounds": "5"}}),
    )
    .await;
    let room = ada["room"].clone();
    let mut ada_ws = ws_connect(address, &answer_token(&ada)).await;
    let ranked = "/api/rooms?filter=label.mode%20%3D%20%22ranked%22";
    let listed = until(address, ranked, None, |rooms| {
        room_in(rooms, &room).is_some()
    })
    .await;
    let listing = room_in(&listed, &room).unwrap();
    assert_eq!(listing["label"], json!({"mode": "ranked"}));
    assert_eq!(listing["metadata"], "{\"rounds\":5}");
    assert_eq!(listing["locked"], false);
    let casual = http(
        address,
        "GET",
        "/api/rooms?filter=label.mode%3Dcasual",
        None,
        None,
    )
    .await;
    assert_eq!(
        casual.json(),
        json!([]),
        "the filter leaves the ranked room out"
    );

    // The room's refusal, verbatim, in the close frame.
    let cheater = matchmake(address, json!({"room": room, "name": "cheater"})).await;
    let mut refused = ws_present(address, &answer_token(&cheater)).await;
    assert_eq!(
        close_frame(&mut refused).await,
        (4004, "cheaters may not play here".to_string())
    );

    // A second player fills the room; the room locks itself; matchmaking stops offering it.
    let bob = matchmake(
        address,
        json!({"kind": "lobby", "name": "bob", "filter": "label.mode = \"ranked\""}),
    )
    .await;
    assert_eq!(bob["room"], room, "the filter found the ranked room");
    let _bob_ws = WsPlayer::new(ws_connect(address, &answer_token(&bob)).await);
    until(address, "/api/rooms", None, |rooms| {
        room_in(rooms, &room).is_some_and(|listing| listing["locked"] == true)
    })
    .await;
    let (status, body) = post_matchmake(address, json!({"room": room, "name": "carol"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], format!("room {room} is locked"));
    let carol = matchmake(
        address,
        json!({"kind": "lobby", "name": "carol", "filter": "label.mode = ranked"}),
    )
    .await;
    assert_ne!(carol["room"], room, "a locked room is never offered");

    // The operator unlocks, locks, and disposes of it.
    let admin = runtime.addresses().admin;
    let path = |op: &str| format!("/api/admin/rooms/{room}/{op}");
    let unlocked = http(admin, "POST", &path("unlock"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(
        (unlocked.status, unlocked.json()),
        (200, json!({"id": room, "locked": false}))
    );
    let admin_rooms = until(
        runtime.addresses().admin,
        "/api/admin/rooms",
        Some(ADMIN_TOKEN),
        |rooms| room_in(rooms, &room).is_some_and(|listing| listing["locked"] == false),
    )
    .await;
    assert_eq!(
        room_in(&admin_rooms, &room).unwrap()["label"],
        json!({"mode": "ranked"})
    );
    let locked = http(admin, "POST", &path("lock"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(
        (locked.status, locked.json()),
        (200, json!({"id": room, "locked": true}))
    );
    let unauthorized = http(admin, "POST", &path("dispose"), None, None).await;
    assert_eq!(unauthorized.status, 401);
    let disposed = http(admin, "POST", &path("dispose"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(
        (disposed.status, disposed.json()),
        (200, json!({"id": room, "disposed": true}))
    );
    assert_eq!(
        close_frame(&mut ada_ws).await,
        (4004, "room closed".to_string())
    );
    until(address, "/api/rooms", None, |rooms| {
        room_in(rooms, &room).is_none()
    })
    .await;
    for op in ["lock", "unlock", "dispose"] {
        let missing = http(admin, "POST", &path(op), Some(ADMIN_TOKEN), None).await;
        assert_eq!(missing.status, 404, "{op} of a room that is gone");
    }
    let bad = http(
        runtime.addresses().admin,
        "POST",
        "/api/admin/rooms/x/lock",
        Some(ADMIN_TOKEN),
        None,
    )
    .await;
    assert_eq!(bad.status, 400);
    runtime.shut_down().await.unwrap();
}

/// A request placed in a room that another request is still creating gets its answer only
/// once the shard has the room, so its player connects at once and is seated (before, its
/// token could reach the shard first and the player was refused: "no room").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_in_a_room_being_created_waits_for_the_room() {
    let runtime = Runtime::start(test_config(), kinds()).await.unwrap();
    let address = runtime.addresses().http;

    let started = std::time::Instant::now();
    let creating = tokio::spawn(matchmake(address, json!({"kind": "slow", "name": "ada"})));
    // Well inside the creation: ada's request has placed her and waits for the shard.
    tokio::time::sleep(SLOW_CREATE / 3).await;
    let bob = matchmake(address, json!({"kind": "slow", "name": "bob"})).await;
    let answered_after = started.elapsed();
    let ada = creating.await.unwrap();
    assert_eq!(ada["room"], bob["room"], "bob was placed in ada's new room");
    assert!(
        answered_after >= SLOW_CREATE,
        "bob's answer came {answered_after:?} after ada's request, before the room existed"
    );
    // Both are seated on their first try.
    let _bob_ws = ws_connect(address, &answer_token(&bob)).await;
    let _ada_ws = ws_connect(address, &answer_token(&ada)).await;
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_that_panics_in_tick_message_or_join_goes_alone() {
    let mut config = test_config();
    // One shard: the crashing rooms and the relay share its thread.
    config.shards = 1;
    // Ann and Ben say nothing while each crash is handled, which under a loaded machine
    // outlasted the tests' 500 ms idle timeout (Ann's connection was closed as timed out);
    // this test is about crashes, not timeouts.
    config.connection.timeout_ms = 5_000;
    let runtime = Runtime::start(config, kinds()).await.unwrap();
    let address = runtime.addresses().http;
    let ann = matchmake(address, json!({"kind": "relay", "name": "ann"})).await;
    let ben = matchmake(address, json!({"kind": "relay", "name": "ben"})).await;
    let mut ann_ws = WsPlayer::new(ws_connect(address, &answer_token(&ann)).await);
    let mut ben_ws = WsPlayer::new(ws_connect(address, &answer_token(&ben)).await);

    for (crashes, hook) in ["tick", "message", "join"].into_iter().enumerate() {
        let victim = matchmake(
            address,
            json!({"kind": "fragile", "create": true, "name": format!("victim-{hook}"), "options": {"hook": hook}}),
        )
        .await;
        let room = victim["room"].clone();
        let mut victim_ws = ws_connect(address, &answer_token(&victim)).await;
        let trigger_name = if hook == "message" {
            "bystander"
        } else {
            "trigger"
        };
        let trigger = matchmake(address, json!({"room": room, "name": trigger_name})).await;
        let mut trigger_ws = ws_present(address, &answer_token(&trigger)).await;
        if hook == "message" {
            use futures_util::SinkExt;
            // The accepted message first, then a message that makes the room panic.
            let _ = timeout(WAIT, trigger_ws.next()).await;
            trigger_ws
                .send(Message::Binary(Bytes::from_static(b"\x00boom")))
                .await
                .unwrap();
        }
        assert_eq!(
            close_frame(&mut victim_ws).await,
            (4004, "room crashed".to_string()),
            "{hook}: the room's players are told"
        );
        assert_eq!(
            close_frame(&mut trigger_ws).await,
            (4004, "room crashed".to_string()),
            "{hook}: so is the player who set it off"
        );
        metrics_until(
            runtime.addresses().admin,
            &format!("tickwire_rooms_crashed_total {}", crashes + 1),
        )
        .await;
        until(address, "/api/rooms", None, |rooms| {
            room_in(rooms, &room).is_none()
        })
        .await;

        // The shard goes on: the relay room still relays, and the server is ready.
        let line = format!("\x00after {hook}");
        ann_ws
            .send(Message::Binary(Bytes::from(line.clone().into_bytes())))
            .await;
        loop {
            let heard = ben_ws.next().await;
            if heard.ends_with(&line.as_bytes()[1..]) {
                break;
            }
        }
        let ready = http(address, "GET", "/readyz", None, None).await;
        assert_eq!(
            (ready.status, ready.body.as_str()),
            (200, "ready\n"),
            "{hook}"
        );
    }
    runtime.shut_down().await.unwrap();
}

/// In a cluster (a real Redis, `TICKWIRE_TEST_REDIS_URL`; skipped without it) a room's label
/// travels with its listing: a room made on one node with `mode = ranked` is what a filtered
/// join-or-create on the other node finds, `GET /api/rooms?filter=` on either node lists it
/// with its label and metadata, and a filter no room matches makes a new room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rooms_label_is_matched_on_every_node_of_a_cluster() {
    let Some(url) = std::env::var("TICKWIRE_TEST_REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        eprintln!("skipped: set TICKWIRE_TEST_REDIS_URL to run the cluster label test");
        return;
    };
    let name = format!("test-labels-{}", std::process::id());
    let node = |id: &str| {
        let mut config = test_config();
        config.cluster.redis_url = url.clone();
        config.cluster.name = name.clone();
        config.cluster.secret = "a-secret-of-at-least-16-bytes".into();
        config.cluster.node_id = id.into();
        config
    };
    let a = Runtime::start(node("a"), kinds()).await.unwrap();
    let b = Runtime::start(node("b"), kinds()).await.unwrap();
    let (a_http, b_http) = (a.addresses().http, b.addresses().http);
    // Both nodes in the directory before anything is placed.
    until(
        a.addresses().admin,
        "/api/admin/nodes",
        Some(ADMIN_TOKEN),
        |nodes| nodes.as_array().is_some_and(|nodes| nodes.len() == 2),
    )
    .await;

    let ada = matchmake(
        a_http,
        json!({"kind": "lobby", "name": "ada", "create": true, "options": {"mode": "ranked"}}),
    )
    .await;
    let room = ada["room"].clone();
    let ranked = "/api/rooms?filter=label.mode%20%3D%20%22ranked%22";
    for address in [a_http, b_http] {
        let listed = until(address, ranked, None, |rooms| {
            room_in(rooms, &room).is_some()
        })
        .await;
        let listing = room_in(&listed, &room).unwrap();
        assert_eq!(listing["label"], json!({"mode": "ranked"}));
        assert_eq!(listing["metadata"], "{\"rounds\":3}");
    }
    let bob = matchmake(
        b_http,
        json!({"kind": "lobby", "name": "bob", "filter": "label.mode = \"ranked\""}),
    )
    .await;
    assert_eq!(bob["room"], room, "node b found the ranked room");
    let cy = matchmake(
        b_http,
        json!({"kind": "lobby", "name": "cy", "filter": "label.mode = \"coop\""}),
    )
    .await;
    assert_ne!(cy["room"], room, "no coop room: a new one");
    let casual = http(
        b_http,
        "GET",
        "/api/rooms?filter=label.mode%3D%22casual%22",
        None,
        None,
    )
    .await;
    assert!(
        room_in(&casual.json(), &room).is_none(),
        "the ranked room is not listed as casual: {}",
        casual.body
    );
    // A clean stop takes each node's listings out of the shared Redis.
    a.shut_down().await.unwrap();
    b.shut_down().await.unwrap();
}
