//! The client side: [`SnapshotDecoder`] turns snapshots back into the server's view.

use tickwire_wire::{BitReader, DecodeError};

use super::{
    EntityId, EntityState, EntityView, MAX_ENTITY_ID, MAX_VIEW, SnapshotConfig, SnapshotSchema,
};
use crate::geom::Vec2;

/// The recipient's own state, exact where prediction needs it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SelfView {
    /// In play.
    pub alive: bool,
    /// Exact position (`f32` bits as the server has them).
    pub position: Vec2,
    /// Aim step on [`AIM`](super::AIM).
    pub aim: u16,
    /// Health.
    pub health: u16,
    /// While dead: ticks until the respawn.
    pub respawn_in: u32,
    /// Kills so far.
    pub kills: u32,
    /// Deaths so far.
    pub deaths: u32,
    /// Score so far.
    pub score: u32,
}

/// A bullet near the recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BulletView {
    /// Position step on the x grid.
    pub x: u16,
    /// Position step on the y grid.
    pub y: u16,
    /// Direction of flight, a step on [`AIM`](super::AIM).
    pub direction: u16,
    /// Fired by the recipient.
    pub mine: bool,
}

/// A decoded snapshot: the whole view after applying the delta.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecodedSnapshot {
    /// Server tick (low 32 bits).
    pub tick: u32,
    /// The tick this was a delta against; `None` for a full snapshot.
    pub baseline: Option<u32>,
    /// Newest input sequence the server applied for the recipient.
    pub last_input: Option<u16>,
    /// The recipient's own state.
    pub me: SelfView,
    /// Every other player in view, ordered by id.
    pub entities: Vec<EntityView>,
    /// Ids destroyed by this snapshot (left the view), ascending.
    pub destroyed: Vec<EntityId>,
    /// Ids created by this snapshot, ascending.
    pub created: Vec<EntityId>,
    /// Ids updated by this snapshot, ascending.
    pub updated: Vec<EntityId>,
    /// Bullets near the recipient, whole every snapshot.
    pub bullets: Vec<BulletView>,
}

/// Why a snapshot could not be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes do not follow the format.
    #[error("malformed snapshot: {0}")]
    Malformed(#[from] DecodeError),
    /// The snapshot is a delta against a tick this decoder does not hold.
    #[error("snapshot {tick} is a delta against {baseline}, which this client does not hold")]
    UnknownBaseline {
        /// The snapshot's tick.
        tick: u32,
        /// Its baseline.
        baseline: u32,
    },
    /// Well formed but contradicting the baseline (or the format's limits).
    #[error("inconsistent snapshot: {0}")]
    Inconsistent(&'static str),
}

/// Applies snapshots to the baselines they were encoded against and remembers the last
/// `history` views, as the server's [`ClientSnapshots`](super::ClientSnapshots) does. Ack
/// [`newest`](Self::newest) in every input.
///
/// Every size is bounded by the format (255 entities, 63 bullets) before anything is
/// stored, so hostile bytes cost at most that.
#[derive(Debug, Clone)]
pub struct SnapshotDecoder {
    schema: SnapshotSchema,
    history: Vec<(Option<u32>, Vec<EntityView>)>,
    newest: Option<u32>,
    current: DecodedSnapshot,
    updates: Vec<(EntityId, EntityState)>,
}

impl SnapshotDecoder {
    /// A decoder for the grids of `schema`, remembering `config.history` views.
    pub fn new(schema: SnapshotSchema, config: &SnapshotConfig) -> Self {
        Self {
            schema,
            history: vec![(None, Vec::new()); config.history.max(2)],
            newest: None,
            current: DecodedSnapshot::default(),
            updates: Vec::new(),
        }
    }

    /// The newest tick decoded: what the client acknowledges.
    pub fn newest(&self) -> Option<u32> {
        self.newest
    }

    /// The snapshot decoded last (after a successful [`decode`](Self::decode)).
    pub fn current(&self) -> &DecodedSnapshot {
        &self.current
    }

    /// The view the decoder holds for `tick`.
    pub fn view(&self, tick: u32) -> Option<&[EntityView]> {
        let (held, view) = &self.history[tick as usize % self.history.len()];
        (*held == Some(tick)).then_some(view.as_slice())
    }

    /// Decodes `bytes` against the baseline it names. On error the history and
    /// [`newest`](Self::newest) are untouched (nothing is stored or acknowledged) and
    /// [`current`](Self::current) is unspecified until the next success.
    pub fn decode(&mut self, bytes: &[u8]) -> Result<&DecodedSnapshot, SnapshotError> {
        let mut out = std::mem::take(&mut self.current);
        let mut updates = std::mem::take(&mut self.updates);
        let result = decode_into(&self.schema, &self.history, bytes, &mut out, &mut updates);
        self.updates = updates;
        if let Err(error) = result {
            self.current = out;
            return Err(error);
        }
        let tick = out.tick;
        let slot = tick as usize % self.history.len();
        let (held, view) = &mut self.history[slot];
        *held = Some(tick);
        view.clear();
        view.extend_from_slice(&out.entities);
        let newer = self.newest.is_none_or(|newest| {
            let ahead = tick.wrapping_sub(newest);
            ahead != 0 && ahead < 1 << 31
        });
        if newer {
            self.newest = Some(tick);
        }
        self.current = out;
        Ok(&self.current)
    }
}

/// The front of a snapshot: its tick, its baseline, the newest input applied and the
/// recipient's own state. They come first, so a client that only follows itself (a
/// load-test bot) reads them without holding the baselines a full decode needs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SnapshotHeader {
    /// Server tick (low 32 bits).
    pub tick: u32,
    /// `tick − baseline`, for a delta; `None` for a full snapshot.
    pub baseline_age: Option<u8>,
    /// Newest input sequence the server applied for the recipient.
    pub last_input: Option<u16>,
    /// The recipient's own state.
    pub me: SelfView,
}

