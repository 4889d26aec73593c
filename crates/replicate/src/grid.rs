//! The spatial grid of [`Interest::Radius`](crate::Interest::Radius): every positioned
//! entity in the cell its position falls in, rebuilt once per send and read by every member.

use std::collections::HashMap;

use crate::EntityId;

/// The entities of one cell, with their positions.
type Cell = Vec<(EntityId, [f32; 2])>;

#[derive(Debug, Default)]
pub(crate) struct Grid {
    cell_size: f32,
    cells: HashMap<(i32, i32), Cell>,
    /// Emptied cells kept for their allocations.
    spare: Vec<Cell>,
}

impl Grid {
    pub(crate) fn clear(&mut self, cell_size: f32) {
        self.cell_size = cell_size;
        for (_, mut cell) in self.cells.drain() {
            cell.clear();
            self.spare.push(cell);
        }
    }

    fn cell_of(&self, position: [f32; 2]) -> (i32, i32) {
        // `as` saturates: a far-off (or non-finite) position lands in an edge cell.
        (
            (position[0] / self.cell_size).floor() as i32,
            (position[1] / self.cell_size).floor() as i32,
        )
    }

    pub(crate) fn insert(&mut self, id: EntityId, position: [f32; 2]) {
        let cell = self.cell_of(position);
        let spare = &mut self.spare;
        self.cells
            .entry(cell)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push((id, position));
    }

    /// Every entity within `reach` of `focus` (and perhaps a few beyond, in the cells that
    /// reach touches), with its squared distance.
    pub(crate) fn near(&self, focus: [f32; 2], reach: f32, mut visit: impl FnMut(EntityId, f32)) {
        let (low_x, low_y) = self.cell_of([focus[0] - reach, focus[1] - reach]);
        let (high_x, high_y) = self.cell_of([focus[0] + reach, focus[1] + reach]);
        for y in low_y..=high_y {
            for x in low_x..=high_x {
                let Some(cell) = self.cells.get(&(x, y)) else {
                    continue;
                };
                for &(id, position) in cell {
                    let (dx, dy) = (position[0] - focus[0], position[1] - focus[1]);
                    visit(id, dx * dx + dy * dy);
                }
            }
        }
    }
}
