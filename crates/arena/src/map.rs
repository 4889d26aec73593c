//! Arena maps, made in the [Tiled](https://www.mapeditor.org) editor and saved as `.tmx`.
//!
//! # Units
//!
//! One tile is one metre, whatever its size in pixels (the shipped maps use 32 px tiles);
//! object positions are converted from pixels to metres by dividing by the tile width. Tiles
//! must be square and the map orthogonal and finite.
//!
//! # What the loader reads
//!
//! | Tiled element | meaning |
//! |---|---|
//! | tile layer `walls` | every non-empty tile is a wall; merged into few boxes |
//! | point object, class (or type) `spawn` | a spawn point (a rectangle's centre also works) |
//! | rectangle object, class `teleport` | a teleport pad; property `destination` names where it leads |
//! | rectangle object referenced by a `destination` | the zone a teleported player lands in |
//!
//! `destination` is an *object* property (a reference to the zone object, Tiled's
//! "object" property type) or a *string* property holding the zone object's name. The zone
//! must be a rectangle that overlaps no pad (a pad inside its own destination would bounce a
//! player forever).
//!
//! Anything wrong is a [`MapError`] that names the file and the problem.

mod merge;

use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use tiled::{LayerType, ObjectData, ObjectShape, Orientation, PropertyValue, TileLayer};

use crate::geom::{Aabb, Vec2};
use crate::physics::BoxIndex;

/// The tile layer whose non-empty tiles are walls.
pub const WALL_LAYER: &str = "walls";
/// Object class of spawn points.
pub const SPAWN_CLASS: &str = "spawn";
/// Object class of teleport pads.
pub const TELEPORT_CLASS: &str = "teleport";
/// A teleport pad's property naming its destination zone.
pub const DESTINATION_PROPERTY: &str = "destination";

/// Cell size (metres) of the wall and pad indexes: a few tiles, so a player's neighbourhood
/// touches one to four cells.
const INDEX_CELL_SIZE: f32 = 4.0;

/// Why a map could not be loaded. Every message starts with the map's path.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The file could not be read.
    #[error("map {}: cannot read the file: {source}", path.display())]
    Missing {
        /// The map file.
        path: PathBuf,
        /// What the filesystem said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a Tiled map the `tiled` crate can parse.
    #[error("map {}: not a valid Tiled map: {source}", path.display())]
    Parse {
        /// The map file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: tiled::Error,
    },
    /// A valid Tiled map this game cannot use (isometric, infinite, non-square tiles...).
    #[error("map {}: {reason}", path.display())]
    Unsupported {
        /// The map file.
        path: PathBuf,
        /// What is not supported.
        reason: String,
    },
    /// No tile layer named [`WALL_LAYER`].
    #[error("map {}: no tile layer named `{WALL_LAYER}` (its non-empty tiles are the walls)", path.display())]
    NoWallLayer {
        /// The map file.
        path: PathBuf,
    },
    /// No object of class [`SPAWN_CLASS`].
    #[error("map {}: no spawn points (point objects of class `{SPAWN_CLASS}`)", path.display())]
    NoSpawnPoints {
        /// The map file.
        path: PathBuf,
    },
    /// A spawn point is unusable.
    #[error("map {}: spawn point `{name}`: {reason}", path.display())]
    BadSpawn {
        /// The map file.
        path: PathBuf,
        /// The object's name, or `#id` when it has none.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A teleport pad or its destination is unusable.
    #[error("map {}: teleport `{name}`: {reason}", path.display())]
    BadTeleport {
        /// The map file.
        path: PathBuf,
        /// The pad's name, or `#id` when it has none.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A teleport pad: stepping on `pad` moves a player to a random point of `destination`.
#[derive(Debug, Clone, PartialEq)]
pub struct Teleport {
    /// The pad's object name (or `#id`).
    pub name: String,
    /// Where a player must stand to be teleported.
    pub pad: Aabb,
    /// The zone a teleported player lands in.
    pub destination: Aabb,
}

/// The maps shipped with the crate, embedded in the binary (so a server needs no map files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinMap {
    /// 40 × 30 m: a walled courtyard with cover, 8 spawn points and two pads, for a few
    /// players.
    Courtyard,
    /// 400 × 400 m: city blocks, hundreds of spawn points, 24 pads all leading to one 20 ×
    /// 10 m (200 m²) plaza zone in an open square; sized for thousands of players.
    Metropolis,
}

impl BuiltinMap {
    /// Every shipped map.
    pub const ALL: [BuiltinMap; 2] = [BuiltinMap::Courtyard, BuiltinMap::Metropolis];

    /// The file name under `crates/arena/maps/`.
    pub fn file_name(self) -> &'static str {
        match self {
            BuiltinMap::Courtyard => "courtyard.tmx",
            BuiltinMap::Metropolis => "metropolis.tmx",
        }
    }

    /// The map's path in this crate's source tree (for tools; the server uses the embedded
    /// copy through [`BuiltinMap::load`]).
    pub fn source_path(self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("maps")
            .join(self.file_name())
    }

    fn tmx(self) -> &'static [u8] {
        match self {
            BuiltinMap::Courtyard => include_bytes!("../maps/courtyard.tmx"),
            BuiltinMap::Metropolis => include_bytes!("../maps/metropolis.tmx"),
        }
    }

    /// Parses the embedded map.
    pub fn load(self) -> Result<ArenaMap, MapError> {
        ArenaMap::from_tmx(self.file_name(), self.tmx())
    }
}

