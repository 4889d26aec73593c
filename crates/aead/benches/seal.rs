//! Sealing 16 packets of one length, as a server's send turn seals them: in one batch by
//! each backend this machine has, and one by one with `ring`. Divan prints the time per
//! 16 packets: `cargo bench -p tickwire-aead --bench seal`.

use divan::{Bencher, black_box};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use tickwire_aead::{Backend, SealBatch, TAG_BYTES};

fn main() {
    divan::main();
}

const PACKETS: usize = 16;
/// `bench udp`'s datagram (45 bytes of plaintext), a hobo snapshot (about 80), longer ones up
/// to a full datagram.
const LENGTHS: [usize; 7] = [45, 80, 200, 256, 320, 500, 1100];
/// The protocol's associated data: version, protocol id, prefix.
const AAD: [u8; 22] = [7; 22];

fn nonce(i: usize) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&(i as u64).to_le_bytes());
    nonce
}

fn batch(bencher: Bencher<'_, '_>, backend: Backend, len: usize) {
    let stride = len + TAG_BYTES;
    let mut buf = vec![0xA5u8; PACKETS * stride];
    let mut batch = SealBatch::with_backend(backend);
    bencher.bench_local(|| {
        for i in 0..PACKETS {
            batch.push(&[i as u8; 32], &nonce(i), &AAD, i * stride, len);
        }
        batch.seal(black_box(&mut buf));
    });
}

#[divan::bench(args = LENGTHS)]
fn batch_avx512(bencher: Bencher<'_, '_>, len: usize) {
    if Backend::Avx512.is_available() {
        batch(bencher, Backend::Avx512, len);
    }
}

#[divan::bench(args = LENGTHS)]
fn batch_avx2(bencher: Bencher<'_, '_>, len: usize) {
    if Backend::Avx2.is_available() {
        batch(bencher, Backend::Avx2, len);
    }
}

/// The batch through `ring`, where there is neither AVX-512 nor AVX2.
#[divan::bench(args = LENGTHS)]
fn batch_ring(bencher: Bencher<'_, '_>, len: usize) {
    batch(bencher, Backend::Ring, len);
}

#[divan::bench(args = LENGTHS)]
fn batch_portable(bencher: Bencher<'_, '_>, len: usize) {
    batch(bencher, Backend::Portable, len);
}

/// `ring`, one packet at a time, a key object made for each (as a connection that keeps
/// its key as 32 bytes does).
#[divan::bench(args = LENGTHS)]
fn ring_one_by_one(bencher: Bencher<'_, '_>, len: usize) {
    let mut buf = vec![0xA5u8; len];
    bencher.bench_local(|| {
        for i in 0..PACKETS {
            let key =
                LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &[i as u8; 32]).unwrap());
            let tag = key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce(i)),
                    Aad::from(&AAD),
                    &mut buf,
                )
                .unwrap();
            let _ = black_box(tag);
        }
    });
}
