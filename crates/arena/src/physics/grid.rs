//! The broadphase for moving things: a uniform grid of cells, each holding the items whose
//! position falls in it.
//!
//! Each cell is an intrusive doubly linked list threaded through one `CellEntry` per item, so
//! inserting, moving and removing an item are O(1) and never allocate, whichever cell the item
//! lands in (5,000 players arriving in one zone in one tick cost 5,000 unlinks and links). A
//! query walks the cells a box touches, so its cost grows with the items nearby, not with the
//! items in the world.
//!
//! Items are `u32` ids the owner chooses (the world uses its player slots, which are dense);
//! the grid only knows which cell each is in, not its exact position, so a query returns
//! *candidates* that the caller filters with an exact test. Positions outside the grid are
//! clamped into its edge cells, so nothing is ever lost.

use crate::geom::{Aabb, Vec2};

/// No item / no cell.
const NONE: u32 = u32::MAX;

/// An item's place: its cell and its neighbours in that cell's list.
#[derive(Debug, Clone, Copy)]
struct CellEntry {
    cell: u32,
    prev: u32,
    next: u32,
}

impl CellEntry {
    const ABSENT: CellEntry = CellEntry {
        cell: NONE,
        prev: NONE,
        next: NONE,
    };
}

/// The grid's items copied out cell by cell ([`SpatialGrid::pack`]), each beside a value
/// of the owner's (the world: its position). A pass that visits every item's neighbourhood
/// reads each cell from one run of memory instead of following its list item by item: in a
/// packed crowd (5,000 players on a 200 m² plaza, 25 to a cell) each player looks at about
/// a hundred neighbours, and following a list is a dependent load per neighbour.
#[derive(Debug, Clone)]
pub struct PackedCells<T> {
    /// Cell by cell, each cell's items in its list's order (newest first).
    entries: Vec<PackedEntry<T>>,
    /// By item id: where its cell's run starts, for the items that head a cell's list.
    place: Vec<u32>,
}

impl<T> Default for PackedCells<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            place: Vec::new(),
        }
    }
}

impl<T> PackedCells<T> {
    /// Makes room for `items` so that packing as many does not allocate.
    pub fn reserve(&mut self, items: usize) {
        self.entries
            .reserve(items.saturating_sub(self.entries.len()));
        self.place.reserve(items.saturating_sub(self.place.len()));
    }
}

#[derive(Debug, Clone, Copy)]
struct PackedEntry<T> {
    cell: u32,
    id: u32,
    value: T,
}

/// A uniform grid over `0..width` × `0..height` metres.
///
/// ```
/// use tickwire_arena::geom::{Aabb, Vec2};
/// use tickwire_arena::physics::SpatialGrid;
///
/// let mut grid = SpatialGrid::new(Vec2::new(100.0, 100.0), 2.0);
/// grid.insert(7, Vec2::new(10.0, 10.0));
/// grid.insert(8, Vec2::new(90.0, 90.0));
/// let mut near = Vec::new();
/// grid.query(Aabb::around_circle(Vec2::new(11.0, 11.0), 1.0), &mut near);
/// assert_eq!(near, [7]);
/// ```
#[derive(Debug, Clone)]
pub struct SpatialGrid {
    cell_size: f32,
    inverse_cell_size: f32,
    columns: u32,
    rows: u32,
    /// First item of each cell's list, row by row.
    heads: Vec<u32>,
    /// By item id.
    links: Vec<CellEntry>,
    len: usize,
}

impl SpatialGrid {
    /// A grid covering `size` (metres) with square cells `cell_size` wide.
    ///
    /// # Panics
    ///
    /// If `cell_size` is not positive and finite or `size` is not finite: the world validates
    /// its configuration before building one (`WorldConfig::validate`).
    pub fn new(size: Vec2, cell_size: f32) -> Self {
        assert!(
            cell_size.is_finite() && cell_size > 0.0 && size.is_finite(),
            "grid cell size {cell_size} and area {size:?} must be positive and finite"
        );
        let columns = ((size.x / cell_size).ceil() as u32).max(1);
        let rows = ((size.y / cell_size).ceil() as u32).max(1);
        Self {
            cell_size,
            inverse_cell_size: 1.0 / cell_size,
            columns,
            rows,
            heads: vec![NONE; columns as usize * rows as usize],
            links: Vec::new(),
            len: 0,
        }
    }

