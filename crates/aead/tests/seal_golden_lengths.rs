//! The C# SDK's length vectors (`clients/csharp/Tests~/vectors/chacha20poly1305_lengths.txt`):
//! for every plaintext length from 0 to 1,472 bytes, the tag this crate seals (checked
//! against `ring`), and one SHA-256 over every ciphertext. The C# test seals the same inputs
//! and compares. This test fails when the file is not what the code seals;
//! `TICKWIRE_BLESS=1 cargo test -p tickwire-aead --test seal_golden_lengths` rewrites it.

mod support;

use std::fmt::Write as _;
use std::path::PathBuf;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::digest::{Context, SHA256};
use support::backends::under_test;
use support::sweep;
use tickwire_aead::{SealBatch, TAG_BYTES};

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/csharp/Tests~/vectors/chacha20poly1305_lengths.txt")
}

fn blessing() -> bool {
    std::env::var_os("TICKWIRE_BLESS").is_some_and(|value| value == "1")
}

fn ring_seal(inputs: &sweep::Inputs) -> Vec<u8> {
    let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &inputs.key).unwrap());
    let mut sealed = inputs.plaintext.clone();
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(inputs.nonce),
            Aad::from(&inputs.aad),
            &mut sealed,
        )
        .unwrap();
    sealed.extend_from_slice(tag.as_ref());
    sealed
}

/// The file as every backend this host has seals the sweep, each in one batch.
fn expected_file() -> String {
    let packets: Vec<sweep::Inputs> = (0..=sweep::MAX_LEN).map(sweep::inputs).collect();
    let reference: Vec<Vec<u8>> = packets.iter().map(ring_seal).collect();
    for backend in under_test() {
        let mut buf = Vec::new();
        let mut batch = SealBatch::with_backend(backend);
        for p in &packets {
            batch.push(&p.key, &p.nonce, &p.aad, buf.len(), p.plaintext.len());
            buf.extend_from_slice(&p.plaintext);
            buf.extend_from_slice(&[0; TAG_BYTES]);
        }
        batch.seal(&mut buf);
        let mut rest = buf.as_slice();
        for (p, reference) in packets.iter().zip(&reference) {
            let (sealed, after) = rest.split_at(p.plaintext.len() + TAG_BYTES);
            assert!(
                sealed == reference.as_slice(),
                "{backend:?}: {} bytes differ from ring",
                p.plaintext.len()
            );
            rest = after;
        }
    }

    let mut file = String::from(
        "# ChaCha20-Poly1305 (RFC 8439) for every plaintext length L from 0 to 1472 bytes, as\n\
         # tickwire-aead seals it (every backend, checked against ring). Written by\n\
         # `TICKWIRE_BLESS=1 cargo test -p tickwire-aead --test seal_golden_lengths`, which\n\
         # fails without TICKWIRE_BLESS when this file is not what the code seals.\n\
         #\n\
         # Inputs for length L: SplitMix64 seeded with L (state += 0x9e3779b97f4a7c15;\n\
         # z = state; z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9; z = (z ^ z >> 27) *\n\
         # 0x94d049bb133111eb; output z ^ z >> 31), each output's 8 bytes little-endian in\n\
         # turn: the key (32 bytes), the nonce (12), the associated data (L mod 29), the\n\
         # plaintext (L).\n\
         #\n\
         # A line per length: L and the tag (hex). The last line: SHA-256 of every ciphertext\n\
         # (tags left out), lengths in order.\n",
    );
    let mut digest = Context::new(&SHA256);
    for (p, sealed) in packets.iter().zip(&reference) {
        let (ciphertext, tag) = sealed.split_at(p.plaintext.len());
        digest.update(ciphertext);
        writeln!(file, "{} {}", p.plaintext.len(), hex::encode(tag)).unwrap();
    }
    writeln!(
        file,
        "ciphertexts-sha256 {}",
        hex::encode(digest.finish().as_ref())
    )
    .unwrap();
    file
}

#[test]
fn the_csharp_length_vectors_are_what_every_backend_seals() {
    let expected = expected_file();
    let path = vectors_path();
    if blessing() {
        std::fs::write(&path, &expected).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; write it with TICKWIRE_BLESS=1 cargo test -p tickwire-aead --test seal_golden_lengths",
            path.display()
        )
    });
    for (number, (want, have)) in expected.lines().zip(on_disk.lines()).enumerate() {
        assert_eq!(
            have,
            want,
            "{} line {} is stale (TICKWIRE_BLESS=1 rewrites it)",
            path.display(),
            number + 1
        );
    }
    assert_eq!(
        on_disk.lines().count(),
        expected.lines().count(),
        "{}: lines",
        path.display()
    );
}
