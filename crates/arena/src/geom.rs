//! Plane geometry in world units (metres; one Tiled tile is one metre): [`Vec2`] and [`Aabb`].
//!
//! `f32` throughout. The arithmetic the client ports ([`crate::movement`]) uses only `+`, `-`,
//! `*`, `/`, `sqrt`, `min`, `max` and `ceil`, each of which JavaScript reproduces bit for bit
//! with `Math.fround` after every operation; no operation here is fused or reordered.

use std::ops::{Add, AddAssign, Mul, Neg, Sub, SubAssign};

/// A point or a displacement, in metres. `+y` points down the map, as in Tiled.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Vec2 {
    /// Metres to the right of the map's left edge.
    pub x: f32,
    /// Metres below the map's top edge.
    pub y: f32,
}

impl Vec2 {
    /// The origin, or no displacement.
    pub const ZERO: Vec2 = Vec2 { x: 0.0, y: 0.0 };

    /// A vector from its components.
    #[inline]
    pub const fn new(x: f32, y: f32) -> Self {
        Self { x, y }
    }

    /// `x * x + y * y`, in that order.
    #[inline]
    pub fn length_squared(self) -> f32 {
        self.x * self.x + self.y * self.y
    }

    /// Euclidean length.
    #[inline]
    pub fn length(self) -> f32 {
        self.length_squared().sqrt()
    }

    /// Dot product.
    #[inline]
    pub fn dot(self, other: Vec2) -> f32 {
        self.x * other.x + self.y * other.y
    }

    /// Both components finite (not NaN, not infinite).
    #[inline]
    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite()
    }

    /// The unit vector at `angle` radians from `+x`, turning towards `+y`.
    ///
    /// Uses `sin`/`cos`, which are not correctly rounded and may differ between platforms,
    /// so only server-side code (aim, bullets) calls it, never the ported movement step.
    #[inline]
    pub fn from_angle(angle: f32) -> Self {
        let (sin, cos) = angle.sin_cos();
        Self { x: cos, y: sin }
    }

    /// This vector scaled to at most `max` long; `self` if it is already short enough.
    #[inline]
    pub fn clamp_length(self, max: f32) -> Self {
        let length_squared = self.length_squared();
        if length_squared > max * max {
            let scale = max / length_squared.sqrt();
            Self::new(self.x * scale, self.y * scale)
        } else {
            self
        }
    }
}

impl Add for Vec2 {
    type Output = Vec2;
    #[inline]
    fn add(self, rhs: Vec2) -> Vec2 {
        Vec2::new(self.x + rhs.x, self.y + rhs.y)
    }
}

impl AddAssign for Vec2 {
    #[inline]
    fn add_assign(&mut self, rhs: Vec2) {
        *self = *self + rhs;
    }
}

impl Sub for Vec2 {
    type Output = Vec2;
    #[inline]
    fn sub(self, rhs: Vec2) -> Vec2 {
        Vec2::new(self.x - rhs.x, self.y - rhs.y)
    }
}

impl SubAssign for Vec2 {
    #[inline]
    fn sub_assign(&mut self, rhs: Vec2) {
        *self = *self - rhs;
    }
}

impl Mul<f32> for Vec2 {
    type Output = Vec2;
    #[inline]
    fn mul(self, rhs: f32) -> Vec2 {
        Vec2::new(self.x * rhs, self.y * rhs)
    }
}

impl Neg for Vec2 {
    type Output = Vec2;
    #[inline]
    fn neg(self) -> Vec2 {
        Vec2::new(-self.x, -self.y)
    }
}

/// An axis-aligned box from `min` (top left) to `max` (bottom right), edges included.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Aabb {
    /// Top-left corner.
    pub min: Vec2,
    /// Bottom-right corner.
    pub max: Vec2,
}

impl Aabb {
    /// The box between two corners given in order (`min <= max` on both axes).
    #[inline]
    pub const fn new(min: Vec2, max: Vec2) -> Self {
        Self { min, max }
    }

