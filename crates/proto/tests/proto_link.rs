//! The whole protocol over the hostile link: 20 % loss, 100 ms ± 20 ms latency,
//! 4 % reordering and 1 % duplication, for 60 simulated seconds, with traffic both ways.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{Harness, client_address};
use tickwire_proto::sim::LinkConfig;
use tickwire_proto::{ClientEvent, ClientState, ServerEvent};

const RELIABLE: u8 = 0;
const UNRELIABLE: u8 = 1;
const SEQUENCED: u8 = 2;

fn counter_message(tag: u8, counter: u32) -> Bytes {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&counter.to_le_bytes());
    Bytes::from(bytes)
}

fn counter_of(message: &[u8]) -> u32 {
    u32::from_le_bytes(message[1..5].try_into().expect("5-byte counter message"))
}

/// A large message whose every byte depends on its position, so any corruption shows.
fn big_message(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect::<Vec<_>>()
        .into()
}

#[test]
fn sixty_seconds_of_a_hostile_link_deliver_everything_the_channels_promise() {
    let mut harness = Harness::new(LinkConfig::hostile(), 2024);
    harness.add_client(1);
    harness.connect_all();
    let connection = harness
        .server
        .connection_at(client_address(0))
        .expect("connected");
    let big_to_client = big_message(64 * 1024, 7);
    let big_to_server = big_message(100 * 1024, 9);

    let tick = Duration::from_millis(16);
    let ticks = 60_000 / 16;
    for counter in 0..ticks {
        let now = harness.now;
        let client = &mut harness.clients[0].client;
        client
            .send(RELIABLE, counter_message(b'r', counter))
            .expect("client reliable send");
        client
            .send(SEQUENCED, counter_message(b's', counter))
            .expect("client sequenced send");
        client
            .send(UNRELIABLE, counter_message(b'u', counter))
            .expect("client unreliable send");
        harness
            .server
            .send(now, connection, RELIABLE, counter_message(b'r', counter))
            .expect("server reliable send");
        harness
            .server
            .send(now, connection, SEQUENCED, counter_message(b's', counter))
            .expect("server sequenced send");
        if counter == 100 {
            harness
                .server
                .send(now, connection, RELIABLE, big_to_client.clone())
                .expect("server big send");
            harness.clients[0]
                .client
                .send(RELIABLE, big_to_server.clone())
                .expect("client big send");
        }
        harness.run_for(tick);
    }
    // Let the last resends land.
    harness.run_for(Duration::from_secs(5));

    assert_eq!(
        harness.clients[0].client.state(),
        ClientState::Connected,
        "no unexpected disconnect"
    );
    assert!(
        !harness
            .server_events
            .iter()
            .any(|event| matches!(event, ServerEvent::Disconnected { .. })),
        "the server kept the connection"
    );

    let mut reliable = Vec::new();
    let mut sequenced = Vec::new();
    let mut big = Vec::new();
    for event in &harness.clients[0].events {
        if let ClientEvent::Message { channel, message } = event {
            match *channel {
                RELIABLE if message.len() == 5 => reliable.push(counter_of(message)),
                RELIABLE => big.push(message.clone()),
                SEQUENCED => sequenced.push(counter_of(message)),
                other => panic!("unexpected channel {other}"),
            }
        }
    }
    check_streams("client", &reliable, &sequenced, ticks);
    assert_eq!(
        big,
        vec![big_to_client],
        "the 64 KiB message arrives once, intact"
    );

    let mut reliable = Vec::new();
    let mut sequenced = Vec::new();
    let mut unreliable = Vec::new();
    let mut big = Vec::new();
    for event in &harness.server_events {
        if let ServerEvent::Message {
            channel, message, ..
        } = event
        {
            match *channel {
                RELIABLE if message.len() == 5 => reliable.push(counter_of(message)),
                RELIABLE => big.push(message.clone()),
                SEQUENCED => sequenced.push(counter_of(message)),
                UNRELIABLE => unreliable.push(counter_of(message)),
                other => panic!("unexpected channel {other}"),
            }
        }
    }
    check_streams("server", &reliable, &sequenced, ticks);
    assert_eq!(
        big,
        vec![big_to_server],
        "the 100 KiB message arrives once, intact"
    );
    let mut deduplicated = unreliable.clone();
    deduplicated.sort_unstable();
    deduplicated.dedup();
    assert_eq!(
        deduplicated.len(),
        unreliable.len(),
        "unreliable messages never arrive twice"
    );

    let link = harness.link.stats();
    assert!(
        link.lost > 1_000 && link.duplicated > 50 && link.reordered > 100,
        "the link was hostile: {link:?}"
    );
    let stats = harness.clients[0].client.stats().expect("connected");
    let rtt = stats.reliability.rtt;
    assert!(
        rtt > Duration::from_millis(150) && rtt < Duration::from_millis(400),
        "smoothed rtt {rtt:?} reflects the 200 ms round trip"
    );
}

fn check_streams(side: &str, reliable: &[u32], sequenced: &[u32], sent: u32) {
    let expected: Vec<u32> = (0..sent).collect();
    if reliable != expected {
        let first_bad = reliable
            .iter()
            .zip(&expected)
            .position(|(got, want)| got != want)
            .unwrap_or(reliable.len().min(expected.len()));
        panic!(
            "{side}: reliable messages not exactly once in order: {} of {sent} arrived; first difference at index {first_bad}",
            reliable.len()
        );
    }
    assert!(
        sequenced.windows(2).all(|pair| pair[0] < pair[1]),
        "{side}: unreliable-sequenced delivered an older message after a newer one"
    );
    assert!(
        sequenced.len() as f64 > f64::from(sent) * 0.5,
        "{side}: most sequenced messages arrive ({} of {sent})",
        sequenced.len()
    );
}
