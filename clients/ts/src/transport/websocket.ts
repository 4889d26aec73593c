/**
 * The WebSocket transport (`docs/PROTOCOL.md`, "WebSocket transport"): open `/ws`, read the
 * server's 32-byte challenge, answer with the 2080-byte login (the connect token and its
 * proof, see `login.ts`), adopt the connection parameters the server accepts with, then
 * exchange data messages of one channel byte and the message.
 *
 * ```ts
 * const connection = new WsConnection({ url: answer.endpoints.ws, token: answer.token });
 * connection.on("connected", (params) => console.log(`${params.tickRateHz} Hz`));
 * connection.on("message", (channel, bytes) => handle(channel, bytes));
 * connection.on("disconnected", ({ reason }) => console.log(reason));
 * connection.send(1, encodeInput(input));
 * ```
 */

import { Emitter } from "../emitter.js";
import { type Disconnect, type DisconnectReason, reasonOfCloseCode } from "./close-codes.js";
import { type Connection, type ConnectionEvents, type ConnectionState, checkDataMessage } from "./connection.js";
import { type ConnectionParams, parseConnectionParams } from "./params.js";
import { ConnectionTimer } from "./connection-timer.js";
import { type LoginStep, SERVER_NONCE_BYTES, connectTokenProblem, loginMessage } from "./login.js";
import { type Clock, systemClock } from "./timers.js";

/** The part of the browser `WebSocket` this transport uses. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
}

/** A `WebSocket` constructor: the global one, or a fake in tests. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** Options of a {@link WsConnection}. */
export interface WsConnectionOptions {
  /** `ws://host:port/ws` or `wss://…`, from matchmaking (see `webSocketUrl`). */
  url: string;
  /** The connect token, exactly 2048 bytes, as matchmaking returned it. */
  token: Uint8Array;
  /** Default: `globalThis.WebSocket`. */
  WebSocket?: WebSocketConstructor;
  /** Default: the system clock. */
  clock?: Clock;
  /**
   * Give up if the server has not accepted within this many milliseconds of creating the
   * connection. Default 10 000: the server's own limit is 5 s from the upgrade.
   */
  handshakeTimeoutMs?: number;
  /**
   * Close with `server_silent` after this long without a message from the server, or
   * `null` to rely on the socket alone. Browsers hide WebSocket pings, so only data counts:
   * enable it for games whose server sends every tick (the arena does). Default `null`.
   */
  silenceTimeoutMs?: number | null;
}

/** The events of a {@link WsConnection}: a WebSocket message is one `sent` or `received`. */
export type WsConnectionEvents = ConnectionEvents;

/** Where a {@link WsConnection} is in its life. */
export type WsConnectionState = ConnectionState;

const OPEN = 1;
/** Close code a client uses for a server that broke the protocol (RFC 6455). */
const PROTOCOL_ERROR = 1002;
/** What a client that gave up on a silent server closes with: the server keeps the seat. */
const CLOSE_TIMED_OUT = 4002;

/** One WebSocket connection to a tickwire server; not reusable (reconnecting needs a fresh token). */
export class WsConnection implements Connection {
  readonly transport = "websocket";
  private readonly socket: WebSocketLike;
  private readonly clock: Clock;
  private readonly token: Uint8Array;
  private readonly events = new Emitter<WsConnectionEvents>();
  private stateValue: WsConnectionState = "opening";
  private loginStep: LoginStep = "challenge";
  private paramsValue: ConnectionParams | null = null;
  private readonly timer: ConnectionTimer;

  constructor(options: WsConnectionOptions) {
    const problem = connectTokenProblem(options.token);
    if (problem !== null) {
      throw new RangeError(problem);
    }
    const WebSocketImpl = options.WebSocket ?? (globalThis.WebSocket as unknown as WebSocketConstructor | undefined);
    if (WebSocketImpl === undefined) {
      throw new Error("no WebSocket implementation: pass options.WebSocket");
    }
    this.clock = options.clock ?? systemClock;
    this.token = options.token;
    this.timer = new ConnectionTimer(this.clock, options.silenceTimeoutMs ?? null, (reason, message) =>
      this.closeWith(reason, 4000, message, false),
    );
    this.socket = new WebSocketImpl(options.url);
    this.socket.binaryType = "arraybuffer";
    this.socket.onopen = () => this.handleOpen();
    this.socket.onmessage = (event) => this.handleMessage(event.data);
    this.socket.onclose = (event) => this.handleClose(event.code, event.reason);
    // An error is always followed by a close event, which reports it.
    this.socket.onerror = () => {};
    this.timer.arm(options.handshakeTimeoutMs ?? 10_000, "handshake_timed_out", "no accepted message from the server in time");
  }

  /** Where the connection is. */
  get state(): WsConnectionState {
    return this.stateValue;
  }

  /** The server's parameters, once connected. */
  get params(): ConnectionParams | null {
    return this.paramsValue;
  }

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof WsConnectionEvents>(event: K, listener: (...args: WsConnectionEvents[K]) => void): () => void {
    return this.events.on(event, listener);
  }

  private emit<K extends keyof WsConnectionEvents>(event: K, ...args: WsConnectionEvents[K]): void {
    this.events.emit(event, ...args);
  }