    /// The box `x0..x1` × `y0..y1`.
    #[inline]
    pub const fn from_coords(x0: f32, y0: f32, x1: f32, y1: f32) -> Self {
        Self::new(Vec2::new(x0, y0), Vec2::new(x1, y1))
    }

    /// The square around a circle.
    #[inline]
    pub fn around_circle(center: Vec2, radius: f32) -> Self {
        Self::new(
            Vec2::new(center.x - radius, center.y - radius),
            Vec2::new(center.x + radius, center.y + radius),
        )
    }

    /// The smallest box holding both points.
    #[inline]
    pub fn spanning(a: Vec2, b: Vec2) -> Self {
        Self::new(
            Vec2::new(a.x.min(b.x), a.y.min(b.y)),
            Vec2::new(a.x.max(b.x), a.y.max(b.y)),
        )
    }

    /// This box grown by `margin` on every side.
    #[inline]
    pub fn expanded(self, margin: f32) -> Self {
        Self::new(
            Vec2::new(self.min.x - margin, self.min.y - margin),
            Vec2::new(self.max.x + margin, self.max.y + margin),
        )
    }

    /// Width and height.
    #[inline]
    pub fn size(self) -> Vec2 {
        self.max - self.min
    }

    /// Width times height.
    #[inline]
    pub fn area(self) -> f32 {
        let size = self.size();
        size.x * size.y
    }

    /// The middle point.
    #[inline]
    pub fn center(self) -> Vec2 {
        Vec2::new(
            (self.min.x + self.max.x) * 0.5,
            (self.min.y + self.max.y) * 0.5,
        )
    }

    /// Whether `point` lies inside or on the edge.
    #[inline]
    pub fn contains(self, point: Vec2) -> bool {
        point.x >= self.min.x
            && point.x <= self.max.x
            && point.y >= self.min.y
            && point.y <= self.max.y
    }

    /// Whether the two boxes share any point (touching edges count).
    #[inline]
    pub fn intersects(self, other: Aabb) -> bool {
        self.min.x <= other.max.x
            && other.min.x <= self.max.x
            && self.min.y <= other.max.y
            && other.min.y <= self.max.y
    }

    /// Whether the two boxes share area (touching edges do not count).
    #[inline]
    pub fn overlaps(self, other: Aabb) -> bool {
        self.min.x < other.max.x
            && other.min.x < self.max.x
            && self.min.y < other.max.y
            && other.min.y < self.max.y
    }

    /// The nearest point of the box to `point` (`point` itself when inside).
    #[inline]
    pub fn clamp(self, point: Vec2) -> Vec2 {
        Vec2::new(
            point.x.max(self.min.x).min(self.max.x),
            point.y.max(self.min.y).min(self.max.y),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_length_keeps_short_vectors_and_shortens_long_ones() {
        assert_eq!(Vec2::new(0.3, 0.4).clamp_length(1.0), Vec2::new(0.3, 0.4));
        let clamped = Vec2::new(3.0, 4.0).clamp_length(1.0);
        assert!((clamped.length() - 1.0).abs() < 1e-6, "{clamped:?}");
    }

    #[test]
    fn touching_boxes_intersect_but_do_not_overlap() {
        let a = Aabb::from_coords(0.0, 0.0, 1.0, 1.0);
        let b = Aabb::from_coords(1.0, 0.0, 2.0, 1.0);
        assert!(a.intersects(b));
        assert!(!a.overlaps(b));
        assert!(a.overlaps(Aabb::from_coords(0.5, 0.5, 3.0, 3.0)));
    }

    #[test]
    fn clamp_finds_the_nearest_point() {
        let a = Aabb::from_coords(0.0, 0.0, 2.0, 1.0);
        assert_eq!(a.clamp(Vec2::new(-1.0, 0.5)), Vec2::new(0.0, 0.5));
        assert_eq!(a.clamp(Vec2::new(3.0, 3.0)), Vec2::new(2.0, 1.0));
        assert_eq!(a.clamp(Vec2::new(1.0, 0.5)), Vec2::new(1.0, 0.5));
    }
}
