// Snapshots written by hand for the mirror's tests (`docs/REPLICATION.md`, "Snapshot"): the
// SDK only reads them, and the Rust world writes only valid ones, so broken ones are made here.
import { BitWriter, MemberKind, type World, replicated } from "@tickwire/client";

/** The roster section's schema, as the SDK reads it. */
const RosterOnly = replicated("Roster", [MemberKind]);

/** An entity entering the view: the fields present are sent, the others are not. */
export interface CreateSpec {
  id: number;
  kind: number;
  fields?: Record<string, unknown>;
}

/** An entity in view updated: `kind` is the one the mirror holds it as. */
export interface UpdateSpec {
  id: number;
  kind: number;
  fields: Record<string, unknown>;
}

/** One section's lists: the game's entities, or the roster's seats. */
export interface SectionSpec {
  destroys?: number[];
  creates?: CreateSpec[];
  updates?: UpdateSpec[];
}

export interface SnapshotSpec extends SectionSpec {
  tick: number;
  /** Ticks back to the baseline; absent for a full state. */
  baselineAge?: number;
  /** The roster section (its kind is `MemberKind`); absent when the roster did not change. */
  roster?: SectionSpec;
}

/** Ascending ids as gaps: `0` + 4 bits, `1 0` + 8 bits (gap − 16), `1 1` + 16 bits. */
function writeIds<T>(writer: BitWriter, items: T[], idOf: (item: T) => number, body: (item: T) => void): void {
  writer.writeUint(items.length, 8);
  let next = 0;
  for (const item of items) {
    const gap = idOf(item) - next;
    if (gap < 16) {
      writer.writeBits(gap << 1, 5);
    } else if (gap < 272) {
      writer.writeBits(0b01 | ((gap - 16) << 2), 10);
    } else {
      writer.writeBits(0b11 | (gap << 2), 18);
    }
    next = idOf(item) + 1;
    body(item);
  }
}

function writeFields(writer: BitWriter, world: World, kind: number, fields: Record<string, unknown>): void {
  const schema = world.kinds[kind];
  if (schema === undefined) {
    return; // a kind the world does not have: nothing more can be written
  }
  let mask = 0;
  schema.fieldNames.forEach((name, i) => {
    if (name in fields) {
      mask += 2 ** i;
    }
  });
  writer.writeUint(mask, schema.fieldNames.length);
  for (const name of schema.fieldNames) {
    if (name in fields) {
      schema.fields[name]!.encode(writer, fields[name]);
    }
  }
}

function writeSection(writer: BitWriter, world: World, spec: SectionSpec): void {
  writeIds(writer, spec.destroys ?? [], (id) => id, () => {});
  writeIds(writer, spec.creates ?? [], (create) => create.id, (create) => {
    writer.writeUint(create.kind, world.kindBits);
    writeFields(writer, world, create.kind, create.fields ?? {});
  });
  writeIds(writer, spec.updates ?? [], (update) => update.id, (update) => writeFields(writer, world, update.kind, update.fields));
}

/** The bytes of a snapshot of `world`. */
export function writeSnapshot(world: World, spec: SnapshotSpec): Uint8Array {
  const writer = new BitWriter();
  writer.writeUint(spec.tick >>> 0, 32);
  writer.writeBool(spec.baselineAge !== undefined);
  if (spec.baselineAge !== undefined) {
    writer.writeUint(spec.baselineAge, 8);
  }
  writeSection(writer, world, spec);
  writer.writeBool(spec.roster !== undefined);
  if (spec.roster !== undefined) {
    writeSection(writer, RosterOnly, spec.roster);
  }
  return writer.finish();
}
