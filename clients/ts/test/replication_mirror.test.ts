// The mirror beyond the golden vectors: hostile bytes, stale and baseline-less snapshots,
// the format's rules, baselines kept, defaults, callbacks and their order, a listener that
// throws, the acknowledgement, and the interpolated view.
import { describe, expect, it } from "vitest";

import {
  EncodeError,
  InterpolatedMirror,
  MAX_HISTORY,
  Mirror,
  MirrorError,
  ackMessage,
  array,
  bool,
  kind,
  option,
  quantized,
  range,
  replicated,
  string,
  uint,
  type MirrorEntity,
  vec,
  type World,
} from "@tickwire/client";

import { EntityWorld } from "./generated/replication_fixture.js";
import { writeSnapshot } from "./replication_writer.js";
import { fromHex, readRepoJson } from "./vectors.js";

interface StoredSnapshot {
  name: string;
  viewer: number;
  tick: number;
  hex: string;
}
const stored = readRepoJson<{ snapshots: StoredSnapshot[] }>("crates/replicate/tests/vectors/replication.json").snapshots;
/** Viewer 1's snapshots in order: ticks 1 to 5, each but the first a delta. */
const viewerOne = stored.filter((snapshot) => snapshot.viewer === 1).map((snapshot) => fromHex(snapshot.hex));

type EntityMirror = Mirror<typeof EntityWorld>;

/** A mirror that has applied viewer 1's first `count` snapshots. */
function mirrorAfter(count: number): EntityMirror {
  const mirror = new Mirror(EntityWorld);
  for (const bytes of viewerOne.slice(0, count)) {
    mirror.apply(bytes);
  }
  return mirror;
}

/** Everything a caller can see of a mirror: an error must leave all of it as it was. */
function state(mirror: EntityMirror) {
  return { tick: mirror.tick, size: mirror.size, entities: [...mirror.entities()], changes: mirror.changes };
}

/** Applies `bytes`; if the mirror refuses them, checks it threw only a MirrorError and changed nothing. */
function applyHostile(mirror: EntityMirror, bytes: Uint8Array, label: string): boolean {
  const before = state(mirror);
  try {
    mirror.apply(bytes);
    return true;
  } catch (error) {
    expect(error, `${label}: threw something other than a MirrorError`).toBeInstanceOf(MirrorError);
    const after = state(mirror);
    expect(after.tick, `${label}: the tick moved`).toBe(before.tick);
    expect(after.changes, `${label}: the changes were replaced`).toBe(before.changes);
    expect(after.entities.length, `${label}: the view changed`).toBe(before.entities.length);
    after.entities.forEach((entity, i) => expect(entity, `${label}: entity ${entity.id} changed`).toBe(before.entities[i]));
    return false;
  }
}

/** A runner's fields, failing the test for anything else. */
function runner(entity: MirrorEntity<typeof EntityWorld> | undefined) {
  if (entity?.kind !== "Runner") {
    throw new Error(`expected a runner, not ${JSON.stringify(entity)}`);
  }
  return entity.fields;
}

/** The kind of error `apply` throws for `bytes`, with its message. */
function refusal<W extends World>(mirror: Mirror<W>, bytes: Uint8Array): { kind: string; message: string } {
  try {
    mirror.apply(bytes);
  } catch (error) {
    if (error instanceof MirrorError) {
      return { kind: error.kind, message: error.message };
    }
    throw error;
  }
  throw new Error("the snapshot was applied");
}

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
  return { below: (n: number) => next() % n, bytes: (n: number) => Uint8Array.from({ length: n }, () => next() & 0xff) };
}

// A world of three kinds, so a kind index can be unknown, one with a field of each default.
const FlagKind = kind("Flag", { up: bool });
const CrateKind = kind("Crate", {
  position: array(quantized(-10, 10, 0.5), 2),
  label: string(8),
  tags: vec(uint(4), 3),
  lid: option(range(1, 9)),
  open: bool,
}, { position: "position" });
const Plain = replicated("Plain", [FlagKind, CrateKind, kind("Marker", { at: range(5, 9) })]);
/** Plain with the marker's 3 bits unbounded: what writes a value past 5..=9. */
const Loose = replicated("Plain", [FlagKind, CrateKind, kind("Marker", { at: uint(3) })]);

