//! Shared message vectors: `tests/vectors/messages.json` pins the bytes of every
//! `ClientMessage` and `ServerMessage` variant (channel 0), edge values included, so the
//! TypeScript client's codecs are held to the server's byte for byte.
//!
//! Each vector has the message as JSON (`type` names the variant; every float is its
//! IEEE-754 `f32` bit pattern, `*_bits`) and its encoding in hex. A port must encode the
//! message to the hex and decode the hex back to the message.
//!
//! `TICKWIRE_BLESS=1 cargo test -p tickwire-arena --test message_vectors` rewrites the
//! file; otherwise every vector is encoded and decoded again and compared.

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use tickwire_arena::messages::{ClientMessage, NO_ENTITY, PROTOCOL_VERSION, Score, ServerMessage};
use tickwire_wire::{decode_exact, encode_to_vec};

fn client_messages() -> Vec<(&'static str, ClientMessage)> {
    vec![
        ("chat", ClientMessage::Chat { text: "gg".into() }),
        ("chat_empty", ClientMessage::Chat { text: "".into() }),
        (
            "chat_unicode",
            ClientMessage::Chat {
                text: "Zoë 🎮 → ok".into(),
            },
        ),
        (
            "chat_longest",
            ClientMessage::Chat {
                text: "x".repeat(160),
            },
        ),
        ("ping", ClientMessage::Ping { nonce: 0x1234_5678 }),
        ("ping_max", ClientMessage::Ping { nonce: u32::MAX }),
    ]
}

fn server_messages() -> Vec<(&'static str, ServerMessage)> {
    vec![
        (
            "welcome",
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION,
                you: 3,
                map: "courtyard.tmx".into(),
                map_width: 40.0,
                map_height: 30.0,
                tick_rate_hz: 60,
                tick: 123_456,
                max_health: 100,
                max_speed: 6.0,
                player_radius: 0.4,
                snapshot_history: 32,
            },
        ),
        (
            "welcome_edges",
            ServerMessage::Welcome {
                protocol: 255,
                you: 65534,
                map: "m".repeat(64),
                map_width: 1023.0,
                map_height: 1.0,
                tick_rate_hz: 128,
                tick: u32::MAX,
                max_health: 1023,
                max_speed: 7.25,
                player_radius: 0.5,
                snapshot_history: 255,
            },
        ),
        (
            "kill",
            ServerMessage::Kill {
                killer: 1,
                victim: 2,
            },
        ),
        (
            "kill_by_departed",
            ServerMessage::Kill {
                killer: NO_ENTITY,
                victim: 0,
            },
        ),
        (
            "hit",
            ServerMessage::Hit {
                attacker: 4,
                victim: 9,
                damage: 25,
                health: 75,
            },
        ),
        ("respawn", ServerMessage::Respawn { x: 6.5, y: 21.25 }),
        (
            "teleported",
            ServerMessage::Teleported {
                teleport: 1,
                x: 33.333,
                y: 2.0,
            },
        ),
        (
            "chat",
            ServerMessage::Chat {
                from: 7,
                text: "hello, arena".into(),
            },
        ),
        (
            "chat_longest",
            ServerMessage::Chat {
                from: 65534,
                text: "é".repeat(80),
            },
        ),
        (
            "announcement",
            ServerMessage::Announcement {
                text: "server restarting in 5 minutes".into(),
            },
        ),
        (
            "announcement_longest",
            ServerMessage::Announcement {
                text: "a".repeat(512),
            },
        ),
        (
            "pong",
            ServerMessage::Pong {
                nonce: 77,
                tick: 4_000_000_000,
            },
        ),
        (
            "player",
            ServerMessage::Player {
                id: 12,
                name: "Ada".into(),
            },
        ),
        (
            "player_longest_name",
            ServerMessage::Player {
                id: 300,
                name: "Zoë".repeat(8),
            },
        ),
        ("left", ServerMessage::Left { id: 12 }),
        ("scores_empty", ServerMessage::Scores { scores: vec![] }),
        (
            "scores",
            ServerMessage::Scores {
                scores: vec![
                    Score {
                        id: 2,
                        kills: 3,
                        deaths: 1,
                        score: 40,
                    },
                    Score {
                        id: 0,
                        kills: 0,
                        deaths: 2,
                        score: 300,
                    },
                    Score {
                        id: 65534,
                        kills: u32::MAX,
                        deaths: 0,
                        score: 0,
                    },
                ],
            },
        ),
        (
            "scores_full",
            ServerMessage::Scores {
                scores: (0..32)
                    .map(|i| Score {
                        id: i * 3,
                        kills: u32::from(32 - i),
                        deaths: u32::from(i),
                        score: u32::from(32 - i) * 10 + 128,
                    })
                    .collect(),
            },
        ),
    ]
}

fn bits(value: f32) -> Value {
    json!(value.to_bits())
}

fn client_json(message: &ClientMessage) -> Value {
    match message {
        ClientMessage::Chat { text } => json!({ "type": "Chat", "text": text }),
        ClientMessage::Ping { nonce } => json!({ "type": "Ping", "nonce": nonce }),
    }
}

