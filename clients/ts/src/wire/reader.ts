import { DecodeError, checkLayout } from "./errors.js";
import type { Quantize } from "./quantize.js";
import { bitsForSpan } from "./span.js";

const TWO_POW_32 = 2 ** 32;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const U64_MAX = (1n << 64n) - 1n;

// fatal: invalid UTF-8 is an error, not U+FFFD; ignoreBOM: a leading U+FEFF is kept.
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Reads a message written by a {@link BitWriter} (or the Rust `BitWriter`).
 *
 * Every read checks the input: running out, a value outside its bounds, an overlong varint
 * or bad UTF-8 is a {@link DecodeError} and nothing else; nothing is allocated for a length
 * before it has been checked against both its declared maximum and the bits actually left.
 * Call {@link finish} after the last field: it refuses trailing bytes and non-zero padding.
 *
 * Reads that return a `number` fail with `out_of_range` for a value above 2^53 − 1 (as a
 * Rust field too narrow for the value does); the `*Big` forms return bigints.
 */
export class BitReader {
  private readonly buf: Uint8Array;
  private bitPos = 0;

  constructor(bytes: Uint8Array) {
    this.buf = bytes;
  }

  /** Bits read so far. */
  get bitsRead(): number {
    return this.bitPos;
  }

  /** Bits left in the input, including the last byte's padding. */
  get remainingBits(): number {
    return this.buf.length * 8 - this.bitPos;
  }

  /** Checks that at most the last byte's padding remains, and that it is zero. */
  finish(): void {
    const remaining = this.remainingBits;
    if (remaining >= 8) {
      throw new DecodeError("trailing_bytes", `${Math.floor(remaining / 8)} trailing bytes after the message`);
    }
    if (remaining > 0 && this.peekBits(remaining) !== 0) {
      throw new DecodeError("non_zero_padding", "padding bits are not zero");
    }
  }

  private truncated(needed: number): DecodeError {
    return new DecodeError(
      "truncated",
      `input truncated: needed ${needed} more bits, ${this.remainingBits} remain`,
    );
  }

  private peekBits(bits: number): number {
    let value = 0;
    let pos = this.bitPos;
    let got = 0;
    while (got < bits) {
      const offset = pos & 7;
      const take = Math.min(8 - offset, bits - got);
      const chunk = (this.buf[pos >>> 3]! >>> offset) & ((1 << take) - 1);
      // Multiplication, not <<, so bit 31 does not turn the result negative.
      value += chunk * 2 ** got;
      pos += take;
      got += take;
    }
    return value;
  }

  /** Reads `bits` bits, `0 <= bits <= 32`, as an unsigned integer. */
  readBits(bits: number): number {
    checkLayout(Number.isInteger(bits) && bits >= 0 && bits <= 32, `readBits of ${bits} bits`);
    if (bits > this.remainingBits) {
      throw this.truncated(bits);
    }
    const value = this.peekBits(bits);
    this.bitPos += bits;
    return value;
  }

  /** Skips to the next byte boundary; the skipped bits must be zero. */
  align(): void {
    if (this.readBits((8 - (this.bitPos % 8)) % 8) !== 0) {
      throw new DecodeError("non_zero_padding", "alignment bits are not zero");
    }
  }

  /** One bit. */
  readBool(): boolean {
    return this.readBits(1) === 1;
  }

  /** An unsigned integer of exactly `bits` bits, `0 <= bits <= 64`, that fits a safe integer. */
  readUint(bits: number): number {
    checkLayout(Number.isInteger(bits) && bits >= 0 && bits <= 64, `readUint of ${bits} bits`);
    if (bits <= 32) {
      return this.readBits(bits);
    }
    if (bits > this.remainingBits) {
      throw this.truncated(bits);
    }
    const low = this.readBits(32);
    const high = this.readBits(bits - 32);
    const value = high * TWO_POW_32 + low;
    if (!Number.isSafeInteger(value)) {
      throw new DecodeError(
        "out_of_range",
        `value ${(BigInt(high) << 32n) | BigInt(low)} outside range 0..=${Number.MAX_SAFE_INTEGER}`,
      );
    }
    return value;
  }

  /** An unsigned integer of exactly `bits` bits, `0 <= bits <= 64`. */
  readUintBig(bits: number): bigint {
    checkLayout(Number.isInteger(bits) && bits >= 0 && bits <= 64, `readUint of ${bits} bits`);
    if (bits <= 32) {
      return BigInt(this.readBits(bits));
    }
    if (bits > this.remainingBits) {
      throw this.truncated(bits);
    }
    const low = BigInt(this.readBits(32));
    return (BigInt(this.readBits(bits - 32)) << 32n) | low;
  }

  /** An integer declared in `min..=max`, both safe integers with a safe span. */
  readRange(min: number, max: number): number {
    checkLayout(
      Number.isSafeInteger(min) && Number.isSafeInteger(max) && min <= max && Number.isSafeInteger(max - min),
      `range ${min}..=${max} needs readRangeBig`,
    );
    const span = max - min;
    const offset = this.readUint(bitsForSpan(span));
    if (offset > span) {
      throw new DecodeError("out_of_range", `value ${min + offset} outside range ${min}..=${max}`);
    }
    return min + offset;
  }

  /** An integer declared in `min..=max`, any span below 2^64. */
  readRangeBig(min: bigint, max: bigint): bigint {
    checkLayout(min <= max && max - min <= U64_MAX, `range ${min}..=${max} is empty or spans more than 64 bits`);
    const span = max - min;
    const offset = this.readUintBig(bitsForSpan(span));
    if (offset > span) {
      throw new DecodeError("out_of_range", `value ${min + offset} outside range ${min}..=${max}`);
    }
    return min + offset;
  }

