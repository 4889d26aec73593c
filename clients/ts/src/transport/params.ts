/**
 * The connection parameters the server dictates in its first WebSocket message (the UDP
 * accepted packet's body; `docs/PROTOCOL.md`, "Connection parameters"): 14 + c bytes,
 * little-endian.
 */

/** How a channel delivers (over WebSocket: what the server does for a slow reader). */
export type ChannelKind = "reliable" | "unreliable" | "unreliable_sequenced";

/** What the server decided for this connection. A client never configures these. */
export interface ConnectionParams {
  /** The room's simulation ticks per second, 1 to 128: the rate of the room the player sits in. */
  tickRateHz: number;
  /** Keepalive interval, milliseconds (the UDP keepalive; over WebSocket the server pings). */
  keepaliveMs: number;
  /** Silence after which the server drops the client, milliseconds. */
  timeoutMs: number;
  /** The UDP MTU; unused over WebSocket. */
  mtu: number;
  /** Largest message, bytes. */
  maxMessageSize: number;
  /** Channel kinds by channel id. */
  channels: ChannelKind[];
}

const KINDS: readonly ChannelKind[] = ["reliable", "unreliable", "unreliable_sequenced"];
const MAX_CHANNELS = 32;

/** Reads the parameters; `null` unless `bytes` is exactly one encoding of valid parameters. */
export function parseConnectionParams(bytes: Uint8Array): ConnectionParams | null {
  if (bytes.length < 14) {
    return null;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint8(13);
  if (count > MAX_CHANNELS || bytes.length !== 14 + count) {
    return null;
  }
  const channels: ChannelKind[] = [];
  for (let i = 0; i < count; i++) {
    const kind = KINDS[view.getUint8(14 + i)];
    if (kind === undefined) {
      return null;
    }
    channels.push(kind);
  }
  const params: ConnectionParams = {
    tickRateHz: view.getUint8(0),
    keepaliveMs: view.getUint16(1, true),
    timeoutMs: view.getUint32(3, true),
    mtu: view.getUint16(7, true),
    maxMessageSize: view.getUint32(9, true),
    channels,
  };
  const valid =
    params.tickRateHz >= 1 &&
    params.tickRateHz <= 128 &&
    params.mtu >= 576 &&
    params.mtu <= 1472 &&
    count >= 1 &&
    params.keepaliveMs > 0 &&
    params.timeoutMs > params.keepaliveMs;
  return valid ? params : null;
}
