/**
 * What a snapshot changed (`docs/REPLICATION.md`, "Applying one"): the difference between
 * the newest view before it and the new one, per entity id, in the order Rust's
 * `Mirror::accept` lists it.
 */

import type { Kind, MirrorEntity, World } from "./kind.js";

/** One entry of what a snapshot changed. */
export type MirrorChange =
  /** An entity came into view (spawned, or came into range). */
  | { readonly added: number }
  /** Fields of an entity changed: bit `i` of `mask` for its `i`-th field. */
  | { readonly changed: number; readonly mask: number }
  /** An entity left the view (despawned, or out of range). */
  | { readonly removed: number };

/**
 * Whether two field values are equal as Rust's `==` on the decoded values has it: numbers by
 * value (a quantized float by its decoded value, NaN unequal to itself), arrays and byte
 * arrays element by element, structs and enum values field by field.
 */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) {
    return true;
  }
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) {
    return false;
  }
  if (Array.isArray(a) || ArrayBuffer.isView(a)) {
    const left = a as ArrayLike<unknown>;
    const right = b as ArrayLike<unknown>;
    if (Array.isArray(a) !== Array.isArray(b) || left.length !== right.length) {
      return false;
    }
    for (let i = 0; i < left.length; i++) {
      if (!sameValue(left[i], right[i])) {
        return false;
      }
    }
    return true;
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) {
    return false;
  }
  return keys.every((key) => sameValue((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]));
}

/** The mask of the fields of `kind` whose values differ between `then` and `now`. */
function changedFields(kind: Kind, then: MirrorEntity, now: MirrorEntity): number {
  if (then.fields === now.fields) {
    return 0; // the snapshot did not update it
  }
  const before = then.fields as Readonly<Record<string, unknown>>;
  const after = now.fields as Readonly<Record<string, unknown>>;
  let mask = 0;
  let bit = 1;
  for (const name of kind.fieldNames) {
    if (!sameValue(before[name], after[name])) {
      mask += bit;
    }
    bit *= 2;
  }
  return mask;
}

/**
 * What changed from `before` to `after`, both sorted by id: a walk over both in id order,
 * an entity whose kind changed being removed, then added.
 */
export function difference(
  before: readonly MirrorEntity[],
  after: readonly MirrorEntity[],
  world: World,
): MirrorChange[] {
  const changes: MirrorChange[] = [];
  let i = 0;
  let j = 0;
  while (i < before.length || j < after.length) {
    const then = before[i];
    const now = after[j];
    if (now === undefined || (then !== undefined && then.id < now.id)) {
      changes.push({ removed: then!.id });
      i++;
    } else if (then === undefined || then.id > now.id) {
      changes.push({ added: now.id });
      j++;
    } else {
      if (then.kind !== now.kind) {
        changes.push({ removed: then.id }, { added: now.id });
      } else {
        const mask = changedFields(world.kindNamed(now.kind)!, then, now);
        if (mask !== 0) {
          changes.push({ changed: now.id, mask });
        }
      }
      i++;
      j++;
    }
  }
  return changes;
}
