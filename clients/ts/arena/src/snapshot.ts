/**
 * Arena snapshots, the client side: {@link SnapshotDecoder} applies each snapshot (a delta
 * against a baseline it names) and ends with exactly the server's view, as
 * `crates/arena/src/snapshot/decode.rs` does. Held to `crates/arena/tests/vectors/snapshots.json`;
 * the format is `docs/ARENA.md`, "Snapshot".
 *
 * ```ts
 * const decoder = new SnapshotDecoder(SnapshotSchema.fromWelcome(welcome), welcome.snapshotHistory);
 * const snapshot = decoder.decode(bytes); // throws SnapshotError; nothing is stored then
 * send(encodeClientInput({ ack: decoder.newest, inputs }));
 * ```
 */

import { BitReader, DecodeError, Quantize } from "@tickwire/client";
import { AIM_GRID } from "./input.js";

/** An entity's wire id; `0..=65534`. */
export type EntityId = number;

/** Largest entity id. */
export const MAX_ENTITY_ID = 0xfffe;
/** Position grid step: 1/64 m. */
export const POSITION_RESOLUTION = 1 / 64;
/** Largest map side a snapshot can address, metres. */
export const MAX_MAP_SIDE = 1023;
/** Most entities in one view (counts are 8-bit). */
export const MAX_VIEW = 255;
/** Most bullets in one snapshot (the count is 6-bit). */
export const MAX_BULLETS = 63;

/** A player as a snapshot carries it: grid steps, not metres. */
export interface EntityState {
  /** Step on the x grid ({@link SnapshotSchema.positionX}). */
  x: number;
  /** Step on the y grid. */
  y: number;
  /** Step on the aim grid (`AIM_GRID`). */
  aim: number;
  /** `0..=maxHealth`. */
  health: number;
  /** In play (false while waiting to respawn). */
  alive: boolean;
}

/** One entity of a view. */
export interface EntityView {
  id: EntityId;
  state: EntityState;
}

/** The recipient's own state; the position is exact (`f32`), for prediction. */
export interface SelfView {
  alive: boolean;
  /** Metres, exactly the server's `f32`. */
  x: number;
  y: number;
  /** Step on the aim grid. */
  aim: number;
  health: number;
  /** While dead: ticks until the respawn; 0 when alive. */
  respawnIn: number;
  kills: number;
  deaths: number;
  score: number;
}

/** A bullet near the recipient, whole in every snapshot. */
export interface BulletView {
  /** Steps on the position grids. */
  x: number;
  y: number;
  /** Direction of flight: a step on the aim grid. */
  direction: number;
  /** Fired by the recipient. */
  mine: boolean;
}

/** A decoded snapshot: the whole view after applying the delta. */
export interface DecodedSnapshot {
  /** Server tick (low 32 bits). */
  tick: number;
  /** The tick this was a delta against; `null` for a full snapshot. */
  baseline: number | null;
  /** Newest input sequence the server applied for the recipient. */
  lastInput: number | null;
  me: SelfView;
  /** Every other player in view, ordered by id. */
  entities: EntityView[];
  /** Ids this snapshot destroyed (left the view), ascending. */
  destroyed: EntityId[];
  /** Ids it created, ascending. */
  created: EntityId[];
  /** Ids it updated, ascending. */
  updated: EntityId[];
  bullets: BulletView[];
}

/** Why a snapshot could not be applied. */
export type SnapshotErrorKind =
  /** The bytes do not follow the format (`cause` is the {@link DecodeError}). */
  | "malformed"
  /** A delta against a tick this decoder does not hold: drop it, the server falls back to a full one. */
  | "unknown_baseline"
  /** Well formed but contradicting the baseline or the format's limits. */
  | "inconsistent";

/** A snapshot that was not applied; the decoder's history is as it was before. */
export class SnapshotError extends Error {
  override readonly name = "SnapshotError";
  readonly kind: SnapshotErrorKind;

  constructor(kind: SnapshotErrorKind, message: string, options?: { cause: unknown }) {
    super(message, options);
    this.kind = kind;
  }
}

/** What a {@link SnapshotSchema} is built from: the welcome's fields. */
export interface SchemaSource {
  mapWidth: number;
  mapHeight: number;
  maxHealth: number;
}

/** The grids snapshots are quantized with, from what the welcome carries. */
export class SnapshotSchema {
  /** `0..=mapWidth` in 1/64 m steps. */
  readonly positionX: Quantize;
  /** `0..=mapHeight` in 1/64 m steps. */
  readonly positionY: Quantize;
  readonly maxHealth: number;
  /** Bits a health takes. */
  readonly healthBits: number;

