//! Merging wall tiles into few boxes: runs of wall tiles along each row, and runs with the
//! same span in consecutive rows merged into one rectangle.
//!
//! Not the fewest rectangles possible (that is a harder problem), but exact (the boxes
//! cover the wall tiles and nothing else), disjoint, linear in the map's size, and a solid
//! block or a straight wall of any length becomes a single box. Every box is at least one
//! tile on each side, which the no-tunnelling argument in [`crate::movement`] relies on.

/// A rectangle of whole tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TileRect {
    pub(crate) x: u32,
    pub(crate) y: u32,
    pub(crate) width: u32,
    pub(crate) height: u32,
}

/// The rectangles covering the `true` cells of a `width` × `height` row-major grid, sorted
/// top to bottom, then left to right.
pub(crate) fn merge_tiles(width: u32, height: u32, is_wall: &[bool]) -> Vec<TileRect> {
    debug_assert_eq!(is_wall.len(), width as usize * height as usize);
    let mut done = Vec::new();
    // Rectangles reaching the previous row, by ascending x; each can grow by one row.
    let mut open: Vec<TileRect> = Vec::new();
    let mut next_open: Vec<TileRect> = Vec::new();
    for y in 0..height {
        let row = &is_wall[(y * width) as usize..((y + 1) * width) as usize];
        let mut candidates = open.drain(..).peekable();
        let mut x = 0;
        while x < width {
            if !row[x as usize] {
                x += 1;
                continue;
            }
            let start = x;
            while x < width && row[x as usize] {
                x += 1;
            }
            let span = x - start;
            // Rectangles left of this run cannot continue into this row.
            while let Some(rect) = candidates.next_if(|rect| rect.x < start) {
                done.push(rect);
            }
            match candidates.next_if(|rect| rect.x == start && rect.width == span) {
                Some(rect) => next_open.push(TileRect {
                    height: rect.height + 1,
                    ..rect
                }),
                None => next_open.push(TileRect {
                    x: start,
                    y,
                    width: span,
                    height: 1,
                }),
            }
        }
        done.extend(candidates);
        std::mem::swap(&mut open, &mut next_open);
    }
    done.append(&mut open);
    done.sort_unstable_by_key(|rect| (rect.y, rect.x));
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses a picture: `#` is a wall, anything else is floor.
    fn grid(picture: &str) -> (u32, u32, Vec<bool>) {
        let rows: Vec<&str> = picture
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let width = rows[0].len() as u32;
        let cells = rows
            .iter()
            .flat_map(|row| row.chars().map(|c| c == '#'))
            .collect();
        (width, rows.len() as u32, cells)
    }

    /// Checks that the rectangles cover exactly the wall cells, each once.
    fn assert_exact_cover(width: u32, height: u32, cells: &[bool], rects: &[TileRect]) {
        let mut covered = vec![0u32; cells.len()];
        for rect in rects {
            assert!(rect.width >= 1 && rect.height >= 1, "{rect:?} is empty");
            for y in rect.y..rect.y + rect.height {
                for x in rect.x..rect.x + rect.width {
                    assert!(x < width && y < height, "{rect:?} leaves the map");
                    covered[(y * width + x) as usize] += 1;
                }
            }
        }
        for (i, (&wall, &count)) in cells.iter().zip(&covered).enumerate() {
            let expected = u32::from(wall);
            assert_eq!(
                count,
                expected,
                "tile ({}, {}) covered {count} times",
                i as u32 % width,
                i as u32 / width
            );
        }
    }

    #[test]
    fn a_solid_block_is_one_box() {
        let (w, h, cells) = grid(
            "
            ......
            .####.
            .####.
            .####.
            ......",
        );
        let rects = merge_tiles(w, h, &cells);
        assert_eq!(
            rects,
            [TileRect {
                x: 1,
                y: 1,
                width: 4,
                height: 3
            }]
        );
    }

    #[test]
    fn a_room_outline_is_four_boxes() {
        let (w, h, cells) = grid(
            "
            ########
            #......#
            #......#
            ########",
        );
        let rects = merge_tiles(w, h, &cells);
        assert_exact_cover(w, h, &cells, &rects);
        assert_eq!(rects.len(), 4, "{rects:?}");
    }

    #[test]
    fn an_l_shape_is_two_boxes() {
        let (w, h, cells) = grid(
            "
            #...
            #...
            #...
            ####",
        );
        let rects = merge_tiles(w, h, &cells);
        assert_exact_cover(w, h, &cells, &rects);
        assert_eq!(rects.len(), 2, "{rects:?}");
    }

    #[test]
    fn irregular_shapes_are_covered_exactly() {
        let (w, h, cells) = grid(
            "
            #.##.#####
            ####.#...#
            .#...#.#.#
            .#####.#..
            ...#...###
            #.##.#.#.#",
        );
        let rects = merge_tiles(w, h, &cells);
        assert_exact_cover(w, h, &cells, &rects);
        let sorted = rects
            .windows(2)
            .all(|pair| (pair[0].y, pair[0].x) < (pair[1].y, pair[1].x));
        assert!(sorted, "{rects:?}");
    }

    #[test]
    fn pseudo_random_grids_are_covered_exactly() {
        let mut state = 0x2545_f491_u32;
        for _ in 0..50 {
            let (w, h) = (17, 13);
            let cells: Vec<bool> = (0..w * h)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    !state.is_multiple_of(3)
                })
                .collect();
            let rects = merge_tiles(w, h, &cells);
            assert_exact_cover(w, h, &cells, &rects);
        }
    }
}
