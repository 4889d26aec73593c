/**
 * A view, what one snapshot left in view (the game's entities and the roster, each by
 * ascending id), and the reading of one section of a snapshot, its destroys, creates and
 * updates, over a copy of its baseline's (`docs/REPLICATION.md`, "Applying one").
 *
 * Views share entity objects: a snapshot copies the baseline's lists, and replaces (never
 * changes) the entities it creates or updates, so each object stays as it was in every view
 * that holds it.
 */

import type { BitReader } from "../wire/reader.js";
import { invalid } from "./errors.js";
import { GapReader } from "./gaps.js";
import type { Kind, MirrorEntity, World } from "./kind.js";
import type { RosterWorld } from "./roster.js";

/** Most entities one view may hold: the snapshot's counts are 8-bit. */
export const MAX_VIEW = 255;

/** What one snapshot left in view. */
export interface View {
  readonly tick: number;
  readonly entities: readonly MirrorEntity[];
  /** The roster, an entry per seat (`id` is the seat). */
  readonly roster: readonly MirrorEntity<RosterWorld>[];
}

type Fields = Readonly<Record<string, unknown>>;

/** The index of `id` in `entities`, or `-(where it would go) - 1`. */
export function search(entities: readonly MirrorEntity[], id: number): number {
  let low = 0;
  let high = entities.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    const at = entities[middle]!.id;
    if (at === id) {
      return middle;
    }
    if (at < id) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return -low - 1;
}

/**
 * Reads a field mask (`uint(fields)`) and the fields it names, in field order; the others
 * are `base`'s, or their defaults for a new entity. Bit `i` of the mask is read `i`-th, so the
 * mask is taken bit by bit.
 */
function readFields(kind: Kind, reader: BitReader, base: Fields | undefined): Fields {
  let mask = reader.readUint(kind.fieldNames.length);
  const fields: Record<string, unknown> = {};
  for (const name of kind.fieldNames) {
    const sent = mask % 2 === 1;
    mask = Math.floor(mask / 2);
    const codec = kind.fields[name]!;
    fields[name] = sent ? codec.decode(reader) : base !== undefined ? base[name] : codec.defaultValue();
  }
  return Object.freeze(fields);
}

function entity(id: number, kind: Kind, fields: Fields): MirrorEntity {
  return Object.freeze({ id, kind: kind.name, fields }) as MirrorEntity;
}

/**
 * Applies one section of a snapshot, of `world`'s kinds, to `entities` (a copy of the
 * baseline's, sorted by id) in place. Throws a `DecodeError` for bytes that do not read, a
 * `MirrorError` for a rule broken; `entities` is then garbage.
 */
export function readSection(reader: BitReader, world: World, entities: MirrorEntity[]): void {
  const destroys = reader.readBits(8);
  let gaps = new GapReader();
  for (let n = 0; n < destroys; n++) {
    const index = search(entities, gaps.read(reader));
    if (index < 0) {
      throw invalid("a destroy of an entity not in view");
    }
    entities.splice(index, 1);
  }

  const creates = reader.readBits(8);
  gaps = new GapReader();
  for (let n = 0; n < creates; n++) {
    const id = gaps.read(reader);
    const kind = world.kinds[reader.readBits(world.kindBits)];
    if (kind === undefined) {
      throw invalid("a create of an unknown kind");
    }
    const fields = readFields(kind, reader, undefined);
    const index = search(entities, id);
    if (index >= 0) {
      throw invalid("a create of an entity already in view");
    }
    entities.splice(-index - 1, 0, entity(id, kind, fields));
    if (entities.length > MAX_VIEW) {
      throw invalid(`a view of more than ${MAX_VIEW} entities`);
    }
  }

  const updates = reader.readBits(8);
  gaps = new GapReader();
  for (let n = 0; n < updates; n++) {
    const index = search(entities, gaps.read(reader));
    if (index < 0) {
      throw invalid("an update of an entity not in view");
    }
    const held = entities[index]!;
    const kind = world.kindNamed(held.kind)!;
    entities[index] = entity(held.id, kind, readFields(kind, reader, held.fields));
  }
}
