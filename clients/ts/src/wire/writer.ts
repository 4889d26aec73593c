import { EncodeError, checkLayout } from "./errors.js";
import type { Quantize } from "./quantize.js";
import { bitsForSpan } from "./span.js";

const TWO_POW_32 = 2 ** 32;
const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

const utf8 = new TextEncoder();

/** Options for a {@link BitWriter}. */
export interface BitWriterOptions {
  /** Bytes to reserve up front; the buffer grows as needed. Default 64. */
  initialCapacity?: number;
  /** Most bytes the message may take; past it a write fails with `buffer_full`. Default unlimited. */
  maxBytes?: number;
}

/**
 * Writes a message bit by bit, least significant bit first (`docs/PROTOCOL.md`, "The bit
 * stream"), into a buffer that grows as needed; {@link finish} pads the last byte and
 * returns the bytes.
 *
 * Integers up to 2^53 − 1 may be given as numbers; wider ones (a `u64` field, the full `i64`
 * range) as bigints. A value outside its declared bounds is an {@link EncodeError}, after
 * which the writer's contents are unspecified: {@link reset} it.
 *
 * ```ts
 * const writer = new BitWriter();
 * writer.writeRange(750, 0, 1000); // 10 bits
 * writer.writeBool(true);
 * writer.finish(); // Uint8Array [0xee, 0x06]
 * ```
 */
export class BitWriter {
  private buf: Uint8Array;
  private bitPos = 0;
  private readonly maxBytes: number;

  constructor(options: BitWriterOptions = {}) {
    this.buf = new Uint8Array(Math.max(1, options.initialCapacity ?? 64));
    this.maxBytes = options.maxBytes ?? Number.MAX_SAFE_INTEGER;
  }

  /** Bits written so far. */
  get bitsWritten(): number {
    return this.bitPos;
  }

  /** Starts a new message, keeping the buffer. */
  reset(): void {
    this.buf.fill(0, 0, Math.ceil(this.bitPos / 8));
    this.bitPos = 0;
  }

  /** The message so far, its last byte zero-padded, as a new array. */
  finish(): Uint8Array {
    return this.buf.slice(0, Math.ceil(this.bitPos / 8));
  }

  private reserve(bits: number): void {
    const needed = Math.ceil((this.bitPos + bits) / 8);
    if (needed > this.maxBytes) {
      throw new EncodeError("buffer_full", `output buffer of ${this.maxBytes} bytes is full`);
    }
    if (needed > this.buf.length) {
      const grown = new Uint8Array(Math.min(Math.max(needed, this.buf.length * 2), this.maxBytes));
      grown.set(this.buf);
      this.buf = grown;
    }
  }

  /** Writes the low `bits` bits of `value` (an unsigned integer below 2^32), `0 <= bits <= 32`. */
  writeBits(value: number, bits: number): void {
    checkLayout(Number.isInteger(bits) && bits >= 0 && bits <= 32, `writeBits of ${bits} bits`);
    if (bits === 0) {
      return;
    }
    this.reserve(bits);
    // Higher bits are dropped, as Rust's write_bits does.
    let v = bits === 32 ? value >>> 0 : (value >>> 0) & (0xffffffff >>> (32 - bits));
    let pos = this.bitPos;
    let left = bits;
    while (left > 0) {
      const offset = pos & 7;
      const take = Math.min(8 - offset, left);
      this.buf[pos >>> 3]! |= (v & ((1 << take) - 1)) << offset;
      v >>>= take;
      pos += take;
      left -= take;
    }
    this.bitPos = pos;
  }

  /** Writes zero bits up to the next byte boundary. */
  align(): void {
    this.writeBits(0, (8 - (this.bitPos % 8)) % 8);
  }

  /** One bit: 1 for true. */
  writeBool(value: boolean): void {
    this.writeBits(value ? 1 : 0, 1);
  }

  /** An unsigned integer in exactly `bits` bits, `0 <= bits <= 64`; refuses `value >= 2^bits`. */
  writeUint(value: number | bigint, bits: number): void {
    checkLayout(Number.isInteger(bits) && bits >= 0 && bits <= 64, `writeUint of ${bits} bits`);
    if (typeof value === "number") {
      if (!Number.isSafeInteger(value) || value < 0 || (bits < 53 && value >= 2 ** bits)) {
        throw outOfRange(value, 0, uintMax(bits));
      }
      if (bits <= 32) {
        this.writeBits(value, bits);
      } else {
        this.writeBits(value % TWO_POW_32, 32);
        this.writeBits(Math.floor(value / TWO_POW_32), bits - 32);
      }
      return;
    }
    if (value < 0n || value >= 1n << BigInt(bits)) {
      throw outOfRange(value, 0, uintMax(bits));
    }
    if (bits <= 32) {
      this.writeBits(Number(value), bits);
    } else {
      this.writeBits(Number(value & 0xffffffffn), 32);
      this.writeBits(Number(value >> 32n), bits - 32);
    }
  }

