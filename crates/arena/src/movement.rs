//! The player movement step: the one piece of simulation the client runs too.
//!
//! [`step_movement`] is pure and deterministic: the same position, direction, parameters and
//! walls give the same result bit for bit. The TypeScript client ports it to predict its own
//! player between snapshots and must match it exactly, so it is held to the shared vectors in
//! `tests/vectors/movement.json` (bless with
//! `TICKWIRE_BLESS=1 cargo test -p tickwire-arena --test movement_vectors`).
//!
//! # The algorithm, as a port must write it
//!
//! All values are `f32`; every operation is rounded to `f32` before the next (in JavaScript:
//! `Math.fround` after each `+ - * /` and `Math.sqrt`, which gives the same bits because
//! `f64` has more than twice `f32`'s precision). Nothing is fused (no FMA), nothing
//! reordered.
//!
//! ```text
//! step(p, (dx, dy)):
//!   l2 = dx*dx + dy*dy                       // (dx*dx) + (dy*dy)
//!   if l2 is NaN or infinite, or l2 <= 0: return p   // no input (or garbage): no move
//!   if l2 > 1: l = sqrt(l2); dx = dx / l; dy = dy / l     // speed cap: |d| <= 1
//!   reach = max_speed * dt
//!   mx = dx * reach; my = dy * reach
//!   dist = sqrt(mx*mx + my*my)
//!   n = max(1, ceil(dist / MAX_SUBSTEP))     // an integer, as f32 for the division
//!   sx = mx / n; sy = my / n
//!   repeat n times:
//!     p.x = p.x + sx; p.y = p.y + sy
//!     p = clamp_to_bounds(p)
//!     p = push_out_of_walls(p)
//!   return p
//!
//! clamp_to_bounds(p):  x = min(max(p.x, r), width - r); likewise y with height
//!
//! push_out_of_walls(p): up to WALL_PASSES times:
//!   for each wall box b in ascending index order:
//!     if contact(circle(p, r), b) = (normal, depth):    // physics::contact::circle_aabb
//!       p.x = p.x + normal.x * depth; p.y = p.y + normal.y * depth
//!   stop early after a pass that pushed nothing
//! ```
//!
//! A wall box with no contact changes nothing, so a port may test every box of the map in
//! index order; the server tests only the candidates its [`BoxIndex`] finds near the step,
//! which is the same set of boxes with contact and gives the same bits.
//!
//! # Why nothing tunnels
//!
//! A circle that starts outside every wall moves at most [`MAX_SUBSTEP`] (0.25 m) per
//! sub-step, so its centre is at most that deep inside any wall grown by its radius. Every
//! wall box is at least one tile (1 m) on each side, so the grown box is at least `1 + 2r`
//! across and the nearest exit is always the side it came in through. Pushes from other
//! boxes are bounded by the same depth. `tests/arena_tunneling.rs` checks this with
//! random positions, angles and speeds far above the cap.

use crate::geom::{Aabb, Vec2};
use crate::physics::BoxIndex;
use crate::physics::contact::circle_aabb;

/// Longest distance a circle moves between two wall checks, in metres.
pub const MAX_SUBSTEP: f32 = 0.25;

/// How many times a step pushes a circle out of all nearby walls; a second pass settles a
/// circle that one wall pushed into another (an inside corner).
pub const WALL_PASSES: u32 = 2;

/// Extra margin (metres) around a step when the server picks candidate walls, so that
/// walls met after a push are candidates too; any value at least the push distance works.
const CANDIDATE_MARGIN: f32 = 1.0;

/// What a movement step depends on besides the position and input; the client receives
/// these from the server and must use exactly the same values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MovementParams {
    /// Player radius, metres.
    pub radius: f32,
    /// Speed at full input, metres per second.
    pub max_speed: f32,
    /// Seconds per tick.
    pub dt: f32,
    /// The map's width and height, metres; centres stay `radius` inside them.
    pub bounds: Vec2,
}

impl MovementParams {
    /// Metres moved per tick at full speed (`max_speed * dt`).
    #[inline]
    pub fn reach(&self) -> f32 {
        self.max_speed * self.dt
    }
}

