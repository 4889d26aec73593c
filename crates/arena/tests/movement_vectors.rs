//! Shared movement vectors: `tests/vectors/movement.json` pins what
//! `tickwire_arena::movement::step_movement` computes, bit for bit, so the TypeScript client's
//! port of it (used to predict the local player) can be held to exactly the same results.
//!
//! The file has one scene (map bounds and wall boxes, in metres) and vectors: per vector the
//! movement parameters, a start position, one input direction per tick and the position
//! after each tick. Every `f32` is written twice: as a decimal for people and as its IEEE-754
//! bit pattern (`*_bits`, an unsigned integer) for programs, which must use the bits. Input
//! components are multiples of 1/64 (the wire grid) and exact as decimals.
//!
//! `TICKWIRE_BLESS=1 cargo test -p tickwire-arena --test movement_vectors` rewrites the file
//! from the cases below; otherwise the file is read and every vector replayed, through the
//! server's indexed walls and through the every-wall form a port would write.

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use tickwire_arena::geom::{Aabb, Vec2};
use tickwire_arena::movement::{
    MAX_SUBSTEP, MovementParams, WALL_PASSES, step_movement, step_movement_all_walls,
};
use tickwire_arena::physics::BoxIndex;

const BOUNDS: [f32; 2] = [40.0, 30.0];

/// The scene: a long wall, a low wall, an L-shaped inside corner and a pillar; no border, so
/// the map edge clamp is exercised too.
const WALLS: [[f32; 4]; 5] = [
    [20.0, 5.0, 21.0, 25.0],
    [5.0, 10.0, 15.0, 11.0],
    [25.0, 5.0, 35.0, 6.0],
    [34.0, 6.0, 35.0, 15.0],
    [10.0, 20.0, 12.0, 22.0],
];

struct Case {
    name: &'static str,
    max_speed: f32,
    dt: f32,
    start: [f32; 2],
    inputs: Vec<[f32; 2]>,
}

fn cases() -> Vec<Case> {
    let at_60 = 1.0 / 60.0;
    let repeat = |input: [f32; 2], ticks: usize| vec![input; ticks];
    let case = |name, start, inputs| Case {
        name,
        max_speed: 6.0,
        dt: at_60,
        start,
        inputs,
    };
    vec![
        case("idle", [5.5, 5.5], repeat([0.0, 0.0], 3)),
        case("right_open_floor", [3.0, 3.0], repeat([1.0, 0.0], 10)),
        case("diagonal_is_capped", [3.0, 3.0], repeat([1.0, 1.0], 10)),
        case("analog_partial", [3.0, 15.0], repeat([0.5, -0.25], 10)),
        case(
            "fine_grid_direction",
            [3.0, 15.0],
            repeat([0.015625, -0.984375], 6),
        ),
        case("head_on_into_wall", [18.5, 15.0], repeat([1.0, 0.0], 30)),
        case("slide_along_wall", [19.5, 15.0], repeat([1.0, 0.5], 30)),
        case("into_inside_corner", [32.0, 8.0], repeat([1.0, -1.0], 40)),
        case("around_pillar_corner", [9.0, 19.2], repeat([1.0, 0.25], 40)),
        case("under_low_wall", [8.0, 12.5], repeat([0.25, -1.0], 20)),
        case("map_edge_clamp", [1.0, 1.0], repeat([-1.0, -1.0], 10)),
        case(
            "start_overlapping_wall",
            [20.2, 15.0],
            repeat([0.0, -1.0], 3),
        ),
        case(
            "changing_directions",
            [24.0, 12.0],
            [
                [1.0, 0.0],
                [0.0, 1.0],
                [-1.0, 0.0],
                [0.0, -1.0],
                [0.5, 0.5],
                [-0.75, 0.25],
            ]
            .into_iter()
            .cycle()
            .take(24)
            .collect(),
        ),
        Case {
            name: "fast_substeps_into_wall",
            max_speed: 60.0,
            dt: at_60,
            start: [15.0, 12.0],
            inputs: repeat([1.0, 0.0], 8),
        },
        Case {
            name: "twenty_hertz_diagonal",
            max_speed: 6.0,
            dt: 1.0 / 20.0,
            start: [7.0, 14.0],
            inputs: repeat([-0.5, -1.0], 20),
        },
    ]
}

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/movement.json")
}

fn boxes() -> Vec<Aabb> {
    WALLS
        .iter()
        .map(|[x0, y0, x1, y1]| Aabb::from_coords(*x0, *y0, *x1, *y1))
        .collect()
}

