//! Golden vectors: the wire format pinned as hex in `tests/vectors/*.json`, so that this crate
//! and implementations in other languages (the TypeScript client) check themselves against
//! the same bytes. The JSON format is specified in `docs/PROTOCOL.md`, "Golden vectors".
//!
//! - `primitives.json`: sequences of primitive writes and the bytes they make.
//! - `errors.json`: bytes that must fail to decode, and with which error.
//! - `composites.json`: whole fixture messages, as typed values and spelled as primitive ops.
//!
//! `TICKWIRE_BLESS=1 cargo test -p tickwire-wire --test wire_vectors` rewrites the `hex` of
//! `primitives.json` and `composites.json` from this encoder and reformats all three files
//! (the bytes in `errors.json` are written by hand and never rewritten). Blessing still runs
//! every decode check, and `hand_verified_vectors` pins bytes worked out by hand from the
//! spec, so a blessed file cannot silently follow a wrong encoder.

use std::collections::HashSet;
use std::fmt::Debug;
use std::fs;
use std::path::PathBuf;

use serde_json::{Map, Value};
use tickwire_wire::fixtures::{SampleEvent, SamplePlayer, SampleSnapshot, SeedEntity};
use tickwire_wire::{
    BitCounter, BitReader, BitWrite, BitWriter, Decode, DecodeError, DecodeErrorKind, Encode,
    Quantize, decode_exact, decode_exact_in_place, encode_to_vec,
};

/// Largest integer a JSON number may hold in these files: JavaScript numbers are exact only
/// up to 2^53 − 1, so larger integers are written as decimal strings.
const MAX_SAFE_INTEGER: i128 = (1 << 53) - 1;

fn blessing() -> bool {
    std::env::var_os("TICKWIRE_BLESS").is_some_and(|value| value == "1")
}

fn vectors_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(file)
}

// ---------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------

/// One primitive write/read. Values are `None` where the file leaves them out (error
/// vectors); encoding needs them, decoding checks them when present.
#[derive(Debug)]
enum Op {
    Bits {
        bits: u32,
        value: Option<u32>,
    },
    Bool(Option<bool>),
    Uint {
        bits: u32,
        value: Option<u64>,
    },
    Range {
        min: i128,
        max: i128,
        value: Option<i128>,
    },
    Varint(Option<u64>),
    VarintSigned(Option<i64>),
    F32(Option<u32>),
    F64(Option<u64>),
    Quantized {
        grid: Quantize,
        value: Option<f32>,
        decoded: Option<f32>,
    },
    Len {
        max: usize,
        value: Option<usize>,
    },
    Bytes {
        max_len: usize,
        value: Option<Vec<u8>>,
    },
    String {
        max_len: usize,
        value: Option<String>,
    },
    RawBytes(Vec<u8>),
    Align,
}

fn parse_ops(ops: Option<&Value>) -> Result<Vec<Op>, String> {
    let ops = ops
        .and_then(Value::as_array)
        .ok_or("`ops` must be an array")?;
    ops.iter()
        .enumerate()
        .map(|(index, op)| parse_op(op).map_err(|error| format!("op {index}: {error}")))
        .collect()
}