  /** A `RangeError` for a map side outside `1..=1023` m or a max health outside `1..=1023`. */
  constructor(mapWidth: number, mapHeight: number, maxHealth: number) {
    const sideOk = (side: number): boolean => Number.isFinite(side) && side >= 1 && side <= MAX_MAP_SIDE;
    if (!sideOk(mapWidth) || !sideOk(mapHeight)) {
      throw new RangeError(`map size ${mapWidth}x${mapHeight} m is outside 1..=${MAX_MAP_SIDE} m per side`);
    }
    if (!Number.isInteger(maxHealth) || maxHealth < 1 || maxHealth > 1023) {
      throw new RangeError(`max health ${maxHealth} is outside 1..=1023`);
    }
    this.positionX = new Quantize(0, mapWidth, POSITION_RESOLUTION);
    this.positionY = new Quantize(0, mapHeight, POSITION_RESOLUTION);
    this.maxHealth = maxHealth;
    this.healthBits = 32 - Math.clz32(maxHealth);
  }

  /** The schema a welcome describes; a `RangeError` if it describes none. */
  static fromWelcome(welcome: SchemaSource): SnapshotSchema {
    return new SnapshotSchema(welcome.mapWidth, welcome.mapHeight, welcome.maxHealth);
  }

  /** The position (metres) a pair of steps stands for. */
  position(x: number, y: number): { x: number; y: number } {
    return { x: dequantize(this.positionX, x), y: dequantize(this.positionY, y) };
  }

  /** The angle (radians) an aim step stands for. */
  aim(step: number): number {
    return dequantize(AIM_GRID, step);
  }
}

function dequantize(grid: Quantize, step: number): number {
  return grid.valueAt(Math.min(Math.max(0, step), grid.lastStep));
}

/**
 * Applies snapshots to the baselines they name and remembers the last `history` views,
 * as the server remembers what it sent. Acknowledge {@link newest} in every input.
 *
 * Every size is bounded by the format (255 entities, 63 bullets) before anything is
 * stored, so hostile bytes cost at most that.
 */
export class SnapshotDecoder {
  readonly schema: SnapshotSchema;
  private readonly history: { tick: number | null; view: EntityView[] }[];
  private newestTick: number | null = null;
  private currentValue: DecodedSnapshot | null = null;

  /** `history` is the welcome's `snapshotHistory` (at least 2 are kept). */
  constructor(schema: SnapshotSchema, history: number) {
    this.schema = schema;
    const slots = Math.max(2, Math.min(255, Math.trunc(history) || 0));
    this.history = Array.from({ length: slots }, () => ({ tick: null, view: [] }));
  }

  /** The newest tick decoded: what the client acknowledges. */
  get newest(): number | null {
    return this.newestTick;
  }

  /** The snapshot decoded last, or `null` before the first. */
  get current(): DecodedSnapshot | null {
    return this.currentValue;
  }

  /** The view held for `tick`, if any. */
  view(tick: number): readonly EntityView[] | null {
    const slot = this.history[tick % this.history.length]!;
    return slot.tick === tick ? slot.view : null;
  }

  /**
   * Decodes `bytes` against the baseline they name. Throws a {@link SnapshotError} (and
   * nothing else); then the history and {@link newest} are untouched.
   */
  decode(bytes: Uint8Array): DecodedSnapshot {
    let snapshot: DecodedSnapshot;
    try {
      snapshot = decodeSnapshot(this.schema, this.history, bytes);
    } catch (error) {
      if (error instanceof SnapshotError) {
        throw error;
      }
      if (error instanceof DecodeError) {
        throw new SnapshotError("malformed", `malformed snapshot: ${error.message}`, { cause: error });
      }
      throw new SnapshotError("malformed", `malformed snapshot: ${String(error)}`, { cause: error });
    }
    const slot = this.history[snapshot.tick % this.history.length]!;
    slot.tick = snapshot.tick;
    slot.view = snapshot.entities;
    if (this.newestTick === null) {
      this.newestTick = snapshot.tick;
    } else {
      const ahead = (snapshot.tick - this.newestTick) >>> 0;
      if (ahead !== 0 && ahead < 2 ** 31) {
        this.newestTick = snapshot.tick;
      }
    }
    this.currentValue = snapshot;
    return snapshot;
  }
}

function inconsistent(message: string): SnapshotError {
  return new SnapshotError("inconsistent", `inconsistent snapshot: ${message}`);
}

/** Binary search of an id-ordered list; the index or -1. */
function indexOf(list: readonly { id: EntityId }[], id: EntityId): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const at = list[mid]!.id;
    if (at === id) return mid;
    if (at < id) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

