//! Heap bytes a `Server` holds per idle connected client, counted by a wrapping allocator:
//! `cargo run --release -p tickwire-proto --example connection_memory [clients]`.

use std::time::Instant;

use tickwire_alloc_count::{CountingAllocator, live_bytes};

#[path = "../tests/crowd/mod.rs"]
mod crowd;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() {
    let count: u16 = std::env::args()
        .nth(1)
        .map_or(1000, |arg| arg.parse().expect("a client count"));
    let now = Instant::now();
    let (mut server, address, key) = crowd::server(now);
    let _clients = crowd::connect(&mut server, address, &key, count, now);

    let connected = server.connection_count();
    let with_server = live_bytes();
    drop(server);
    let server_bytes = with_server - live_bytes();
    println!(
        "{connected} connected clients; server heap {} KiB, {} bytes per connection",
        server_bytes / 1024,
        server_bytes / connected.max(1) as isize
    );
}
