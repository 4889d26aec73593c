//! `tickwire bench wire`: seed 002's entity through tickwire's wire format and, in the same
//! run, through bitcode as a reference point.
//!
//! Seed 002 (Fiedler-style serialization in Go) writes and reads
//! `{Name: "Casey", Health: [100,100], Mana: [50,50], Stamina: [75,75], Dead: false}`;
//! measured on this machine with the seed's own `go test -bench` it costs 19 bytes, about
//! 730 ns and 30 allocations per round trip.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde::Serialize;
use tickwire_wire::fixtures::SeedEntity;
use tickwire_wire::{bit_len, decode_exact, decode_exact_in_place, encode_to_slice};

use tickwire_alloc_count as alloc_count;

/// The seed's figures, measured here with its own Go benchmark.
pub const ANCHOR: Figures = Figures {
    bytes: 19,
    ns_per_roundtrip: 730.0,
    allocs_per_roundtrip: 30.0,
};

/// What issue 2 asks of the wire format.
pub const TARGET: Figures = Figures {
    bytes: 14,
    ns_per_roundtrip: 35.0,
    allocs_per_roundtrip: 0.0,
};

/// Size, time and allocations of one write + read round trip.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figures {
    /// Encoded size in bytes.
    pub bytes: usize,
    /// Median nanoseconds per encode + decode.
    pub ns_per_roundtrip: f64,
    /// Allocations per encode + decode.
    pub allocs_per_roundtrip: f64,
}

/// How long to measure.
#[derive(Debug, Clone, Copy)]
pub struct WireBenchConfig {
    /// Timed samples per case; the median is reported.
    pub samples: usize,
    /// Roughly how long each sample runs.
    pub sample_time: Duration,
}

impl Default for WireBenchConfig {
    fn default() -> Self {
        Self {
            samples: 15,
            sample_time: Duration::from_millis(40),
        }
    }
}

/// The benchmark's results; serialized as `tickwire bench wire --json`.
#[derive(Debug, Clone, Serialize)]
pub struct WireReport {
    /// Encoded size of the entity in bytes.
    pub entity_bytes: usize,
    /// Encoded size of the entity in bits, before padding to a byte.
    pub entity_bits: usize,
    /// Median ns per round trip: encode into a reused buffer, decode into a reused entity.
    pub ns_per_roundtrip: f64,
    /// Allocations per such round trip (`null` when allocations could not be counted).
    pub allocs_per_roundtrip: Option<f64>,
    /// Median ns to encode alone.
    pub ns_encode: f64,
    /// Median ns to decode alone, into a reused entity.
    pub ns_decode_in_place: f64,
    /// Median ns per round trip decoding a fresh entity (allocating its name).
    pub ns_per_roundtrip_fresh_decode: f64,
    /// Allocations per fresh-decode round trip.
    pub allocs_per_roundtrip_fresh_decode: Option<f64>,
    /// bitcode 0.6 with an owned `String` name: bytes, ns and allocations.
    pub bitcode_owned: CaseFigures,
    /// bitcode 0.6 decoding the name as a borrowed `&str`: its zero-copy best case.
    pub bitcode_borrowed: CaseFigures,
    /// Seed 002's figures (Go, measured on this machine).
    pub anchor: Figures,
    /// The figures asked for.
    pub target: Figures,
    /// Whether size, time and allocations are all at or under the target.
    pub meets_target: bool,
    /// Timed samples per case.
    pub samples: usize,
}

/// One measured case.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CaseFigures {
    /// Encoded size in bytes.
    pub bytes: usize,
    /// Median ns per round trip.
    pub ns_per_roundtrip: f64,
    /// Allocations per round trip, when countable.
    pub allocs_per_roundtrip: Option<f64>,
}

/// The seed entity as bitcode sees it (bitcode has no bounds; its own compact encoding).
#[derive(Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
struct BitcodeEntity {
    name: String,
    health: [u16; 2],
    mana: [u16; 2],
    stamina: [u16; 2],
    dead: bool,
}

/// The same with a borrowed name, which bitcode decodes without allocating.
#[derive(Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
struct BitcodeEntityRef<'a> {
    name: &'a str,
    health: [u16; 2],
    mana: [u16; 2],
    stamina: [u16; 2],
    dead: bool,
}

