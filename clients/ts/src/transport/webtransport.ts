/**
 * The WebTransport transport (`docs/PROTOCOL.md`, "WebTransport transport"): HTTP/3 to the
 * server's WebTransport port, one bidirectional "control stream" of length-prefixed frames
 * (the server's challenge in, the login (token and proof, see `login.ts`) out, the connection
 * parameters back, then reliable messages and the CLOSE frame), and QUIC datagrams for the
 * unreliable channels, so a lost snapshot costs that snapshot and never stalls the ones
 * after it.
 *
 * ```ts
 * const connection = new WtConnection({ url: answer.endpoints.wt.url, certificateHash: answer.endpoints.wt.certSha256, token: answer.token });
 * connection.on("connected", (params) => console.log(`${params.tickRateHz} Hz`));
 * connection.on("message", (channel, bytes) => handle(channel, bytes));
 * connection.on("disconnected", ({ reason }) => console.log(reason));
 * connection.send(1, encodeInput(input)); // a datagram: channel 1 is unreliable
 * ```
 *
 * Messages on a Reliable channel go on the control stream; Unreliable and UnreliableSequenced
 * ones as datagrams (sequenced ones with a u16 sequence, the receiver dropping stale ones),
 * or on the stream when too large for a datagram. The close codes are WebSocket's.
 */

import { Emitter } from "../emitter.js";
import { type Disconnect, type DisconnectReason, reasonOfCloseCode } from "./close-codes.js";
import { type Connection, type ConnectionEvents, type ConnectionState, checkDataMessage } from "./connection.js";
import { type ConnectionParams, parseConnectionParams } from "./params.js";
import { ConnectionTimer } from "./connection-timer.js";
import { type Clock, systemClock } from "./timers.js";
import {
  CLOSE_FRAME_TAG,
  FrameReader,
  MAX_CLOSE_REASON_BYTES,
  MIN_FRAME_LIMIT,
  SequenceFilter,
  datagramHeaderBytes,
  encodeCloseFrame,
  encodeDataFrame,
  encodeDatagram,
  encodeFrame,
  frameLimit,
  parseCloseFrame,
  parseDatagram,
  utf8Prefix,
} from "./webtransport-frames.js";
import { type LoginStep, SERVER_NONCE_BYTES, connectTokenProblem, loginMessage } from "./login.js";

/** A bidirectional stream, as the browser's `WebTransportBidirectionalStream`. */
export interface WebTransportStreamLike {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
}

/** The part of the browser `WebTransport` this transport uses. */
export interface WebTransportLike {
  readonly ready: Promise<unknown>;
  /** Resolves with the session's close code and reason; rejects when it was lost without one. */
  readonly closed: Promise<{ closeCode?: number; reason?: string }>;
  readonly datagrams: {
    readonly readable: ReadableStream<Uint8Array>;
    /** The current spec's way to send datagrams (Safari has only this). */
    createWritable?(): WritableStream<Uint8Array>;
    /** The older way, removed from the spec and still the only one in some browsers. */
    readonly writable?: WritableStream<Uint8Array>;
    /** The largest datagram the session takes now, bytes (absent in some browsers). */
    readonly maxDatagramSize?: number;
    /**
     * How many datagrams the browser lets its network stack hold before a write waits
     * (Chromium: 1 by default; absent in some browsers).
     */
    outgoingHighWaterMark?: number;
  };
  createBidirectionalStream(): Promise<WebTransportStreamLike>;
  close(info?: { closeCode?: number; reason?: string }): void;
}

/** What this transport passes to the `WebTransport` constructor. */
export interface WebTransportOptionsLike {
  serverCertificateHashes?: { algorithm: string; value: Uint8Array }[];
  requireUnreliable?: boolean;
}

/** A `WebTransport` constructor: the global one, or a fake in tests. */
export type WebTransportConstructor = new (url: string, options?: WebTransportOptionsLike) => WebTransportLike;

/** The browser's `WebTransport`, or `undefined` where there is none (Node, some browsers). */
export function globalWebTransport(): WebTransportConstructor | undefined {
  return (globalThis as { WebTransport?: WebTransportConstructor }).WebTransport;
}