fn server_json(message: &ServerMessage) -> Value {
    match message {
        ServerMessage::Welcome {
            protocol,
            you,
            map,
            map_width,
            map_height,
            tick_rate_hz,
            tick,
            max_health,
            max_speed,
            player_radius,
            snapshot_history,
        } => json!({
            "type": "Welcome",
            "protocol": protocol,
            "you": you,
            "map": map,
            "map_width_bits": bits(*map_width),
            "map_height_bits": bits(*map_height),
            "tick_rate_hz": tick_rate_hz,
            "tick": tick,
            "max_health": max_health,
            "max_speed_bits": bits(*max_speed),
            "player_radius_bits": bits(*player_radius),
            "snapshot_history": snapshot_history,
        }),
        ServerMessage::Kill { killer, victim } => {
            json!({ "type": "Kill", "killer": killer, "victim": victim })
        }
        ServerMessage::Hit {
            attacker,
            victim,
            damage,
            health,
        } => json!({
            "type": "Hit",
            "attacker": attacker,
            "victim": victim,
            "damage": damage,
            "health": health,
        }),
        ServerMessage::Respawn { x, y } => {
            json!({ "type": "Respawn", "x_bits": bits(*x), "y_bits": bits(*y) })
        }
        ServerMessage::Teleported { teleport, x, y } => json!({
            "type": "Teleported",
            "teleport": teleport,
            "x_bits": bits(*x),
            "y_bits": bits(*y),
        }),
        ServerMessage::Chat { from, text } => json!({ "type": "Chat", "from": from, "text": text }),
        ServerMessage::Announcement { text } => json!({ "type": "Announcement", "text": text }),
        ServerMessage::Pong { nonce, tick } => {
            json!({ "type": "Pong", "nonce": nonce, "tick": tick })
        }
        ServerMessage::Player { id, name } => json!({ "type": "Player", "id": id, "name": name }),
        ServerMessage::Left { id } => json!({ "type": "Left", "id": id }),
        ServerMessage::Scores { scores } => json!({
            "type": "Scores",
            "scores": scores
                .iter()
                .map(|s| json!([s.id, s.kills, s.deaths, s.score]))
                .collect::<Vec<_>>(),
        }),
    }
}

fn vectors() -> Value {
    let client: Vec<Value> = client_messages()
        .iter()
        .map(|(name, message)| {
            let bytes = encode_to_vec(message).expect("every case encodes");
            json!({ "name": name, "message": client_json(message), "hex": hex::encode(&bytes) })
        })
        .collect();
    let server: Vec<Value> = server_messages()
        .iter()
        .map(|(name, message)| {
            let bytes = encode_to_vec(message).expect("every case encodes");
            json!({ "name": name, "message": server_json(message), "hex": hex::encode(&bytes) })
        })
        .collect();
    json!({
        "description": "ClientMessage and ServerMessage (channel 0) vectors from tickwire_arena::messages; \
            format in docs/ARENA.md. `type` is the variant; floats are f32 bit patterns (`*_bits`); \
            a score is [id, kills, deaths, score]. Encode `message` to `hex`, decode `hex` to `message`. \
            Regenerate with TICKWIRE_BLESS=1 cargo test -p tickwire-arena --test message_vectors.",
        "protocol": PROTOCOL_VERSION,
        "client_messages": client,
        "server_messages": server,
    })
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/messages.json")
}

#[test]
fn message_vectors_match_the_file() {
    let computed = vectors();
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&computed).unwrap() + "\n";
        fs::write(path(), text).unwrap();
        return;
    }
    let stored: Value = serde_json::from_str(
        &fs::read_to_string(path()).expect("tests/vectors/messages.json exists (bless it)"),
    )
    .unwrap();
    assert_eq!(
        stored, computed,
        "the message encoding changed; if on purpose, rerun with TICKWIRE_BLESS=1, update \
         docs/ARENA.md and the TypeScript port"
    );
}

#[test]
fn every_stored_encoding_decodes_to_its_stored_message() {
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        return; // the other test is rewriting the file
    }
    let stored: Value = serde_json::from_str(&fs::read_to_string(path()).unwrap()).unwrap();
    for vector in stored["client_messages"].as_array().unwrap() {
        let bytes = hex::decode(vector["hex"].as_str().unwrap()).unwrap();
        let decoded: ClientMessage = decode_exact(&bytes).unwrap();
        assert_eq!(
            client_json(&decoded),
            vector["message"],
            "{}",
            vector["name"]
        );
    }
    for vector in stored["server_messages"].as_array().unwrap() {
        let bytes = hex::decode(vector["hex"].as_str().unwrap()).unwrap();
        let decoded: ServerMessage = decode_exact(&bytes).unwrap();
        assert_eq!(
            server_json(&decoded),
            vector["message"],
            "{}",
            vector["name"]
        );
    }
}

#[test]
fn the_vectors_cover_every_variant() {
    let server: std::collections::BTreeSet<String> = server_messages()
        .iter()
        .map(|(_, m)| server_json(m)["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        server.len(),
        11,
        "a ServerMessage variant has no vector: {server:?}"
    );
    let client: std::collections::BTreeSet<String> = client_messages()
        .iter()
        .map(|(_, m)| client_json(m)["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        client.len(),
        2,
        "a ClientMessage variant has no vector: {client:?}"
    );
}