  /**
   * Sends `message` on `channel`. Returns false (and sends nothing) when not connected.
   * A channel the server did not open or a message past its size limit is a `RangeError`:
   * the server would close the connection for it.
   */
  send(channel: number, message: Uint8Array): boolean {
    const params = this.paramsValue;
    if (this.stateValue !== "connected" || params === null || this.socket.readyState !== OPEN) {
      return false;
    }
    if (!Number.isInteger(channel) || channel < 0 || channel >= params.channels.length) {
      throw new RangeError(`channel ${channel} is not one of the server's ${params.channels.length} channels`);
    }
    if (message.length > params.maxMessageSize) {
      throw new RangeError(`message of ${message.length} bytes exceeds max ${params.maxMessageSize}`);
    }
    const frame = new Uint8Array(1 + message.length);
    frame[0] = channel;
    frame.set(message, 1);
    this.socket.send(frame);
    this.emit("sent", frame.length);
    return true;
  }

  /** Leaves: sends a close frame (1000); `disconnected` follows with reason `requested`. */
  close(): void {
    this.closeWith("requested", 1000, "client closed", true);
  }

  private handleOpen(): void {
    if (this.stateValue !== "opening") {
      return;
    }
    this.stateValue = "handshaking";
  }

  /** The server's challenge: answer it with the login, once its proof is computed. */
  private async handleChallenge(nonce: Uint8Array): Promise<void> {
    if (nonce.length !== SERVER_NONCE_BYTES) {
      this.closeWith("protocol_violation", PROTOCOL_ERROR, `the server's challenge is ${nonce.length} bytes, not ${SERVER_NONCE_BYTES}`, true);
      return;
    }
    this.loginStep = "proving";
    let login: Uint8Array;
    try {
      login = await loginMessage(this.token, nonce.slice());
    } catch (error) {
      // The token was checked when the connection was made: only WebCrypto itself can fail.
      this.closeWith("protocol_violation", PROTOCOL_ERROR, `could not make the login: ${String(error)}`, true);
      return;
    }
    if (this.isClosed() || this.socket.readyState !== OPEN) {
      return;
    }
    this.loginStep = "accepted";
    this.socket.send(login);
    this.emit("sent", login.length);
  }

  /** A method, so a check after an `await` is not narrowed away. */
  private isClosed(): boolean {
    return this.stateValue === "closed";
  }

  private handleMessage(data: unknown): void {
    if (this.stateValue === "closed") {
      return;
    }
    if (typeof data === "string" || !(data instanceof ArrayBuffer || ArrayBuffer.isView(data))) {
      // The server only ever sends binary messages.
      this.closeWith("protocol_violation", PROTOCOL_ERROR, "the server sent a text message", true);
      return;
    }
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    this.emit("received", bytes.length);
    if (this.stateValue === "handshaking" && this.loginStep === "challenge") {
      void this.handleChallenge(bytes);
      return;
    }
    if (this.stateValue === "handshaking" && this.loginStep === "proving") {
      this.closeWith("protocol_violation", PROTOCOL_ERROR, "a message before the login was sent", true);
      return;
    }
    if (this.stateValue === "handshaking") {
      const params = parseConnectionParams(bytes);
      if (params === null) {
        this.closeWith("protocol_violation", PROTOCOL_ERROR, "the accepted message is not valid connection parameters", true);
        return;
      }
      this.paramsValue = params;
      this.stateValue = "connected";
      this.timer.disarm();
      this.timer.heard();
      this.emit("connected", params);
      return;
    }
    const params = this.paramsValue;
    if (this.stateValue !== "connected" || params === null) {
      this.closeWith("protocol_violation", PROTOCOL_ERROR, "a message before the connection opened", true);
      return;
    }
    const checked = checkDataMessage(bytes, params);
    if (!checked.ok) {
      this.closeWith(checked.reason, checked.reason === "message_too_large" ? 1009 : PROTOCOL_ERROR, checked.detail, true);
      return;
    }
    this.timer.heard();
    this.emit("message", checked.channel, checked.message);
  }

  private handleClose(code: number, reason: string): void {
    if (this.stateValue === "closed") {
      return;
    }
    this.finish({ reason: reasonOfCloseCode(code), code, message: reason, wasConnected: this.stateValue === "connected" });
  }

  /**
   * Ends the connection from this side. The close code tells the server what the player
   * meant (docs/PROTOCOL.md, "Closing"): 1000 or no code means they *left* and gives up
   * their seat at once; a connection given up for a suspected network failure
   * (`leaving` false) closes with 4002 (timed out), which keeps the seat for the
   * reconnection grace, and a reconnection's fresh token takes it back.
   */
  private closeWith(reason: DisconnectReason, code: number, message: string, leaving: boolean): void {
    if (this.stateValue === "closed") {
      return;
    }
    const disconnect = { reason, code, message, wasConnected: this.stateValue === "connected" };
    const sent = leaving || this.stateValue !== "connected" ? code : CLOSE_TIMED_OUT;
    try {
      this.socket.close(sent, message.slice(0, 120));
    } catch {
      // A socket may refuse a code; it is being dropped either way.
    }
    // Reported now, not on the close event, which a dead peer never sends.
    this.finish(disconnect);
  }

  private finish(disconnect: Disconnect): void {
    this.stateValue = "closed";
    this.timer.disarm();
    this.socket.onopen = null;
    this.socket.onmessage = null;
    this.socket.onclose = null;
    this.emit("disconnected", disconnect);
  }
}
