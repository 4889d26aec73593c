//! Every backend's output, byte for byte: RFC 8439's AEAD vectors, every length up to a
//! full datagram, and random batches, against `ring`'s ChaCha20-Poly1305.

mod support;

use proptest::prelude::*;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use support::backends::{not_run, under_test};
use support::rfc8439::{IETF_SUBMISSION, IETF_SUBMISSION_CIPHERTEXT, SUNSCREEN};
use support::sweep::{self, Inputs};
use tickwire_aead::{Backend, MAX_PLAINTEXT_BYTES, SealBatch, TAG_BYTES};

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

fn from_hex<const N: usize>(hex: &str) -> [u8; N] {
    hex::decode(hex).unwrap().try_into().unwrap()
}

/// `plaintext` sealed alone by `backend`: its ciphertext and tag.
fn seal_alone(
    backend: Backend,
    key: &[u8; 32],
    nonce: &[u8; 12],
    aad: &[u8],
    plaintext: &[u8],
) -> Vec<u8> {
    let mut buf = plaintext.to_vec();
    buf.extend_from_slice(&[0; TAG_BYTES]);
    let mut batch = SealBatch::with_backend(backend);
    batch.push(key, nonce, aad, 0, plaintext.len());
    batch.seal(&mut buf);
    buf
}

/// RFC 8439, 2.8.2: the "sunscreen" message.
#[test]
fn rfc_8439_2_8_2_by_every_backend() {
    let plaintext = SUNSCREEN;
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
    for backend in under_test() {
        let buf = seal_alone(backend, &key, &nonce, &aad, plaintext);
        assert_eq!(
            hex::encode(&buf[..plaintext.len()]),
            ciphertext,
            "{backend:?}"
        );
        assert_eq!(hex::encode(&buf[plaintext.len()..]), tag, "{backend:?}");
    }
}

/// RFC 8439, 2.4.2 and A.2 vector 2, whose keystream starts at counter 1 as the AEAD's does:
/// their ciphertexts are the RFC's, and their tags (which it does not give) `ring`'s.
#[test]
fn rfc_8439_2_4_2_and_a_2_ciphertexts_by_every_backend() {
    struct Vector {
        name: &'static str,
        key: [u8; 32],
        nonce: [u8; 12],
        plaintext: &'static [u8],
        ciphertext: &'static str,
    }
    let vectors = [
        Vector {
            name: "2.4.2",
            key: from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
            nonce: from_hex("000000000000004a00000000"),
            plaintext: SUNSCREEN,
            ciphertext: "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b\
             f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8\
             07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736\
             5af90bbf74a35be6b40b8eedf2785e42874d",
        },
        Vector {
            name: "A.2 vector 2",
            key: from_hex("0000000000000000000000000000000000000000000000000000000000000001"),
            nonce: from_hex("000000000000000000000002"),
            plaintext: IETF_SUBMISSION,
            ciphertext: IETF_SUBMISSION_CIPHERTEXT,
        },
    ];
    for backend in under_test() {
        for v in &vectors {
            let sealed = seal_alone(backend, &v.key, &v.nonce, b"aad", v.plaintext);
            let (text, tag) = sealed.split_at(v.plaintext.len());
            assert_eq!(hex::encode(text), v.ciphertext, "{backend:?}, {}", v.name);
            let expected = ring_seal(&v.key, &v.nonce, b"aad", v.plaintext);
            let expected_tag = &expected[v.plaintext.len()..];
            assert_eq!(tag, expected_tag, "{backend:?}, {}: tag", v.name);
        }
    }
}

