//! Loading maps: both shipped maps load (from the file and embedded), and every kind of
//! broken map fails with an error that names the file and the problem.

use tickwire_arena::geom::{Aabb, Vec2};
use tickwire_arena::map::{ArenaMap, BuiltinMap, MapError};

#[test]
fn courtyard_loads_with_its_walls_spawns_and_pads() {
    let map = ArenaMap::load(BuiltinMap::Courtyard.source_path()).unwrap();
    assert_eq!(map.size(), Vec2::new(40.0, 30.0), "40 × 30 tiles of 1 m");
    assert_eq!(map.spawns().len(), 8);
    assert_eq!(map.teleports().len(), 2);
    let west = &map.teleports()[0];
    assert_eq!(west.name, "west pad");
    assert_eq!(
        west.pad,
        Aabb::from_coords(2.0, 19.0, 4.0, 21.0),
        "pixels / 32"
    );
    assert_eq!(west.destination, Aabb::from_coords(33.0, 9.0, 37.0, 13.0));
    assert_eq!(
        map.spawns()[0],
        Vec2::new(4.5, 4.5),
        "a point object at the tile's centre"
    );
    // The border and cover merge into a handful of boxes.
    assert!(map.walls().len() <= 12, "{} boxes", map.walls().len());
    assert_eq!(
        map.walls().boxes().iter().map(|b| b.area()).sum::<f32>() as usize,
        map.wall_tiles()
    );
}

#[test]
fn metropolis_is_sized_for_thousands() {
    let map = BuiltinMap::Metropolis.load().unwrap();
    assert_eq!(map.size(), Vec2::new(400.0, 400.0));
    assert!(
        map.spawns().len() >= 500,
        "{} spawn points",
        map.spawns().len()
    );
    assert_eq!(map.teleports().len(), 24);
    let plaza = map.teleports()[0].destination;
    assert_eq!(plaza.area(), 200.0, "the destination zone is 200 m²");
    assert!(map.teleports().iter().all(|t| t.destination == plaza));
    // Spawn points spread over the whole map, not bunched in a corner.
    let quadrants = map.spawns().iter().fold([0; 4], |mut counts, spawn| {
        counts[usize::from(spawn.x > 200.0) + 2 * usize::from(spawn.y > 200.0)] += 1;
        counts
    });
    assert!(quadrants.iter().all(|&n| n > 100), "{quadrants:?}");
    // Merging: far fewer boxes than wall tiles.
    let (boxes, tiles) = (map.walls().len(), map.wall_tiles());
    assert!(boxes * 5 < tiles, "{boxes} boxes for {tiles} wall tiles");
}

