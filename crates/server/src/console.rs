//! The admin console: a telnet-compatible line protocol on a local TCP port, behind a
//! password. An operator runs `telnet 127.0.0.1 7000` (or `nc`) and types commands.
//!
//! The console knows nothing about the runtime: it calls an [`AdminOps`] implementation,
//! which the runtime provides (and tests fake).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::credentials::{Credentials, Refused, Via};
use crate::room::PlayerId;
use crate::shard::RoomInfo;

/// Longest line the console reads; longer input closes the session.
pub const MAX_LINE_BYTES: usize = 1024;
/// How long a session may sit at the password prompt.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a logged-in session may stay idle.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// A snapshot of the server for `stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Connected players over UDP.
    pub players_udp: u64,
    /// Connected players over WebSocket (ws and wss).
    pub players_ws: u64,
    /// Connected players over WebTransport.
    pub players_webtransport: u64,
    /// Rooms hosted.
    pub rooms: u64,
    /// Packets (or frames) received per second.
    pub packets_in_per_second: f64,
    /// Packets (or frames) sent per second.
    pub packets_out_per_second: f64,
    /// Bytes received per second.
    pub bytes_in_per_second: f64,
    /// Bytes sent per second.
    pub bytes_out_per_second: f64,
    /// Median tick duration, milliseconds.
    pub tick_p50_ms: f64,
    /// 99th percentile tick duration, milliseconds.
    pub tick_p99_ms: f64,
    /// Longest tick duration, milliseconds.
    pub tick_max_ms: f64,
    /// Messages dropped from send queues (slow clients, stale state replaced).
    pub queue_drops: u64,
}

/// A player as the console lists them.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerSummary {
    /// Id.
    pub id: PlayerId,
    /// Display name.
    pub name: String,
    /// How they are connected.
    pub transport: PlayerTransport,
    /// Their room, if seated.
    pub room: Option<u64>,
    /// What the connection measures of its path, where it measures it: UDP links do (the
    /// reliability layer's acks); over WebSocket and WebTransport the server keeps no such
    /// figures, and this is `None`.
    pub link: Option<LinkQuality>,
}

/// How a player is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlayerTransport {
    /// tickwire's UDP protocol.
    Udp,
    /// WebSocket, `ws` and `wss` alike.
    Ws,
    /// WebTransport.
    Wt,
}

impl PlayerTransport {
    /// `udp`, `ws` or `wt`, as the console and the admin API show it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Ws => "ws",
            Self::Wt => "wt",
        }
    }
}

/// A connection's path as its reliability layer sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkQuality {
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// Fraction (0..=1) of the last 256 ack-eliciting packets never acked.
    pub loss: f32,
}

/// What the console can ask of the server. The runtime implements it.
pub trait AdminOps: Send + Sync + 'static {
    /// Current figures.
    fn stats(&self) -> StatsSnapshot;
    /// Every room.
    fn rooms(&self) -> Vec<RoomInfo>;
    /// The players in one room, or `None` if there is no such room.
    fn room_players(&self, room: u64) -> Option<Vec<PlayerSummary>>;
    /// Every connected player.
    fn players(&self) -> Vec<PlayerSummary>;
    /// Disconnects a player, or says why not (no such player, a shard too busy).
    fn kick(&self, player: PlayerId) -> Result<(), String>;
    /// Sends a server announcement to every player, or says why it may not have reached
    /// them all.
    fn say(&self, text: &str) -> Result<(), String>;
    /// Stops taking new players and starts draining.
    fn drain(&self);
    /// Shuts down now: players are told, rooms run their last tick, the process exits
    /// within the grace period.
    fn shutdown(&self);
}

const HELP: &str = "commands:
  help              this list
  stats             players by transport, rooms, traffic, tick times, queue drops
  rooms             every room with its kind and occupancy
  room <id>         the players in one room
  players           every connected player
  kick <player>     disconnect a player
  say <text>        announce to every player
  drain             stop taking players; finish the rooms in progress
  shutdown          tell every player and exit now (within the grace period)
  quit              close this session
";

