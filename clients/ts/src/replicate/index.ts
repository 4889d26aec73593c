/**
 * Replicated state (`docs/REPLICATION.md`): a game's entity kinds, declared once (generated
 * by `tickwire codegen ts` from the Rust types), and a client's mirror of the world the
 * server replicates to it.
 *
 * | export | role |
 * |---|---|
 * | {@link kind}, {@link replicated}, {@link InferKind} | a world's schema: its kinds, their fields' codecs and roles |
 * | {@link Mirror}, {@link MirrorError} | applies snapshots, keeps the baselines, lists changes, runs the callbacks |
 * | {@link Member}, {@link RosterSeat} | the room's roster every mirror holds beside the game's entities |
 * | {@link ackMessage} | the acknowledgement of an applied snapshot |
 * | {@link InterpolatedMirror} | the mirror's entities drawn a little in the past, blended between snapshots |
 */
export { ackMessage } from "./ack.js";
export type { MirrorChange } from "./changes.js";
export { MirrorError, type MirrorErrorKind } from "./errors.js";
export { MAX_ENTITY_ID } from "./gaps.js";
export { InterpolatedMirror, type InterpolatedMirrorOptions } from "./interpolated.js";
export {
  type FieldCodecs,
  type FieldNameOf,
  type FieldsOf,
  type InferKind,
  type Kind,
  type KindFields,
  type KindName,
  type KindNamed,
  type KindOptions,
  MAX_KIND_FIELDS,
  MAX_KINDS,
  type MirrorEntity,
  type NumericFieldName,
  type World,
  kind,
  replicated,
} from "./kind.js";
export { MAX_HISTORY, Mirror, type MirrorOptions } from "./mirror.js";
export { type Member, MemberKind, type RosterSeat } from "./roster.js";
export { MAX_VIEW } from "./view.js";
