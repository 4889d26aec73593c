// A virtual clock, a fake WebSocket and a fake WebTransport: the transports and the reconnecting client are
// driven by these, with no real sockets and no sleeps.
import type { Clock } from "../src/transport/timers.js";
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

  serverClose(code: number, reason = ""): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

/** The default accepted message of docs/PROTOCOL.md: 60 Hz, 100 ms, 10 s, MTU 1200, 256 KiB, 3 channels. */
export const DEFAULT_ACCEPTED = new Uint8Array([
  0x3c, 0x64, 0x00, 0x10, 0x27, 0x00, 0x00, 0xb0, 0x04, 0x00, 0x00, 0x04, 0x00, 0x03, 0x00, 0x01, 0x02,
]);

/** A 2048-byte token whose bytes say which one it is. */
export function token(n: number): Uint8Array {
  const bytes = new Uint8Array(2048);
  bytes.fill(n);
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
      write: (chunk) => void this.streamWrites.push(chunk.slice()),
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
