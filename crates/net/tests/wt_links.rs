//! The shard-driven WebTransport endpoint (`WtLinks`) over real sockets, driven by a plain
//! thread as a shard would drive it, with the wtransport-based Rust client (`WtClient`,
//! `WtRawSession`) on the other side: the token and its answer, messages both ways as
//! frames and datagrams, every way a session ends, the caps, and a crowd served by one
//! flush.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_net::udp::SendStats;
use tickwire_net::ws::{
    CloseCode, OutboxLimits, WsClosed, WsConfig, WsSendError, WsStats, accepted_message,
};
use tickwire_net::wt::{
    WT_PATH, WtCertificate, WtClient, WtClientError, WtConfig, WtCounts, WtLinkEvent, WtLinkId,
    WtLinks, WtRawSession, parse_cert_sha256,
};
use tickwire_proto::ConnectionParams;
use tokio::sync::{mpsc, oneshot};

mod wt_support;

use wt_support::{LinksThread, wait_for_turn};

/// How long a test waits for something that should happen at once.
const WAIT: Duration = Duration::from_secs(10);

/// What the server thread tells the test.
#[derive(Debug)]
enum Seen {
    Token(WtLinkId, Bytes, SocketAddr),
    Message(WtLinkId, u8, Bytes),
    Closed(WtLinkId, WsClosed),
}

/// What the test asks the server thread.
enum Command {
    Send(WtLinkId, u8, Bytes),
    /// Sends `count` messages of `size` bytes on `channel`, one a turn, until one is
    /// refused; answers with the refusal.
    SendUntilRefused {
        link: WtLinkId,
        channel: u8,
        count: usize,
        size: usize,
        done: oneshot::Sender<Option<WsSendError>>,
    },
    /// Sends `count` messages on `channel` to every accepted link in one turn, then one
    /// flush; answers with the send counters before and after that flush.
    Burst {
        channel: u8,
        count: usize,
        done: oneshot::Sender<(SendStats, SendStats, usize)>,
    },
    CloseAll(CloseCode),
    Counts(oneshot::Sender<(WtCounts, WsStats, Option<String>, usize)>),
}

/// A `WtLinks` on a thread of its own. Tokens starting with `refuse` are refused with
/// [`CloseCode::BadToken`], a token `wait` is left unanswered, any other is accepted.
struct Server {
    addr: SocketAddr,
    hash: String,
    commands: std_mpsc::Sender<Command>,
    seen: mpsc::UnboundedReceiver<Seen>,
    /// Stops the links' thread when the server is dropped.
    _thread: LinksThread,
}

/// Opens a session and answers the challenge with `token` as the whole login frame: these
/// tests' shard reads the frame itself, without a server's admission (the runtime's tests
/// log in with real tokens and proofs).
async fn fake_login(url: &str, hash: &str, token: &[u8]) -> Result<WtClient, WtClientError> {
    WtRawSession::open(url, parse_cert_sha256(hash))
        .await?
        .handshake_with(|_| Ok(token.to_vec()))
        .await
}

fn params(timeout: Duration) -> ConnectionParams {
    ConnectionParams {
        keepalive_interval: Duration::from_millis(100),
        ..ConnectionParams::with_timeout(timeout)
    }
}

impl Server {
    fn start(config: WtConfig, params: ConnectionParams) -> Self {
        let ws = WsConfig {
            params,
            close_timeout: Duration::from_millis(500),
            ..WsConfig::default()
        };
        Self::start_with(config, ws)
    }

    fn start_with(config: WtConfig, ws: WsConfig) -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let links = WtLinks::new(
            socket,
            config,
            WtCertificate::SelfSigned(vec!["localhost".into(), "127.0.0.1".into()]),
            &ws,
        )
        .expect("the links start");
        let addr = links.local_addr().unwrap();
        let hash = links.cert_sha256().expect("self-signed").to_owned();
        let accepted = accepted_message(&ws.params).unwrap();
        let (commands, command_rx) = std_mpsc::channel();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let thread = LinksThread::spawn(move |stop| {
            serve(links, &accepted, &command_rx, &seen_tx, stop);
        });
        Self {
            addr,
            hash,
            commands,
            seen,
            _thread: thread,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    async fn raw(&self) -> Result<WtRawSession, WtClientError> {
        WtRawSession::open(&self.url(WT_PATH), parse_cert_sha256(&self.hash)).await
    }

    /// Connects with `token`; owns what it needs, so the test can await the server meanwhile.
    fn connect(
        &self,
        token: &str,
    ) -> impl std::future::Future<Output = Result<WtClient, WtClientError>> + 'static {
        let (url, hash, token) = (self.url(WT_PATH), self.hash.clone(), token.to_owned());
        async move { fake_login(&url, &hash, token.as_bytes()).await }
    }

