//! The relay scenario (`tickwire bench sfs`) as the protocol `Server` sees it, without
//! sockets, on a virtual clock: rooms of clients each sending small unreliable messages on a
//! schedule, every message sent on to the other members of its room. It exists to count the
//! server's instructions deterministically:
//!
//! ```text
//! cargo build --release -p tickwire-proto --example relay_turns
//! valgrind --tool=callgrind --toggle-collect='relay_turns::serve_turn' \
//!     target/release/examples/relay_turns --seconds 0.5
//! ```
//!
//! Only `serve_turn` is counted: what one turn of a shard worker's loop asks of the protocol
//! (take in a batch of datagrams, hand out its messages, queue each for the other members,
//! run due timers, drain `poll_transmit` into a send batch, ask for the next deadline). The
//! clients run between turns and are not counted. Each step of virtual time (`--step-ms`,
//! default 1) the clients whose message is due send it (their owed acks ride along), then
//! the server runs turns of at most `--batch` datagrams until its inbox is empty, and what
//! it sent is delivered at once. A longer step with a larger batch is a server that takes
//! in more per turn, as a busy one does: more messages for each member leave together. Defaults are seed 001's: 138 rooms of 16, 30 messages a second each,
//! 32 bytes.
//!
//! Options: `--rooms N`, `--size N` (members per room), `--rate HZ`, `--bytes N`,
//! `--seconds S` (measured virtual time), `--warm-up S` (before it), `--batch N`.

