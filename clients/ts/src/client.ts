/**
 * The client a game uses: matchmake, connect over WebTransport where the browser and the
 * server have it (else WebSocket), and when the connection drops, matchmake again with the
 * saved session (which gives back the held seat) and reconnect, with capped exponential
 * backoff, until the policy gives up.
 *
 * Transport choice (`transport: "auto"`, the default): WebTransport when
 * `globalThis.WebTransport` exists and matchmaking offers `endpoints.wt`. If that session
 * fails before the server's parameters arrive (the UDP port blocked, a certificate refused,
 * nothing within `webTransportTimeoutMs`), the client matchmakes again with its session for
 * a fresh token (each token is single-use) and connects over WebSocket, at once and without
 * backoff, and stays on WebSocket from then on. `"websocket"` and `"webtransport"` force one.
 *
 * ```ts
 * const client = new TickwireClient({ request: { kind: "arena", name: "Ada" } });
 * client.on("connected", (params) => startGame(params));
 * client.on("message", (channel, bytes) => onMessage(channel, bytes));
 * client.on("disconnected", (why, retryInMs) => showBanner(why.reason, retryInMs));
 * client.on("failed", (why) => showError(why));
 * client.start();
 * ```
 */

import { Emitter } from "./emitter.js";
import { ConnectionStats } from "./netcode/stats.js";
import { ReconnectPolicy, type ReconnectConfig, classifyDisconnect, classifyMatchmakeError } from "./netcode/reconnect.js";
import type { Disconnect, DisconnectReason } from "./transport/close-codes.js";
import type { Connection, TransportKind } from "./transport/connection.js";
import {
  MatchmakeError,
  type MatchmakeAnswer,
  type MatchmakeRequest,
  type PageLocation,
  matchmake,
  webSocketUrl,
} from "./transport/matchmaking.js";
import type { ConnectionParams } from "./transport/params.js";
import { type Clock, systemClock } from "./transport/timers.js";
import { type WebTransportConstructor, WtConnection, globalWebTransport } from "./transport/webtransport.js";
import { type WebSocketConstructor, WsConnection } from "./transport/websocket.js";

/** Which transport a client uses: `auto` prefers WebTransport and falls back to WebSocket. */
export type TransportChoice = "auto" | TransportKind;

/**
 * Failures of a WebTransport session that never connected which WebSocket may not share:
 * the session or its stream never came up, or came up wrong. A server's refusal (full,
 * shutting down, a bad token) would refuse a WebSocket just the same.
 */
const FALLBACK_REASONS: ReadonlySet<DisconnectReason> = new Set(["connection_lost", "handshake_timed_out", "protocol_violation"]);

/** Options of a {@link TickwireClient}. */
export interface TickwireClientOptions {
  /** The first matchmaking request (a kind or a room, a name or an identity). */
  request: MatchmakeRequest;
  /** The server's HTTP origin. Default: the page's. */
  baseUrl?: string;
  /** Reconnection tunables, or `false` never to reconnect. */
  reconnect?: Partial<ReconnectConfig> | false;
  /** See `WsConnectionOptions.silenceTimeoutMs`. Default `null`. */
  silenceTimeoutMs?: number | null;
  /** See `WsConnectionOptions.handshakeTimeoutMs`. */
  handshakeTimeoutMs?: number;
  /** `auto` (default), or force `websocket` or `webtransport` (which then never falls back). */
  transport?: TransportChoice;
  /**
   * With `auto`: how long a WebTransport session may take to bring the server's parameters
   * before the client falls back to WebSocket, ms. Default 3000.
   */
  webTransportTimeoutMs?: number;
  /** Injected for tests: defaults are the browser's. */
  fetch?: typeof globalThis.fetch;
  WebSocket?: WebSocketConstructor;
  /** Default `globalThis.WebTransport`; `null` to act as a browser without it. */
  WebTransport?: WebTransportConstructor | null;
  clock?: Clock;
  page?: PageLocation;
  random?: () => number;
}

/** Why the client stopped for good. */
export type ClientFailure = { kind: "matchmake"; error: MatchmakeError } | { kind: "disconnect"; disconnect: Disconnect };

