//! The cluster's directory against a real Redis (`TICKWIRE_TEST_REDIS_URL`; skipped with a
//! reason when unset): seat reservation under concurrency, leases, placement by players,
//! create requests that are cancelled or taken, and a clean leave. Each test has a cluster
//! name of its own, so tests never see each other's keys.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tickwire_room::listing::{Label, LabelFilter};
use tickwire_server::cluster::{
    CancelOutcome, Directory, NodeInfo, NodeState, Outcome, RoomState, Want,
};

const TTL: Duration = Duration::from_secs(30);

fn redis_url() -> Option<String> {
    match std::env::var("TICKWIRE_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped: set TICKWIRE_TEST_REDIS_URL to run the cluster directory tests");
            None
        }
    }
}

/// A cluster name no other test or run uses.
fn cluster_name(test: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "test-{test}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn udp(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn node_state(id: &str, range: u32, rooms: Vec<RoomState>) -> NodeState {
    let players = rooms.iter().map(|room| u32::from(room.seated)).sum();
    NodeState {
        info: NodeInfo {
            id: id.into(),
            http: format!("127.0.0.1:{}", 8000 + range),
            ws: format!("ws://127.0.0.1:{}/ws", 8000 + range),
            wss: None,
            wt: Vec::new(),
            udp: vec![udp(7000 + range as u16)],
        },
        kinds: vec!["relay".into()],
        capacity: 0,
        players,
        draining: false,
        range,
        rooms,
        seated: Vec::new(),
    }
}

fn room(id: u64, capacity: u16, seated: u16, port: u16) -> RoomState {
    RoomState {
        id,
        kind: "relay".into(),
        capacity,
        seated,
        joinable: true,
        udp: udp(port),
        label: Label::default(),
        metadata: String::new(),
    }
}

fn labelled(mut state: RoomState, entries: &[(&str, &str)], metadata: &str) -> RoomState {
    state.label = Label::new(
        entries
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string())),
    )
    .unwrap();
    state.metadata = metadata.to_string();
    state
}

async fn directory(url: &str, name: &str, node: &str) -> Directory {
    Directory::new(url, name, node, Duration::from_secs(2)).unwrap()
}

