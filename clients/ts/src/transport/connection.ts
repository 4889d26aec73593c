/**
 * What every transport's connection offers the client above it: {@link WsConnection} and
 * {@link WtConnection} both are one of these, so matchmaking, reconnection and statistics
 * work the same over either.
 */

import type { Disconnect } from "./close-codes.js";
import type { ConnectionParams } from "./params.js";

/** The transports a browser can use. */
export type TransportKind = "webtransport" | "websocket";

/** The events of a {@link Connection}, with their listeners' arguments. */
export interface ConnectionEvents {
  /** The server accepted the login; data may flow. */
  connected: [params: ConnectionParams];
  /** A data message from the server. `bytes` is a view, valid during the call. */
  message: [channel: number, bytes: Uint8Array];
  /** The connection ended (exactly once, whether or not it ever connected). */
  disconnected: [disconnect: Disconnect];
  /** A message, frame or datagram went out or came in (for statistics): its size in bytes. */
  sent: [bytes: number];
  received: [bytes: number];
}

/** Where a connection is in its life. */
export type ConnectionState = "opening" | "handshaking" | "connected" | "closed";

/** One connection to a tickwire server; not reusable (reconnecting needs a fresh token). */
export interface Connection {
  /** Which transport this is. */
  readonly transport: TransportKind;
  /** Where the connection is. */
  readonly state: ConnectionState;
  /** The server's parameters, once connected. */
  readonly params: ConnectionParams | null;
  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof ConnectionEvents>(event: K, listener: (...args: ConnectionEvents[K]) => void): () => void;
  /** Sends `message` on `channel`; false (and nothing sent) when not connected. */
  send(channel: number, message: Uint8Array): boolean;
  /** Leaves: the server gives the seat up; `disconnected` follows with reason `requested`. */
  close(): void;
}

/**
 * A data message from the server (its channel's byte, then the message) checked against the
 * connection's parameters: its channel and message, or why it must close the connection.
 */
export type DataMessage =
  | { ok: true; channel: number; message: Uint8Array }
  | { ok: false; reason: "protocol_violation" | "message_too_large"; detail: string };

/** Checks a data message's channel and size: the same rule on every transport. */
export function checkDataMessage(bytes: Uint8Array, params: ConnectionParams): DataMessage {
  const channel = bytes[0];
  if (channel === undefined) {
    return { ok: false, reason: "protocol_violation", detail: "an empty data message" };
  }
  if (channel >= params.channels.length) {
    return { ok: false, reason: "protocol_violation", detail: `channel ${channel} of ${params.channels.length}` };
  }
  if (bytes.length - 1 > params.maxMessageSize) {
    return { ok: false, reason: "message_too_large", detail: `message of ${bytes.length - 1} bytes exceeds max ${params.maxMessageSize}` };
  }
  return { ok: true, channel, message: bytes.subarray(1) };
}
