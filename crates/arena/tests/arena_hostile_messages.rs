//! Hostile bytes: every decoder of network bytes in the arena (the client's input and
//! reliable messages, the server's messages and snapshots as a client decodes them) refuses
//! garbage with an error and never panics; a mutated real snapshot is refused or decodes
//! within the format's bounds. (That the room counts these and kicks the sender is in
//! `arena_room.rs`.)

use std::sync::Arc;

use proptest::prelude::*;
use tickwire_arena::messages::{ClientInput, ClientMessage, ServerMessage};
use tickwire_arena::snapshot::{
    EntityIds, MAX_BULLETS, MAX_VIEW, SnapshotConfig, SnapshotDecoder, SnapshotEncoder,
    SnapshotSchema,
};
use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};
use tickwire_wire::{decode_exact, encode_to_vec};

/// A decoder holding a few real snapshots as baselines, and the last one's bytes.
fn decoder_with_baselines() -> (SnapshotDecoder, Vec<u8>) {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let config = WorldConfig::default();
    let schema = SnapshotSchema::new(map.size(), config.max_health).unwrap();
    let size = map.size();
    let mut world = World::new(map, config, 31).unwrap();
    let mut ids = EntityIds::new();
    for key in 0..8 {
        world.join(PlayerKey(key)).unwrap();
        ids.insert(PlayerKey(key)).unwrap();
    }
    let mut encoder = SnapshotEncoder::new(schema, size, SnapshotConfig::default(), 60).unwrap();
    let mut client = encoder.new_client();
    let mut decoder = SnapshotDecoder::new(schema, &SnapshotConfig::default());
    let mut buf = vec![0; 1100];
    let mut last = Vec::new();
    for sequence in 0..10u16 {
        let inputs: Vec<_> = (0..8)
            .map(|key| {
                (
                    PlayerKey(key),
                    InputCommand {
                        sequence,
                        move_x: 1.0,
                        aim: 0.5,
                        buttons: 1,
                        ..Default::default()
                    },
                )
            })
            .collect();
        world.step(&inputs);
        encoder.capture(&world, &ids);
        let len = encoder.encode(&mut client, 0, &mut buf).unwrap();
        decoder.decode(&buf[..len]).unwrap();
        client.handle_ack(decoder.newest().unwrap()).unwrap();
        last = buf[..len].to_vec();
    }
    (decoder, last)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic_any_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_exact::<ClientInput>(&bytes);
        let _ = decode_exact::<ClientMessage>(&bytes);
        let _ = decode_exact::<ServerMessage>(&bytes);
        let (mut decoder, _) = decoder_with_baselines();
        if let Ok(snapshot) = decoder.decode(&bytes) {
            prop_assert!(snapshot.entities.len() <= MAX_VIEW);
            prop_assert!(snapshot.bullets.len() <= MAX_BULLETS);
        }
    }

    #[test]
    fn a_mutated_snapshot_is_refused_or_stays_in_bounds(flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6)) {
        let (mut decoder, mut bytes) = decoder_with_baselines();
        for (index, bit) in flips {
            let i = index.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        if let Ok(snapshot) = decoder.decode(&bytes) {
            prop_assert!(snapshot.entities.len() <= MAX_VIEW);
            prop_assert!(snapshot.entities.windows(2).all(|w| w[0].id < w[1].id));
        }
    }

    #[test]
    fn client_inputs_round_trip(ack in proptest::option::of(any::<u32>()), count in 1usize..=4, sequence in any::<u16>()) {
        let mut input = ClientInput::new(ack);
        for i in 0..count {
            input.push(InputCommand { sequence: sequence.wrapping_sub(i as u16), move_x: 0.5, move_y: -1.0, aim: 1.0, buttons: 1 });
        }
        let bytes = encode_to_vec(&input).unwrap();
        let decoded: ClientInput = decode_exact(&bytes).unwrap();
        prop_assert_eq!(decoded.ack, ack);
        prop_assert_eq!(decoded.inputs().len(), count);
    }
}

#[test]
fn an_input_message_without_inputs_or_with_five_is_refused() {
    // count is 2 bits for 1..=4: there is no way to say 0 or 5, and a message cut short fails.
    let mut input = ClientInput::new(Some(9));
    for sequence in 0..4 {
        assert!(input.push(InputCommand {
            sequence,
            ..Default::default()
        }));
    }
    assert!(
        !input.push(InputCommand::default()),
        "a fifth input was taken"
    );
    let bytes = encode_to_vec(&input).unwrap();
    assert!(decode_exact::<ClientInput>(&bytes[..bytes.len() - 2]).is_err());
    assert!(
        encode_to_vec(&ClientInput::new(None)).is_err(),
        "an empty input message encoded"
    );
}