describe("Mirror against hostile input", () => {
  it("refuses random bytes with a MirrorError only, changing nothing", () => {
    const random = rng(7);
    let applied = 0;
    for (let n = 0; n < 3000; n++) {
      const mirror = n % 2 === 0 ? new Mirror(EntityWorld) : mirrorAfter(3);
      let bytes = random.bytes(random.below(48));
      if (n % 3 === 0 && bytes.length > 5) {
        // A plausible header (a newer tick, a full state) so the body is read too.
        bytes = Uint8Array.from([10, 0, 0, 0, bytes[4]! & 0xfe, ...bytes.slice(5)]);
      }
      if (applyHostile(mirror, bytes, `random input ${n}`)) {
        applied++;
      }
    }
    expect(applied, "almost no random input is a valid snapshot").toBeLessThan(300);
  });

  it("refuses bit-flipped and truncated vector snapshots with a MirrorError only, changing nothing", () => {
    let refused = 0;
    for (let index = 0; index < viewerOne.length; index++) {
      const original = viewerOne[index]!;
      const expected = state(mirrorAfter(index + 1)).entities;
      for (let bit = 0; bit < original.length * 8; bit++) {
        const flipped = original.slice();
        flipped[bit >>> 3]! ^= 1 << (bit & 7);
        const label = `snapshot ${index + 1} with bit ${bit} flipped`;
        const mirror = mirrorAfter(index);
        // A flip that still reads (a field's value, say) is a different valid snapshot.
        if (!applyHostile(mirror, flipped, label)) {
          refused++;
          // The baselines are intact too: the real snapshot still applies.
          expect(mirror.apply(original), label).toBe(index + 1);
          expect(state(mirror).entities, label).toEqual(expected);
        }
      }
      const mirror = mirrorAfter(index);
      for (let length = 0; length < original.length; length++) {
        expect(applyHostile(mirror, original.subarray(0, length), `snapshot ${index + 1} cut to ${length} bytes`)).toBe(false);
      }
    }
    expect(refused, "most flips break a snapshot").toBeGreaterThan(100);
  });
});

