import { DecodeError, EncodeError, checkLayout } from "./errors.js";
import { bitsForSpan } from "./span.js";

/**
 * A quantization grid for `f32` values: `min..=max` in steps of `resolution`, sent as the
 * index of the nearest step. The arithmetic is `docs/PROTOCOL.md`'s "Quantized floats"
 * in doubles, so it gives the Rust steps and decoded values bit for bit.
 *
 * ```ts
 * const position = new Quantize(-512, 512, 0.01);
 * position.bits; // 17
 * ```
 */
export class Quantize {
  /** Smallest encodable value (the `min` given, rounded to the nearest `f32`). */
  readonly min: number;
  /** Largest encodable value (the `max` given, rounded to the nearest `f32`). */
  readonly max: number;
  /** Distance between neighbouring steps. */
  readonly resolution: number;
  /** Index of the top step: values map to `0..=lastStep`. */
  readonly lastStep: number;
  /** Bits each value takes on the wire, 0 to 33. */
  readonly bits: number;

  /** Throws a `RangeError` for a grid the Rust derive refuses to compile. */
  constructor(min: number, max: number, resolution: number) {
    // The grid's ends are f32 values, so the top step decodes to a value the range accepts.
    this.min = Math.fround(min);
    this.max = Math.fround(max);
    checkLayout(
      Number.isFinite(this.min) && Number.isFinite(this.max) && this.min < this.max,
      `quantize: min ${min} must be below max ${max} (as f32 values) and both finite`,
    );
    checkLayout(Number.isFinite(resolution) && resolution > 0, `quantize: resolution ${resolution} must be positive`);
    const maxAbs = Math.max(Math.abs(this.min), Math.abs(this.max));
    checkLayout(
      resolution >= maxAbs / 4_194_304,
      `quantize: resolution ${resolution} is finer than f32 precision at the range's ends`,
    );
    const span = (this.max - this.min) / resolution + 0.5;
    checkLayout(span <= 4_294_967_296, "quantize: more than 2^32 steps; use a coarser resolution");
    this.resolution = resolution;
    this.lastStep = Math.trunc(span);
    this.bits = bitsForSpan(this.lastStep);
  }

  /**
   * The step nearest to `value` (first rounded to an `f32`, as the Rust field holds one).
   * An {@link EncodeError} for NaN, infinities and values outside `min..=max`.
   */
  stepOf(value: number): number {
    const v = Math.fround(value);
    // Written so that NaN fails the test.
    if (!(v >= this.min && v <= this.max)) {
      throw new EncodeError(
        "float_out_of_range",
        `value ${v} outside quantization range ${this.min}..=${this.max}`,
      );
    }
    // Non-negative, so Math.round (half up) equals Rust's f64::round (half away from zero).
    return Math.min(Math.round((v - this.min) / this.resolution), this.lastStep);
  }

  /** The `f32` value a step stands for; a {@link DecodeError} for a step past the top. */
  valueAt(step: number): number {
    if (step > this.lastStep) {
      throw new DecodeError("out_of_range", `value ${step} outside range 0..=${this.lastStep}`);
    }
    // The top step may overshoot max by under half a step; the clamp keeps it re-encodable.
    return Math.fround(Math.min(this.min + step * this.resolution, this.max));
  }

  /** `value` as the receiver will see it: snapped to the grid and back. */
  snap(value: number): number {
    return this.valueAt(this.stepOf(value));
  }
}
