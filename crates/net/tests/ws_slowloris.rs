//! Slowloris: connections that dribble their HTTP upgrade or stall their TLS handshake are
//! cut at the (shortened) timeouts, while a normal client connects promptly meanwhile.

mod ws_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickwire_net::ws::ListenConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use ws_support::{Io, Options, TestServer};

const TIMEOUT: Duration = Duration::from_millis(1000);
/// How early a cut may come and still be the timeout's doing (timer granularity).
const EARLY: Duration = Duration::from_millis(100);
/// How late a cut may come on a loaded machine.
const LATE: Duration = Duration::from_millis(2500);

const UPGRADE: &[u8] = b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Version: 13\r\n\r\n";

fn options(tls: bool) -> Options {
    Options {
        listen: ListenConfig {
            header_read_timeout: TIMEOUT,
            tls_accept_timeout: TIMEOUT,
            ..ListenConfig::default()
        },
        tls,
        ..Options::default()
    }
}

/// Writes the upgrade request one byte per 100 ms until the server closes the connection;
/// returns how long that took. The whole request would take 14 s.
async fn dribble(mut stream: Box<dyn Io>) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 512];
    let mut pace = tokio::time::interval(Duration::from_millis(100));
    for &byte in UPGRADE {
        tokio::select! {
            // Whatever the server says (an error response or nothing), it is closing.
            _ = stream.read(&mut buf) => return started.elapsed(),
            _ = pace.tick() => {
                if stream.write_all(&[byte]).await.is_err() {
                    return started.elapsed();
                }
            }
        }
    }
    panic!(
        "the whole upgrade was dribbled over {:?} without the server closing",
        started.elapsed()
    );
}

/// Opens TCP to a TLS port and sends only the first bytes of a TLS record header; returns
/// how long the server took to close.
async fn stall_tls(address: SocketAddr) -> Duration {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let started = Instant::now();
    stream.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(TIMEOUT + LATE, async {
        // Read until the end of the stream (an alert, if any, comes first).
        while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
    assert!(closed.is_ok(), "the stalled TLS handshake was never cut");
    started.elapsed()
}

fn assert_cut_at_timeout(what: &str, elapsed: Duration) {
    assert!(
        elapsed + EARLY >= TIMEOUT,
        "{what} cut after {elapsed:?}, before the {TIMEOUT:?} timeout"
    );
    assert!(
        elapsed <= TIMEOUT + LATE,
        "{what} cut after {elapsed:?}, long after the {TIMEOUT:?} timeout"
    );
}

/// A normal client upgrades, authenticates and gets the accepted message; returns how long
/// that took.
async fn connect_normally(server: &mut TestServer, client_id: u64) -> Duration {
    let started = Instant::now();
    let (_client, _connection) = server.connect(client_id).await;
    started.elapsed()
}

#[tokio::test]
async fn a_dribbled_upgrade_is_cut_at_the_header_timeout_while_others_connect() {
    let mut server = TestServer::start(options(false)).await;
    let dribbler = tokio::spawn(dribble(server.connect_stream().await));

    let prompt = connect_normally(&mut server, 1).await;
    assert!(
        prompt < TIMEOUT / 2,
        "a normal client took {prompt:?} while a dribbler was connected"
    );
    assert!(
        !dribbler.is_finished(),
        "the dribbler was cut before its timeout"
    );

    assert_cut_at_timeout("the dribbled upgrade", dribbler.await.unwrap());
    assert_eq!(server.listen.snapshot().header_timeouts, 1);
}

#[tokio::test]
async fn over_tls_a_stalled_handshake_and_a_dribbled_upgrade_are_cut_while_others_connect() {
    let mut server = TestServer::start(options(true)).await;
    // The dribbler completes TLS and then dribbles inside it; the staller never completes
    // TLS at all.
    let dribbler = tokio::spawn(dribble(server.connect_stream().await));
    let staller = tokio::spawn(stall_tls(server.address));

    let prompt = connect_normally(&mut server, 1).await;
    assert!(
        prompt < TIMEOUT / 2,
        "a normal wss client took {prompt:?} while slow clients were connected"
    );
    assert!(!dribbler.is_finished() && !staller.is_finished());

    assert_cut_at_timeout("the dribbled upgrade", dribbler.await.unwrap());
    assert_cut_at_timeout("the stalled TLS handshake", staller.await.unwrap());
    let stats = server.listen.snapshot();
    assert_eq!(stats.tls_accept_timeouts, 1);
    assert_eq!(stats.header_timeouts, 1);
}
