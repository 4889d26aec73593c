/**
 * {@link Mirror}: a client's copy of what a tickwire `ServerWorld` sends it
 * (`docs/REPLICATION.md`), the counterpart of `crates/replicate/src/mirror.rs`. Each
 * snapshot is applied to a copy of its baseline's view, the game's entities and the room's
 * roster; the mirror keeps its {@link MAX_HISTORY} newest views as possible baselines, and
 * lists what changed since the view before (added, changed field by field, removed) for the
 * game's callbacks.
 *
 * Everything read is checked: counts, ids, kinds and masks in range, ids in the order the
 * format requires, an update only for an entity held, a baseline only if held; a snapshot
 * that fails leaves the mirror as it was.
 */

import { Emitter, type ListenerErrorReport } from "../emitter.js";
import { DecodeError } from "../wire/errors.js";
import { BitReader } from "../wire/reader.js";
import { type MirrorChange, difference } from "./changes.js";
import { MirrorError, invalid } from "./errors.js";
import type { FieldNameOf, FieldsOf, Kind, KindName, MirrorEntity, World } from "./kind.js";
import { type RosterSeat, RosterWorld, asSeat } from "./roster.js";
import { type View, readSection, search } from "./view.js";

/** Most views a mirror keeps as possible baselines: the most a server's `history` looks back. */
export const MAX_HISTORY = 32;

/** Options of a {@link Mirror}. */
export interface MirrorOptions {
  /** Where a listener that threw is reported. Default `console.error`. */
  onListenerError?: ListenerErrorReport;
}

type Listener = (...args: never[]) => void;

/**
 * A client's copy of a server world `W`.
 *
 * ```ts
 * const mirror = new Mirror(EntityWorld);
 * mirror.onAdd("Runner", (id, runner) => spawnSprite(id, runner.position));
 * mirror.onFieldChange("Runner", "health", (id, health, previous) => flash(id, health < previous));
 * mirror.onRemove("Runner", (id) => removeSprite(id));
 * connection.on("message", (channel, bytes) => {
 *   if (channel !== SNAPSHOTS) return;
 *   try {
 *     connection.send(ACKS, ackMessage(mirror.apply(bytes)));
 *   } catch (error) {
 *     if (!(error instanceof MirrorError)) throw error; // dropped: not acknowledged
 *   }
 * });
 * ```
 *
 * Callbacks run after a snapshot is applied, one per entry of {@link changes} in its order
 * (for a changed entity: its `onChange` listeners, then its `onFieldChange` listeners field
 * by field), so every one of them sees the whole new view. A listener that throws is
 * reported (see {@link MirrorOptions}) and the others still run.
 */
export class Mirror<W extends World> {
  /** The schema snapshots are read with. */
  readonly world: W;
  /** The newest views, oldest first; the last is the current one. */
  private views: View[] = [];
  private latestChanges: readonly MirrorChange[] = [];
  private latestRosterChanges: readonly MirrorChange[] = [];
  private readonly events: Emitter<Record<string, unknown[]>>;

  constructor(world: W, options: MirrorOptions = {}) {
    this.world = world;
    this.events = new Emitter(options.onListenerError);
  }

  /** The tick of the newest snapshot applied, `undefined` before the first. */
  get tick(): number | undefined {
    return this.views.at(-1)?.tick;
  }

  private get current(): readonly MirrorEntity[] {
    return this.views.at(-1)?.entities ?? [];
  }

  /** Entities in view. */
  get size(): number {
    return this.current.length;
  }

  /** What the last applied snapshot changed. */
  get changes(): readonly MirrorChange[] {
    return this.latestChanges;
  }

  /** What the last applied snapshot changed in the roster (ids are seats). */
  get rosterChanges(): readonly MirrorChange[] {
    return this.latestRosterChanges;
  }

  /** The room's members by seat, in seat order, as the newest snapshot left them. */
  *roster(): IterableIterator<RosterSeat> {
    for (const entry of this.views.at(-1)?.roster ?? []) {
      yield asSeat(entry);
    }
  }

  /** This client's own seat, once the roster has told it. */
  get mySeat(): number | undefined {
    return this.views.at(-1)?.roster.find((entry) => entry.fields.you)?.id;
  }

  /** Listeners that threw, since the mirror was made. */
  get listenerErrors(): number {
    return this.events.listenerErrors;
  }

  /** An entity as the newest snapshot left it. */
  get(id: number): MirrorEntity<W> | undefined {
    const current = this.current;
    const index = search(current, id);
    return index >= 0 ? (current[index] as MirrorEntity<W>) : undefined;
  }

  /** Every entity in view, in id order. */
  entities(): IterableIterator<MirrorEntity<W>> {
    return (this.current as readonly MirrorEntity<W>[])[Symbol.iterator]();
  }

  /**
   * Forgets everything, to start over (another room, whose ticks start again): the next
   * snapshot must be a full state, and its changes list every entity as added. No callback
   * runs. A full state after a reconnect to the same room needs no `clear`.
   */
  clear(): void {
    this.views = [];
    this.latestChanges = [];
    this.latestRosterChanges = [];
  }