/** Options of a {@link WtConnection}. */
export interface WtConnectionOptions {
  /** `https://host:port/wt`, from matchmaking (`endpoints.wt.url`). */
  url: string;
  /**
   * The SHA-256 of the server's certificate (`endpoints.wt.certSha256`): the browser then
   * accepts that self-signed certificate and no other (`serverCertificateHashes`). `null`
   * for a certificate the browser validates as for any https page.
   */
  certificateHash: Uint8Array | null;
  /** The connect token, exactly 2048 bytes, as matchmaking returned it. */
  token: Uint8Array;
  /** Default: `globalThis.WebTransport`. */
  WebTransport?: WebTransportConstructor;
  /** Default: the system clock. */
  clock?: Clock;
  /** Give up unless the server's parameters arrive within this many ms of creating the connection. Default 10 000. */
  handshakeTimeoutMs?: number;
  /** As `WsConnectionOptions.silenceTimeoutMs`: only data counts. Default `null`. */
  silenceTimeoutMs?: number | null;
}

/** Datagrams and frames received and dropped, by why (for tests and curious players). */
export interface WtDrops {
  /** A sequenced datagram not newer than one already delivered on its channel. */
  stale: number;
  /** Empty, an unknown or reliable channel, too short, or past the message size limit. */
  invalid: number;
  /** A datagram before the connection parameters (the stream is behind the datagrams). */
  early: number;
}

/** Datagrams and control-stream frames each way. */
export interface WtCounts {
  datagramsSent: number;
  /** Datagrams dropped before the browser took them: its queue was full. */
  datagramsNotQueued: number;
  datagramsReceived: number;
  framesSent: number;
  framesReceived: number;
}

/** Largest datagram assumed when the browser does not say (below any QUIC path's). */
const DEFAULT_MAX_DATAGRAM = 1024;
/**
 * Datagrams waiting in the browser's writable past which more are dropped, not queued: each
 * one waiting is a tick of input delay, and the arena repeats its last commands in every
 * input anyway. (Was 64: with Chromium's default high-water mark below, a page drawing 20
 * frames a second queued inputs 3 s deep.)
 */
const MAX_QUEUED_DATAGRAMS = 4;
/**
 * The `outgoingHighWaterMark` asked of the browser. Chromium's default, 1, makes each
 * datagram's write wait until the network service has answered for the one before, an
 * answer the page's main thread reads between its frames: a page drawing 20 frames a second
 * sent 20 datagrams a second, whatever it wrote. With 16 the writes finish at once; the
 * network service still sends each datagram when it gets it (QUIC drops one it cannot send
 * soon), so nothing waits longer for it.
 */
export const OUTGOING_HIGH_WATER_MARK = 16;
/** How long a leaving client lets its CLOSE frame drain before closing the session, ms. */
const CLOSE_DRAIN_MS = 1000;
/** The code reported for a session that ended without one (WebSocket's "abnormal closure"). */
const CODE_LOST = 1006;
/** Close codes (docs/PROTOCOL.md, "Closing"). */
const CLOSE_REQUESTED = 4001;
const CLOSE_TIMED_OUT = 4002;
const CLOSE_PROTOCOL = 4006;
const CLOSE_TOO_LARGE = 4013;

/** One WebTransport session to a tickwire server; not reusable (reconnecting needs a fresh token). */
export class WtConnection implements Connection {
  readonly transport = "webtransport";
  /** What was dropped on receipt. */
  readonly drops: WtDrops = { stale: 0, invalid: 0, early: 0 };
  /** What went each way. */
  readonly counts: WtCounts = { datagramsSent: 0, datagramsNotQueued: 0, datagramsReceived: 0, framesSent: 0, framesReceived: 0 };
  private readonly session: WebTransportLike | null = null;
  private readonly clock: Clock;
  private readonly token: Uint8Array;
  private readonly events = new Emitter<ConnectionEvents>();
  private readonly frames = new FrameReader(MIN_FRAME_LIMIT);
  private readonly sequences = new SequenceFilter();
  private readonly nextSequence = new Map<number, number>();
  private streamWriter: WritableStreamDefaultWriter<Uint8Array> | null = null;
  private datagramWriter: WritableStreamDefaultWriter<Uint8Array> | null = null;
  private stateValue: ConnectionState = "opening";
  private loginStep: LoginStep = "challenge";
  private paramsValue: ConnectionParams | null = null;
  private readonly timer: ConnectionTimer;

