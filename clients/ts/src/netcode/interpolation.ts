/**
 * An interpolation buffer for remote entities: they are drawn a little in the past (about
 * 100 ms, in server ticks), between the two snapshots around that moment, so late or lost
 * snapshots do not make them stutter.
 *
 * Feed it every snapshot with the full set of entities in view at that tick
 * ({@link InterpolationBuffer.handleSnapshot}); ask it where to draw them with
 * {@link InterpolationBuffer.sample} once per frame. Time comes in as an argument (ms on a
 * monotonic clock), so tests drive it with a virtual clock.
 *
 * - **Jitter**: the server tick's local arrival time is tracked as the earliest arrival over
 *   the last second, so late snapshots do not pull the render clock back; the render clock
 *   advances smoothly and never goes backwards.
 * - **Gaps**: a missing snapshot is interpolated across; past the newest snapshot an entity
 *   is extrapolated from its last two states, for at most `maxExtrapolationMs`, then held.
 * - **Appear/disappear**: an entity is drawn from the first tick it is in view, and stops
 *   being drawn at the first snapshot without it (it is never blended into nothing).
 */

/** Options of an {@link InterpolationBuffer}. */
export interface InterpolationOptions<S> {
  /** The room's tick rate, from the connection parameters (`params.tickRateHz`). */
  tickRateHz: number;
  /** How far in the past to draw, ms. Default 100: two lost snapshots at 20 Hz, six at 60 Hz. */
  delayMs?: number;
  /** Longest extrapolation past the newest snapshot, ms. Default 100; 0 holds instead. */
  maxExtrapolationMs?: number;
  /** Blends two states: `t` in `0..1` between them, above 1 to extrapolate. */
  lerp: (from: S, to: S, t: number) => S;
  /** Most states kept per entity. Default 64. */
  capacity?: number;
}

interface Sample<S> {
  tick: number;
  /** `null`: the entity was not in view at this tick. */
  state: S | null;
}

/** How far back the arrival-time minimum looks, ms. */
const ARRIVAL_WINDOW_MS = 1000;
/** Time the render clock takes to absorb an error, ms. */
const SLEW_MS = 500;

/** Remote entities' states by server tick, and where to draw them now. */
export class InterpolationBuffer<Id, S> {
  private readonly tickMs: number;
  private readonly delayMs: number;
  private readonly maxExtrapolationTicks: number;
  private readonly lerp: (from: S, to: S, t: number) => S;
  private readonly capacity: number;
  private readonly entities = new Map<Id, Sample<S>[]>();
  /** (arrival time − tick × tickMs) per recent snapshot: the earliest is the offset used. */
  private readonly arrivals: { at: number; offset: number }[] = [];
  private newestTick: number | null = null;
  private render: { now: number; tick: number } | null = null;

  constructor(options: InterpolationOptions<S>) {
    this.tickMs = 1000 / options.tickRateHz;
    this.delayMs = options.delayMs ?? 100;
    this.maxExtrapolationTicks = (options.maxExtrapolationMs ?? 100) / this.tickMs;
    this.lerp = options.lerp;
    this.capacity = options.capacity ?? 64;
  }

  /** The server tick being drawn, as of the last {@link sample}. */
  get renderTick(): number | null {
    return this.render?.tick ?? null;
  }

  /** A snapshot of server tick `tick` arrived at `now`, with every entity in view then. */
  handleSnapshot(now: number, tick: number, entities: Iterable<readonly [Id, S]>): void {
    this.arrivals.push({ at: now, offset: now - tick * this.tickMs });
    while (this.arrivals.length > 0 && this.arrivals[0]!.at < now - ARRIVAL_WINDOW_MS) {
      this.arrivals.shift();
    }
    this.newestTick = this.newestTick === null ? tick : Math.max(this.newestTick, tick);
    const seen = new Set<Id>();
    for (const [id, state] of entities) {
      seen.add(id);
      this.insert(id, { tick, state });
    }
    for (const [id, samples] of this.entities) {
      if (!seen.has(id)) {
        this.insert(id, { tick, state: null });
        if (samples.every((sample) => sample.state === null)) {
          this.entities.delete(id);
        }
      }
    }
  }

