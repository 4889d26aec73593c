//! The broadphase for things that never move (walls, teleport pads): a fixed set of boxes
//! bucketed once into a uniform grid.
//!
//! Built once per map, so the cells are stored compactly (one index array and an offset per
//! cell, no per-cell vector). A box spanning several cells is listed in each; queries return
//! each box once, in ascending index order, which is what makes wall resolution independent
//! of how the boxes were found (see [`crate::movement`]).

use crate::geom::{Aabb, Vec2};

/// Boxes that never move, with a grid to find those near a point or a box.
///
/// ```
/// use tickwire_arena::geom::{Aabb, Vec2};
/// use tickwire_arena::physics::BoxIndex;
///
/// let walls = BoxIndex::new(
///     vec![Aabb::from_coords(0.0, 0.0, 1.0, 10.0), Aabb::from_coords(9.0, 0.0, 10.0, 10.0)],
///     Vec2::new(10.0, 10.0),
///     4.0,
/// );
/// let mut near = Vec::new();
/// walls.query(Aabb::around_circle(Vec2::new(1.5, 5.0), 0.5), &mut near);
/// assert_eq!(near, [0]);
/// ```
#[derive(Debug, Clone)]
pub struct BoxIndex {
    boxes: Vec<Aabb>,
    inverse_cell_size: f32,
    columns: u32,
    rows: u32,
    /// Cell `c`'s boxes are `items[offsets[c]..offsets[c + 1]]`.
    offsets: Vec<u32>,
    items: Vec<u32>,
}

impl BoxIndex {
    /// Indexes `boxes` over an area of `size` metres with cells `cell_size` wide. Boxes
    /// (partly) outside the area are listed in the edge cells they clamp to.
    ///
    /// # Panics
    ///
    /// If `cell_size` is not positive and finite or `size` is not finite.
    pub fn new(boxes: Vec<Aabb>, size: Vec2, cell_size: f32) -> Self {
        assert!(
            cell_size.is_finite() && cell_size > 0.0 && size.is_finite(),
            "box index cell size {cell_size} and area {size:?} must be positive and finite"
        );
        let columns = ((size.x / cell_size).ceil() as u32).max(1);
        let rows = ((size.y / cell_size).ceil() as u32).max(1);
        let mut index = Self {
            boxes,
            inverse_cell_size: 1.0 / cell_size,
            columns,
            rows,
            offsets: vec![0; columns as usize * rows as usize + 1],
            items: Vec::new(),
        };
        // Counting sort: count per cell, prefix-sum into offsets, then fill.
        let mut counts = vec![0u32; columns as usize * rows as usize];
        for aabb in &index.boxes {
            index.for_cells(*aabb, |cell| counts[cell] += 1);
        }
        let mut total = 0u32;
        for (cell, count) in counts.iter().enumerate() {
            index.offsets[cell] = total;
            total += count;
        }
        index.offsets[counts.len()] = total;
        index.items = vec![0; total as usize];
        let mut fill = index.offsets.clone();
        for (i, aabb) in index.boxes.iter().enumerate() {
            let (column0, row0) = index.column_row(aabb.min);
            let (column1, row1) = index.column_row(aabb.max);
            for row in row0..=row1 {
                for column in column0..=column1 {
                    let cell = (row * columns + column) as usize;
                    index.items[fill[cell] as usize] = i as u32;
                    fill[cell] += 1;
                }
            }
        }
        index
    }

    /// Every box, by index.
    pub fn boxes(&self) -> &[Aabb] {
        &self.boxes
    }

    /// Number of boxes.
    pub fn len(&self) -> usize {
        self.boxes.len()
    }

    /// Whether there is no box.
    pub fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }

    #[inline]
    fn column_row(&self, position: Vec2) -> (u32, u32) {
        // `as` saturates negatives and NaN to 0; the min clamps to the last cell.
        let column = ((position.x * self.inverse_cell_size) as u32).min(self.columns - 1);
        let row = ((position.y * self.inverse_cell_size) as u32).min(self.rows - 1);
        (column, row)
    }

    fn for_cells(&self, area: Aabb, mut visit: impl FnMut(usize)) {
        let (column0, row0) = self.column_row(area.min);
        let (column1, row1) = self.column_row(area.max);
        for row in row0..=row1 {
            for column in column0..=column1 {
                visit((row * self.columns + column) as usize);
            }
        }
    }

    /// Replaces `out` with the indices of the boxes listed in the cells `area` touches, each
    /// once and in ascending order (candidates: a superset of the boxes `area` meets). Reuses
    /// `out`'s allocation.
    #[inline]
    pub fn query(&self, area: Aabb, out: &mut Vec<u32>) {
        out.clear();
        let (column0, row0) = self.column_row(area.min);
        let (column1, row1) = self.column_row(area.max);
        for row in row0..=row1 {
            let first = (row * self.columns + column0) as usize;
            let last = (row * self.columns + column1) as usize;
            out.extend_from_slice(
                &self.items[self.offsets[first] as usize..self.offsets[last + 1] as usize],
            );
        }
        // A box spanning cells appears once per cell; the sort also fixes the order that
        // wall resolution depends on. Candidate lists are a handful of entries.
        if row1 > row0 || column1 > column0 {
            out.sort_unstable();
            out.dedup();
        }
    }

    /// The index of the first box containing `point` (edges included), if any.
    #[inline]
    pub fn first_containing(&self, point: Vec2) -> Option<usize> {
        let (column, row) = self.column_row(point);
        let cell = (row * self.columns + column) as usize;
        self.items[self.offsets[cell] as usize..self.offsets[cell + 1] as usize]
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| self.boxes[i].contains(point))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> BoxIndex {
        BoxIndex::new(
            vec![
                Aabb::from_coords(0.0, 0.0, 20.0, 1.0),
                Aabb::from_coords(5.0, 5.0, 6.0, 6.0),
                Aabb::from_coords(3.0, 3.0, 12.0, 12.0),
            ],
            Vec2::new(20.0, 20.0),
            4.0,
        )
    }

    #[test]
    fn query_lists_each_candidate_once_in_order() {
        let index = index();
        let mut out = Vec::new();
        index.query(Aabb::from_coords(0.0, 0.0, 20.0, 20.0), &mut out);
        assert_eq!(out, [0, 1, 2]);
        index.query(Aabb::around_circle(Vec2::new(5.5, 5.5), 0.5), &mut out);
        assert_eq!(out, [1, 2]);
        index.query(Aabb::around_circle(Vec2::new(18.0, 18.0), 0.5), &mut out);
        assert_eq!(out, [] as [u32; 0]);
    }

    #[test]
    fn query_finds_every_box_the_area_meets() {
        let index = index();
        let mut out = Vec::new();
        for x in 0..40 {
            for y in 0..40 {
                let area = Aabb::around_circle(Vec2::new(x as f32 * 0.5, y as f32 * 0.5), 0.7);
                index.query(area, &mut out);
                for (i, aabb) in index.boxes().iter().enumerate() {
                    if aabb.intersects(area) {
                        assert!(out.contains(&(i as u32)), "box {i} missed for {area:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn first_containing_prefers_the_lowest_index() {
        let index = index();
        assert_eq!(index.first_containing(Vec2::new(5.5, 5.5)), Some(1));
        assert_eq!(index.first_containing(Vec2::new(10.0, 10.0)), Some(2));
        assert_eq!(index.first_containing(Vec2::new(15.0, 15.0)), None);
    }
}