  constructor(options: WtConnectionOptions) {
    const problem = connectTokenProblem(options.token);
    if (problem !== null) {
      throw new RangeError(problem);
    }
    const WebTransportImpl = options.WebTransport ?? globalWebTransport();
    if (WebTransportImpl === undefined) {
      throw new Error("no WebTransport in this browser: pass options.WebTransport or use WebSocket");
    }
    this.clock = options.clock ?? systemClock;
    this.token = options.token;
    this.timer = new ConnectionTimer(this.clock, options.silenceTimeoutMs ?? null, (reason, message) =>
      this.closeWith(reason, 4000, message, false),
    );
    this.timer.arm(options.handshakeTimeoutMs ?? 10_000, "handshake_timed_out", "no connection parameters from the server in time");
    const init: WebTransportOptionsLike = { requireUnreliable: true };
    if (options.certificateHash !== null) {
      init.serverCertificateHashes = [{ algorithm: "sha-256", value: options.certificateHash }];
    }
    try {
      this.session = new WebTransportImpl(options.url, init);
    } catch (error) {
      // A bad URL or hash throws at once; report it as any failure to connect, after the
      // caller has had the chance to listen.
      void Promise.resolve().then(() => this.finish(lost(`WebTransport refused ${options.url}: ${String(error)}`, false)));
      return;
    }
    const session = this.session;
    session.closed.then(
      (info) => this.handleSessionClosed(info.closeCode ?? null, info.reason ?? ""),
      (error: unknown) => this.handleSessionClosed(null, String(error)),
    );
    session.ready.then(
      () => void this.open(session),
      // `closed` rejects too, and reports it.
      () => {},
    );
  }

  /** Where the connection is. */
  get state(): ConnectionState {
    return this.stateValue;
  }

  /** The server's parameters, once connected. */
  get params(): ConnectionParams | null {
    return this.paramsValue;
  }

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof ConnectionEvents>(event: K, listener: (...args: ConnectionEvents[K]) => void): () => void {
    return this.events.on(event, listener);
  }

  private emit<K extends keyof ConnectionEvents>(event: K, ...args: ConnectionEvents[K]): void {
    this.events.emit(event, ...args);
  }

  /**
   * Sends `message` on `channel`: on the control stream for a Reliable channel, as a datagram
   * for the others unless it is too large for one. Returns false (and sends nothing) when not
   * connected. A channel the server did not open or a message past its size limit is a
   * `RangeError`: the server would close the connection for it.
   */
  send(channel: number, message: Uint8Array): boolean {
    const params = this.paramsValue;
    if (this.stateValue !== "connected" || params === null || this.streamWriter === null || this.session === null) {
      return false;
    }
    const kind = Number.isInteger(channel) ? params.channels[channel] : undefined;
    if (kind === undefined) {
      throw new RangeError(`channel ${channel} is not one of the server's ${params.channels.length} channels`);
    }
    if (message.length > params.maxMessageSize) {
      throw new RangeError(`message of ${message.length} bytes exceeds max ${params.maxMessageSize}`);
    }
    const maxDatagram = this.session.datagrams.maxDatagramSize ?? DEFAULT_MAX_DATAGRAM;
    if (kind !== "reliable" && this.datagramWriter !== null && datagramHeaderBytes(kind) + message.length <= maxDatagram) {
      let sequence: number | null = null;
      if (kind === "unreliable_sequenced") {
        // Numbered 1, 2, 3, … per channel, wrapping (docs/PROTOCOL.md).
        sequence = ((this.nextSequence.get(channel) ?? 0) + 1) & 0xffff;
        this.nextSequence.set(channel, sequence);
      }
      const datagram = encodeDatagram(channel, sequence, message);
      if ((this.datagramWriter.desiredSize ?? 0) < -MAX_QUEUED_DATAGRAMS) {
        // The browser is not taking them: lost, as any datagram may be, rather than queued without bound.
        this.counts.datagramsNotQueued += 1;
        return true;
      }
      // A datagram the browser cannot queue is lost, as any datagram may be.
      this.datagramWriter.write(datagram).catch(() => {});
      this.counts.datagramsSent += 1;
      this.emit("sent", datagram.length);
      return true;
    }
    this.writeFrame(encodeDataFrame(channel, message));
    return true;
  }

  /** Leaves: sends a CLOSE frame (4001) and closes the session; `disconnected` follows with reason `requested`. */
  close(): void {
    this.closeWith("requested", CLOSE_REQUESTED, "client closed", true);
  }

  /**
   * The session is up: open the control stream and read both ways. Opening it sends its
   * WebTransport header, which is what the server answers with the challenge.
   */
  private async open(session: WebTransportLike): Promise<void> {
    if (this.stateValue !== "opening") {
      return;
    }
    let stream: WebTransportStreamLike;
    try {
      stream = await session.createBidirectionalStream();
    } catch (error) {
      this.closeWith("connection_lost", CLOSE_TIMED_OUT, `could not open the control stream: ${String(error)}`, false);
      return;
    }
    if (this.stateValue !== "opening") {
      return;
    }
    this.stateValue = "handshaking";
    this.streamWriter = stream.writable.getWriter();
    if (session.datagrams.outgoingHighWaterMark !== undefined) {
      session.datagrams.outgoingHighWaterMark = OUTGOING_HIGH_WATER_MARK;
    }
    // Without a way to send datagrams, every message goes on the stream (`send`).
    this.datagramWriter = (session.datagrams.createWritable?.() ?? session.datagrams.writable)?.getWriter() ?? null;
    void this.readStream(stream.readable);
    void this.readDatagrams(session.datagrams.readable);
  }