fn parse_op(op: &Value) -> Result<Op, String> {
    let object = op.as_object().ok_or("an op must be an object")?;
    let name = object
        .get("op")
        .and_then(Value::as_str)
        .ok_or("missing `op` name")?;
    let (allowed, parsed): (&[&str], Op) = match name {
        "bits" => {
            let bits = int_field(object, "bits")?;
            if bits > 32 {
                return Err(format!("bits op of {bits} bits; at most 32"));
            }
            (
                &["bits", "value"],
                Op::Bits {
                    bits,
                    value: optional(object, "value", int)?,
                },
            )
        }
        "bool" => (
            &["value"],
            Op::Bool(optional(object, "value", |value| {
                value.as_bool().ok_or_else(|| "not a boolean".to_string())
            })?),
        ),
        "uint" => {
            let bits = int_field(object, "bits")?;
            if bits > 64 {
                return Err(format!("uint op of {bits} bits; at most 64"));
            }
            (
                &["bits", "value"],
                Op::Uint {
                    bits,
                    value: optional(object, "value", int)?,
                },
            )
        }
        "range" => {
            let min: i128 = int_field(object, "min")?;
            let max: i128 = int_field(object, "max")?;
            if min > max || max - min > i128::from(u64::MAX) {
                return Err(format!(
                    "range {min}..={max} is empty or spans over 64 bits"
                ));
            }
            (
                &["min", "max", "value"],
                Op::Range {
                    min,
                    max,
                    value: optional(object, "value", int)?,
                },
            )
        }
        "varint" => (&["value"], Op::Varint(optional(object, "value", int)?)),
        "varint_signed" => (
            &["value"],
            Op::VarintSigned(optional(object, "value", int)?),
        ),
        "f32" => (
            &["bits"],
            Op::F32(optional(object, "bits", |bits| float_bits(bits, 8))?.map(|bits| bits as u32)),
        ),
        "f64" => (
            &["bits"],
            Op::F64(optional(object, "bits", |bits| float_bits(bits, 16))?),
        ),
        "quantized" => (
            &["min", "max", "resolution", "value", "decoded"],
            Op::Quantized {
                grid: grid(object)?,
                value: optional(object, "value", f32_number)?,
                decoded: optional(object, "decoded", f32_number)?,
            },
        ),
        "len" => (
            &["max", "value"],
            Op::Len {
                max: int_field(object, "max")?,
                value: optional(object, "value", int)?,
            },
        ),
        "bytes" => (
            &["max_len", "hex"],
            Op::Bytes {
                max_len: int_field(object, "max_len")?,
                value: optional(object, "hex", hex_bytes)?,
            },
        ),
        "string" => (
            &["max_len", "value"],
            Op::String {
                max_len: int_field(object, "max_len")?,
                value: optional(object, "value", |value| {
                    value
                        .as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| "not a string".to_string())
                })?,
            },
        ),
        // The bytes give the count to read, so they are required even in error vectors.
        "raw_bytes" => (
            &["hex"],
            Op::RawBytes(hex_bytes(object.get("hex").ok_or("missing `hex`")?)?),
        ),
        "align" => (&[], Op::Align),
        other => return Err(format!("unknown op `{other}`")),
    };
    for key in object.keys() {
        if key != "op" && !allowed.contains(&key.as_str()) {
            return Err(format!("`{name}` op has unknown field `{key}`"));
        }
    }
    // `write_bits` drops high bits and `write_uint` of 0 bits panics on a non-zero value, so
    // a value too wide for its op is reported here.
    let too_wide = match parsed {
        Op::Bits {
            bits,
            value: Some(value),
        } => bits < 32 && value >> bits != 0,
        Op::Uint {
            bits,
            value: Some(value),
        } => bits < 64 && value >> bits != 0,
        _ => false,
    };
    if too_wide {
        return Err(format!("`{name}` value does not fit its width"));
    }
    Ok(parsed)
}

/// An integer written as a JSON number (at most 2^53 − 1 in magnitude) or a decimal string.
fn int<T: TryFrom<i128>>(value: &Value) -> Result<T, String> {
    let wide: i128 = match value {
        Value::Number(number) => {
            let wide = match (number.as_i64(), number.as_u64()) {
                (Some(signed), _) => i128::from(signed),
                (None, Some(unsigned)) => i128::from(unsigned),
                _ => return Err(format!("{number} is not an integer")),
            };
            if wide.abs() > MAX_SAFE_INTEGER {
                return Err(format!(
                    "{wide} is past 2^53 - 1, where JavaScript numbers lose precision: \
                     write it as the string \"{wide}\""
                ));
            }
            wide
        }
        Value::String(text) => text
            .parse()
            .map_err(|_| format!("\"{text}\" is not a decimal integer"))?,
        other => return Err(format!("{other} is not an integer")),
    };
    T::try_from(wide).map_err(|_| format!("{wide} does not fit the field"))
}

fn int_field<T: TryFrom<i128>>(object: &Map<String, Value>, key: &str) -> Result<T, String> {
    let value = object.get(key).ok_or_else(|| format!("missing `{key}`"))?;
    int(value).map_err(|error| format!("`{key}`: {error}"))
}

fn optional<T>(
    object: &Map<String, Value>,
    key: &str,
    parse: impl FnOnce(&Value) -> Result<T, String>,
) -> Result<Option<T>, String> {
    object
        .get(key)
        .map(|value| parse(value).map_err(|error| format!("`{key}`: {error}")))
        .transpose()
}

/// An `f32` written as its shortest decimal (what `{:?}` of the `f32` prints, `0.123` for the
/// f32 nearest 0.123), read as a double and rounded to the nearest `f32` (JavaScript's
/// `Math.fround`). Longer forms are refused: parsers that are not correctly rounded (such as
/// serde_json's default one) may read 17-digit decimals one unit off.
fn f32_number(value: &Value) -> Result<f32, String> {
    let wide = value.as_f64().ok_or("not a number")?;
    let narrow = wide as f32;
    let shortest = format!("{narrow:?}");
    let reread: f64 =
        serde_json::from_str(&shortest).map_err(|error| format!("{shortest}: {error}"))?;
    if reread.to_bits() != wide.to_bits() {
        return Err(format!(
            "{wide} is not the shortest form of an f32; write {shortest}"
        ));
    }
    Ok(narrow)
}

