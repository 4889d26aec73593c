// The map answer of GET /api/arena/map: converted to f32 boxes in the server's order, and
// anything else refused with a MapError.
import { describe, expect, it } from "vitest";

import { MapError, fetchArenaMap, parseArenaMap } from "../arena/src/map.js";

const json = {
  name: "courtyard.tmx",
  width: 40.0,
  height: 30.0,
  walls: [
    [0.0, 0.0, 40.0, 1.0],
    [27.0, 5.0, 29.0, 7.0],
  ],
  spawns: [[4.5, 4.5]],
  teleports: [{ name: "west pad", pad: [2.0, 19.0, 4.0, 21.0], destination: [33.0, 9.0, 37.0, 13.0] }],
};

describe("parseArenaMap", () => {
  it("keeps the walls in order, as f32 boxes", () => {
    const map = parseArenaMap(json);
    expect(map.walls).toEqual([
      { minX: 0, minY: 0, maxX: 40, maxY: 1 },
      { minX: 27, minY: 5, maxX: 29, maxY: 7 },
    ]);
    expect(map.teleports[0]!.destination).toEqual({ minX: 33, minY: 9, maxX: 37, maxY: 13 });
    expect(parseArenaMap({ ...json, walls: [[0.1, 0, 1, 1]] }).walls[0]!.minX).toBe(Math.fround(0.1));
  });

  it.each([
    ["not an object", null],
    ["no name", { ...json, name: 3 }],
    ["a negative size", { ...json, width: -1 }],
    ["a short wall", { ...json, walls: [[0, 0, 1]] }],
    ["a NaN-ish wall", { ...json, walls: [[0, 0, 1, "x"]] }],
    ["walls not a list", { ...json, walls: {} }],
    ["a teleport without a name", { ...json, teleports: [{ pad: [0, 0, 1, 1], destination: [2, 2, 3, 3] }] }],
  ])("refuses %s", (_what, value) => {
    expect(() => parseArenaMap(value)).toThrow(MapError);
  });

  it("fetches from the server's origin", async () => {
    const urls: string[] = [];
    const fetch = (async (url: string) => {
      urls.push(url);
      return new Response(JSON.stringify(json), { status: 200 });
    }) as typeof globalThis.fetch;
    const map = await fetchArenaMap({ baseUrl: "http://game.test:8080", fetch });
    expect(urls).toEqual(["http://game.test:8080/api/arena/map"]);
    expect(map.name).toBe("courtyard.tmx");
    const failing = (async () => new Response("nope", { status: 500 })) as typeof globalThis.fetch;
    await expect(fetchArenaMap({ baseUrl: "http://game.test:8080", fetch: failing })).rejects.toThrow(MapError);
  });
});
