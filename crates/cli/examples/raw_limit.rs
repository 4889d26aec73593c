//! Measures this machine's raw `sendmmsg` limit (and, with `--driver`, the same loop through
//! `SendBatch`), until `tickwire bench udp` carries it.
//!
//! ```text
//! cargo run --release -p tickwire --example raw_limit -- [--json] [--driver]
//!     [--runs 1] [--seconds 2] [--destinations 256] [--payload 64] [--batch 64]
//!     [--sender-cpu 1] [--receiver-cpu 0]
//! ```
//!
//! With `--runs N` it runs N times and reports the run with the median figure per sender
//! core-second (the machine is shared, so single runs wander).

use std::process::ExitCode;
use std::time::Duration;

use tickwire::bench::raw::{RawBenchError, RawConfig, RawFigures, raw_sendmmsg, send_batch_loop};

fn main() -> ExitCode {
    let mut config = RawConfig::default();
    let mut json = false;
    let mut driver = false;
    let mut runs = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> Option<String> {
            let v = args.next();
            if v.is_none() {
                eprintln!("{name} needs a value");
            }
            v
        };
        let parsed = match arg.as_str() {
            "--json" => {
                json = true;
                Some(())
            }
            "--driver" => {
                driver = true;
                Some(())
            }
            "--runs" => value("--runs")
                .and_then(|v| v.parse().ok())
                .filter(|&n| n >= 1)
                .map(|n| runs = n),
            "--seconds" => value("--seconds")
                .and_then(|v| v.parse::<f64>().ok())
                .map(|s| config.duration = Duration::from_secs_f64(s)),
            "--destinations" => value("--destinations")
                .and_then(|v| v.parse().ok())
                .map(|n| config.destinations = n),
            "--payload" => value("--payload")
                .and_then(|v| v.parse().ok())
                .map(|n| config.payload_len = n),
            "--batch" => value("--batch")
                .and_then(|v| v.parse().ok())
                .map(|n| config.batch = n),
            "--sender-cpu" => value("--sender-cpu")
                .and_then(|v| v.parse().ok())
                .map(|n| config.sender_cpu = Some(n)),
            "--receiver-cpu" => value("--receiver-cpu")
                .and_then(|v| v.parse().ok())
                .map(|n| config.receiver_cpu = Some(n)),
            _ => None,
        };
        if parsed.is_none() {
            eprintln!("bad argument {arg:?}; see the example's doc comment for usage");
            return ExitCode::FAILURE;
        }
    }

    let raw = match median_of(runs, json, || raw_sendmmsg(&config)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("raw sendmmsg: {e}");
            return ExitCode::FAILURE;
        }
    };
    let through_driver = if driver {
        match median_of(runs, json, || send_batch_loop(&config)) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("SendBatch loop: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };

    if json {
        let mut out = format!(
            "{{\"runs\":{runs},\"payload_len\":{},\"destinations\":{},\"batch\":{},\"seconds\":{:.3},\
             \"sender_cpu\":{},\"receiver_cpu\":{},{}",
            config.payload_len,
            config.destinations,
            config.batch,
            raw.wall.as_secs_f64(),
            opt(config.sender_cpu),
            opt(config.receiver_cpu),
            fields("raw", &raw),
        );
        if let Some(d) = &through_driver {
            out.push(',');
            out.push_str(&fields("send_batch", d));
            out.push_str(&format!(
                ",\"send_batch_ratio_to_raw\":{:.3}",
                d.sent_pps_per_core() / raw.sent_pps_per_core()
            ));
        }
        out.push('}');
        println!("{out}");
    } else {
        println!(
            "{} B payload, {} destinations, {} per sendmmsg, {:.1} s, sender cpu {}, receiver cpu {}",
            config.payload_len,
            config.destinations,
            config.batch,
            raw.wall.as_secs_f64(),
            opt(config.sender_cpu),
            opt(config.receiver_cpu),
        );
        print_human("raw sendmmsg", &raw);
        if let Some(d) = &through_driver {
            print_human("SendBatch", d);
            println!(
                "SendBatch / raw, per sender core: {:.3}",
                d.sent_pps_per_core() / raw.sent_pps_per_core()
            );
        }
    }
    ExitCode::SUCCESS
}

/// Runs `measure` `runs` times and returns the run with the median figure per sender core.
/// Each run is printed to stderr when there are several (unless `quiet`).
fn median_of(
    runs: usize,
    quiet: bool,
    mut measure: impl FnMut() -> Result<RawFigures, RawBenchError>,
) -> Result<RawFigures, RawBenchError> {
    let mut all = Vec::with_capacity(runs);
    for run in 0..runs {
        let f = measure()?;
        if runs > 1 && !quiet {
            eprintln!(
                "  run {}: {:.0} datagrams/s per sender core-second",
                run + 1,
                f.sent_pps_per_core()
            );
        }
        all.push(f);
    }
    all.sort_by(|a, b| a.sent_pps_per_core().total_cmp(&b.sent_pps_per_core()));
    Ok(all.swap_remove(runs / 2))
}

fn opt(cpu: Option<usize>) -> String {
    cpu.map_or_else(|| "null".to_owned(), |c| c.to_string())
}

fn fields(prefix: &str, f: &RawFigures) -> String {
    format!(
        "\"{prefix}_pps_per_core\":{:.0},\"{prefix}_pps\":{:.0},\"{prefix}_received_pps\":{:.0},\
         \"{prefix}_sent\":{},\"{prefix}_received\":{},\"{prefix}_sender_cpu_s\":{:.3},\
         \"{prefix}_ns_per_datagram\":{:.1},\"{prefix}_would_block\":{},\"{prefix}_send_errors\":{}",
        f.sent_pps_per_core(),
        f.sent_pps(),
        f.received_pps(),
        f.sent,
        f.received,
        f.sender_cpu_time.as_secs_f64(),
        f.ns_per_datagram(),
        f.would_block,
        f.send_errors,
    )
}

fn print_human(name: &str, f: &RawFigures) {
    println!(
        "{name:>13}: {:>9.0} datagrams/s per sender core-second ({:.0} ns each); \
         wall {:.0}/s sent, {:.0}/s received ({} of {}); sender cpu {:.2} s, receiver cpu {:.2} s",
        f.sent_pps_per_core(),
        f.ns_per_datagram(),
        f.sent_pps(),
        f.received_pps(),
        f.received,
        f.sent,
        f.sender_cpu_time.as_secs_f64(),
        f.receiver_cpu_time.as_secs_f64(),
    );
}