impl SnapshotHeader {
    /// Reads the header of `bytes`, encoded for `schema`; the rest is not looked at.
    pub fn read(schema: &SnapshotSchema, bytes: &[u8]) -> Result<Self, SnapshotError> {
        read_header(&mut BitReader::new(bytes), schema)
    }
}

fn read_header(
    r: &mut BitReader<'_>,
    schema: &SnapshotSchema,
) -> Result<SnapshotHeader, SnapshotError> {
    let tick = r.read_uint(32)? as u32;
    let baseline_age = if r.read_bool()? {
        let age = r.read_uint(8)? as u8;
        if age == 0 {
            return Err(SnapshotError::Inconsistent(
                "baseline age outside the history",
            ));
        }
        Some(age)
    } else {
        None
    };
    let last_input = if r.read_bool()? {
        Some(r.read_uint(16)? as u16)
    } else {
        None
    };
    let alive = r.read_bool()?;
    let position = Vec2::new(r.read_f32()?, r.read_f32()?);
    if !position.is_finite() {
        return Err(SnapshotError::Inconsistent("own position is not finite"));
    }
    let aim = r.read_uint(10)? as u16;
    let health = read_health(r, schema)?;
    let respawn_in = if alive { 0 } else { read_u32(r)? };
    let me = SelfView {
        alive,
        position,
        aim,
        health,
        respawn_in,
        kills: read_u32(r)?,
        deaths: read_u32(r)?,
        score: read_u32(r)?,
    };
    Ok(SnapshotHeader {
        tick,
        baseline_age,
        last_input,
        me,
    })
}