/// Serves the console on `listener` until the task is dropped. Each session must give the
/// password `credentials` hold first; a wrong one closes it, and an address that gave too
/// many is locked out for a while ([`Credentials::check`]).
pub async fn serve(listener: TcpListener, credentials: Arc<Credentials>, ops: Arc<dyn AdminOps>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let credentials = credentials.clone();
        let ops = ops.clone();
        tokio::spawn(async move {
            if let Err(error) = session(stream, peer, &credentials, ops.as_ref()).await {
                tracing::debug!(%peer, %error, "console session ended");
            }
        });
    }
}

/// Why a session ended early.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("wrong password")]
    WrongPassword,
    #[error("address locked out after wrong passwords")]
    LockedOut,
    #[error("line longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
    #[error("timed out")]
    TimedOut,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one line, stripping telnet negotiation (IAC sequences) and the line ending.
/// `None` at end of input.
async fn read_line(
    reader: &mut BufReader<tokio::net::tcp::ReadHalf<'_>>,
    timeout: Duration,
) -> Result<Option<String>, SessionError> {
    let mut raw = Vec::new();
    let read = tokio::time::timeout(timeout, async {
        // Read byte-bounded: never buffer more than a line's limit.
        let mut limited = (&mut *reader).take(MAX_LINE_BYTES as u64 + 1);
        limited.read_until(b'\n', &mut raw).await
    })
    .await
    .map_err(|_| SessionError::TimedOut)??;
    if read == 0 {
        return Ok(None);
    }
    if raw.len() > MAX_LINE_BYTES {
        return Err(SessionError::LineTooLong);
    }
    Ok(Some(strip_telnet(&raw)))
}

/// Removes telnet IAC commands (`0xff` followed by a command byte, and an option byte for
/// WILL/WONT/DO/DONT) and the trailing CR LF.
fn strip_telnet(raw: &[u8]) -> String {
    let mut text = Vec::with_capacity(raw.len());
    let mut bytes = raw.iter().copied();
    while let Some(byte) = bytes.next() {
        if byte == 0xff {
            match bytes.next() {
                Some(0xfb..=0xfe) => {
                    bytes.next();
                }
                Some(0xff) => text.push(0xff),
                _ => {}
            }
        } else {
            text.push(byte);
        }
    }
    String::from_utf8_lossy(&text).trim().to_string()
}

async fn session(
    mut stream: TcpStream,
    peer: SocketAddr,
    credentials: &Credentials,
    ops: &dyn AdminOps,
) -> Result<(), SessionError> {
    let (read, mut write) = stream.split();
    let mut reader = BufReader::new(read);
    write
        .write_all(b"tickwire admin console\r\npassword: ")
        .await?;
    let given = read_line(&mut reader, LOGIN_TIMEOUT)
        .await?
        .unwrap_or_default();
    match credentials.check(Instant::now(), peer.ip(), Via::Console, given.as_bytes()) {
        Ok(()) => {}
        Err(Refused::Wrong) => {
            write.write_all(b"wrong password\r\n").await?;
            return Err(SessionError::WrongPassword);
        }
        Err(refused @ Refused::LockedOut { .. }) => {
            let text = format!(
                "too many wrong passwords from this address; try again in {} s\r\n",
                refused.retry_after_secs().unwrap_or(1)
            );
            write.write_all(text.as_bytes()).await?;
            return Err(SessionError::LockedOut);
        }
    }
    write.write_all(b"ok; type help\r\n> ").await?;
    while let Some(line) = read_line(&mut reader, IDLE_TIMEOUT).await? {
        let reply = match run_command(&line, ops) {
            Some(reply) => reply,
            None => {
                write.write_all(b"bye\r\n").await?;
                return Ok(());
            }
        };
        write
            .write_all(reply.replace('\n', "\r\n").as_bytes())
            .await?;
        write.write_all(b"> ").await?;
    }
    Ok(())
}