  /** A varint as a number when it is at most 2^53 − 1, as a bigint above. */
  private readVarintAny(): number | bigint {
    let value = 0;
    let big: bigint | undefined;
    for (let group = 0; group < 10; group++) {
      const byte = this.readBits(8);
      const payload = byte & 0x7f;
      const more = (byte & 0x80) !== 0;
      // The tenth group holds bit 63 only; anything else overflows.
      if (group === 9 && (payload > 1 || more)) {
        throw new DecodeError("invalid_varint", "varint passes 2^64-1");
      }
      if (group < 7) {
        // At most 49 bits so far: exact in a double.
        value += payload * 2 ** (7 * group);
      } else {
        big = (big ?? BigInt(value)) | (BigInt(payload) << BigInt(7 * group));
      }
      if (!more) {
        // A zero last group (other than a lone zero) is an overlong encoding.
        if (payload === 0 && group > 0) {
          throw new DecodeError("invalid_varint", "overlong varint");
        }
        if (big === undefined) {
          return value;
        }
        return big <= MAX_SAFE ? Number(big) : big;
      }
    }
    // Unreachable: the tenth group either ends the varint or fails above.
    throw new DecodeError("invalid_varint", "varint longer than 10 groups");
  }

  /** A varint that must fit a safe integer. */
  readVarint(): number {
    const value = this.readVarintAny();
    if (typeof value === "bigint") {
      throw new DecodeError("out_of_range", `value ${value} outside range 0..=${Number.MAX_SAFE_INTEGER}`);
    }
    return value;
  }

  /** A varint, any value up to 2^64 − 1. */
  readVarintBig(): bigint {
    return BigInt(this.readVarintAny());
  }

  /** A zigzag varint that must fit a safe integer. */
  readVarintSigned(): number {
    const zigzag = this.readVarintAny();
    if (typeof zigzag === "number") {
      return zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2;
    }
    const value = unzigzag(zigzag);
    if (value > MAX_SAFE || value < -MAX_SAFE) {
      throw new DecodeError("out_of_range", `value ${value} outside range ${-MAX_SAFE}..=${MAX_SAFE}`);
    }
    return Number(value);
  }

  /** A zigzag varint, any `i64`. */
  readVarintSignedBig(): bigint {
    return unzigzag(BigInt(this.readVarintAny()));
  }

  /** An `f32` as a number (a NaN's payload may not survive: use {@link readF32Bits} for that). */
  readF32(): number {
    f32View.setUint32(0, this.readBits(32), true);
    return f32View.getFloat32(0, true);
  }

  /** An `f32`'s 32-bit pattern. */
  readF32Bits(): number {
    return this.readBits(32);
  }

  /** An `f64` as a number (use {@link readF64Bits} to keep a NaN's payload). */
  readF64(): number {
    if (this.remainingBits < 64) {
      throw this.truncated(64);
    }
    f64View.setUint32(0, this.readBits(32), true);
    f64View.setUint32(4, this.readBits(32), true);
    return f64View.getFloat64(0, true);
  }

  /** An `f64`'s 64-bit pattern. */
  readF64Bits(): bigint {
    return this.readUintBig(64);
  }

  /** A float quantized to `grid`. */
  readQuantized(grid: Quantize): number {
    return grid.valueAt(this.readUint(grid.bits));
  }

  /** A length in `0..=max`. */
  readLen(max: number): number {
    const len = this.readUint(bitsForSpan(max));
    if (len > max) {
      throw new DecodeError("too_long", `length ${len} exceeds max ${max}`);
    }
    return len;
  }

  /**
   * A length in `0..=max` for a sequence whose elements take at least `minElementBits`
   * each, refused as `truncated` when the remaining input cannot hold that many.
   */
  readLenFor(max: number, minElementBits: number): number {
    const len = this.readLen(max);
    const needed = len * minElementBits;
    if (needed > this.remainingBits) {
      throw this.truncated(needed);
    }
    return len;
  }

  /** `count` raw bytes, no prefix; checked against the input before anything is allocated. */
  readRawBytes(count: number): Uint8Array {
    checkLayout(Number.isSafeInteger(count) && count >= 0, `readRawBytes of ${count} bytes`);
    if (count * 8 > this.remainingBits) {
      throw this.truncated(count * 8);
    }
    if (this.bitPos % 8 === 0) {
      const start = this.bitPos / 8;
      this.bitPos += count * 8;
      return this.buf.slice(start, start + count);
    }
    const out = new Uint8Array(count);
    for (let i = 0; i < count; i++) {
      out[i] = this.readBits(8);
    }
    return out;
  }

  /** A byte array of at most `maxLen` bytes. */
  readBytes(maxLen: number): Uint8Array {
    return this.readRawBytes(this.readLenFor(maxLen, 8));
  }

  /** A UTF-8 string of at most `maxLen` bytes. */
  readString(maxLen: number): string {
    const bytes = this.readBytes(maxLen);
    try {
      return utf8.decode(bytes);
    } catch {
      throw new DecodeError("invalid_utf8", "string bytes are not UTF-8");
    }
  }
}

const f32View = new DataView(new ArrayBuffer(4));
const f64View = new DataView(new ArrayBuffer(8));

function unzigzag(zigzag: bigint): bigint {
  return (zigzag >> 1n) ^ -(zigzag & 1n);
}
