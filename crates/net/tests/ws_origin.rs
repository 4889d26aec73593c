//! The Origin allow-list of the WebSocket upgrade: with a list set, a browser's upgrade from
//! an origin not on it is refused with 403 before any WebSocket starts, a listed origin is
//! upgraded whatever its case, and a native client (no `Origin`) connects as always; with
//! no list, every origin is upgraded.

mod ws_support;

use tickwire_net::ws::WsConfig;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use ws_support::{EVENT_TIMEOUT, Options, TestServer};

/// The status the server answers an upgrade carrying `origins` with: 101, or the refusal's.
async fn upgrade_status(server: &TestServer, origins: &[&'static str]) -> StatusCode {
    let mut request = format!("ws://{}/ws", server.address)
        .into_client_request()
        .unwrap();
    for origin in origins {
        request
            .headers_mut()
            .append("origin", HeaderValue::from_static(origin));
    }
    let stream = server.connect_stream().await;
    let upgraded = tokio::time::timeout(
        EVENT_TIMEOUT,
        tokio_tungstenite::client_async(request, stream),
    )
    .await
    .expect("no answer to the upgrade");
    match upgraded {
        Ok((_, response)) => response.status(),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status(),
        Err(error) => panic!("upgrade with origins {origins:?} failed: {error}"),
    }
}

#[tokio::test]
async fn an_origin_off_the_allow_list_is_refused_with_403_and_a_native_client_connects() {
    let mut server = TestServer::start(Options {
        ws: WsConfig {
            allowed_origins: Some(vec![
                "https://game.example".into(),
                "http://localhost:8080".into(),
            ]),
            ..WsConfig::default()
        },
        ..Options::default()
    })
    .await;

    for allowed in [
        &["https://game.example"][..],
        &["http://localhost:8080"],
        &["HTTPS://Game.Example"],
    ] {
        assert_eq!(
            upgrade_status(&server, allowed).await,
            StatusCode::SWITCHING_PROTOCOLS,
            "a listed origin {allowed:?} was not upgraded"
        );
    }
    let refused: [&[&'static str]; 6] = [
        &["https://evil.example"],
        // Neither a prefix, nor another scheme or port, nor the opaque origin matches.
        &["https://game.example.evil.example"],
        &["http://game.example"],
        &["http://localhost:8081"],
        &["null"],
        // Every Origin a request carries must be listed.
        &["https://game.example", "https://evil.example"],
    ];
    for origins in refused {
        assert_eq!(
            upgrade_status(&server, origins).await,
            StatusCode::FORBIDDEN,
            "an upgrade from {origins:?} was not refused"
        );
    }
    let stats = server.endpoint.stats();
    assert_eq!(stats.refused_origin, refused.len() as u64);
    assert_eq!(stats.upgrades_failed, 0);

    // A native client sends no Origin: it upgrades and logs in as always.
    let (_client, side) = server.connect(1).await;
    assert_eq!(side.client_id(), 1);
}

#[tokio::test]
async fn without_an_allow_list_every_origin_is_upgraded() {
    let server = TestServer::start(Options::default()).await;
    for origins in [&["https://evil.example"][..], &["null"], &[]] {
        assert_eq!(
            upgrade_status(&server, origins).await,
            StatusCode::SWITCHING_PROTOCOLS,
            "an upgrade from {origins:?} was refused with no allow-list set"
        );
    }
    assert_eq!(server.endpoint.stats().refused_origin, 0);
}
