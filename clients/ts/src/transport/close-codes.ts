/**
 * Why a connection ended, one name whichever transport was used: WebSocket close codes
 * 4001–4009 are `4000 +` the UDP reason codes (`docs/PROTOCOL.md`, "Closing"), and a
 * WebTransport session closes with the same codes (in its CLOSE frame and as the session's
 * close code).
 */

/** Why a connection ended. */
export type DisconnectReason =
  /** This client closed it. */
  | "requested"
  /** The server heard nothing from this client for its timeout (4002). */
  | "timed_out"
  /** The server is shutting down (4003). */
  | "server_shutdown"
  /** A room or an operator removed the player (4004). */
  | "kicked"
  /** This client read too slowly; the server's queue for it overflowed (4005). */
  | "slow_client"
  /** One side broke the protocol (4006, 1002 or 1007 from the server, or bad bytes from it). */
  | "protocol_violation"
  /** The server is full (4007). */
  | "server_full"
  /** A newer connection of this player replaced this one (4008). */
  | "connected_elsewhere"
  /** The handshake did not finish in time (4009 from the server, or the client's own limit). */
  | "handshake_timed_out"
  /** The token is not for this server or was tampered with (4010). */
  | "bad_token"
  /** The token expired (4011). */
  | "token_expired"
  /** The token was used before; each connection needs a fresh one (4012). */
  | "token_replayed"
  /** A message was past the size limit (4013, or 1009 over WebSocket). */
  | "message_too_large"
  /** The server did not accept the login's proof of holding the token's key (4014). */
  | "bad_proof"
  /** Nothing arrived for the client's silence limit. */
  | "server_silent"
  /** The network dropped the connection, or the socket never opened. */
  | "connection_lost"
  /** The transport forced by the client's options is not there (no WebTransport in the browser or on the server). */
  | "transport_unavailable";

const BY_CODE: ReadonlyMap<number, DisconnectReason> = new Map([
  [4002, "timed_out"],
  [4003, "server_shutdown"],
  [4004, "kicked"],
  [4005, "slow_client"],
  [4006, "protocol_violation"],
  [4007, "server_full"],
  [4008, "connected_elsewhere"],
  [4009, "handshake_timed_out"],
  [4010, "bad_token"],
  [4011, "token_expired"],
  [4012, "token_replayed"],
  [4013, "message_too_large"],
  [4014, "bad_proof"],
  // RFC 6455's own codes, which the server sends when this client's framing breaks the RFC.
  [1002, "protocol_violation"],
  [1007, "protocol_violation"],
  [1009, "message_too_large"],
]);

/** The reason a server's close code stands for; anything unknown is a lost connection. */
export function reasonOfCloseCode(code: number): DisconnectReason {
  // 1000 and 4001: the server echoes the client's own close.
  if (code === 1000 || code === 4001) {
    return "requested";
  }
  return BY_CODE.get(code) ?? "connection_lost";
}

/** How a connection ended. */
export interface Disconnect {
  /** Why, as the SDK understands it. */
  reason: DisconnectReason;
  /** The close code seen (1006 when the socket or session just dropped). */
  code: number;
  /**
   * The server's close reason text or the client's own explanation. For `kicked` it is the
   * server's words verbatim, fit to show the player: a room's refusal of the join ("cheaters
   * may not play"), a kick's reason, "room closed", "room crashed". Not for logic: branch on
   * `reason`.
   */
  message: string;
  /** Whether the connection had completed its handshake. */
  wasConnected: boolean;
}