/// The reply to one command line; `None` for `quit`.
fn run_command(line: &str, ops: &dyn AdminOps) -> Option<String> {
    let (command, argument) = line.split_once(' ').unwrap_or((line, ""));
    let argument = argument.trim();
    let reply = match command {
        "" => String::new(),
        "help" => HELP.to_string(),
        "quit" | "exit" => return None,
        "stats" => render_stats(&ops.stats()),
        "rooms" => {
            let mut rooms = ops.rooms();
            rooms.sort_by_key(|room| room.id);
            let mut out = format!("{} rooms\n", rooms.len());
            for room in rooms {
                let _ = writeln!(
                    out,
                    "  {:>6}  {:<10} {}/{}",
                    room.id.0, room.kind, room.players, room.capacity
                );
            }
            out
        }
        "room" => match argument.parse::<u64>() {
            Ok(id) => match ops.room_players(id) {
                Some(players) => render_players(&players),
                None => format!("no room {id}\n"),
            },
            Err(_) => "usage: room <id>\n".to_string(),
        },
        "players" => render_players(&ops.players()),
        "kick" => match argument.parse::<u64>() {
            Ok(id) => match ops.kick(PlayerId(id)) {
                Ok(()) => format!("kicked {id}\n"),
                Err(why) => format!("{why}\n"),
            },
            Err(_) => "usage: kick <player>\n".to_string(),
        },
        "say" if !argument.is_empty() => match ops.say(argument) {
            Ok(()) => "sent\n".to_string(),
            Err(why) => format!("{why}\n"),
        },
        "say" => "usage: say <text>\n".to_string(),
        "drain" => {
            ops.drain();
            "draining: no new players; rooms in progress continue\n".to_string()
        }
        "shutdown" => {
            ops.shutdown();
            "shutting down\n".to_string()
        }
        other => format!("unknown command {other:?}; type help\n"),
    };
    Some(reply)
}

fn render_stats(stats: &StatsSnapshot) -> String {
    format!(
        "players   udp {} ws {} webtransport {}\n\
         rooms     {}\n\
         packets/s in {:.0} out {:.0}\n\
         bytes/s   in {:.0} out {:.0}\n\
         tick ms   p50 {:.2} p99 {:.2} max {:.2}\n\
         queue drops {}\n",
        stats.players_udp,
        stats.players_ws,
        stats.players_webtransport,
        stats.rooms,
        stats.packets_in_per_second,
        stats.packets_out_per_second,
        stats.bytes_in_per_second,
        stats.bytes_out_per_second,
        stats.tick_p50_ms,
        stats.tick_p99_ms,
        stats.tick_max_ms,
        stats.queue_drops,
    )
}

fn render_players(players: &[PlayerSummary]) -> String {
    let mut out = format!("{} players\n", players.len());
    for player in players {
        let room = player.room.map_or("-".to_string(), |room| room.to_string());
        let _ = writeln!(
            out,
            "  {:>8}  {:<16} {:<12} room {}",
            player.id.0,
            player.name,
            player.transport.name(),
            room
        );
    }
    out
}

