/**
 * `@tickwire/client`: the browser SDK for tickwire servers.
 *
 * | export | role |
 * |---|---|
 * | {@link TickwireClient} | matchmake, connect over WebTransport or WebSocket (with fallback), reconnect keeping the seat |
 * | {@link WtConnection}, {@link WsConnection}, {@link matchmake}, {@link webSocketUrl} | the transport pieces, on their own |
 * | {@link BitWriter}, {@link BitReader}, codecs | the wire format (`crates/wire`) |
 * | {@link ArenaClient} | the arena game: welcome, snapshots and acks, inputs, prediction, interpolation, roster, chat |
 * | {@link SnapshotDecoder}, {@link ServerMessageCodec}, {@link encodeClientInput} | the arena's wire messages |
 * | {@link encodeInput}, {@link stepMovement}, {@link fetchArenaMap} | the arena's input, movement step and map |
 * | {@link Prediction}, {@link InterpolationBuffer} | local prediction, remote interpolation |
 * | {@link ConnectionStats}, {@link ReconnectPolicy} | RTT and rates, backoff |
 */
export * from "./wire/index.js";
export * from "./arena/input.js";
export * from "./arena/movement.js";
export * from "./arena/messages.js";
export * from "./arena/snapshot.js";
export * from "./arena/map.js";
export * from "./arena/client.js";
export * from "./transport/close-codes.js";
export * from "./transport/connection.js";
export * from "./transport/matchmaking.js";
export * from "./transport/params.js";
export * from "./transport/timers.js";
export * from "./transport/websocket.js";
export * from "./transport/webtransport.js";
export * from "./transport/webtransport-frames.js";
export * from "./netcode/interpolation.js";
export * from "./netcode/prediction.js";
export * from "./netcode/reconnect.js";
export * from "./netcode/stats.js";
export * from "./client.js";
