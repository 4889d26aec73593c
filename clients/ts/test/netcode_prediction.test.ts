// Prediction and reconciliation against a server simulated with the same movement step:
// inputs travel with latency, the server applies one per tick as World::step does, and
// its states come back with last_input_sequence.
import { describe, expect, it } from "vitest";

import { type InputCommand, decodeInput, encodeInput } from "../arena/src/input.js";
import { type MovementParams, type Vec2, aabb, stepMovement, tickSeconds } from "../arena/src/movement.js";
import { Prediction } from "../arena/src/prediction.js";
import { ConnectionStats } from "../src/netcode/stats.js";
import { f32FromBits } from "./f32.js";
import { readRepoJson } from "./vectors.js";

const params: MovementParams = { radius: Math.fround(0.4), maxSpeed: 6, dt: tickSeconds(60), bounds: { x: 40, y: 30 } };
const walls = [aabb(20, 5, 21, 25), aabb(5, 10, 15, 11)];
const TICK_MS = 1000 / 60;

/** The server's side of one player: inputs arrive over the wire, one step per tick. */
class Server {
  position: Vec2;
  lastInputSequence: number | null = null;
  private movement: Vec2 = { x: 0, y: 0 };
  private inbox: InputCommand[] = [];

  constructor(position: Vec2) {
    this.position = { ...position };
  }

  receive(bytes: Uint8Array): void {
    this.inbox.push(decodeInput(bytes));
  }

  /** World::step for one player: the newest input's movement, kept while none arrives. */
  tick(push: Vec2 = { x: 0, y: 0 }): void {
    const newest = this.inbox.at(-1);
    this.inbox = [];
    if (newest !== undefined) {
      this.movement = { x: newest.moveX, y: newest.moveY };
      this.lastInputSequence = newest.sequence;
    }
    this.position = stepMovement(this.position, this.movement, params, walls);
    this.position = { x: Math.fround(this.position.x + push.x), y: Math.fround(this.position.y + push.y) };
  }
}

/** Runs client and server for `ticks` with `latency` ticks each way; returns both at the end. */
function run(options: {
  ticks: number;
  latency: number;
  start: Vec2;
  firstSequence?: number;
  input: (tick: number) => { moveX: number; moveY: number };
  push?: (tick: number) => Vec2;
  dropInput?: (tick: number) => boolean;
  check?: (tick: number, prediction: Prediction, server: Server) => void;
}) {
  const server = new Server(options.start);
  const stats = new ConnectionStats();
  const prediction = new Prediction({
    params,
    walls,
    position: options.start,
    stats,
    ...(options.firstSequence !== undefined ? { firstSequence: options.firstSequence } : {}),
  });
  const toServer: { at: number; bytes: Uint8Array }[] = [];
  const toClient: { at: number; position: Vec2; lastInputSequence: number | null }[] = [];
  for (let tick = 0; tick < options.ticks; tick++) {
    const now = tick * TICK_MS;
    const command = prediction.handleLocalInput(now, { ...options.input(tick), aim: 0, buttons: 0 });
    if (!options.dropInput?.(tick)) {
      toServer.push({ at: tick + options.latency, bytes: encodeInput(command) });
    }
    while (toServer.length > 0 && toServer[0]!.at <= tick) {
      server.receive(toServer.shift()!.bytes);
    }
    server.tick(options.push?.(tick));
    toClient.push({ at: tick + options.latency, position: server.position, lastInputSequence: server.lastInputSequence });
    while (toClient.length > 0 && toClient[0]!.at <= tick) {
      const state = toClient.shift()!;
      prediction.handleServerState(now, state);
    }
    options.check?.(tick, prediction, server);
  }
  return { prediction, server, stats };
}

