//! `tickwire`: the one binary: the server, the load bots and the benchmarks.

use std::time::Duration;

use clap::{Parser, Subcommand};
use tickwire::bench::cluster::{self, ClusterArgs};
use tickwire::bench::load::{self, LoadBenchArgs};
use tickwire::bench::soak::{self, SoakArgs};
use tickwire::bench::udp::{self, UdpBenchConfig};
use tickwire::bench::wire::{self, WireBenchConfig};
use tickwire::bots::{self, BotsArgs};
use tickwire::serve::{self, ServeArgs};
use tickwire_alloc_count::CountingAllocator;

// Counting costs one relaxed atomic add per allocation and lets benchmarks report
// allocations per operation from the real binary.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[derive(Debug, Parser)]
#[command(
    name = "tickwire",
    version,
    about = "Authoritative real-time game server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the game server.
    Serve(Box<ServeArgs>),
    /// Exit 0 when a server answers its health probe with 200 (the container image's
    /// HEALTHCHECK: the slim image has no curl), 1 otherwise.
    Healthcheck {
        /// The probe's URL (plain http).
        #[arg(long, default_value = "http://127.0.0.1:8080/healthz")]
        url: String,
        /// How long the probe may take, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        timeout_ms: u64,
    },
    /// Ask the server on this machine to drain (no new players, rooms finish), and wait
    /// until it has exited or `--wait-secs` passed: a Kubernetes preStop hook. The admin
    /// token comes from TICKWIRE_ADMIN__TOKEN.
    Drain {
        /// The server's operator listener (admin.listen), where the admin API answers.
        #[arg(long, default_value = "http://127.0.0.1:9090")]
        url: String,
        /// Longest wait for the rooms to finish.
        #[arg(long, default_value_t = 20)]
        wait_secs: u64,
    },
    /// Run a scenario's bots against a server and print what they measured.
    Bots(Box<BotsArgs>),
    /// Run a benchmark and print its figures.
    Bench {
        #[command(subcommand)]
        scenario: Scenario,
    },
    /// Seed 004's database benchmark against any backend: fill a table, then time updates,
    /// seeks, top-1,000 rankings (unindexed and indexed) and batched stat writes.
    BenchDb {
        /// The database: sqlite://FILE, postgres://…, mysql://… (tables it creates are
        /// dropped afterwards).
        #[arg(long)]
        url: String,
        /// Rows to fill the table with.
        #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1_000..=10_000_000))]
        records: u64,
        /// SQLite only: `full` (survives power loss, the server's default) or `normal`.
        #[arg(long, value_enum, default_value_t = SqliteSyncArg::Full)]
        sqlite_synchronous: SqliteSyncArg,
        /// SQLite only: the pool's page cache, MiB (the server's `store.sqlite_cache_mib`).
        #[arg(long, default_value_t = tickwire_store::StoreConfig::default().sqlite_cache_mib)]
        sqlite_cache_mib: u32,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Generate client code from the Rust message types.
    Codegen {
        #[command(subcommand)]
        language: Language,
    },
}