fn params(max_speed: f32, dt: f32) -> MovementParams {
    MovementParams {
        radius: 0.4,
        max_speed,
        dt,
        bounds: Vec2::new(BOUNDS[0], BOUNDS[1]),
    }
}

/// Runs `inputs` from `start`, checking the indexed and the every-wall forms agree.
fn run(params: &MovementParams, start: Vec2, inputs: &[[f32; 2]], name: &str) -> Vec<Vec2> {
    let boxes = boxes();
    let index = BoxIndex::new(boxes.clone(), params.bounds, 4.0);
    let mut scratch = Vec::new();
    let mut position = start;
    let mut positions = Vec::new();
    for (tick, [x, y]) in inputs.iter().enumerate() {
        let direction = Vec2::new(*x, *y);
        let indexed = step_movement(position, direction, params, &index, &mut scratch);
        let every_wall = step_movement_all_walls(position, direction, params, &boxes);
        assert_eq!(
            bits(indexed),
            bits(every_wall),
            "{name} tick {tick}: indexed walls and every wall disagree"
        );
        position = indexed;
        positions.push(position);
    }
    positions
}

fn bits(v: Vec2) -> [u32; 2] {
    [v.x.to_bits(), v.y.to_bits()]
}

/// The shortest decimal that reads back as `value` (as an `f32`), as a JSON number.
fn f32_json(value: f32) -> Value {
    let decimal: f64 = value
        .to_string()
        .parse()
        .expect("an f32 prints as a decimal");
    json!(decimal)
}

fn vec_json(v: Vec2) -> Value {
    json!([f32_json(v.x), f32_json(v.y)])
}

/// Writes `fields` as a JSON object, one field per line, in the order given, each value
/// compact: readable diffs, no key sorting.
fn object_lines(fields: &[(&str, Value)], indent: &str) -> String {
    let lines: Vec<String> = fields
        .iter()
        .map(|(key, value)| format!("{indent}  {key:?}: {value}"))
        .collect();
    format!("{{\n{}\n{indent}}}", lines.join(",\n"))
}

fn bless() {
    let vectors: Vec<String> = cases()
        .iter()
        .map(|case| {
            let params = params(case.max_speed, case.dt);
            let start = Vec2::new(case.start[0], case.start[1]);
            let positions = run(&params, start, &case.inputs, case.name);
            let fields = [
                ("name", json!(case.name)),
                ("radius", f32_json(params.radius)),
                ("radius_bits", json!(params.radius.to_bits())),
                ("max_speed", f32_json(params.max_speed)),
                ("max_speed_bits", json!(params.max_speed.to_bits())),
                ("dt", f32_json(params.dt)),
                ("dt_bits", json!(params.dt.to_bits())),
                ("start", vec_json(start)),
                ("start_bits", json!(bits(start))),
                ("inputs", json!(case.inputs)),
                (
                    "positions",
                    Value::Array(positions.iter().map(|p| vec_json(*p)).collect()),
                ),
                (
                    "positions_bits",
                    json!(positions.iter().map(|p| bits(*p)).collect::<Vec<_>>()),
                ),
            ];
            format!("    {}", object_lines(&fields, "    "))
        })
        .collect();
    let header = [
        (
            "description",
            json!(
                "Player movement vectors for tickwire_arena::movement::step_movement (the algorithm is specified in crates/arena/src/movement.rs). Per vector: start at start_bits, apply each input (a direction, components multiples of 1/64) for one tick with the vector's radius, max_speed and dt, and the position after tick i must equal positions_bits[i] exactly. Every f32 appears as a decimal and as its IEEE-754 bits; use the bits. Walls are [x0, y0, x1, y1] boxes in metres, tested in the order listed; bounds are the map's width and height."
            ),
        ),
        ("max_substep", f32_json(MAX_SUBSTEP)),
        ("wall_passes", json!(WALL_PASSES)),
        ("bounds", json!(BOUNDS)),
        ("walls", json!(WALLS)),
    ];
    let header = object_lines(&header, "");
    let text = format!(
        "{},\n  \"vectors\": [\n{}\n  ]\n}}\n",
        header.trim_end_matches("\n}"),
        vectors.join(",\n")
    );
    serde_json::from_str::<Value>(&text).expect("the blessed file is JSON");
    fs::create_dir_all(vectors_path().parent().expect("has a parent")).expect("creates dir");
    fs::write(vectors_path(), text).expect("writes the vectors");
}

