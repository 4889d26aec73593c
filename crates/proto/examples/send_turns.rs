//! `tickwire bench udp`'s out phase as the protocol `Server` sees it, without sockets:
//! clients connected on a frozen clock that never ack (so each connection keeps the
//! reliability layer's 1024 packets in flight, the sender's costly case), one 34-byte
//! message queued for every connection with one shared `Bytes`, then `poll_transmit`
//! drained into batches of 64 datagrams written in place, round after round. It prints the
//! wall time per datagram, the median of seven passes: on a quiet core it reads to a few
//! nanoseconds, where `bench udp`'s ratio moves by a few hundredths with the machine.
//!
//! ```text
//! cargo build --release -p tickwire-proto --example send_turns
//! taskset -c 1 target/release/examples/send_turns [--clients 256] [--rounds 1000]
//!     [--gap-us 0] [--evict-kb 0]
//! ```
//!
//! Between batches, where a driver's `sendmmsg` would run, `--gap-us N` spins N µs without
//! touching memory and `--evict-kb N` reads N KiB of other memory; neither is timed. In
//! `bench udp` the kernel spends about 75 µs on each batch, and the protocol's time per
//! datagram grows with that gap even when nothing is evicted (BENCHMARKS.md).
//! For instructions and cache misses, count `drain` alone:
//! `valgrind --tool=callgrind --toggle-collect='send_turns::drain' …/send_turns --rounds 40`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_proto::{ConnectionId, MAX_DATAGRAM_BYTES, Server};

#[path = "common/args.rs"]
mod args;
#[path = "../tests/crowd/mod.rs"]
mod crowd;

/// The unreliable channel of the default parameters.
const UNRELIABLE: u8 = 1;
/// Datagrams per batch, as `bench udp`'s `sendmmsg`.
const BATCH: usize = 64;

struct Options {
    clients: u16,
    rounds: usize,
    gap: Duration,
    evict_kb: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        clients: 256,
        rounds: 1000,
        gap: Duration::ZERO,
        evict_kb: 0,
    };
    for (flag, value) in args::pairs()? {
        match flag.as_str() {
            "--clients" => options.clients = args::parse(&flag, &value)?,
            "--rounds" => options.rounds = args::parse(&flag, &value)?,
            "--gap-us" => options.gap = Duration::from_micros(args::parse(&flag, &value)?),
            "--evict-kb" => options.evict_kb = args::parse(&flag, &value)?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if options.clients == 0 || options.rounds == 0 {
        return Err("--clients and --rounds must be positive".into());
    }
    Ok(options)
}

/// What runs between batches, untimed: a spin, and reads of other memory.
struct Between {
    gap: Duration,
    /// Cache lines of other memory, all read between each two batches.
    lines: Vec<[u64; 8]>,
    spent: Duration,
}

impl Between {
    fn run(&mut self) {
        let start = Instant::now();
        while start.elapsed() < self.gap {
            std::hint::spin_loop();
        }
        for line in &self.lines {
            std::hint::black_box(line[0]);
        }
        self.spent += start.elapsed();
    }
}

/// One round: a message for every connection, then every datagram out, a batch at a time.
/// The function callgrind counts (with `Between::run` inside it: subtract it).
#[inline(never)]
fn drain(
    server: &mut Server,
    ids: &[ConnectionId],
    message: &Bytes,
    slots: &mut [u8],
    now: Instant,
    between: &mut Between,
) -> usize {
    for &id in ids {
        server
            .send(now, id, UNRELIABLE, message.clone())
            .expect("a connected client takes a message");
    }
    let mut sent = 0;
    loop {
        let slot = &mut slots[(sent % BATCH) * MAX_DATAGRAM_BYTES..][..MAX_DATAGRAM_BYTES];
        let Some(transmit) = server.poll_transmit(now, slot) else {
            break;
        };
        std::hint::black_box(transmit);
        sent += 1;
        if sent % BATCH == 0 {
            between.run();
        }
    }
    sent
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("send_turns: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut now = Instant::now();
    let (mut server, address, key) = crowd::server(now);
    let (_clients, ids) = crowd::connect(&mut server, address, &key, options.clients, now);
    if ids.len() != usize::from(options.clients) {
        eprintln!(
            "send_turns: {} of {} clients connected",
            ids.len(),
            options.clients
        );
        return ExitCode::FAILURE;
    }
    let message = Bytes::from(vec![0xA5; 34]);
    let mut slots = vec![0u8; BATCH * MAX_DATAGRAM_BYTES];
    let mut between = Between {
        gap: options.gap,
        lines: vec![[0; 8]; options.evict_kb * 1024 / 64],
        spent: Duration::ZERO,
    };
    // As `bench udp`'s warm-up: 256 messages to each connection fill its sent-packet ring.
    for _ in 0..256 {
        drain(&mut server, &ids, &message, &mut slots, now, &mut between);
    }
    let mut passes: Vec<f64> = (0..7)
        .map(|_| {
            between.spent = Duration::ZERO;
            let start = Instant::now();
            let mut sent = 0;
            for round in 0..options.rounds {
                // The clock moves as a driver reads it, once per few batches.
                if round % 16 == 0 {
                    now = Instant::now();
                }
                sent += drain(&mut server, &ids, &message, &mut slots, now, &mut between);
            }
            (start.elapsed() - between.spent).as_nanos() as f64 / sent as f64
        })
        .collect();
    passes.sort_by(f64::total_cmp);
    println!(
        "{} clients, {} rounds of a 34-byte message each, gap {:?}, {} KiB read between \
         batches: {:.1} ns per datagram (median of 7 passes; fastest {:.1}, slowest {:.1})",
        options.clients,
        options.rounds,
        options.gap,
        options.evict_kb,
        passes[3],
        passes[0],
        passes[6]
    );
    ExitCode::SUCCESS
}
