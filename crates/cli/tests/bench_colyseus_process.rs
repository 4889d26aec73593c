//! `tickwire bench hobo --transport ws --against colyseus` end to end (issue 17): the
//! Colyseus server in `bench/colyseus` starts, every bot gets a seat and joins over
//! WebSocket, and each hears the room's state patches at about the patch rate (60 a second).
//! A tiny run (20 players, 2 rooms, 2 s), so that the harness cannot rot; never a figure.
//!
//! Needs Node: without `node` on the PATH the test says so and passes. Without
//! `bench/colyseus/node_modules` it installs them first (`npm ci`, as `make test` does
//! before running it).

use std::path::PathBuf;
use std::process::Command;

fn project() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/colyseus"))
}

#[test]
fn colyseus_bots_join_and_hear_patches_at_the_patch_rate() {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("skipped: no `node` on the PATH (the Colyseus bench server runs on Node)");
        return;
    }
    let dir = project();
    if !dir.join("node_modules").is_dir() {
        let status = Command::new("npm")
            .args([
                "ci",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(&dir)
            .status()
            .expect("npm runs where node does");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    let output = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args([
            "bench",
            "hobo",
            "--transport",
            "ws",
            "--against",
            "colyseus",
            "--players",
            "20",
            "--rooms",
            "2",
            "--warmup",
            "1s",
            "--duration",
            "2s",
            "--drain",
            "500ms",
            "--json",
        ])
        .arg("--colyseus-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the bench failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let bots = &report["bots"];
    assert_eq!(bots["server"], "colyseus", "{report}");
    assert_eq!(report["players"], 20, "every bot joined: {report}");
    assert_eq!(report["connect_failed"], 0, "{report}");
    assert_eq!(report["disconnects"], 0, "{report}");
    assert_eq!(
        (bots["rooms"].as_u64(), bots["room_size_min"].as_u64()),
        (Some(2), Some(10)),
        "two rooms of ten: {report}"
    );
    assert_eq!(bots["arena"]["welcomes"], 20, "{report}");
    // 60 patches a second when the server keeps up; a loaded CI machine may lose some, a
    // broken count (or a patch counted twice) lands far outside.
    let rate = report["snapshots_per_player_s"].as_f64().unwrap_or(0.0);
    assert!(
        (30.0..=66.0).contains(&rate),
        "each bot hears about 60 patches a second, not {rate}: {report}"
    );
    assert!(
        report["server_cpu_s"].as_f64().is_some_and(|cpu| cpu > 0.0),
        "the server's CPU is read from /proc: {report}"
    );
    // Measured before the server starts, so every run says how fast the machine was.
    assert!(
        report["machine_raw_pps_per_core"]
            .as_f64()
            .is_some_and(|pps| pps > 1_000.0),
        "the machine's raw sendmmsg limit is measured: {report}"
    );
}