/// Runs every case and returns the figures.
pub fn run(config: &WireBenchConfig) -> anyhow::Result<WireReport> {
    let entity = SeedEntity::casey();
    let counting = alloc_count::is_active();
    let per_op = |allocs: f64| counting.then_some(allocs);

    let mut buf = [0u8; 64];
    let len = encode_to_slice(&entity, &mut buf).context("encoding the seed entity")?;
    let entity_bits = bit_len(&entity)?;
    let mut decoded = SeedEntity::default();
    decode_exact_in_place(&mut decoded, &buf[..len])?;
    ensure!(
        decoded == entity,
        "round trip changed the entity: {decoded:?}"
    );

    let roundtrip = measure(config, || {
        let len = encode_to_slice(black_box(&entity), &mut buf).expect("the entity fits");
        decode_exact_in_place(&mut decoded, black_box(&buf[..len])).expect("decodes");
        black_box(&decoded);
    });
    let encode = measure(config, || {
        black_box(encode_to_slice(black_box(&entity), &mut buf).expect("the entity fits"));
    });
    let encoded = buf;
    let decode = measure(config, || {
        decode_exact_in_place(&mut decoded, black_box(&encoded[..len])).expect("decodes");
        black_box(&decoded);
    });
    let fresh = measure(config, || {
        let len = encode_to_slice(black_box(&entity), &mut buf).expect("the entity fits");
        let fresh: SeedEntity = decode_exact(black_box(&buf[..len])).expect("decodes");
        black_box(fresh);
    });
    ensure!(
        decoded == entity,
        "benchmark loop changed the entity: {decoded:?}"
    );

    let bitcode_owned = bench_bitcode_owned(config, &entity)?;
    let bitcode_borrowed = bench_bitcode_borrowed(config, &entity)?;

    let allocs_per_roundtrip = per_op(roundtrip.allocs_per_op);
    let meets_target = len <= TARGET.bytes
        && roundtrip.median_ns <= TARGET.ns_per_roundtrip
        && allocs_per_roundtrip.is_some_and(|allocs| allocs <= TARGET.allocs_per_roundtrip);
    Ok(WireReport {
        entity_bytes: len,
        entity_bits,
        ns_per_roundtrip: roundtrip.median_ns,
        allocs_per_roundtrip,
        ns_encode: encode.median_ns,
        ns_decode_in_place: decode.median_ns,
        ns_per_roundtrip_fresh_decode: fresh.median_ns,
        allocs_per_roundtrip_fresh_decode: per_op(fresh.allocs_per_op),
        bitcode_owned: bitcode_owned.figures(counting),
        bitcode_borrowed: bitcode_borrowed.figures(counting),
        anchor: ANCHOR,
        target: TARGET,
        meets_target,
        samples: config.samples,
    })
}

fn bitcode_value(entity: &SeedEntity) -> BitcodeEntity {
    BitcodeEntity {
        name: entity.name.clone(),
        health: entity.health,
        mana: entity.mana,
        stamina: entity.stamina,
        dead: entity.dead,
    }
}

fn bench_bitcode_owned(config: &WireBenchConfig, entity: &SeedEntity) -> anyhow::Result<Case> {
    let value = bitcode_value(entity);
    let mut encoder = bitcode::Buffer::new();
    let mut decoder = bitcode::Buffer::new();
    let bytes = encoder.encode(&value).len();
    let check: BitcodeEntity = decoder.decode(encoder.encode(&value))?;
    ensure!(check == value, "bitcode round trip changed the entity");
    let measurement = measure(config, || {
        let encoded = encoder.encode(black_box(&value));
        let decoded: BitcodeEntity = decoder.decode(black_box(encoded)).expect("decodes");
        black_box(decoded);
    });
    Ok(Case { bytes, measurement })
}

fn bench_bitcode_borrowed(config: &WireBenchConfig, entity: &SeedEntity) -> anyhow::Result<Case> {
    let value = BitcodeEntityRef {
        name: &entity.name,
        health: entity.health,
        mana: entity.mana,
        stamina: entity.stamina,
        dead: entity.dead,
    };
    let mut encoder = bitcode::Buffer::new();
    let mut decoder = bitcode::Buffer::new();
    let bytes = encoder.encode(&value).len();
    let measurement = measure(config, || {
        let encoded = encoder.encode(black_box(&value));
        let decoded: BitcodeEntityRef<'_> = decoder.decode(black_box(encoded)).expect("decodes");
        black_box(decoded);
    });
    Ok(Case { bytes, measurement })
}

struct Case {
    bytes: usize,
    measurement: Measurement,
}

impl Case {
    fn figures(&self, counting: bool) -> CaseFigures {
        CaseFigures {
            bytes: self.bytes,
            ns_per_roundtrip: self.measurement.median_ns,
            allocs_per_roundtrip: counting.then_some(self.measurement.allocs_per_op),
        }
    }
}

struct Measurement {
    median_ns: f64,
    allocs_per_op: f64,
}

