/**
 * The client a game uses: matchmake, connect over WebSocket, and when the connection
 * drops, matchmake again with the saved session (which gives back the held seat) and
 * reconnect, with capped exponential backoff, until the policy gives up.
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
import type { Disconnect } from "./transport/close-codes.js";
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
import { type WebSocketConstructor, WsConnection } from "./transport/websocket.js";

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
  /** Injected for tests: defaults are the browser's. */
  fetch?: typeof globalThis.fetch;
  WebSocket?: WebSocketConstructor;
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
  connected: [params: ConnectionParams];
  /** A data message. */
  message: [channel: number, bytes: Uint8Array];
  /** The connection ended; `retryInMs` is when the next attempt starts, or `null` if none will. */
  disconnected: [disconnect: Disconnect, retryInMs: number | null];
  /** A matchmaking attempt failed; `retryInMs` as above. */
  matchmakeFailed: [error: MatchmakeError, retryInMs: number | null];
  /** The client gave up (or was closed after a final failure); nothing more happens. */
  failed: [failure: ClientFailure];
}

/** Where a {@link TickwireClient} is. */
export type ClientState = "idle" | "matchmaking" | "connecting" | "connected" | "waiting" | "closed";

/** Matchmaking, the WebSocket connection and reconnection, together. */
export class TickwireClient {
  /** Packets, bytes and RTT of the current and past connections. */
  readonly stats = new ConnectionStats();
  private readonly options: TickwireClientOptions;
  private readonly clock: Clock;
  private readonly policy: ReconnectPolicy | null;
  private readonly events = new Emitter<TickwireClientEvents>();
  private connection: WsConnection | null = null;
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

  /** The last matchmaking answer (player id, room, name). */
  get answer(): MatchmakeAnswer | null {
    return this.answerValue;
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

  /** Sends a message; false when not connected (see `WsConnection.send`). */
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

  private connect(answer: MatchmakeAnswer): void {
    this.stateValue = "connecting";
    const connection = new WsConnection({
      url: webSocketUrl(answer.endpoints, this.options.page ?? globalThis.location),
      token: answer.token,
      clock: this.clock,
      silenceTimeoutMs: this.options.silenceTimeoutMs ?? null,
      ...(this.options.WebSocket !== undefined ? { WebSocket: this.options.WebSocket } : {}),
      ...(this.options.handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs: this.options.handshakeTimeoutMs } : {}),
    });
    this.connection = connection;
    connection.on("sent", (bytes) => this.stats.handleSent(this.clock.now(), bytes));
    connection.on("received", (bytes) => this.stats.handleReceived(this.clock.now(), bytes));
    connection.on("connected", (params) => {
      this.stateValue = "connected";
      this.policy?.reset();
      this.emit("connected", params);
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
