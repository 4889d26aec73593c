//! Every backend's output, byte for byte: RFC 8439's AEAD vector, and random batches
//! against `ring`'s ChaCha20-Poly1305.

use proptest::prelude::*;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use tickwire_aead::{Backend, SealBatch, TAG_BYTES};

const BACKENDS: [Backend; 4] = [
    Backend::Portable,
    Backend::Ring,
    Backend::Avx512,
    Backend::Avx2,
];

fn ring_seal(key: &[u8; 32], nonce: &[u8; 12], aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).unwrap());
    let mut sealed = plaintext.to_vec();
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(*nonce),
            Aad::from(aad),
            &mut sealed,
        )
        .unwrap();
    sealed.extend_from_slice(tag.as_ref());
    sealed
}

/// RFC 8439, 2.8.2: the "sunscreen" message.
#[test]
fn rfc_8439_2_8_2_by_every_backend() {
    let plaintext = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    let aad = hex::decode("50515253c0c1c2c3c4c5c6c7").unwrap();
    let key: [u8; 32] =
        hex::decode("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
            .unwrap()
            .try_into()
            .unwrap();
    let nonce: [u8; 12] = hex::decode("070000004041424344454647")
        .unwrap()
        .try_into()
        .unwrap();
    let ciphertext = "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6\
                      3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36\
                      92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
                      3ff4def08e4b7a9de576d26586cec64b6116";
    let tag = "1ae10b594f09e26a7e902ecbd0600691";
    for backend in BACKENDS.into_iter().filter(|b| b.is_available()) {
        let mut buf = plaintext.to_vec();
        buf.extend_from_slice(&[0; TAG_BYTES]);
        let mut batch = SealBatch::with_backend(backend);
        batch.push(&key, &nonce, &aad, 0, plaintext.len());
        batch.seal(&mut buf);
        assert_eq!(
            hex::encode(&buf[..plaintext.len()]),
            ciphertext,
            "{backend:?}"
        );
        assert_eq!(hex::encode(&buf[plaintext.len()..]), tag, "{backend:?}");
    }
}

#[derive(Debug, Clone)]
struct Packet {
    key: [u8; 32],
    nonce: [u8; 12],
    aad: Vec<u8>,
    plaintext: Vec<u8>,
    /// Bytes of other data before it in the buffer, which sealing must leave alone.
    gap: usize,
}

fn packet() -> impl Strategy<Value = Packet> {
    // Lengths around the block boundaries, and whole datagrams.
    let len = prop_oneof![0usize..130, 1000usize..1500];
    (
        any::<[u8; 32]>(),
        any::<[u8; 12]>(),
        proptest::collection::vec(any::<u8>(), 0..40),
        len.prop_flat_map(|len| proptest::collection::vec(any::<u8>(), len)),
        0usize..5,
    )
        .prop_map(|(key, nonce, aad, plaintext, gap)| Packet {
            key,
            nonce,
            aad,
            plaintext,
            gap,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A batch of up to 40 packets (several rounds of sixteen blocks, packets split across
    /// them) seals each exactly as `ring` seals it alone, and touches nothing else.
    #[test]
    fn a_batch_seals_every_packet_as_ring_does(packets in proptest::collection::vec(packet(), 1..40)) {
        let mut buf = Vec::new();
        let mut starts = Vec::new();
        for packet in &packets {
            buf.extend(std::iter::repeat_n(0xEE, packet.gap));
            starts.push(buf.len());
            buf.extend_from_slice(&packet.plaintext);
            buf.extend_from_slice(&[0; TAG_BYTES]);
        }
        buf.extend_from_slice(&[0xEE; 3]);
        for backend in BACKENDS.into_iter().filter(|b| b.is_available()) {
            let mut sealed = buf.clone();
            let mut batch = SealBatch::with_backend(backend);
            for (packet, &start) in packets.iter().zip(&starts) {
                batch.push(&packet.key, &packet.nonce, &packet.aad, start, packet.plaintext.len());
            }
            prop_assert_eq!(batch.len(), packets.len());
            batch.seal(&mut sealed);
            prop_assert!(batch.is_empty());
            let mut expected = Vec::new();
            for packet in &packets {
                expected.extend(std::iter::repeat_n(0xEE, packet.gap));
                expected.extend(ring_seal(&packet.key, &packet.nonce, &packet.aad, &packet.plaintext));
            }
            expected.extend_from_slice(&[0xEE; 3]);
            prop_assert!(sealed == expected, "{:?} differs from ring", backend);
        }
    }
}

#[test]
#[should_panic(expected = "past the buffer")]
fn a_packet_past_the_buffer_is_refused_before_anything_is_sealed() {
    let mut buf = [0u8; 40];
    let mut batch = SealBatch::new();
    batch.push(&[0; 32], &[0; 12], b"", 0, 10);
    batch.push(&[0; 32], &[1; 12], b"", 20, 10);
    batch.seal(&mut buf);
}
