//! [`Frame`]: the world as every snapshot of one tick sees it, captured once.

use super::{EntityId, EntityIds, EntityState, PackedState, SnapshotConfig, SnapshotSchema};
use crate::geom::Vec2;
use crate::world::World;

/// What only the player themself is told (see the snapshot's own-state block).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct OwnState {
    /// Exact, so that client prediction reconciles bit for bit.
    pub position: Vec2,
    pub respawn_in: u32,
    pub kills: u32,
    pub deaths: u32,
    pub score: u32,
    pub last_input: Option<u16>,
}

/// A bullet, quantized.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct BulletState {
    pub position: Vec2,
    pub x: u16,
    pub y: u16,
    pub direction: u16,
    pub owner: EntityId,
}

/// A player of the frame as its cell lists it: what the interest scan reads of each one
/// it looks at, side by side, so that a cell's run is read in order rather than through
/// `ids` and then `positions`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CellPlayer {
    pub position: Vec2,
    pub id: EntityId,
}

/// A coarse uniform grid, rebuilt every tick by counting sort: the items of cell `c` are
/// `items[start[c]..start[c + 1]]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct CellIndex {
    pub(crate) start: Vec<u32>,
    pub(crate) items: Vec<u32>,
    cells_of: Vec<u32>,
}

impl CellIndex {
    fn rebuild(&mut self, cells: usize, cell_of: impl Iterator<Item = u32>) {
        self.cells_of.clear();
        self.cells_of.extend(cell_of);
        self.start.clear();
        self.start.resize(cells + 1, 0);
        for &cell in &self.cells_of {
            self.start[cell as usize + 1] += 1;
        }
        for c in 0..cells {
            self.start[c + 1] += self.start[c];
        }
        self.items.clear();
        self.items.resize(self.cells_of.len(), 0);
        // start[c] is a write cursor; once filled it has moved to the end of cell c.
        for (item, &cell) in self.cells_of.iter().enumerate() {
            let cursor = &mut self.start[cell as usize];
            self.items[*cursor as usize] = item as u32;
            *cursor += 1;
        }
        for c in (0..cells).rev() {
            self.start[c + 1] = self.start[c];
        }
        self.start[0] = 0;
    }

    /// The cell item `item` is in.
    pub(crate) fn cell_of(&self, item: usize) -> u32 {
        self.cells_of[item]
    }

    #[inline]
    pub(crate) fn cell(&self, cell: usize) -> &[u32] {
        &self.items[self.range(cell)]
    }

    /// Where cell `cell`'s items lie in `items` (and in anything laid out in its order).
    #[inline]
    pub(crate) fn range(&self, cell: usize) -> std::ops::Range<usize> {
        // One bounds check for both ends of the cell.
        let bounds = &self.start[cell..cell + 2];
        bounds[0] as usize..bounds[1] as usize
    }
}

/// Every player and bullet of one tick, quantized, with an interest grid over both. The
/// room captures it once per tick; every recipient's snapshot reads it.
#[derive(Debug, Clone)]
pub struct Frame {
    pub(crate) schema: SnapshotSchema,
    pub(crate) tick: u64,
    /// By entity id.
    pub(crate) present: Vec<bool>,
    pub(crate) states: Vec<PackedState>,
    pub(crate) positions: Vec<Vec2>,
    pub(crate) own: Vec<OwnState>,
    /// The ids present, in world slot order.
    pub(crate) ids: Vec<EntityId>,
    pub(crate) bullets: Vec<BulletState>,
    pub(crate) cell_size: f32,
    pub(crate) columns: u32,
    pub(crate) rows: u32,
    /// Items are indices into `ids`.
    pub(crate) players_by_cell: CellIndex,
    /// `players_by_cell`'s items in its order, each with its id and position.
    pub(crate) cell_players: Vec<CellPlayer>,
    /// Items are indices into `bullets`.
    pub(crate) bullets_by_cell: CellIndex,
}

impl Frame {
    /// An empty frame for a map of `map_size`.
    pub fn new(schema: SnapshotSchema, map_size: Vec2, config: &SnapshotConfig) -> Self {
        let cell_size = config.interest_cell_size;
        let columns = ((map_size.x / cell_size).ceil() as u32).max(1);
        let rows = ((map_size.y / cell_size).ceil() as u32).max(1);
        Self {
            schema,
            tick: 0,
            present: Vec::new(),
            states: Vec::new(),
            positions: Vec::new(),
            own: Vec::new(),
            ids: Vec::new(),
            bullets: Vec::new(),
            cell_size,
            columns,
            rows,
            players_by_cell: CellIndex::default(),
            cell_players: Vec::new(),
            bullets_by_cell: CellIndex::default(),
        }
    }