  /** A method, so a check after a call is not narrowed away by the loop's condition. */
  private isClosed(): boolean {
    return this.stateValue === "closed";
  }

  private writeFrame(frame: Uint8Array): void {
    const writer = this.streamWriter;
    if (writer === null) {
      return;
    }
    // Writes queue in order; a failed one means the stream or the session died, which
    // `closed` or the reader reports too.
    writer.write(frame).catch((error: unknown) => {
      this.closeWith("connection_lost", CLOSE_TIMED_OUT, `the control stream failed: ${String(error)}`, false);
    });
    this.counts.framesSent += 1;
    this.emit("sent", frame.length);
  }

  private async readStream(readable: ReadableStream<Uint8Array>): Promise<void> {
    const reader = readable.getReader();
    try {
      while (this.stateValue !== "closed") {
        const { done, value } = await reader.read();
        if (done) {
          this.closeWith("connection_lost", CLOSE_TIMED_OUT, "the server finished the control stream without a CLOSE frame", false);
          return;
        }
        for (const body of this.frames.push(value)) {
          this.handleFrame(body);
          if (this.isClosed()) {
            return;
          }
        }
        const error = this.frames.error;
        if (error !== null) {
          if (error.kind === "too_large") {
            this.closeWith("message_too_large", CLOSE_TOO_LARGE, `frame of ${error.length} bytes exceeds max ${error.limit}`, true);
          } else {
            this.closeWith("protocol_violation", CLOSE_PROTOCOL, "an empty frame", true);
          }
          return;
        }
      }
    } catch (error) {
      this.closeWith("connection_lost", CLOSE_TIMED_OUT, `the control stream failed: ${String(error)}`, false);
    } finally {
      reader.releaseLock();
    }
  }

  private handleFrame(body: Uint8Array): void {
    this.counts.framesReceived += 1;
    this.emit("received", 4 + body.length);
    // The challenge first: a random nonce may well start with the CLOSE frame's tag.
    if (this.stateValue === "handshaking" && this.loginStep === "challenge" && body.length === SERVER_NONCE_BYTES) {
      void this.handleChallenge(body);
      return;
    }
    if (body[0] === CLOSE_FRAME_TAG) {
      // The server's refusal (a replayed token, a full server) comes instead of the parameters.
      const close = parseCloseFrame(body);
      if (close === null) {
        this.closeWith("protocol_violation", CLOSE_PROTOCOL, "a malformed CLOSE frame", true);
        return;
      }
      // The server ends the session itself; nothing more to send.
      this.endSession(close.code, close.reason);
      this.finish({
        reason: reasonOfCloseCode(close.code),
        code: close.code,
        message: close.reason,
        wasConnected: this.stateValue === "connected",
      });
      return;
    }
    if (this.stateValue === "handshaking" && this.loginStep === "challenge") {
      this.closeWith("protocol_violation", CLOSE_PROTOCOL, `the server's challenge is ${body.length} bytes, not ${SERVER_NONCE_BYTES}`, true);
      return;
    }
    if (this.stateValue === "handshaking" && this.loginStep === "proving") {
      this.closeWith("protocol_violation", CLOSE_PROTOCOL, "a frame before the login was sent", true);
      return;
    }
    if (this.stateValue === "handshaking") {
      const params = parseConnectionParams(body);
      if (params === null) {
        this.closeWith("protocol_violation", CLOSE_PROTOCOL, "the accepted frame is not valid connection parameters", true);
        return;
      }
      this.paramsValue = params;
      this.frames.limit = frameLimit(params.maxMessageSize);
      this.stateValue = "connected";
      this.timer.disarm();
      this.timer.heard();
      this.emit("connected", params);
      return;
    }
    const params = this.paramsValue;
    if (params === null) {
      return;
    }
    const data = checkDataMessage(body, params);
    if (!data.ok) {
      this.closeWith(data.reason, data.reason === "message_too_large" ? CLOSE_TOO_LARGE : CLOSE_PROTOCOL, data.detail, true);
      return;
    }
    this.timer.heard();
    this.emit("message", data.channel, data.message);
  }