fn decode_into(
    schema: &SnapshotSchema,
    history: &[(Option<u32>, Vec<EntityView>)],
    bytes: &[u8],
    out: &mut DecodedSnapshot,
    updates: &mut Vec<(EntityId, EntityState)>,
) -> Result<(), SnapshotError> {
    let (x_bits, y_bits) = schema.position_bits();
    let mut r = BitReader::new(bytes);
    let header = read_header(&mut r, schema)?;
    let tick = header.tick;
    let baseline = match header.baseline_age {
        Some(age) if usize::from(age) >= history.len() => {
            return Err(SnapshotError::Inconsistent(
                "baseline age outside the history",
            ));
        }
        Some(age) => Some(tick.wrapping_sub(u32::from(age))),
        None => None,
    };
    let base: &[EntityView] = match baseline {
        Some(baseline) => {
            let (held, view) = &history[baseline as usize % history.len()];
            if *held != Some(baseline) {
                return Err(SnapshotError::UnknownBaseline { tick, baseline });
            }
            view
        }
        None => &[],
    };
    out.tick = tick;
    out.baseline = baseline;
    out.last_input = header.last_input;
    out.me = header.me;
    out.destroyed.clear();
    out.created.clear();
    out.updated.clear();
    out.entities.clear();
    out.bullets.clear();
    updates.clear();
    let count = r.read_uint(8)? as usize;
    let mut ids = IdReader::default();
    for _ in 0..count {
        let id = ids.read(&mut r)?;
        if base.binary_search_by_key(&id, |e| e.id).is_err() {
            return Err(SnapshotError::Inconsistent(
                "destroy of an entity not in view",
            ));
        }
        out.destroyed.push(id);
    }
    let count = r.read_uint(8)? as usize;
    let mut ids = IdReader::default();
    for _ in 0..count {
        let id = ids.read(&mut r)?;
        let state = EntityState {
            x: read_step(&mut r, x_bits, schema.position_x().last_step())?,
            y: read_step(&mut r, y_bits, schema.position_y().last_step())?,
            aim: r.read_uint(10)? as u16,
            health: read_health(&mut r, schema)?,
            alive: r.read_bool()?,
        };
        out.created.push(id);
        out.entities.push(EntityView { id, state });
    }
    let count = r.read_uint(8)? as usize;
    let mut ids = IdReader::default();
    for _ in 0..count {
        let id = ids.read(&mut r)?;
        let Ok(index) = base.binary_search_by_key(&id, |e| e.id) else {
            return Err(SnapshotError::Inconsistent(
                "update of an entity not in view",
            ));
        };
        let old = base[index].state;
        let mut state = old;
        if r.read_bool()? {
            state.x = read_axis(&mut r, old.x, x_bits, schema.position_x().last_step())?;
            state.y = read_axis(&mut r, old.y, y_bits, schema.position_y().last_step())?;
        }
        if r.read_bool()? {
            state.aim = r.read_uint(10)? as u16;
        }
        if r.read_bool()? {
            state.health = read_health(&mut r, schema)?;
            state.alive = r.read_bool()?;
        }
        out.updated.push(id);
        updates.push((id, state));
    }
    let count = r.read_uint(6)? as usize;
    for _ in 0..count {
        out.bullets.push(BulletView {
            x: read_step(&mut r, x_bits, schema.position_x().last_step())?,
            y: read_step(&mut r, y_bits, schema.position_y().last_step())?,
            direction: r.read_uint(10)? as u16,
            mine: r.read_bool()?,
        });
    }
    r.finish()?;
    if out
        .updated
        .iter()
        .any(|id| out.destroyed.binary_search(id).is_ok())
    {
        return Err(SnapshotError::Inconsistent("update of a destroyed entity"));
    }
    // The new view: the baseline less destroys, with updates, plus creates.
    for entity in base {
        if out.destroyed.binary_search(&entity.id).is_ok() {
            continue;
        }
        let state = match updates.binary_search_by_key(&entity.id, |u| u.0) {
            Ok(index) => updates[index].1,
            Err(_) => entity.state,
        };
        out.entities.push(EntityView {
            id: entity.id,
            state,
        });
    }
    if out.entities.len() > MAX_VIEW {
        return Err(SnapshotError::Inconsistent(
            "more than 255 entities in view",
        ));
    }
    out.entities.sort_unstable_by_key(|e| e.id);
    if out.entities.windows(2).any(|pair| pair[0].id == pair[1].id) {
        return Err(SnapshotError::Inconsistent(
            "create of an entity already in view",
        ));
    }
    Ok(())
}

fn read_u32(r: &mut BitReader<'_>) -> Result<u32, SnapshotError> {
    let value = r.read_varint()?;
    u32::try_from(value).map_err(|_| SnapshotError::Inconsistent("counter exceeds 32 bits"))
}

fn read_health(r: &mut BitReader<'_>, schema: &SnapshotSchema) -> Result<u16, SnapshotError> {
    let health = r.read_uint(schema.health_bits())? as u16;
    if health > schema.max_health() {
        return Err(SnapshotError::Inconsistent("health above the maximum"));
    }
    Ok(health)
}

fn read_step(r: &mut BitReader<'_>, bits: u32, last: u64) -> Result<u16, SnapshotError> {
    let step = r.read_uint(bits)?;
    if step > last {
        return Err(SnapshotError::Inconsistent("position outside the map"));
    }
    Ok(step as u16)
}

fn read_axis(r: &mut BitReader<'_>, old: u16, bits: u32, last: u64) -> Result<u16, SnapshotError> {
    if r.read_bool()? {
        let delta = r.read_uint(8)? as i64 - 128;
        let step = i64::from(old) + delta;
        if step < 0 || step as u64 > last {
            return Err(SnapshotError::Inconsistent("position delta leaves the map"));
        }
        Ok(step as u16)
    } else {
        read_step(r, bits, last)
    }
}

/// Reads ascending ids written as gaps (see `id_gap_bits`).
#[derive(Default)]
struct IdReader {
    next: u32,
}

impl IdReader {
    fn read(&mut self, r: &mut BitReader<'_>) -> Result<EntityId, SnapshotError> {
        let gap = if !r.read_bool()? {
            r.read_uint(4)? as u32
        } else if !r.read_bool()? {
            r.read_uint(8)? as u32 + 16
        } else {
            r.read_uint(16)? as u32
        };
        let id = self.next + gap;
        if id > u32::from(MAX_ENTITY_ID) {
            return Err(SnapshotError::Inconsistent("entity id out of range"));
        }
        self.next = id + 1;
        Ok(id as EntityId)
    }
}
