// A virtual clock, a fake WebSocket and a fake WebTransport: the transports and the reconnecting client are
// driven by these, with no real sockets and no sleeps.
import { createHmac } from "node:crypto";

import type { Clock } from "../src/transport/timers.js";
import { encodeFrame } from "../src/transport/webtransport-frames.js";
import type { WebTransportLike, WebTransportOptionsLike, WebTransportStreamLike } from "../src/transport/webtransport.js";
import type { WebSocketLike } from "../src/transport/websocket.js";

/** A clock that moves only when told, running due callbacks in time order. */
export class VirtualClock implements Clock {
  private time = 0;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; callback: () => void }>();

  now(): number {
    return this.time;
  }

  schedule(callback: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + Math.max(0, ms), callback });
    return id;
  }

  cancel(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Moves time forward by `ms`, running every callback that falls due on the way. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      let due: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.timers) {
        if (entry[1].at <= end && (due === undefined || entry[1].at < due[1].at)) {
          due = entry;
        }
      }
      if (due === undefined) {
        break;
      }
      this.timers.delete(due[0]);
      this.time = due[1].at;
      due[1].callback();
    }
    this.time = end;
  }

  /** Time until the next callback, or null. */
  nextTimeout(): number | null {
    let next: number | null = null;
    for (const { at } of this.timers.values()) {
      next = next === null ? at : Math.min(next, at);
    }
    return next === null ? null : next - this.time;
  }
}

/** The challenge the fakes send unless told otherwise (docs/PROTOCOL.md's example nonce, 0xa0 to 0xbf). */
export const NONCE = Uint8Array.from({ length: 32 }, (_, i) => 0xa0 + i);

/** Where {@link token} puts its client-to-server key: after one IPv4 address (docs/PROTOCOL.md, "Connect tokens"). */
const KEY_OFFSET = 1085;

/**
 * The login a client must answer `nonce` with, computed here with Node's own HMAC rather than
 * the SDK's: the token, then HMAC-SHA256 under its client-to-server key over the label, the
 * nonce and the token (docs/PROTOCOL.md, "Login: proof of possession").
 */
export function expectedLogin(token: Uint8Array, nonce: Uint8Array = NONCE): Uint8Array {
  const proof = createHmac("sha256", token.subarray(KEY_OFFSET, KEY_OFFSET + 32))
    .update("tickwire stream login v1")
    .update(nonce)
    .update(token)
    .digest();
  return new Uint8Array([...token, ...proof]);
}

/**
 * Resolves once `ready()` holds, re-checking whenever `wake` is called; rejects naming `what`
 * if it still does not after a bound (the client computes its proof with WebCrypto, which
 * settles on its own schedule, so no fixed number of turns is enough).
 */
class Waiters {
  private readonly waiting: (() => void)[] = [];

  wake(): void {
    for (const waiter of this.waiting.splice(0)) {
      waiter();
    }
  }

  async until(what: string, ready: () => boolean, ms = 2000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!ready()) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`the client never ${what}`);
      }
      await new Promise<void>((resolve) => {
        const bound = setTimeout(resolve, left);
        this.waiting.push(() => {
          clearTimeout(bound);
          resolve();
        });
      });
    }
  }
}

/** A WebSocket the test plays the server side of. */
export class FakeWebSocket implements WebSocketLike {
  static instances: FakeWebSocket[] = [];
  binaryType = "blob";
  readyState = 0;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  readonly sent: Uint8Array[] = [];
  closedWith: { code: number | undefined; reason: string | undefined } | null = null;
  private readonly sends = new Waiters();

  constructor(readonly url: string) {
    FakeWebSocket.instances.push(this);
  }

  static reset(): void {
    FakeWebSocket.instances = [];
  }

  static last(): FakeWebSocket {
    const socket = FakeWebSocket.instances.at(-1);
    if (socket === undefined) {
      throw new Error("no WebSocket was created");
    }
    return socket;
  }

  send(data: Uint8Array): void {
    if (this.readyState !== 1) {
      throw new Error("send on a socket that is not open");
    }
    this.sent.push(data.slice());
    this.sends.wake();
  }

  close(code?: number, reason?: string): void {
    this.closedWith = { code, reason };
    this.readyState = 2;
  }