/// A loaded map: its size, walls as merged boxes, spawn points and teleports.
#[derive(Debug, Clone)]
pub struct ArenaMap {
    name: String,
    size: Vec2,
    wall_tiles: usize,
    walls: BoxIndex,
    spawns: Vec<Vec2>,
    teleports: Vec<Teleport>,
    pads: BoxIndex,
}

impl ArenaMap {
    /// Loads a `.tmx` file; an external tileset (`.tsx`) is read relative to it.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, MapError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| MapError::Missing {
            path: path.to_owned(),
            source,
        })?;
        Self::from_tmx(path, &bytes)
    }

    /// Parses a `.tmx` document held in memory; `path` names it in errors and anchors any
    /// external tileset it references.
    pub fn from_tmx(path: impl AsRef<Path>, tmx: &[u8]) -> Result<Self, MapError> {
        let path = path.as_ref();
        let reader = |requested: &Path| -> std::io::Result<Box<dyn Read + '_>> {
            if requested == path {
                Ok(Box::new(Cursor::new(tmx)))
            } else {
                Ok(Box::new(std::io::BufReader::new(std::fs::File::open(
                    requested,
                )?)))
            }
        };
        let tiled = tiled::Loader::with_reader(reader)
            .load_tmx_map(path)
            .map_err(|source| MapError::Parse {
                path: path.to_owned(),
                source,
            })?;
        from_tiled(path, &tiled)
    }

    /// A map built in code (tests, generated arenas), checked like a loaded one: `walls` are
    /// boxes in metres, each at least one metre on each side for the no-tunnelling guarantee.
    pub fn new(
        name: impl Into<String>,
        size: Vec2,
        walls: Vec<Aabb>,
        spawns: Vec<Vec2>,
        teleports: Vec<Teleport>,
    ) -> Result<Self, MapError> {
        let name = name.into();
        let spawns = spawns
            .into_iter()
            .enumerate()
            .map(|(i, spawn)| (format!("#{i}"), spawn))
            .collect();
        build(PathBuf::from(&name), name, size, walls, spawns, teleports)
    }

    /// The file the map came from (or the name given to [`ArenaMap::new`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Width and height in metres.
    pub fn size(&self) -> Vec2 {
        self.size
    }

    /// Number of wall tiles (before merging).
    pub fn wall_tiles(&self) -> usize {
        self.wall_tiles
    }

    /// The merged wall boxes, indexed for nearby queries.
    pub fn walls(&self) -> &BoxIndex {
        &self.walls
    }

    /// Spawn points, in the order the map lists them.
    pub fn spawns(&self) -> &[Vec2] {
        &self.spawns
    }

    /// Teleport pads and their destinations.
    pub fn teleports(&self) -> &[Teleport] {
        &self.teleports
    }

    /// The teleport whose pad contains `point` (the first listed if pads overlap).
    #[inline]
    pub fn teleport_at(&self, point: Vec2) -> Option<(usize, &Teleport)> {
        let index = self.pads.first_containing(point)?;
        Some((index, &self.teleports[index]))
    }

    /// The teleport whose pad is nearest to `point` (the first listed on a tie): where a
    /// warp goes. A linear scan: maps have a few dozen pads, and warps are rare.
    pub fn teleport_nearest(&self, point: Vec2) -> Option<(usize, &Teleport)> {
        let distance_sq = |teleport: &Teleport| {
            let pad = teleport.pad;
            let nearest = Vec2::new(
                point.x.clamp(pad.min.x, pad.max.x),
                point.y.clamp(pad.min.y, pad.max.y),
            );
            (nearest - point).length_squared()
        };
        self.teleports
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| distance_sq(a).total_cmp(&distance_sq(b)))
    }
}

