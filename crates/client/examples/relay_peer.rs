//! A Rust player for other SDKs' integration tests (the C# SDK's `make test-csharp`): joins
//! one relay room, sends `hello from rust` on the reliable channel, and waits for the other
//! SDK's `hello from csharp` and a message of `BIG_LEN` bytes (fragmented over UDP), each
//! reported on stdout as `received <channel> <len> <text or checksum>`. Exits 0 once both
//! arrived, 1 on any failure or after 15 s.
//!
//! `cargo run -p tickwire-client --example relay_peer -- http://127.0.0.1:8080 udp 1`

use std::time::Duration;

use bytes::Bytes;
use tickwire_client::{ConnectOptions, Link, LinkEvent, MatchmakeRequest, Transport, matchmake};

/// The size of the large message the peer expects: several UDP packets' worth.
const BIG_LEN: usize = 5000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, server, transport, room] = args.as_slice() else {
        eprintln!("usage: relay_peer <http://host:port> <udp|ws> <room>");
        std::process::exit(2);
    };
    let transport = match transport.as_str() {
        "udp" => Transport::Udp,
        "ws" => Transport::Ws,
        other => {
            eprintln!("unknown transport {other:?}");
            std::process::exit(2);
        }
    };
    let Ok(room) = room.parse::<u64>() else {
        eprintln!("room {room:?} is not a number");
        std::process::exit(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("runtime: {error}");
            std::process::exit(1);
        }
    };
    let outcome = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(15), run(server, transport, room)).await
    });
    match outcome {
        Ok(Ok(())) => println!("done"),
        Ok(Err(error)) => {
            eprintln!("relay_peer: {error}");
            std::process::exit(1);
        }
        Err(_) => {
            eprintln!("relay_peer: timed out");
            std::process::exit(1);
        }
    }
}

async fn run(server: &str, transport: Transport, room: u64) -> Result<(), String> {
    let request = MatchmakeRequest::room(room).named("rust");
    let answer = matchmake(server, &request, Duration::from_secs(5))
        .await
        .map_err(|error| error.to_string())?;
    let mut link = Link::connect(&answer, transport, &ConnectOptions::default())
        .await
        .map_err(|error| error.to_string())?;
    println!("connected {}", transport.name());
    link.send(0, Bytes::from_static(b"hello from rust"))
        .map_err(|error| error.to_string())?;
    link.flush().await.map_err(|error| error.to_string())?;
    let (mut hello, mut big) = (false, false);
    while !(hello && big) {
        match link.next_event().await {
            LinkEvent::Message { channel, message } => {
                if message.as_ref() == b"hello from csharp" {
                    hello = true;
                    println!("received {channel} {} hello from csharp", message.len());
                } else if message.len() == BIG_LEN
                    && message
                        .iter()
                        .enumerate()
                        .all(|(i, b)| *b == (i % 251) as u8)
                {
                    big = true;
                    println!("received {channel} {} pattern", message.len());
                } else {
                    println!("received {channel} {} other", message.len());
                }
            }
            LinkEvent::Ended(ended) => return Err(format!("link ended: {ended}")),
        }
    }
    link.close().await;
    Ok(())
}
