/**
 * The roster every replicated room has without game code (`crates/replicate/src/roster.rs`):
 * an entry per seat, its member's name, whether they are connected, and for the viewer's
 * own seat only that it is theirs. Snapshots carry it in a section of its own, after the
 * game's entities, as they carry entities.
 */

import { bool, string } from "../wire/codec.js";
import { type InferKind, type MirrorEntity, kind, replicated } from "./kind.js";

/** A roster entry's kind: the Rust `Member`. */
export const MemberKind = kind("Member", {
  /** Display name, at most 32 bytes (as a connect token carries it). */
  name: string(32),
  /** False while their connection is lost and the seat held for them. */
  connected: bool,
  /** True in the viewer's own entry: how a client learns its seat. */
  you: bool,
}, { ownerOnly: ["you"] });

/** A roster entry: the member in one seat. */
export type Member = InferKind<typeof MemberKind>;

/** The roster section's schema: one kind, so a create's kind takes no bits. */
export const RosterWorld = replicated("Roster", [MemberKind]);

/** The roster section's schema type. */
export type RosterWorld = typeof RosterWorld;

/** One seat of the roster and its member. */
export interface RosterSeat {
  readonly seat: number;
  readonly member: Readonly<Member>;
}

/** A roster entry as a view holds it, as a seat. */
export function asSeat(entry: MirrorEntity<RosterWorld>): RosterSeat {
  return { seat: entry.id, member: entry.fields };
}
