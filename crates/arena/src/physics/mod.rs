//! 2D physics, sans-IO and deterministic: circles (players, bullets) against axis-aligned
//! boxes (walls) and each other.
//!
//! | item | role |
//! |---|---|
//! | [`contact`] | overlap depth and normal: circle–circle, circle–box |
//! | [`sweep`] | first time of impact of a moving point against a box or circle (bullets) |
//! | [`SpatialGrid`] | broadphase for moving things: O(1) insert, move, remove |
//! | [`BoxIndex`] | broadphase for boxes that never move (walls, teleport pads) |
//!
//! Players are kept out of walls by sub-stepping and pushing out (see
//! [`crate::movement`]); bullets use swept tests; players push each other apart in the
//! world's step.

pub mod contact;
pub mod sweep;

mod boxes;
mod grid;

pub use boxes::BoxIndex;
pub use contact::Contact;
pub use grid::{PackedCells, SpatialGrid};