/// An IEEE 754 bit pattern written as `digits` lowercase hex digits.
fn float_bits(value: &Value, digits: usize) -> Result<u64, String> {
    let text = value.as_str().ok_or("not a hex string")?;
    if text.len() != digits || !is_lower_hex(text) {
        return Err(format!("\"{text}\" is not {digits} lowercase hex digits"));
    }
    u64::from_str_radix(text, 16).map_err(|error| error.to_string())
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes()
        .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

fn hex_bytes(value: &Value) -> Result<Vec<u8>, String> {
    let text = value.as_str().ok_or("not a hex string")?;
    if !is_lower_hex(text) {
        return Err(format!("\"{text}\" is not lowercase hex"));
    }
    hex::decode(text).map_err(|error| format!("\"{text}\": {error}"))
}

/// A quantization grid, checked against the rules `Quantize::new` asserts so that a bad
/// vector is reported instead of panicking.
fn grid(object: &Map<String, Value>) -> Result<Quantize, String> {
    let number = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("missing number `{key}`"))
    };
    let (min, max, resolution) = (number("min")?, number("max")?, number("resolution")?);
    let valid = min < max
        && resolution > 0.0
        && resolution >= min.abs().max(max.abs()) / 4_194_304.0
        && (max - min) / resolution + 0.5 <= 4_294_967_296.0;
    if !valid {
        return Err(format!("invalid grid {min}..={max} by {resolution}"));
    }
    Ok(Quantize::new(min, max, resolution))
}

fn missing(what: &str) -> String {
    format!("`{what}` op needs a value to encode")
}

/// Writes one op; the error names what went wrong.
fn write_op<W: BitWrite>(writer: &mut W, op: &Op) -> Result<(), String> {
    let result = match op {
        Op::Bits { bits, value } => writer.write_bits(value.ok_or_else(|| missing("bits"))?, *bits),
        Op::Bool(value) => writer.write_bool(value.ok_or_else(|| missing("bool"))?),
        Op::Uint { bits, value } => writer.write_uint(value.ok_or_else(|| missing("uint"))?, *bits),
        Op::Range { min, max, value } => {
            writer.write_range(value.ok_or_else(|| missing("range"))?, *min, *max)
        }
        Op::Varint(value) => writer.write_varint(value.ok_or_else(|| missing("varint"))?),
        Op::VarintSigned(value) => {
            writer.write_varint_signed(value.ok_or_else(|| missing("varint_signed"))?)
        }
        Op::F32(bits) => writer.write_f32(f32::from_bits(bits.ok_or_else(|| missing("f32"))?)),
        Op::F64(bits) => writer.write_f64(f64::from_bits(bits.ok_or_else(|| missing("f64"))?)),
        Op::Quantized { grid, value, .. } => {
            writer.write_quantized(value.ok_or_else(|| missing("quantized"))?, grid)
        }
        Op::Len { max, value } => writer.write_len(value.ok_or_else(|| missing("len"))?, *max),
        Op::Bytes { max_len, value } => {
            writer.write_bytes(value.as_ref().ok_or_else(|| missing("bytes"))?, *max_len)
        }
        Op::String { max_len, value } => {
            writer.write_str(value.as_ref().ok_or_else(|| missing("string"))?, *max_len)
        }
        Op::RawBytes(bytes) => writer.write_raw_bytes(bytes),
        Op::Align => writer.align(),
    };
    result.map_err(|error| format!("encoding failed: {error}"))
}

/// Encodes `ops` on one writer, checking that the counter measures what the writer writes.
fn encode_ops(ops: &[Op]) -> Result<Vec<u8>, String> {
    let mut counter = BitCounter::default();
    for (index, op) in ops.iter().enumerate() {
        write_op(&mut counter, op).map_err(|error| format!("op {index}: {error}"))?;
    }
    let mut buf = vec![0; counter.bytes()];
    let mut writer = BitWriter::new(&mut buf);
    for (index, op) in ops.iter().enumerate() {
        write_op(&mut writer, op).map_err(|error| format!("op {index}: {error}"))?;
    }
    if writer.bits_written() != counter.bits_written() {
        return Err(format!(
            "BitCounter measured {} bits but BitWriter wrote {}",
            counter.bits_written(),
            writer.bits_written()
        ));
    }
    let len = writer
        .finish()
        .map_err(|error| format!("finish failed: {error}"))?;
    buf.truncate(len);
    Ok(buf)
}

/// Why reading an op did not give the op's value.
enum ReadFailure {
    Decode(DecodeError),
    Mismatch(String),
}

impl From<DecodeError> for ReadFailure {
    fn from(error: DecodeError) -> Self {
        Self::Decode(error)
    }
}

fn expect_eq<T: PartialEq + Debug>(read: T, expected: Option<T>) -> Result<(), ReadFailure> {
    match expected {
        Some(expected) if read != expected => Err(ReadFailure::Mismatch(format!(
            "read {read:?}, the op says {expected:?}"
        ))),
        _ => Ok(()),
    }
}