describe("Prediction", () => {
  it("predicts exactly what the server computes when every input arrives", () => {
    const inputs = (tick: number) => ({ moveX: Math.cos(tick / 7), moveY: Math.sin(tick / 11) });
    // A predicted position is the server's a round trip later: compare them then.
    const predicted: Vec2[] = [];
    run({
      ticks: 240,
      latency: 5,
      start: { x: 10, y: 15 },
      input: inputs,
      check: (tick, prediction, server) => {
        predicted[tick] = prediction.position;
        if (tick >= 5) {
          expect(server.position, `server tick ${tick} applied input ${tick - 5}`).toEqual(predicted[tick - 5]);
        }
      },
    });
  });

  it("converges on the server after a correction the client could not predict", () => {
    // The server pushes the player at tick 50 (another player, a knockback): the client
    // learns of it a round trip later and replays its unacknowledged inputs from there.
    const { prediction, server } = run({
      ticks: 120,
      latency: 4,
      start: { x: 3, y: 3 },
      input: (tick) => (tick < 100 ? { moveX: 1, moveY: 0.5 } : { moveX: 0, moveY: 0 }),
      push: (tick) => (tick === 50 ? { x: 0, y: 1.25 } : { x: 0, y: 0 }),
      check: (tick, p, s) => {
        if (tick >= 60 && tick < 100) {
          // Mid-motion the prediction runs 4 ticks of input ahead of the last state seen.
          expect(p.pendingCount).toBeGreaterThan(0);
          expect(Math.abs(p.position.y - s.position.y)).toBeLessThan(0.5);
        }
      },
    });
    // The inputs stopped at tick 100: the prediction and the server now agree to the bit.
    expect(prediction.position).toEqual(server.position);
    expect(server.position.y).toBeGreaterThan(1.25);
  });

  it("recovers from lost inputs and measures RTT from acknowledgements", () => {
    const { prediction, server, stats } = run({
      ticks: 90,
      latency: 3,
      start: { x: 30, y: 20 },
      input: (tick) => ({ moveX: tick < 60 ? -1 : 0, moveY: 0 }),
      dropInput: (tick) => tick % 7 === 3 && tick < 60,
    });
    expect(prediction.position).toEqual(server.position);
    const rtt = stats.report(0).rttMs!;
    // Three ticks each way, at 60 Hz.
    expect(rtt).toBeGreaterThanOrEqual(6 * TICK_MS - 1e-9);
    expect(rtt).toBeLessThan(8 * TICK_MS);
  });

  it("keeps working across the u16 sequence wrap", () => {
    const { prediction, server } = run({
      ticks: 80,
      latency: 2,
      start: { x: 3, y: 20 },
      firstSequence: 65_500,
      input: (tick) => ({ moveX: tick < 70 ? 0.5 : 0, moveY: 0 }),
    });
    // The server has applied input 77 (two ticks on the way); the client has seen input
    // 75 acknowledged (two more ticks back), and holds 76 to 79.
    expect(server.lastInputSequence).toBe((65_500 + 77) & 0xffff);
    expect(prediction.lastAcknowledged).toBe((65_500 + 75) & 0xffff);
    expect(prediction.pendingCount).toBe(4);
    expect(prediction.position).toEqual(server.position);
  });

  it("ignores a state older than one already reconciled with", () => {
    const prediction = new Prediction({ params, walls, position: { x: 5, y: 5 } });
    for (let i = 0; i < 4; i++) {
      prediction.handleLocalInput(i, { moveX: 1, moveY: 0, aim: 0, buttons: 0 });
    }
    prediction.handleServerState(10, { position: { x: 5.2, y: 5 }, lastInputSequence: 1 });
    const after = prediction.position;
    prediction.handleServerState(11, { position: { x: 0, y: 0 }, lastInputSequence: 0 });
    expect(prediction.position).toEqual(after);
    expect(prediction.pendingCount).toBe(2);
  });

  it("blends a correction into the drawn position instead of snapping", () => {
    const prediction = new Prediction({ params, walls, position: { x: 5, y: 5 }, smoothingMs: 100 });
    prediction.handleServerState(1000, { position: { x: 6, y: 5 }, lastInputSequence: null });
    expect(prediction.position).toEqual({ x: 6, y: 5 });
    expect(prediction.renderPosition(1000)).toEqual({ x: 5, y: 5 });
    expect(prediction.renderPosition(1050).x).toBeCloseTo(5.5);
    expect(prediction.renderPosition(1100)).toEqual({ x: 6, y: 5 });
  });
});

describe("Prediction against the server's movement vectors", () => {
  interface MovementVector {
    name: string;
    radius_bits: number;
    max_speed_bits: number;
    dt_bits: number;
    start_bits: [number, number];
    inputs: [number, number][];
    positions_bits: [number, number][];
  }
  const file = readRepoJson<{ bounds: [number, number]; walls: [number, number, number, number][]; vectors: MovementVector[] }>(
    "crates/arena/tests/vectors/movement.json",
  );
  const sceneWalls = file.walls.map(([x0, y0, x1, y1]) => aabb(x0, y0, x1, y1));
  const at = ([x, y]: [number, number]): Vec2 => ({ x: f32FromBits(x), y: f32FromBits(y) });

  it.each(file.vectors.map((v) => [v.name, v] as const))(
    "%s: predicts each tick as the server moved, and reconciles to the same end",
    (_name, vector) => {
      const vectorParams: MovementParams = {
        radius: f32FromBits(vector.radius_bits),
        maxSpeed: f32FromBits(vector.max_speed_bits),
        dt: f32FromBits(vector.dt_bits),
        bounds: { x: Math.fround(file.bounds[0]), y: Math.fround(file.bounds[1]) },
      };
      const prediction = new Prediction({ params: vectorParams, walls: sceneWalls, position: at(vector.start_bits) });
      const half = Math.floor(vector.inputs.length / 2);
      vector.inputs.forEach(([moveX, moveY], tick) => {
        const command = prediction.handleLocalInput(tick, { moveX, moveY, aim: 0, buttons: 0 });
        expect(command.sequence).toBe(tick);
        expect(prediction.position, `${vector.name} tick ${tick}`).toEqual(at(vector.positions_bits[tick]!));
      });
      // The server's word on the first half arrives late: the rest is replayed from it.
      prediction.handleServerState(1000, { position: at(vector.positions_bits[half]!), lastInputSequence: half });
      expect(prediction.pendingCount).toBe(vector.inputs.length - half - 1);
      expect(prediction.position).toEqual(at(vector.positions_bits.at(-1)!));
    },
  );
});
