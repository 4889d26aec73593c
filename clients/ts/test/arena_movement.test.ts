// crates/arena/tests/vectors/movement.json replayed through the TypeScript port, bit for bit,
// as crates/arena/tests/movement_vectors.rs replays it through the Rust code.
import { describe, expect, it } from "vitest";

import { MAX_SUBSTEP, WALL_PASSES, aabb, stepMovement, type Vec2 } from "../arena/src/movement.js";
import { f32Bits, f32FromBits } from "./f32.js";
import { readRepoJson } from "./vectors.js";

interface MovementVector {
  name: string;
  radius_bits: number;
  max_speed_bits: number;
  dt_bits: number;
  start_bits: [number, number];
  inputs: [number, number][];
  positions_bits: [number, number][];
}
interface MovementFile {
  max_substep: number;
  wall_passes: number;
  bounds: [number, number];
  walls: [number, number, number, number][];
  vectors: MovementVector[];
}

const file = readRepoJson<MovementFile>("crates/arena/tests/vectors/movement.json");

describe("movement.json", () => {
  it("was made with this port's constants", () => {
    expect(file.max_substep).toBe(MAX_SUBSTEP);
    expect(file.wall_passes).toBe(WALL_PASSES);
    expect(file.vectors.length).toBeGreaterThanOrEqual(15);
  });

  const walls = file.walls.map(([x0, y0, x1, y1]) => aabb(x0, y0, x1, y1));
  const bounds = { x: Math.fround(file.bounds[0]), y: Math.fround(file.bounds[1]) };

  it.each(file.vectors.map((v) => [v.name, v] as const))("%s matches the server bit for bit", (_name, vector) => {
    const params = {
      radius: f32FromBits(vector.radius_bits),
      maxSpeed: f32FromBits(vector.max_speed_bits),
      dt: f32FromBits(vector.dt_bits),
      bounds,
    };
    let position: Vec2 = { x: f32FromBits(vector.start_bits[0]), y: f32FromBits(vector.start_bits[1]) };
    expect(vector.positions_bits.length).toBe(vector.inputs.length);
    vector.inputs.forEach(([x, y], tick) => {
      position = stepMovement(position, { x: Math.fround(x), y: Math.fround(y) }, params, walls);
      const want = vector.positions_bits[tick]!;
      expect(
        [f32Bits(position.x), f32Bits(position.y)],
        `tick ${tick}: computed (${position.x}, ${position.y}), the file says (${f32FromBits(want[0])}, ${f32FromBits(want[1])})`,
      ).toEqual(want);
    });
  });
});