/// Reads one op, checking the value read against the op's value when it has one.
fn read_op(reader: &mut BitReader<'_>, op: &Op) -> Result<(), ReadFailure> {
    match op {
        Op::Bits { bits, value } => expect_eq(reader.read_bits(*bits)?, *value),
        Op::Bool(value) => expect_eq(reader.read_bool()?, *value),
        Op::Uint { bits, value } => expect_eq(reader.read_uint(*bits)?, *value),
        Op::Range { min, max, value } => expect_eq(reader.read_range(*min, *max)?, *value),
        Op::Varint(value) => expect_eq(reader.read_varint()?, *value),
        Op::VarintSigned(value) => expect_eq(reader.read_varint_signed()?, *value),
        // Floats compare as bit patterns: NaN, -0 and payloads must survive exactly.
        Op::F32(bits) => expect_eq(
            format!("{:08x}", reader.read_f32()?.to_bits()),
            bits.map(|bits| format!("{bits:08x}")),
        ),
        Op::F64(bits) => expect_eq(
            format!("{:016x}", reader.read_f64()?.to_bits()),
            bits.map(|bits| format!("{bits:016x}")),
        ),
        Op::Quantized { grid, decoded, .. } => {
            let read = reader.read_quantized(grid)?;
            expect_eq(read.to_bits(), decoded.map(f32::to_bits)).map_err(|_| {
                ReadFailure::Mismatch(format!(
                    "decoded {}, the op says {}",
                    f64::from(read),
                    decoded.map_or(f64::NAN, f64::from)
                ))
            })
        }
        Op::Len { max, value } => expect_eq(reader.read_len(*max)?, *value),
        Op::Bytes { max_len, value } => {
            let mut bytes = Vec::new();
            reader.read_bytes_into(&mut bytes, *max_len)?;
            expect_eq(hex::encode(bytes), value.as_ref().map(hex::encode))
        }
        Op::String { max_len, value } => {
            let mut string = String::new();
            reader.read_string_into(&mut string, *max_len)?;
            expect_eq(string, value.clone())
        }
        Op::RawBytes(expected) => {
            let mut bytes = vec![0; expected.len()];
            reader.read_raw_bytes(&mut bytes)?;
            expect_eq(hex::encode(bytes), Some(hex::encode(expected)))
        }
        Op::Align => Ok(reader.align()?),
    }
}

/// Reads every op from `bytes`, then checks that only zero padding is left.
fn decode_ops(ops: &[Op], bytes: &[u8]) -> Result<(), String> {
    let mut reader = BitReader::new(bytes);
    for (index, op) in ops.iter().enumerate() {
        match read_op(&mut reader, op) {
            Ok(()) => {}
            Err(ReadFailure::Decode(error)) => {
                return Err(format!("decoding op {index} ({op:?}) failed: {error}"));
            }
            Err(ReadFailure::Mismatch(mismatch)) => {
                return Err(format!("decoding op {index} ({op:?}): {mismatch}"));
            }
        }
    }
    reader
        .finish()
        .map_err(|error| format!("finish() after the last op failed: {error}"))
}

/// The name `errors.json` uses for a kind of decode error.
fn kind_name(kind: &DecodeErrorKind) -> &'static str {
    match kind {
        DecodeErrorKind::Truncated { .. } => "truncated",
        DecodeErrorKind::OutOfRange { .. } => "out_of_range",
        DecodeErrorKind::TooLong { .. } => "too_long",
        DecodeErrorKind::InvalidUtf8 => "invalid_utf8",
        DecodeErrorKind::InvalidVarint => "invalid_varint",
        DecodeErrorKind::NonZeroPadding => "non_zero_padding",
        DecodeErrorKind::TrailingBytes { .. } => "trailing_bytes",
    }
}

/// Compares freshly encoded bytes with the file's `hex`, or stores them when blessing.
fn check_or_bless(vector: &mut Map<String, Value>, encoded: &[u8]) -> Result<(), String> {
    let encoded_hex = hex::encode(encoded);
    if blessing() {
        vector.insert("hex".into(), Value::String(encoded_hex));
        return Ok(());
    }
    let expected = vector
        .get("hex")
        .ok_or("missing `hex` (run with TICKWIRE_BLESS=1 to fill it in)")?;
    let expected = hex_bytes(expected).map_err(|error| format!("`hex`: {error}"))?;
    if expected != encoded {
        return Err(format!(
            "encodes to {encoded_hex}, the file says {} ({})",
            hex::encode(&expected),
            first_difference(encoded, &expected)
        ));
    }
    Ok(())
}