#[derive(Debug, Subcommand)]
enum Language {
    /// The arena's messages as `@tickwire/client` codecs (committed as
    /// clients/ts/arena/src/generated/messages.ts).
    Ts {
        /// Write here instead of to standard output.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
}

/// SQLite's `synchronous` setting, as `bench-db` takes it.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SqliteSyncArg {
    Full,
    Normal,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Seed 001's relay stress: 138 relay rooms × 16 bots, 30 unreliable messages/s each;
    /// server and bots as separate processes pinned to different CPUs.
    Sfs(Box<LoadBenchArgs>),
    /// Seed 004's chat storm: 300 bots in one relay room, one reliable line/s each; every
    /// line expected versus delivered.
    Nettest(Box<LoadBenchArgs>),
    /// Seed 000's arena: 250 players over 100 arena rooms at 60 Hz, an input every 40 ms,
    /// turning and firing once a second (scale with --players and --rooms).
    Hobo(Box<LoadBenchArgs>),
    /// Seed 003's burst: 5,000 players on the large map warp into its 200 m² plaza at
    /// once; request → confirmation latency and the ticks around it.
    Teleport(Box<LoadBenchArgs>),
    /// Bots playing the arena (move, aim, shoot, die, respawn), every snapshot decoded.
    Arena(Box<LoadBenchArgs>),
    /// Hours of churn: players arriving and leaving every second over UDP, WebSocket and
    /// WebTransport, in arena and chat rooms, some reconnecting; the server's memory,
    /// descriptors, tasks and tick p99 sampled as a series, and whether they held flat.
    Soak(Box<SoakArgs>),
    /// Issue 19's cluster: N local nodes sharing one Redis, bots matchmaking through one:
    /// matchmake latency, how evenly players spread, and a `kill -9` of one node (time until
    /// it leaves the directory, its players re-placed on the others).
    Cluster(Box<ClusterArgs>),
    /// Seed 002's entity: encoded size, ns and allocations per write + read round trip.
    Wire {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Timed samples per case (the median is reported).
        #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u16).range(1..))]
        samples: u16,
    },
    /// The UDP protocol path (encrypt, ack, header, batched send) against the raw sendmmsg
    /// limit in the same run: datagrams per server core-second, out and in.
    Udp {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Client connections (and raw destination sockets).
        #[arg(
            long,
            default_value_t = 256,
            value_parser = clap::value_parser!(u16).range(1..=4096)
        )]
        destinations: u16,
        /// Milliseconds per timed phase (five protocol phases and one raw phase per run).
        #[arg(
            long,
            default_value_t = 2000,
            value_parser = clap::value_parser!(u64).range(10..=600_000)
        )]
        duration_ms: u64,
        /// Runs (the median is reported).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..))]
        runs: u16,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(args) => {
            let config = serve::load_config(&args)?;
            if args.print_config {
                print!("{}", serve::render_config(&config)?);
                return Ok(());
            }
            init_logging();
            serve::run(config)?;
        }
        Command::Codegen {
            language: Language::Ts { out },
        } => {
            let code = tickwire::codegen::arena_typescript()?;
            match out {
                Some(path) => std::fs::write(path, code)?,
                None => print!("{code}"),
            }
        }
        Command::BenchDb {
            url,
            records,
            sqlite_synchronous,
            sqlite_cache_mib,
            json,
        } => {
            let config = tickwire_store::StoreConfig {
                url,
                sqlite_synchronous: match sqlite_synchronous {
                    SqliteSyncArg::Full => tickwire_store::SqliteSync::Full,
                    SqliteSyncArg::Normal => tickwire_store::SqliteSync::Normal,
                },
                sqlite_cache_mib,
                ..tickwire_store::StoreConfig::default()
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let report = runtime.block_on(tickwire_store::bench::run_with(&config, records))?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{report}");
            }
        }
        Command::Bots(args) => bots::run(&args)?,
        Command::Drain { url, wait_secs } => {
            let token = std::env::var("TICKWIRE_ADMIN__TOKEN").unwrap_or_default();
            tickwire::health::drain(&url, &token, Duration::from_secs(wait_secs))?;
        }
        Command::Healthcheck { url, timeout_ms } => {
            if let Err(error) = tickwire::health::probe(&url, Duration::from_millis(timeout_ms)) {
                eprintln!("unhealthy: {error}");
                std::process::exit(1);
            }
        }
        Command::Bench {
            scenario: Scenario::Sfs(args),
        } => bench_load("sfs", &args)?,
        Command::Bench {
            scenario: Scenario::Nettest(args),
        } => bench_load("nettest", &args)?,
        Command::Bench {
            scenario: Scenario::Hobo(args),
        } => bench_load("hobo", &args)?,
        Command::Bench {
            scenario: Scenario::Teleport(args),
        } => bench_load("teleport", &args)?,
        Command::Bench {
            scenario: Scenario::Arena(args),
        } => bench_load("arena", &args)?,
        Command::Bench {
            scenario: Scenario::Soak(args),
        } => {
            let report = soak::run(&args)?;
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", soak::render(&report));
            }
            if !report.flat {
                std::process::exit(1);
            }
        }
        Command::Bench {
            scenario: Scenario::Cluster(args),
        } => {
            let report = cluster::run(&args)?;
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", cluster::render(&report));
            }
            if !report.done {
                std::process::exit(1);
            }
        }
        Command::Bench {
            scenario: Scenario::Wire { json, samples },
        } => {
            let config = WireBenchConfig {
                samples: usize::from(samples),
                ..WireBenchConfig::default()
            };
            let report = wire::run(&config)?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", wire::render(&report));
            }
        }
        Command::Bench {
            scenario:
                Scenario::Udp {
                    json,
                    destinations,
                    duration_ms,
                    runs,
                },
        } => {
            let config = UdpBenchConfig {
                destinations: usize::from(destinations),
                duration: Duration::from_millis(duration_ms),
                runs: usize::from(runs),
                progress: !json,
                ..UdpBenchConfig::default()
            };
            let report = udp::run(&config)?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", udp::render(&report));
            }
        }
    }
    Ok(())
}

fn bench_load(name: &str, args: &LoadBenchArgs) -> anyhow::Result<()> {
    let report = load::run(name, args)?;
    if !report.valid {
        eprintln!(
            "warning: not a valid run, the bots did not keep up ({}); its figures are not the server's",
            report.invalid_because.join("; ")
        );
    }
    if report.connect_failed > 0 {
        eprintln!(
            "warning: {} bots failed to connect and were left out (reasons in the report)",
            report.connect_failed
        );
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", load::render(&report));
    }
    Ok(())
}

/// Logs to stderr; `RUST_LOG` picks what (default: info for tickwire, warnings otherwise).
fn init_logging() {
    tickwire_server::embed::init_logging();
}
