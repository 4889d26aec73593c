/**
 * The arena's client input, ported from `crates/arena/src/input.rs`: an {@link InputCommand}
 * per tick (intent, never state), 46 bits on the wire, and the wrapping `u16` sequence
 * comparison the server and the client share.
 */

import { type Codec, Quantize, decode, encode } from "@tickwire/client";

import { InputCommandCodec as GeneratedInputCommandCodec } from "./generated/messages.js";

/** Resolution of the movement components on the wire: 1/64, 8 bits for `-1..=1`. */
export const MOVE_RESOLUTION = 1 / 64;
/** Resolution of the aim angle: 1023 steps around the circle (10 bits). */
export const AIM_RESOLUTION = (2 * Math.PI) / 1023;
/** The largest aim angle (and minus the smallest): π rounded to `f32`. */
export const AIM_LIMIT = Math.fround(Math.PI);
/** Button bit: fire. */
export const FIRE = 1;
/** Button bit: warp through the nearest teleport pad, from anywhere, once its cooldown allows. */
export const WARP = 2;
/** Every defined button bit. */
export const BUTTONS = FIRE | WARP;

/** The grid of `move_x` and `move_y`. */
export const MOVE_GRID = new Quantize(-1, 1, MOVE_RESOLUTION);
/** The grid of `aim`: `-π..=π` as declared in Rust (`std::f64::consts::PI`), ends rounded to `f32`. */
export const AIM_GRID = new Quantize(-Math.PI, Math.PI, AIM_RESOLUTION);

/** One client input, sent every tick. */
export interface InputCommand {
  /** Increments by one per command, wrapping at 2^16. */
  sequence: number;
  /** Rightward intent in `-1..=1`; `(moveX, moveY)` longer than 1 counts as 1. */
  moveX: number;
  /** Downward intent in `-1..=1`. */
  moveY: number;
  /** Where the player aims: radians from `+x` towards `+y`, in `-π..=π`. */
  aim: number;
  /** Buttons held, one bit each ({@link FIRE}, {@link WARP}); 4 bits on the wire. */
  buttons: number;
}

/**
 * The wire layout: `u16` sequence, two 8-bit movement steps on {@link MOVE_GRID}, a 10-bit
 * aim step on {@link AIM_GRID}, 4 button bits; generated from the Rust type
 * (`generated/messages.ts`, `tickwire codegen ts`).
 */
export const InputCommandCodec: Codec<InputCommand> = GeneratedInputCommandCodec;

/** Encodes a command into its 6 bytes; an `EncodeError` for values outside the grids. */
export function encodeInput(command: InputCommand): Uint8Array {
  return encode(InputCommandCodec, command);
}

/** Decodes a command's bytes; a `DecodeError` for anything else. */
export function decodeInput(bytes: Uint8Array): InputCommand {
  return decode(InputCommandCodec, bytes);
}

/**
 * The command as the server will see it: every float snapped to its wire grid. Prediction
 * must step with these values, not the raw ones, or it drifts from the server.
 */
export function quantizeInput(command: InputCommand): InputCommand {
  return {
    sequence: command.sequence,
    moveX: MOVE_GRID.snap(command.moveX),
    moveY: MOVE_GRID.snap(command.moveY),
    aim: AIM_GRID.snap(command.aim),
    buttons: command.buttons,
  };
}

/** Why a command would be refused by the server's `InputCommand::validate`; `null` if it is fine. */
export function validateInput(command: InputCommand): string | null {
  const checks: [string, number, number][] = [
    ["moveX", command.moveX, 1],
    ["moveY", command.moveY, 1],
    ["aim", command.aim, AIM_LIMIT],
  ];
  for (const [field, raw, limit] of checks) {
    const value = Math.fround(raw);
    if (!Number.isFinite(value)) {
      return `input ${field} is ${value}, not a finite number`;
    }
    if (value < -limit || value > limit) {
      return `input ${field} ${value} is outside ${-limit}..=${limit}`;
    }
  }
  if (!Number.isInteger(command.buttons) || (command.buttons & ~BUTTONS) !== 0 || command.buttons < 0) {
    return `input buttons ${command.buttons} set undefined bits`;
  }
  return null;
}

/** Whether `u16` sequence `a` comes after `b`, across wrap-around (RFC 1982). */
export function sequenceNewer(a: number, b: number): boolean {
  const ahead = (a - b) & 0xffff;
  return ahead !== 0 && ahead < 0x8000;
}

/** The sequence after `sequence`, wrapping from 65535 to 0. */
export function nextSequence(sequence: number): number {
  return (sequence + 1) & 0xffff;
}