/// Times `op`: calibrates a batch size that runs about `sample_time`, then takes the
/// median ns per call over `samples` batches and counts allocations over all of them.
fn measure(config: &WireBenchConfig, mut op: impl FnMut()) -> Measurement {
    let mut batch = 1u64;
    loop {
        let start = Instant::now();
        for _ in 0..batch {
            op();
        }
        if start.elapsed() >= config.sample_time / 4 || batch >= 1 << 32 {
            break;
        }
        batch *= 2;
    }
    batch *= 4;

    let mut per_op_ns: Vec<f64> = Vec::with_capacity(config.samples.max(1));
    // Read after the sample vector exists, which never grows, so only `op` is counted.
    let allocs_before = alloc_count::allocations();
    for _ in 0..config.samples.max(1) {
        let start = Instant::now();
        for _ in 0..batch {
            op();
        }
        per_op_ns.push(start.elapsed().as_nanos() as f64 / batch as f64);
    }
    let allocs = alloc_count::allocations() - allocs_before;
    per_op_ns.sort_by(f64::total_cmp);
    Measurement {
        median_ns: per_op_ns[per_op_ns.len() / 2],
        allocs_per_op: allocs as f64 / (batch * per_op_ns.len() as u64) as f64,
    }
}

/// The report as a table for people.
pub fn render(report: &WireReport) -> String {
    let allocs = |allocs: Option<f64>| match allocs {
        Some(allocs) => format!("{allocs:.2}"),
        None => "n/a".into(),
    };
    let mut out = String::new();
    out.push_str(
        "seed 002 entity {Name \"Casey\", Health/Mana/Stamina [2]u16 <= 1000, Dead bool}\n\n",
    );
    out.push_str(&format!(
        "{:<34} {:>6} {:>14} {:>18}\n",
        "case", "bytes", "ns/roundtrip", "allocs/roundtrip"
    ));
    let mut row = |case: &str, bytes: String, ns: String, allocs: String| {
        out.push_str(&format!("{case:<34} {bytes:>6} {ns:>14} {allocs:>18}\n"));
    };
    row(
        "tickwire (decode in place)",
        report.entity_bytes.to_string(),
        format!("{:.1}", report.ns_per_roundtrip),
        allocs(report.allocs_per_roundtrip),
    );
    row(
        "  encode only",
        String::new(),
        format!("{:.1}", report.ns_encode),
        String::new(),
    );
    row(
        "  decode in place only",
        String::new(),
        format!("{:.1}", report.ns_decode_in_place),
        String::new(),
    );
    row(
        "tickwire (fresh decode)",
        report.entity_bytes.to_string(),
        format!("{:.1}", report.ns_per_roundtrip_fresh_decode),
        allocs(report.allocs_per_roundtrip_fresh_decode),
    );
    for (case, figures) in [
        ("bitcode 0.6 (owned String)", report.bitcode_owned),
        ("bitcode 0.6 (borrowed &str)", report.bitcode_borrowed),
    ] {
        row(
            case,
            figures.bytes.to_string(),
            format!("{:.1}", figures.ns_per_roundtrip),
            allocs(figures.allocs_per_roundtrip),
        );
    }
    row(
        "seed 002, Go (anchor)",
        ANCHOR.bytes.to_string(),
        format!("{:.0}", ANCHOR.ns_per_roundtrip),
        format!("{:.0}", ANCHOR.allocs_per_roundtrip),
    );
    row(
        "target",
        format!("<= {}", TARGET.bytes),
        format!("<= {:.0}", TARGET.ns_per_roundtrip),
        format!("{:.0}", TARGET.allocs_per_roundtrip),
    );
    out.push_str(&format!(
        "\n{} bits; median of {} samples; {}\n",
        report.entity_bits,
        report.samples,
        if report.meets_target {
            "meets the target"
        } else {
            "DOES NOT meet the target"
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_reports_the_seed_entity_size_and_renders() {
        let config = WireBenchConfig {
            samples: 1,
            sample_time: Duration::from_micros(200),
        };
        let report = run(&config).expect("the benchmark runs");
        assert_eq!(
            report.entity_bytes, 14,
            "the seed entity encodes to 14 bytes"
        );
        assert_eq!(report.entity_bits, 107);
        assert!(report.bitcode_owned.bytes > 0);
        let table = render(&report);
        assert!(table.contains("tickwire (decode in place)"), "{table}");
        let json = serde_json::to_value(&report).expect("serializes");
        for key in ["entity_bytes", "ns_per_roundtrip", "allocs_per_roundtrip"] {
            assert!(json.get(key).is_some(), "--json lacks {key}: {json}");
        }
    }
}
