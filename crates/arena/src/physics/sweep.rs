//! Swept tests for fast things (bullets): the first moment a moving point meets a shape
//! during a step, so nothing passes through a wall or a player however far it moves per tick.
//!
//! A bullet of radius `r` against a wall is the bullet's centre against the wall grown by `r`
//! (a box with square corners: at a corner the bullet stops up to `0.41 r` early, which at
//! bullet sizes nobody can see, and errs on the side of stopping).

use crate::geom::{Aabb, Vec2};

/// The fraction `t` in `0..=1` of the step `start → start + delta` at which the moving
/// point first lies in `aabb` (edges included); `Some(0.0)` if it starts inside.
#[inline]
pub fn segment_aabb(start: Vec2, delta: Vec2, aabb: Aabb) -> Option<f32> {
    let mut enter = 0.0f32;
    let mut exit = 1.0f32;
    for (origin, direction, min, max) in [
        (start.x, delta.x, aabb.min.x, aabb.max.x),
        (start.y, delta.y, aabb.min.y, aabb.max.y),
    ] {
        if direction == 0.0 {
            if origin < min || origin > max {
                return None;
            }
            continue;
        }
        let inverse = 1.0 / direction;
        let (near, far) = {
            let a = (min - origin) * inverse;
            let b = (max - origin) * inverse;
            if a <= b { (a, b) } else { (b, a) }
        };
        enter = enter.max(near);
        exit = exit.min(far);
        if enter > exit {
            return None;
        }
    }
    Some(enter)
}

/// The fraction `t` in `0..=1` of the step `start → start + delta` at which the moving point
/// first comes within `radius` of `center`; `Some(0.0)` if it starts that close.
#[inline]
pub fn segment_circle(start: Vec2, delta: Vec2, center: Vec2, radius: f32) -> Option<f32> {
    let from_center = start - center;
    let c = from_center.length_squared() - radius * radius;
    if c <= 0.0 {
        return Some(0.0);
    }
    let b = from_center.dot(delta);
    if b >= 0.0 {
        // Moving away from (or past) the centre: the distance only grows.
        return None;
    }
    let a = delta.length_squared();
    let discriminant = b * b - a * c;
    if discriminant < 0.0 {
        return None;
    }
    let t = (-b - discriminant.sqrt()) / a;
    (t <= 1.0).then_some(t.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_meets_a_box_at_its_face() {
        let wall = Aabb::from_coords(10.0, 0.0, 11.0, 10.0);
        let t = segment_aabb(Vec2::new(0.0, 5.0), Vec2::new(20.0, 0.0), wall).unwrap();
        assert!((t - 0.5).abs() < 1e-6);
        // Diagonal, hitting the top face.
        let t = segment_aabb(Vec2::new(9.0, -2.0), Vec2::new(4.0, 4.0), wall).unwrap();
        assert!((t - 0.5).abs() < 1e-6, "{t}");
    }

    #[test]
    fn segment_that_falls_short_or_passes_by_misses() {
        let wall = Aabb::from_coords(10.0, 0.0, 11.0, 10.0);
        assert_eq!(
            segment_aabb(Vec2::new(0.0, 5.0), Vec2::new(9.0, 0.0), wall),
            None
        );
        assert_eq!(
            segment_aabb(Vec2::new(0.0, 11.0), Vec2::new(20.0, 0.0), wall),
            None
        );
        assert_eq!(
            segment_aabb(Vec2::new(0.0, 5.0), Vec2::new(-20.0, 0.0), wall),
            None
        );
    }

    #[test]
    fn a_step_longer_than_the_wall_is_thick_still_hits() {
        let wall = Aabb::from_coords(10.0, 0.0, 10.1, 10.0);
        let t = segment_aabb(Vec2::new(0.0, 5.0), Vec2::new(1000.0, 0.0), wall).unwrap();
        assert!((t - 0.01).abs() < 1e-6);
    }

    #[test]
    fn starting_inside_hits_at_zero() {
        let wall = Aabb::from_coords(0.0, 0.0, 1.0, 1.0);
        assert_eq!(
            segment_aabb(Vec2::new(0.5, 0.5), Vec2::new(5.0, 0.0), wall),
            Some(0.0)
        );
        assert_eq!(
            segment_circle(Vec2::new(0.1, 0.0), Vec2::new(5.0, 0.0), Vec2::ZERO, 0.5),
            Some(0.0)
        );
    }

    #[test]
    fn segment_meets_a_circle_at_its_rim() {
        let t = segment_circle(Vec2::ZERO, Vec2::new(10.0, 0.0), Vec2::new(5.0, 0.0), 1.0).unwrap();
        assert!((t - 0.4).abs() < 1e-6);
        assert_eq!(
            segment_circle(Vec2::ZERO, Vec2::new(3.0, 0.0), Vec2::new(5.0, 0.0), 1.0),
            None,
            "falls short"
        );
        assert_eq!(
            segment_circle(Vec2::ZERO, Vec2::new(10.0, 0.0), Vec2::new(5.0, 2.0), 1.0),
            None,
            "passes by"
        );
        assert_eq!(
            segment_circle(Vec2::ZERO, Vec2::new(-10.0, 0.0), Vec2::new(5.0, 0.0), 1.0),
            None,
            "moves away"
        );
    }
}
