//! A crowd that leaves takes its memory with it: once a thousand clients have connected to a
//! `Server` and gone, the server holds about what a fresh one holds, not a slot's worth of
//! connection state per client it ever had at once (issue 20, finding 4: a server's RSS
//! after 5,000 players left stayed at 3.7× its idle figure).
//!
//! Heap bytes counted by the wrapping allocator; this binary has one test, so nothing else
//! allocates beside it.

use std::time::Instant;

use tickwire_alloc_count::{CountingAllocator, live_bytes};
use tickwire_proto::{DisconnectReason, TIDY_INTERVAL};

mod crowd;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const CROWD: u16 = 1_000;
const CROWD_SIZE: isize = CROWD as isize;
/// What a server that had the crowd may keep beyond a fresh one's heap, per client it had
/// at once: the used-token set, which remembers every token until it expires (its job: the
/// clock is frozen here, well inside the tokens' 60 s), and a slot's index entry; 216
/// bytes measured. Before: 4,292, a connection's inline state (about 2 KB) kept in every
/// slot and the goodbye replies' queue (three replies of 460 bytes per client) never
/// shrunk.
const KEPT_PER_CLIENT_MAX: isize = 300;

#[test]
fn a_crowd_that_leaves_takes_its_connections_memory_with_it() {
    let now = Instant::now();
    let before_server = live_bytes();
    let (mut server, address, key) = crowd::server(now);
    let fresh = live_bytes() - before_server;
    let (clients, connected) = crowd::connect(&mut server, address, &key, CROWD, now);
    assert_eq!(server.connection_count(), usize::from(CROWD));
    let with_crowd = live_bytes() - before_server;

    drop(clients);
    for connection in connected {
        server.disconnect(now, connection, DisconnectReason::ServerShutdown);
    }
    // The goodbyes go out, and a tidy comes due (at most every `TIDY_INTERVAL`).
    let later = now + TIDY_INTERVAL;
    while server.poll_event().is_some() {}
    let mut buf = vec![0u8; 2048];
    while server.poll_transmit(later, &mut buf).is_some() {}
    assert_eq!(server.connection_count(), 0);
    let after = live_bytes() - before_server;

    let kept = after - fresh;
    eprintln!(
        "server heap: fresh {fresh} B, with {CROWD} clients {with_crowd} B, after they left {after} B ({} B kept per client)",
        kept / CROWD_SIZE
    );
    assert!(
        kept <= KEPT_PER_CLIENT_MAX * CROWD_SIZE,
        "the server kept {kept} bytes after {CROWD} clients left (at most {} per client)",
        KEPT_PER_CLIENT_MAX
    );
    drop(server);
}
