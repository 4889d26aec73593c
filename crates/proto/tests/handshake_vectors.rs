//! The UDP handshake's golden vector: `tests/vectors/udp_handshake.json` pins, for fixed keys
//! and a fixed challenge, the bytes of the challenge packet and of the response a client
//! must answer it with, so every client (this crate's, the C# SDK's, a third party's) is
//! held to the same bytes as `docs/PROTOCOL.md` describes them.
//!
//! The challenge and the expected response are sealed here with `ring` straight from the
//! document's rules (prefix, 8 sequence bytes, nonce `0 0 0 0 ‖ sequence`, associated data
//! `VERSION_INFO ‖ protocol_id ‖ prefix`); the client under test must produce the same
//! response from the challenge. `TICKWIRE_BLESS=1 cargo test -p tickwire-proto --test
//! handshake_vectors` rewrites the file.

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use serde_json::{Value, json};
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::{ConnectToken, VERSION_INFO};
use tickwire_proto::{Client, ClientState};

const PROTOCOL_ID: u64 = 0x1122_3344_5566_7788;
const UNIX_NOW: u64 = 1_900_000_000;
/// Bit 63 set: a handshake sequence.
const CHALLENGE_SEQUENCE: u64 = (1 << 63) | 42;

fn client_to_server() -> [u8; 32] {
    std::array::from_fn(|i| i as u8 + 1)
}

fn server_to_client() -> [u8; 32] {
    std::array::from_fn(|i| 200 - i as u8)
}

fn challenge_token() -> [u8; 384] {
    std::array::from_fn(|i| (i * 7 + 3) as u8)
}

/// An encrypted packet with 8 sequence bytes, sealed as the document says.
fn seal(key: &[u8; 32], packet_type: u8, sequence: u64, body: &[u8]) -> Vec<u8> {
    let prefix = 8 << 4 | packet_type;
    let mut aad = VERSION_INFO.to_vec();
    aad.extend_from_slice(&PROTOCOL_ID.to_le_bytes());
    aad.push(prefix);
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&sequence.to_le_bytes());
    let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).expect("32 bytes"));
    let mut sealed = body.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad),
        &mut sealed,
    )
    .expect("sealed");
    let mut packet = vec![prefix];
    packet.extend_from_slice(&sequence.to_le_bytes());
    packet.extend_from_slice(&sealed);
    packet
}

fn token() -> ConnectToken {
    ConnectToken {
        protocol_id: PROTOCOL_ID,
        create_timestamp: UNIX_NOW,
        expire_timestamp: UNIX_NOW + 30,
        nonce: [9; 12],
        private_token: [0x5a; 1024],
        timeout_seconds: 5,
        server_addresses: vec!["127.0.0.1:7777".parse().expect("address")],
        client_to_server_key: Key(client_to_server()),
        server_to_client_key: Key(server_to_client()),
    }
}

fn vectors() -> Value {
    let challenge = seal(
        &server_to_client(),
        2,
        CHALLENGE_SEQUENCE,
        &challenge_token(),
    );
    let response = seal(
        &client_to_server(),
        3,
        CHALLENGE_SEQUENCE,
        &challenge_token(),
    );
    json!({
        "protocol_id": format!("{PROTOCOL_ID:#018x}"),
        "client_to_server_key": hex::encode(client_to_server()),
        "server_to_client_key": hex::encode(server_to_client()),
        "challenge_sequence": format!("{CHALLENGE_SEQUENCE:#018x}"),
        "challenge_token": hex::encode(challenge_token()),
        "challenge_packet": hex::encode(challenge),
        "response_packet": hex::encode(response),
    })
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/udp_handshake.json")
}

#[test]
fn the_handshake_vector_matches_the_file() {
    let computed = vectors();
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        fs::create_dir_all(path().parent().expect("a directory")).expect("created");
        fs::write(
            path(),
            serde_json::to_string_pretty(&computed).expect("json") + "\n",
        )
        .expect("written");
        return;
    }
    let stored: Value = serde_json::from_str(
        &fs::read_to_string(path()).expect("tests/vectors/udp_handshake.json exists (bless it)"),
    )
    .expect("json");
    assert_eq!(
        stored, computed,
        "the handshake's bytes changed; if on purpose, bless the file and update PROTOCOL.md"
    );
}

#[test]
fn the_client_answers_the_vector_challenge_with_the_vector_response() {
    let vectors = vectors();
    let bytes = |name: &str| hex::decode(vectors[name].as_str().expect("hex")).expect("hex");
    let now = Instant::now();
    let server = "127.0.0.1:7777".parse().expect("address");
    let mut client = Client::new(token(), now, UNIX_NOW, ReliabilityConfig::default());
    let mut buf = [0u8; 2048];
    let request = client.poll_transmit(now, &mut buf).expect("a request");
    assert_eq!(request.len, 1066);

    client.handle_datagram(now, server, &bytes("challenge_packet"));
    let response = client.poll_transmit(now, &mut buf).expect("a response");
    assert_eq!(
        hex::encode(&buf[..response.len]),
        hex::encode(bytes("response_packet"))
    );
    assert_eq!(client.state(), ClientState::Connecting);
}