fn f32_from(value: &Value, what: &str) -> f32 {
    let bits = value
        .as_u64()
        .and_then(|bits| u32::try_from(bits).ok())
        .unwrap_or_else(|| panic!("{what} must be a u32 bit pattern, got {value}"));
    f32::from_bits(bits)
}

fn vec_from(value: &Value, what: &str) -> Vec2 {
    let pair = value
        .as_array()
        .filter(|pair| pair.len() == 2)
        .unwrap_or_else(|| panic!("{what} must be a pair"));
    Vec2::new(f32_from(&pair[0], what), f32_from(&pair[1], what))
}

#[test]
fn movement_vectors() {
    if std::env::var_os("TICKWIRE_BLESS").is_some_and(|value| value == "1") {
        bless();
    }
    let text = fs::read_to_string(vectors_path())
        .expect("tests/vectors/movement.json exists (bless with TICKWIRE_BLESS=1)");
    let file: Value = serde_json::from_str(&text).expect("the vectors are JSON");
    assert_eq!(
        file["max_substep"],
        f32_json(MAX_SUBSTEP),
        "MAX_SUBSTEP changed: bless"
    );
    assert_eq!(
        file["wall_passes"],
        json!(WALL_PASSES),
        "WALL_PASSES changed: bless"
    );
    assert_eq!(file["walls"], json!(WALLS), "the scene changed: bless");
    let vectors = file["vectors"].as_array().expect("vectors is an array");
    let names: Vec<&str> = vectors
        .iter()
        .map(|v| v["name"].as_str().expect("a name"))
        .collect();
    let expected: Vec<&str> = cases().iter().map(|case| case.name).collect();
    assert_eq!(
        names, expected,
        "the file's vectors differ from the cases: bless"
    );

    for vector in vectors {
        let name = vector["name"].as_str().expect("a name");
        let mut params = params(
            f32_from(&vector["max_speed_bits"], "max_speed_bits"),
            f32_from(&vector["dt_bits"], "dt_bits"),
        );
        params.radius = f32_from(&vector["radius_bits"], "radius_bits");
        let start = vec_from(&vector["start_bits"], "start_bits");
        let inputs: Vec<[f32; 2]> = vector["inputs"]
            .as_array()
            .expect("inputs is an array")
            .iter()
            .map(|input| {
                let pair = input.as_array().expect("an input is a pair");
                [
                    pair[0].as_f64().unwrap() as f32,
                    pair[1].as_f64().unwrap() as f32,
                ]
            })
            .collect();
        let expected: Vec<Vec2> = vector["positions_bits"]
            .as_array()
            .expect("positions_bits is an array")
            .iter()
            .map(|p| vec_from(p, "positions_bits"))
            .collect();
        let got = run(&params, start, &inputs, name);
        assert_eq!(got.len(), expected.len(), "{name}: one position per input");
        for (tick, (got, want)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(
                bits(*got),
                bits(*want),
                "{name} tick {tick}: computed {got:?}, the file says {want:?}"
            );
        }
    }
}

/// The vectors exercise what they are named for, so a port that passes them has been
/// through walls, corners, sub-steps and the map edge.
#[test]
fn vectors_cover_walls_corners_and_substeps() {
    let outcome = |name: &str| {
        let case = cases().into_iter().find(|case| case.name == name).unwrap();
        let params = params(case.max_speed, case.dt);
        let positions = run(
            &params,
            Vec2::new(case.start[0], case.start[1]),
            &case.inputs,
            name,
        );
        *positions.last().unwrap()
    };
    let head_on = outcome("head_on_into_wall");
    assert!(
        (head_on.x - 19.6).abs() < 1e-4,
        "stopped at the wall: {head_on:?}"
    );
    let corner = outcome("into_inside_corner");
    assert!(
        (corner.x - 33.6).abs() < 1e-3 && (corner.y - 6.4).abs() < 1e-3,
        "settled in the corner: {corner:?}"
    );
    let fast = outcome("fast_substeps_into_wall");
    assert!(
        (fast.x - 19.6).abs() < 1e-4,
        "fast, still stopped: {fast:?}"
    );
    let edge = outcome("map_edge_clamp");
    assert_eq!((edge.x, edge.y), (0.4, 0.4));
    let overlap = outcome("start_overlapping_wall");
    assert!(
        (overlap.x - 19.6).abs() < 1e-4,
        "out by the nearer face: {overlap:?}"
    );
}
