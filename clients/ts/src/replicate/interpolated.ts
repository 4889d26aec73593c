/**
 * {@link InterpolatedMirror}: a {@link Mirror}'s entities drawn a little in the past, between
 * the two snapshots around that moment, so they move smoothly at any frame rate and through
 * late or lost snapshots. It is the SDK's {@link InterpolationBuffer} fed with each view the
 * mirror applies, at the time it arrived.
 */

import { InterpolationBuffer, type InterpolationOptions } from "../netcode/interpolation.js";
import type { KindName, KindNamed, MirrorEntity, NumericFieldName, World } from "./kind.js";
import type { Mirror } from "./mirror.js";

/** Options of an {@link InterpolatedMirror}. */
export interface InterpolatedMirrorOptions<W extends World>
  extends Omit<InterpolationOptions<MirrorEntity<W>>, "lerp"> {
  /**
   * Per kind, the fields blended between snapshots (numbers, or arrays of numbers such as
   * `[x, y]`). Default: each kind's `position` field. Other fields are the earlier
   * snapshot's until the later one is reached.
   */
  interpolate?: { readonly [N in KindName<W>]?: readonly NumericFieldName<KindNamed<W, N>["fields"]>[] };
}

/** Blends two values of a numeric field; anything else is the earlier until the later is reached. */
function blend(from: unknown, to: unknown, t: number): unknown {
  if (typeof from === "number" && typeof to === "number") {
    return from + (to - from) * t;
  }
  if (Array.isArray(from) && Array.isArray(to) && from.length === to.length) {
    return from.map((value, i) => blend(value, to[i], t));
  }
  return t < 1 ? from : to;
}

/**
 * A mirror's entities as they were `delayMs` ago, interpolated.
 *
 * ```ts
 * const view = new InterpolatedMirror(mirror, { tickRateHz: params.tickRateHz, delayMs: 100 });
 * // on each snapshot: apply through the view, so it knows when the snapshot arrived
 * connection.send(ACKS, ackMessage(view.apply(performance.now(), bytes)));
 * // each frame:
 * for (const [id, entity] of view.sample(performance.now())) draw(id, entity.fields.position);
 * ```
 *
 * Apply snapshots through {@link apply}: one applied to the mirror directly is not recorded.
 */
export class InterpolatedMirror<W extends World> {
  /** The mirror it reads; its callbacks and its newest view are as usual. */
  readonly mirror: Mirror<W>;
  private readonly options: InterpolationOptions<MirrorEntity<W>>;
  private buffer: InterpolationBuffer<number, MirrorEntity<W>>;

  constructor(mirror: Mirror<W>, options: InterpolatedMirrorOptions<W>) {
    this.mirror = mirror;
    const { interpolate, ...timing } = options;
    const blended = new Map<string, readonly string[]>(
      mirror.world.kinds.map((kind) => {
        const chosen = (interpolate as Record<string, readonly string[]> | undefined)?.[kind.name];
        return [kind.name, chosen ?? (kind.position === undefined ? [] : [kind.position])];
      }),
    );
    const lerp = (from: MirrorEntity<W>, to: MirrorEntity<W>, t: number): MirrorEntity<W> => {
      const names = blended.get(from.kind) ?? [];
      const base = t < 1 ? from : to;
      if (from.kind !== to.kind || names.length === 0) {
        return base;
      }
      const fields: Record<string, unknown> = { ...base.fields };
      for (const name of names) {
        fields[name] = blend((from.fields as Record<string, unknown>)[name], (to.fields as Record<string, unknown>)[name], t);
      }
      return { id: base.id, kind: base.kind, fields } as MirrorEntity<W>;
    };
    this.options = { ...timing, lerp };
    this.buffer = new InterpolationBuffer(this.options);
  }

  /**
   * Applies a snapshot that arrived at `now` (ms on a monotonic clock) to the mirror and
   * records its view; returns its tick to acknowledge. A `MirrorError` as `Mirror.apply`.
   */
  apply(now: number, bytes: Uint8Array): number {
    const tick = this.mirror.apply(bytes);
    this.buffer.handleSnapshot(now, tick, Array.from(this.mirror.entities(), (entity) => [entity.id, entity] as const));
    return tick;
  }

  /** Each entity to draw at `now`, by id: as it was at the render tick, its chosen fields blended. */
  sample(now: number): Map<number, MirrorEntity<W>> {
    return this.buffer.sample(now);
  }

  /** The server tick being drawn, as of the last {@link sample}. */
  get renderTick(): number | null {
    return this.buffer.renderTick;
  }

  /** Forgets every recorded view, and clears the mirror (see `Mirror.clear`). */
  clear(): void {
    this.mirror.clear();
    this.buffer = new InterpolationBuffer(this.options);
  }
}
