/**
 * A replicated world's schema, the TypeScript side of `#[derive(Replicate)]`
 * (`docs/REPLICATION.md`, "Types"): a {@link kind} is one struct, its fields' codecs in wire
 * order with their roles; {@link replicated} numbers the kinds of one world for a
 * {@link Mirror}. `tickwire codegen ts` writes both from the Rust types.
 *
 * ```ts
 * const RunnerKind = kind("Runner", {
 *   position: array(quantized(0, 256, 0.01), 2),
 *   stamina: range(0, 1000),
 * }, { ownerOnly: ["stamina"], position: "position" });
 * type Runner = InferKind<typeof RunnerKind>; // { position: number[]; stamina: number }
 * const World = replicated("Entity", [RunnerKind]);
 * ```
 */

import type { Codec, Infer } from "../wire/codec.js";
import { checkKeyName, checkLayout } from "../wire/errors.js";
import { bitsForSpan } from "../wire/span.js";

/**
 * Most fields a kind may declare here. The wire allows 64 (`MAX_FIELDS` in Rust), but a field
 * mask is a `number`, exact to 53 bits.
 */
export const MAX_KIND_FIELDS = 53;

/** Most kinds a world may declare (`MAX_KINDS` in Rust). */
export const MAX_KINDS = 256;

/** A kind's fields: each field's codec, in wire (declaration) order, which is key order. */
export type FieldCodecs = Record<string, Codec<unknown>>;

/** A kind's value: each field as its codec reads it. */
export type KindFields<F extends FieldCodecs> = { [P in keyof F]: Infer<F[P]> };

/** Names of the fields whose values are numbers or arrays of numbers: what can be blended. */
export type NumericFieldName<F extends FieldCodecs> = {
  [P in keyof F & string]: Infer<F[P]> extends number | readonly number[] ? P : never;
}[keyof F & string];

/** The roles of a kind's fields: `#[replicate(owner_only)]` and `#[replicate(position)]`. */
export interface KindOptions<F extends FieldCodecs> {
  /** Fields sent only to the entity's owner; every other viewer holds their defaults. */
  ownerOnly?: readonly (keyof F & string)[];
  /** The `[x, y]` field the server places the entity by; what an interpolated view blends. */
  position?: NumericFieldName<F>;
}

/** One kind of entity: its name, its fields in wire order and their roles. */
export interface Kind<N extends string = string, F extends FieldCodecs = FieldCodecs> {
  /** The Rust struct's name; callbacks and entities name their kind by it. */
  readonly name: N;
  /** Each field's codec. */
  readonly fields: F;
  /** Field names in wire order: bit `i` of a field mask is `fieldNames[i]`. */
  readonly fieldNames: readonly string[];
  /** Fields sent only to the entity's owner. */
  readonly ownerOnly: readonly string[];
  /** The position field, if the kind has one. */
  readonly position: string | undefined;
}

/** The value type of a kind: `InferKind<typeof RunnerKind>`. */
export type InferKind<K> = K extends Kind<string, infer F> ? KindFields<F> : never;

/** Declares a kind; a `RangeError` for a layout the Rust derive would refuse. */
export function kind<N extends string, F extends FieldCodecs>(
  name: N,
  fields: F,
  options: KindOptions<NoInfer<F>> = {},
): Kind<N, F> {
  const fieldNames = Object.keys(fields);
  for (const field of fieldNames) {
    checkKeyName(`kind ${name} field name`, field);
  }
  checkLayout(
    fieldNames.length <= MAX_KIND_FIELDS,
    `kind ${name} has ${fieldNames.length} fields, more than the ${MAX_KIND_FIELDS} a field mask holds`,
  );
  const ownerOnly: string[] = [...(options.ownerOnly ?? [])];
  for (const field of ownerOnly) {
    checkLayout(fieldNames.includes(field), `kind ${name} has no field ${field} to make owner-only`);
  }
  const position: string | undefined = options.position;
  checkLayout(
    position === undefined || fieldNames.includes(position),
    `kind ${name} has no position field ${String(position)}`,
  );
  return Object.freeze({ name, fields, fieldNames: Object.freeze(fieldNames), ownerOnly: Object.freeze(ownerOnly), position });
}

/** A world's kinds, numbered in order from 0 as the Rust enum's variants are. */
export interface World<K extends readonly Kind[] = readonly Kind[]> {
  /** The Rust type's name. */
  readonly name: string;
  /** The kinds by index. */
  readonly kinds: K;
  /** Bits of a create's kind: `ceil(log2(kinds))`, 0 for one kind. */
  readonly kindBits: number;
  /** The kind named `name`, if the world has one. */
  kindNamed(name: string): K[number] | undefined;
}

/** Declares a world of `kinds`; a `RangeError` for none, too many, or two of one name. */
export function replicated<const K extends readonly Kind[]>(name: string, kinds: K): World<K> {
  checkLayout(kinds.length >= 1 && kinds.length <= MAX_KINDS, `world ${name} has ${kinds.length} kinds, not 1 to ${MAX_KINDS}`);
  const byName = new Map<string, K[number]>(kinds.map((each) => [each.name, each]));
  checkLayout(byName.size === kinds.length, `world ${name} has two kinds of one name`);
  return Object.freeze({
    name,
    kinds,
    kindBits: bitsForSpan(kinds.length - 1),
    kindNamed: (kindName: string) => byName.get(kindName),
  });
}

/** The names of a world's kinds. */
export type KindName<W extends World> = W["kinds"][number]["name"];

/** The kind of `W` named `N`. */
export type KindNamed<W extends World, N extends KindName<W>> = Extract<W["kinds"][number], { name: N }>;

/** The value type of the kind of `W` named `N`. */
export type FieldsOf<W extends World, N extends KindName<W>> = InferKind<KindNamed<W, N>>;

/** The field names of the kind of `W` named `N`. */
export type FieldNameOf<W extends World, N extends KindName<W>> = keyof FieldsOf<W, N> & string;

/**
 * An entity as a mirror holds it: its id, its kind's name and its fields. The mirror shares
 * these objects between the views it keeps, so they are read-only.
 */
export type MirrorEntity<W extends World = World> = {
  [N in KindName<W>]: { readonly id: number; readonly kind: N; readonly fields: Readonly<FieldsOf<W, N>> };
}[KindName<W>];
