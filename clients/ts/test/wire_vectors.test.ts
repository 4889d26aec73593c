// The golden vectors of crates/wire/tests/vectors, run against the TypeScript port exactly
// as docs/PROTOCOL.md "Golden vectors" tells a port to run them.
import { describe, expect, it } from "vitest";

import {
  BitReader,
  BitWriter,
  type Codec,
  DecodeError,
  Quantize,
  array,
  bool,
  bytes,
  decode,
  encode,
  enumOf,
  f32,
  option,
  quantized,
  range,
  string,
  struct,
  uint,
  unit,
  varint,
  varintSigned,
  vec,
} from "../src/wire/index.js";
import { fromHex, readRepoJson, toHex } from "./vectors.js";

type JsonInt = number | string;
interface Op {
  op: string;
  bits?: number | string;
  value?: unknown;
  min?: JsonInt;
  max?: JsonInt;
  max_len?: number;
  resolution?: number;
  decoded?: number;
  hex?: string;
}
interface VectorFile<V> {
  description: string;
  vectors: V[];
}
interface Primitive {
  name: string;
  hex: string;
  ops: Op[];
}
interface ErrorVector extends Primitive {
  error: string;
}
interface Composite extends Primitive {
  type: string;
  value: unknown;
}

const dir = "crates/wire/tests/vectors/";
const primitives = readRepoJson<VectorFile<Primitive>>(dir + "primitives.json").vectors;
const errors = readRepoJson<VectorFile<ErrorVector>>(dir + "errors.json").vectors;
const composites = readRepoJson<VectorFile<Composite>>(dir + "composites.json").vectors;

/** An integer from the files: a JSON number, or a decimal string past 2^53 − 1. */
function int(value: unknown): number | bigint {
  if (typeof value === "string") {
    return BigInt(value);
  }
  if (typeof value === "number" && Number.isSafeInteger(value)) {
    return value;
  }
  throw new Error(`not an integer: ${String(value)}`);
}

function small(value: unknown): number {
  const v = int(value);
  if (typeof v !== "number") {
    throw new Error(`expected a small integer, got ${v}`);
  }
  return v;
}

function grid(op: Op): Quantize {
  return new Quantize(op.min as number, op.max as number, op.resolution as number);
}

/** Writes one op (encoding). */
function write(writer: BitWriter, op: Op): void {
  switch (op.op) {
    case "bits":
      return writer.writeBits(small(op.value), small(op.bits));
    case "bool":
      return writer.writeBool(op.value as boolean);
    case "uint":
      return writer.writeUint(int(op.value), small(op.bits));
    case "range":
      return writer.writeRange(int(op.value), int(op.min), int(op.max));
    case "varint":
      return writer.writeVarint(int(op.value));
    case "varint_signed":
      return writer.writeVarintSigned(int(op.value));
    case "f32":
      return writer.writeF32Bits(parseInt(op.bits as string, 16));
    case "f64":
      return writer.writeF64Bits(BigInt("0x" + (op.bits as string)));
    case "quantized":
      return writer.writeQuantized(op.value as number, grid(op));
    case "len":
      return writer.writeLen(small(op.value), small(op.max));
    case "bytes":
      return writer.writeBytes(fromHex(op.hex!), op.max_len!);
    case "string":
      return writer.writeString(op.value as string, op.max_len!);
    case "raw_bytes":
      return writer.writeRawBytes(fromHex(op.hex!));
    case "align":
      return writer.align();
    default:
      throw new Error(`unknown op ${op.op}`);
  }
}

/**
 * Reads one op (decoding) and returns what it read in the form the op's value takes, so a
 * test compares it with the op. Ranges and integers go through the number API when every
 * bound fits a safe integer, and through the bigint API otherwise, so both are exercised.
 */
function read(reader: BitReader, op: Op): unknown {
  switch (op.op) {
    case "bits":
      return reader.readBits(small(op.bits));
    case "bool":
      return reader.readBool();
    case "uint": {
      const bits = small(op.bits);
      return bits <= 53 ? reader.readUint(bits) : normal(reader.readUintBig(bits));
    }
    case "range": {
      const [min, max] = [int(op.min), int(op.max)];
      if (typeof min === "number" && typeof max === "number" && Number.isSafeInteger(max - min)) {
        return reader.readRange(min, max);
      }
      return normal(reader.readRangeBig(BigInt(min), BigInt(max)));
    }
    case "varint":
      return normal(reader.readVarintBig());
    case "varint_signed":
      return normal(reader.readVarintSignedBig());
    case "f32":
      return reader.readF32Bits().toString(16).padStart(8, "0");
    case "f64":
      return reader.readF64Bits().toString(16).padStart(16, "0");
    case "quantized":
      return reader.readQuantized(grid(op));
    case "len":
      return reader.readLen(small(op.max));
    case "bytes":
      return toHex(reader.readBytes(op.max_len!));
    case "string":
      return reader.readString(op.max_len!);
    case "raw_bytes":
      return toHex(reader.readRawBytes(op.hex!.length / 2));
    case "align":
      return reader.align();
    default:
      throw new Error(`unknown op ${op.op}`);
  }
}

