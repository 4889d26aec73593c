/**
 * The arena's messages (`crates/arena/src/messages.rs`, `docs/ARENA.md`), held byte for byte
 * to `crates/arena/tests/vectors/messages.json` and `input.json`:
 *
 * | channel | direction | message |
 * |---|---|---|
 * | 0 ({@link RELIABLE}) | client → server | {@link ClientMessage}: chat, ping |
 * | 0 | server → client | {@link ServerMessage}: welcome, events, chat, roster, scores |
 * | 1 ({@link INPUT}) | client → server | {@link ClientInput}: snapshot ack + the newest inputs |
 * | 2 ({@link SNAPSHOT}) | server → client | a snapshot (`arena/snapshot`) |
 *
 * Messages are plain objects tagged by `type`, the Rust variant's name.
 */

import { type Codec, type Infer, decode, encode, enumOf } from "@tickwire/client";

import { ClientMessageVariants, ServerMessageVariants } from "./generated/messages.js";
import { type InputCommand, InputCommandCodec } from "./input.js";

/** Channel of {@link ClientMessage} and {@link ServerMessage} (reliable). */
export const RELIABLE = 0;
/** Channel of {@link ClientInput} (unreliable). */
export const INPUT = 1;
/** Channel of snapshots (unreliable-sequenced). */
export const SNAPSHOT = 2;

/** The message set this SDK speaks; the welcome carries the server's. */
export const PROTOCOL_VERSION = 2;
/** Most inputs one {@link ClientInput} carries. */
export const MAX_INPUTS = 4;
/** Longest chat line, bytes of UTF-8. */
export const MAX_CHAT_BYTES = 160;
/** Longest announcement, bytes. */
export const MAX_ANNOUNCEMENT_BYTES = 512;
/** Longest map name, bytes. */
export const MAX_MAP_NAME_BYTES = 64;
/** Longest player name, bytes. */
export const MAX_NAME_BYTES = 32;
/** Most lines of one scoreboard. */
export const MAX_SCORES = 32;
/** The entity id that means "nobody" (a killer who has left). */
export const NO_ENTITY = 0xffff;

/** Channel 1, every tick: the newest snapshot decoded and the newest inputs. */
export interface ClientInput {
  /** Tick of the newest snapshot decoded (the server's delta baseline), or `null` before one. */
  ack: number | null;
  /** 1 to 4 commands, **newest first**; older ones repeat earlier packets' against loss. */
  inputs: InputCommand[];
}

/** `has_ack` (1), `ack` (32), the count − 1 (2 bits), then the commands. */
export const ClientInputCodec: Codec<ClientInput> = {
  minBits: 1 + 2 + InputCommandCodec.minBits,
  encode(writer, value) {
    writer.writeBool(value.ack !== null);
    if (value.ack !== null) {
      writer.writeUint(value.ack, 32);
    }
    writer.writeRange(value.inputs.length, 1, MAX_INPUTS);
    for (const input of value.inputs) {
      InputCommandCodec.encode(writer, input);
    }
  },
  decode(reader) {
    const ack = reader.readBool() ? reader.readUint(32) : null;
    const count = reader.readRange(1, MAX_INPUTS);
    const inputs: InputCommand[] = [];
    for (let i = 0; i < count; i++) {
      inputs.push(InputCommandCodec.decode(reader));
    }
    return { ack, inputs };
  },
  defaultValue: () => ({ ack: null, inputs: [] }),
};

/**
 * A flat, `type`-tagged view of an enum codec: `{ type: "Chat", text }` on the outside,
 * the variant index and the fields on the wire (`docs/PROTOCOL.md`, "Enums").
 */
type Flat<V extends Record<string, Codec<unknown>>> = {
  [K in keyof V & string]: { type: K } & Infer<V[K]>;
}[keyof V & string];

