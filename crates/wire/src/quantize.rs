//! Quantized floats: a value in `min..=max` sent as its step on a grid of `resolution`.
//!
//! The arithmetic is done in `f64` and specified in `docs/PROTOCOL.md`, so an
//! implementation in a language whose numbers are doubles (TypeScript) gets the same
//! steps and the same decoded values bit for bit.

use crate::error::{DecodeError, DecodeErrorKind, EncodeError, EncodeErrorKind};
use crate::writer::bits_for_span;

/// A quantization grid for `f32` values: `min`, `max` and the distance between steps.
///
/// Built with the `const fn` [`Quantize::new`], which rejects a grid that cannot round-trip
/// at compile time when used in a `const` (as the derive does).
///
/// ```
/// use tickwire_wire::Quantize;
///
/// const POSITION: Quantize = Quantize::new(-512.0, 512.0, 0.01);
/// assert_eq!(POSITION.bits(), 17); // 102,400 steps
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantize {
    min: f64,
    max: f64,
    resolution: f64,
    /// Index of the last step: values map to `0..=steps`.
    steps: u64,
    bits: u32,
}

impl Quantize {
    /// A grid from `min` to `max` with steps `resolution` apart. The ends are rounded to
    /// the nearest `f32` first, so every decoded value re-encodes to its own step.
    ///
    /// Panics (at compile time in a `const`) unless `min < max`, `resolution > 0`, the grid
    /// has at most 2^32 steps, and `resolution` is coarse enough that a decoded `f32`
    /// re-quantizes to the same step (`resolution >= max(|min|, |max|) / 2^22`).
    pub const fn new(min: f64, max: f64, resolution: f64) -> Self {
        // The grid's ends are the nearest f32 values to the bounds given: a bound such as
        // 0.1 that an f32 cannot hold would otherwise decode (as 0.1f32, slightly above
        // 0.1) to a value its own range refuses.
        let min = min as f32 as f64;
        let max = max as f32 as f64;
        assert!(
            min.is_finite() && max.is_finite() && min < max,
            "quantize: min must be below max (as f32 values) and both finite"
        );
        assert!(
            resolution.is_finite() && resolution > 0.0,
            "quantize: resolution must be positive"
        );
        let max_abs = if min.abs() > max.abs() {
            min.abs()
        } else {
            max.abs()
        };
        assert!(
            resolution >= max_abs / 4_194_304.0,
            "quantize: resolution is finer than f32 precision at the range's ends"
        );
        let span = (max - min) / resolution + 0.5;
        assert!(
            span <= 4_294_967_296.0,
            "quantize: more than 2^32 steps; use a coarser resolution"
        );
        let steps = span as u64;
        Self {
            min,
            max,
            resolution,
            steps,
            bits: bits_for_span(steps),
        }
    }

    /// Smallest encodable value.
    pub const fn min(&self) -> f64 {
        self.min
    }

    /// Largest encodable value.
    pub const fn max(&self) -> f64 {
        self.max
    }

    /// Distance between neighbouring steps.
    pub const fn resolution(&self) -> f64 {
        self.resolution
    }

    /// Bits each value takes on the wire.
    pub const fn bits(&self) -> u32 {
        self.bits
    }

    /// Index of the top step (values map to `0..=last_step()`).
    pub const fn last_step(&self) -> u64 {
        self.steps
    }

    /// The step nearest to `value`; an error for NaN, infinities and values outside
    /// `min..=max`.
    #[inline]
    pub fn step_of(&self, value: f32) -> Result<u64, EncodeError> {
        let value = f64::from(value);
        // Written so that NaN fails the test.
        if !(value >= self.min && value <= self.max) {
            return Err(EncodeErrorKind::FloatOutOfRange {
                value,
                min: self.min,
                max: self.max,
            }
            .into());
        }
        // Non-negative, so `round` (half away from zero) equals JavaScript's `Math.round`.
        let step = ((value - self.min) / self.resolution).round() as u64;
        Ok(step.min(self.steps))
    }

    /// The value a step stands for; an error for a step past the top of the grid.
    #[inline]
    pub fn value_of(&self, step: u64) -> Result<f32, DecodeError> {
        if step > self.steps {
            return Err(DecodeErrorKind::OutOfRange {
                value: i128::from(step),
                min: 0,
                max: i128::from(self.steps),
            }
            .into());
        }
        // The top step may overshoot `max` by under half a step when the range is not a
        // whole number of steps; clamping keeps every decoded value re-encodable.
        let value = (self.min + step as f64 * self.resolution).min(self.max);
        Ok(value as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_size_and_width() {
        let q = Quantize::new(0.0, 1.0, 0.25);
        assert_eq!(q.last_step(), 4);
        assert_eq!(q.bits(), 3);
        let q = Quantize::new(-100.0, 100.0, 0.01);
        assert_eq!(q.last_step(), 20_000);
        assert_eq!(q.bits(), 15);
    }

    #[test]
    fn values_snap_to_the_nearest_step() {
        let q = Quantize::new(0.0, 1.0, 0.25);
        assert_eq!(q.step_of(0.1).unwrap(), 0);
        assert_eq!(q.step_of(0.125).unwrap(), 1, "halfway rounds up");
        assert_eq!(q.step_of(0.9).unwrap(), 4);
        assert_eq!(q.value_of(3).unwrap(), 0.75);
    }

    #[test]
    fn a_range_that_is_not_whole_steps_clamps_at_the_top() {
        let q = Quantize::new(0.0, 1.0, 0.3);
        assert_eq!(q.last_step(), 3);
        assert_eq!(q.value_of(3).unwrap(), 0.9);
        let q = Quantize::new(0.0, 1.0, 0.4);
        assert_eq!(q.last_step(), 3);
        assert_eq!(q.value_of(3).unwrap(), 1.0, "1.2 is clamped to max");
        assert_eq!(q.step_of(1.0).unwrap(), 3);
    }

    #[test]
    fn bounds_an_f32_cannot_hold_still_round_trip() {
        let q = Quantize::new(-0.1, 0.1, 0.001);
        assert_eq!(q.min(), f64::from(-0.1f32));
        assert_eq!(q.max(), f64::from(0.1f32));
        for value in [-0.1f32, 0.1, 0.05] {
            let step = q.step_of(value).unwrap();
            let decoded = q.value_of(step).unwrap();
            assert_eq!(q.step_of(decoded).unwrap(), step, "{value} re-encodes");
        }
        assert_eq!(q.value_of(q.last_step()).unwrap(), 0.1f32);
    }

    #[test]
    fn nan_infinities_and_outsiders_are_refused() {
        let q = Quantize::new(-1.0, 1.0, 0.5);
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.01, -1.01] {
            let error = q.step_of(bad).unwrap_err();
            assert!(
                matches!(error.kind, EncodeErrorKind::FloatOutOfRange { .. }),
                "{bad} gave {error}"
            );
        }
        assert!(q.value_of(5).is_err(), "step 5 is past the top step 4");
    }
}