  /**
   * An integer declared in `min..=max` (span below 2^64), as its offset from `min` in
   * `bitsForSpan(max - min)` bits.
   */
  writeRange(value: number | bigint, min: number | bigint, max: number | bigint): void {
    if (typeof value === "number" && typeof min === "number" && typeof max === "number") {
      checkLayout(
        Number.isSafeInteger(min) && Number.isSafeInteger(max) && min <= max && Number.isSafeInteger(max - min),
        `range ${min}..=${max} needs bigint bounds`,
      );
      if (!Number.isSafeInteger(value) || value < min || value > max) {
        throw outOfRange(value, min, max);
      }
      this.writeUint(value - min, bitsForSpan(max - min));
      return;
    }
    if (typeof value === "number" && !Number.isSafeInteger(value)) {
      throw outOfRange(value, min, max);
    }
    const [v, lo, hi] = [BigInt(value), BigInt(min), BigInt(max)];
    checkLayout(lo <= hi && hi - lo <= U64_MAX, `range ${lo}..=${hi} is empty or spans more than 64 bits`);
    if (v < lo || v > hi) {
      throw outOfRange(v, lo, hi);
    }
    this.writeUint(v - lo, bitsForSpan(hi - lo));
  }

  /** An unsigned integer below 2^64 as a varint: 7-bit groups, least significant first. */
  writeVarint(value: number | bigint): void {
    if (typeof value === "number") {
      if (!Number.isSafeInteger(value) || value < 0) {
        throw outOfRange(value, 0, "2^64-1");
      }
      let v = value;
      while (v >= 0x80) {
        this.writeBits((v % 0x80) | 0x80, 8);
        v = Math.floor(v / 0x80);
      }
      this.writeBits(v, 8);
      return;
    }
    if (value < 0n || value > U64_MAX) {
      throw outOfRange(value, 0, "2^64-1");
    }
    let v = value;
    while (v >= 0x80n) {
      this.writeBits(Number(v & 0x7fn) | 0x80, 8);
      v >>= 7n;
    }
    this.writeBits(Number(v), 8);
  }

  /** A signed integer in the `i64` range, zigzag-mapped (0, −1, 1, −2 … → 0, 1, 2, 3 …), as a varint. */
  writeVarintSigned(value: number | bigint): void {
    if (typeof value === "number") {
      if (!Number.isSafeInteger(value)) {
        throw outOfRange(value, "-2^63", "2^63-1");
      }
      const zigzag = value >= 0 ? value * 2 : -value * 2 - 1;
      if (Number.isSafeInteger(zigzag)) {
        this.writeVarint(zigzag);
        return;
      }
    }
    const v = BigInt(value);
    if (v < I64_MIN || v > I64_MAX) {
      throw outOfRange(v, I64_MIN, I64_MAX);
    }
    this.writeVarint(BigInt.asUintN(64, (v << 1n) ^ (v >> 63n)));
  }

  /**
   * An `f32` as its IEEE 754 bit pattern. A JavaScript number goes through `Math.fround`;
   * to keep a NaN's payload exactly, use {@link writeF32Bits}.
   */
  writeF32(value: number): void {
    f32View.setFloat32(0, value, true);
    this.writeBits(f32View.getUint32(0, true), 32);
  }

  /** An `f32` given as its 32-bit pattern (`0x3f800000` is 1.0). */
  writeF32Bits(bits: number): void {
    this.writeUint(bits, 32);
  }

  /** An `f64` as its IEEE 754 bit pattern; for an exact NaN payload use {@link writeF64Bits}. */
  writeF64(value: number): void {
    f64View.setFloat64(0, value, true);
    this.writeBits(f64View.getUint32(0, true), 32);
    this.writeBits(f64View.getUint32(4, true), 32);
  }

  /** An `f64` given as its 64-bit pattern. */
  writeF64Bits(bits: bigint): void {
    this.writeUint(bits, 64);
  }

  /** A float quantized to `grid`, in `grid.bits` bits. */
  writeQuantized(value: number, grid: Quantize): void {
    this.writeUint(grid.stepOf(value), grid.bits);
  }

  /** A length in `0..=max` (of a string, byte array or sequence), in `bitsForSpan(max)` bits. */
  writeLen(len: number, max: number): void {
    if (len > max) {
      throw new EncodeError("too_long", `length ${len} exceeds max ${max}`);
    }
    this.writeUint(len, bitsForSpan(max));
  }

  /** Bytes, 8 bits each, with no length prefix. */
  writeRawBytes(bytes: Uint8Array): void {
    this.reserve(bytes.length * 8);
    if (this.bitPos % 8 === 0) {
      this.buf.set(bytes, this.bitPos / 8);
      this.bitPos += bytes.length * 8;
      return;
    }
    for (const byte of bytes) {
      this.writeBits(byte, 8);
    }
  }

  /** A byte array of at most `maxLen` bytes: its length, then its bytes. */
  writeBytes(bytes: Uint8Array, maxLen: number): void {
    this.writeLen(bytes.length, maxLen);
    this.writeRawBytes(bytes);
  }

  /** A string of at most `maxLen` UTF-8 bytes: its length in bytes, then its bytes. */
  writeString(value: string, maxLen: number): void {
    this.writeBytes(utf8.encode(value), maxLen);
  }
}

const f32View = new DataView(new ArrayBuffer(4));
const f64View = new DataView(new ArrayBuffer(8));

/** The largest `bits`-bit value, as the error message prints it. */
function uintMax(bits: number): string {
  return (2n ** BigInt(bits) - 1n).toString();
}

function outOfRange(value: unknown, min: unknown, max: unknown): EncodeError {
  return new EncodeError("out_of_range", `value ${String(value)} outside range ${String(min)}..=${String(max)}`);
}