describe("Mirror rules", () => {
  it("refuses a snapshot not newer than the newest applied, across the 32-bit wrap", () => {
    const mirror = mirrorAfter(2);
    expect(refusal(mirror, viewerOne[1]!)).toEqual({ kind: "stale", message: "snapshot of tick 2 is not newer than tick 2" });
    expect(refusal(mirror, viewerOne[0]!).kind).toBe("stale");
    const wrapping = new Mirror(Plain);
    wrapping.apply(writeSnapshot(Plain, { tick: 0xffff_fffe }));
    expect(wrapping.apply(writeSnapshot(Plain, { tick: 1, baselineAge: 3 })), "tick 1 follows 2^32 − 2").toBe(1);
    expect(refusal(wrapping, writeSnapshot(Plain, { tick: 0xffff_ffff })).kind).toBe("stale");
  });

  it("refuses a delta against a view it does not hold, and is not changed by it", () => {
    const fresh = new Mirror(EntityWorld);
    expect(refusal(fresh, viewerOne[1]!)).toEqual({
      kind: "missingBaseline",
      message: "snapshot of tick 2 is a delta against tick 1, which is not held",
    });
    expect(fresh.tick).toBeUndefined();
    const mirror = new Mirror(Plain);
    mirror.apply(writeSnapshot(Plain, { tick: 10, creates: [{ id: 3, kind: 0, fields: { up: true } }] }));
    expect(refusal(mirror, writeSnapshot(Plain, { tick: 12, baselineAge: 1 })).kind).toBe("missingBaseline");
    expect(mirror.apply(writeSnapshot(Plain, { tick: 12, baselineAge: 2 }))).toBe(12);
    expect(mirror.get(3)?.fields).toEqual({ up: true });
  });

  it(`keeps the ${MAX_HISTORY} newest views as baselines`, () => {
    const mirror = new Mirror(Plain);
    for (let tick = 1; tick <= MAX_HISTORY + 1; tick++) {
      mirror.apply(writeSnapshot(Plain, { tick, creates: [{ id: tick, kind: 0 }] }));
    }
    const next = MAX_HISTORY + 2;
    // Tick 1 was the oldest of 33: gone. Tick 2 is the oldest kept.
    expect(refusal(mirror, writeSnapshot(Plain, { tick: next, baselineAge: next - 1 })).kind).toBe("missingBaseline");
    expect(mirror.apply(writeSnapshot(Plain, { tick: next, baselineAge: next - 2 }))).toBe(next);
    expect([...mirror.entities()].map((entity) => entity.id)).toEqual([2]);
    expect(mirror.changes).toEqual([{ added: 2 }, { removed: MAX_HISTORY + 1 }]);
  });

  it("refuses what breaks the format's rules, naming it", () => {
    const mirror = new Mirror(Plain);
    mirror.apply(writeSnapshot(Plain, { tick: 1, creates: [{ id: 4, kind: 0 }] }));
    const cases: [string, Uint8Array, string, string][] = [
      ["a baseline 0 ticks back", writeSnapshot(Plain, { tick: 2, baselineAge: 0 }), "invalid", "invalid snapshot: a baseline 0 ticks back"],
      ["a destroy not in view", writeSnapshot(Plain, { tick: 2, baselineAge: 1, destroys: [5] }), "invalid", "invalid snapshot: a destroy of an entity not in view"],
      ["a create already in view", writeSnapshot(Plain, { tick: 2, baselineAge: 1, creates: [{ id: 4, kind: 0 }] }), "invalid", "invalid snapshot: a create of an entity already in view"],
      ["a create of an unknown kind", writeSnapshot(Plain, { tick: 2, creates: [{ id: 1, kind: 3 }] }), "invalid", "invalid snapshot: a create of an unknown kind"],
      ["an update not in view", writeSnapshot(Plain, { tick: 2, baselineAge: 1, updates: [{ id: 6, kind: 0, fields: {} }] }), "invalid", "invalid snapshot: an update of an entity not in view"],
      ["more than 255 entities", writeSnapshot(Plain, { tick: 2, baselineAge: 1, creates: Array.from({ length: 255 }, (_, i) => ({ id: 100 + i, kind: 0 })) }), "invalid", "invalid snapshot: a view of more than 255 entities"],
      ["an id past 65,534", writeSnapshot(Plain, { tick: 2, creates: [{ id: 65_535, kind: 0 }] }), "malformed", "malformed snapshot: value 65535 outside range 0..=65534"],
      ["a field out of its range", writeSnapshot(Loose, { tick: 2, creates: [{ id: 1, kind: 2, fields: { at: 7 } }] }), "malformed", "malformed snapshot: value 12 outside range 5..=9"],
      ["a trailing byte", Uint8Array.from([...writeSnapshot(Plain, { tick: 2 }), 0]), "malformed", "malformed snapshot: 1 trailing bytes after the message"],
      // 57 bits: the last byte's top bit is padding.
      ["non-zero padding", writeSnapshot(Plain, { tick: 2 }).map((byte, i) => (i === 7 ? byte | 0x80 : byte)), "malformed", "malformed snapshot: padding bits are not zero"],
    ];
    for (const [name, bytes, kind, message] of cases) {
      expect(refusal(mirror, bytes), name).toEqual({ kind, message });
      expect(mirror.tick, name).toBe(1);
      expect([...mirror.entities()].map((entity) => entity.id), name).toEqual([4]);
    }
    // 254 more beside the one held is a full view, and allowed.
    const full = writeSnapshot(Plain, { tick: 2, baselineAge: 1, creates: Array.from({ length: 254 }, (_, i) => ({ id: 100 + i, kind: 0 })) });
    expect(mirror.apply(full)).toBe(2);
    expect(mirror.size).toBe(255);
  });

  it("holds each field's default for a field a create does not send, whatever its bounds", () => {
    const mirror = new Mirror(Plain);
    mirror.apply(writeSnapshot(Plain, { tick: 1, creates: [{ id: 0, kind: 1, fields: { open: true } }, { id: 1, kind: 2 }] }));
    expect(mirror.get(0)).toEqual({
      id: 0,
      kind: "Crate",
      fields: { position: [0, 0], label: "", tags: [], lid: null, open: true },
    });
    // Rust's Default of an integer is 0, even for a field declared 5..=9.
    expect(mirror.get(1)?.fields).toEqual({ at: 0 });
  });

  it("applies each snapshot to a copy of its baseline, sharing the entities it does not update", () => {
    const mirror = mirrorAfter(1);
    const [ada, bo, score] = [mirror.get(0)!, mirror.get(1)!, mirror.get(2)!];
    mirror.apply(viewerOne[1]!); // ada moves, the score changes, bo does not
    expect(mirror.get(1), "bo is not copied").toBe(bo);
    expect(mirror.get(0)).not.toBe(ada);
    expect(runner(ada).position, "the baseline's ada is as it was").toEqual([10, 20.5]);
    expect(score.fields).toEqual({ red: 0, blue: 0 });
    expect(Object.isFrozen(mirror.get(0)!.fields), "the fields are shared, so frozen").toBe(true);
  });

  it("forgets everything on clear, and takes a full state after", () => {
    const mirror = mirrorAfter(3);
    mirror.clear();
    expect(mirror.tick).toBeUndefined();
    expect(mirror.size).toBe(0);
    expect(mirror.changes).toEqual([]);
    expect([...mirror.roster()]).toEqual([]);
    expect(mirror.mySeat).toBeUndefined();
    expect(refusal(mirror, viewerOne[3]!).kind, "its baselines are gone too").toBe("missingBaseline");
    expect(mirror.apply(viewerOne[0]!)).toBe(1);
    expect(mirror.changes).toEqual([{ added: 0 }, { added: 1 }, { added: 2 }]);
  });
});