/// Where two encodings part, for messages about long hex strings.
fn first_difference(left: &[u8], right: &[u8]) -> String {
    match left
        .iter()
        .zip(right)
        .position(|(left, right)| left != right)
    {
        Some(index) => format!(
            "first difference at byte {index}: {:02x} vs {:02x}",
            left[index], right[index]
        ),
        None => format!("{} bytes vs {} bytes", left.len(), right.len()),
    }
}

// ---------------------------------------------------------------------------------------
// Running the three files
// ---------------------------------------------------------------------------------------

fn run_primitive(vector: &mut Map<String, Value>) -> Result<(), String> {
    let ops = parse_ops(vector.get("ops"))?;
    let encoded = encode_ops(&ops)?;
    check_or_bless(vector, &encoded)?;
    decode_ops(&ops, &encoded)
}

fn run_error(vector: &mut Map<String, Value>) -> Result<(), String> {
    let ops = parse_ops(vector.get("ops"))?;
    let bytes = hex_bytes(vector.get("hex").ok_or("missing `hex`")?)?;
    let expected = vector
        .get("error")
        .and_then(Value::as_str)
        .ok_or("missing `error`")?;
    let check = |error: DecodeError, at: &str| {
        let kind = kind_name(&error.kind);
        if kind == expected {
            Ok(())
        } else {
            Err(format!(
                "{at} failed with `{kind}` ({error}), expected `{expected}`"
            ))
        }
    };
    let mut reader = BitReader::new(&bytes);
    for (index, op) in ops.iter().enumerate() {
        let last = index + 1 == ops.len();
        match read_op(&mut reader, op) {
            Ok(()) => {}
            Err(ReadFailure::Decode(error)) if last => return check(error, &format!("op {index}")),
            Err(ReadFailure::Decode(error)) => {
                return Err(format!(
                    "op {index} failed with `{}` ({error}); only the last op or finish() may fail",
                    kind_name(&error.kind)
                ));
            }
            Err(ReadFailure::Mismatch(mismatch)) => return Err(format!("op {index}: {mismatch}")),
        }
    }
    match reader.finish() {
        Ok(()) => Err(format!(
            "every op and finish() succeeded; expected `{expected}`"
        )),
        Err(error) => check(error, "finish()"),
    }
}

fn run_composite(vector: &mut Map<String, Value>) -> Result<(), String> {
    let ops = parse_ops(vector.get("ops"))?;
    let spelled = encode_ops(&ops)?;
    let value = vector.get("value").ok_or("missing `value`")?;
    let encoded = match vector.get("type").and_then(Value::as_str) {
        Some("SeedEntity") => check_typed(&seed_entity(value)?, &spelled)?,
        Some("SampleSnapshot") => check_typed(&sample_snapshot(value)?, &spelled)?,
        other => return Err(format!("unknown `type` {other:?}")),
    };
    check_or_bless(vector, &encoded)?;
    decode_ops(&ops, &encoded)
}

/// Checks that `value` encodes to what the ops spell, and decodes back to itself (whole and
/// in place); returns its encoding.
fn check_typed<T>(value: &T, spelled: &[u8]) -> Result<Vec<u8>, String>
where
    T: Encode + Decode + PartialEq + Debug + Default,
{
    let encoded = encode_to_vec(value).map_err(|error| format!("typed value: {error}"))?;
    if encoded != spelled {
        return Err(format!(
            "the typed value encodes to {} but the ops spell {} ({})",
            hex::encode(&encoded),
            hex::encode(spelled),
            first_difference(&encoded, spelled)
        ));
    }
    let decoded: T =
        decode_exact(&encoded).map_err(|error| format!("decode_exact failed: {error}"))?;
    if &decoded != value {
        return Err(format!("decodes to {decoded:?}, not {value:?}"));
    }
    let mut reused = T::default();
    decode_exact_in_place(&mut reused, &encoded)
        .map_err(|error| format!("decode_exact_in_place failed: {error}"))?;
    if &reused != value {
        return Err(format!("decodes in place to {reused:?}, not {value:?}"));
    }
    Ok(encoded)
}

