//! The binary's arena kind wired to the store, end to end: a player matchmade into an arena
//! room over HTTP, connected over UDP, who leaves, is in the database with their session
//! counted, and the persistence API serves it.

use std::time::Duration;

use tickwire::arena::ArenaSettings;
use tickwire::serve::room_kinds;
use tickwire_client::{ConnectOptions, Link, LinkEvent, MatchRequest, Transport, matchmake};
use tickwire_server::config::ServeConfig;
use tickwire_server::runtime::{Extras, Runtime};
use tickwire_store::{Store, WriterConfig};
use tokio::time::{Instant, timeout};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arena_session_lands_in_the_database_and_on_the_api() {
    let dir = std::env::temp_dir().join(format!("tickwire-arena-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::connect(&format!("sqlite://{}", dir.join("game.db").display()))
        .await
        .unwrap();
    let writer = store.writer(&WriterConfig::default());
    let settings = ArenaSettings {
        seed: Some(7),
        ..ArenaSettings::default()
    };
    let kinds = room_kinds(&settings, Some(writer.clone())).unwrap();

    let mut config = ServeConfig {
        shards: 1,
        ..ServeConfig::default()
    };
    config.http.listen = "127.0.0.1:0".parse().unwrap();
    config.udp.listen = "127.0.0.1:0".parse().unwrap();
    config.webtransport.listen = "127.0.0.1:0".parse().unwrap();
    config.console.enabled = false;
    config.admin.token = "arena-store-test".into();
    let extras = Extras::default().routes(tickwire_store::http::router(store.clone()));
    let runtime = Runtime::start_with(config, kinds, extras).await.unwrap();
    let url = format!("http://{}", runtime.addresses().http);

    let answer = matchmake(&url, &MatchRequest::kind("arena").named("ada"), WAIT)
        .await
        .unwrap();
    assert_eq!(answer.kind, "arena");
    let mut link = Link::connect(&answer, Transport::Udp, &ConnectOptions::default())
        .await
        .unwrap();
    // The arena welcomes a seated player on its reliable channel, then snapshots follow.
    let welcomed = timeout(WAIT, async {
        loop {
            match link.next_event().await {
                LinkEvent::Message { channel: 0, .. } => return,
                LinkEvent::Message { .. } => continue,
                LinkEvent::Ended(ended) => panic!("ended before the welcome: {ended}"),
            }
        }
    })
    .await;
    assert!(welcomed.is_ok(), "no welcome in time");
    link.close().await;

    // The session's end goes through the write-behind queue; the API shows it once committed.
    let path = format!("/api/players/{}", answer.player_id);
    let deadline = Instant::now() + WAIT;
    let profile = loop {
        let (status, body) = get(runtime.addresses().http, &path).await;
        if status == 200 {
            let profile: serde_json::Value = serde_json::from_str(&body).unwrap();
            if profile["stats"]["matches"] == 1 {
                break profile;
            }
        }
        assert!(Instant::now() < deadline, "never stored: {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(profile["name"], "ada");
    assert_eq!(profile["rank"], 1);
    let (status, board) = get(runtime.addresses().http, "/api/leaderboard?limit=10").await;
    assert_eq!(status, 200);
    assert!(board.contains("\"ada\""), "{board}");

    runtime.shut_down().await.unwrap();
    writer.close().await;
    store.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

async fn get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}