/** The events of a {@link TickwireClient}. */
export interface TickwireClientEvents {
  /** Matchmaking gave a seat (`answer.reconnect`: the held seat came back). */
  matched: [answer: MatchmakeAnswer];
  /** Connected; data may flow. */
  connected: [params: ConnectionParams, transport: TransportKind];
  /** A data message. */
  message: [channel: number, bytes: Uint8Array];
  /** The connection ended; `retryInMs` is when the next attempt starts, or `null` if none will. */
  disconnected: [disconnect: Disconnect, retryInMs: number | null];
  /** A matchmaking attempt failed; `retryInMs` as above. */
  matchmakeFailed: [error: MatchmakeError, retryInMs: number | null];
  /**
   * A WebTransport session failed before connecting (`why`); the client matchmakes again
   * for a fresh token and connects over WebSocket.
   */
  fallback: [why: Disconnect];
  /** The client gave up (or was closed after a final failure); nothing more happens. */
  failed: [failure: ClientFailure];
  /**
   * A listener of `event` threw `error` (a game's decoder meeting bytes it did not expect):
   * caught, counted in {@link TickwireClient.listenerErrors}, the client carries on. Without a
   * listener here it goes to `console.error`.
   */
  listenerError: [event: string, error: unknown];
}

/** Where a {@link TickwireClient} is. */
export type ClientState = "idle" | "matchmaking" | "connecting" | "connected" | "waiting" | "closed";

/** Matchmaking, the WebTransport or WebSocket connection and reconnection, together. */
export class TickwireClient {
  /** Packets, bytes and RTT of the current and past connections. */
  readonly stats = new ConnectionStats();
  private readonly options: TickwireClientOptions;
  private readonly clock: Clock;
  private readonly policy: ReconnectPolicy | null;
  private readonly events: Emitter<TickwireClientEvents> = new Emitter((event, error) => {
    if (event === "listenerError" || this.events.listenerCount("listenerError") === 0) {
      console.error(`tickwire: a "${event}" listener threw`, error);
    } else {
      this.events.emit("listenerError", event, error);
    }
  });
  private connection: Connection | null = null;
  private transportValue: TransportKind | null = null;
  private webTransportFailure: Disconnect | null = null;
  private stateValue: ClientState = "idle";
  private sessionValue: string | null = null;
  private answerValue: MatchmakeAnswer | null = null;
  private retryTimer: unknown = null;

  constructor(options: TickwireClientOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.policy = options.reconnect === false ? null : new ReconnectPolicy(options.reconnect ?? {}, options.random);
  }

  /** Where the client is. */
  get state(): ClientState {
    return this.stateValue;
  }

  /** The session from the last matchmaking answer: proof of being this player. */
  get session(): string | null {
    return this.sessionValue;
  }

  /** The transport of the current (or last) connection, or `null` before the first. */
  get transport(): TransportKind | null {
    return this.transportValue;
  }

  /** Why WebTransport was given up on (the client is on WebSocket since), or `null`. */
  get webTransportFailed(): Disconnect | null {
    return this.webTransportFailure;
  }

  /** The last matchmaking answer (player id, room, name). */
  get answer(): MatchmakeAnswer | null {
    return this.answerValue;
  }

  /** Listeners that threw (see the `listenerError` event), since the client was made. */
  get listenerErrors(): number {
    return this.events.listenerErrors;
  }

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof TickwireClientEvents>(event: K, listener: (...args: TickwireClientEvents[K]) => void): () => void {
    return this.events.on(event, listener);
  }

  private emit<K extends keyof TickwireClientEvents>(event: K, ...args: TickwireClientEvents[K]): void {
    this.events.emit(event, ...args);
  }

  /** Matchmakes and connects. */
  start(): void {
    if (this.stateValue !== "idle") {
      return;
    }
    void this.attempt();
  }

  /** Sends a message; false when not connected (see `WsConnection.send`, `WtConnection.send`). */
  send(channel: number, message: Uint8Array): boolean {
    return this.connection?.send(channel, message) ?? false;
  }

  /** Leaves for good: the server gives the seat up, and nothing is retried. */
  close(): void {
    if (this.stateValue === "closed") {
      return;
    }
    this.stateValue = "closed";
    if (this.retryTimer !== null) {
      this.clock.cancel(this.retryTimer);
      this.retryTimer = null;
    }
    this.connection?.close();
    this.connection = null;
  }

  /** The request for the next attempt: the session, which brings back a held seat, plus where to go otherwise. */
  private request(): MatchmakeRequest {
    if (this.sessionValue === null) {
      return this.options.request;
    }
    const { kind, room } = this.options.request;
    return { session: this.sessionValue, ...(room !== undefined ? { room } : kind !== undefined ? { kind } : {}) };
  }

  private async attempt(): Promise<void> {
    this.stateValue = "matchmaking";
    let answer: MatchmakeAnswer;
    try {
      answer = await matchmake(this.request(), {
        ...(this.options.baseUrl !== undefined ? { baseUrl: this.options.baseUrl } : {}),
        ...(this.options.fetch !== undefined ? { fetch: this.options.fetch } : {}),
      });
    } catch (error) {
      if (this.isClosed()) {
        return;
      }
      const failure = error instanceof MatchmakeError ? error : new MatchmakeError("network", null, String(error));
      const delay = this.policy?.next(classifyMatchmakeError(failure.kind)) ?? null;
      this.emit("matchmakeFailed", failure, delay);
      this.retryOrFail(delay, { kind: "matchmake", error: failure });
      return;
    }
    if (this.isClosed()) {
      return;
    }
    this.sessionValue = answer.session;
    this.answerValue = answer;
    this.emit("matched", answer);
    this.connect(answer);
  }