/// Binds the console's listener; refuses non-loopback addresses unless `allow_remote`,
/// because the console is plain text.
pub async fn bind(address: SocketAddr, allow_remote: bool) -> std::io::Result<TcpListener> {
    if !address.ip().is_loopback() && !allow_remote {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("admin console address {address} is not loopback; the console is plain text"),
        ));
    }
    TcpListener::bind(address).await
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::shard::RoomId;

    #[derive(Default)]
    struct FakeOps {
        said: Mutex<Vec<String>>,
        kicked: Mutex<Vec<PlayerId>>,
    }

    impl AdminOps for FakeOps {
        fn stats(&self) -> StatsSnapshot {
            StatsSnapshot {
                players_udp: 3,
                players_ws: 2,
                rooms: 1,
                tick_p99_ms: 1.25,
                ..StatsSnapshot::default()
            }
        }
        fn rooms(&self) -> Vec<RoomInfo> {
            vec![RoomInfo {
                id: RoomId(7),
                kind: "relay".into(),
                players: 5,
                capacity: 16,
                listing: Default::default(),
                traffic: Default::default(),
                recent_ticks: Default::default(),
            }]
        }
        fn room_players(&self, room: u64) -> Option<Vec<PlayerSummary>> {
            (room == 7).then(|| self.players())
        }
        fn players(&self) -> Vec<PlayerSummary> {
            vec![PlayerSummary {
                id: PlayerId(42),
                name: "ada".into(),
                transport: PlayerTransport::Udp,
                room: Some(7),
                link: None,
            }]
        }
        fn kick(&self, player: PlayerId) -> Result<(), String> {
            self.kicked.lock().unwrap().push(player);
            if player == PlayerId(42) {
                Ok(())
            } else {
                Err(format!("no player {}", player.0))
            }
        }
        fn say(&self, text: &str) -> Result<(), String> {
            self.said.lock().unwrap().push(text.to_string());
            Ok(())
        }
        fn drain(&self) {}
        fn shutdown(&self) {}
    }

    async fn start() -> (SocketAddr, Arc<FakeOps>) {
        let listener = bind("127.0.0.1:0".parse().unwrap(), false).await.unwrap();
        let address = listener.local_addr().unwrap();
        let ops = Arc::new(FakeOps::default());
        tokio::spawn(serve(
            listener,
            Arc::new(Credentials::new("s3cret")),
            ops.clone(),
        ));
        (address, ops)
    }

    /// Sends `input` and reads until the server closes the session or `until` appears.
    async fn converse(address: SocketAddr, input: &[u8], until: &str) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(input).await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let done = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let read = stream.read(&mut buf).await.unwrap();
                if read == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..read]);
                if String::from_utf8_lossy(&seen).contains(until) {
                    break;
                }
            }
        })
        .await;
        assert!(
            done.is_ok(),
            "no {until:?} within 5 s; got {:?}",
            String::from_utf8_lossy(&seen)
        );
        String::from_utf8_lossy(&seen).into_owned()
    }

    #[tokio::test]
    async fn stats_over_a_real_tcp_connection() {
        let (address, _) = start().await;
        let transcript = converse(address, b"s3cret\r\nstats\r\n", "queue drops").await;
        assert!(
            transcript.contains("players   udp 3 ws 2 webtransport 0"),
            "{transcript}"
        );
        assert!(transcript.contains("p99 1.25"), "{transcript}");
    }

    #[tokio::test]
    async fn a_wrong_password_is_refused_and_the_session_closed() {
        let (address, ops) = start().await;
        let transcript = converse(address, b"guess\r\nkick 42\r\n", "wrong password").await;
        assert!(transcript.contains("wrong password"));
        assert!(
            ops.kicked.lock().unwrap().is_empty(),
            "nothing runs without the password"
        );
    }

    #[tokio::test]
    async fn an_address_guessing_passwords_is_locked_out() {
        let (address, _) = start().await;
        for _ in 0..crate::credentials::MAX_FAILURES {
            converse(address, b"guess\r\n", "wrong password").await;
        }
        let transcript = converse(address, b"s3cret\r\nstats\r\n", "try again").await;
        assert!(
            transcript.contains("too many wrong passwords from this address; try again in 300 s"),
            "{transcript}"
        );
        assert!(
            !transcript.contains("queue drops"),
            "a locked-out address got in"
        );
    }

    #[tokio::test]
    async fn commands_reach_the_server_and_telnet_negotiation_is_ignored() {
        let (address, ops) = start().await;
        // What a telnet client sends first: IAC DO SUPPRESS-GO-AHEAD, IAC WILL TERMINAL-TYPE.
        let mut input = vec![0xff, 0xfd, 0x03, 0xff, 0xfb, 0x18];
        input.extend_from_slice(
            b"s3cret\r\nkick 42\r\nkick 9\r\nsay hello all\r\nrooms\r\nroom 7\r\nquit\r\n",
        );
        let transcript = converse(address, &input, "bye").await;
        assert!(transcript.contains("kicked 42"), "{transcript}");
        assert!(transcript.contains("no player 9"), "{transcript}");
        assert!(transcript.contains("relay      5/16"), "{transcript}");
        assert!(transcript.contains("ada"), "{transcript}");
        assert_eq!(*ops.said.lock().unwrap(), ["hello all"]);
    }

    #[tokio::test]
    async fn an_overlong_line_closes_the_session() {
        let (address, _) = start().await;
        let mut input = b"s3cret\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'a', MAX_LINE_BYTES * 2));
        let transcript = converse(address, &input, "\u{0}never").await;
        assert!(
            !transcript.contains("unknown command"),
            "the long line was not executed"
        );
    }

    #[tokio::test]
    async fn a_public_address_is_refused_without_opt_in() {
        let error = bind("0.0.0.0:0".parse().unwrap(), false).await.unwrap_err();
        assert!(error.to_string().contains("not loopback"));
    }

    #[test]
    fn telnet_commands_are_stripped() {
        assert_eq!(strip_telnet(b"\xff\xfb\x01stats\r\n"), "stats");
        assert_eq!(strip_telnet(b"say a\xff\xffb\r\n"), "say a\u{fffd}b");
    }
}