/** A bigint as the files write it: a number when safe, else a decimal string. */
function normal(value: bigint): number | string {
  return value >= -BigInt(Number.MAX_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : value.toString();
}

/** The value an op should read back. */
function expected(op: Op): unknown {
  switch (op.op) {
    case "f32":
    case "f64":
      return op.bits;
    case "quantized":
      return Math.fround(op.decoded!);
    case "bytes":
    case "raw_bytes":
      return op.hex;
    case "align":
      return undefined;
    case "uint":
    case "range":
    case "varint":
    case "varint_signed":
      return normal(BigInt(int(op.value)));
    default:
      return op.value;
  }
}

function encodeOps(ops: Op[]): string {
  const writer = new BitWriter({ initialCapacity: 1 });
  for (const op of ops) {
    write(writer, op);
  }
  return toHex(writer.finish());
}

function decodeOps(hex: string, ops: Op[]): void {
  const reader = new BitReader(fromHex(hex));
  ops.forEach((op, i) => {
    const got = read(reader, op);
    // Object.is tells −0 from 0, which a quantized decode must get right.
    expect(Object.is(got, expected(op)) || got === expected(op), `op ${i} (${op.op}) read ${String(got)}`).toBe(
      true,
    );
  });
  reader.finish();
}

describe("primitives.json", () => {
  it("has the vectors the spec promises", () => {
    expect(primitives.length).toBeGreaterThan(90);
  });

  it.each(primitives.map((v) => [v.name, v] as const))("%s encodes and decodes", (_name, vector) => {
    expect(encodeOps(vector.ops)).toBe(vector.hex);
    decodeOps(vector.hex, vector.ops);
  });
});

describe("errors.json", () => {
  const kinds = new Set(errors.map((v) => v.error));

  it("covers every decode error kind", () => {
    expect([...kinds].sort()).toEqual(
      ["invalid_utf8", "invalid_varint", "non_zero_padding", "out_of_range", "too_long", "trailing_bytes", "truncated"],
    );
  });

  it.each(errors.map((v) => [v.name, v] as const))("%s is refused with its kind", (_name, vector) => {
    const reader = new BitReader(fromHex(vector.hex));
    let failure: unknown;
    let failedAt = -1;
    const steps = [...vector.ops.map((op) => () => void read(reader, op)), () => reader.finish()];
    for (const [i, step] of steps.entries()) {
      try {
        step();
      } catch (error) {
        failure = error;
        failedAt = i;
        break;
      }
    }
    expect(failure, "the bytes were accepted").toBeInstanceOf(DecodeError);
    expect((failure as DecodeError).kind).toBe(vector.error);
    // Only the last op, or finish() when every op succeeds, may fail.
    expect(failedAt).toBeGreaterThanOrEqual(vector.ops.length - 1);
  });
});

// The fixtures of crates/wire/src/fixtures.rs, declared with the TypeScript combinators.
const SeedEntity = struct({
  name: string(32),
  health: array(range(0, 1000), 2),
  mana: array(range(0, 1000), 2),
  stamina: array(range(0, 1000), 2),
  dead: bool,
});
const SamplePlayer = struct({
  id: uint(12),
  position: array(quantized(-512, 512, 0.01), 2),
  health: range(0, 100),
  score: varintSigned,
  name: option(string(16)),
  speed: f32,
});
const SampleEvent = enumOf({
  Joined: struct({ id: uint(12) }),
  Chat: string(64),
  Shot: struct({ angle: quantized(0, 1, 0.001) }),
  Ended: unit,
});
const SampleSnapshot = struct({
  tick: varint,
  players: vec(SamplePlayer, 64),
  events: vec(SampleEvent, 16),
  blob: bytes(32),
});

/** The files' externally tagged enums and hex byte arrays, as the typed codecs hold them. */
function typed(type: string, value: unknown): unknown {
  if (type === "SeedEntity") {
    return value;
  }
  const snapshot = value as { events: unknown[]; blob: string };
  return {
    ...snapshot,
    events: snapshot.events.map((event) => {
      if (typeof event === "string") {
        return { tag: event, value: null };
      }
      const [[tag, inner]] = Object.entries(event as object) as [[string, unknown]];
      return { tag, value: inner };
    }),
    blob: fromHex(snapshot.blob),
  };
}

describe("composites.json", () => {
  it.each(composites.map((v) => [v.name, v] as const))("%s: ops and typed codecs", (_name, vector) => {
    // What the spec asks of a port: the ops encode to hex, and hex decodes through them.
    expect(encodeOps(vector.ops)).toBe(vector.hex);
    decodeOps(vector.hex, vector.ops);

    const layout = (vector.type === "SeedEntity" ? SeedEntity : SampleSnapshot) as Codec<unknown>;
    const value = typed(vector.type, vector.value);
    expect(toHex(encode(layout, value))).toBe(vector.hex);
    expect(decode(layout, fromHex(vector.hex))).toEqual(value);
  });
});
