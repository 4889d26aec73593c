//! Property tests of the wire format: every primitive and derived message round-trips,
//! the bit counter agrees with the writer, decoding is canonical, decoding in place equals
//! decoding fresh, and arbitrary bytes give `Ok` or `Err`, never a panic or an allocation
//! past a declared bound.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tickwire_wire::fixtures::{SampleEvent, SamplePlayer, SampleSnapshot, SeedEntity};
use tickwire_wire::{
    BitCounter, BitReader, BitWrite, BitWriter, Decode, Encode, Quantize, bit_len, decode_exact,
    decode_exact_in_place, encode_to_vec,
};

/// Grids the primitive property draws from (built at run time, so also checked here).
const GRIDS: [Quantize; 4] = [
    Quantize::new(0.0, 1.0, 0.25),
    Quantize::new(-512.0, 512.0, 0.01),
    Quantize::new(0.0, 1.0, 0.3),
    Quantize::new(-1.0e6, 1.0e6, 0.5),
];

/// One primitive write, with the value it writes.
#[derive(Debug, Clone)]
enum Op {
    Bits { bits: u32, value: u32 },
    Bool(bool),
    Uint { bits: u32, value: u64 },
    Range { min: i128, max: i128, value: i128 },
    Varint(u64),
    VarintSigned(i64),
    F32(u32),
    F64(u64),
    Quantized { grid: usize, step: u64 },
    Len { max: usize, value: usize },
    Bytes { max_len: usize, bytes: Vec<u8> },
    Str { max_len: usize, value: String },
    RawBytes(Vec<u8>),
    Align,
}

fn op() -> impl Strategy<Value = Op> {
    let span = prop_oneof![0..=20u64, any::<u64>()];
    prop_oneof![
        (0..=32u32)
            .prop_flat_map(|bits| (Just(bits), 0..=(u64::MAX >> (64 - bits.max(1))) as u32))
            .prop_map(|(bits, value)| Op::Bits {
                bits,
                value: if bits == 0 { 0 } else { value }
            }),
        any::<bool>().prop_map(Op::Bool),
        (1..=64u32)
            .prop_flat_map(|bits| (Just(bits), 0..=u64::MAX >> (64 - bits)))
            .prop_map(|(bits, value)| Op::Uint { bits, value }),
        (any::<i64>(), span)
            .prop_flat_map(|(min, span)| (Just(min), Just(span), 0..=span))
            .prop_map(|(min, span, offset)| {
                let min = i128::from(min);
                Op::Range {
                    min,
                    max: min + i128::from(span),
                    value: min + i128::from(offset),
                }
            }),
        prop_oneof![0..300u64, any::<u64>()].prop_map(Op::Varint),
        prop_oneof![-300..300i64, any::<i64>()].prop_map(Op::VarintSigned),
        any::<u32>().prop_map(Op::F32),
        any::<u64>().prop_map(Op::F64),
        (0..GRIDS.len())
            .prop_flat_map(|grid| (Just(grid), 0..=GRIDS[grid].last_step()))
            .prop_map(|(grid, step)| Op::Quantized { grid, step }),
        (0..=100_000usize)
            .prop_flat_map(|max| (Just(max), 0..=max))
            .prop_map(|(max, value)| Op::Len { max, value }),
        (vec(any::<u8>(), 0..40), 0..8usize).prop_map(|(bytes, extra)| Op::Bytes {
            max_len: bytes.len() + extra,
            bytes
        }),
        (".{0,12}", 0..8usize).prop_map(|(value, extra)| Op::Str {
            max_len: value.len() + extra,
            value
        }),
        vec(any::<u8>(), 0..12).prop_map(Op::RawBytes),
        Just(Op::Align),
    ]
}

fn write(op: &Op, writer: &mut impl BitWrite) {
    let result = match op {
        Op::Bits { bits, value } => writer.write_bits(*value, *bits),
        Op::Bool(value) => writer.write_bool(*value),
        Op::Uint { bits, value } => writer.write_uint(*value, *bits),
        Op::Range { min, max, value } => writer.write_range(*value, *min, *max),
        Op::Varint(value) => writer.write_varint(*value),
        Op::VarintSigned(value) => writer.write_varint_signed(*value),
        Op::F32(bits) => writer.write_f32(f32::from_bits(*bits)),
        Op::F64(bits) => writer.write_f64(f64::from_bits(*bits)),
        Op::Quantized { grid, step } => {
            let value = GRIDS[*grid].value_of(*step).expect("steps are on the grid");
            writer.write_quantized(value, &GRIDS[*grid])
        }
        Op::Len { max, value } => writer.write_len(*value, *max),
        Op::Bytes { max_len, bytes } => writer.write_bytes(bytes, *max_len),
        Op::Str { max_len, value } => writer.write_str(value, *max_len),
        Op::RawBytes(bytes) => writer.write_raw_bytes(bytes),
        Op::Align => writer.align(),
    };
    result.unwrap_or_else(|error| panic!("{op:?} failed to write: {error}"));
}

