// The interpolation buffer on a virtual timeline: snapshots at 20 Hz arriving with latency
// and jitter, lost ones, entities appearing and leaving.
import { describe, expect, it } from "vitest";

import { InterpolationBuffer, lerpAngle, lerpVec2 } from "../src/netcode/interpolation.js";
import { ConnectionStats } from "../src/netcode/stats.js";

type Pos = { x: number; y: number };
const TICK_MS = 50; // 20 Hz

function buffer(options: { delayMs?: number; maxExtrapolationMs?: number } = {}) {
  return new InterpolationBuffer<number, Pos>({ tickRateHz: 20, lerp: lerpVec2, ...options });
}

/** An entity moving +1 per tick along x. */
const along = (tick: number): Pos => ({ x: tick, y: 0 });

describe("InterpolationBuffer", () => {
  it("draws about delayMs in the past, between the snapshots around that moment", () => {
    const buf = buffer({ delayMs: 100 });
    // Tick t arrives at 30 ms latency: t*50 + 30.
    for (let t = 0; t <= 20; t++) {
      buf.handleSnapshot(t * TICK_MS + 30, t, [[1, along(t)]]);
    }
    // At 20*50 + 30 + 25, the server is at 20.5; drawn 2 ticks (100 ms) behind: 18.5.
    const drawn = buf.sample(20 * TICK_MS + 30 + 25).get(1)!;
    expect(drawn.x).toBeCloseTo(18.5, 6);
    expect(buf.renderTick).toBeCloseTo(18.5, 6);
  });

  it("moves smoothly under jitter: late snapshots do not pull the clock back", () => {
    const buf = buffer({ delayMs: 150 });
    // Seeded jitter of 0..80 ms per snapshot (deliveries stay in order at this spacing or not: both are fine).
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    const arrivals = Array.from({ length: 200 }, (_, t) => ({ t, at: t * TICK_MS + 20 + random() * 80 })).sort(
      (a, b) => a.at - b.at,
    );
    let next = 0;
    const drawn: number[] = [];
    for (let now = 0; now < 200 * TICK_MS; now += 16) {
      while (next < arrivals.length && arrivals[next]!.at <= now) {
        buf.handleSnapshot(arrivals[next]!.at, arrivals[next]!.t, [[1, along(arrivals[next]!.t)]]);
        next++;
      }
      const x = buf.sample(now).get(1)?.x;
      if (x !== undefined && now > 2000) {
        drawn.push(x);
      }
    }
    for (let i = 1; i < drawn.length; i++) {
      const step = drawn[i]! - drawn[i - 1]!;
      // 16 ms at 1 unit per 50 ms is 0.32; the clock may slew, but never backwards or in jumps.
      expect(step, `frame ${i}`).toBeGreaterThanOrEqual(0);
      expect(step, `frame ${i}`).toBeLessThan(0.6);
    }
  });

  it("interpolates across a lost snapshot", () => {
    const buf = buffer({ delayMs: 100 });
    for (const t of [0, 1, 2, 3, 5, 6, 7, 8]) {
      buf.handleSnapshot(t * TICK_MS, t, [[1, along(t)]]);
    }
    // Render tick 4 (server at 6 at 300 ms): between 3 and 5, where tick 4 was lost.
    expect(buf.sample(6 * TICK_MS).get(1)!.x).toBeCloseTo(4, 6);
  });

  it("extrapolates past the newest snapshot for at most maxExtrapolationMs, then holds", () => {
    const buf = buffer({ delayMs: 100, maxExtrapolationMs: 100 });
    for (let t = 0; t <= 10; t++) {
      buf.handleSnapshot(t * TICK_MS, t, [[1, along(t)]]);
    }
    // Snapshots stop at tick 10. Render tick 11 (at 13*50): 1 tick past the newest.
    expect(buf.sample(13 * TICK_MS).get(1)!.x).toBeCloseTo(11, 6);
    // Render tick 15: capped at 2 ticks (100 ms) past 10.
    expect(buf.sample(17 * TICK_MS).get(1)!.x).toBeCloseTo(12, 6);
    expect(buf.sample(30 * TICK_MS).get(1)!.x).toBeCloseTo(12, 6);
    const holding = buffer({ maxExtrapolationMs: 0 });
    for (let t = 0; t <= 10; t++) {
      holding.handleSnapshot(t * TICK_MS, t, [[1, along(t)]]);
    }
    expect(holding.sample(20 * TICK_MS).get(1)!.x).toBe(10);
  });

  it("draws an entity from the tick it appears, and not after the snapshot it left at", () => {
    const buf = buffer({ delayMs: 100 });
    for (let t = 0; t <= 12; t++) {
      const entities: [number, Pos][] = [[1, along(t)]];
      if (t >= 5 && t < 9) {
        entities.push([2, { x: 100, y: t }]);
      }
      buf.handleSnapshot(t * TICK_MS, t, entities);
    }
    const at = (renderTick: number) => buf.sample((renderTick + 2) * TICK_MS);
    expect(at(4.5).has(2), "not yet in view at 4.5").toBe(false);
    expect(at(5).get(2)).toEqual({ x: 100, y: 5 });
    expect(at(8.5).get(2), "held at its last state, not blended into nothing").toEqual({ x: 100, y: 8 });
    expect(at(9).has(2), "gone at the first snapshot without it").toBe(false);
    expect(at(10).get(1)!.x).toBeCloseTo(10, 6);
  });

  it("keeps a bounded history per entity", () => {
    const buf = buffer();
    for (let t = 0; t < 10_000; t++) {
      buf.handleSnapshot(t * TICK_MS, t, [[1, along(t)]]);
    }
    // Only samples after the render tick plus one before it survive a sample() call.
    expect(buf.sample(10_000 * TICK_MS).get(1)!.x).toBeGreaterThan(9990);
    expect((buf as unknown as { entities: Map<number, unknown[]> }).entities.get(1)!.length).toBeLessThanOrEqual(64);
  });

  it("blends angles the short way round", () => {
    expect(lerpAngle(3, -3, 0.5)).toBeCloseTo(Math.PI, 6);
    expect(lerpAngle(0.5, 1.5, 0.5)).toBeCloseTo(1, 6);
  });
});

describe("ConnectionStats", () => {
  it("reports rates over the last second and smoothed RTT", () => {
    const stats = new ConnectionStats(1000);
    for (let i = 0; i < 120; i++) {
      stats.handleReceived(i * (1000 / 60), 100);
      if (i % 2 === 0) {
        stats.handleSent(i * (1000 / 60), 8);
      }
    }
    const report = stats.report(119 * (1000 / 60));
    expect(report.packetsInPerSecond).toBe(60);
    expect(report.bytesInPerSecond).toBe(6000);
    expect(report.packetsOutPerSecond).toBe(30);
    expect(report.packetsIn).toBe(120);
    expect(report.rttMs).toBeNull();
    stats.handleRttSample(100);
    stats.handleRttSample(60);
    expect(report.rttMs).toBeNull();
    const rtt = stats.report(0);
    expect(rtt.rttMs).toBeCloseTo(95, 6);
    expect(rtt.minRttMs).toBe(60);
  });
});
