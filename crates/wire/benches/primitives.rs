//! Divan micro-benchmarks of the wire primitives, 64 values per iteration:
//! `cargo bench -p tickwire-wire --bench primitives`.

use divan::{Bencher, black_box};
use tickwire_wire::{BitReader, BitWrite, BitWriter, Quantize};

fn main() {
    divan::main();
}

const VALUES: usize = 64;
const POSITION: Quantize = Quantize::new(-512.0, 512.0, 0.01);

fn values() -> [u64; VALUES] {
    std::array::from_fn(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54)
}

/// Encodes `VALUES` values with `write` and returns the bytes.
fn encoded(write: impl Fn(&mut BitWriter<'_>, u64)) -> Vec<u8> {
    let mut buf = vec![0u8; 1024];
    let mut writer = BitWriter::new(&mut buf);
    for value in values() {
        write(&mut writer, value);
    }
    let len = writer.finish().expect("fits");
    buf.truncate(len);
    buf
}

#[divan::bench]
fn write_range_10_bits(bencher: Bencher<'_, '_>) {
    let values = values();
    let mut buf = [0u8; 1024];
    bencher.bench_local(|| {
        let mut writer = BitWriter::new(&mut buf);
        for &value in black_box(&values) {
            writer
                .write_range(i128::from(value), 0, 1023)
                .expect("in range");
        }
        writer.finish().expect("fits")
    });
}

#[divan::bench]
fn read_range_10_bits(bencher: Bencher<'_, '_>) {
    let bytes = encoded(|writer, value| {
        writer
            .write_range(i128::from(value), 0, 1023)
            .expect("in range");
    });
    bencher.bench_local(|| {
        let mut reader = BitReader::new(black_box(&bytes));
        let mut sum = 0i128;
        for _ in 0..VALUES {
            sum += reader.read_range(0, 1023).expect("decodes");
        }
        sum
    });
}

#[divan::bench]
fn write_varint(bencher: Bencher<'_, '_>) {
    let values = values().map(|value| value * value * 97);
    let mut buf = [0u8; 1024];
    bencher.bench_local(|| {
        let mut writer = BitWriter::new(&mut buf);
        for &value in black_box(&values) {
            writer.write_varint(value).expect("fits");
        }
        writer.finish().expect("fits")
    });
}

#[divan::bench]
fn read_varint(bencher: Bencher<'_, '_>) {
    let bytes = encoded(|writer, value| writer.write_varint(value * value * 97).expect("fits"));
    bencher.bench_local(|| {
        let mut reader = BitReader::new(black_box(&bytes));
        let mut sum = 0u64;
        for _ in 0..VALUES {
            sum = sum.wrapping_add(reader.read_varint().expect("decodes"));
        }
        sum
    });
}

#[divan::bench]
fn write_quantized(bencher: Bencher<'_, '_>) {
    let values = values().map(|value| (value % 1000) as f32 - 500.0);
    let mut buf = [0u8; 1024];
    bencher.bench_local(|| {
        let mut writer = BitWriter::new(&mut buf);
        for &value in black_box(&values) {
            writer.write_quantized(value, &POSITION).expect("in range");
        }
        writer.finish().expect("fits")
    });
}

#[divan::bench]
fn read_quantized(bencher: Bencher<'_, '_>) {
    let bytes = encoded(|writer, value| {
        writer
            .write_quantized((value % 1000) as f32 - 500.0, &POSITION)
            .expect("in range");
    });
    bencher.bench_local(|| {
        let mut reader = BitReader::new(black_box(&bytes));
        let mut sum = 0f32;
        for _ in 0..VALUES {
            sum += reader.read_quantized(&POSITION).expect("decodes");
        }
        sum
    });
}

#[divan::bench(args = [8, 64, 255])]
fn string_roundtrip_unaligned(bencher: Bencher<'_, '_>, len: usize) {
    let text = "a".repeat(len);
    let mut buf = [0u8; 512];
    let mut out = String::with_capacity(256);
    bencher.bench_local(|| {
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bool(true).expect("fits");
        writer.write_str(black_box(&text), 255).expect("fits");
        let len = writer.finish().expect("fits");
        let mut reader = BitReader::new(&buf[..len]);
        reader.read_bool().expect("decodes");
        reader.read_string_into(&mut out, 255).expect("decodes");
    });
}