    /// Side of a cell, in metres.
    pub fn cell_size(&self) -> f32 {
        self.cell_size
    }

    /// Cells across and down.
    pub fn dimensions(&self) -> (u32, u32) {
        (self.columns, self.rows)
    }

    /// Items in the grid.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the grid holds no item.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for item ids below `ids` so that inserting them does not allocate.
    pub fn reserve_ids(&mut self, ids: usize) {
        if self.links.len() < ids {
            self.links.resize(ids, CellEntry::ABSENT);
        }
    }

    /// Whether `id` is in the grid.
    pub fn contains(&self, id: u32) -> bool {
        self.links
            .get(id as usize)
            .is_some_and(|link| link.cell != NONE)
    }

    /// The column and row holding `position`, clamped to the grid (NaN lands in cell 0).
    #[inline]
    fn column_row(&self, position: Vec2) -> (u32, u32) {
        // Float-to-int `as` saturates (negatives and NaN to 0), then the grid's edge clamps.
        let column = ((position.x * self.inverse_cell_size) as u32).min(self.columns - 1);
        let row = ((position.y * self.inverse_cell_size) as u32).min(self.rows - 1);
        (column, row)
    }

    #[inline]
    fn cell_of(&self, position: Vec2) -> u32 {
        let (column, row) = self.column_row(position);
        row * self.columns + column
    }

    /// Adds item `id` at `position`. An id already present is moved instead.
    pub fn insert(&mut self, id: u32, position: Vec2) {
        if self.contains(id) {
            self.update(id, position);
            return;
        }
        self.reserve_ids(id as usize + 1);
        let cell = self.cell_of(position);
        self.link(id, cell);
        self.len += 1;
    }

    /// Moves item `id` to `position`; O(1), and free when it stays in its cell. Returns
    /// whether it changed cell. An absent id is inserted.
    #[inline]
    pub fn update(&mut self, id: u32, position: Vec2) -> bool {
        let cell = self.cell_of(position);
        match self.links.get(id as usize).copied() {
            Some(link) if link.cell == cell => false,
            Some(link) if link.cell != NONE => {
                self.unlink(id);
                self.link(id, cell);
                true
            }
            _ => {
                self.insert(id, position);
                true
            }
        }
    }

    /// Removes item `id`; returns whether it was there.
    pub fn remove(&mut self, id: u32) -> bool {
        if !self.contains(id) {
            return false;
        }
        self.unlink(id);
        self.len -= 1;
        true
    }

    /// Renames item `from` to `to`, keeping its cell (for owners that keep their items dense
    /// by moving the last one into a freed slot). `to` must not be in the grid; an absent
    /// `from` leaves `to` absent too.
    pub fn relabel(&mut self, from: u32, to: u32) {
        debug_assert!(!self.contains(to), "relabel target {to} is in the grid");
        if !self.contains(from) {
            return;
        }
        self.reserve_ids(to as usize + 1);
        let link = self.links[from as usize];
        if link.prev == NONE {
            self.heads[link.cell as usize] = to;
        } else {
            self.links[link.prev as usize].next = to;
        }
        if link.next != NONE {
            self.links[link.next as usize].prev = to;
        }
        self.links[to as usize] = link;
        self.links[from as usize] = CellEntry::ABSENT;
    }

    /// Removes every item, keeping the allocations.
    pub fn clear(&mut self) {
        self.heads.fill(NONE);
        self.links.fill(CellEntry::ABSENT);
        self.len = 0;
    }

