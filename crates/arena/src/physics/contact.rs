//! Narrow-phase contacts: whether two shapes overlap, how deep, and which way to push.
//!
//! Every function returns the contact *for the first shape*: moving it by
//! `normal * depth` separates the two (to touching). Shapes that only touch have no contact,
//! so a circle pushed out of a wall is not found in contact with it again.
//!
//! These run inside the movement step the client ports, so the order of operations is part
//! of the contract (see [`crate::movement`]).

use crate::geom::{Aabb, Vec2};

/// How two overlapping shapes meet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contact {
    /// Unit vector along which the first shape leaves the second.
    pub normal: Vec2,
    /// How far the shapes overlap along `normal`, in metres (positive).
    pub depth: f32,
}

/// The contact of circle `a` (centre, radius) with circle `b`.
///
/// Circles with the same centre have no direction between them; they separate along `+x`
/// (`a` to the right), which is arbitrary but deterministic.
#[inline]
pub fn circle_circle(a: Vec2, radius_a: f32, b: Vec2, radius_b: f32) -> Option<Contact> {
    let reach = radius_a + radius_b;
    let offset = a - b;
    let distance_squared = offset.length_squared();
    if distance_squared >= reach * reach {
        return None;
    }
    if distance_squared == 0.0 {
        return Some(Contact {
            normal: Vec2::new(1.0, 0.0),
            depth: reach,
        });
    }
    let distance = distance_squared.sqrt();
    Some(Contact {
        normal: Vec2::new(offset.x / distance, offset.y / distance),
        depth: reach - distance,
    })
}

/// The contact of a circle with a box (a wall).
///
/// A centre outside the box is pushed away from the box's nearest point. A centre inside
/// (after a fast move, or a spawn on a wall) leaves through the nearest face, ties going to
/// the first of left, right, top, bottom; the depth then includes the radius, so the circle
/// ends just touching that face.
#[inline]
pub fn circle_aabb(center: Vec2, radius: f32, aabb: Aabb) -> Option<Contact> {
    let nearest = aabb.clamp(center);
    let offset = center - nearest;
    let distance_squared = offset.length_squared();
    if distance_squared >= radius * radius {
        return None;
    }
    if distance_squared > 0.0 {
        let distance = distance_squared.sqrt();
        return Some(Contact {
            normal: Vec2::new(offset.x / distance, offset.y / distance),
            depth: radius - distance,
        });
    }
    // The centre is inside the box (or on its edge): leave by the nearest face.
    let left = center.x - aabb.min.x;
    let right = aabb.max.x - center.x;
    let top = center.y - aabb.min.y;
    let bottom = aabb.max.y - center.y;
    let mut exit = (Vec2::new(-1.0, 0.0), left);
    for candidate in [
        (Vec2::new(1.0, 0.0), right),
        (Vec2::new(0.0, -1.0), top),
        (Vec2::new(0.0, 1.0), bottom),
    ] {
        if candidate.1 < exit.1 {
            exit = candidate;
        }
    }
    Some(Contact {
        normal: exit.0,
        depth: exit.1 + radius,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-5
    }

    #[test]
    fn circles_apart_or_touching_have_no_contact() {
        assert_eq!(
            circle_circle(Vec2::ZERO, 1.0, Vec2::new(3.0, 0.0), 1.0),
            None
        );
        assert_eq!(
            circle_circle(Vec2::ZERO, 1.0, Vec2::new(2.0, 0.0), 1.0),
            None
        );
    }

    #[test]
    fn overlapping_circles_push_the_first_away_from_the_second() {
        let contact = circle_circle(Vec2::ZERO, 1.0, Vec2::new(1.5, 0.0), 1.0).unwrap();
        assert_eq!(contact.normal, Vec2::new(-1.0, 0.0));
        assert!(close(contact.depth, 0.5));
        let contact = circle_circle(Vec2::new(0.0, 1.0), 0.5, Vec2::ZERO, 0.7).unwrap();
        assert_eq!(contact.normal, Vec2::new(0.0, 1.0));
        assert!(close(contact.depth, 0.2));
    }

    #[test]
    fn concentric_circles_separate_along_x() {
        let contact = circle_circle(Vec2::new(2.0, 2.0), 0.4, Vec2::new(2.0, 2.0), 0.4).unwrap();
        assert_eq!(contact.normal, Vec2::new(1.0, 0.0));
        assert!(close(contact.depth, 0.8));
    }

    #[test]
    fn circle_beside_a_box_is_pushed_off_the_face() {
        let wall = Aabb::from_coords(0.0, 0.0, 1.0, 4.0);
        let contact = circle_aabb(Vec2::new(1.3, 2.0), 0.4, wall).unwrap();
        assert_eq!(contact.normal, Vec2::new(1.0, 0.0));
        assert!(close(contact.depth, 0.1));
        assert_eq!(
            circle_aabb(Vec2::new(1.5, 2.0), 0.5, wall),
            None,
            "touching"
        );
        assert_eq!(circle_aabb(Vec2::new(2.0, 2.0), 0.4, wall), None);
    }

    #[test]
    fn circle_at_a_corner_is_pushed_diagonally() {
        let wall = Aabb::from_coords(0.0, 0.0, 1.0, 1.0);
        let contact = circle_aabb(Vec2::new(1.2, 1.2), 0.4, wall).unwrap();
        let diagonal = std::f32::consts::FRAC_1_SQRT_2;
        assert!(close(contact.normal.x, diagonal) && close(contact.normal.y, diagonal));
        assert!(close(contact.depth, 0.4 - 0.2 * std::f32::consts::SQRT_2));
        // Outside the corner's reach, although inside the box grown by the radius.
        assert_eq!(circle_aabb(Vec2::new(1.3, 1.3), 0.4, wall), None);
    }

    #[test]
    fn centre_inside_a_box_leaves_by_the_nearest_face() {
        let wall = Aabb::from_coords(0.0, 0.0, 4.0, 2.0);
        let contact = circle_aabb(Vec2::new(3.8, 1.0), 0.4, wall).unwrap();
        assert_eq!(contact.normal, Vec2::new(1.0, 0.0));
        assert!(close(contact.depth, 0.6), "0.2 to the face plus the radius");
        let contact = circle_aabb(Vec2::new(2.0, 0.3), 0.4, wall).unwrap();
        assert_eq!(contact.normal, Vec2::new(0.0, -1.0));
        assert!(close(contact.depth, 0.7));
        let contact = circle_aabb(Vec2::new(2.0, 1.9), 0.4, wall).unwrap();
        assert_eq!(contact.normal, Vec2::new(0.0, 1.0));
        // Exactly in the middle of a square: the tie goes to the left face.
        let square = Aabb::from_coords(0.0, 0.0, 2.0, 2.0);
        let contact = circle_aabb(Vec2::new(1.0, 1.0), 0.4, square).unwrap();
        assert_eq!(contact.normal, Vec2::new(-1.0, 0.0));
    }

    #[test]
    fn resolving_a_contact_leaves_the_shapes_touching() {
        let wall = Aabb::from_coords(0.0, 0.0, 1.0, 1.0);
        for center in [
            Vec2::new(1.1, 0.5),
            Vec2::new(0.9, 0.5),
            Vec2::new(1.2, 1.1),
            Vec2::new(0.5, 0.5),
        ] {
            let contact = circle_aabb(center, 0.4, wall).unwrap();
            let resolved = center + contact.normal * contact.depth;
            let distance = (resolved - wall.clamp(resolved)).length();
            assert!(close(distance, 0.4), "{center:?} resolved to {resolved:?}");
        }
    }
}