  // The server's side.
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }

  receive(bytes: Uint8Array | string): void {
    const data = typeof bytes === "string" ? bytes : bytes.slice().buffer;
    this.onmessage?.({ data });
  }

  /** Resolves once the client has sent `count` messages in all. */
  async sentCount(count: number): Promise<void> {
    await this.sends.until(`sent ${count} message(s) (it sent ${this.sent.length})`, () => this.sent.length >= count);
  }

  /** Opens (unless open), sends the challenge and resolves with the client's answer, its first message. */
  async login(nonce: Uint8Array = NONCE): Promise<Uint8Array> {
    if (this.readyState === 0) {
      this.open();
    }
    this.receive(nonce);
    await this.sentCount(1);
    return this.sent[0]!;
  }

  /** The whole handshake: open, challenge, the client's login, then the accepted message. Resolves with the login. */
  async handshake(accepted: Uint8Array = DEFAULT_ACCEPTED): Promise<Uint8Array> {
    const login = await this.login();
    this.receive(accepted);
    return login;
  }

  serverClose(code: number, reason = ""): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

/** The default accepted message of docs/PROTOCOL.md: 60 Hz, 100 ms, 10 s, MTU 1200, 256 KiB, 3 channels. */
export const DEFAULT_ACCEPTED = new Uint8Array([
  0x3c, 0x64, 0x00, 0x10, 0x27, 0x00, 0x00, 0xb0, 0x04, 0x00, 0x00, 0x04, 0x00, 0x03, 0x00, 0x01, 0x02,
]);

/**
 * A 2048-byte token whose bytes say which one it is, but for an address list that reads (one
 * IPv4 address: count 1 at offset 1077, type 1 at 1078), so its client-to-server key, 32
 * bytes of `n` at 1085, can be found.
 */
export function token(n: number): Uint8Array {
  const bytes = new Uint8Array(2048);
  bytes.fill(n);
  bytes[1077] = 1;
  bytes[1078] = 1;
  return bytes;
}

/** The endpoints of {@link answerJson}: UDP and WebSocket, no WebTransport. */
export const ENDPOINTS = { udp: "127.0.0.1:7777", ws: "ws://game.test:8080/ws", wss: null };

/**
 * The matchmaking answer, as the server sends it, to a session's `n`th request (the token is
 * `token(n)`); `overrides` replaces top-level fields.
 */
export function answerJson(n: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    player_id: 42,
    name: "Ada",
    room: 3,
    kind: "arena",
    reconnect: n > 1,
    session: "session-of-42",
    token: Buffer.from(token(n)).toString("base64"),
    expires_at: 1_800_000_000,
    endpoints: ENDPOINTS,
    ...overrides,
  };
}

/**
 * A WebTransport session the test plays the server side of: the control stream and the
 * datagrams are real web streams (Node's), so the connection reads and writes them as it
 * would in a browser; the test pushes chunks, reads what was written, and settles the
 * `ready` and `closed` promises.
 */
export class FakeWebTransport implements WebTransportLike {
  static instances: FakeWebTransport[] = [];
  readonly ready: Promise<unknown>;
  readonly closed: Promise<{ closeCode?: number; reason?: string }>;
  readonly datagrams: {
    readable: ReadableStream<Uint8Array>;
    createWritable?: () => WritableStream<Uint8Array>;
    writable?: WritableStream<Uint8Array>;
    maxDatagramSize: number;
    outgoingHighWaterMark?: number;
  };
  /** What the client wrote on the control stream, chunk by chunk. */
  readonly streamWrites: Uint8Array[] = [];
  /** Datagrams the client sent. */
  readonly sentDatagrams: Uint8Array[] = [];
  /** The client finished its side of the control stream. */
  streamFinished = false;
  /** `close()`'s argument, once called. */
  closedWith: { closeCode?: number; reason?: string } | null = null;
  streamsOpened = 0;
  private readonly writes = new Waiters();
  private settleReady!: { resolve: (value: unknown) => void; reject: (error: unknown) => void };
  private settleClosed!: { resolve: (info: { closeCode?: number; reason?: string }) => void; reject: (error: unknown) => void };
  private toClient: ReadableStreamDefaultController<Uint8Array> | null = null;
  private datagramsToClient!: ReadableStreamDefaultController<Uint8Array>;