    #[inline]
    fn link(&mut self, id: u32, cell: u32) {
        let head = self.heads[cell as usize];
        if head != NONE {
            self.links[head as usize].prev = id;
        }
        self.links[id as usize] = CellEntry {
            cell,
            prev: NONE,
            next: head,
        };
        self.heads[cell as usize] = id;
    }

    #[inline]
    fn unlink(&mut self, id: u32) {
        let link = self.links[id as usize];
        if link.prev == NONE {
            self.heads[link.cell as usize] = link.next;
        } else {
            self.links[link.prev as usize].next = link.next;
        }
        if link.next != NONE {
            self.links[link.next as usize].prev = link.prev;
        }
        self.links[id as usize] = CellEntry::ABSENT;
    }

    /// Calls `visit` with every item in the cells `area` touches (each item once), in a
    /// deterministic order: cells row by row, each cell's items newest first.
    #[inline]
    pub fn for_each(&self, area: Aabb, mut visit: impl FnMut(u32)) {
        let (column0, row0) = self.column_row(area.min);
        let (column1, row1) = self.column_row(area.max);
        for row in row0..=row1 {
            for column in column0..=column1 {
                let mut id = self.heads[(row * self.columns + column) as usize];
                while id != NONE {
                    visit(id);
                    id = self.links[id as usize].next;
                }
            }
        }
    }

    /// Copies the items out cell by cell into `packed`, each beside `value(id)`, for
    /// [`for_each_packed`](Self::for_each_packed). Valid until the grid next changes.
    pub fn pack<T: Copy>(&self, value: impl Fn(u32) -> T, packed: &mut PackedCells<T>) {
        packed.entries.clear();
        packed.place.resize(self.links.len(), NONE);
        for (first, link) in self.links.iter().enumerate() {
            // Each cell's run starts at its list's head: the item no other precedes.
            if link.cell == NONE || link.prev != NONE {
                continue;
            }
            packed.place[first] = packed.entries.len() as u32;
            let mut id = first as u32;
            while id != NONE {
                packed.entries.push(PackedEntry {
                    cell: link.cell,
                    id,
                    value: value(id),
                });
                id = self.links[id as usize].next;
            }
        }
    }

    /// As [`for_each`](Self::for_each), in the same order, reading each cell's items and
    /// their values from `packed` (made by [`pack`](Self::pack) since the grid last
    /// changed).
    #[inline]
    pub fn for_each_packed<T: Copy>(
        &self,
        packed: &PackedCells<T>,
        area: Aabb,
        mut visit: impl FnMut(u32, T),
    ) {
        let (column0, row0) = self.column_row(area.min);
        let (column1, row1) = self.column_row(area.max);
        for row in row0..=row1 {
            for column in column0..=column1 {
                let cell = row * self.columns + column;
                let head = self.heads[cell as usize];
                if head == NONE {
                    continue;
                }
                let run = &packed.entries[packed.place[head as usize] as usize..];
                for entry in run.iter().take_while(|entry| entry.cell == cell) {
                    visit(entry.id, entry.value);
                }
            }
        }
    }

    /// Replaces `out` with the items in the cells `area` touches (candidates: the caller
    /// tests exact shapes). Reuses `out`'s allocation.
    pub fn query(&self, area: Aabb, out: &mut Vec<u32>) {
        out.clear();
        self.for_each(area, |id| out.push(id));
    }

    /// Replaces `out` with the items in the cells a circle's bounding square touches.
    pub fn query_circle(&self, center: Vec2, radius: f32, out: &mut Vec<u32>) {
        self.query(Aabb::around_circle(center, radius), out);
    }