/// Moves a player's centre one tick from `position` in `direction` (each component in
/// `-1..=1`, longer than 1 capped to 1), sliding along walls.
///
/// `scratch` holds the candidate walls between calls so that stepping allocates nothing;
/// its contents on entry do not matter. A non-finite or zero direction does not move.
#[inline]
pub fn step_movement(
    position: Vec2,
    direction: Vec2,
    params: &MovementParams,
    walls: &BoxIndex,
    scratch: &mut Vec<u32>,
) -> Vec2 {
    let Some(motion) = motion(direction, params) else {
        return position;
    };
    let distance = motion.length();
    let area = Aabb::spanning(position, position + motion)
        .expanded(params.radius + distance + CANDIDATE_MARGIN);
    walls.query(area, scratch);
    advance(position, motion, distance, params, walls.boxes(), scratch)
}

/// [`step_movement`] testing every wall in `boxes`, the way a port without a spatial index
/// would; gives the same bits.
pub fn step_movement_all_walls(
    position: Vec2,
    direction: Vec2,
    params: &MovementParams,
    boxes: &[Aabb],
) -> Vec2 {
    let Some(motion) = motion(direction, params) else {
        return position;
    };
    let all: Vec<u32> = (0..boxes.len() as u32).collect();
    advance(position, motion, motion.length(), params, boxes, &all)
}

/// Keeps a circle in the map and out of walls after something other than its own movement
/// moved it (players pushing each other, a spawn, a teleport): clamp to the bounds, then push
/// out of walls as a movement sub-step does. Safe for displacements up to [`MAX_SUBSTEP`].
#[inline]
pub fn settle(
    position: Vec2,
    params: &MovementParams,
    walls: &BoxIndex,
    scratch: &mut Vec<u32>,
) -> Vec2 {
    let position = clamp_to_bounds(position, params);
    walls.query(
        Aabb::around_circle(position, params.radius + CANDIDATE_MARGIN),
        scratch,
    );
    push_out_of_walls(position, params.radius, walls.boxes(), scratch)
}

/// The tick's displacement at full reach, or `None` when the input does not move.
#[inline]
fn motion(direction: Vec2, params: &MovementParams) -> Option<Vec2> {
    let length_squared = direction.x * direction.x + direction.y * direction.y;
    if !length_squared.is_finite() || length_squared <= 0.0 {
        return None;
    }
    let (mut x, mut y) = (direction.x, direction.y);
    if length_squared > 1.0 {
        let length = length_squared.sqrt();
        x /= length;
        y /= length;
    }
    let reach = params.max_speed * params.dt;
    Some(Vec2::new(x * reach, y * reach))
}

#[inline]
fn advance(
    mut position: Vec2,
    motion: Vec2,
    distance: f32,
    params: &MovementParams,
    boxes: &[Aabb],
    candidates: &[u32],
) -> Vec2 {
    let substeps = (distance / MAX_SUBSTEP).ceil().max(1.0);
    let step = Vec2::new(motion.x / substeps, motion.y / substeps);
    for _ in 0..substeps as u32 {
        position = Vec2::new(position.x + step.x, position.y + step.y);
        position = clamp_to_bounds(position, params);
        position = push_out_of_walls(position, params.radius, boxes, candidates);
    }
    position
}

#[inline]
fn clamp_to_bounds(position: Vec2, params: &MovementParams) -> Vec2 {
    let radius = params.radius;
    Vec2::new(
        position.x.max(radius).min(params.bounds.x - radius),
        position.y.max(radius).min(params.bounds.y - radius),
    )
}

