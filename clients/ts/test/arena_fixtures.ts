// The arena tests' scripted server: its map, its welcome and its full snapshots.
import type { ArenaMapInfo } from "../arena/src/map.js";
import type { ServerMessage } from "../arena/src/messages.js";
import { aabb } from "../arena/src/movement.js";
import { BitWriter } from "../src/wire/index.js";

/** A walled 40 × 30 courtyard with one spawn. */
export const COURTYARD: ArenaMapInfo = {
  name: "courtyard.tmx",
  width: 40,
  height: 30,
  walls: [aabb(0, 0, 40, 1), aabb(0, 1, 1, 29), aabb(39, 1, 40, 29), aabb(0, 29, 40, 30)],
  spawns: [{ x: 4.5, y: 4.5 }],
  teleports: [],
};

/** The welcome to entity 0 in {@link COURTYARD} at 60 Hz. */
export const WELCOME: ServerMessage = {
  type: "Welcome",
  protocol: 2,
  you: 0,
  map: "courtyard.tmx",
  mapWidth: 40,
  mapHeight: 30,
  tickRateHz: 60,
  tick: 0,
  maxHealth: 100,
  maxSpeed: 6,
  playerRadius: Math.fround(0.4),
  snapshotHistory: 32,
};

/** A full snapshot (no baseline) of the recipient at `x, y` and `others` created (ids ascending, gaps < 16). */
export function fullSnapshot(tick: number, lastInput: number | null, x: number, y: number, others: number[]): Uint8Array {
  const w = new BitWriter();
  w.writeUint(tick, 32);
  w.writeBool(false);
  w.writeBool(lastInput !== null);
  if (lastInput !== null) w.writeUint(lastInput, 16);
  w.writeBool(true); // alive
  w.writeF32(x);
  w.writeF32(y);
  w.writeUint(512, 10); // aim
  w.writeUint(100, 7); // health
  for (let i = 0; i < 3; i++) w.writeVarint(0);
  w.writeUint(0, 8); // destroys
  w.writeUint(others.length, 8);
  let next = 0;
  for (const id of others) {
    w.writeBool(false);
    w.writeUint(id - next, 4);
    next = id + 1;
    w.writeUint(64 * 10, 12); // x = 10 m
    w.writeUint(64 * (5 + id), 11); // y
    w.writeUint(512, 10);
    w.writeUint(100, 7);
    w.writeBool(true);
  }
  w.writeUint(0, 8); // updates
  w.writeUint(0, 6); // bullets
  return w.finish();
}
