/**
 * Message layouts built from parts, the TypeScript counterpart of `#[derive(Encode, Decode)]`
 * and `#[wire(...)]`: a {@link Codec} writes and reads one value with one layout, and the
 * combinators ({@link struct}, {@link array}, {@link option}, {@link vec}, {@link enumOf})
 * compose them in wire order (`docs/PROTOCOL.md`, "Composite types").
 *
 * ```ts
 * const SeedEntity = struct({
 *   name: string(32),
 *   health: array(range(0, 1000), 2),
 *   dead: bool,
 * });
 * const bytes = encode(SeedEntity, { name: "Casey", health: [100, 100], dead: false });
 * const entity = decode(SeedEntity, bytes); // throws DecodeError on bad bytes
 * ```
 */

import { EncodeError, checkKeyName, checkLayout } from "./errors.js";
import { Quantize } from "./quantize.js";
import { BitReader } from "./reader.js";
import { bitsForSpan } from "./span.js";
import { BitWriter, type BitWriterOptions } from "./writer.js";

/**
 * One value's layout: how to write it, how to read it, the fewest bits it can take, and the
 * value the Rust type's `Default` gives.
 */
export interface Codec<T> {
  /** Writes `value`; an `EncodeError` if it breaks the layout's bounds. */
  encode(writer: BitWriter, value: T): void;
  /** Reads a value; a `DecodeError` if the input breaks the layout. */
  decode(reader: BitReader): T;
  /** The fewest bits any value takes (sequences use it to refuse impossible lengths early). */
  readonly minBits: number;
  /**
   * A new copy of the Rust field's `Default` (0, `false`, `""`, `[]`, `null`, each element's
   * default in an array), which need not be inside the layout's bounds: what a replicated
   * field holds when the server does not send it (`docs/REPLICATION.md`, "Types").
   */
  defaultValue(): T;
}

/** The type a codec reads and writes. */
export type Infer<C> = C extends Codec<infer T> ? T : never;

function codec<T>(
  minBits: number,
  encode: Codec<T>["encode"],
  decode: Codec<T>["decode"],
  defaultValue: Codec<T>["defaultValue"],
): Codec<T> {
  return { encode, decode, minBits, defaultValue };
}

const zero = (): number => 0;
const zeroBig = (): bigint => 0n;

/** Encodes one whole message. */
export function encode<T>(layout: Codec<T>, value: T, options?: BitWriterOptions): Uint8Array {
  const writer = new BitWriter(options);
  layout.encode(writer, value);
  return writer.finish();
}

/** Decodes bytes that must hold exactly one message (only zero padding may follow it). */
export function decode<T>(layout: Codec<T>, bytes: Uint8Array): T {
  const reader = new BitReader(bytes);
  const value = layout.decode(reader);
  reader.finish();
  return value;
}

/** A boolean, 1 bit. */
export const bool: Codec<boolean> = codec(1, (w, v) => w.writeBool(v), (r) => r.readBool(), () => false);

/** An unsigned integer of `bits` bits (`#[wire(bits = N)]`, or `u8`/`u16`/`u32` naturally). */
export function uint(bits: number): Codec<number> {
  checkLayout(bits <= 53, `uint(${bits}) can exceed a safe integer: use uintBig`);
  return codec(bits, (w, v) => w.writeUint(v, bits), (r) => r.readUint(bits), zero);
}

/** An unsigned integer of up to 64 bits as a bigint (`u64` naturally). */
export function uintBig(bits: number): Codec<bigint> {
  return codec(bits, (w, v) => w.writeUint(v, bits), (r) => r.readUintBig(bits), zeroBig);
}

/** A two's complement signed integer of its natural width (`i8`, `i16`, `i32`). */
export function int(bits: 8 | 16 | 32): Codec<number> {
  const half = 2 ** (bits - 1);
  return codec(
    bits,
    (w, v) => {
      if (!Number.isSafeInteger(v) || v < -half || v >= half) {
        throw new EncodeError("out_of_range", `value ${v} outside range ${-half}..=${half - 1}`);
      }
      w.writeUint(v < 0 ? v + 2 * half : v, bits);
    },
    (r) => {
      const raw = r.readUint(bits);
      return raw >= half ? raw - 2 * half : raw;
    },
    zero,
  );
}

