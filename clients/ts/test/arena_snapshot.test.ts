// The snapshot decoder under hostile bytes: truncations, bit flips and noise fail with a
// SnapshotError only, and a failed decode stores and acknowledges nothing.
import { describe, expect, it } from "vitest";

import { BitWriter } from "../src/wire/index.js";
import { SnapshotDecoder, SnapshotError, SnapshotSchema } from "../arena/src/snapshot.js";
import { fromHex, readRepoJson } from "./vectors.js";

interface SnapshotFile {
  schema: { map_width: number; map_height: number; max_health: number; history: number };
  vectors: { name: string; hex: string; decoded: { tick: number } }[];
}

const file = readRepoJson<SnapshotFile>("crates/arena/tests/vectors/snapshots.json");
const schema = new SnapshotSchema(file.schema.map_width, file.schema.map_height, file.schema.max_health);
const bytes = file.vectors.map((v) => fromHex(v.hex));

/** A decoder holding every vector's view. */
function primed(): SnapshotDecoder {
  const decoder = new SnapshotDecoder(schema, file.schema.history);
  for (const b of bytes) {
    decoder.decode(b);
  }
  return decoder;
}

/** mulberry32: a small seeded generator, so a failure reproduces. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Decodes, returning the error kind or "ok"; anything thrown but a SnapshotError fails the test. */
function attempt(decoder: SnapshotDecoder, input: Uint8Array): string {
  try {
    decoder.decode(input);
    return "ok";
  } catch (error) {
    expect(error).toBeInstanceOf(SnapshotError);
    return (error as SnapshotError).kind;
  }
}

describe("SnapshotDecoder", () => {
  it("refuses every truncation of every vector and keeps its state", () => {
    const decoder = primed();
    const newest = decoder.newest;
    const current = decoder.current;
    for (const b of bytes) {
      for (let len = 0; len < b.length; len++) {
        expect(attempt(decoder, b.subarray(0, len))).not.toBe("ok");
        expect(decoder.newest).toBe(newest);
        expect(decoder.current).toBe(current);
      }
    }
  });

  it("refuses trailing bytes", () => {
    const full = bytes[0]!;
    const longer = new Uint8Array(full.length + 1);
    longer.set(full);
    expect(attempt(new SnapshotDecoder(schema, 32), longer)).toBe("malformed");
  });

  it("fails only with SnapshotError on flipped bits and on noise", () => {
    const next = random(7);
    for (let i = 0; i < 3000; i++) {
      const decoder = primed();
      const source = bytes[Math.floor(next() * bytes.length)]!;
      const input = Uint8Array.from(source);
      const flips = 1 + Math.floor(next() * 3);
      for (let f = 0; f < flips; f++) {
        const bit = Math.floor(next() * input.length * 8);
        input[bit >> 3]! ^= 1 << (bit & 7);
      }
      attempt(decoder, input);
      const noise = Uint8Array.from({ length: Math.floor(next() * 64) }, () => Math.floor(next() * 256));
      attempt(decoder, noise);
      const view = decoder.current?.entities ?? [];
      expect(view.length).toBeLessThanOrEqual(255);
      for (let j = 1; j < view.length; j++) {
        expect(view[j - 1]!.id).toBeLessThan(view[j]!.id);
      }
    }
  });

  it("refuses a baseline age outside the history", () => {
    const decoder = new SnapshotDecoder(schema, 4);
    for (const age of [0, 4, 255]) {
      const writer = new BitWriter();
      writer.writeUint(100, 32);
      writer.writeBool(true);
      writer.writeUint(age, 8);
      expect(attempt(decoder, writer.finish())).toBe("inconsistent");
    }
  });

  it("acknowledges the newest tick, not the last decoded", () => {
    const decoder = primed();
    const newest = decoder.newest;
    // The full snapshot again (an old tick arriving late) decodes but is not newer.
    decoder.decode(bytes[0]!);
    expect(decoder.newest).toBe(newest);
    expect(decoder.current?.tick).toBe(file.vectors[0]!.decoded.tick);
  });

  it("refuses schemas the format cannot address", () => {
    expect(() => new SnapshotSchema(0.5, 30, 100)).toThrow(RangeError);
    expect(() => new SnapshotSchema(40, 1024, 100)).toThrow(RangeError);
    expect(() => new SnapshotSchema(40, 30, 0)).toThrow(RangeError);
    expect(() => new SnapshotSchema(NaN, 30, 100)).toThrow(RangeError);
  });
});