describe("Mirror callbacks", () => {
  it("tell each addition, change, field change and removal in the order of changes", () => {
    const mirror = new Mirror(EntityWorld);
    const calls: unknown[][] = [];
    mirror.onAdd("Runner", (id, runner) => calls.push(["add Runner", id, runner.name]));
    mirror.onAdd("Score", (id, score) => calls.push(["add Score", id, score.red]));
    mirror.onChange("Runner", (id, runner, changed) => calls.push(["change Runner", id, [...changed], runner.name]));
    mirror.onChange("Score", (id, _score, changed) => calls.push(["change Score", id, [...changed]]));
    mirror.onFieldChange("Runner", "position", (id, value, previous) => calls.push(["position", id, value, previous]));
    mirror.onFieldChange("Runner", "stamina", (id, value, previous) => calls.push(["stamina", id, value, previous]));
    mirror.onFieldChange("Score", "red", (id, value, previous) => calls.push(["red", id, value, previous]));
    mirror.onRemove("Runner", (id, last) => calls.push(["remove Runner", id, last.name]));
    mirror.onRemove("Score", (id, last) => calls.push(["remove Score", id, last.red]));
    const step = (index: number) => {
      calls.length = 0;
      mirror.apply(viewerOne[index]!);
      return calls.slice();
    };
    expect(step(0)).toEqual([
      ["add Runner", 0, "ada"],
      ["add Runner", 1, "bo"],
      ["add Score", 2, 0],
    ]);
    expect(step(1)).toEqual([
      ["change Runner", 0, ["position", "stamina"], "ada"],
      ["position", 0, [10.5, 20.5], [10, 20.5]],
      ["stamina", 0, 650, 700],
      ["change Score", 2, ["red"]],
      ["red", 2, 1, 0],
    ]);
    expect(step(2)).toEqual([
      ["remove Runner", 1, "bo"],
      ["add Runner", 23, "x"],
      ["add Runner", 302, "x"],
    ]);
    // The score becomes a runner under its id: removed as a score, added as a runner.
    expect(step(3)).toEqual([
      ["change Runner", 0, ["name"], "ada lovelace"],
      ["remove Score", 2, 1],
      ["add Runner", 2, "was score"],
    ]);
  });

  it("stop after their unsubscribe, and a refused snapshot calls none", () => {
    const mirror = new Mirror(EntityWorld);
    const added: number[] = [];
    const stop = mirror.onAdd("Runner", (id) => added.push(id));
    expect(() => mirror.apply(viewerOne[1]!)).toThrow(MirrorError);
    mirror.apply(viewerOne[0]!);
    expect(added).toEqual([0, 1]);
    stop();
    mirror.apply(viewerOne[1]!);
    mirror.apply(viewerOne[2]!);
    expect(added, "no call after the unsubscribe").toEqual([0, 1]);
  });

  it("contain a listener that throws: the snapshot is applied and the others still run", () => {
    const reports: [string, unknown][] = [];
    const mirror = new Mirror(EntityWorld, { onListenerError: (event, error) => reports.push([event, error]) });
    const added: number[] = [];
    mirror.onAdd("Runner", () => {
      throw new Error("a game bug");
    });
    mirror.onAdd("Runner", (id) => added.push(id));
    expect(mirror.apply(viewerOne[0]!)).toBe(1);
    expect(added).toEqual([0, 1]);
    expect(mirror.listenerErrors).toBe(2);
    expect(reports.map(([event]) => event)).toEqual(["add:Runner", "add:Runner"]);
    expect(mirror.apply(viewerOne[1]!), "the mirror goes on").toBe(2);
  });

  it("refuse a kind or field the world does not have", () => {
    const mirror = new Mirror(EntityWorld);
    expect(() => mirror.onAdd("Bullet" as never, () => {})).toThrow(RangeError);
    expect(() => mirror.onFieldChange("Runner", "speed" as never, () => {})).toThrow(RangeError);
  });
});

