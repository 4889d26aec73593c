//! A game built on `tickwire-room` compiles no server: no async runtime, web server, QUIC
//! stack or database driver among the crate's normal dependencies.

use std::process::Command;

/// Crates that would mean the room crate pulled in I/O.
const FORBIDDEN: [&str; 9] = [
    "tokio",
    "axum",
    "hyper",
    "wtransport",
    "quinn",
    "sqlx",
    "rcgen",
    "rustls",
    "tungstenite",
];

#[test]
fn the_room_crate_has_no_io_dependencies() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-e",
            "normal",
            "-p",
            "tickwire-room",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).expect("utf-8");
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&"tickwire-wire"),
        "the tree lists the room crate's dependencies:\n{tree}"
    );
    for forbidden in FORBIDDEN {
        assert!(
            !names
                .iter()
                .any(|name| *name == forbidden || name.starts_with(&format!("{forbidden}-"))),
            "tickwire-room depends on {forbidden}:\n{tree}"
        );
    }
}