/** An integer in `min..=max` (`#[wire(min = A, max = B)]`); its default is 0, as in Rust, even outside the range. */
export function range(min: number, max: number): Codec<number> {
  return codec(bitsForSpan(max - min), (w, v) => w.writeRange(v, min, max), (r) => r.readRange(min, max), zero);
}

/** An integer in `min..=max` with bigint bounds (spans up to 2^64 − 1). */
export function rangeBig(min: bigint, max: bigint): Codec<bigint> {
  return codec(
    bitsForSpan(max - min),
    (w, v) => w.writeRange(v, min, max),
    (r) => r.readRangeBig(min, max),
    zeroBig,
  );
}

/** An unsigned varint (`#[wire(varint)]` on an unsigned field) that fits a safe integer. */
export const varint: Codec<number> = codec(8, (w, v) => w.writeVarint(v), (r) => r.readVarint(), zero);
/** An unsigned varint up to 2^64 − 1. */
export const varintBig: Codec<bigint> = codec(8, (w, v) => w.writeVarint(v), (r) => r.readVarintBig(), zeroBig);
/** A zigzag varint (`#[wire(varint)]` on a signed field) that fits a safe integer. */
export const varintSigned: Codec<number> = codec(
  8,
  (w, v) => w.writeVarintSigned(v),
  (r) => r.readVarintSigned(),
  zero,
);
/** A zigzag varint, any `i64`. */
export const varintSignedBig: Codec<bigint> = codec(
  8,
  (w, v) => w.writeVarintSigned(v),
  (r) => r.readVarintSignedBig(),
  zeroBig,
);

/** An `f32`, its 32 bits raw. */
export const f32: Codec<number> = codec(32, (w, v) => w.writeF32(v), (r) => r.readF32(), zero);
/** An `f64`, its 64 bits raw. */
export const f64: Codec<number> = codec(64, (w, v) => w.writeF64(v), (r) => r.readF64(), zero);

/** An `f32` on a grid (`#[wire(quantize(min = A, max = B, resolution = R))]`); its default is 0, as in Rust, even off the grid. */
export function quantized(grid: Quantize): Codec<number>;
export function quantized(min: number, max: number, resolution: number): Codec<number>;
export function quantized(gridOrMin: Quantize | number, max?: number, resolution?: number): Codec<number> {
  const grid = gridOrMin instanceof Quantize ? gridOrMin : new Quantize(gridOrMin, max ?? NaN, resolution ?? NaN);
  return codec(grid.bits, (w, v) => w.writeQuantized(v, grid), (r) => r.readQuantized(grid), zero);
}

/** A UTF-8 string of at most `maxLen` bytes (`#[wire(max_len = N)] String`). */
export function string(maxLen: number): Codec<string> {
  return codec(bitsForSpan(maxLen), (w, v) => w.writeString(v, maxLen), (r) => r.readString(maxLen), () => "");
}

/** A byte array of at most `maxLen` bytes (`#[wire(max_len = N)] Vec<u8>`). */
export function bytes(maxLen: number): Codec<Uint8Array> {
  return codec<Uint8Array>(
    bitsForSpan(maxLen),
    (w, v) => w.writeBytes(v, maxLen),
    (r) => r.readBytes(maxLen),
    () => new Uint8Array(0),
  );
}

/** `count` bytes with no prefix. */
export function rawBytes(count: number): Codec<Uint8Array> {
  return codec<Uint8Array>(
    count * 8,
    (w, v) => {
      checkLayout(v.length === count, `rawBytes(${count}) given ${v.length} bytes`);
      w.writeRawBytes(v);
    },
    (r) => r.readRawBytes(count),
    () => new Uint8Array(count),
  );
}

/** A fixed-size array `[T; N]`: its elements in order, no length. */
export function array<T>(element: Codec<T>, length: number): Codec<T[]> {
  return codec(
    element.minBits * length,
    (w, v) => {
      checkLayout(v.length === length, `array of ${length} given ${v.length} elements`);
      for (const item of v) {
        element.encode(w, item);
      }
    },
    (r) => {
      const out: T[] = [];
      for (let i = 0; i < length; i++) {
        out.push(element.decode(r));
      }
      return out;
    },
    () => Array.from({ length }, () => element.defaultValue()),
  );
}

