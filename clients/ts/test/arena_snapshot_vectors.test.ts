// crates/arena/tests/vectors/snapshots.json, written by the server's snapshot encoder
// (crates/arena/tests/snapshot_vectors.rs): decoded in order by one decoder, each delta
// against the view an earlier vector left, the TypeScript decoder must end with the
// server's views exactly.
import { describe, expect, it } from "vitest";

import { type DecodedSnapshot, SnapshotDecoder, SnapshotError, SnapshotSchema } from "../arena/src/snapshot.js";
import { f32Bits } from "./f32.js";
import { fromHex, readRepoJson } from "./vectors.js";

interface Decoded {
  tick: number;
  baseline: number | null;
  last_input: number | null;
  me: {
    alive: boolean;
    x_bits: number;
    y_bits: number;
    aim: number;
    health: number;
    respawn_in: number;
    kills: number;
    deaths: number;
    score: number;
  };
  entities: [number, number, number, number, number, boolean][];
  created: number[];
  updated: number[];
  destroyed: number[];
  bullets: [number, number, number, boolean][];
}
interface SnapshotFile {
  schema: { map_width: number; map_height: number; max_health: number; history: number };
  vectors: { name: string; hex: string; decoded: Decoded }[];
}

const file = readRepoJson<SnapshotFile>("crates/arena/tests/vectors/snapshots.json");
const schema = new SnapshotSchema(file.schema.map_width, file.schema.map_height, file.schema.max_health);

/** The decoded snapshot in the file's JSON shape (decoded_json in snapshot_vectors.rs). */
function asJson(snapshot: DecodedSnapshot): Decoded {
  return {
    tick: snapshot.tick,
    baseline: snapshot.baseline,
    last_input: snapshot.lastInput,
    me: {
      alive: snapshot.me.alive,
      x_bits: f32Bits(snapshot.me.x),
      y_bits: f32Bits(snapshot.me.y),
      aim: snapshot.me.aim,
      health: snapshot.me.health,
      respawn_in: snapshot.me.respawnIn,
      kills: snapshot.me.kills,
      deaths: snapshot.me.deaths,
      score: snapshot.me.score,
    },
    entities: snapshot.entities.map((e) => [e.id, e.state.x, e.state.y, e.state.aim, e.state.health, e.state.alive]),
    created: snapshot.created,
    updated: snapshot.updated,
    destroyed: snapshot.destroyed,
    bullets: snapshot.bullets.map((b) => [b.x, b.y, b.direction, b.mine]),
  };
}

describe("snapshots.json", () => {
  it("describes the schema the decoder builds", () => {
    expect(schema.positionX.bits).toBe(12);
    expect(schema.positionY.bits).toBe(11);
    expect(schema.healthBits).toBe(7);
    expect(file.vectors.length).toBeGreaterThanOrEqual(5);
  });

  it("decodes every vector in order to the server's view", () => {
    const decoder = new SnapshotDecoder(schema, file.schema.history);
    for (const vector of file.vectors) {
      const snapshot = decoder.decode(fromHex(vector.hex));
      expect(asJson(snapshot), vector.name).toEqual(vector.decoded);
      expect(decoder.newest).toBe(vector.decoded.tick);
      expect(decoder.view(vector.decoded.tick)).toEqual(snapshot.entities);
    }
  });

  it("covers a full snapshot, creates, updates, destroys and bullets", () => {
    const all = file.vectors.map((v) => v.decoded);
    expect(all.some((d) => d.baseline === null)).toBe(true);
    expect(all.some((d) => d.baseline !== null && d.created.length > 0)).toBe(true);
    expect(all.some((d) => d.updated.length > 0)).toBe(true);
    expect(all.some((d) => d.destroyed.length > 0)).toBe(true);
    expect(all.some((d) => d.bullets.some((b) => b[3]))).toBe(true);
  });

  it("refuses a delta whose baseline it does not hold, and stores nothing", () => {
    const decoder = new SnapshotDecoder(schema, file.schema.history);
    const delta = file.vectors.find((v) => v.decoded.baseline !== null)!;
    expect(() => decoder.decode(fromHex(delta.hex))).toThrow(SnapshotError);
    try {
      decoder.decode(fromHex(delta.hex));
    } catch (error) {
      expect((error as SnapshotError).kind).toBe("unknown_baseline");
    }
    expect(decoder.newest).toBeNull();
    expect(decoder.current).toBeNull();
  });
});
