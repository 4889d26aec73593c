//! `tickwire bench-db` end to end on embedded SQLite: it runs, prints the figures the issue
//! names, and leaves no tables behind.

use std::process::Command;

#[test]
fn bench_db_prints_every_figure_as_json() {
    let dir = std::env::temp_dir().join(format!("tickwire-bench-db-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("bench.db").display());
    let output = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["bench-db", "--url", &url, "--records", "1000", "--json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["backend"], "sqlite");
    assert_eq!(report["records"], 1000);
    for figure in [
        "update_ms",
        "seek_ms",
        "rank_top1000_unindexed_ms",
        "rank_top1000_indexed_ms",
        "batched_updates_per_s",
    ] {
        let value = report[figure].as_f64();
        assert!(value.is_some_and(|v| v > 0.0), "{figure}: {report}");
    }

    let refused = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args([
            "bench-db",
            "--url",
            "redis://127.0.0.1",
            "--records",
            "1000",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains("redis"), "the bad URL is named: {error}");
    let _ = std::fs::remove_dir_all(dir);
}