  constructor(
    readonly url: string,
    readonly options?: WebTransportOptionsLike,
  ) {
    FakeWebTransport.instances.push(this);
    this.ready = new Promise((resolve, reject) => (this.settleReady = { resolve, reject }));
    this.closed = new Promise((resolve, reject) => (this.settleClosed = { resolve, reject }));
    // As a browser's: a failed session rejects both; nobody may be listening to `ready`.
    this.ready.catch(() => {});
    this.closed.catch(() => {});
    this.datagrams = {
      readable: new ReadableStream<Uint8Array>({ start: (controller) => void (this.datagramsToClient = controller) }),
      // As Chromium: the current `createWritable()` and the older `writable` (tests remove either).
      createWritable: () => new WritableStream<Uint8Array>({ write: (chunk) => void this.sentDatagrams.push(chunk.slice()) }),
      writable: new WritableStream<Uint8Array>({ write: (chunk) => void this.sentDatagrams.push(chunk.slice()) }),
      maxDatagramSize: 1200,
      // Chromium's default.
      outgoingHighWaterMark: 1,
    };
  }

  static reset(): void {
    FakeWebTransport.instances = [];
  }

  static last(): FakeWebTransport {
    const session = FakeWebTransport.instances.at(-1);
    if (session === undefined) {
      throw new Error("no WebTransport was created");
    }
    return session;
  }

  createBidirectionalStream(): Promise<WebTransportStreamLike> {
    this.streamsOpened += 1;
    const readable = new ReadableStream<Uint8Array>({ start: (controller) => void (this.toClient = controller) });
    const writable = new WritableStream<Uint8Array>({
      write: (chunk) => {
        this.streamWrites.push(chunk.slice());
        this.writes.wake();
      },
      close: () => void (this.streamFinished = true),
    });
    return Promise.resolve({ readable, writable });
  }

  close(info?: { closeCode?: number; reason?: string }): void {
    this.closedWith = info ?? {};
    this.settleClosed.resolve(info ?? {});
  }

  // The server's side.
  accept(): void {
    this.settleReady.resolve(undefined);
  }

  /** The handshake fails: `ready` and `closed` reject, as when nothing answers or the certificate is refused. */
  fail(message = "WebTransportError: Opening handshake failed."): void {
    this.settleReady.reject(new Error(message));
    this.settleClosed.reject(new Error(message));
  }

  /** Bytes on the control stream, as one chunk (frames or parts of frames). */
  sendChunk(bytes: Uint8Array): void {
    if (this.toClient === null) {
      throw new Error("the client opened no control stream");
    }
    this.toClient.enqueue(bytes.slice());
  }

  /** Resolves once the client has written `count` whole frames on the control stream. */
  async framesCount(count: number): Promise<void> {
    await this.writes.until(`wrote ${count} frame(s) (it wrote ${this.framesFromClient().length})`, () => this.framesFromClient().length >= count);
  }

  /** Sends the challenge on the control stream (the client must have opened it) and resolves with the client's first frame. */
  async login(nonce: Uint8Array = NONCE): Promise<Uint8Array> {
    this.sendChunk(encodeFrame(nonce));
    await this.framesCount(1);
    return this.framesFromClient()[0]!;
  }

  /** The whole handshake: accept the session, challenge, the client's login, the parameters. Resolves with the login. */
  async handshake(accepted: Uint8Array = DEFAULT_ACCEPTED): Promise<Uint8Array> {
    this.accept();
    await settle();
    const login = await this.login();
    this.sendChunk(encodeFrame(accepted));
    await settle();
    return login;
  }

  /** The server finishes its side of the control stream. */
  finishStream(): void {
    this.toClient?.close();
  }

  sendDatagram(bytes: Uint8Array): void {
    this.datagramsToClient.enqueue(bytes.slice());
  }

  /** The session closes with a code (as the browser reports a CLOSE_WEBTRANSPORT_SESSION). */
  serverClose(closeCode: number, reason = ""): void {
    this.settleClosed.resolve({ closeCode, reason });
  }

  /** The frames the client wrote, bodies without their length prefixes (however the writes were chunked). */
  framesFromClient(): Uint8Array[] {
    const all = new Uint8Array(this.streamWrites.reduce((n, chunk) => n + chunk.length, 0));
    let at = 0;
    for (const chunk of this.streamWrites) {
      all.set(chunk, at);
      at += chunk.length;
    }
    const frames: Uint8Array[] = [];
    for (let i = 0; i + 4 <= all.length; ) {
      const length = new DataView(all.buffer, i, 4).getUint32(0, true);
      frames.push(all.slice(i + 4, i + 4 + length));
      i += 4 + length;
    }
    return frames;
  }
}

/** Lets promise chains and web streams settle (no time passes on a virtual clock). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
  await new Promise((resolve) => setImmediate(resolve));
}
