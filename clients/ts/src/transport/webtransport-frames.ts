/**
 * The bytes of the WebTransport transport (`docs/PROTOCOL.md`, "WebTransport transport"),
 * apart from any session: the control stream's length-prefixed frames, the CLOSE frame,
 * and the datagrams of the unreliable channels with their sequence numbers. Pure functions
 * and one small reassembly buffer, so every rule is tested without a browser.
 *
 * | piece | bytes |
 * |---|---|
 * | frame | u32 LE length L (1 to the limit), then L bytes |
 * | DATA frame body | channel id u8, message |
 * | CLOSE frame body | 0xff, u16 LE code, UTF-8 reason (at most 123 bytes) |
 * | unreliable datagram | channel id u8, message |
 * | unreliable-sequenced datagram | channel id u8, u16 LE sequence, message |
 */

import { LOGIN_BYTES } from "./login.js";
import type { ChannelKind } from "./params.js";

/** The first byte of a CLOSE frame's body: never a channel id (at most 32 channels). */
export const CLOSE_FRAME_TAG = 0xff;
/** The length prefix of a frame, bytes. */
export const FRAME_HEADER_BYTES = 4;
/** Longest close reason, bytes (what fits a WebSocket close frame). */
export const MAX_CLOSE_REASON_BYTES = 123;
/** The smallest frame limit: the login must fit before the parameters are known. */
export const MIN_FRAME_LIMIT = LOGIN_BYTES;

/** The longest frame body allowed on a session whose largest message is `maxMessageSize`. */
export function frameLimit(maxMessageSize: number): number {
  return Math.max(MIN_FRAME_LIMIT, maxMessageSize + 1);
}

/** One frame: the length prefix, then `body`. */
export function encodeFrame(body: Uint8Array): Uint8Array {
  const frame = new Uint8Array(FRAME_HEADER_BYTES + body.length);
  new DataView(frame.buffer).setUint32(0, body.length, true);
  frame.set(body, FRAME_HEADER_BYTES);
  return frame;
}

/** A DATA frame, prefix included: `message` on `channel`. */
export function encodeDataFrame(channel: number, message: Uint8Array): Uint8Array {
  const frame = new Uint8Array(FRAME_HEADER_BYTES + 1 + message.length);
  new DataView(frame.buffer).setUint32(0, 1 + message.length, true);
  frame[FRAME_HEADER_BYTES] = channel;
  frame.set(message, FRAME_HEADER_BYTES + 1);
  return frame;
}

/** A CLOSE frame, prefix included; the reason is cut to 123 bytes on a character boundary. */
export function encodeCloseFrame(code: number, reason: string): Uint8Array {
  const text = utf8Prefix(reason, MAX_CLOSE_REASON_BYTES);
  const body = new Uint8Array(3 + text.length);
  body[0] = CLOSE_FRAME_TAG;
  new DataView(body.buffer).setUint16(1, code, true);
  body.set(text, 3);
  return encodeFrame(body);
}

/** A CLOSE frame's contents. */
export interface CloseFrame {
  code: number;
  reason: string;
}

/**
 * Reads the body of a CLOSE frame (tag included), or `null` if it is not one: too short, or
 * a reason that is too long or not UTF-8.
 */
export function parseCloseFrame(body: Uint8Array): CloseFrame | null {
  if (body.length < 3 || body[0] !== CLOSE_FRAME_TAG || body.length - 3 > MAX_CLOSE_REASON_BYTES) {
    return null;
  }
  const code = new DataView(body.buffer, body.byteOffset, body.byteLength).getUint16(1, true);
  try {
    return { code, reason: new TextDecoder("utf-8", { fatal: true }).decode(body.subarray(3)) };
  } catch {
    return null;
  }
}

/** Why a {@link FrameReader} stopped. */
export type FrameError = { kind: "empty" } | { kind: "too_large"; length: number; limit: number };

/**
 * Cuts the control stream's bytes into frames, however the stream chunks them: a frame split
 * over many chunks, or many frames in one. A length prefix of 0 or past the limit is an error
 * from the prefix alone, before any of the body is buffered, and the reader stays failed.
 */
export class FrameReader {
  private limitValue: number;
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  private errorValue: FrameError | null = null;

  constructor(limit: number = MIN_FRAME_LIMIT) {
    this.limitValue = limit;
  }

  /** The longest frame body accepted. */
  get limit(): number {
    return this.limitValue;
  }

  /** Raises (or lowers) the limit, once the connection parameters are known. */
  set limit(limit: number) {
    this.limitValue = limit;
  }

  /** Bytes held, waiting for the rest of a frame. */
  get pending(): number {
    return this.buffered;
  }

  /** The error that stopped the reader, or `null`. */
  get error(): FrameError | null {
    return this.errorValue;
  }