#[inline]
fn push_out_of_walls(mut position: Vec2, radius: f32, boxes: &[Aabb], candidates: &[u32]) -> Vec2 {
    for _ in 0..WALL_PASSES {
        let mut pushed = false;
        for &index in candidates {
            if let Some(contact) = circle_aabb(position, radius, boxes[index as usize]) {
                position = Vec2::new(
                    position.x + contact.normal.x * contact.depth,
                    position.y + contact.normal.y * contact.depth,
                );
                pushed = true;
            }
        }
        if !pushed {
            break;
        }
    }
    position
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> MovementParams {
        MovementParams {
            radius: 0.4,
            max_speed: 6.0,
            dt: 1.0 / 60.0,
            bounds: Vec2::new(20.0, 20.0),
        }
    }

    fn walls(boxes: Vec<Aabb>) -> BoxIndex {
        BoxIndex::new(boxes, Vec2::new(20.0, 20.0), 4.0)
    }

    #[test]
    fn free_movement_goes_reach_per_tick_and_diagonals_are_capped() {
        let walls = walls(Vec::new());
        let mut scratch = Vec::new();
        let start = Vec2::new(10.0, 10.0);
        let end = step_movement(start, Vec2::new(1.0, 0.0), &params(), &walls, &mut scratch);
        assert!((end.x - 10.1).abs() < 1e-5 && end.y == 10.0, "{end:?}");
        let end = step_movement(start, Vec2::new(1.0, 1.0), &params(), &walls, &mut scratch);
        assert!(((end - start).length() - 0.1).abs() < 1e-5, "{end:?}");
        let end = step_movement(start, Vec2::new(0.5, 0.0), &params(), &walls, &mut scratch);
        assert!(
            (end.x - 10.05).abs() < 1e-5,
            "half input, half speed: {end:?}"
        );
    }

    #[test]
    fn no_or_garbage_input_does_not_move() {
        let walls = walls(Vec::new());
        let mut scratch = Vec::new();
        let start = Vec2::new(3.0, 3.0);
        for direction in [
            Vec2::ZERO,
            Vec2::new(f32::NAN, 0.0),
            Vec2::new(f32::INFINITY, 1.0),
        ] {
            assert_eq!(
                step_movement(start, direction, &params(), &walls, &mut scratch),
                start
            );
        }
    }

    #[test]
    fn a_wall_stops_a_player_at_its_face() {
        let walls = walls(vec![Aabb::from_coords(10.0, 0.0, 11.0, 20.0)]);
        let mut scratch = Vec::new();
        let mut position = Vec2::new(9.0, 5.0);
        for _ in 0..30 {
            position = step_movement(
                position,
                Vec2::new(1.0, 0.0),
                &params(),
                &walls,
                &mut scratch,
            );
        }
        assert!((position.x - 9.6).abs() < 1e-4, "{position:?}");
        assert_eq!(position.y, 5.0);
    }

    #[test]
    fn a_player_slides_along_a_wall_it_moves_into_at_an_angle() {
        let walls = walls(vec![Aabb::from_coords(10.0, 0.0, 11.0, 20.0)]);
        let mut scratch = Vec::new();
        let mut position = Vec2::new(9.6, 5.0);
        for _ in 0..10 {
            position = step_movement(
                position,
                Vec2::new(1.0, 1.0),
                &params(),
                &walls,
                &mut scratch,
            );
        }
        assert!(position.x <= 9.6 + 1e-4, "{position:?}");
        assert!(position.y > 5.6, "slid down: {position:?}");
    }

    #[test]
    fn bounds_keep_the_centre_a_radius_inside_the_map() {
        let walls = walls(Vec::new());
        let mut scratch = Vec::new();
        let mut position = Vec2::new(0.5, 19.5);
        for _ in 0..10 {
            position = step_movement(
                position,
                Vec2::new(-1.0, 1.0),
                &params(),
                &walls,
                &mut scratch,
            );
        }
        assert_eq!(position, Vec2::new(0.4, 19.6));
    }

    #[test]
    fn the_index_and_every_wall_give_the_same_bits() {
        let boxes = vec![
            Aabb::from_coords(5.0, 5.0, 6.0, 15.0),
            Aabb::from_coords(6.0, 5.0, 15.0, 6.0),
            Aabb::from_coords(12.0, 10.0, 13.0, 11.0),
        ];
        let index = walls(boxes.clone());
        let mut scratch = Vec::new();
        let fast = MovementParams {
            max_speed: 90.0,
            ..params()
        };
        for i in 0..400 {
            let start = Vec2::new(1.0 + (i % 20) as f32 * 0.9, 1.0 + (i / 20) as f32 * 0.9);
            let start = settle(start, &fast, &index, &mut scratch);
            let direction = Vec2::from_angle(i as f32 * 0.7);
            let a = step_movement(start, direction, &fast, &index, &mut scratch);
            let b = step_movement_all_walls(start, direction, &fast, &boxes);
            assert_eq!(
                (a.x.to_bits(), a.y.to_bits()),
                (b.x.to_bits(), b.y.to_bits()),
                "from {start:?} towards {direction:?}"
            );
        }
    }

    #[test]
    fn settle_pushes_a_centre_out_of_a_wall() {
        let walls = walls(vec![Aabb::from_coords(5.0, 5.0, 8.0, 6.0)]);
        let mut scratch = Vec::new();
        let settled = settle(Vec2::new(6.5, 5.2), &params(), &walls, &mut scratch);
        assert!(
            (settled.y - 4.6).abs() < 1e-5,
            "out of the top face: {settled:?}"
        );
    }
}