  /** A method, so a check after an `await` is not narrowed away by the assignment before it. */
  private isClosed(): boolean {
    return this.stateValue === "closed";
  }

  /** The transport for this answer, or why there is none. */
  private pick(answer: MatchmakeAnswer): { kind: TransportKind; WebTransport?: WebTransportConstructor } | { refused: string } {
    const choice = this.options.transport ?? "auto";
    if (choice === "websocket") {
      return { kind: "websocket" };
    }
    const WebTransportImpl = this.options.WebTransport === undefined ? globalWebTransport() : (this.options.WebTransport ?? undefined);
    const usable = WebTransportImpl !== undefined && answer.endpoints.wt !== null;
    if (choice === "webtransport") {
      if (WebTransportImpl === undefined) {
        return { refused: "this browser has no WebTransport" };
      }
      if (answer.endpoints.wt === null) {
        return { refused: "the server offers no WebTransport endpoint" };
      }
    }
    return usable && this.webTransportFailure === null ? { kind: "webtransport", WebTransport: WebTransportImpl } : { kind: "websocket" };
  }

  private connect(answer: MatchmakeAnswer): void {
    this.stateValue = "connecting";
    const picked = this.pick(answer);
    if ("refused" in picked) {
      const disconnect: Disconnect = { reason: "transport_unavailable", code: 0, message: picked.refused, wasConnected: false };
      this.emit("disconnected", disconnect, null);
      this.retryOrFail(null, { kind: "disconnect", disconnect });
      return;
    }
    const forced = this.options.transport === "webtransport";
    const silenceTimeoutMs = this.options.silenceTimeoutMs ?? null;
    let connection: Connection;
    if (picked.kind === "webtransport" && answer.endpoints.wt !== null) {
      const handshakeTimeoutMs = forced ? this.options.handshakeTimeoutMs : (this.options.webTransportTimeoutMs ?? 3000);
      connection = new WtConnection({
        url: answer.endpoints.wt.url,
        certificateHash: answer.endpoints.wt.certSha256,
        token: answer.token,
        clock: this.clock,
        silenceTimeoutMs,
        ...(picked.WebTransport !== undefined ? { WebTransport: picked.WebTransport } : {}),
        ...(handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs } : {}),
      });
    } else {
      connection = new WsConnection({
        url: webSocketUrl(answer.endpoints, this.options.page ?? globalThis.location),
        token: answer.token,
        clock: this.clock,
        silenceTimeoutMs,
        ...(this.options.WebSocket !== undefined ? { WebSocket: this.options.WebSocket } : {}),
        ...(this.options.handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs: this.options.handshakeTimeoutMs } : {}),
      });
    }
    this.connection = connection;
    this.transportValue = connection.transport;
    connection.on("sent", (bytes) => this.stats.handleSent(this.clock.now(), bytes));
    connection.on("received", (bytes) => this.stats.handleReceived(this.clock.now(), bytes));
    connection.on("connected", (params) => {
      this.stateValue = "connected";
      this.policy?.reset();
      this.emit("connected", params, connection.transport);
    });
    connection.on("message", (channel, bytes) => this.emit("message", channel, bytes));
    connection.on("disconnected", (disconnect) => {
      if (this.connection !== connection) {
        return;
      }
      this.connection = null;
      if (this.stateValue === "closed") {
        this.emit("disconnected", disconnect, null);
        return;
      }
      if (connection.transport === "webtransport" && !forced && !disconnect.wasConnected && FALLBACK_REASONS.has(disconnect.reason)) {
        // The token may have been spent on the failed session: a fresh one for the WebSocket.
        this.webTransportFailure = disconnect;
        this.emit("fallback", disconnect);
        void this.attempt();
        return;
      }
      const delay = this.policy?.next(classifyDisconnect(disconnect.reason)) ?? null;
      this.emit("disconnected", disconnect, delay);
      this.retryOrFail(delay, { kind: "disconnect", disconnect });
    });
  }

  private retryOrFail(delay: number | null, failure: ClientFailure): void {
    if (delay === null) {
      this.stateValue = "closed";
      this.emit("failed", failure);
      return;
    }
    this.stateValue = "waiting";
    this.retryTimer = this.clock.schedule(() => {
      this.retryTimer = null;
      void this.attempt();
    }, delay);
  }
}