  /**
   * Applies a snapshot and runs the callbacks; returns its tick, to acknowledge with
   * {@link ackMessage}. Throws a {@link MirrorError}, and nothing else, for a snapshot it
   * does not apply: do not acknowledge it.
   */
  apply(bytes: Uint8Array): number {
    let view: View;
    try {
      view = this.read(bytes);
    } catch (error) {
      if (error instanceof DecodeError) {
        throw new MirrorError("malformed", `malformed snapshot: ${error.message}`, { cause: error });
      }
      throw error;
    }
    const before = this.views.at(-1);
    const changes = difference(before?.entities ?? [], view.entities, this.world);
    this.latestRosterChanges = difference(before?.roster ?? [], view.roster, RosterWorld);
    // Views arrive in tick order (stale ones are refused), so the first is the oldest.
    this.views.push(view);
    if (this.views.length > MAX_HISTORY) {
      this.views.shift();
    }
    this.latestChanges = changes;
    this.emit(changes, before?.entities ?? [], view.entities);
    return view.tick;
  }

  /** The view a snapshot makes, touching nothing. */
  private read(bytes: Uint8Array): View {
    const reader = new BitReader(bytes);
    const tick = reader.readBits(32);
    const newest = this.tick;
    // Serial-number order: newer is less than 2^31 ticks ahead, wrapping in 32 bits.
    if (newest !== undefined && ((tick - newest) | 0) <= 0) {
      throw new MirrorError("stale", `snapshot of tick ${tick} is not newer than tick ${newest}`);
    }
    let entities: MirrorEntity[] = [];
    let roster: readonly MirrorEntity<RosterWorld>[] = [];
    if (reader.readBool()) {
      const age = reader.readBits(8);
      if (age === 0) {
        throw invalid("a baseline 0 ticks back");
      }
      const baseline = (tick - age) >>> 0;
      const view = this.views.find((each) => each.tick === baseline);
      if (view === undefined) {
        throw new MirrorError(
          "missingBaseline",
          `snapshot of tick ${tick} is a delta against tick ${baseline}, which is not held`,
        );
      }
      entities = view.entities.slice();
      roster = view.roster;
    }
    readSection(reader, this.world, entities);
    // The roster section comes only when the roster changed since the baseline.
    if (reader.readBool()) {
      const changed = roster.slice();
      readSection(reader, RosterWorld, changed as MirrorEntity[]);
      roster = changed;
    }
    reader.finish();
    return { tick, entities, roster };
  }

  private emit(changes: readonly MirrorChange[], before: readonly MirrorEntity[], after: readonly MirrorEntity[]): void {
    const find = (entities: readonly MirrorEntity[], id: number) => entities[search(entities, id)]!;
    for (const change of changes) {
      if ("added" in change) {
        const entity = find(after, change.added);
        this.events.emit(`add:${entity.kind}`, entity.id, entity.fields);
      } else if ("removed" in change) {
        const entity = find(before, change.removed);
        this.events.emit(`remove:${entity.kind}`, entity.id, entity.fields);
      } else {
        const then = find(before, change.changed);
        const now = find(after, change.changed);
        this.emitChanged(this.world.kindNamed(now.kind)!, change.mask, then, now);
      }
    }
  }

  private emitChanged(kind: Kind, mask: number, then: MirrorEntity, now: MirrorEntity): void {
    const before = then.fields as Readonly<Record<string, unknown>>;
    const after = now.fields as Readonly<Record<string, unknown>>;
    const changed = kind.fieldNames.filter((_, i) => Math.floor(mask / 2 ** i) % 2 === 1);
    this.events.emit(`change:${kind.name}`, now.id, now.fields, changed);
    for (const name of changed) {
      this.events.emit(`field:${kind.name}.${name}`, now.id, after[name], before[name]);
    }
  }

  private on(event: string, kind: string, listener: Listener, field?: string): () => void {
    const known = this.world.kindNamed(kind);
    if (known === undefined) {
      throw new RangeError(`world ${this.world.name} has no kind ${kind}`);
    }
    if (field !== undefined && !known.fieldNames.includes(field)) {
      throw new RangeError(`kind ${kind} has no field ${field}`);
    }
    return this.events.on(event, listener as (...args: unknown[]) => void);
  }

  /** Calls `listener` for each entity of kind `kind` that comes into view; returns an unsubscribe. */
  onAdd<N extends KindName<W>>(kind: N, listener: (id: number, fields: Readonly<FieldsOf<W, N>>) => void): () => void {
    return this.on(`add:${kind}`, kind, listener);
  }

  /**
   * Calls `listener` for each entity of kind `kind` whose fields changed, with the names of
   * those fields in field order; returns an unsubscribe.
   */
  onChange<N extends KindName<W>>(
    kind: N,
    listener: (id: number, fields: Readonly<FieldsOf<W, N>>, changed: readonly FieldNameOf<W, N>[]) => void,
  ): () => void {
    return this.on(`change:${kind}`, kind, listener);
  }

  /** Calls `listener` when `field` of an entity of kind `kind` changed; returns an unsubscribe. */
  onFieldChange<N extends KindName<W>, F extends FieldNameOf<W, N>>(
    kind: N,
    field: F,
    listener: (id: number, value: FieldsOf<W, N>[F], previous: FieldsOf<W, N>[F]) => void,
  ): () => void {
    return this.on(`field:${kind}.${field}`, kind, listener, field);
  }

  /**
   * Calls `listener` for each entity of kind `kind` that leaves the view (or changes kind),
   * with its last fields; returns an unsubscribe.
   */
  onRemove<N extends KindName<W>>(kind: N, listener: (id: number, fields: Readonly<FieldsOf<W, N>>) => void): () => void {
    return this.on(`remove:${kind}`, kind, listener);
  }
}