/// Reads `op` back and checks the value, returning a description of any mismatch.
fn read_and_check(op: &Op, reader: &mut BitReader<'_>) -> Result<(), String> {
    let mismatch = |read: String| Err(format!("{op:?} read back as {read}"));
    match op {
        Op::Bits { bits, value } => {
            let read = reader.read_bits(*bits).map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(read.to_string());
            }
        }
        Op::Bool(value) => {
            let read = reader.read_bool().map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(read.to_string());
            }
        }
        Op::Uint { bits, value } => {
            let read = reader.read_uint(*bits).map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(read.to_string());
            }
        }
        Op::Range { min, max, value } => {
            let read = reader.read_range(*min, *max).map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(read.to_string());
            }
        }
        Op::Varint(value) => {
            let read = reader.read_varint().map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(read.to_string());
            }
        }
        Op::VarintSigned(value) => {
            let read = reader.read_varint_signed().map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(read.to_string());
            }
        }
        Op::F32(bits) => {
            let read = reader.read_f32().map_err(|e| e.to_string())?;
            if read.to_bits() != *bits {
                return mismatch(format!("{:08x}", read.to_bits()));
            }
        }
        Op::F64(bits) => {
            let read = reader.read_f64().map_err(|e| e.to_string())?;
            if read.to_bits() != *bits {
                return mismatch(format!("{:016x}", read.to_bits()));
            }
        }
        Op::Quantized { grid, step } => {
            let expected = GRIDS[*grid].value_of(*step).map_err(|e| e.to_string())?;
            let read = reader
                .read_quantized(&GRIDS[*grid])
                .map_err(|e| e.to_string())?;
            if read.to_bits() != expected.to_bits() {
                return mismatch(format!("{read} (expected {expected})"));
            }
        }
        Op::Len { max, value } => {
            let read = reader.read_len(*max).map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(read.to_string());
            }
        }
        Op::Bytes { max_len, bytes } => {
            let mut read = Vec::new();
            reader
                .read_bytes_into(&mut read, *max_len)
                .map_err(|e| e.to_string())?;
            if read != *bytes {
                return mismatch(format!("{read:02x?}"));
            }
        }
        Op::Str { max_len, value } => {
            let mut read = String::new();
            reader
                .read_string_into(&mut read, *max_len)
                .map_err(|e| e.to_string())?;
            if read != *value {
                return mismatch(format!("{read:?}"));
            }
        }
        Op::RawBytes(bytes) => {
            let mut read = vec![0; bytes.len()];
            reader
                .read_raw_bytes(&mut read)
                .map_err(|e| e.to_string())?;
            if read != *bytes {
                return mismatch(format!("{read:02x?}"));
            }
        }
        Op::Align => reader.align().map_err(|e| e.to_string())?,
    }
    Ok(())
}

/// Steps on a grid, mapped to the exact values they decode to.
fn on_grid(grid: Quantize) -> impl Strategy<Value = f32> {
    (0..=grid.last_step()).prop_map(move |step| grid.value_of(step).expect("on the grid"))
}

fn seed_entity() -> impl Strategy<Value = SeedEntity> {
    let stat = || [0..=1000u16, 0..=1000u16];
    (".{0,8}", stat(), stat(), stat(), any::<bool>())
        .prop_filter("names are at most 32 bytes", |(name, ..)| name.len() <= 32)
        .prop_map(|(name, health, mana, stamina, dead)| SeedEntity {
            name,
            health,
            mana,
            stamina,
            dead,
        })
}

fn sample_player() -> impl Strategy<Value = SamplePlayer> {
    let position = Quantize::new(-512.0, 512.0, 0.01);
    (
        0..4096u16,
        [on_grid(position), on_grid(position)],
        0..=100u8,
        any::<i32>(),
        proptest::option::of("[a-z]{0,16}"),
        any::<f32>().prop_filter("NaN never equals itself", |speed| !speed.is_nan()),
    )
        .prop_map(|(id, position, health, score, name, speed)| SamplePlayer {
            id,
            position,
            health,
            score,
            name,
            speed,
        })
}

fn sample_event() -> impl Strategy<Value = SampleEvent> {
    prop_oneof![
        (0..4096u16).prop_map(|id| SampleEvent::Joined { id }),
        "[ -~]{0,64}".prop_map(SampleEvent::Chat),
        on_grid(Quantize::new(0.0, 1.0, 0.001)).prop_map(|angle| SampleEvent::Shot { angle }),
        Just(SampleEvent::Ended),
    ]
}

fn sample_snapshot() -> impl Strategy<Value = SampleSnapshot> {
    (
        any::<u64>(),
        vec(sample_player(), 0..8),
        vec(sample_event(), 0..8),
        vec(any::<u8>(), 0..=32),
    )
        .prop_map(|(tick, players, events, blob)| SampleSnapshot {
            tick,
            players,
            events,
            blob,
        })
}

