//! Divan micro-benchmarks of the seed entity: `cargo bench -p tickwire --bench wire_entity`.

use divan::{Bencher, black_box};
use tickwire_wire::fixtures::SeedEntity;
use tickwire_wire::{decode_exact_in_place, encode_to_slice};

fn main() {
    divan::main();
}

#[divan::bench]
fn encode(bencher: Bencher<'_, '_>) {
    let entity = SeedEntity::casey();
    let mut buf = [0u8; 64];
    bencher.bench_local(|| encode_to_slice(black_box(&entity), &mut buf).expect("fits"));
}

#[divan::bench]
fn decode_in_place(bencher: Bencher<'_, '_>) {
    let mut buf = [0u8; 64];
    let len = encode_to_slice(&SeedEntity::casey(), &mut buf).expect("fits");
    let mut decoded = SeedEntity::default();
    bencher.bench_local(|| {
        decode_exact_in_place(&mut decoded, black_box(&buf[..len])).expect("decodes");
    });
}

#[divan::bench]
fn roundtrip_in_place(bencher: Bencher<'_, '_>) {
    let entity = SeedEntity::casey();
    let mut buf = [0u8; 64];
    let mut decoded = SeedEntity::default();
    bencher.bench_local(|| {
        let len = encode_to_slice(black_box(&entity), &mut buf).expect("fits");
        decode_exact_in_place(&mut decoded, black_box(&buf[..len])).expect("decodes");
    });
}