    async fn next(&mut self) -> Seen {
        tokio::time::timeout(WAIT, self.seen.recv())
            .await
            .expect("the server reports within the wait")
            .expect("the server thread runs")
    }

    async fn token(&mut self) -> (WtLinkId, Bytes, SocketAddr) {
        match self.next().await {
            Seen::Token(link, token, peer) => (link, token, peer),
            other => panic!("expected a token, got {other:?}"),
        }
    }

    async fn counts(&self) -> (WtCounts, WsStats, Option<String>, usize) {
        let (done, answer) = oneshot::channel();
        self.commands.send(Command::Counts(done)).unwrap();
        answer.await.unwrap()
    }

    fn command(&self, command: Command) {
        self.commands.send(command).unwrap();
    }
}

/// The shard's loop, in short: wait for the socket or the next deadline (5 ms at most, so
/// commands are seen), then I/O, timers, events, commands, and one flush.
fn serve(
    mut links: WtLinks,
    accepted: &[u8],
    commands: &std_mpsc::Receiver<Command>,
    seen: &mpsc::UnboundedSender<Seen>,
    stop: &AtomicBool,
) {
    let mut open: Vec<WtLinkId> = Vec::new();
    let mut sending = None;
    while !stop.load(Ordering::Relaxed) {
        wait_for_turn(&links);
        let now = Instant::now();
        while !links.handle_io(now) {}
        links.handle_timeout(now);
        while let Some(event) = links.poll_event() {
            let report = match event {
                WtLinkEvent::Token { link, token, peer } => {
                    if token.starts_with(b"refuse") {
                        links.refuse(link, CloseCode::BadToken, "test refusal");
                    } else if &token[..] != b"wait" {
                        links.accept(link, accepted).unwrap();
                        open.push(link);
                    }
                    Seen::Token(link, token, peer)
                }
                WtLinkEvent::Message {
                    link,
                    channel,
                    message,
                } => Seen::Message(link, channel, message),
                WtLinkEvent::Closed { link, closed } => Seen::Closed(link, closed),
            };
            let _ = seen.send(report);
        }
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Send(link, channel, message) => {
                    links.send(link, channel, message).unwrap();
                }
                Command::SendUntilRefused {
                    link,
                    channel,
                    count,
                    size,
                    done,
                } => sending = Some((link, channel, count, Bytes::from(vec![1u8; size]), done)),
                Command::Burst {
                    channel,
                    count,
                    done,
                } => {
                    open.retain(|link| links.is_open(*link));
                    // Everything else this turn goes out first, so the flush below is the
                    // burst's alone.
                    links.flush(Instant::now());
                    let before = links.send_stats();
                    for &link in &open {
                        for index in 0..count {
                            let message = Bytes::from(format!("snapshot {index}"));
                            links.send(link, channel, message).unwrap();
                        }
                    }
                    links.flush(Instant::now());
                    let _ = done.send((before, links.send_stats(), open.len()));
                }
                Command::CloseAll(code) => links.close_all(code, code.default_reason()),
                Command::Counts(done) => {
                    let cert = links.cert_sha256().map(str::to_owned);
                    let _ = done.send((links.counts(), links.stats(), cert, links.len()));
                }
            }
        }
        if let Some((link, channel, count, message, done)) = sending.take() {
            match links.send(link, channel, message.clone()) {
                Err(error) => {
                    let _ = done.send(Some(error));
                }
                Ok(()) if count == 1 => {
                    let _ = done.send(None);
                }
                Ok(()) => sending = Some((link, channel, count - 1, message, done)),
            }
        }
        links.flush(Instant::now());
    }
}

fn config() -> WtConfig {
    WtConfig {
        handshake_timeout: Duration::from_secs(5),
        ..WtConfig::default()
    }
}