/// Runs every vector in `file`, reporting all failures at once; when blessing, writes the
/// file back (only if every vector passed).
fn run_file(file: &str, run: fn(&mut Map<String, Value>) -> Result<(), String>) {
    let path = vectors_path(file);
    let text = fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let mut document: Value = serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("{file} is not valid JSON: {error}"));
    assert!(
        document.get("description").is_some_and(Value::is_string),
        "{file}: missing a `description` string"
    );
    let vectors = document
        .get_mut("vectors")
        .and_then(Value::as_array_mut)
        .unwrap_or_else(|| panic!("{file}: missing a `vectors` array"));
    assert!(!vectors.is_empty(), "{file} has no vectors");

    let mut names = HashSet::new();
    let mut failures = Vec::new();
    for (index, vector) in vectors.iter_mut().enumerate() {
        let Some(vector) = vector.as_object_mut() else {
            failures.push(format!("vector {index} is not an object"));
            continue;
        };
        let name = match vector.get("name").and_then(Value::as_str) {
            Some(name) => name.to_owned(),
            None => {
                failures.push(format!("vector {index} has no `name`"));
                continue;
            }
        };
        if !names.insert(name.clone()) {
            failures.push(format!("vector `{name}`: the name is used twice"));
        }
        if let Err(error) = run(vector) {
            failures.push(format!("vector `{name}`: {error}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{file}: {} of {} vectors failed:\n  {}",
        failures.len(),
        vectors.len(),
        failures.join("\n  ")
    );
    if blessing() {
        // Written whole then renamed, so a test reading the file meanwhile never sees half.
        let temporary = path.with_extension("json.blessing");
        fs::write(&temporary, pretty(&document))
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", temporary.display()));
        fs::rename(&temporary, &path)
            .unwrap_or_else(|error| panic!("cannot replace {}: {error}", path.display()));
    }
}

#[test]
fn primitives_encode_to_their_hex_and_decode_to_their_values() {
    run_file("primitives.json", run_primitive);
}

#[test]
fn error_vectors_fail_with_their_error_kind() {
    run_file("errors.json", run_error);
}

#[test]
fn composites_encode_as_their_ops_spell_and_round_trip() {
    run_file("composites.json", run_composite);
}

#[test]
fn error_vectors_cover_every_error_kind() {
    let text = fs::read_to_string(vectors_path("errors.json")).expect("errors.json is readable");
    let document: Value = serde_json::from_str(&text).expect("errors.json is JSON");
    let covered: HashSet<&str> = document["vectors"]
        .as_array()
        .expect("a vectors array")
        .iter()
        .filter_map(|vector| vector["error"].as_str())
        .collect();
    for kind in [
        "truncated",
        "out_of_range",
        "too_long",
        "invalid_utf8",
        "invalid_varint",
        "non_zero_padding",
        "trailing_bytes",
    ] {
        assert!(covered.contains(kind), "errors.json has no `{kind}` vector");
    }
}

// ---------------------------------------------------------------------------------------
// Bytes worked out by hand
// ---------------------------------------------------------------------------------------

/// Encodes the ops of vector `name` in `file` afresh, ignoring the file's `hex`.
fn encode_vector(file: &str, name: &str) -> String {
    let text = fs::read_to_string(vectors_path(file)).expect("vector file is readable");
    let document: Value = serde_json::from_str(&text).expect("vector file is JSON");
    let vector = document["vectors"]
        .as_array()
        .and_then(|vectors| vectors.iter().find(|vector| vector["name"] == name))
        .unwrap_or_else(|| panic!("{file} has no vector `{name}`"));
    let ops = parse_ops(vector.get("ops")).unwrap_or_else(|error| panic!("{name}: {error}"));
    hex::encode(encode_ops(&ops).unwrap_or_else(|error| panic!("{name}: {error}")))
}

/// Bytes derived from the spec by hand (stream bit `i` is bit `i % 8` of byte `i / 8`; a
/// value's least significant bit goes first). Blessing cannot change these.
#[test]
fn hand_verified_vectors() {
    // 5 in 3 bits, then 0x89abcdef in 32 bits at stream bits 3..35, crossing the first
    // 32-bit word: the stream is (0x89abcdef << 3) | 0b101 = 0x4_4d5e_6f7d, 35 bits, stored
    // least significant byte first and zero-padded to 5 bytes.
    assert_eq!(
        encode_vector("primitives.json", "bits_3_then_32_crossing_a_word"),
        "7d6f5e4d04",
        "vector `bits_3_then_32_crossing_a_word` no longer has its hand-verified bytes"
    );

    // -1 in -1000..=1000: span 2000 takes ceil(log2(2001)) = 11 bits; the offset from min is
    // -1 - (-1000) = 999 = 0b011_1110_0111 → byte 0 = 0xe7, byte 1 = 0b011 = 0x03.
    assert_eq!(
        encode_vector("primitives.json", "range_negative"),
        "e703",
        "vector `range_negative` no longer has its hand-verified bytes"
    );

    // 300 = 0b10_0101100: first group 0b0101100 with the continuation bit (0x80) = 0xac,
    // second group 0b10 = 0x02 without it.
    assert_eq!(
        encode_vector("primitives.json", "varint_300"),
        "ac02",
        "vector `varint_300` no longer has its hand-verified bytes"
    );

    // i64::MIN zigzags to u64::MAX (2·|v| − 1): nine groups of 0x7f with continuation
    // (0xff), then the tenth group holds bit 63 alone (0x01).
    assert_eq!(
        encode_vector("primitives.json", "varint_signed_i64_min"),
        "ffffffffffffffffff01",
        "vector `varint_signed_i64_min` no longer has its hand-verified bytes"
    );

    // 1.5 on -512..=512 by 0.01: steps = trunc(1024 / 0.01 + 0.5) = 102400, 17 bits; step =
    // round((1.5 + 512) / 0.01) = 51350 = 0x0c896 → bytes 0x96, 0xc8, 0x00 (bit 16 is 0).
    assert_eq!(
        encode_vector("primitives.json", "quantized_position"),
        "96c800",
        "vector `quantized_position` no longer has its hand-verified bytes"
    );

    // 5 in 3 bits, align (5 zero bits), then 0xff in 8 bits: byte 0 = 0b0000_0101, byte 1 = 0xff.
    assert_eq!(
        encode_vector("primitives.json", "align_in_the_middle"),
        "05ff",
        "vector `align_in_the_middle` no longer has its hand-verified bytes"
    );

    // The seed entity, worked bit by bit in docs/PROTOCOL.md: a 6-bit length 5, "Casey"
    // (0x43 0x61 0x73 0x65 0x79) shifted up 6 bits, six 10-bit stats (100, 100, 50, 50, 75,
    // 75) and a 0 bit for `dead`: 107 bits in 14 bytes.
    const CASEY: &str = "c550d85c591e1964c820c3124b00";
    let encoded = encode_to_vec(&SeedEntity::casey()).expect("the seed entity encodes");
    assert_eq!(
        hex::encode(encoded),
        CASEY,
        "SeedEntity::casey() no longer encodes to its hand-verified 14 bytes"
    );
    assert_eq!(
        encode_vector("composites.json", "seed_entity_casey"),
        CASEY,
        "the ops of vector `seed_entity_casey` no longer spell its hand-verified bytes"
    );
}

// ---------------------------------------------------------------------------------------
// Typed fixture values from JSON
// ---------------------------------------------------------------------------------------

/// The object `value`, which must have exactly the fields `keys`.
fn object<'a>(value: &'a Value, keys: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("{value} is not an object"))?;
    let mut found: Vec<&str> = object.keys().map(String::as_str).collect();
    let mut wanted = keys.to_vec();
    found.sort_unstable();
    wanted.sort_unstable();
    if found != wanted {
        return Err(format!("fields {found:?}, expected {wanted:?}"));
    }
    Ok(object)
}

