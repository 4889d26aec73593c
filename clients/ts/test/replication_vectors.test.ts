// crates/replicate/tests/vectors/replication.json, written by the Rust world
// (crates/replicate/tests/replication_vectors.rs): the snapshots of one scene to two
// viewers, applied in order by one mirror per viewer; after each, the mirror must hold the
// stored view (ids, kinds, fields) and roster, and list the stored changes of both, as the
// Rust mirror does.
import { describe, expect, it } from "vitest";

import { Mirror } from "@tickwire/client";

import { EntityWorld } from "./generated/replication_fixture.js";
import { fromHex, readRepoJson } from "./vectors.js";

interface StoredEntity {
  id: number;
  kind: string;
  fields: Record<string, unknown>;
}
interface StoredSnapshot {
  name: string;
  viewer: number;
  tick: number;
  hex: string;
  view: StoredEntity[];
  changes: Change[];
  roster: { seat: number; name: string; connected: boolean; you: boolean }[];
  roster_changes: Change[];
}
type Change = { added: number } | { removed: number } | { changed: number; mask: number };
interface ReplicationFile {
  format: string;
  snapshots: StoredSnapshot[];
}

const file = readRepoJson<ReplicationFile>("crates/replicate/tests/vectors/replication.json");

/** Rust's snake_case field names as the generated TypeScript spells them. */
function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

function camelFields(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).map(([name, value]) => [camelCase(name), value]));
}

describe("replication vectors", () => {
  it("are of the format this mirror implements", () => {
    expect(file.format).toBe("docs/REPLICATION.md 1.0");
    expect(new Set(file.snapshots.map((snapshot) => snapshot.viewer)).size).toBeGreaterThan(1);
  });

  it("apply in order to one mirror per viewer, giving the stored views and changes", () => {
    const mirrors = new Map<number, Mirror<typeof EntityWorld>>();
    for (const [index, snapshot] of file.snapshots.entries()) {
      const label = `snapshot ${index} (${snapshot.name}) to viewer ${snapshot.viewer}`;
      let mirror = mirrors.get(snapshot.viewer);
      if (mirror === undefined) {
        mirror = new Mirror(EntityWorld);
        mirrors.set(snapshot.viewer, mirror);
      }
      expect(mirror.apply(fromHex(snapshot.hex)), label).toBe(snapshot.tick);
      expect(mirror.tick, label).toBe(snapshot.tick);
      const view = [...mirror.entities()].map(({ id, kind, fields }) => ({ id, kind, fields: { ...fields } }));
      const stored = snapshot.view.map(({ id, kind, fields }) => ({ id, kind, fields: camelFields(fields) }));
      expect(view, `${label}: the view`).toEqual(stored);
      expect(mirror.size, label).toBe(stored.length);
      for (const entity of stored) {
        expect(mirror.get(entity.id)?.fields, `${label}: entity ${entity.id}`).toEqual(entity.fields);
      }
      expect(mirror.changes, `${label}: the changes`).toEqual(snapshot.changes);
      const roster = [...mirror.roster()].map(({ seat, member }) => ({ seat, ...member }));
      expect(roster, `${label}: the roster`).toEqual(snapshot.roster);
      expect(mirror.rosterChanges, `${label}: the roster's changes`).toEqual(snapshot.roster_changes);
      expect(mirror.mySeat, `${label}: its seat`).toBe(snapshot.roster.find((entry) => entry.you)?.seat);
    }
  });
});
