/**
 * `@tickwire/arena`: the arena demo's game client, built on `@tickwire/client` alone — what a
 * game's own client package looks like.
 *
 * | export | role |
 * |---|---|
 * | {@link ArenaClient} | welcome, snapshots and acks, inputs, prediction, interpolation, roster, chat |
 * | {@link SnapshotDecoder}, {@link ServerMessageCodec}, {@link encodeClientInput} | the arena's wire messages |
 * | {@link Prediction} | the local player predicted with the server's movement step, reconciled on each snapshot |
 * | {@link encodeInput}, {@link stepMovement}, {@link fetchArenaMap} | the arena's input, movement step and map |
 */
export * from "./client.js";
export * from "./input.js";
export * from "./map.js";
export * from "./messages.js";
export * from "./movement.js";
export * from "./prediction.js";
export * from "./snapshot.js";
