//! Seals a batch of packets made from the input (keys, nonces, associated data, lengths and
//! bytes all from it) with every backend this processor runs, and checks each packet
//! against `ring` sealing it alone: the batch's keystream lanes, its block boundaries and its
//! Poly1305 tails must give RFC 8439's bytes for any mix of packets.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use tickwire_aead::{Backend, SealBatch, TAG_BYTES};

struct Packet<'a> {
    key: [u8; 32],
    nonce: [u8; 12],
    aad: &'a [u8],
    plaintext: &'a [u8],
}

/// Each packet: a header byte (low 3 bits: key seed; next 5: associated data length), two
/// length bytes (plaintext up to 2047), then that much data, cut short where the input ends.
fn packets(mut data: &[u8]) -> Vec<Packet<'_>> {
    let mut packets = Vec::new();
    while data.len() >= 3 && packets.len() < 40 {
        let (head, rest) = data.split_at(3);
        let aad_len = usize::from(head[0] >> 3).min(rest.len());
        let (aad, rest) = rest.split_at(aad_len);
        let len = (usize::from(u16::from_le_bytes([head[1], head[2]])) & 0x7ff).min(rest.len());
        let (plaintext, rest) = rest.split_at(len);
        let seed = head[0] & 7;
        let mut nonce = [seed; 12];
        nonce[..2].copy_from_slice(&(packets.len() as u16).to_le_bytes());
        packets.push(Packet {
            key: [seed.wrapping_mul(37); 32],
            nonce,
            aad,
            plaintext,
        });
        data = rest;
    }
    packets
}

fuzz_target!(|data: &[u8]| {
    let packets = packets(data);
    let mut buf = Vec::new();
    let mut starts = Vec::new();
    let mut expected = Vec::new();
    for packet in &packets {
        starts.push(buf.len());
        buf.extend_from_slice(packet.plaintext);
        buf.extend_from_slice(&[0; TAG_BYTES]);
        let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &packet.key).unwrap());
        let mut sealed = packet.plaintext.to_vec();
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(packet.nonce),
                Aad::from(packet.aad),
                &mut sealed,
            )
            .unwrap();
        expected.extend_from_slice(&sealed);
        expected.extend_from_slice(tag.as_ref());
    }
    for backend in [
        Backend::Portable,
        Backend::Ring,
        Backend::Avx512,
        Backend::Avx2,
    ] {
        if !backend.is_available() {
            continue;
        }
        let mut sealed = buf.clone();
        let mut batch = SealBatch::with_backend(backend);
        for (packet, &start) in packets.iter().zip(&starts) {
            batch.push(
                &packet.key,
                &packet.nonce,
                packet.aad,
                start,
                packet.plaintext.len(),
            );
        }
        batch.seal(&mut sealed);
        assert!(sealed == expected, "{backend:?} differs from ring");
    }
});