    /// Checks the grid against the owner's view: exactly the items `expected` yields, each in
    /// the cell of its position, and every cell's list well formed. O(items + cells); for
    /// tests and debugging.
    pub fn check(&self, expected: impl IntoIterator<Item = (u32, Vec2)>) -> Result<(), String> {
        let mut seen = 0usize;
        for (id, position) in expected {
            seen += 1;
            let Some(link) = self.links.get(id as usize).filter(|link| link.cell != NONE) else {
                return Err(format!("item {id} at {position:?} is not in the grid"));
            };
            let cell = self.cell_of(position);
            if link.cell != cell {
                return Err(format!(
                    "item {id} at {position:?} is in cell {} instead of {cell}",
                    link.cell
                ));
            }
        }
        if seen != self.len {
            return Err(format!("grid holds {} items, the owner {seen}", self.len));
        }
        let mut linked = 0usize;
        for (cell, &head) in self.heads.iter().enumerate() {
            let mut prev = NONE;
            let mut id = head;
            while id != NONE {
                let link = self.links[id as usize];
                if link.cell != cell as u32 || link.prev != prev {
                    return Err(format!("cell {cell}'s list is broken at item {id}"));
                }
                linked += 1;
                if linked > self.len {
                    return Err(format!("cell {cell}'s list loops"));
                }
                prev = id;
                id = link.next;
            }
        }
        if linked != self.len {
            return Err(format!(
                "{linked} items linked in cells, {} counted",
                self.len
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(grid: &SpatialGrid, area: Aabb) -> Vec<u32> {
        let mut out = Vec::new();
        grid.query(area, &mut out);
        out.sort_unstable();
        out
    }

    #[test]
    fn queries_find_items_in_touched_cells_only() {
        let mut grid = SpatialGrid::new(Vec2::new(10.0, 10.0), 1.0);
        grid.insert(0, Vec2::new(0.5, 0.5));
        grid.insert(1, Vec2::new(1.5, 0.5));
        grid.insert(2, Vec2::new(5.5, 5.5));
        grid.insert(3, Vec2::new(9.9, 9.9));
        assert_eq!(sorted(&grid, Aabb::from_coords(0.0, 0.0, 1.2, 0.9)), [0, 1]);
        assert_eq!(sorted(&grid, Aabb::from_coords(0.0, 0.0, 0.9, 0.9)), [0]);
        assert_eq!(
            sorted(&grid, Aabb::around_circle(Vec2::new(5.0, 5.0), 0.6)),
            [2]
        );
        assert_eq!(
            sorted(&grid, Aabb::from_coords(0.0, 0.0, 10.0, 10.0)),
            [0, 1, 2, 3]
        );
        grid.check([
            (0, Vec2::new(0.5, 0.5)),
            (1, Vec2::new(1.5, 0.5)),
            (2, Vec2::new(5.5, 5.5)),
            (3, Vec2::new(9.9, 9.9)),
        ])
        .unwrap();
    }

    #[test]
    fn outside_positions_clamp_to_the_edge_cells() {
        let mut grid = SpatialGrid::new(Vec2::new(4.0, 4.0), 1.0);
        grid.insert(0, Vec2::new(-3.0, 100.0));
        grid.insert(1, Vec2::new(f32::NAN, f32::NAN));
        grid.insert(2, Vec2::new(f32::INFINITY, f32::NEG_INFINITY));
        assert_eq!(sorted(&grid, Aabb::from_coords(0.0, 3.5, 0.5, 3.9)), [0]);
        assert_eq!(sorted(&grid, Aabb::from_coords(0.0, 0.0, 0.5, 0.5)), [1]);
        assert_eq!(sorted(&grid, Aabb::from_coords(3.5, 0.0, 9.0, 0.5)), [2]);
    }

    #[test]
    fn update_moves_between_cells_and_remove_unlinks() {
        let mut grid = SpatialGrid::new(Vec2::new(10.0, 10.0), 2.0);
        for id in 0..5 {
            grid.insert(id, Vec2::new(1.0, 1.0));
        }
        assert!(!grid.update(2, Vec2::new(1.5, 1.5)), "same cell");
        assert!(grid.update(2, Vec2::new(7.0, 7.0)));
        assert!(grid.remove(0));
        assert!(!grid.remove(0), "already gone");
        assert!(grid.remove(4));
        assert_eq!(sorted(&grid, Aabb::from_coords(0.0, 0.0, 1.0, 1.0)), [1, 3]);
        assert_eq!(sorted(&grid, Aabb::from_coords(6.5, 6.5, 7.0, 7.0)), [2]);
        assert_eq!(grid.len(), 3);
        grid.check([
            (1, Vec2::new(1.0, 1.0)),
            (2, Vec2::new(7.0, 7.0)),
            (3, Vec2::new(1.0, 1.0)),
        ])
        .unwrap();
        let error = grid.check([(1, Vec2::new(9.0, 9.0))]).unwrap_err();
        assert!(error.contains("item 1"), "{error}");
    }

    #[test]
    fn relabel_keeps_the_cell_and_the_list() {
        let mut grid = SpatialGrid::new(Vec2::new(10.0, 10.0), 2.0);
        for id in 0..4 {
            grid.insert(id, Vec2::new(3.0, 3.0));
        }
        // Remove 1, move the last item (3) into slot 1, as a dense owner does.
        grid.remove(1);
        grid.relabel(3, 1);
        assert!(!grid.contains(3));
        assert_eq!(
            sorted(&grid, Aabb::from_coords(2.0, 2.0, 3.0, 3.0)),
            [0, 1, 2]
        );
        grid.check([
            (0, Vec2::new(3.0, 3.0)),
            (1, Vec2::new(3.0, 3.0)),
            (2, Vec2::new(3.0, 3.0)),
        ])
        .unwrap();
    }

    #[test]
    fn steady_state_queries_and_updates_do_not_grow_buffers() {
        let mut grid = SpatialGrid::new(Vec2::new(50.0, 50.0), 1.0);
        grid.reserve_ids(100);
        for id in 0..100 {
            grid.insert(id, Vec2::new(id as f32 * 0.5, 25.0));
        }
        let mut out = Vec::with_capacity(100);
        let capacity = (out.capacity(), grid.links.capacity());
        for step in 0..50 {
            for id in 0..100 {
                grid.update(id, Vec2::new(id as f32 * 0.5, step as f32));
            }
            grid.query(Aabb::from_coords(0.0, 0.0, 50.0, 50.0), &mut out);
            assert_eq!(out.len(), 100);
        }
        assert_eq!((out.capacity(), grid.links.capacity()), capacity);
    }

    #[test]
    fn packed_cells_are_visited_as_the_lists_are_with_their_values() {
        let mut grid = SpatialGrid::new(Vec2::new(8.0, 8.0), 1.0);
        // A crowd over a few cells, some moved and removed so that lists are out of id
        // order, and an id that is not in the grid.
        let position =
            |id: u32| Vec2::new(2.0 + (id % 7) as f32 * 0.31, 3.0 + (id % 5) as f32 * 0.27);
        for id in 0..40 {
            grid.insert(id, position(id));
        }
        for id in (0..40).step_by(3) {
            grid.update(id, position(id + 1));
        }
        grid.remove(17);
        let value = |id: u32| id * 10;
        let mut packed = PackedCells::default();
        grid.pack(value, &mut packed);
        for area in [
            Aabb::from_coords(0.0, 0.0, 8.0, 8.0),
            Aabb::around_circle(Vec2::new(3.0, 3.5), 0.8),
            Aabb::from_coords(2.5, 3.2, 2.6, 3.3),
            Aabb::from_coords(6.0, 6.0, 7.0, 7.0),
        ] {
            let mut listed = Vec::new();
            grid.for_each(area, |id| listed.push((id, value(id))));
            let mut read = Vec::new();
            grid.for_each_packed(&packed, area, |id, value| read.push((id, value)));
            assert_eq!(read, listed, "{area:?}");
        }
        let mut all = Vec::new();
        grid.for_each_packed(&packed, Aabb::from_coords(0.0, 0.0, 8.0, 8.0), |id, _| {
            all.push(id)
        });
        all.sort_unstable();
        let expected: Vec<u32> = (0..40).filter(|&id| id != 17).collect();
        assert_eq!(all, expected);
    }
}