/// Encodes with the writer and checks the counter measured the same number of bits.
fn encode_checked<T: Encode>(value: &T) -> Result<Vec<u8>, TestCaseError> {
    let bytes = encode_to_vec(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut buf = vec![0u8; bytes.len()];
    let mut writer = BitWriter::new(&mut buf);
    value
        .encode(&mut writer)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let counted = bit_len(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(
        writer.bits_written(),
        counted,
        "counter and writer disagree"
    );
    prop_assert_eq!(bytes.len(), counted.div_ceil(8));
    Ok(bytes)
}

/// Decoding is canonical: whatever decodes re-encodes to the same bytes. Also checks that
/// decoding over `prior` gives the same outcome as decoding fresh.
fn check_decode<T: Encode + Decode + PartialEq + std::fmt::Debug + Clone>(
    bytes: &[u8],
    prior: &T,
) -> Result<Option<T>, TestCaseError> {
    let fresh = decode_exact::<T>(bytes);
    let mut in_place = prior.clone();
    let in_place_result = decode_exact_in_place(&mut in_place, bytes);
    match (&fresh, &in_place_result) {
        (Ok(fresh), Ok(())) => {
            // Compared through their encodings, not `PartialEq`: a decoded NaN float is never
            // equal to itself, yet both decodes must hold the same bits.
            let again = encode_to_vec(fresh).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&again[..], bytes, "decoded value re-encodes differently");
            let again_in_place =
                encode_to_vec(&in_place).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(
                &again_in_place[..],
                bytes,
                "in-place decode differs from fresh"
            );
        }
        (Err(fresh), Err(in_place)) => {
            prop_assert_eq!(
                fresh.kind,
                in_place.kind,
                "in-place decode failed differently"
            );
        }
        (fresh, in_place) => {
            return Err(TestCaseError::fail(format!(
                "fresh decode gave {fresh:?}, in place {in_place:?}"
            )));
        }
    }
    Ok(fresh.ok())
}

fn check_snapshot_bounds(snapshot: &SampleSnapshot) -> Result<(), TestCaseError> {
    prop_assert!(snapshot.players.capacity() <= 64, "players over-allocated");
    prop_assert!(snapshot.events.capacity() <= 16, "events over-allocated");
    prop_assert!(snapshot.blob.capacity() <= 32, "blob over-allocated");
    for player in &snapshot.players {
        if let Some(name) = &player.name {
            prop_assert!(name.capacity() <= 16, "name over-allocated");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        // Relative to the crate root, where cargo runs tests; the default derives the path
        // from `file!()`, which is workspace-relative and silently fails to persist.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/wire_properties.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn primitive_sequences_round_trip_and_count_exactly(ops in vec(op(), 0..24)) {
        let mut counter = BitCounter::default();
        for op in &ops {
            write(op, &mut counter);
        }
        let mut buf = vec![0u8; counter.bytes()];
        let mut writer = BitWriter::new(&mut buf);
        for op in &ops {
            write(op, &mut writer);
        }
        prop_assert_eq!(writer.bits_written(), counter.bits_written());
        let len = writer.finish().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(len, counter.bytes(), "the counter's byte count fits exactly");

        let mut reader = BitReader::new(&buf[..len]);
        for op in &ops {
            read_and_check(op, &mut reader).map_err(TestCaseError::fail)?;
        }
        prop_assert_eq!(reader.bits_read(), counter.bits_written());
        reader.finish().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn seed_entities_round_trip(entity in seed_entity(), prior in seed_entity()) {
        let bytes = encode_checked(&entity)?;
        prop_assert!(bytes.len() <= 1 + 32 + 8, "entity took {} bytes", bytes.len());
        let decoded = check_decode(&bytes, &prior)?;
        prop_assert_eq!(decoded, Some(entity));
    }

    #[test]
    fn snapshots_round_trip(snapshot in sample_snapshot(), prior in sample_snapshot()) {
        let bytes = encode_checked(&snapshot)?;
        let decoded = check_decode(&bytes, &prior)?;
        prop_assert_eq!(decoded, Some(snapshot));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_decode_canonically(
        bytes in vec(any::<u8>(), 0..200),
        prior in sample_snapshot(),
    ) {
        if let Some(snapshot) = check_decode(&bytes, &prior)? {
            check_snapshot_bounds(&snapshot)?;
        }
        check_decode(&bytes, &SeedEntity::casey())?;
        check_decode(&bytes, &SampleEvent::Ended)?;
        check_decode(&bytes, &[0u64; 3])?;
        check_decode(&bytes, &Some(true))?;
    }

    #[test]
    fn damaged_snapshots_never_panic_and_decode_canonically(
        snapshot in sample_snapshot(),
        flips in vec((any::<prop::sample::Index>(), 0..8u8), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = encode_checked(&snapshot)?;
        if !bytes.is_empty() {
            for (at, bit) in flips {
                let at = at.index(bytes.len());
                bytes[at] ^= 1 << bit;
            }
            if truncate {
                bytes.truncate(cut.index(bytes.len()));
            }
        }
        if let Some(decoded) = check_decode(&bytes, &SampleSnapshot::default())? {
            check_snapshot_bounds(&decoded)?;
        }
    }
}