  /** The server's challenge (its first frame, 32 bytes): answer it with the login, once its proof is computed. */
  private async handleChallenge(nonce: Uint8Array): Promise<void> {
    this.loginStep = "proving";
    let login: Uint8Array;
    try {
      login = await loginMessage(this.token, nonce.slice());
    } catch (error) {
      // The token was checked when the connection was made: only WebCrypto itself can fail.
      this.closeWith("protocol_violation", CLOSE_PROTOCOL, `could not make the login: ${String(error)}`, true);
      return;
    }
    if (this.isClosed()) {
      return;
    }
    this.loginStep = "accepted";
    this.writeFrame(encodeFrame(login));
  }

  private async readDatagrams(readable: ReadableStream<Uint8Array>): Promise<void> {
    const reader = readable.getReader();
    try {
      while (this.stateValue !== "closed") {
        const { done, value } = await reader.read();
        if (done) {
          return;
        }
        this.handleDatagram(value);
      }
    } catch {
      // The session ended; `closed` says how.
    } finally {
      reader.releaseLock();
    }
  }

  private handleDatagram(datagram: Uint8Array): void {
    if (this.stateValue === "closed") {
      return;
    }
    this.counts.datagramsReceived += 1;
    this.emit("received", datagram.length);
    const params = this.paramsValue;
    if (params === null) {
      this.drops.early += 1;
      return;
    }
    const parsed = parseDatagram(datagram, params.channels, params.maxMessageSize);
    if (!parsed.ok) {
      this.drops.invalid += 1;
      return;
    }
    if (parsed.sequence !== null && !this.sequences.accept(parsed.channel, parsed.sequence)) {
      this.drops.stale += 1;
      return;
    }
    this.timer.heard();
    this.emit("message", parsed.channel, parsed.message);
  }

  private handleSessionClosed(code: number | null, reason: string): void {
    if (this.stateValue === "closed") {
      return;
    }
    // A CLOSE frame read in the same turn says more than a lost session: let the stream's
    // reader run first.
    this.clock.schedule(() => {
      if (this.stateValue === "closed") {
        return;
      }
      const wasConnected = this.stateValue === "connected";
      this.finish(
        code === null
          ? lost(`the session was lost: ${reason}`, wasConnected)
          : { reason: reasonOfCloseCode(code), code, message: reason, wasConnected },
      );
    }, 0);
  }

  /**
   * Ends the connection from this side (see `WsConnection` for what the codes tell the
   * server): a CLOSE frame when the stream is open, then the session closed with the same
   * code once the frame has drained (or after a bound). A connection given up for a suspected
   * network failure (`leaving` false) closes with 4002 and keeps the seat.
   */
  private closeWith(reason: DisconnectReason, code: number, message: string, leaving: boolean): void {
    if (this.stateValue === "closed") {
      return;
    }
    // A lost connection reads as one whatever this side sends (4002, which keeps the seat).
    const seen = reason === "connection_lost" ? CODE_LOST : code;
    const disconnect = { reason, code: seen, message, wasConnected: this.stateValue === "connected" };
    const sent = leaving || this.stateValue !== "connected" ? code : CLOSE_TIMED_OUT;
    const writer = this.streamWriter;
    if (writer !== null) {
      const frame = encodeCloseFrame(sent, message);
      writer.write(frame).catch(() => {});
      this.counts.framesSent += 1;
      this.emit("sent", frame.length);
      const closeSession = (): void => this.endSession(sent, message);
      const bound = this.clock.schedule(closeSession, CLOSE_DRAIN_MS);
      writer.close().then(
        () => {
          this.clock.cancel(bound);
          closeSession();
        },
        () => {},
      );
    } else {
      this.endSession(sent, message);
    }
    // Reported now, not when the session says so, which a dead peer never does.
    this.finish(disconnect);
  }

  private endSession(code: number, message: string): void {
    try {
      this.session?.close({ closeCode: code, reason: truncate(message) });
    } catch {
      // Already closed.
    }
  }

  private finish(disconnect: Disconnect): void {
    if (this.stateValue === "closed") {
      return;
    }
    this.stateValue = "closed";
    this.timer.disarm();
    this.emit("disconnected", disconnect);
  }
}

function lost(message: string, wasConnected: boolean): Disconnect {
  return { reason: "connection_lost", code: CODE_LOST, message, wasConnected };
}

/** A close reason within the 123 bytes a CLOSE frame carries (cut on a character). */
function truncate(message: string): string {
  return new TextDecoder().decode(utf8Prefix(message, MAX_CLOSE_REASON_BYTES));
}