/// Checks a map's content and indexes it; `spawns` carry their names for errors.
fn build(
    path: PathBuf,
    name: String,
    size: Vec2,
    walls: Vec<Aabb>,
    spawns: Vec<(String, Vec2)>,
    teleports: Vec<Teleport>,
) -> Result<ArenaMap, MapError> {
    if !(size.x > 0.0 && size.y > 0.0 && size.is_finite()) {
        return Err(MapError::Unsupported {
            path,
            reason: format!("size {} × {} m is not positive", size.x, size.y),
        });
    }
    let wall_tiles = walls.iter().map(|wall| wall.area().round() as usize).sum();
    let walls = BoxIndex::new(walls, size, INDEX_CELL_SIZE);
    let bounds = Aabb::new(Vec2::ZERO, size);
    if spawns.is_empty() {
        return Err(MapError::NoSpawnPoints { path });
    }
    let mut near = Vec::new();
    for (spawn_name, spawn) in &spawns {
        walls.query(Aabb::new(*spawn, *spawn), &mut near);
        let inside = near
            .iter()
            .map(|&i| walls.boxes()[i as usize])
            .find(|wall| wall.contains(*spawn));
        let reason = if !bounds.contains(*spawn) {
            format!("({}, {}) is outside the map", spawn.x, spawn.y)
        } else if let Some(wall) = inside {
            format!(
                "({}, {}) is inside the wall from ({}, {}) to ({}, {})",
                spawn.x, spawn.y, wall.min.x, wall.min.y, wall.max.x, wall.max.y
            )
        } else {
            continue;
        };
        return Err(MapError::BadSpawn {
            path,
            name: spawn_name.clone(),
            reason,
        });
    }
    for teleport in &teleports {
        let bad = |reason: String| MapError::BadTeleport {
            path: path.clone(),
            name: teleport.name.clone(),
            reason,
        };
        for (what, area) in [("pad", teleport.pad), ("destination", teleport.destination)] {
            if !(area.size().x > 0.0 && area.size().y > 0.0 && area.size().is_finite()) {
                return Err(bad(format!("the {what} has no area")));
            }
            if !area.overlaps(bounds) {
                return Err(bad(format!("the {what} {area:?} is outside the map")));
            }
        }
        if let Some(other) = teleports
            .iter()
            .find(|other| other.pad.overlaps(teleport.destination))
        {
            return Err(bad(format!(
                "the destination overlaps teleport pad `{}`, which would teleport players again",
                other.name
            )));
        }
    }
    let pads = BoxIndex::new(
        teleports.iter().map(|teleport| teleport.pad).collect(),
        size,
        INDEX_CELL_SIZE * 2.0,
    );
    Ok(ArenaMap {
        name,
        size,
        wall_tiles,
        walls,
        spawns: spawns.into_iter().map(|(_, spawn)| spawn).collect(),
        teleports,
        pads,
    })
}

