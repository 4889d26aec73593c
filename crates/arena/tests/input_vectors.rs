//! Shared input vectors: `tests/vectors/input.json` pins the bytes of `InputCommand` (what a
//! client sends every tick) and of `ClientInput` (the channel-1 message that carries the
//! snapshot ack and up to four commands), so the TypeScript client's encoder is held to the
//! server's decoder byte for byte.
//!
//! Each vector has the command as given (decimals), its encoding in hex, and what the server
//! decodes from it, every float as its IEEE-754 `f32` bit pattern (`*_bits`): the grids
//! snap a raw aim or movement value, and a port must produce the same snapped bits.
//!
//! `TICKWIRE_BLESS=1 cargo test -p tickwire-arena --test input_vectors` rewrites the file;
//! otherwise every vector is encoded and decoded again and compared.

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use tickwire_arena::InputCommand;
use tickwire_arena::messages::ClientInput;
use tickwire_wire::{decode_exact, encode_to_vec};

fn command(sequence: u16, move_x: f32, move_y: f32, aim: f32, buttons: u8) -> InputCommand {
    InputCommand {
        sequence,
        move_x,
        move_y,
        aim,
        buttons,
    }
}

/// Commands that cover the grids' ends, snapping, wrap-around sequences and the fire bit.
fn commands() -> Vec<(&'static str, InputCommand)> {
    vec![
        ("idle", command(0, 0.0, 0.0, 0.0, 0)),
        ("right_fire", command(1, 1.0, 0.0, 0.0, InputCommand::FIRE)),
        (
            "grid_ends",
            command(u16::MAX, -1.0, 1.0, -std::f32::consts::PI, 0),
        ),
        ("aim_pi", command(4660, 0.5, -0.25, std::f32::consts::PI, 0)),
        ("snapped_move", command(300, 0.3, -0.7, 1.0, 0)),
        ("snapped_aim", command(7, 0.0, 0.0, 2.5, InputCommand::FIRE)),
        (
            "diagonal",
            command(65000, 0.703125, 0.703125, -1.5707964, 0),
        ),
    ]
}

fn f32_json(value: f32) -> Value {
    json!(value.to_bits())
}

fn command_json(command: &InputCommand) -> Value {
    json!({
        "sequence": command.sequence,
        "move_x_bits": f32_json(command.move_x),
        "move_y_bits": f32_json(command.move_y),
        "aim_bits": f32_json(command.aim),
        "buttons": command.buttons,
    })
}

fn given_json(command: &InputCommand) -> Value {
    json!({
        "sequence": command.sequence,
        "move_x": command.move_x,
        "move_y": command.move_y,
        "aim": command.aim,
        "buttons": command.buttons,
    })
}

fn vectors() -> Value {
    let command_vectors: Vec<Value> = commands()
        .into_iter()
        .map(|(name, given)| {
            let bytes = encode_to_vec(&given).expect("every case encodes");
            let decoded: InputCommand = decode_exact(&bytes).expect("and decodes");
            json!({
                "name": name,
                "given": given_json(&given),
                "hex": hex::encode(&bytes),
                "decoded": command_json(&decoded),
            })
        })
        .collect();
    let messages: Vec<Value> = [
        ("no_ack_one_input", None, 1),
        ("ack_two_inputs", Some(120u32), 2),
        ("ack_four_inputs", Some(u32::MAX), 4),
    ]
    .into_iter()
    .map(|(name, ack, count)| {
        let mut message = ClientInput::new(ack);
        for (_, command) in commands().into_iter().take(count) {
            assert!(message.push(command));
        }
        let bytes = encode_to_vec(&message).expect("encodes");
        let decoded: ClientInput = decode_exact(&bytes).expect("decodes");
        json!({
            "name": name,
            "ack": ack,
            "inputs": decoded.inputs().iter().map(command_json).collect::<Vec<_>>(),
            "hex": hex::encode(&bytes),
        })
    })
    .collect();
    json!({
        "description": "InputCommand and ClientInput (channel 1) vectors from tickwire_arena; \
            floats as f32 bit patterns; format in docs/ARENA.md. Regenerate with \
            TICKWIRE_BLESS=1 cargo test -p tickwire-arena --test input_vectors.",
        "commands": command_vectors,
        "client_inputs": messages,
    })
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/input.json")
}

#[test]
fn input_vectors_match_the_file() {
    let computed = vectors();
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&computed).unwrap() + "\n";
        fs::write(path(), text).unwrap();
        return;
    }
    let stored: Value = serde_json::from_str(
        &fs::read_to_string(path()).expect("tests/vectors/input.json exists (bless it)"),
    )
    .unwrap();
    assert_eq!(
        stored, computed,
        "the input encoding changed; if on purpose, rerun with TICKWIRE_BLESS=1 and update \
         the TypeScript port"
    );
}

#[test]
fn every_stored_encoding_decodes_to_its_stored_command() {
    if std::env::var_os("TICKWIRE_BLESS").is_some() {
        return; // the other test is rewriting the file
    }
    let stored: Value = serde_json::from_str(&fs::read_to_string(path()).unwrap()).unwrap();
    for vector in stored["commands"].as_array().unwrap() {
        let bytes = hex::decode(vector["hex"].as_str().unwrap()).unwrap();
        let decoded: InputCommand = decode_exact(&bytes).unwrap();
        assert_eq!(
            command_json(&decoded),
            vector["decoded"],
            "{}",
            vector["name"]
        );
    }
}
