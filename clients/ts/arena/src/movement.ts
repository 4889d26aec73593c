/**
 * The player movement step, ported bit for bit from `crates/arena/src/movement.rs`
 * (`step_movement_all_walls`, which gives the same bits as the server's indexed form).
 *
 * Every value is an `f32`: each `+ - * /` and square root is rounded with `Math.fround`
 * before the next, which matches Rust's `f32` arithmetic exactly (a double holds more than
 * twice an `f32`'s precision, so rounding twice never differs). Nothing is fused or
 * reordered; do not "simplify" the expressions below.
 */

const f = Math.fround;

/** Longest distance a circle moves between two wall checks, metres. */
export const MAX_SUBSTEP = f(0.25);
/** How many times a sub-step pushes the circle out of all walls. */
export const WALL_PASSES = 2;

/** A point or direction, metres. */
export interface Vec2 {
  x: number;
  y: number;
}

/** A wall box `min..max`, metres. */
export interface Aabb {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

/** What a step depends on besides position and input; the client must use the server's values. */
export interface MovementParams {
  /** Player radius, metres. */
  radius: number;
  /** Speed at full input, metres per second. */
  maxSpeed: number;
  /** Seconds per tick (`f32(1 / tick_rate)`). */
  dt: number;
  /** The map's width and height; centres stay `radius` inside them. */
  bounds: Vec2;
}

/** A wall box from `[x0, y0, x1, y1]`, each rounded to `f32`. */
export function aabb(x0: number, y0: number, x1: number, y1: number): Aabb {
  return { minX: f(x0), minY: f(y0), maxX: f(x1), maxY: f(y1) };
}

/** Seconds per tick at `tickRateHz`, as the server computes it (`1.0 / tick_rate_hz as f32`). */
export function tickSeconds(tickRateHz: number): number {
  return f(1 / tickRateHz);
}

// Rust's f32::max and f32::min: a NaN operand yields the other one.
function max(a: number, b: number): number {
  if (a !== a) return b;
  if (b !== b) return a;
  return a > b ? a : b;
}
function min(a: number, b: number): number {
  if (a !== a) return b;
  if (b !== b) return a;
  return a < b ? a : b;
}

/**
 * Moves a player's centre one tick from `position` in `direction` (components in `-1..=1`,
 * a longer vector capped to length 1), sliding along `walls` (tested in the order given).
 * A non-finite or zero direction does not move. Returns a new vector.
 */
export function stepMovement(position: Vec2, direction: Vec2, params: MovementParams, walls: readonly Aabb[]): Vec2 {
  const dx0 = f(direction.x);
  const dy0 = f(direction.y);
  const lengthSquared = f(f(dx0 * dx0) + f(dy0 * dy0));
  if (!Number.isFinite(lengthSquared) || lengthSquared <= 0) {
    return { x: position.x, y: position.y };
  }
  let dx = dx0;
  let dy = dy0;
  if (lengthSquared > 1) {
    const length = f(Math.sqrt(lengthSquared));
    dx = f(dx / length);
    dy = f(dy / length);
  }
  const reach = f(f(params.maxSpeed) * f(params.dt));
  const mx = f(dx * reach);
  const my = f(dy * reach);
  const distance = f(Math.sqrt(f(f(mx * mx) + f(my * my))));
  const substeps = max(Math.ceil(f(distance / MAX_SUBSTEP)), 1);
  const sx = f(mx / substeps);
  const sy = f(my / substeps);
  const radius = f(params.radius);
  let x = f(position.x);
  let y = f(position.y);
  for (let i = 0; i < substeps; i++) {
    x = f(x + sx);
    y = f(y + sy);
    x = min(max(x, radius), f(f(params.bounds.x) - radius));
    y = min(max(y, radius), f(f(params.bounds.y) - radius));
    [x, y] = pushOutOfWalls(x, y, radius, walls);
  }
  return { x, y };
}

function pushOutOfWalls(x: number, y: number, radius: number, walls: readonly Aabb[]): [number, number] {
  for (let pass = 0; pass < WALL_PASSES; pass++) {
    let pushed = false;
    for (const wall of walls) {
      const contact = circleAabb(x, y, radius, wall);
      if (contact !== null) {
        x = f(x + f(contact.nx * contact.depth));
        y = f(y + f(contact.ny * contact.depth));
        pushed = true;
      }
    }
    if (!pushed) {
      break;
    }
  }
  return [x, y];
}

/** How a circle overlaps a box: the unit normal it leaves along and how deep it is. */
export interface Contact {
  nx: number;
  ny: number;
  depth: number;
}

/**
 * `physics::contact::circle_aabb`: a centre outside the box is pushed from the box's nearest
 * point; a centre inside leaves by the nearest face (ties: left, right, top, bottom).
 */
export function circleAabb(x: number, y: number, radius: number, box: Aabb): Contact | null {
  const nearestX = min(max(x, box.minX), box.maxX);
  const nearestY = min(max(y, box.minY), box.maxY);
  const ox = f(x - nearestX);
  const oy = f(y - nearestY);
  const distanceSquared = f(f(ox * ox) + f(oy * oy));
  if (distanceSquared >= f(radius * radius)) {
    return null;
  }
  if (distanceSquared > 0) {
    const distance = f(Math.sqrt(distanceSquared));
    return { nx: f(ox / distance), ny: f(oy / distance), depth: f(radius - distance) };
  }
  const faces: [number, number, number][] = [
    [1, 0, f(box.maxX - x)],
    [0, -1, f(y - box.minY)],
    [0, 1, f(box.maxY - y)],
  ];
  let exit: [number, number, number] = [-1, 0, f(x - box.minX)];
  for (const face of faces) {
    if (face[2] < exit[2]) {
      exit = face;
    }
  }
  return { nx: exit[0], ny: exit[1], depth: f(exit[2] + radius) };
}