/// RFC 8439, A.5: the AEAD decryption vector, sealed from its plaintext (265 bytes: past
/// the AVX2 lanes' 256) back to the RFC's ciphertext and tag.
#[test]
fn rfc_8439_a_5_by_every_backend() {
    let key: [u8; 32] =
        from_hex("1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0");
    let nonce: [u8; 12] = from_hex("000000000102030405060708");
    let aad = hex::decode("f33388860000000000004e91").unwrap();
    let plaintext = hex::decode(
        "496e7465726e65742d4472616674732061726520647261667420646f63756d65\
         6e74732076616c696420666f722061206d6178696d756d206f6620736978206d\
         6f6e74687320616e64206d617920626520757064617465642c207265706c6163\
         65642c206f72206f62736f6c65746564206279206f7468657220646f63756d65\
         6e747320617420616e792074696d652e20497420697320696e617070726f7072\
         6961746520746f2075736520496e7465726e65742d4472616674732061732072\
         65666572656e6365206d6174657269616c206f7220746f206369746520746865\
         6d206f74686572207468616e206173202fe2809c776f726b20696e2070726f67\
         726573732e2fe2809d",
    )
    .unwrap();
    assert_eq!(plaintext.len(), 265);
    assert!(
        String::from_utf8(plaintext.clone())
            .unwrap()
            .starts_with("Internet-Drafts are draft documents valid for a maximum of six months"),
        "the RFC's plaintext"
    );
    let sealed = "64a0861575861af460f062c79be643bd5e805cfd345cf389f108670ac76c8cb2\
                  4c6cfc18755d43eea09ee94e382d26b0bdb7b73c321b0100d4f03b7f355894cf\
                  332f830e710b97ce98c8a84abd0b948114ad176e008d33bd60f982b1ff37c855\
                  9797a06ef4f0ef61c186324e2b3506383606907b6a7c02b0f9f6157b53c867e4\
                  b9166c767b804d46a59b5216cde7a4e99040c5a40433225ee282a1b0a06c523e\
                  af4534d7f83fa1155b0047718cbc546a0d072b04b3564eea1b422273f548271a\
                  0bb2316053fa76991955ebd63159434ecebb4e466dae5a1073a6727627097a10\
                  49e617d91d361094fa68f0ff77987130305beaba2eda04df997b714d6c6f2c29\
                  a6ad5cb4022b02709b\
                  eead9d67890cbb22392336fea1851f38";
    for backend in under_test() {
        let buf = seal_alone(backend, &key, &nonce, &aad, &plaintext);
        assert_eq!(hex::encode(buf), sealed, "{backend:?}: ciphertext and tag");
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
}

/// Every length from none to a full datagram's 1,472 bytes (each block boundary, the AVX2
/// lanes' 256 and `ring`'s 257), by every backend: each packet alone between bytes that
/// must stay as they are, then all of them in one batch (lanes and `ring` in one call,
/// packets split across rows of sixteen blocks), each exactly as `ring` seals it.
#[test]
fn every_length_to_a_full_datagram_seals_as_ring_does() {
    const GUARD: usize = 3;
    let packets: Vec<Inputs> = (0..=sweep::MAX_LEN).map(sweep::inputs).collect();
    let expected: Vec<Vec<u8>> = packets
        .iter()
        .map(|p| ring_seal(&p.key, &p.nonce, &p.aad, &p.plaintext))
        .collect();
    for backend in under_test() {
        let mut batch = SealBatch::with_backend(backend);
        for (p, expected) in packets.iter().zip(&expected) {
            let len = p.plaintext.len();
            let mut buf = vec![0xEE; GUARD];
            buf.extend_from_slice(&p.plaintext);
            buf.extend_from_slice(&[0; TAG_BYTES]);
            buf.extend_from_slice(&[0xEE; GUARD]);
            batch.push(&p.key, &p.nonce, &p.aad, GUARD, len);
            batch.seal(&mut buf);
            let sealed = &buf[GUARD..GUARD + len + TAG_BYTES];
            assert!(
                sealed == expected.as_slice(),
                "{backend:?}: {len} bytes alone differ from ring from byte {:?}",
                first_difference(sealed, expected)
            );
            assert!(
                buf[..GUARD] == [0xEE; GUARD] && buf[GUARD + len + TAG_BYTES..] == [0xEE; GUARD],
                "{backend:?}: sealing {len} bytes wrote outside them"
            );
        }

        let mut buf = Vec::new();
        let mut starts = Vec::new();
        for p in &packets {
            starts.push(buf.len());
            buf.extend_from_slice(&p.plaintext);
            buf.extend_from_slice(&[0; TAG_BYTES]);
        }
        for (p, &start) in packets.iter().zip(&starts) {
            batch.push(&p.key, &p.nonce, &p.aad, start, p.plaintext.len());
        }
        batch.seal(&mut buf);
        for ((p, &start), expected) in packets.iter().zip(&starts).zip(&expected) {
            let len = p.plaintext.len();
            let sealed = &buf[start..start + len + TAG_BYTES];
            assert!(
                sealed == expected.as_slice(),
                "{backend:?}: {len} bytes in a batch of every length differ from ring from byte {:?}",
                first_difference(sealed, expected)
            );
        }
    }
}

/// What `TICKWIRE_REQUIRE_ALL_BACKENDS=1` fails on: a backend the processor has that the
/// tests did not run.
#[test]
fn a_backend_the_processor_has_but_no_test_ran_is_named() {
    use Backend::{Avx2, Avx512, Portable, Ring};
    assert_eq!(
        not_run(&[Avx512, Avx2], &[Portable, Ring, Avx2]),
        [Avx512],
        "AVX-512 on the processor, not run"
    );
    assert_eq!(not_run(&[Avx2], &[Portable, Ring, Avx2]), []);
    assert_eq!(
        not_run(&[], &[Portable, Ring]),
        [],
        "a processor with neither"
    );
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
        for backend in under_test() {
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

/// The longest plaintext passes the length check (and then fails the buffer's, no buffer
/// being that large); one byte more is refused by length, before anything is sealed.
#[cfg(target_pointer_width = "64")]
#[test]
#[should_panic(expected = "past the buffer")]
fn the_longest_plaintext_passes_the_length_check() {
    let mut buf = [0u8; 40];
    let mut batch = SealBatch::new();
    batch.push(&[0; 32], &[0; 12], b"", 0, MAX_PLAINTEXT_BYTES as usize);
    batch.seal(&mut buf);
}

#[cfg(target_pointer_width = "64")]
#[test]
#[should_panic(expected = "exceeds max 274877906880")]
fn a_plaintext_past_the_longest_is_refused() {
    let mut buf = [0u8; 40];
    let mut batch = SealBatch::new();
    batch.push(&[0; 32], &[0; 12], b"", 0, MAX_PLAINTEXT_BYTES as usize + 1);
    batch.seal(&mut buf);
}