fn field<'a>(object: &'a Map<String, Value>, key: &str) -> &'a Value {
    // `object` checked the keys, so every field asked for is present.
    &object[key]
}

fn typed_int<T: TryFrom<i128>>(object: &Map<String, Value>, key: &str) -> Result<T, String> {
    int(field(object, key)).map_err(|error| format!("`{key}`: {error}"))
}

fn typed_string(value: &Value, key: &str) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("`{key}`: {value} is not a string"))
}

fn typed_pair<T>(
    object: &Map<String, Value>,
    key: &str,
    element: impl Fn(&Value) -> Result<T, String>,
) -> Result<[T; 2], String> {
    match field(object, key).as_array().map(Vec::as_slice) {
        Some([first, second]) => Ok([
            element(first).map_err(|error| format!("`{key}`[0]: {error}"))?,
            element(second).map_err(|error| format!("`{key}`[1]: {error}"))?,
        ]),
        _ => Err(format!("`{key}` must be an array of two")),
    }
}

fn typed_array<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], String> {
    field(object, key)
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| format!("`{key}` must be an array"))
}

fn seed_entity(value: &Value) -> Result<SeedEntity, String> {
    let entity = object(value, &["name", "health", "mana", "stamina", "dead"])?;
    Ok(SeedEntity {
        name: typed_string(field(entity, "name"), "name")?,
        health: typed_pair(entity, "health", int)?,
        mana: typed_pair(entity, "mana", int)?,
        stamina: typed_pair(entity, "stamina", int)?,
        dead: field(entity, "dead")
            .as_bool()
            .ok_or("`dead` must be a boolean")?,
    })
}

fn sample_snapshot(value: &Value) -> Result<SampleSnapshot, String> {
    let snapshot = object(value, &["tick", "players", "events", "blob"])?;
    Ok(SampleSnapshot {
        tick: typed_int(snapshot, "tick")?,
        players: typed_array(snapshot, "players")?
            .iter()
            .enumerate()
            .map(|(index, player)| {
                sample_player(player).map_err(|error| format!("players[{index}]: {error}"))
            })
            .collect::<Result<_, _>>()?,
        events: typed_array(snapshot, "events")?
            .iter()
            .enumerate()
            .map(|(index, event)| {
                sample_event(event).map_err(|error| format!("events[{index}]: {error}"))
            })
            .collect::<Result<_, _>>()?,
        blob: hex_bytes(field(snapshot, "blob")).map_err(|error| format!("`blob`: {error}"))?,
    })
}

