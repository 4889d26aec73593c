// The codecs `tickwire codegen ts` generates from the arena's Rust types
// (arena/src/generated/messages.ts, kept current by a Rust test) against the server's own
// golden vectors: every vector decodes, re-encodes to the same bytes, and decodes to the
// same message as the SDK's `{ type, ...fields }` view of them; and the generated input
// grids are the ones prediction snaps inputs to (MOVE_GRID, AIM_GRID).
import { describe, expect, it } from "vitest";

import { AIM_GRID, MOVE_GRID, decodeInput } from "../arena/src/input.js";
import { decodeClientMessage, decodeServerMessage } from "../arena/src/messages.js";
import {
  ClientMessageCodec,
  InputCommandCodec as GeneratedInputCommandCodec,
  ServerMessageCodec,
} from "../arena/src/generated/messages.js";
import { type Codec, DecodeError, decode, encode, quantized, struct, uint } from "../src/wire/index.js";
import { fromHex, readRepoJson, toHex } from "./vectors.js";

interface Vector {
  name: string;
  hex: string;
}
const messages = readRepoJson<{ client_messages: Vector[]; server_messages: Vector[] }>("crates/arena/tests/vectors/messages.json");
const inputs = readRepoJson<{ commands: Vector[] }>("crates/arena/tests/vectors/input.json");

/** A generated enum value as the hand-written codecs shape it: `{ type, ...fields }`. */
function flatten(value: { tag: string; value: unknown }): unknown {
  return { type: value.tag, ...(value.value as object) };
}

function roundTrip<T>(codec: Codec<T>, hex: string): T {
  const value = decode(codec, fromHex(hex));
  expect(toHex(encode(codec, value))).toBe(hex);
  return value;
}

describe("generated arena codecs", () => {
  it.each(messages.client_messages)("client message $name", ({ hex }) => {
    const value = roundTrip(ClientMessageCodec, hex);
    expect(flatten(value)).toEqual(decodeClientMessage(fromHex(hex)));
  });

  it.each(messages.server_messages)("server message $name", ({ hex }) => {
    const value = roundTrip(ServerMessageCodec, hex);
    expect(flatten(value)).toEqual(decodeServerMessage(fromHex(hex)));
  });

  it.each(inputs.commands)("input command $name", ({ hex }) => {
    const value = roundTrip(GeneratedInputCommandCodec, hex);
    expect(value).toEqual(decodeInput(fromHex(hex)));
  });

  it("snaps inputs to the grids prediction uses", () => {
    const onPredictionGrids = struct({
      sequence: uint(16),
      moveX: quantized(MOVE_GRID),
      moveY: quantized(MOVE_GRID),
      aim: quantized(AIM_GRID),
      buttons: uint(4),
    });
    expect(GeneratedInputCommandCodec.minBits).toBe(onPredictionGrids.minBits);
    for (let i = 0; i < 200; i++) {
      const command = { sequence: (i * 331) & 0xffff, moveX: (i % 129) / 64 - 1, moveY: 1 - (i % 97) / 48, aim: (i / 200) * 6 - 3, buttons: i % 16 };
      expect(toHex(encode(GeneratedInputCommandCodec, command))).toBe(toHex(encode(onPredictionGrids, command)));
    }
  });

  it("refuses what the server refuses", () => {
    // A variant index past the last (ClientMessage has 2: one bit, so none), a string
    // longer than its bound.
    expect(() => decode(ServerMessageCodec, fromHex("ff"))).toThrow(DecodeError);
    expect(() => encode(ClientMessageCodec, { tag: "Chat", value: { text: "x".repeat(161) } })).toThrow();
  });
});
