//! Loads a `.tmx` map and prints what the game sees in it, or the error:
//! `cargo run -p tickwire-arena --example map_info -- crates/arena/maps/metropolis.tmx`.

use tickwire_arena::map::ArenaMap;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: map_info <map.tmx>");
        std::process::exit(2);
    };
    match ArenaMap::load(&path) {
        Ok(map) => {
            let size = map.size();
            println!("{}: {} × {} m", map.name(), size.x, size.y);
            println!(
                "walls: {} tiles merged into {} boxes",
                map.wall_tiles(),
                map.walls().len()
            );
            println!("spawn points: {}", map.spawns().len());
            for teleport in map.teleports() {
                let (pad, zone) = (teleport.pad, teleport.destination);
                println!(
                    "teleport `{}`: pad ({}, {})–({}, {}) → zone ({}, {})–({}, {}), {} m²",
                    teleport.name,
                    pad.min.x,
                    pad.min.y,
                    pad.max.x,
                    pad.max.y,
                    zone.min.x,
                    zone.min.y,
                    zone.max.x,
                    zone.max.y,
                    zone.area()
                );
            }
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
}
