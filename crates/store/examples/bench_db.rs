//! Seed 004's database benchmark, until `tickwire bench-db` calls the same function:
//!
//! ```text
//! cargo run --release -p tickwire-store --example bench_db -- URL [RECORDS] [--json] [--sync normal|full]
//! ```

use tickwire_store::bench;
use tickwire_store::{SqliteSync, StoreConfig};

fn usage() -> ! {
    eprintln!("usage: bench_db URL [RECORDS, default 50000] [--json] [--sync normal|full]");
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut url = None;
    let mut records = 50_000u64;
    let mut json = false;
    let mut config = StoreConfig::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--sync" => {
                config.sqlite_synchronous = match args.next().as_deref() {
                    Some("normal") => SqliteSync::Normal,
                    Some("full") => SqliteSync::Full,
                    _ => usage(),
                }
            }
            _ if url.is_none() => url = Some(arg),
            _ => records = arg.parse().unwrap_or_else(|_| usage()),
        }
    }
    config.url = url.unwrap_or_else(|| usage());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(bench::run_with(&config, records)) {
        Ok(report) if json => println!("{}", serde_json::to_string(&report).unwrap()),
        Ok(report) => print!("{report}"),
        Err(error) => {
            eprintln!("bench_db: {error}");
            std::process::exit(1);
        }
    }
}
