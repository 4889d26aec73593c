//! The embedding builder: a game's own server on loopback in a few lines, logs on, stopped
//! by a signal (here a future standing in for one) with a graceful shutdown.

mod common;

use common::serve::{http, matchmake};
use serde_json::json;
use tickwire_server::Server;
use tickwire_server::embed::init_logging;
use tickwire_server::rooms::chat::ChatRoom;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_server_serves_its_rooms_on_loopback_and_stops_when_told() {
    let runtime = Server::builder()
        .room::<ChatRoom>("chat", 50)
        .configure(|config| {
            // Ports of the system's choosing, so tests run side by side; the addresses
            // stay the development defaults' loopback ones.
            config.http.listen.set_port(0);
            config.udp.listen.set_port(0);
            config.webtransport.listen.set_port(0);
            config.console.listen.set_port(0);
            config.admin.listen.set_port(0);
            // A token of the test's own: a generated one would be written into the
            // working directory (the crate's).
            config.admin.token = "builder-test-token".into();
        })
        .start()
        .await
        .unwrap();
    assert!(
        !init_logging(),
        "the builder installed its log subscriber already"
    );
    let addresses = runtime.addresses().clone();
    assert!(addresses.http.ip().is_loopback());
    assert!(addresses.udp.iter().all(|udp| udp.ip().is_loopback()));
    assert!(!addresses.wt.is_empty() && addresses.wt.iter().all(|wt| wt.ip().is_loopback()));
    assert!(addresses.admin.ip().is_loopback());
    let answer = matchmake(addresses.http, json!({"kind": "chat", "name": "ada"})).await;
    assert_eq!(answer["kind"], "chat");
    let rooms = http(addresses.http, "GET", "/api/rooms", None, None)
        .await
        .json();
    assert_eq!(rooms[0]["capacity"], 50, "{rooms}");
    // The admin page is the server's own, on the operator listener with the API it calls.
    let page = http(addresses.admin, "GET", "/admin", None, None).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("<title>tickwire admin</title>"),
        "{}",
        page.body
    );
    let script = http(addresses.admin, "GET", "/admin/admin.js", None, None).await;
    assert_eq!(script.status, 200);
    let elsewhere = http(addresses.http, "GET", "/admin", None, None).await;
    assert_eq!(elsewhere.status, 404, "not on the public port");
    assert!(
        elsewhere.body.contains("operator listener"),
        "{}",
        elsewhere.body
    );
    runtime.shut_down().await.unwrap();

    // `run_until`: serves until the future completes, then shuts down gracefully.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .room::<ChatRoom>("chat", 50)
            .configure(|config| {
                config.http.listen.set_port(0);
                config.udp.listen.set_port(0);
                config.webtransport.listen.set_port(0);
                config.admin.listen.set_port(0);
                config.admin.token = "builder-test-token".into();
                config.console.enabled = false;
                config.shards = 2;
            })
            .run_until(stopped),
    );
    stop.send(()).unwrap();
    let report = tokio::time::timeout(common::WAIT, server)
        .await
        .expect("stopped in time")
        .unwrap()
        .unwrap();
    assert_eq!(report.workers.len(), 2, "both shards stopped and reported");
}