  /**
   * Takes a chunk of the stream and returns the frame bodies it completes, in order (views
   * that stay valid). After an error it returns nothing more; check {@link error}.
   */
  push(chunk: Uint8Array): Uint8Array[] {
    if (this.errorValue !== null || chunk.length === 0) {
      return [];
    }
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Uint8Array[] = [];
    for (;;) {
      if (this.buffered < FRAME_HEADER_BYTES) {
        return frames;
      }
      const length = new DataView(this.peek(FRAME_HEADER_BYTES).buffer).getUint32(0, true);
      if (length === 0) {
        this.fail({ kind: "empty" });
        return frames;
      }
      if (length > this.limitValue) {
        this.fail({ kind: "too_large", length, limit: this.limitValue });
        return frames;
      }
      if (this.buffered < FRAME_HEADER_BYTES + length) {
        return frames;
      }
      this.take(FRAME_HEADER_BYTES);
      frames.push(this.take(length));
    }
  }

  private fail(error: FrameError): void {
    this.errorValue = error;
    this.chunks = [];
    this.buffered = 0;
  }

  /** The first `n` buffered bytes (n <= buffered), copied only when they span chunks. */
  private peek(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length >= n) {
      return first.slice(0, n);
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const chunk of this.chunks) {
      const part = chunk.subarray(0, n - at);
      out.set(part, at);
      at += part.length;
      if (at === n) {
        break;
      }
    }
    return out;
  }

  /** Removes and returns the first `n` buffered bytes (n <= buffered). */
  private take(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) {
        this.chunks.shift();
      } else {
        this.chunks[0] = first.subarray(n);
      }
      this.buffered -= n;
      return out;
    }
    const out = new Uint8Array(n);
    let at = 0;
    while (at < n) {
      const chunk = this.chunks[0]!;
      const part = chunk.subarray(0, n - at);
      out.set(part, at);
      at += part.length;
      if (part.length === chunk.length) {
        this.chunks.shift();
      } else {
        this.chunks[0] = chunk.subarray(part.length);
      }
    }
    this.buffered -= n;
    return out;
  }
}

/** Bytes before the message in a datagram of a channel of this kind. */
export function datagramHeaderBytes(kind: ChannelKind): number {
  return kind === "unreliable_sequenced" ? 3 : 1;
}

/** A datagram: the channel id, the sequence for a sequenced channel, then the message. */
export function encodeDatagram(channel: number, sequence: number | null, message: Uint8Array): Uint8Array {
  const header = sequence === null ? 1 : 3;
  const datagram = new Uint8Array(header + message.length);
  datagram[0] = channel;
  if (sequence !== null) {
    new DataView(datagram.buffer).setUint16(1, sequence & 0xffff, true);
  }
  datagram.set(message, header);
  return datagram;
}

/** What a received datagram holds, or why it is dropped. */
export type ParsedDatagram =
  | { ok: true; channel: number; sequence: number | null; message: Uint8Array }
  | { ok: false; why: "empty" | "unknown_channel" | "reliable_channel" | "short" | "too_large" };

/**
 * Reads a datagram against the session's channels; a datagram that cannot be one (empty, an
 * unknown or reliable channel, a sequenced one without its sequence, a message past the
 * limit) is reported, to be counted and dropped: datagrams are never a reason to close.
 */
export function parseDatagram(datagram: Uint8Array, channels: readonly ChannelKind[], maxMessageSize: number): ParsedDatagram {
  const channel = datagram[0];
  if (channel === undefined) {
    return { ok: false, why: "empty" };
  }
  const kind = channels[channel];
  if (kind === undefined) {
    return { ok: false, why: "unknown_channel" };
  }
  if (kind === "reliable") {
    return { ok: false, why: "reliable_channel" };
  }
  const header = datagramHeaderBytes(kind);
  if (datagram.length < header) {
    return { ok: false, why: "short" };
  }
  if (datagram.length - header > maxMessageSize) {
    return { ok: false, why: "too_large" };
  }
  const sequence = header === 3 ? datagram[1]! | (datagram[2]! << 8) : null;
  return { ok: true, channel, sequence, message: datagram.subarray(header) };
}

/** Whether `sequence` is newer than `last` on a wrapping u16 counter: `(sequence - last) mod 2^16` in 1..=32767. */
export function sequenceNewer16(sequence: number, last: number): boolean {
  const ahead = (sequence - last) & 0xffff;
  return ahead >= 1 && ahead <= 0x7fff;
}

/**
 * The newest sequence seen per unreliable-sequenced channel: a datagram not newer than it is
 * stale (late or duplicated) and dropped. The first datagram of a channel is always taken.
 */
export class SequenceFilter {
  private readonly newest = new Map<number, number>();

  /** True to deliver (and remember `sequence` as the newest), false to drop. */
  accept(channel: number, sequence: number): boolean {
    const last = this.newest.get(channel);
    if (last !== undefined && !sequenceNewer16(sequence, last)) {
      return false;
    }
    this.newest.set(channel, sequence);
    return true;
  }
}

const encoder = new TextEncoder();

/** The UTF-8 of `text`, cut to at most `max` bytes without splitting a character. */
export function utf8Prefix(text: string, max: number): Uint8Array {
  const bytes = encoder.encode(text);
  if (bytes.length <= max) {
    return bytes;
  }
  let end = max;
  // Back off continuation bytes (10xxxxxx) so the cut falls between characters.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) {
    end -= 1;
  }
  return bytes.subarray(0, end);
}