fn sample_player(value: &Value) -> Result<SamplePlayer, String> {
    let player = object(
        value,
        &["id", "position", "health", "score", "name", "speed"],
    )?;
    Ok(SamplePlayer {
        id: typed_int(player, "id")?,
        position: typed_pair(player, "position", f32_number)?,
        health: typed_int(player, "health")?,
        score: typed_int(player, "score")?,
        name: match field(player, "name") {
            Value::Null => None,
            name => Some(typed_string(name, "name")?),
        },
        speed: f32_number(field(player, "speed")).map_err(|error| format!("`speed`: {error}"))?,
    })
}

/// Enums are externally tagged: `"Ended"` for a unit variant, `{"Chat": "gg"}` for a
/// newtype variant, `{"Joined": {"id": 7}}` for a struct variant.
fn sample_event(value: &Value) -> Result<SampleEvent, String> {
    if value.as_str() == Some("Ended") {
        return Ok(SampleEvent::Ended);
    }
    let (variant, fields) = value
        .as_object()
        .filter(|variant| variant.len() == 1)
        .and_then(|variant| variant.iter().next())
        .ok_or_else(|| format!("{value} is not an event"))?;
    match variant.as_str() {
        "Joined" => Ok(SampleEvent::Joined {
            id: typed_int(object(fields, &["id"])?, "id")?,
        }),
        "Chat" => Ok(SampleEvent::Chat(typed_string(fields, "Chat")?)),
        "Shot" => Ok(SampleEvent::Shot {
            angle: f32_number(field(object(fields, &["angle"])?, "angle"))
                .map_err(|error| format!("`angle`: {error}"))?,
        }),
        other => Err(format!("unknown event variant `{other}`")),
    }
}

// ---------------------------------------------------------------------------------------
// Writing blessed files
// ---------------------------------------------------------------------------------------

const LINE_WIDTH: usize = 100;

/// Key orders for the objects in the files: the first list holding all of an object's keys
/// orders it (vectors start with `name`, ops with `op`, fixture values follow declaration
/// order); other objects keep serde_json's alphabetical order.
const KEY_ORDERS: &[&[&str]] = &[
    &["description", "vectors"],
    &["name", "type", "value", "hex", "error", "ops"],
    &[
        "op",
        "bits",
        "min",
        "max",
        "resolution",
        "max_len",
        "value",
        "decoded",
        "hex",
    ],
    &["name", "health", "mana", "stamina", "dead"],
    &["tick", "players", "events", "blob"],
    &["id", "position", "health", "score", "name", "speed"],
];

fn ordered(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    if let Some(order) = KEY_ORDERS
        .iter()
        .find(|order| map.keys().all(|key| order.contains(&key.as_str())))
    {
        entries.sort_by_key(|(key, _)| order.iter().position(|known| known == key));
    }
    entries
}

fn compact(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = ordered(map)
                .into_iter()
                .map(|(key, value)| format!("{}: {}", Value::from(key.as_str()), compact(value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        scalar => scalar.to_string(),
    }
}

/// Pretty JSON: the document, vectors and op lists one item per line; anything else on one
/// line when it fits in [`LINE_WIDTH`] columns.
fn pretty(document: &Value) -> String {
    let mut out = String::new();
    write_pretty(&mut out, document, 0, 0, false);
    out.push('\n');
    out
}

fn write_pretty(out: &mut String, value: &Value, indent: usize, column: usize, expand: bool) {
    let flat = compact(value);
    let expand = expand
        || value
            .as_object()
            .is_some_and(|map| map.contains_key("ops") || map.contains_key("vectors"));
    let empty = match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => true,
    };
    if empty || (!expand && column + flat.len() <= LINE_WIDTH) {
        out.push_str(&flat);
        return;
    }
    let inner = "  ".repeat(indent + 1);
    let (open, close, items): (char, char, Vec<(Option<&String>, &Value)>) = match value {
        Value::Array(items) => ('[', ']', items.iter().map(|item| (None, item)).collect()),
        Value::Object(map) => (
            '{',
            '}',
            ordered(map)
                .into_iter()
                .map(|(key, value)| (Some(key), value))
                .collect(),
        ),
        _ => unreachable!("scalars are written flat"),
    };
    out.push(open);
    out.push('\n');
    for (index, (key, item)) in items.iter().enumerate() {
        out.push_str(&inner);
        let mut column = inner.len();
        if let Some(key) = key {
            let key = format!("{}: ", Value::from(key.as_str()));
            column += key.len();
            out.push_str(&key);
        }
        let expand_item = matches!(key.map(String::as_str), Some("ops" | "vectors"));
        write_pretty(out, item, indent + 1, column, expand_item);
        out.push_str(if index + 1 < items.len() { ",\n" } else { "\n" });
    }
    out.push_str(&"  ".repeat(indent));
    out.push(close);
}
