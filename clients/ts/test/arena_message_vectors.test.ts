// crates/arena/tests/vectors/messages.json (every ClientMessage and ServerMessage variant)
// and input.json's ClientInput vectors, written by the server's own encoders: the
// TypeScript codecs must produce the same bytes and decode them to the same values.
import { describe, expect, it } from "vitest";

import {
  type ClientMessage,
  PROTOCOL_VERSION,
  type ServerMessage,
  decodeClientInput,
  decodeClientMessage,
  decodeServerMessage,
  encodeClientInput,
  encodeClientMessage,
  encodeServerMessage,
} from "../arena/src/messages.js";
import { DecodeError } from "../src/wire/index.js";
import { f32Bits, f32FromBits } from "./f32.js";
import { fromHex, readRepoJson, toHex } from "./vectors.js";

type Json = Record<string, unknown>;
interface MessageFile {
  protocol: number;
  client_messages: { name: string; message: Json; hex: string }[];
  server_messages: { name: string; message: Json; hex: string }[];
}
interface CommandBits {
  sequence: number;
  move_x_bits: number;
  move_y_bits: number;
  aim_bits: number;
  buttons: number;
}
interface InputFile {
  client_inputs: { name: string; ack: number | null; inputs: CommandBits[]; hex: string }[];
}

const messages = readRepoJson<MessageFile>("crates/arena/tests/vectors/messages.json");
const inputs = readRepoJson<InputFile>("crates/arena/tests/vectors/input.json");

const camel = (key: string): string => key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** The file's JSON (snake_case, floats as `*_bits`, scores as tuples) as an SDK message. */
function fromJson(json: Json): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(json)) {
    if (key.endsWith("_bits")) {
      out[camel(key.slice(0, -5))] = f32FromBits(value as number);
    } else if (key === "scores") {
      out.scores = (value as number[][]).map(([id, kills, deaths, score]) => ({ id, kills, deaths, score }));
    } else {
      out[camel(key)] = value;
    }
  }
  return out;
}

/** The reverse: an SDK message in the file's JSON shape. */
function toJson(message: Json, floats: readonly string[]): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(message)) {
    const snake = key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    if (floats.includes(key)) {
      out[`${snake}_bits`] = f32Bits(value as number);
    } else if (key === "scores") {
      out.scores = (value as { id: number; kills: number; deaths: number; score: number }[]).map((s) => [
        s.id,
        s.kills,
        s.deaths,
        s.score,
      ]);
    } else {
      out[snake] = value;
    }
  }
  return out;
}

const FLOATS = ["mapWidth", "mapHeight", "maxSpeed", "playerRadius", "x", "y"];

describe("messages.json", () => {
  it("is the protocol this SDK speaks", () => {
    expect(messages.protocol).toBe(PROTOCOL_VERSION);
  });

  it.each(messages.client_messages.map((v) => [v.name, v] as const))("client %s", (_name, vector) => {
    const message = fromJson(vector.message) as ClientMessage;
    expect(toHex(encodeClientMessage(message))).toBe(vector.hex);
    expect(decodeClientMessage(fromHex(vector.hex))).toEqual(message);
  });

  it.each(messages.server_messages.map((v) => [v.name, v] as const))("server %s", (_name, vector) => {
    const message = fromJson(vector.message) as ServerMessage;
    expect(toHex(encodeServerMessage(message))).toBe(vector.hex);
    const decoded = decodeServerMessage(fromHex(vector.hex));
    expect(toJson(decoded as unknown as Json, FLOATS)).toEqual(vector.message);
  });

  it("covers every server variant", () => {
    const types = new Set(messages.server_messages.map((v) => v.message.type));
    expect(types.size).toBe(11);
  });

  it("refuses truncated and padded server messages with a DecodeError only", () => {
    for (const vector of messages.server_messages) {
      const bytes = fromHex(vector.hex);
      for (let len = 0; len < bytes.length; len++) {
        expect(() => decodeServerMessage(bytes.subarray(0, len))).toThrow(DecodeError);
      }
      const longer = new Uint8Array(bytes.length + 1);
      longer.set(bytes);
      expect(() => decodeServerMessage(longer)).toThrow(DecodeError);
    }
    // Variant indexes 11 to 15 do not exist.
    expect(() => decodeServerMessage(Uint8Array.of(0x0b))).toThrow(DecodeError);
  });
});

describe("input.json client_inputs", () => {
  it.each(inputs.client_inputs.map((v) => [v.name, v] as const))("%s", (_name, vector) => {
    const message = {
      ack: vector.ack,
      inputs: vector.inputs.map((c) => ({
        sequence: c.sequence,
        moveX: f32FromBits(c.move_x_bits),
        moveY: f32FromBits(c.move_y_bits),
        aim: f32FromBits(c.aim_bits),
        buttons: c.buttons,
      })),
    };
    expect(toHex(encodeClientInput(message))).toBe(vector.hex);
    expect(decodeClientInput(fromHex(vector.hex))).toEqual(message);
  });

  it("refuses an empty or overfull input", () => {
    const command = { sequence: 1, moveX: 0, moveY: 0, aim: 0, buttons: 0 };
    expect(() => encodeClientInput({ ack: null, inputs: [] })).toThrow();
    expect(() => encodeClientInput({ ack: null, inputs: Array(5).fill(command) })).toThrow();
  });
});
