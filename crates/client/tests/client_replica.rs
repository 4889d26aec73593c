//! Replicated state end to end: a room kind with a `ServerWorld`, served by the real server,
//! and Rust clients over UDP and WebSocket whose replicas converge to it, roster included,
//! with no replication code in the room beyond handing the host its world.

use std::time::Duration;

use tickwire_client::{
    ConnectOptions, Handled, Link, LinkEvent, MatchmakeRequest, Replica, Transport, matchmake,
};
use tickwire_server::replicate::ServerWorld;
use tickwire_server::room::{LeaveReason, Member, PlayerId, Replication, Room, RoomContext};
use tickwire_wire::Replicate;
use tokio::time::timeout;

mod common;

const WAIT: Duration = Duration::from_secs(10);

/// A player's counter, counting up every tick.
#[derive(Debug, Clone, PartialEq, Replicate)]
struct Counter {
    #[wire(min = 0, max = 15)]
    seat: u8,
    #[wire(varint)]
    ticks: u32,
}

struct Counting {
    world: ServerWorld<Counter>,
    counters: Vec<(PlayerId, u16)>,
}

impl Room for Counting {
    fn tick_rate_hz(&self) -> u32 {
        30
    }

    fn join(
        &mut self,
        _: &mut RoomContext<'_>,
        member: &Member,
    ) -> Result<(), tickwire_server::room::JoinRefused> {
        let counter = Counter {
            seat: member.seat.0 as u8,
            ticks: 0,
        };
        let id = self.world.spawn(counter).expect("an id");
        self.counters.push((member.id, id));
        Ok(())
    }

    fn leave(&mut self, _: &mut RoomContext<'_>, player: PlayerId, _: LeaveReason) {
        self.counters.retain(|&(owner, id)| {
            if owner == player {
                self.world.despawn(id);
            }
            owner != player
        });
    }

    fn tick(&mut self, _: &mut RoomContext<'_>) {
        for (_, counter) in self.world.iter_mut() {
            counter.ticks += 1;
        }
    }

    fn replication(&mut self) -> Option<Replication<'_>> {
        Some(Replication::new(&mut self.world))
    }
}

/// `GET path` on the operator listener, with the test's admin token; the whole answer.
async fn get(address: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer client-test-token\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

/// Reads the link until the replica has applied a snapshot satisfying `done`.
async fn until(
    link: &mut Link,
    replica: &mut Replica<Counter>,
    done: impl Fn(&Replica<Counter>) -> bool,
) {
    let listen = async {
        loop {
            match link.next_event().await {
                LinkEvent::Message { channel, message } => {
                    if let Handled::Applied(_) = replica.handle(link, channel, &message)
                        && done(replica)
                    {
                        return;
                    }
                }
                LinkEvent::Ended(ended) => panic!("ended: {ended}"),
            }
        }
    };
    timeout(WAIT, listen)
        .await
        .expect("the replica got there in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_and_websocket_clients_mirror_one_world_and_its_roster() {
    let (runtime, url) = common::relay_server(|_, kinds| {
        kinds.register("counting", 4, || {
            Box::new(Counting {
                world: ServerWorld::default(),
                counters: Vec::new(),
            })
        });
    })
    .await;
    let request = |name: &str| MatchmakeRequest::kind("counting").named(name);
    let ann = matchmake(&url, &request("ann"), WAIT).await.unwrap();
    let bob = matchmake(&url, &request("bob"), WAIT).await.unwrap();
    let options = ConnectOptions::default();
    let mut ann_link = Link::connect(&ann, Transport::Udp, &options).await.unwrap();
    let mut bob_link = Link::connect(&bob, Transport::Ws, &options).await.unwrap();
    let mut ann_replica = Replica::<Counter>::default();
    let mut bob_replica = Replica::<Counter>::default();

    // Both see both counters counting, and the roster names both, each knowing its seat.
    let both_counting = |replica: &Replica<Counter>| {
        replica.mirror().len() == 2 && replica.mirror().iter().all(|(_, c)| c.ticks > 30)
    };
    until(&mut ann_link, &mut ann_replica, both_counting).await;
    until(&mut bob_link, &mut bob_replica, both_counting).await;
    let names = |replica: &Replica<Counter>| -> Vec<String> {
        let mut names: Vec<_> = replica
            .mirror()
            .roster()
            .map(|(_, m)| m.name.clone())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&ann_replica), ["ann", "bob"]);
    assert_eq!(names(&bob_replica), ["ann", "bob"]);
    assert_ne!(ann_replica.mirror().my_seat(), None);
    assert_ne!(
        ann_replica.mirror().my_seat(),
        bob_replica.mirror().my_seat()
    );
    // Deltas: most snapshots are a few bytes, not the whole world.
    let stats = ann_link.stats();
    assert!(stats.messages_received > 30, "{stats:?}");

    // The operator sees what the state costs, by room kind, entity kind and field.
    let admin = runtime.addresses().admin;
    let metrics = timeout(WAIT, async {
        loop {
            let metrics = get(admin, "/metrics").await;
            if metrics.contains("tickwire_replication_bytes_total{") {
                return metrics;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the replication profile reaches /metrics");
    let ticks = metrics
        .lines()
        .find(|line| {
            line.starts_with("tickwire_replication_bytes_total{")
                && line.contains(r#"kind="counting""#)
                && line.contains(r#"entity="Counter""#)
                && line.contains(r#"field="ticks""#)
        })
        .expect("a counter for the ticks field");
    let bytes: f64 = ticks.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(bytes > 0.0, "{ticks}");
    let page = get(admin, "/api/admin/replication").await;
    let body = page.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert!(body.contains(r#""kind":"counting""#), "{page}");
    assert!(body.contains(r#""field":"ticks""#), "{page}");

    // Bob leaves: his counter and his roster entry go from Ann's replica.
    bob_link.close().await;
    until(&mut ann_link, &mut ann_replica, |replica| {
        replica.mirror().len() == 1 && replica.mirror().roster().count() == 1
    })
    .await;
    runtime.shut_down().await.unwrap();
}
