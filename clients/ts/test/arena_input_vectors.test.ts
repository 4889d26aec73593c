// crates/arena/tests/vectors/input.json, written by the Rust server's own encoder
// (crates/arena/tests/input_vectors.rs): the TypeScript input encoding must produce the same
// bytes, and decode them to the same snapped f32 values.
import { describe, expect, it } from "vitest";

import { decodeInput, encodeInput, type InputCommand } from "../arena/src/input.js";
import { f32Bits } from "./f32.js";
import { fromHex, readRepoJson } from "./vectors.js";

interface CommandBits {
  sequence: number;
  move_x_bits: number;
  move_y_bits: number;
  aim_bits: number;
  buttons: number;
}
interface CommandVector {
  name: string;
  given: { sequence: number; move_x: number; move_y: number; aim: number; buttons: number };
  hex: string;
  decoded: CommandBits;
}
interface InputFile {
  commands: CommandVector[];
}

const file = readRepoJson<InputFile>("crates/arena/tests/vectors/input.json");

function bits(command: InputCommand): CommandBits {
  return {
    sequence: command.sequence,
    move_x_bits: f32Bits(command.moveX),
    move_y_bits: f32Bits(command.moveY),
    aim_bits: f32Bits(command.aim),
    buttons: command.buttons,
  };
}

function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

describe("input.json", () => {
  it("holds the server's cases", () => {
    expect(file.commands.length).toBeGreaterThanOrEqual(7);
  });

  it.each(file.commands.map((v) => [v.name, v] as const))("%s encodes and decodes as the server's", (_name, vector) => {
    const given: InputCommand = {
      sequence: vector.given.sequence,
      moveX: vector.given.move_x,
      moveY: vector.given.move_y,
      aim: vector.given.aim,
      buttons: vector.given.buttons,
    };
    expect(toHex(encodeInput(given))).toBe(vector.hex);
    expect(bits(decodeInput(fromHex(vector.hex)))).toEqual(vector.decoded);
  });
});