async fn cleanup(url: &str, name: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("tw:{{{name}}}:*"))
        .query_async(&mut connection)
        .await
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut connection)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_matchmakes_for_the_last_seats_admit_exactly_capacity() {
    let Some(url) = redis_url() else { return };
    let name = cluster_name("last-seats");
    let a = directory(&url, &name, "a").await;
    let lease = Duration::from_secs(10);
    // One room of 16 with 13 seated: three seats left.
    assert!(
        !a.heartbeat(
            &node_state("a", 1, vec![room(1 << 32, 16, 13, 7001)]),
            lease
        )
        .await
        .unwrap(),
        "a new node"
    );
    // 200 players ask at once, through four handles (four nodes' worth of connections).
    let handles: Vec<Directory> = futures_util::future::join_all(
        (0..4).map(|index| directory(&url, &name, ["a", "b", "c", "d"][index])),
    )
    .await;
    let joins = (0..200u64).map(|player| {
        let directory = handles[player as usize % 4].clone();
        async move {
            directory
                .matchmake(1000 + player, Want::Join(1 << 32), TTL)
                .await
                .unwrap()
        }
    });
    let outcomes = futures_util::future::join_all(joins).await;
    let reserved = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Outcome::Reserved(seat) if seat.room == 1 << 32))
        .count();
    let full = outcomes
        .iter()
        .filter(|outcome| **outcome == Outcome::Full)
        .count();
    assert_eq!((reserved, full), (3, 197), "exactly the free seats");
    cleanup(&url, &name).await;

    // The same race by kind: the three seats go, everyone else is sent to a new room.
    let name = cluster_name("last-seats-kind");
    let a = directory(&url, &name, "a").await;
    a.heartbeat(
        &node_state("a", 1, vec![room(1 << 32, 16, 13, 7001)]),
        lease,
    )
    .await
    .unwrap();
    let joins = (0..200u64).map(|player| {
        let directory = a.clone();
        async move {
            directory
                .matchmake(5000 + player, Want::JoinOrCreate("relay"), TTL)
                .await
                .unwrap()
        }
    });
    let outcomes = futures_util::future::join_all(joins).await;
    let reserved = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Outcome::Reserved(_)))
        .count();
    let create = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Outcome::Create { node, .. } if node == "a"))
        .count();
    assert_eq!((reserved, create), (3, 197));
    let rooms = a.rooms().await.unwrap();
    assert_eq!(rooms.len(), 1);
    assert_eq!(
        (rooms[0].players, rooms[0].reserved, rooms[0].capacity),
        (13, 3, 16),
        "13 seated and 3 promised"
    );
    cleanup(&url, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_is_found_again_and_new_rooms_go_to_the_node_with_fewest_players() {
    let Some(url) = redis_url() else { return };
    let name = cluster_name("placement");
    let lease = Duration::from_secs(10);
    let a = directory(&url, &name, "a").await;
    let b = directory(&url, &name, "b").await;
    let c = directory(&url, &name, "c").await;
    // a: 10 players in 5 rooms of 2 (full); b: 6 in one room of 6 (full); c: empty.
    let a_rooms = (0..5)
        .map(|index| room((1 << 32) + index, 2, 2, 7001))
        .collect();
    a.heartbeat(&node_state("a", 1, a_rooms), lease)
        .await
        .unwrap();
    b.heartbeat(&node_state("b", 2, vec![room(2 << 32, 6, 6, 7002)]), lease)
        .await
        .unwrap();
    c.heartbeat(&node_state("c", 3, Vec::new()), lease)
        .await
        .unwrap();
    let Outcome::Create { node, info } = a
        .matchmake(1, Want::JoinOrCreate("relay"), TTL)
        .await
        .unwrap()
    else {
        panic!("every room is full")
    };
    assert_eq!(
        (node.as_str(), info.id.as_str()),
        ("c", "c"),
        "fewest players"
    );
    // c creates the room and promises the seat; then player 1 finds it again.
    c.room_created(&room(3 << 32, 4, 0, 7003), lease, Some((1, TTL)), None)
        .await
        .unwrap();
    let Outcome::Reserved(seat) = b.matchmake(1, Want::Lookup, TTL).await.unwrap() else {
        panic!("the reservation is found through any node")
    };
    assert_eq!(
        (seat.room, seat.node.as_str(), seat.udp),
        (3 << 32, "c", udp(7003))
    );
    // Player 2 joins the new room (the fullest with a seat).
    let Outcome::Reserved(seat) = a
        .matchmake(2, Want::JoinOrCreate("relay"), TTL)
        .await
        .unwrap()
    else {
        panic!("a seat in c's room")
    };
    assert_eq!(seat.room, 3 << 32);
    // Player 1 connects: the seat is held, found as such through any node.
    c.seat_changed(3 << 32, 1, true, 1, 1, lease).await.unwrap();
    assert!(matches!(
        a.matchmake(1, Want::JoinOrCreate("relay"), TTL).await.unwrap(),
        Outcome::Held(seat) if seat.room == 3 << 32 && seat.node == "c"
    ));
    assert_eq!(
        a.matchmake(99, Want::Lookup, TTL).await.unwrap(),
        Outcome::Nothing
    );
    assert_eq!(
        a.matchmake(99, Want::Join(12345), TTL).await.unwrap(),
        Outcome::NoRoom
    );
    assert_eq!(
        a.matchmake(99, Want::Join(2 << 32), TTL).await.unwrap(),
        Outcome::Full
    );

    // c drains: its room takes no one, and new rooms go elsewhere.
    let mut draining = node_state("c", 3, vec![room(3 << 32, 4, 1, 7003)]);
    draining.draining = true;
    draining.seated = vec![(1, 3 << 32)];
    c.heartbeat(&draining, lease).await.unwrap();
    assert_eq!(
        a.matchmake(98, Want::Join(3 << 32), TTL).await.unwrap(),
        Outcome::Closed
    );
    assert!(matches!(
        a.matchmake(98, Want::JoinOrCreate("relay"), TTL).await.unwrap(),
        Outcome::Create { node, .. } if node == "b"
    ));

    // c leaves cleanly: its room is gone from the listing at once.
    c.leave(3).await.unwrap();
    let listed: Vec<String> = a
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|node| node.id)
        .collect();
    assert_eq!(listed, ["a", "b"]);
    assert!(a.rooms().await.unwrap().iter().all(|room| room.node != "c"));
    cleanup(&url, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_renewing_leaves_within_its_lease_but_one_late_renewal_loses_nothing() {
    let Some(url) = redis_url() else { return };
    let name = cluster_name("lease");
    let lease = Duration::from_millis(1500);
    let a = directory(&url, &name, "a").await;
    let b = directory(&url, &name, "b").await;
    let state = node_state("b", 2, vec![room(2 << 32, 8, 1, 7002)]);
    b.heartbeat(&state, lease).await.unwrap();
    // A renewal due every lease/3 comes twice as late: nothing is lost.
    tokio::time::sleep(lease * 2 / 3).await;
    assert_eq!(a.rooms().await.unwrap().len(), 1, "still listed");
    assert!(b.heartbeat(&state, lease).await.unwrap(), "still there");
    tokio::time::sleep(lease * 2 / 3).await;
    assert_eq!(a.rooms().await.unwrap().len(), 1, "renewed");
    // No more renewals (kill -9): gone within the lease, rooms included.
    tokio::time::sleep(lease).await;
    assert!(a.nodes().await.unwrap().is_empty());
    assert_eq!(
        a.matchmake(7, Want::Join(2 << 32), TTL).await.unwrap(),
        Outcome::NoRoom
    );
    // The next renewal lists it anew (Redis restarted empty looks the same).
    assert!(!b.heartbeat(&state, lease).await.unwrap());
    assert_eq!(a.rooms().await.unwrap().len(), 1);
    cleanup(&url, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_request_is_taken_or_cancelled_never_both() {
    let Some(url) = redis_url() else { return };
    let name = cluster_name("create");
    let a = directory(&url, &name, "a").await;
    let b = directory(&url, &name, "b").await;
    // Cancelled first: the node must not create.
    assert_eq!(
        a.cancel_create("r1").await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert!(!b.claim_create("r1").await.unwrap());
    // Taken first: the cancel finds it in progress, then created.
    assert!(b.claim_create("r2").await.unwrap());
    assert_eq!(
        a.cancel_create("r2").await.unwrap(),
        CancelOutcome::InProgress
    );
    b.room_created(
        &room(2 << 32, 4, 0, 7002),
        Duration::from_secs(10),
        Some((5, TTL)),
        Some("r2"),
    )
    .await
    .unwrap();
    assert_eq!(
        a.cancel_create("r2").await.unwrap(),
        CancelOutcome::Created(2 << 32)
    );
    // Messages reach the node they are sent to.
    let mut inbox = b.subscribe();
    let mut delivered = 0;
    for _ in 0..50 {
        delivered = a.send("b", "hello").await.unwrap();
        if delivered > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(delivered, 1);
    let message = tokio::time::timeout(Duration::from_secs(2), inbox.recv())
        .await
        .unwrap();
    assert_eq!(message.as_deref(), Some("hello"));
    assert!(
        a.claim_range(9, Duration::from_secs(10)).await.unwrap(),
        "a free range"
    );
    assert!(
        !b.claim_range(9, Duration::from_secs(10)).await.unwrap(),
        "held by a"
    );
    cleanup(&url, &name).await;
}

/// Labels travel with the listings: join-or-create through any node offers only rooms whose
/// label matches the filter (a new room when none does), and the cluster's room list shows
/// each room's label and metadata as its node wrote them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_filter_chooses_among_the_rooms_of_every_node() {
    let Some(url) = redis_url() else { return };
    let name = cluster_name("labels");
    let lease = Duration::from_secs(10);
    let a = directory(&url, &name, "a").await;
    let b = directory(&url, &name, "b").await;
    let ranked = 1 << 32;
    let casual = 2 << 32;
    let (ranked_room, casual_room) = (
        labelled(
            room(ranked, 4, 1, 7001),
            &[("mode", "ranked")],
            "{\"map\":\"desert\"}",
        ),
        labelled(room(casual, 4, 2, 7002), &[("mode", "casual")], ""),
    );
    a.heartbeat(&node_state("a", 1, vec![ranked_room]), lease)
        .await
        .unwrap();
    b.heartbeat(&node_state("b", 2, vec![casual_room]), lease)
        .await
        .unwrap();

    let filter = |text: &str| -> LabelFilter { text.parse().unwrap() };
    let seat_for = |outcome: Outcome| match outcome {
        Outcome::Reserved(seat) => Some(seat.room),
        _ => None,
    };
    // Unfiltered, the fullest room with a seat: the casual one on b.
    let any = b
        .matchmake_filtered(1, Want::JoinOrCreate("relay"), &LabelFilter::default(), TTL)
        .await
        .unwrap();
    assert_eq!(seat_for(any), Some(casual));
    // Filtered, through b, the ranked room on a.
    let wanted = b
        .matchmake_filtered(
            2,
            Want::JoinOrCreate("relay"),
            &filter(r#"label.mode = "ranked""#),
            TTL,
        )
        .await
        .unwrap();
    assert_eq!(seat_for(wanted), Some(ranked));
    let not_casual = a
        .matchmake_filtered(
            3,
            Want::JoinOrCreate("relay"),
            &filter(r#"label.mode != "casual""#),
            TTL,
        )
        .await
        .unwrap();
    assert_eq!(seat_for(not_casual), Some(ranked));
    // No room matches: a new one.
    let none = a
        .matchmake_filtered(
            4,
            Want::JoinOrCreate("relay"),
            &filter(r#"label.mode = "coop""#),
            TTL,
        )
        .await
        .unwrap();
    assert!(matches!(none, Outcome::Create { .. }), "{none:?}");

    // Each room as `id label metadata`, as the directory lists them.
    let shown: Vec<String> = a
        .rooms()
        .await
        .unwrap()
        .iter()
        .map(|room| {
            let label: Vec<String> = room
                .label
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect();
            format!("{} {} {}", room.id, label.join(","), room.metadata)
        })
        .collect();
    assert_eq!(
        shown,
        [
            format!("{ranked} mode=ranked {{\"map\":\"desert\"}}"),
            format!("{casual} mode=casual "),
        ]
    );
    cleanup(&url, &name).await;
}
