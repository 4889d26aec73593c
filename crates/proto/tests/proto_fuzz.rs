//! Property tests: the server and client endpoints fed arbitrary datagrams from arbitrary
//! addresses never panic, never reply to what they cannot authenticate, and keep their state
//! within bounds.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::{Harness, client_address, server_address};
use proptest::collection::vec;
use proptest::prelude::*;
use tickwire_proto::sim::LinkConfig;
use tickwire_proto::{ClientState, MAX_DATAGRAM_BYTES};

fn address() -> impl Strategy<Value = SocketAddr> {
    (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port))
}

/// Datagrams worth trying: random bytes, random bytes with each packet type's prefix, and
/// lengths around the handshake packets' exact sizes.
fn datagram() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..1500),
        (0u8..16, 1u8..9, vec(any::<u8>(), 0..1300)).prop_map(
            |(kind, sequence_bytes, mut body)| {
                body.insert(0, sequence_bytes << 4 | kind);
                body
            }
        ),
        (prop_oneof![Just(1066usize), Just(409usize)], any::<u8>()).prop_map(|(len, fill)| {
            let mut bytes = vec![fill; len];
            bytes[0] = if len == 1066 { 0 } else { 3 };
            bytes
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_server_fed_arbitrary_datagrams_stays_silent_and_bounded(
        datagrams in vec((address(), datagram()), 1..64),
    ) {
        let mut harness = Harness::new(LinkConfig::perfect(Duration::from_millis(10)), 1);
        let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
        for (from, bytes) in &datagrams {
            harness.server.handle_datagram(harness.now, *from, bytes);
        }
        prop_assert_eq!(harness.server.connection_count(), 0);
        prop_assert!(harness.server.poll_transmit(harness.now, &mut buf).is_none(), "a reply to a forgery");
        prop_assert!(harness.server.poll_event().is_none());
        prop_assert_eq!(harness.server.stats().dropped.total(), datagrams.len() as u64);
    }

    #[test]
    fn a_connected_pair_survives_arbitrary_datagrams_at_both_ends(
        datagrams in vec((any::<bool>(), datagram()), 1..64),
    ) {
        let mut harness = Harness::new(LinkConfig::perfect(Duration::from_millis(10)), 2);
        harness.add_client(1);
        harness.connect_all();
        for (to_server, bytes) in &datagrams {
            if *to_server {
                // From the connected client's own address: the hardest case to tell apart.
                harness.server.handle_datagram(harness.now, client_address(0), bytes);
            } else {
                harness.clients[0].client.handle_datagram(harness.now, server_address(), bytes);
            }
        }
        harness.run_for(Duration::from_millis(500));
        prop_assert_eq!(harness.server.connection_count(), 1);
        prop_assert_eq!(harness.clients[0].client.state(), ClientState::Connected);
        let stats = harness.server.stats();
        prop_assert!(stats.handshake_bytes_sent <= stats.handshake_bytes_received);
    }
}