  private insert(id: Id, sample: Sample<S>): void {
    let samples = this.entities.get(id);
    if (samples === undefined) {
      samples = [];
      this.entities.set(id, samples);
    }
    // Usually the newest: search from the end.
    let i = samples.length;
    while (i > 0 && samples[i - 1]!.tick > sample.tick) {
      i--;
    }
    if (i > 0 && samples[i - 1]!.tick === sample.tick) {
      return; // a duplicate snapshot
    }
    samples.splice(i, 0, sample);
    if (samples.length > this.capacity) {
      samples.shift();
    }
  }

  /** Where to draw each entity at `now`; entities not in view then are absent. */
  sample(now: number): Map<Id, S> {
    const out = new Map<Id, S>();
    const tick = this.advance(now);
    if (tick === null) {
      return out;
    }
    for (const [id, samples] of this.entities) {
      // Keep one state at or before the render tick, for the next frame's interpolation.
      while (samples.length > 2 && samples[1]!.tick <= tick) {
        samples.shift();
      }
      const state = this.stateAt(samples, tick);
      if (state !== null) {
        out.set(id, state);
      }
      if (samples.length > 0 && samples.every((sample) => sample.state === null) && samples[0]!.tick <= tick) {
        this.entities.delete(id);
      }
    }
    return out;
  }

  private stateAt(samples: Sample<S>[], tick: number): S | null {
    let before: Sample<S> | undefined;
    let after: Sample<S> | undefined;
    for (const sample of samples) {
      if (sample.tick <= tick) {
        before = sample;
      } else {
        after = sample;
        break;
      }
    }
    if (before === undefined || before.state === null) {
      return null; // not yet in view, or gone
    }
    if (after !== undefined) {
      if (after.state === null) {
        return before.state; // held until it goes: never blended into nothing
      }
      return this.lerp(before.state, after.state, (tick - before.tick) / (after.tick - before.tick));
    }
    // Past the newest state: extrapolate from the two newest, for a bounded time.
    const index = samples.indexOf(before);
    const previous = samples[index - 1];
    if (previous === undefined || previous.state === null || this.maxExtrapolationTicks <= 0) {
      return before.state;
    }
    const ahead = Math.min(tick - before.tick, this.maxExtrapolationTicks);
    return this.lerp(previous.state, before.state, 1 + ahead / (before.tick - previous.tick));
  }

  /** Moves the render clock to `now`: towards the target smoothly, never backwards. */
  private advance(now: number): number | null {
    if (this.arrivals.length === 0 || this.newestTick === null) {
      return this.render?.tick ?? null;
    }
    let offset = Infinity;
    for (const arrival of this.arrivals) {
      offset = Math.min(offset, arrival.offset);
    }
    const target = (now - offset - this.delayMs) / this.tickMs;
    let tick: number;
    if (this.render === null) {
      tick = target;
    } else {
      const elapsed = Math.max(0, now - this.render.now);
      const advanced = this.render.tick + elapsed / this.tickMs;
      const error = target - advanced;
      // A large error (a tab back from the background, a long stall) is taken at once.
      tick = Math.abs(error) > (4 * this.delayMs) / this.tickMs ? target : advanced + error * Math.min(1, elapsed / SLEW_MS);
      tick = Math.max(tick, this.render.tick);
    }
    this.render = { now, tick };
    return tick;
  }
}

/** A `lerp` for `{x, y}` positions. */
export function lerpVec2(from: { x: number; y: number }, to: { x: number; y: number }, t: number): { x: number; y: number } {
  return { x: from.x + (to.x - from.x) * t, y: from.y + (to.y - from.y) * t };
}

/** Blends two angles (radians) the short way round. */
export function lerpAngle(from: number, to: number, t: number): number {
  let delta = (to - from) % (2 * Math.PI);
  if (delta > Math.PI) delta -= 2 * Math.PI;
  if (delta < -Math.PI) delta += 2 * Math.PI;
  return from + delta * t;
}
