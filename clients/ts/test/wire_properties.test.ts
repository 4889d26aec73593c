// Seeded property tests: random values round-trip, and random or mangled bytes only ever
// fail with a DecodeError (never another exception, never a huge allocation).
import { describe, expect, it } from "vitest";

import { decodeInput } from "../arena/src/input.js";
import { parseConnectionParams } from "../src/transport/params.js";
import {
  BitReader,
  BitWriter,
  DecodeError,
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

/** xorshift32: the same sequence on every run, so a failure reproduces. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
  return {
    u32: next,
    below: (n: number) => next() % n,
    float: () => next() / 2 ** 32,
    bytes: (n: number) => Uint8Array.from({ length: n }, () => next() & 0xff),
  };
}

const Player = struct({
  id: uint(12),
  position: array(quantized(-512, 512, 0.01), 2),
  health: range(0, 100),
  score: varintSigned,
  name: option(string(16)),
  speed: f32,
});
const Event = enumOf({ Joined: struct({ id: uint(12) }), Chat: string(64), Shot: struct({ angle: quantized(0, 1, 0.001) }), Ended: unit });
const Snapshot = struct({ tick: varint, players: vec(Player, 64), events: vec(Event, 16), blob: bytes(32), alive: bool });

describe("round trips", () => {
  it("decode(encode(x)) == x for random snapshots, and the bits counted are the bits written", () => {
    const r = rng(7);
    const names = ["", "Ada", "🎮 gg", "\u0000nul", "\ufeffbom", "x".repeat(16)];
    for (let i = 0; i < 300; i++) {
      const players = Array.from({ length: r.below(5) }, () => ({
        id: r.below(4096),
        position: [Math.fround(r.below(102_401) * 0.01 - 512), Math.fround(-512 + r.below(102_401) * 0.01)],
        health: r.below(101),
        score: r.below(2_000_001) - 1_000_000,
        name: r.below(2) === 0 ? null : names[r.below(names.length)]!,
        speed: Math.fround(r.float() * 20 - 10),
      }));
      const value = {
        tick: r.u32() * 2 ** 21 + r.below(2 ** 21),
        players: players.map((p) => ({ ...p, position: p.position.map((v) => decode(quantized(-512, 512, 0.01), encode(quantized(-512, 512, 0.01), v))) })),
        events: [{ tag: "Ended" as const, value: null }, { tag: "Chat" as const, value: names[r.below(names.length)]! }],
        blob: r.bytes(r.below(33)),
        alive: r.below(2) === 1,
      };
      const writer = new BitWriter();
      Snapshot.encode(writer, value);
      const encoded = writer.finish();
      expect(encoded.length).toBe(Math.ceil(writer.bitsWritten / 8));
      expect(decode(Snapshot, encoded)).toEqual(value);
    }
  });
});

describe("hostile input", () => {
  function onlyDecodeErrors(label: string, decodeIt: (bytes: Uint8Array) => unknown, seed: number) {
    const r = rng(seed);
    let refused = 0;
    for (let i = 0; i < 3000; i++) {
      const input = r.bytes(r.below(64));
      try {
        decodeIt(input);
      } catch (error) {
        expect(error, `${label}: ${Buffer.from(input).toString("hex")}`).toBeInstanceOf(DecodeError);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(0);
  }

  it("random bytes fail a snapshot decode only with DecodeError", () => {
    onlyDecodeErrors("snapshot", (b) => decode(Snapshot, b), 11);
  });

  it("random bytes fail an input decode only with DecodeError", () => {
    onlyDecodeErrors("input", decodeInput, 12);
  });

  it("mangled valid encodings fail only with DecodeError", () => {
    const r = rng(13);
    const valid = encode(Snapshot, {
      tick: 99,
      players: [{ id: 1, position: [1.5, -2.25], health: 50, score: -3, name: "Ada", speed: 1 }],
      events: [{ tag: "Chat", value: "hello" }],
      blob: new Uint8Array([1, 2, 3]),
      alive: true,
    });
    for (let i = 0; i < 3000; i++) {
      const mangled = valid.slice(0, r.below(valid.length + 1));
      if (mangled.length > 0 && r.below(2) === 0) {
        mangled[r.below(mangled.length)]! ^= 1 << r.below(8);
      }
      try {
        decode(Snapshot, mangled);
      } catch (error) {
        expect(error).toBeInstanceOf(DecodeError);
      }
    }
  });

  it("a length prefix claiming more than the input holds fails before allocating", () => {
    // A vec of up to 64 players claims 63 of them in two bytes: refused from the length.
    const reader = new BitReader(new Uint8Array([0xff, 0x0f]));
    expect(() => reader.readLenFor(64, Player.minBits)).toThrow(DecodeError);
    const huge = new BitReader(new Uint8Array([0xff, 0xff, 0xff, 0x7f]));
    expect(() => huge.readBytes(2 ** 31)).toThrow(/truncated/);
  });

  it("random accepted messages are refused or valid, never an exception", () => {
    const r = rng(14);
    for (let i = 0; i < 3000; i++) {
      const params = parseConnectionParams(r.bytes(r.below(48)));
      if (params !== null) {
        expect(params.channels.length).toBeGreaterThan(0);
      }
    }
  });
});