describe("schema", () => {
  it("numbers kinds in ceil(log2(kinds)) bits and checks roles", () => {
    expect(EntityWorld.kindBits).toBe(1);
    expect(Plain.kindBits).toBe(2);
    expect(replicated("One", [kind("Only", { up: bool })]).kindBits).toBe(0);
    expect(EntityWorld.kinds[0].fieldNames).toEqual(["position", "name", "health", "stamina"]);
    expect(EntityWorld.kinds[0].ownerOnly).toEqual(["stamina"]);
    expect(EntityWorld.kinds[0].position).toBe("position");
    expect(() => kind("Bad", { up: bool }, { ownerOnly: ["down" as never] })).toThrow(RangeError);
    expect(() => kind("Bad", { 0: bool })).toThrow(/integer-like/);
    expect(() => replicated("Twice", [kind("A", {}), kind("A", {})])).toThrow(RangeError);
    expect(() => replicated("None", [])).toThrow(RangeError);
  });
});

describe("ackMessage", () => {
  it("is the tick as uint(32), 4 bytes little-endian", () => {
    expect([...ackMessage(5)]).toEqual([5, 0, 0, 0]);
    expect([...ackMessage(0x0102_0304)]).toEqual([4, 3, 2, 1]);
    expect([...ackMessage(0xffff_ffff)]).toEqual([255, 255, 255, 255]);
    expect(() => ackMessage(2 ** 32)).toThrow(EncodeError);
  });
});

describe("InterpolatedMirror", () => {
  const TICK_MS = 50; // 20 Hz
  const LATENCY_MS = 30;
  /** Viewer 1's first two snapshots, each arriving LATENCY_MS after its tick. */
  function view() {
    const interpolated = new InterpolatedMirror(new Mirror(EntityWorld), { tickRateHz: 20, delayMs: 100 });
    interpolated.apply(1 * TICK_MS + LATENCY_MS, viewerOne[0]!);
    interpolated.apply(2 * TICK_MS + LATENCY_MS, viewerOne[1]!);
    return interpolated;
  }

  it("draws the midpoint halfway between two snapshots", () => {
    const interpolated = view();
    // Drawn 100 ms (2 ticks) behind: tick 1.5 at 3.5 ticks plus the latency.
    const drawn = interpolated.sample(3.5 * TICK_MS + LATENCY_MS);
    expect(interpolated.renderTick).toBeCloseTo(1.5, 6);
    const ada = runner(drawn.get(0));
    expect(ada).toMatchObject({ name: "ada", health: 100 });
    expect(ada.position[0]).toBeCloseTo(10.25, 6);
    expect(ada.position[1]).toBeCloseTo(20.5, 6);
    // A field not interpolated is the earlier snapshot's until the later is reached.
    expect(ada.stamina).toBe(700);
    expect(runner(drawn.get(1)).position).toEqual([30.25, 4]);
    expect(drawn.get(2)!.fields, "a kind without a position is drawn as it was").toEqual({ red: 0, blue: 0 });
    const later = runner(interpolated.sample(4 * TICK_MS + LATENCY_MS).get(0));
    expect(later.position).toEqual([10.5, 20.5]);
    expect(later.stamina).toBe(650);
    expect(interpolated.mirror.tick, "the mirror holds the newest").toBe(2);
  });

  it("blends the fields it is told to", () => {
    const interpolated = new InterpolatedMirror(new Mirror(EntityWorld), {
      tickRateHz: 20,
      delayMs: 100,
      interpolate: { Runner: ["stamina"], Score: ["red"] },
    });
    interpolated.apply(1 * TICK_MS + LATENCY_MS, viewerOne[0]!);
    interpolated.apply(2 * TICK_MS + LATENCY_MS, viewerOne[1]!);
    const drawn = interpolated.sample(3.5 * TICK_MS + LATENCY_MS);
    expect(runner(drawn.get(0)).stamina).toBeCloseTo(675, 6);
    expect(runner(drawn.get(0)).position, "position is not blended unless named").toEqual([10, 20.5]);
    expect(drawn.get(2)!.fields).toEqual({ red: 0.5, blue: 0 });
  });

  it("records nothing of a refused snapshot", () => {
    const interpolated = view();
    expect(() => interpolated.apply(3 * TICK_MS + LATENCY_MS, viewerOne[1]!)).toThrow(MirrorError);
    expect(runner(interpolated.sample(3.5 * TICK_MS + LATENCY_MS).get(0)).position[0]).toBeCloseTo(10.25, 6);
    interpolated.clear();
    expect(interpolated.mirror.tick).toBeUndefined();
    expect(interpolated.sample(10 * TICK_MS).size).toBe(0);
  });
});
