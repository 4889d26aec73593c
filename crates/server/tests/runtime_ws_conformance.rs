//! RFC 6455 conformance of a running server's `/ws`: a connected player whose frames break
//! the WebSocket protocol gets the RFC's close code (1002 protocol error, 1007 invalid
//! payload, 1009 message too big) and then loses the TCP connection, never a bare drop.

mod common;

use common::raw_ws::{RawWs, client_frame};
use common::serve::{answer_token, matchmake, test_config};
use serde_json::json;
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};

/// A connected player sends `frames`; the server must close with `expected` and drop.
async fn closes_with(frames: Vec<u8>, expected: u16, case: &str) {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    let runtime = Runtime::start(test_config(), kinds).await.unwrap();
    let address = runtime.addresses().http;
    let answer = matchmake(address, json!({"kind": "relay"})).await;
    let token = answer_token(&answer).to_bytes().unwrap();
    let mut ws = RawWs::connect(address, &token[..]).await;
    ws.send(&frames).await;
    let code = ws.close_code_then_dropped().await;
    assert_eq!(
        code, expected,
        "{case}: closed with {code}, RFC 6455 asks {expected}"
    );
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmasked_frame_is_a_protocol_error() {
    closes_with(client_frame(0x82, b"\x00hi", false), 1002, "unmasked").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_bit_is_a_protocol_error() {
    closes_with(client_frame(0xC2, b"\x00hi", true), 1002, "rsv1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_opcode_is_a_protocol_error() {
    closes_with(client_frame(0x83, b"\x00hi", true), 1002, "opcode 3").await;
    closes_with(client_frame(0x8B, b"", true), 1002, "opcode 0xB").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_byte_close_payload_is_a_protocol_error() {
    closes_with(client_frame(0x88, b"\x03", true), 1002, "1-byte close").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_reason_that_is_not_utf8_is_a_protocol_error() {
    closes_with(
        client_frame(0x88, b"\x03\xe8\xce\xba\xff", true),
        1002,
        "close reason not UTF-8",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_code_no_endpoint_may_send_is_a_protocol_error() {
    closes_with(
        client_frame(0x88, &1005u16.to_be_bytes(), true),
        1002,
        "code 1005",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_continuation_is_a_protocol_error() {
    closes_with(
        client_frame(0x80, b"\x00hi", true),
        1002,
        "stray continuation",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_message_that_is_not_utf8_is_invalid_payload() {
    closes_with(
        client_frame(0x81, b"\xc3\x28", true),
        1007,
        "text not UTF-8",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_size_limit_is_too_big() {
    // The limit is max(2048, max_message_size + 1): 262145 bytes by default. The header
    // alone announces more; the server must not wait for the body.
    let mut header = vec![0x82, 0x80 | 127];
    header.extend_from_slice(&(262_146u64).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    closes_with(header, 1009, "oversize").await;
}

/// The status line a running server answers an upgrade from `origin` with.
async fn upgrade_status(address: std::net::SocketAddr, origin: Option<&str>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let origin = origin.map_or(String::new(), |origin| format!("Origin: {origin}\r\n"));
    let request = common::raw_ws::UPGRADE.replacen("\r\n\r\n", &format!("\r\n{origin}\r\n"), 1);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = vec![0u8; 256];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut head))
        .await
        .expect("an answer in time")
        .unwrap();
    String::from_utf8_lossy(&head[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_allowed_origins_refuses_upgrades_from_other_pages() {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    let mut config = test_config();
    config.security.allowed_origins = vec!["https://play.example.com".to_string()];
    let runtime = Runtime::start(config, kinds).await.unwrap();
    let address = runtime.addresses().http;
    let refused = upgrade_status(address, Some("https://evil.example.com")).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    let allowed = upgrade_status(address, Some("https://play.example.com")).await;
    assert!(allowed.starts_with("HTTP/1.1 101"), "{allowed}");
    let native = upgrade_status(address, None).await;
    assert!(
        native.starts_with("HTTP/1.1 101"),
        "a native client sends no Origin: {native}"
    );
    runtime.shut_down().await.unwrap();
}
