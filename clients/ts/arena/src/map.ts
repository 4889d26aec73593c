/**
 * The arena's map as `tickwire serve` publishes it (`GET /api/arena/map`,
 * `crates/cli/src/web.rs`): size, wall boxes in the order the server tests them (so
 * prediction with {@link stepMovement} matches it bit for bit), spawn points and teleports.
 *
 * ```ts
 * const map = await fetchArenaMap(); // the page's origin
 * ```
 */

import { type Aabb, type Vec2, aabb } from "./movement.js";

/** A teleport pad and the zone it sends a player to. */
export interface TeleportInfo {
  name: string;
  pad: Aabb;
  destination: Aabb;
}

/** What a client knows of the map. Every number is an `f32`. */
export interface ArenaMapInfo {
  /** The map's name, as the welcome names it (`courtyard.tmx`). */
  name: string;
  /** Metres. */
  width: number;
  height: number;
  /** Wall boxes, in the server's order. */
  walls: Aabb[];
  spawns: Vec2[];
  teleports: TeleportInfo[];
}

/** Most boxes, spawns or teleports accepted from a server (a 1023 m map of 1 m walls is fewer). */
const MAX_ITEMS = 1 << 20;

/** A map answer that is not one. */
export class MapError extends Error {
  override readonly name = "MapError";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function numbers(value: unknown, count: number, what: string): number[] {
  if (!Array.isArray(value) || value.length !== count || !value.every((v) => typeof v === "number" && Number.isFinite(v))) {
    throw new MapError(`map: ${what} is not ${count} finite numbers`);
  }
  return (value as number[]).map(Math.fround);
}

function box(value: unknown, what: string): Aabb {
  const [x0, y0, x1, y1] = numbers(value, 4, what) as [number, number, number, number];
  return aabb(x0, y0, x1, y1);
}

function list(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value) || value.length > MAX_ITEMS) {
    throw new MapError(`map: ${what} is not a list of at most ${MAX_ITEMS}`);
  }
  return value;
}

/** Checks and converts the JSON of `/api/arena/map`; a {@link MapError} for anything else. */
export function parseArenaMap(json: unknown): ArenaMapInfo {
  if (!isRecord(json) || typeof json.name !== "string") {
    throw new MapError("map: not an object with a name");
  }
  const [width, height] = numbers([json.width, json.height], 2, "the size") as [number, number];
  if (!(width > 0 && height > 0)) {
    throw new MapError(`map: size ${width}x${height} is not positive`);
  }
  return {
    name: json.name,
    width,
    height,
    walls: list(json.walls, "walls").map((wall, i) => box(wall, `wall ${i}`)),
    spawns: list(json.spawns, "spawns").map((spawn, i) => {
      const [x, y] = numbers(spawn, 2, `spawn ${i}`) as [number, number];
      return { x, y };
    }),
    teleports: list(json.teleports, "teleports").map((teleport, i) => {
      if (!isRecord(teleport) || typeof teleport.name !== "string") {
        throw new MapError(`map: teleport ${i} is not an object with a name`);
      }
      return {
        name: teleport.name,
        pad: box(teleport.pad, `teleport ${i} pad`),
        destination: box(teleport.destination, `teleport ${i} destination`),
      };
    }),
  };
}

/** Options of {@link fetchArenaMap}. */
export interface FetchMapOptions {
  /** The server's HTTP origin. Default: the page's. */
  baseUrl?: string;
  /** Default: `globalThis.fetch`. */
  fetch?: typeof globalThis.fetch;
  signal?: AbortSignal;
}

/** `GET /api/arena/map`; a {@link MapError} when it fails or answers something else. */
export async function fetchArenaMap(options: FetchMapOptions = {}): Promise<ArenaMapInfo> {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const base = options.baseUrl ?? globalThis.location?.origin;
  if (base === undefined) {
    throw new MapError("map: no baseUrl given and no page origin to default to");
  }
  let response: Response;
  try {
    response = await fetchImpl(new URL("/api/arena/map", base).toString(), {
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    throw new MapError(`map: request failed: ${String(error)}`);
  }
  if (!response.ok) {
    throw new MapError(`map: ${response.status} ${response.statusText}`);
  }
  let json: unknown;
  try {
    json = await response.json();
  } catch {
    throw new MapError("map: the answer is not JSON");
  }
  return parseArenaMap(json);
}
