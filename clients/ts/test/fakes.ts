// A virtual clock and a fake WebSocket: the transport and the reconnecting client are
// driven by these, with no real sockets and no sleeps.
import type { Clock } from "../src/transport/timers.js";
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