/** `Option<T>`: a presence bit, then the value; `null` for `None`. */
export function option<T>(inner: Codec<T>): Codec<T | null> {
  return codec<T | null>(
    1,
    (w, v) => {
      w.writeBool(v !== null);
      if (v !== null) {
        inner.encode(w, v);
      }
    },
    (r) => (r.readBool() ? inner.decode(r) : null),
    () => null,
  );
}

/** `Vec<T>` of at most `maxLen` elements: a length prefix, then the elements. */
export function vec<T>(element: Codec<T>, maxLen: number): Codec<T[]> {
  return codec<T[]>(
    bitsForSpan(maxLen),
    (w, v) => {
      w.writeLen(v.length, maxLen);
      for (const item of v) {
        element.encode(w, item);
      }
    },
    (r) => {
      // A length the input cannot hold fails before anything is decoded or allocated.
      const len = r.readLenFor(maxLen, element.minBits);
      const out: T[] = [];
      for (let i = 0; i < len; i++) {
        out.push(element.decode(r));
      }
      return out;
    },
    () => [],
  );
}

/** A struct: its fields in declaration order, which is the order of `fields`' keys. */
export function struct<F extends Record<string, Codec<unknown>>>(
  fields: F,
): Codec<{ [K in keyof F]: Infer<F[K]> }> {
  const entries = Object.entries(fields);
  for (const [name] of entries) {
    checkKeyName("struct field name", name);
  }
  const minBits = entries.reduce((sum, [, field]) => sum + field.minBits, 0);
  return codec(
    minBits,
    (w, v) => {
      for (const [name, field] of entries) {
        field.encode(w, (v as Record<string, unknown>)[name]);
      }
    },
    (r) => {
      const out: Record<string, unknown> = {};
      for (const [name, field] of entries) {
        out[name] = field.decode(r);
      }
      return out as { [K in keyof F]: Infer<F[K]> };
    },
    () => {
      const out: Record<string, unknown> = {};
      for (const [name, field] of entries) {
        out[name] = field.defaultValue();
      }
      return out as { [K in keyof F]: Infer<F[K]> };
    },
  );
}

/** A field-less enum variant's (or struct's) layout: 0 bits. */
export const unit: Codec<null> = codec(0, () => {}, () => null, () => null);

/** An enum value: the variant's name and its fields' value (`null` for a unit variant). */
export type Variant<V extends Record<string, Codec<unknown>>> = {
  [K in keyof V]: { tag: K; value: Infer<V[K]> };
}[keyof V];

/**
 * An enum: the variant's index (declaration order, the order of `variants`' keys) in
 * `bitsForSpan(count - 1)` bits, then the variant's fields. Its default is the first variant
 * with its fields' defaults: the layout does not carry Rust's `#[default]`, so a replicated
 * enum field's Rust type should make its first variant the default.
 */
export function enumOf<V extends Record<string, Codec<unknown>>>(variants: V): Codec<Variant<V>> {
  const entries = Object.entries(variants);
  checkLayout(entries.length > 0, "an enum without variants cannot be encoded");
  for (const [name] of entries) {
    checkKeyName("enum variant name", name);
  }
  const bits = bitsForSpan(entries.length - 1);
  const index = new Map(entries.map(([name], i) => [name, i]));
  const minBits = bits + Math.min(...entries.map(([, v]) => v.minBits));
  return codec(
    minBits,
    (w, v) => {
      const i = index.get(v.tag as string);
      checkLayout(i !== undefined, `unknown enum variant ${String(v.tag)}`);
      w.writeUint(i!, bits);
      entries[i!]![1].encode(w, v.value);
    },
    (r) => {
      const i = r.readRange(0, entries.length - 1);
      const [tag, variant] = entries[i]!;
      return { tag, value: variant.decode(r) } as Variant<V>;
    },
    () => {
      const [tag, variant] = entries[0]!;
      return { tag, value: variant.defaultValue() } as Variant<V>;
    },
  );
}