    /// Captures `world` (players without an id in `ids` are left out). Allocates only when
    /// the world has grown past every earlier capture.
    pub fn capture(&mut self, world: &World, ids: &EntityIds) {
        self.tick = world.tick();
        for &id in &self.ids {
            self.present[usize::from(id)] = false;
        }
        self.ids.clear();
        let bound = ids.id_bound();
        if self.present.len() < bound {
            self.present.resize(bound, false);
            self.states.resize(bound, PackedState::default());
            self.positions.resize(bound, Vec2::ZERO);
            self.own.resize(bound, OwnState::default());
        }
        let tick = world.tick();
        for player in world.players() {
            let Some(id) = ids.get(player.key()) else {
                continue;
            };
            let index = usize::from(id);
            let position = player.position();
            let (x, y) = self.schema.quantize_position(position);
            self.present[index] = true;
            self.positions[index] = position;
            self.states[index] = PackedState::from(&EntityState {
                x,
                y,
                aim: SnapshotSchema::quantize_angle(player.aim()),
                health: player.health().min(self.schema.max_health()),
                alive: player.is_alive(),
            });
            let stats = player.stats();
            self.own[index] = OwnState {
                position,
                respawn_in: player.respawn_tick().map_or(0, |at| {
                    at.saturating_sub(tick).min(u64::from(u32::MAX)) as u32
                }),
                kills: stats.kills,
                deaths: stats.deaths,
                score: stats.score,
                last_input: player.last_input_sequence(),
            };
            self.ids.push(id);
        }
        self.bullets.clear();
        for bullet in world.bullets() {
            let position = bullet.position();
            let (x, y) = self.schema.quantize_position(position);
            let velocity = bullet.velocity();
            self.bullets.push(BulletState {
                position,
                x,
                y,
                direction: SnapshotSchema::quantize_angle(velocity.y.atan2(velocity.x)),
                owner: ids.get(bullet.owner()).unwrap_or(u16::MAX),
            });
        }
        let cells = (self.columns * self.rows) as usize;
        let (cell_size, columns, rows) = (self.cell_size, self.columns, self.rows);
        let cell_of = |p: Vec2| cell_index(p, cell_size, columns, rows);
        let positions = &self.positions;
        self.players_by_cell.rebuild(
            cells,
            self.ids
                .iter()
                .map(|&id| cell_of(positions[usize::from(id)])),
        );
        self.cell_players.clear();
        let ids = &self.ids;
        self.cell_players
            .extend(self.players_by_cell.items.iter().map(|&item| {
                let id = ids[item as usize];
                CellPlayer {
                    position: positions[usize::from(id)],
                    id,
                }
            }));
        self.bullets_by_cell
            .rebuild(cells, self.bullets.iter().map(|b| cell_of(b.position)));
    }

    /// The tick captured.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The quantization grids.
    pub fn schema(&self) -> &SnapshotSchema {
        &self.schema
    }

    /// An entity's quantized state, if it is in the frame.
    pub fn state(&self, id: EntityId) -> Option<EntityState> {
        let index = usize::from(id);
        (*self.present.get(index)?).then(|| self.states[index].into())
    }

    /// Ids in the frame.
    pub fn ids(&self) -> &[EntityId] {
        &self.ids
    }

    /// An entity's exact position, if it is in the frame.
    pub fn position(&self, id: EntityId) -> Option<Vec2> {
        let index = usize::from(id);
        (*self.present.get(index)?).then(|| self.positions[index])
    }

    /// The players in cell `cell`, in the order its list holds them.
    #[inline]
    pub(crate) fn players_in_cell(&self, cell: usize) -> &[CellPlayer] {
        &self.cell_players[self.players_by_cell.range(cell)]
    }

    /// The index of the cell at column `x`, row `y`, if the grid has one there.
    #[inline]
    pub(crate) fn cell_at(&self, x: i32, y: i32) -> Option<usize> {
        // Negative coordinates wrap to large unsigned ones: one comparison per axis.
        let (x, y) = (x as u32, y as u32);
        (x < self.columns && y < self.rows).then(|| (y * self.columns + x) as usize)
    }

    pub(crate) fn cell_coords(&self, p: Vec2) -> (i32, i32) {
        let cell = cell_index(p, self.cell_size, self.columns, self.rows);
        ((cell % self.columns) as i32, (cell / self.columns) as i32)
    }
}

fn cell_index(p: Vec2, cell_size: f32, columns: u32, rows: u32) -> u32 {
    // `as` saturates (NaN to 0), so any position lands in some cell.
    let cx = ((p.x / cell_size) as u32).min(columns - 1);
    let cy = ((p.y / cell_size) as u32).min(rows - 1);
    cy * columns + cx
}
