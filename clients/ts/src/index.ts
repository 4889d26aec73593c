/**
 * `@tickwire/client`: the client SDK for tickwire servers, in browsers and in Node. A game's
 * own messages and state live in the game's package (the arena's in `@tickwire/arena`); this
 * one carries what every game needs.
 *
 * | export | role |
 * |---|---|
 * | {@link TickwireClient} | matchmake, connect over WebTransport or WebSocket (with fallback), reconnect keeping the seat |
 * | {@link matchmake}, {@link WsConnection}, {@link WtConnection} | the pieces it is made of, to use on their own |
 * | {@link BitWriter}, {@link BitReader}, {@link Codec} and its combinators | the wire format (`crates/wire`): a message's layout, declared once |
 * | {@link kind}, {@link replicated}, {@link Mirror}, {@link ackMessage}, {@link InterpolatedMirror} | replicated state (`docs/REPLICATION.md`): a world's kinds, the client's mirror of it with callbacks, its acknowledgements, its interpolated view |
 * | {@link InterpolationBuffer} | remote entities drawn a little in the past, between two snapshots |
 * | {@link ConnectionStats}, {@link ReconnectPolicy} | RTT and rates, backoff |
 * | {@link Emitter} | the typed events every class here uses, for a game client's own |
 *
 * Everything else in `src/` is internal: it may change in any release.
 */

// The client and its events.
export {
  type ClientFailure,
  type ClientState,
  TickwireClient,
  type TickwireClientEvents,
  type TickwireClientOptions,
  type TransportChoice,
} from "./client.js";
export { Emitter } from "./emitter.js";

// Matchmaking and the transports.
export {
  type Endpoints,
  MatchmakeError,
  type MatchmakeAnswer,
  type MatchmakeErrorKind,
  type MatchmakeOptions,
  type MatchmakeRequest,
  type PageLocation,
  type WebTransportEndpoint,
  matchmake,
  webSocketUrl,
} from "./transport/matchmaking.js";
export type { Connection, ConnectionEvents, ConnectionState, TransportKind } from "./transport/connection.js";
export type { ChannelKind, ConnectionParams } from "./transport/params.js";
export type { Disconnect, DisconnectReason } from "./transport/close-codes.js";
export { type WebSocketConstructor, type WebSocketLike, WsConnection, type WsConnectionOptions } from "./transport/websocket.js";
export { type WebTransportConstructor, WtConnection, type WtConnectionOptions } from "./transport/webtransport.js";
export { type Clock, systemClock } from "./transport/timers.js";

// The wire format.
export * from "./wire/index.js";

// Replicated state.
export * from "./replicate/index.js";

// Netcode.
export { InterpolationBuffer, type InterpolationOptions, lerpAngle, lerpVec2 } from "./netcode/interpolation.js";
export { DEFAULT_RECONNECT, type ReconnectConfig, ReconnectPolicy } from "./netcode/reconnect.js";
export { ConnectionStats, type StatsReport } from "./netcode/stats.js";