function decodeSnapshot(
  schema: SnapshotSchema,
  history: readonly { tick: number | null; view: EntityView[] }[],
  bytes: Uint8Array,
): DecodedSnapshot {
  const r = new BitReader(bytes);
  const xBits = schema.positionX.bits;
  const yBits = schema.positionY.bits;
  const xLast = schema.positionX.lastStep;
  const yLast = schema.positionY.lastStep;
  const tick = r.readUint(32);
  let baseline: number | null = null;
  if (r.readBool()) {
    const age = r.readUint(8);
    if (age === 0 || age >= history.length) {
      throw inconsistent("baseline age outside the history");
    }
    baseline = (tick - age) >>> 0;
  }
  let base: readonly EntityView[] = [];
  if (baseline !== null) {
    const slot = history[baseline % history.length]!;
    if (slot.tick !== baseline) {
      throw new SnapshotError(
        "unknown_baseline",
        `snapshot ${tick} is a delta against ${baseline}, which this client does not hold`,
      );
    }
    base = slot.view;
  }
  const lastInput = r.readBool() ? r.readUint(16) : null;
  const alive = r.readBool();
  const x = r.readF32();
  const y = r.readF32();
  if (!Number.isFinite(x) || !Number.isFinite(y)) {
    throw inconsistent("own position is not finite");
  }
  const aim = r.readUint(10);
  const health = readHealth(r, schema);
  const respawnIn = alive ? 0 : readU32(r);
  const me: SelfView = {
    alive,
    x,
    y,
    aim,
    health,
    respawnIn,
    kills: readU32(r),
    deaths: readU32(r),
    score: readU32(r),
  };

  const destroyed: EntityId[] = [];
  let ids = new IdReader();
  for (let count = r.readUint(8); count > 0; count--) {
    const id = ids.read(r);
    if (indexOf(base, id) < 0) {
      throw inconsistent("destroy of an entity not in view");
    }
    destroyed.push(id);
  }

  const created: EntityView[] = [];
  ids = new IdReader();
  for (let count = r.readUint(8); count > 0; count--) {
    const id = ids.read(r);
    created.push({
      id,
      state: {
        x: readStep(r, xBits, xLast),
        y: readStep(r, yBits, yLast),
        aim: r.readUint(10),
        health: readHealth(r, schema),
        alive: r.readBool(),
      },
    });
  }

  const updates: EntityView[] = [];
  ids = new IdReader();
  for (let count = r.readUint(8); count > 0; count--) {
    const id = ids.read(r);
    const index = indexOf(base, id);
    if (index < 0) {
      throw inconsistent("update of an entity not in view");
    }
    const old = base[index]!.state;
    const state = { ...old };
    if (r.readBool()) {
      state.x = readAxis(r, old.x, xBits, xLast);
      state.y = readAxis(r, old.y, yBits, yLast);
    }
    if (r.readBool()) {
      state.aim = r.readUint(10);
    }
    if (r.readBool()) {
      state.health = readHealth(r, schema);
      state.alive = r.readBool();
    }
    updates.push({ id, state });
  }

  const bullets: BulletView[] = [];
  for (let count = r.readUint(6); count > 0; count--) {
    bullets.push({
      x: readStep(r, xBits, xLast),
      y: readStep(r, yBits, yLast),
      direction: r.readUint(10),
      mine: r.readBool(),
    });
  }
  r.finish();

  const gone = new Set(destroyed);
  if (updates.some((u) => gone.has(u.id))) {
    throw inconsistent("update of a destroyed entity");
  }
  // The new view: the baseline less destroys, with updates, plus creates.
  const entities: EntityView[] = [...created];
  for (const entity of base) {
    if (gone.has(entity.id)) {
      continue;
    }
    const update = indexOf(updates, entity.id);
    entities.push(update >= 0 ? updates[update]! : { id: entity.id, state: entity.state });
  }
  if (entities.length > MAX_VIEW) {
    throw inconsistent(`more than ${MAX_VIEW} entities in view`);
  }
  entities.sort((a, b) => a.id - b.id);
  for (let i = 1; i < entities.length; i++) {
    if (entities[i - 1]!.id === entities[i]!.id) {
      throw inconsistent("create of an entity already in view");
    }
  }
  return {
    tick,
    baseline,
    lastInput,
    me,
    entities,
    destroyed,
    created: created.map((e) => e.id),
    updated: updates.map((u) => u.id),
    bullets,
  };
}

function readU32(r: BitReader): number {
  const value = r.readVarintBig();
  if (value > 0xffffffffn) {
    throw inconsistent("counter exceeds 32 bits");
  }
  return Number(value);
}

function readHealth(r: BitReader, schema: SnapshotSchema): number {
  const health = r.readUint(schema.healthBits);
  if (health > schema.maxHealth) {
    throw inconsistent("health above the maximum");
  }
  return health;
}

function readStep(r: BitReader, bits: number, last: number): number {
  const step = r.readUint(bits);
  if (step > last) {
    throw inconsistent("position outside the map");
  }
  return step;
}

function readAxis(r: BitReader, old: number, bits: number, last: number): number {
  if (r.readBool()) {
    const step = old + r.readUint(8) - 128;
    if (step < 0 || step > last) {
      throw inconsistent("position delta leaves the map");
    }
    return step;
  }
  return readStep(r, bits, last);
}

/** Reads ascending ids written as gaps: `0`+4 bits below 16, `10`+8 bits of gap − 16, `11`+16 bits. */
class IdReader {
  private next = 0;

  read(r: BitReader): EntityId {
    let gap: number;
    if (!r.readBool()) {
      gap = r.readUint(4);
    } else if (!r.readBool()) {
      gap = r.readUint(8) + 16;
    } else {
      gap = r.readUint(16);
    }
    const id = this.next + gap;
    if (id > MAX_ENTITY_ID) {
      throw inconsistent("entity id out of range");
    }
    this.next = id + 1;
    return id;
  }
}