function flatEnum<V extends Record<string, Codec<Record<string, unknown>>>>(variants: V): Codec<Flat<V>> {
  const inner = enumOf(variants);
  return {
    minBits: inner.minBits,
    encode(writer, value) {
      const { type, ...fields } = value as { type: string } & Record<string, unknown>;
      inner.encode(writer, { tag: type, value: fields } as never);
    },
    decode(reader) {
      const { tag, value } = inner.decode(reader) as { tag: string; value: Record<string, unknown> };
      return { type: tag, ...value } as Flat<V>;
    },
    defaultValue() {
      const { tag, value } = inner.defaultValue() as { tag: string; value: Record<string, unknown> };
      return { type: tag, ...value } as Flat<V>;
    },
  };
}


// The layouts are generated from the Rust types (`generated/messages.ts`, `tickwire codegen
// ts`); this module gives them the SDK's shape, `{ type: "Chat", text }`. What each variant
// means is documented on the Rust enums (`crates/arena/src/messages.rs`) and in docs/ARENA.md.
const CLIENT_MESSAGES = ClientMessageVariants;

/** What a client sends on channel 0: `Chat { text }`, `Ping { nonce }`. */
export type ClientMessage = Flat<typeof CLIENT_MESSAGES>;
/** Its layout: the variant index in 1 bit, then its fields. */
export const ClientMessageCodec: Codec<ClientMessage> = flatEnum(CLIENT_MESSAGES);

/** One line of the scoreboard. */
export interface Score {
  /** Entity id. */
  id: number;
  kills: number;
  deaths: number;
  score: number;
}

/**
 * The server's messages: `Welcome` (who you are, and the constants snapshots depend on),
 * `Kill`, `Hit`, `Respawn`, `Teleported`, `Chat`, `Announcement`, `Pong`, `Player` (the
 * roster), `Left` and `Scores` (best first).
 */
const SERVER_MESSAGES = ServerMessageVariants;

/** What the server sends on channel 0; `type` is the variant (see `docs/ARENA.md`). */
export type ServerMessage = Flat<typeof SERVER_MESSAGES>;
/** One variant of {@link ServerMessage} by name: `ServerMessageOf<"Welcome">`. */
export type ServerMessageOf<T extends ServerMessage["type"]> = Extract<ServerMessage, { type: T }>;
/** The welcome: everything a client needs to decode snapshots and predict movement. */
export type Welcome = ServerMessageOf<"Welcome">;
/** Its layout: the variant index in 4 bits, then its fields. */
export const ServerMessageCodec: Codec<ServerMessage> = flatEnum(SERVER_MESSAGES);

/** Encodes a {@link ClientInput}; an `EncodeError` for values off the grids or a count outside 1..=4. */
export function encodeClientInput(input: ClientInput): Uint8Array {
  return encode(ClientInputCodec, input);
}

/** Decodes a {@link ClientInput}; a `DecodeError` for anything else. */
export function decodeClientInput(bytes: Uint8Array): ClientInput {
  return decode(ClientInputCodec, bytes);
}

/** Encodes a {@link ClientMessage}; an `EncodeError` for a chat line past 160 bytes. */
export function encodeClientMessage(message: ClientMessage): Uint8Array {
  return encode(ClientMessageCodec, message);
}

/** Decodes a {@link ClientMessage}; a `DecodeError` for anything else. */
export function decodeClientMessage(bytes: Uint8Array): ClientMessage {
  return decode(ClientMessageCodec, bytes);
}

/** Encodes a {@link ServerMessage} (servers and tests). */
export function encodeServerMessage(message: ServerMessage): Uint8Array {
  return encode(ServerMessageCodec, message);
}

/** Decodes a {@link ServerMessage}; a `DecodeError` (never anything else) for bytes that are not one. */
export function decodeServerMessage(bytes: Uint8Array): ServerMessage {
  return decode(ServerMessageCodec, bytes);
}

/** `text` cut to at most `maxBytes` of UTF-8 at a character boundary (what the server does to long text). */
export function truncateUtf8(text: string, maxBytes: number): string {
  const encoder = new TextEncoder();
  if (encoder.encode(text).length <= maxBytes) {
    return text;
  }
  let out = "";
  let used = 0;
  for (const char of text) {
    const size = encoder.encode(char).length;
    if (used + size > maxBytes) {
      break;
    }
    out += char;
    used += size;
  }
  return out;
}