use std::collections::{BinaryHeap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{
    Client, ClientEvent, ConnectionId, MAX_DATAGRAM_BYTES, Server, ServerConfig, ServerEvent,
};

#[path = "common/args.rs"]
mod args;

const PROTOCOL_ID: u64 = 0x7157_0002;
const UNIX_TIME: u64 = 1_800_000_000;
/// The unreliable channel of the default parameters.
const UNRELIABLE: u8 = 1;

struct Options {
    rooms: usize,
    size: usize,
    rate: u32,
    bytes: usize,
    seconds: f64,
    warm_up: f64,
    batch: usize,
    step: Duration,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        rooms: 138,
        size: 16,
        rate: 30,
        bytes: 32,
        seconds: 0.5,
        warm_up: 0.5,
        batch: 64,
        step: Duration::from_millis(1),
    };
    for (flag, value) in args::pairs()? {
        match flag.as_str() {
            "--rooms" => options.rooms = args::parse(&flag, &value)?,
            "--size" => options.size = args::parse(&flag, &value)?,
            "--rate" => options.rate = args::parse(&flag, &value)?,
            "--bytes" => options.bytes = args::parse(&flag, &value)?,
            "--seconds" => options.seconds = args::parse(&flag, &value)?,
            "--batch" => options.batch = args::parse(&flag, &value)?,
            "--step-ms" => options.step = Duration::from_millis(args::parse(&flag, &value)?),
            "--warm-up" => options.warm_up = args::parse(&flag, &value)?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if options.rooms * options.size == 0 || options.rooms * options.size > 4096 {
        return Err("rooms × size must be 1..=4096".into());
    }
    if options.rate == 0 || options.batch == 0 || options.bytes == 0 || options.step.is_zero() {
        return Err("--rate, --batch, --bytes and --step-ms must be positive".into());
    }
    Ok(options)
}

/// What the server sent in one turn: datagrams back to back in one buffer, as a send batch
/// holds them. Reused, so a turn allocates nothing once it has grown.
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    datagrams: Vec<(SocketAddr, usize)>,
}

/// Counted figures.
#[derive(Default)]
struct Figures {
    turns: u64,
    datagrams_in: u64,
    messages_in: u64,
    messages_queued: u64,
    datagrams_out: u64,
    bytes_out: u64,
    /// Wall-clock time inside `serve_turn`: a shared machine's figure, for comparing two
    /// builds run one after the other, not a measurement of record.
    served: Duration,
}

struct Model {
    server: Server,
    /// A connection's room and index in it, as the shard's player map holds it.
    members: HashMap<ConnectionId, (usize, usize)>,
    rooms: Vec<Vec<Option<ConnectionId>>>,
    outbox: Outbox,
    scratch: Box<[u8; MAX_DATAGRAM_BYTES]>,
}

/// One turn of a worker's loop, as far as the protocol is concerned; the function callgrind
/// counts.
#[inline(never)]
fn serve_turn(
    model: &mut Model,
    now: Instant,
    inbox: &[(SocketAddr, Vec<u8>)],
    figures: &mut Figures,
) {
    let Model {
        server,
        members,
        rooms,
        outbox,
        scratch,
    } = model;
    figures.turns += 1;
    if server.poll_timeout().is_some_and(|at| at <= now) {
        server.handle_timeout(now);
    }
    // As a shard worker does: every connection of the batch asked for first.
    for (from, _) in inbox {
        server.prefetch(*from);
    }
    for (from, datagram) in inbox {
        server.handle_datagram(now, *from, datagram);
    }
    figures.datagrams_in += inbox.len() as u64;
    while let Some(event) = server.poll_event() {
        if let ServerEvent::Message {
            connection,
            channel,
            message,
        } = event
        {
            figures.messages_in += 1;
            let Some(&(room, index)) = members.get(&connection) else {
                continue;
            };
            for (other, member) in rooms[room].iter().enumerate() {
                if let (true, Some(to)) = (other != index, member) {
                    let _ = server.send(now, *to, channel, message.clone());
                    figures.messages_queued += 1;
                }
            }
        }
    }
    outbox.bytes.clear();
    outbox.datagrams.clear();
    while let Some(transmit) = server.poll_transmit(now, &mut scratch[..]) {
        outbox.bytes.extend_from_slice(&scratch[..transmit.len]);
        outbox.datagrams.push((transmit.destination, transmit.len));
        figures.bytes_out += transmit.len as u64;
    }
    figures.datagrams_out += outbox.datagrams.len() as u64;
    std::hint::black_box(server.poll_timeout());
}

fn client_address(index: usize) -> SocketAddr {
    SocketAddr::from((
        Ipv4Addr::new(127, 0, 1 + (index / 60_000) as u8, 1),
        1024 + (index % 60_000) as u16,
    ))
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("relay_turns: {error}");
            return ExitCode::FAILURE;
        }
    };
    let count = options.rooms * options.size;
    let start = Instant::now();
    let mut now = start;
    let server_address: SocketAddr = "127.0.0.1:7777".parse().expect("valid");
    let key = Key([7; 32]);
    let mut rng = StdRng::seed_from_u64(1);
    let mut config = ServerConfig::new(PROTOCOL_ID, key.clone(), vec![server_address]);
    config.max_clients = count;
    let server = Server::new(config, now, UNIX_TIME, &mut rng).expect("valid config");
    let issuer = TokenIssuer {
        protocol_id: PROTOCOL_ID,
        key,
        server_addresses: vec![server_address],
        validity_seconds: 600,
        timeout_seconds: 10,
    };
    let mut clients: Vec<Client> = (0..count)
        .map(|i| {
            let token = issuer
                .issue(&mut rng, UNIX_TIME, i as u64, &[])
                .expect("token issues");
            Client::new(token, now, UNIX_TIME, ReliabilityConfig::default())
        })
        .collect();
    let by_address: HashMap<SocketAddr, usize> =
        (0..count).map(|i| (client_address(i), i)).collect();
    let mut model = Model {
        server,
        members: HashMap::new(),
        rooms: vec![vec![None; options.size]; options.rooms],
        outbox: Outbox::default(),
        scratch: Box::new([0; MAX_DATAGRAM_BYTES]),
    };

    // Handshakes, uncounted; the server takes 1024 at a time, the rest ask again later.
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    for _ in 0..12 {
        now += Duration::from_millis(101);
        for (i, client) in clients.iter_mut().enumerate() {
            while let Some(transmit) = client.poll_transmit(now, &mut buf) {
                model
                    .server
                    .handle_datagram(now, client_address(i), &buf[..transmit.len]);
            }
        }
        while let Some(event) = model.server.poll_event() {
            if let ServerEvent::Connected {
                connection,
                client_id,
                ..
            } = event
            {
                let i = client_id as usize;
                let (room, index) = (i / options.size, i % options.size);
                model.rooms[room][index] = Some(connection);
                model.members.insert(connection, (room, index));
            }
        }
        while let Some(transmit) = model.server.poll_transmit(now, &mut buf) {
            if let Some(&i) = by_address.get(&transmit.destination) {
                clients[i].handle_datagram(now, server_address, &buf[..transmit.len]);
            }
        }
    }
    if model.members.len() != count {
        eprintln!(
            "relay_turns: only {} of {count} clients connected",
            model.members.len()
        );
        return ExitCode::FAILURE;
    }
    for client in &mut clients {
        while client.poll_event().is_some() {}
    }

    // Each client sends every `period`, from its own offset; a heap of next send times.
    let period = Duration::from_secs(1) / options.rate;
    let mut schedule: BinaryHeap<std::cmp::Reverse<(Instant, usize)>> = (0..count)
        .map(|i| {
            let offset = period.mul_f64((i as f64 * 0.618_033_988_7).fract());
            std::cmp::Reverse((now + offset, i))
        })
        .collect();
    let payload = Bytes::from(vec![0x5A; options.bytes]);
    let warm_up = now + Duration::from_secs_f64(options.warm_up);
    let end = warm_up + Duration::from_secs_f64(options.seconds);
    let mut inbox: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
    let mut touched = vec![false; count];
    let mut touched_list: Vec<usize> = Vec::new();
    let mut figures = Figures::default();
    let mut received = 0u64;
    let mut warm = Figures::default();
    while now < end {
        if now >= warm_up && warm.turns == 0 {
            warm = std::mem::take(&mut figures);
            warm.turns = warm.turns.max(1);
            received = 0;
        }
        // Clients: due sends, then everything touched transmits (acks ride along).
        while let Some(&std::cmp::Reverse((at, i))) = schedule.peek() {
            if at > now {
                break;
            }
            schedule.pop();
            let _ = clients[i].send(UNRELIABLE, payload.clone());
            schedule.push(std::cmp::Reverse((at + period, i)));
            if !touched[i] {
                touched[i] = true;
                touched_list.push(i);
            }
        }
        for i in touched_list.drain(..) {
            touched[i] = false;
            let client = &mut clients[i];
            if client.poll_timeout().is_some_and(|at| at <= now) {
                client.handle_timeout(now);
            }
            while let Some(transmit) = client.poll_transmit(now, &mut buf) {
                inbox.push((client_address(i), buf[..transmit.len].to_vec()));
            }
        }
        // The server: turns of at most a batch until its inbox is empty, then delivery.
        let mut taken = 0;
        loop {
            let batch = &inbox[taken..(taken + options.batch).min(inbox.len())];
            let started = Instant::now();
            serve_turn(&mut model, now, batch, &mut figures);
            figures.served += started.elapsed();
            taken += batch.len();
            let Outbox { bytes, datagrams } = &model.outbox;
            let mut at = 0;
            for &(to, len) in datagrams {
                if let Some(&i) = by_address.get(&to) {
                    clients[i].handle_datagram(now, server_address, &bytes[at..at + len]);
                    while let Some(event) = clients[i].poll_event() {
                        if let ClientEvent::Message { .. } = event {
                            received += 1;
                        }
                    }
                    // A client answers on its next send or timer, as the load tool's bots do.
                }
                at += len;
            }
            if taken >= inbox.len() {
                break;
            }
        }
        inbox.clear();
        now += options.step;
        // Clients whose timers are due (keepalives) transmit too.
        for (i, client) in clients.iter_mut().enumerate() {
            if client.poll_timeout().is_some_and(|at| at <= now) && !touched[i] {
                touched[i] = true;
                touched_list.push(i);
            }
        }
    }
    let f = &figures;
    println!(
        "{} clients in {} rooms, {} s measured after {} s of warm-up, a turn every {:?} of \
         at most {} datagrams",
        count, options.rooms, options.seconds, options.warm_up, options.step, options.batch
    );
    println!(
        "turns {} | datagrams in {} | messages in {} | messages queued {} | delivered {}",
        f.turns, f.datagrams_in, f.messages_in, f.messages_queued, received
    );
    println!(
        "per message queued: measure serve_turn's instructions (callgrind) and divide by {}; \
         wall clock {:.1} ns",
        f.messages_queued,
        f.served.as_nanos() as f64 / f.messages_queued.max(1) as f64
    );
    println!(
        "datagrams out {} ({:.2} messages each, {:.1} bytes each) | datagrams in per turn {:.1}",
        f.datagrams_out,
        f.messages_queued as f64 / f.datagrams_out.max(1) as f64,
        f.bytes_out as f64 / f.datagrams_out.max(1) as f64,
        f.datagrams_in as f64 / f.turns.max(1) as f64,
    );
    ExitCode::SUCCESS
}