#[test]
fn embedded_maps_match_their_files() {
    for builtin in BuiltinMap::ALL {
        let embedded = builtin.load().unwrap();
        let file = ArenaMap::load(builtin.source_path()).unwrap();
        assert_eq!(
            embedded.walls().boxes(),
            file.walls().boxes(),
            "{builtin:?}"
        );
        assert_eq!(embedded.spawns(), file.spawns(), "{builtin:?}");
        assert_eq!(embedded.teleports(), file.teleports(), "{builtin:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Broken maps
// ---------------------------------------------------------------------------------------

const TILESET: &str = r#"<tileset firstgid="1" name="t" tilewidth="32" tileheight="32" tilecount="1" columns="1"><image source="t.png" width="32" height="32"/></tileset>"#;

/// A 4 × 3 map with `walls` as its CSV rows (or no wall layer if `None`) and `objects`.
fn tmx(attributes: &str, walls: Option<&str>, objects: &str) -> String {
    let layer = walls
        .map(|csv| {
            format!(
                r#"<layer id="1" name="walls" width="4" height="3"><data encoding="csv">{csv}</data></layer>"#
            )
        })
        .unwrap_or_default();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<map version="1.10" orientation="orthogonal" renderorder="right-down" width="4" height="3" tilewidth="32" tileheight="32" infinite="0" {attributes}>
{TILESET}
{layer}
<objectgroup id="2" name="objects">{objects}</objectgroup>
</map>"#
    )
}

const WALLS: &str = "1,1,1,1,\n1,0,0,1,\n1,1,1,1";
const SPAWN: &str = r#"<object id="1" name="start" class="spawn" x="48" y="48"><point/></object>"#;

fn load(name: &str, text: &str) -> Result<ArenaMap, MapError> {
    ArenaMap::from_tmx(name, text.as_bytes())
}

fn expect_error(name: &str, text: &str) -> (MapError, String) {
    let error = load(name, text).expect_err("the map is broken");
    let message = error.to_string();
    assert!(message.starts_with(&format!("map {name}: ")), "{message}");
    (error, message)
}

#[test]
fn a_minimal_map_loads() {
    let map = load("minimal.tmx", &tmx("", Some(WALLS), SPAWN)).unwrap();
    assert_eq!(map.spawns(), [Vec2::new(1.5, 1.5)]);
    assert_eq!(map.walls().len(), 4, "top, sides, bottom");
}

#[test]
fn missing_file() {
    let error = ArenaMap::load("/nonexistent/nowhere.tmx").unwrap_err();
    assert!(matches!(error, MapError::Missing { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("map /nonexistent/nowhere.tmx: cannot read the file"),
        "{error}"
    );
}

#[test]
fn not_xml_or_not_a_map() {
    for garbage in ["this is not xml", "<map><layer", "", "<tileset/>"] {
        let (error, _) = expect_error("garbage.tmx", garbage);
        assert!(
            matches!(error, MapError::Parse { .. }),
            "{garbage:?}: {error:?}"
        );
    }
    let bad_csv = tmx("", Some("1,1,x,1,\n1,0,0,1,\n1,1,1,1"), SPAWN);
    let (error, message) = expect_error("csv.tmx", &bad_csv);
    assert!(matches!(error, MapError::Parse { .. }), "{message}");
}

#[test]
fn unsupported_layouts() {
    let isometric = tmx("", Some(WALLS), SPAWN).replace("orthogonal", "isometric");
    let (error, message) = expect_error("iso.tmx", &isometric);
    assert!(matches!(error, MapError::Unsupported { .. }), "{message}");
    assert!(message.contains("orthogonal"), "{message}");

    let oblong =
        tmx("", Some(WALLS), SPAWN).replacen(r#"tileheight="32""#, r#"tileheight="16""#, 1);
    let (error, message) = expect_error("oblong.tmx", &oblong);
    assert!(matches!(error, MapError::Unsupported { .. }), "{message}");
    assert!(message.contains("square"), "{message}");
}

#[test]
fn no_wall_layer() {
    let (error, message) = expect_error("nowalls.tmx", &tmx("", None, SPAWN));
    assert!(matches!(error, MapError::NoWallLayer { .. }), "{message}");
    assert!(message.contains("no tile layer named `walls`"), "{message}");
    // A layer with another name does not count.
    let renamed = tmx("", Some(WALLS), SPAWN).replace(r#"name="walls""#, r#"name="floor""#);
    let (error, _) = expect_error("renamed.tmx", &renamed);
    assert!(matches!(error, MapError::NoWallLayer { .. }));
}

#[test]
fn no_spawn_points() {
    let (error, message) = expect_error("empty.tmx", &tmx("", Some(WALLS), ""));
    assert!(matches!(error, MapError::NoSpawnPoints { .. }), "{message}");
    // An object of another class is not a spawn point.
    let other = r#"<object id="1" name="tree" class="decor" x="48" y="48"><point/></object>"#;
    let (error, _) = expect_error("decor.tmx", &tmx("", Some(WALLS), other));
    assert!(matches!(error, MapError::NoSpawnPoints { .. }));
}

#[test]
fn spawn_inside_a_wall_or_badly_shaped() {
    let in_wall = r#"<object id="1" name="stuck" class="spawn" x="16" y="16"><point/></object>"#;
    let (error, message) = expect_error("stuck.tmx", &tmx("", Some(WALLS), in_wall));
    assert!(
        matches!(&error, MapError::BadSpawn { name, .. } if name == "stuck"),
        "{message}"
    );
    assert!(message.contains("inside the wall"), "{message}");

    let ellipse =
        r#"<object id="1" class="spawn" x="48" y="48" width="10" height="10"><ellipse/></object>"#;
    let (error, message) = expect_error("ellipse.tmx", &tmx("", Some(WALLS), ellipse));
    assert!(
        matches!(&error, MapError::BadSpawn { name, .. } if name == "#1"),
        "an unnamed object is named by id: {message}"
    );
}

/// A pad on the floor tile (1, 1) with `property`, and a zone object (id 3) on tile (2, 1).
fn with_pad(property: &str, zone: &str) -> String {
    let objects = format!(
        r#"{SPAWN}
<object id="2" name="pad" class="teleport" x="32" y="32" width="16" height="16"><properties>{property}</properties></object>
{zone}"#
    );
    tmx("", Some(WALLS), &objects)
}

const ZONE: &str =
    r#"<object id="3" name="landing" class="zone" x="64" y="32" width="32" height="32"/>"#;

fn bad_teleport(name: &str, text: &str) -> String {
    let (error, message) = expect_error(name, text);
    assert!(
        matches!(&error, MapError::BadTeleport { name, .. } if name == "pad"),
        "{message}"
    );
    message
}

#[test]
fn teleports_resolve_by_reference_or_by_name() {
    let by_ref = with_pad(
        r#"<property name="destination" type="object" value="3"/>"#,
        ZONE,
    );
    let by_name = with_pad(r#"<property name="destination" value="landing"/>"#, ZONE);
    for text in [by_ref, by_name] {
        let map = load("pads.tmx", &text).unwrap();
        assert_eq!(map.teleports().len(), 1);
        assert_eq!(
            map.teleports()[0].destination,
            Aabb::from_coords(2.0, 1.0, 3.0, 2.0)
        );
        assert_eq!(map.teleport_at(Vec2::new(1.25, 1.25)).unwrap().0, 0);
        assert!(map.teleport_at(Vec2::new(2.5, 1.5)).is_none());
    }
}

#[test]
fn teleport_without_a_usable_destination() {
    let message = bad_teleport("none.tmx", &with_pad("", ZONE));
    assert!(message.contains("no `destination` property"), "{message}");

    let dangling = with_pad(
        r#"<property name="destination" type="object" value="99"/>"#,
        ZONE,
    );
    let message = bad_teleport("dangling.tmx", &dangling);
    assert!(
        message.contains("object 99, which does not exist"),
        "{message}"
    );

    let unknown_name = with_pad(r#"<property name="destination" value="nowhere"/>"#, ZONE);
    let message = bad_teleport("unknown.tmx", &unknown_name);
    assert!(
        message.contains("destination `nowhere`: no object has that name"),
        "{message}"
    );

    let wrong_type = with_pad(
        r#"<property name="destination" type="int" value="3"/>"#,
        ZONE,
    );
    let message = bad_teleport("int.tmx", &wrong_type);
    assert!(
        message.contains("must be an object reference or a string"),
        "{message}"
    );

    let point_zone = r#"<object id="3" name="landing" x="64" y="32"><point/></object>"#;
    let pointed = with_pad(
        r#"<property name="destination" type="object" value="3"/>"#,
        point_zone,
    );
    let message = bad_teleport("point.tmx", &pointed);
    assert!(
        message.contains("destination `landing` is not a rectangle"),
        "{message}"
    );

    // A destination covering its own pad would bounce players forever.
    let own_pad = with_pad(
        r#"<property name="destination" type="object" value="2"/>"#,
        ZONE,
    );
    let message = bad_teleport("loop.tmx", &own_pad);
    assert!(message.contains("overlaps teleport pad `pad`"), "{message}");
}

#[test]
fn a_teleport_pad_must_be_a_rectangle() {
    let objects = format!(
        r#"{SPAWN}
<object id="2" name="pad" class="teleport" x="32" y="32"><point/><properties><property name="destination" type="object" value="3"/></properties></object>
{ZONE}"#
    );
    let message = bad_teleport("padpoint.tmx", &tmx("", Some(WALLS), &objects));
    assert!(message.contains("the pad is not a rectangle"), "{message}");
}
