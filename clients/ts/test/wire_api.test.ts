// The parts of the wire API the golden vectors do not reach: natural signed integers,
// float helpers, the errors encoding reports, and each codec's default value.
import { describe, expect, it } from "vitest";

import {
  BitReader,
  BitWriter,
  EncodeError,
  Quantize,
  array,
  bool,
  bytes,
  decode,
  encode,
  enumOf,
  f32,
  int,
  option,
  quantized,
  range,
  rangeBig,
  rawBytes,
  string,
  struct,
  uint,
  uintBig,
  unit,
  varint,
  vec,
} from "../src/wire/index.js";
import { toHex } from "./vectors.js";

describe("wire API", () => {
  it("writes signed natural integers as two's complement", () => {
    expect(toHex(encode(int(8), -1))).toBe("ff");
    expect(toHex(encode(int(16), -2))).toBe("feff");
    expect(decode(int(32), encode(int(32), -2_147_483_648))).toBe(-2_147_483_648);
    expect(() => encode(int(8), 128)).toThrow(EncodeError);
  });

  it("round-trips floats as numbers and raw bits", () => {
    const w = new BitWriter();
    w.writeBool(true); // unaligned on purpose
    w.writeF32(1.5);
    w.writeF64(-0);
    w.writeF64(Math.PI);
    const r = new BitReader(w.finish());
    expect(r.readBool()).toBe(true);
    expect(r.readF32()).toBe(1.5);
    expect(Object.is(r.readF64(), -0)).toBe(true);
    expect(r.readF64()).toBe(Math.PI);
    r.finish();
  });

  it("reports each encode error with its kind and the bound", () => {
    const kind = (f: () => void) => {
      try {
        f();
        return "ok";
      } catch (error) {
        return error instanceof EncodeError ? `${error.kind}: ${error.message}` : String(error);
      }
    };
    expect(kind(() => new BitWriter().writeRange(1001, 0, 1000))).toBe("out_of_range: value 1001 outside range 0..=1000");
    expect(kind(() => new BitWriter().writeUint(16, 4))).toBe("out_of_range: value 16 outside range 0..=15");
    expect(kind(() => new BitWriter().writeString("too long", 4))).toBe("too_long: length 8 exceeds max 4");
    expect(kind(() => new BitWriter().writeQuantized(1.5, new Quantize(-1, 1, 0.5)))).toBe(
      "float_out_of_range: value 1.5 outside quantization range -1..=1",
    );
    expect(kind(() => new BitWriter({ maxBytes: 2 }).writeBits(0, 17))).toMatch(/^buffer_full/);
    expect(kind(() => new BitWriter().writeUint(1.5, 8))).toMatch(/^out_of_range/);
  });

  it("refuses layouts no message can declare with a RangeError", () => {
    expect(() => new Quantize(1, 0, 0.1)).toThrow(RangeError);
    expect(() => new Quantize(0, 1e9, 1)).toThrow(/finer than f32 precision/);
    expect(() => new BitWriter().writeBits(0, 33)).toThrow(RangeError);
    expect(() => struct({ 0: uint(1) })).toThrow(/integer-like/);
    expect(() => encode(rawBytes(2), new Uint8Array(3))).toThrow(RangeError);
  });

  it("gives each codec the default of its Rust type, a new copy each time", () => {
    const Crate = struct({
      at: array(quantized(1, 9, 0.5), 2),
      size: range(3, 7),
      big: rangeBig(1n, 5n),
      id: uintBig(64),
      open: bool,
      label: string(8),
      blob: bytes(4),
      key: rawBytes(2),
      tags: vec(uint(4), 3),
      lid: option(varint),
      angle: f32,
      offset: int(8),
      state: enumOf({ Closed: unit, Open: struct({ by: uint(8) }) }),
    });
    // A quantized or ranged number's default is 0 even outside its bounds, as Rust's is.
    expect(Crate.defaultValue()).toEqual({
      at: [0, 0],
      size: 0,
      big: 0n,
      id: 0n,
      open: false,
      label: "",
      blob: new Uint8Array(0),
      key: new Uint8Array(2),
      tags: [],
      lid: null,
      angle: 0,
      offset: 0,
      state: { tag: "Closed", value: null },
    });
    expect(Crate.defaultValue().at, "not one shared array").not.toBe(Crate.defaultValue().at);
  });

  it("reuses a writer after reset", () => {
    const w = new BitWriter({ initialCapacity: 1 });
    w.writeBits(0xffffffff, 32);
    w.reset();
    w.writeBits(1, 1);
    expect(toHex(w.finish())).toBe("01");
  });
});