/// Waits until `check` holds for the server's counters.
async fn counts_until(
    server: &Server,
    what: &str,
    check: impl Fn(&WtCounts, &WsStats, usize) -> bool,
) -> (WtCounts, WsStats) {
    let deadline = Instant::now() + WAIT;
    loop {
        let (counts, stats, _, len) = server.counts().await;
        if check(&counts, &stats, len) {
            return (counts, stats);
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not reached; counts {counts:?}, stats {stats:?}, sessions {len}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_token_is_accepted_and_messages_go_both_ways_as_frames_and_datagrams() {
    let mut server = Server::start(config(), params(Duration::from_secs(10)));
    let connecting = server.connect("player-1");
    let (client, (link, token, peer)) = tokio::join!(connecting, server.token());
    let mut client = client.expect("the accepted client sees its connection parameters");
    assert_eq!(
        &token[..],
        b"player-1",
        "the token arrives as the client sent it"
    );
    assert!(
        peer.ip().is_loopback(),
        "the peer is the client's address: {peer}"
    );
    assert_eq!(client.params().timeout, Duration::from_secs(10));

    // Client to server: a frame on the Reliable channel, a datagram on the others.
    client
        .send(0, Bytes::from_static(b"reliable"))
        .await
        .unwrap();
    client
        .send(1, Bytes::from_static(b"unreliable"))
        .await
        .unwrap();
    client
        .send(2, Bytes::from_static(b"sequenced"))
        .await
        .unwrap();
    let mut got = HashMap::new();
    while got.len() < 3 {
        match server.next().await {
            Seen::Message(from, channel, message) => {
                assert_eq!(from, link);
                got.insert(channel, message);
            }
            other => panic!("expected messages, got {other:?}"),
        }
    }
    assert_eq!(got[&0], "reliable");
    assert_eq!(got[&1], "unreliable");
    assert_eq!(got[&2], "sequenced");

    // Server to client, likewise; an unreliable message too large for a datagram goes as
    // a frame.
    let large = Bytes::from(vec![7u8; 4000]);
    server.command(Command::Send(link, 0, Bytes::from_static(b"welcome")));
    server.command(Command::Send(link, 1, Bytes::from_static(b"blip")));
    server.command(Command::Send(link, 2, Bytes::from_static(b"snapshot")));
    server.command(Command::Send(link, 1, large.clone()));
    let mut got = HashMap::new();
    for _ in 0..4 {
        let (channel, message) = tokio::time::timeout(WAIT, client.recv())
            .await
            .unwrap()
            .unwrap();
        got.entry(channel).or_insert_with(Vec::new).push(message);
    }
    assert_eq!(got[&0], [Bytes::from_static(b"welcome")]);
    assert_eq!(got[&2], [Bytes::from_static(b"snapshot")]);
    assert!(
        got[&1].contains(&Bytes::from_static(b"blip")),
        "{:?}",
        got[&1]
    );
    assert!(
        got[&1].contains(&large),
        "the large unreliable message arrives whole"
    );

    let (counts, stats) = counts_until(&server, "messages counted", |counts, stats, _| {
        counts.datagrams_received >= 2 && stats.messages_sent >= 4
    })
    .await;
    assert_eq!(counts.sessions_opened, 1);
    assert_eq!(
        counts.datagrams_received, 2,
        "channels 1 and 2 came as datagrams"
    );
    assert_eq!(
        counts.datagrams_sent, 2,
        "blip and snapshot went as datagrams"
    );
    assert_eq!(
        counts.datagrams_too_large, 1,
        "the large one went as a frame"
    );
    assert_eq!(stats.connections_accepted, 1);
    assert_eq!(stats.messages_received, 3);
}

#[tokio::test]
async fn a_refused_token_gives_the_client_the_close_code() {
    let mut server = Server::start(config(), params(Duration::from_secs(10)));
    let (client, (link, _, _)) = tokio::join!(server.connect("refuse me"), server.token());
    match client {
        Err(WtClientError::Closed { code, .. }) => {
            assert_eq!(code, CloseCode::BadToken.code(), "the refusal's code");
        }
        other => panic!("a refused client gets the close code, got {other:?}"),
    }
    // The caller refused it: no Closed event, and the session goes away.
    let (_, stats) = counts_until(&server, "refused session dropped", |_, _, len| len == 0).await;
    assert_eq!(stats.connections_accepted, 0);
    assert!(
        server.seen.try_recv().is_err(),
        "a refusal the caller made reports nothing for {link:?}"
    );
}

#[tokio::test]
async fn a_client_leaving_with_4001_is_a_client_close() {
    let mut server = Server::start(config(), params(Duration::from_secs(10)));
    let (client, (link, _, _)) = tokio::join!(server.connect("leaver"), server.token());
    let mut client = client.unwrap();
    client.close(CloseCode::Requested, "bye").await;
    match server.next().await {
        Seen::Closed(closed, WsClosed::ByClient { code, reason }) => {
            assert_eq!(closed, link);
            assert_eq!(code, Some(4001));
            assert_eq!(reason, "bye");
        }
        other => panic!("expected the client's close, got {other:?}"),
    }
    let (counts, stats) = counts_until(&server, "session gone", |_, _, len| len == 0).await;
    assert_eq!(counts.sessions_closed, 1);
    assert_eq!(stats.connections_closed, 1);
}

/// A UDP relay between one client and the server that can go silent both ways.
struct Relay {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    fn start(server: SocketAddr) -> Self {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(server).unwrap();
        for socket in [&front, &back] {
            socket
                .set_read_timeout(Some(Duration::from_millis(5)))
                .unwrap();
        }
        let addr = front.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (cutting, stopping) = (cut.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut client = None;
            let mut buf = [0u8; 2048];
            while !stopping.load(Ordering::Relaxed) {
                if let Ok((n, from)) = front.recv_from(&mut buf) {
                    client = Some(from);
                    if !cutting.load(Ordering::Relaxed) {
                        let _ = back.send(&buf[..n]);
                    }
                }
                while let Ok(n) = back.recv(&mut buf) {
                    if let (Some(client), false) = (client, cutting.load(Ordering::Relaxed)) {
                        let _ = front.send_to(&buf[..n], client);
                    }
                }
            }
        });
        Self { addr, cut, stop }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[tokio::test]
async fn a_client_that_vanishes_is_lost_after_the_idle_timeout() {
    let mut server = Server::start(config(), params(Duration::from_millis(800)));
    let relay = Relay::start(server.addr);
    let url = format!("https://127.0.0.1:{}{WT_PATH}", relay.addr.port());
    let hash = server.hash.clone();
    let connecting = fake_login(&url, &hash, b"vanisher");
    let (client, (link, _, _)) = tokio::join!(connecting, server.token());
    let _client = client.unwrap();
    let cut_at = Instant::now();
    relay.cut.store(true, Ordering::Relaxed);
    match server.next().await {
        Seen::Closed(closed, WsClosed::Lost) => assert_eq!(closed, link),
        other => panic!("expected the session lost, got {other:?}"),
    }
    let after = cut_at.elapsed();
    assert!(
        after >= Duration::from_millis(700),
        "lost by the idle timeout (800 ms), not before: {after:?}"
    );
}

#[tokio::test]
async fn another_path_is_answered_404() {
    let server = Server::start(config(), params(Duration::from_secs(10)));
    let opened =
        WtRawSession::open(&server.url("/elsewhere"), parse_cert_sha256(&server.hash)).await;
    assert!(
        matches!(opened, Err(WtClientError::Connect(_))),
        "a request for another path is rejected: {opened:?}"
    );
    let (counts, _) = counts_until(&server, "404 counted and closed", |counts, _, len| {
        counts.refused_path == 1 && len == 0
    })
    .await;
    assert_eq!(counts.sessions_opened, 0);
}

#[tokio::test]
async fn the_per_address_cap_refuses_the_extra_session() {
    let config = WtConfig {
        max_sessions_per_ip: 1,
        ..config()
    };
    let mut server = Server::start(config, params(Duration::from_secs(10)));
    let (first, _) = tokio::join!(server.connect("first"), server.token());
    let _first = first.expect("the first session from the address is served");
    let second = server.raw().await;
    assert!(
        matches!(second, Err(WtClientError::Connect(_))),
        "a second session from the same address is refused: {second:?}"
    );
    let (counts, _) = counts_until(&server, "refusal counted", |counts, _, _| {
        counts.refused_per_ip >= 1
    })
    .await;
    assert_eq!(counts.sessions_opened, 1);
}

#[tokio::test]
async fn a_session_that_sends_no_token_is_closed_at_the_handshake_timeout() {
    let config = WtConfig {
        handshake_timeout: Duration::from_millis(400),
        ..config()
    };
    let server = Server::start(config, params(Duration::from_secs(10)));
    let started = Instant::now();
    let mut raw = server.raw().await.expect("the session opens");
    raw.challenge().await.expect("the challenge comes first");
    let answer = tokio::time::timeout(WAIT, raw.recv_frame(4096))
        .await
        .unwrap();
    match answer {
        Err(WtClientError::Closed { code, .. }) => {
            assert_eq!(code, CloseCode::HandshakeTimedOut.code());
        }
        other => panic!("expected the handshake timeout's close, got {other:?}"),
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(350),
        "not before the timeout: {waited:?}"
    );
    let (counts, stats) = counts_until(&server, "timeout counted", |counts, _, _| {
        counts.handshake_timeouts == 1
    })
    .await;
    assert_eq!(stats.handshake_timeouts, 1);
    assert_eq!(counts.sessions_opened, 1);
}

#[tokio::test]
async fn close_all_ends_every_session_with_server_shutdown_in_every_state() {
    let mut server = Server::start(config(), params(Duration::from_secs(10)));
    // Accepted.
    let (accepted, (accepted_link, _, _)) =
        tokio::join!(server.connect("accepted"), server.token());
    let mut accepted = accepted.unwrap();
    // Its token in, not answered.
    let mut waiting = server.raw().await.unwrap();
    waiting.send_frame(b"wait").await.unwrap();
    let (waiting_link, _, _) = server.token().await;
    // Its session open, no token.
    let mut quiet = server.raw().await.unwrap();
    counts_until(&server, "three sessions open", |counts, _, _| {
        counts.sessions_opened == 3
    })
    .await;

    server.command(Command::CloseAll(CloseCode::ServerShutdown));
    let shutdown = CloseCode::ServerShutdown.code();
    match tokio::time::timeout(WAIT, accepted.recv()).await.unwrap() {
        Err(WtClientError::Closed { code, .. }) => assert_eq!(code, shutdown, "accepted"),
        other => panic!("the accepted client is told, got {other:?}"),
    }
    for (name, raw) in [
        ("waiting for its answer", &mut waiting),
        ("before its token", &mut quiet),
    ] {
        raw.challenge().await.expect("the challenge comes first");
        match tokio::time::timeout(WAIT, raw.recv_frame(4096))
            .await
            .unwrap()
        {
            Err(WtClientError::Closed { code, .. }) => assert_eq!(code, shutdown, "{name}"),
            other => panic!("the client {name} is told, got {other:?}"),
        }
    }
    let (_, stats) = counts_until(&server, "all sessions gone", |_, _, len| len == 0).await;
    assert_eq!(
        stats.refused_shutdown, 2,
        "the two not accepted were refused"
    );
    // close_all is the caller's: it reports nothing.
    while let Ok(seen) = server.seen.try_recv() {
        assert!(
            !matches!(seen, Seen::Closed(link, _) if link == accepted_link || link == waiting_link),
            "close_all reported {seen:?}"
        );
    }
}

#[tokio::test]
async fn close_all_during_the_quic_handshake_closes_with_server_shutdown() {
    let server = Server::start(
        WtConfig {
            retry: false,
            ..config()
        },
        params(Duration::from_secs(10)),
    );
    // Close everything until a connection attempt has been seen: the attempt is caught
    // in its QUIC or HTTP/3 handshake, before any session exists.
    let opening = tokio::spawn({
        let url = server.url(WT_PATH);
        let hash = parse_cert_sha256(&server.hash);
        async move { WtRawSession::open(&url, hash).await }
    });
    counts_until(&server, "attempt seen", |counts, _, len| {
        counts.incoming >= 1 && len == 1
    })
    .await;
    server.command(Command::CloseAll(CloseCode::ServerShutdown));
    let opened = tokio::time::timeout(WAIT, opening).await.unwrap().unwrap();
    match opened {
        // The QUIC close came before the session was up. Before QUIC's handshake is done
        // (no 1-RTT keys) QUIC forbids the application's code on the wire (RFC 9000
        // §10.2.3): the client then hears only "closed by the application during the
        // handshake".
        Err(WtClientError::Connect(error)) => {
            assert!(
                error.contains("4003") || error.contains("closed during the handshake"),
                "the close carries 4003 once the handshake allows it: {error}"
            );
        }
        // The session came up just before: its end carries the code.
        Ok(mut raw) => match raw.challenge().await.and(raw.recv_frame(4096).await) {
            Err(WtClientError::Closed { code, .. }) => {
                assert_eq!(code, CloseCode::ServerShutdown.code());
            }
            other => panic!("expected the shutdown close, got {other:?}"),
        },
        Err(other) => panic!("expected a connect error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_oversize_frame_closes_with_message_too_large() {
    let mut server = Server::start(config(), params(Duration::from_secs(10)));
    let mut raw = server.raw().await.unwrap();
    raw.send_frame(b"oversize").await.unwrap();
    let (link, _, _) = server.token().await;
    raw.challenge().await.expect("the challenge");
    raw.recv_frame(4096).await.expect("the parameters");
    raw.send.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    match server.next().await {
        Seen::Closed(closed, WsClosed::ByServer { code, .. }) => {
            assert_eq!((closed, code), (link, CloseCode::MessageTooLarge));
        }
        other => panic!("expected the server's close, got {other:?}"),
    }
    match tokio::time::timeout(WAIT, raw.recv_frame(4096))
        .await
        .unwrap()
    {
        Err(WtClientError::Closed { code, .. }) => {
            assert_eq!(code, CloseCode::MessageTooLarge.code());
        }
        other => panic!("expected the close frame, got {other:?}"),
    }
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_as_slow_past_the_reliable_bound() {
    let ws = WsConfig {
        params: ConnectionParams {
            max_message_size: 16 << 10,
            ..params(Duration::from_secs(10))
        },
        close_timeout: Duration::from_millis(300),
        outbox: OutboxLimits {
            max_reliable_bytes: 64 << 10,
            ..OutboxLimits::default()
        },
        ..WsConfig::default()
    };
    let mut server = Server::start_with(config(), ws);
    let mut raw = server.raw().await.unwrap();
    raw.send_frame(b"sleeper").await.unwrap();
    let (link, _, _) = server.token().await;
    raw.challenge().await.expect("the challenge");
    raw.recv_frame(4096).await.expect("the parameters");
    // The client reads nothing more: QUIC's windows fill, then the bound.
    let (done, refused) = oneshot::channel();
    server.command(Command::SendUntilRefused {
        link,
        channel: 0,
        count: 10_000,
        size: 8 << 10,
        done,
    });
    let refused = tokio::time::timeout(WAIT, refused).await.unwrap().unwrap();
    assert!(
        matches!(refused, Some(WsSendError::SlowClient { max, .. }) if max == 64 << 10),
        "the send past the bound is refused: {refused:?}"
    );
    match server.next().await {
        Seen::Closed(closed, WsClosed::ByServer { code, .. }) => {
            assert_eq!((closed, code), (link, CloseCode::SlowClient));
        }
        other => panic!("expected the slow client's close, got {other:?}"),
    }
    let (_, stats) = counts_until(&server, "session dropped", |_, _, len| len == 0).await;
    // Whether the close frame got through before the close timeout depends on when QUIC's
    // acknowledgements come (its send window drains once they do), so it is not asserted.
    assert_eq!(stats.closed_slow_client, 1);
}

#[tokio::test]
async fn a_stray_stream_is_stopped_and_the_session_goes_on() {
    let mut server = Server::start(config(), params(Duration::from_secs(10)));
    let mut raw = server.raw().await.unwrap();
    raw.send_frame(b"stray").await.unwrap();
    let (link, _, _) = server.token().await;
    raw.challenge().await.expect("the challenge");
    raw.recv_frame(4096).await.expect("the parameters");
    let (mut stray, _) = raw.connection.open_bi().await.unwrap().await.unwrap();
    let _ = stray.write_all(b"junk").await;
    counts_until(&server, "stray stream counted", |counts, _, _| {
        counts.extra_streams == 1
    })
    .await;
    // The control stream still works.
    raw.send_frame(&[0, b'h', b'i']).await.unwrap();
    match server.next().await {
        Seen::Message(from, 0, message) => assert_eq!((from, &message[..]), (link, &b"hi"[..])),
        other => panic!("expected the message, got {other:?}"),
    }
}

#[tokio::test]
async fn a_renewed_certificate_serves_new_sessions_and_old_ones_keep_theirs() {
    let config = WtConfig {
        renew_self_signed_every: Duration::from_millis(300),
        ..config()
    };
    let mut server = Server::start(config, params(Duration::from_secs(10)));
    let first_hash = server.hash.clone();
    let (old, (old_link, _, _)) = tokio::join!(server.connect("old"), server.token());
    let mut old = old.unwrap();
    let deadline = Instant::now() + WAIT;
    let new_hash = loop {
        let (_, _, hash, _) = server.counts().await;
        let hash = hash.unwrap();
        if hash != first_hash {
            break hash;
        }
        assert!(Instant::now() < deadline, "the certificate is renewed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let url = server.url(WT_PATH);
    let stale = WtRawSession::open(&url, parse_cert_sha256(&first_hash)).await;
    assert!(
        stale.is_err(),
        "a new session is served the new certificate"
    );
    let connecting = fake_login(&url, &new_hash, b"new");
    let (new, _) = tokio::join!(connecting, server.token());
    new.expect("the new hash is accepted");
    server.command(Command::Send(
        old_link,
        0,
        Bytes::from_static(b"still here"),
    ));
    let (channel, message) = tokio::time::timeout(WAIT, old.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((channel, &message[..]), (0, &b"still here"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_sessions_each_get_sixty_datagrams_from_one_flush() {
    const CLIENTS: usize = 200;
    const BURST: usize = 60;
    let config = WtConfig {
        exempt: vec!["127.0.0.1".parse().unwrap()],
        handshake_timeout: Duration::from_secs(30),
        ..config()
    };
    let mut server = Server::start(config, params(Duration::from_secs(30)));
    let url = server.url(WT_PATH);
    let connecting: Vec<_> = (0..CLIENTS)
        .map(|index| {
            let (url, hash) = (url.clone(), server.hash.clone());
            tokio::spawn(async move {
                fake_login(&url, &hash, format!("crowd {index}").as_bytes()).await
            })
        })
        .collect();
    let mut tokens = 0;
    while tokens < CLIENTS {
        let deadline = Duration::from_secs(60);
        match tokio::time::timeout(deadline, server.seen.recv()).await {
            Ok(Some(Seen::Token(..))) => tokens += 1,
            Ok(Some(other)) => panic!("only tokens expected, got {other:?}"),
            _ => panic!("{tokens} of {CLIENTS} tokens arrived"),
        }
    }
    let mut clients = Vec::new();
    for connecting in connecting {
        clients.push(connecting.await.unwrap().expect("every client is accepted"));
    }

    let (done, answer) = oneshot::channel();
    server.command(Command::Burst {
        channel: 1,
        count: BURST,
        done,
    });
    let (before, after, links) = answer.await.unwrap();
    assert_eq!(links, CLIENTS);
    let syscalls = after.syscalls - before.syscalls;
    let datagrams = after.datagrams - before.datagrams;
    assert!(
        datagrams >= CLIENTS as u64,
        "each session got at least a packet: {datagrams}"
    );
    assert!(
        syscalls < datagrams,
        "one flush batches across sessions: {syscalls} sendmmsg calls for {datagrams} datagrams"
    );
    assert_eq!(after.dropped(), 0, "nothing dropped at the socket");

    for (index, client) in clients.iter_mut().enumerate() {
        for expected in 0..BURST {
            let received = tokio::time::timeout(WAIT, client.recv()).await;
            let (channel, message) = received
                .unwrap_or_else(|_| panic!("client {index} got {expected} of {BURST}"))
                .unwrap();
            assert_eq!(channel, 1);
            assert!(message.starts_with(b"snapshot "), "{message:?}");
        }
    }
    let (counts, _, _, _) = server.counts().await;
    assert_eq!(counts.sessions_opened, CLIENTS as u64);
    assert!(counts.datagrams_sent >= (CLIENTS * BURST) as u64);
}

#[test]
fn the_links_move_to_their_shard_thread() {
    fn is_send<T: Send>() {}
    is_send::<WtLinks>();
}