/// Reads the game's content out of a parsed Tiled map.
fn from_tiled(path: &Path, map: &tiled::Map) -> Result<ArenaMap, MapError> {
    let unsupported = |reason: String| MapError::Unsupported {
        path: path.to_owned(),
        reason,
    };
    if map.orientation != Orientation::Orthogonal {
        return Err(unsupported(format!(
            "orientation {:?} is not supported; use orthogonal",
            map.orientation
        )));
    }
    if map.infinite() {
        return Err(unsupported("infinite maps are not supported".into()));
    }
    if map.tile_width == 0 || map.tile_width != map.tile_height {
        return Err(unsupported(format!(
            "tiles are {} × {} px; they must be square (one tile is one metre)",
            map.tile_width, map.tile_height
        )));
    }
    let pixels_per_metre = map.tile_width as f32;
    let (width, height) = (map.width, map.height);

    let wall_layer = map
        .layers()
        .find_map(|layer| match layer.layer_type() {
            LayerType::Tiles(tiles) if layer.name == WALL_LAYER => Some(tiles),
            _ => None,
        })
        .ok_or_else(|| MapError::NoWallLayer {
            path: path.to_owned(),
        })?;
    let TileLayer::Finite(wall_layer) = wall_layer else {
        return Err(unsupported(format!(
            "tile layer `{WALL_LAYER}` is infinite (chunked)"
        )));
    };
    let mut is_wall = vec![false; width as usize * height as usize];
    for y in 0..height {
        for x in 0..width {
            is_wall[(y * width + x) as usize] =
                wall_layer.get_tile_data(x as i32, y as i32).is_some();
        }
    }
    let walls = merge::merge_tiles(width, height, &is_wall)
        .into_iter()
        .map(|rect| {
            Aabb::from_coords(
                rect.x as f32,
                rect.y as f32,
                (rect.x + rect.width) as f32,
                (rect.y + rect.height) as f32,
            )
        })
        .collect();

    let object_layers: Vec<_> = map
        .layers()
        .filter_map(|layer| match layer.layer_type() {
            LayerType::Objects(objects) => Some(objects),
            _ => None,
        })
        .collect();
    let objects: Vec<&ObjectData> = object_layers
        .iter()
        .flat_map(|layer| layer.object_data())
        .collect();
    let by_id: HashMap<u32, &ObjectData> = objects.iter().map(|o| (o.id(), *o)).collect();
    let to_metres = |x: f32, y: f32| Vec2::new(x / pixels_per_metre, y / pixels_per_metre);
    let rectangle = |object: &ObjectData| -> Result<Aabb, String> {
        match object.shape {
            ObjectShape::Rect { width, height } if object.rotation == 0.0 => Ok(Aabb::new(
                to_metres(object.x, object.y),
                to_metres(object.x + width, object.y + height),
            )),
            ObjectShape::Rect { .. } => {
                Err("is rotated; rotated rectangles are not supported".into())
            }
            _ => Err("is not a rectangle".into()),
        }
    };

    let mut spawns = Vec::new();
    for object in objects.iter().filter(|o| o.user_type == SPAWN_CLASS) {
        let position = match object.shape {
            ObjectShape::Point(..) => to_metres(object.x, object.y),
            ObjectShape::Rect { .. } => rectangle(object)
                .map_err(|reason| bad_spawn(path, object, reason))?
                .center(),
            _ => {
                return Err(bad_spawn(
                    path,
                    object,
                    "must be a point (or a rectangle, whose centre is used)".into(),
                ));
            }
        };
        spawns.push((display_name(object), position));
    }

    let mut teleports = Vec::new();
    for object in objects.iter().filter(|o| o.user_type == TELEPORT_CLASS) {
        let bad = |reason: String| MapError::BadTeleport {
            path: path.to_owned(),
            name: display_name(object),
            reason,
        };
        let pad = rectangle(object).map_err(|reason| bad(format!("the pad {reason}")))?;
        let destination = match object.properties.get(DESTINATION_PROPERTY) {
            None => {
                return Err(bad(format!(
                    "no `{DESTINATION_PROPERTY}` property (an object reference or the name of a rectangle object)"
                )));
            }
            Some(PropertyValue::ObjectValue(0)) => {
                return Err(bad(format!(
                    "`{DESTINATION_PROPERTY}` references no object"
                )));
            }
            Some(PropertyValue::ObjectValue(id)) => *by_id.get(id).ok_or_else(|| {
                bad(format!(
                    "`{DESTINATION_PROPERTY}` references object {id}, which does not exist"
                ))
            })?,
            Some(PropertyValue::StringValue(name)) => {
                let mut named = objects.iter().filter(|o| o.name == *name);
                match (named.next(), named.next()) {
                    (Some(zone), None) => *zone,
                    (None, _) => {
                        return Err(bad(format!(
                            "destination `{name}`: no object has that name"
                        )));
                    }
                    (Some(_), Some(_)) => {
                        return Err(bad(format!(
                            "destination `{name}`: several objects have that name"
                        )));
                    }
                }
            }
            Some(other) => {
                return Err(bad(format!(
                    "`{DESTINATION_PROPERTY}` must be an object reference or a string, not {other:?}"
                )));
            }
        };
        let destination = rectangle(destination).map_err(|reason| {
            bad(format!(
                "destination `{}` {reason}",
                display_name(destination)
            ))
        })?;
        teleports.push(Teleport {
            name: display_name(object),
            pad,
            destination,
        });
    }

    build(
        path.to_owned(),
        path.display().to_string(),
        Vec2::new(width as f32, height as f32),
        walls,
        spawns,
        teleports,
    )
}

fn display_name(object: &ObjectData) -> String {
    if object.name.is_empty() {
        format!("#{}", object.id())
    } else {
        object.name.clone()
    }
}

fn bad_spawn(path: &Path, object: &ObjectData, reason: String) -> MapError {
    MapError::BadSpawn {
        path: path.to_owned(),
        name: display_name(object),
        reason,
    }
}
