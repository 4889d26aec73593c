//! Bots that speak Colyseus 0.18's protocol (issue 17: tickwire measured beside Colyseus
//! with the same load tool): one small task per bot on the group's runtime, as the
//! `wss` bots ([`super::ws`]) run, driven by the same [`run_tasks`].
//!
//! What a bot does, as `@colyseus/sdk` 0.18's `Client` and `Room` do it:
//!
//! 1. **Seat**: `POST /matchmake/create/<kind>` with `{"room": index}` for the first bot of
//!    each room, `POST /matchmake/join/<kind>` with the same body for the others once it
//!    exists (the bench room is defined with `filterBy(["room"])`), `<kind>` being the
//!    scenario's name. The answer is a seat reservation:
//!    `{"name","sessionId","roomId","processId"}`.
//! 2. **Join**: a WebSocket to `/<processId>/<roomId>?sessionId=<sessionId>`. The server
//!    sends `JOIN_ROOM` (reconnection token, serializer id, the state's reflection); the
//!    bot acknowledges it with the single byte `JOIN_ROOM`, as the SDK does, and the room
//!    answers with the full state (`ROOM_STATE`) and then a `ROOM_STATE_PATCH` per patch.
//!    The reconnection token is not kept: bots do not reconnect.
//! 3. **Play**: the arena bot's logic ([`crate::scenario::ArenaScenario`]) runs unchanged;
//!    each input it sends becomes a `ROOM_DATA` message of type `"input"` whose msgpack
//!    body is `[sequence, move_x, move_y, aim, buttons]` (its newest command: a TCP
//!    stream loses nothing, so the repeat of the previous one is left out).
//! 4. **Count**: each `ROOM_STATE_PATCH` is one snapshot, its bytes the WebSocket
//!    message's. The schema is not decoded: the load tool's cost stays comparable to what
//!    it is against tickwire (where most bots read only a snapshot's header). Inputs are
//!    therefore not confirmed (a Colyseus patch does not say which input it applied), and
//!    the report's expected and delivered inputs are 0. `ROOM_DATA` messages (hits, kills,
//!    respawns) are counted as messages and not read.
//! 5. **Round trip**: once a second in the window, Colyseus' `PING` (one byte, answered
//!    by one byte), as the SDK's `room.ping()`.

use std::cell::RefCell;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use serde::Deserialize;
use tickwire_arena::messages::{ClientInput, INPUT};
use tickwire_wire::decode_exact;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::ws::{Shared, record_disconnect, run_tasks};
use super::{Command, GroupResult, GroupSpec, Live, RoomSlot};
use crate::meter::Meter;
use crate::plan::Plan;
use crate::scenario::{BotCx, Outbox};

/// Colyseus' protocol codes (`@colyseus/shared-types`, `Protocol.ts`): the low five bits of
/// every WebSocket message's first byte.
mod code {
    pub(super) const JOIN_ROOM: u8 = 10;
    pub(super) const ERROR: u8 = 11;
    pub(super) const LEAVE_ROOM: u8 = 12;
    pub(super) const ROOM_DATA: u8 = 13;
    pub(super) const ROOM_STATE_PATCH: u8 = 15;
    pub(super) const PING: u8 = 18;
    /// The bits left once the modifier bits (`TIMED`, `UNRELIABLE`) are masked off.
    pub(super) const MASK: u8 = 0x1f;
}

/// The largest matchmaking answer read; a seat reservation is about 100 bytes.
const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// The WebSocket codec's buffers, as the tickwire WebSocket bots size theirs
/// (`tickwire_client`'s `CODEC_BUFFER_BYTES`), so both runs cost the load tool alike.
const CODEC_BUFFER_BYTES: usize = 8 << 10;

/// The largest message read: a patch of a crowded room is a few KiB.
const MAX_INBOUND_BYTES: usize = 4 << 20;

pub(super) async fn run(spec: GroupSpec) -> Option<GroupResult> {
    run_tasks(spec, bot_task).await
}

/// A seat reservation: the answer to a matchmaking request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Seat {
    session_id: String,
    room_id: String,
    process_id: String,
}

type Socket = WebSocketStream<TcpStream>;

/// One bot: a seat, the join handshake, then inputs on schedule and patches counted until
/// the drain ends.
async fn bot_task(
    bot: u32,
    spec: Rc<GroupSpec>,
    shared: Rc<RefCell<Shared>>,
    permit: OwnedSemaphorePermit,
) {
    let live = &spec.live;
    let timeout = spec.config.connect_timeout;
    let joined = match reserve(&spec, bot).await {
        Ok(seat) => tokio::time::timeout(timeout, join(&spec.config.server, &seat))
            .await
            .unwrap_or_else(|_| Err(format!("no JOIN_ROOM within {timeout:?}")))
            .map_err(|error| format!("join: {error}"))
            .map(|socket| (seat, socket)),
        Err(error) => Err(format!("matchmaking: {error}")),
    };
    let (seat, mut socket) = match joined {
        Ok(joined) => joined,
        Err(error) => return spec.connect_failed(bot, error),
    };
    drop(permit);
    let mut logic = spec.scenario.bot(bot);
    // Rooms are told apart by their id's hash: the plan only groups bots by room.
    let mut room = DefaultHasher::new();
    seat.room_id.hash(&mut room);
    spec.connected(bot, room.finish());
    shared.borrow_mut().meter.arena.welcomes += 1;

    // Read (and drop) the patches while the others connect.
    let mut command = spec.command.clone();
    let plan: Arc<Plan> = loop {
        match command.borrow_and_update().clone() {
            Command::Run(plan) => break plan,
            Command::Abort => return close(socket).await,
            Command::Wait => {}
        }
        tokio::select! {
            changed = command.changed() => if changed.is_err() { return close(socket).await },
            inbound = socket.next() => if let Err(ended) = inbound_data(inbound) {
                return record_disconnect(&shared, live, bot, ended);
            },
        }
    };

    logic.start(&plan, &mut shared.borrow_mut().rng);
    // The arena logic records each input as expected to be confirmed; nothing confirms
    // them here (see the module docs), so its tally goes to a meter no one reads.
    let mut unread = Meter::default();
    let mut next_rtt_ns = plan.window().start_ns;
    let mut ping_sent: Option<Instant> = None;
    let drain_end = plan.at(plan.drain_end_ns);
    let drained = tokio::time::sleep_until(drain_end.into());
    tokio::pin!(drained);
    let send_timer = tokio::time::sleep_until(drain_end.into());
    tokio::pin!(send_timer);
    let mut armed_for = u64::MAX;
    let mut outbox = Inputs::default();
    loop {
        let next_send_ns = logic.next_send_ns();
        if next_send_ns != armed_for && next_send_ns != u64::MAX {
            send_timer.as_mut().reset(plan.at(next_send_ns).into());
        }
        armed_for = next_send_ns;
        tokio::select! {
            inbound = socket.next() => {
                let now = Instant::now();
                let ended = match inbound_data(inbound) {
                    Ok(Some(body)) => {
                        let mut counts = shared.borrow_mut();
                        arrived(&mut counts, live, &plan, &body, now, &mut ping_sent).err()
                    }
                    Ok(None) => None,
                    Err(ended) => Some(ended),
                };
                if let Some(ended) = ended {
                    return record_disconnect(&shared, live, bot, ended);
                }
            },
            () = &mut send_timer, if next_send_ns != u64::MAX => {
                let now_ns = plan.ns(Instant::now());
                {
                    let mut shared = shared.borrow_mut();
                    let shared = &mut *shared;
                    shared.meter.send_lag(next_send_ns, now_ns);
                    let mut cx = BotCx { plan: Some(&plan), meter: &mut unread, rng: &mut shared.rng };
                    logic.send_due(now_ns, &mut cx, &mut outbox);
                    shared.send_errors += std::mem::take(&mut outbox.refused);
                    let sent = outbox.frames.len() as u64;
                    Live::add(&live.messages_out, sent);
                    Live::add(&live.datagrams_out, sent);
                    if plan.window().contains(now_ns) {
                        shared.window.messages_out += sent;
                        shared.window.datagrams_out += sent;
                    }
                }
                if let Err(error) = send_all(&mut socket, outbox.frames.drain(..)).await {
                    return record_disconnect(&shared, live, bot, error);
                }
            },
            () = &mut drained => break,
        }
        let now = Instant::now();
        let now_ns = plan.ns(now);
        if plan.window().contains(now_ns) && now_ns >= next_rtt_ns && ping_sent.is_none() {
            next_rtt_ns = now_ns + 1_000_000_000;
            ping_sent = Some(now);
            let ping = Message::Binary(Bytes::from_static(&[code::PING]));
            if let Err(error) = send_all(&mut socket, std::iter::once(ping)).await {
                return record_disconnect(&shared, live, bot, error);
            }
        }
    }
    close(socket).await;
}

/// A message from the room, counted; `Err` when it ends the bot's stay (an error or a
/// leave from the server).
fn arrived(
    shared: &mut Shared,
    live: &Live,
    plan: &Plan,
    body: &[u8],
    now: Instant,
    ping_sent: &mut Option<Instant>,
) -> Result<(), String> {
    Live::add(&live.messages_in, 1);
    Live::add(&live.datagrams_in, 1);
    let in_window = plan.window().contains(plan.ns(now));
    if in_window {
        shared.window.messages_in += 1;
        shared.window.datagrams_in += 1;
    }
    match body.first().map(|first| first & code::MASK) {
        Some(code::ROOM_STATE_PATCH) if in_window => {
            shared.meter.arena.snapshots += 1;
            shared.meter.arena.snapshot_bytes += body.len() as u64;
        }
        Some(code::PING) => {
            if let Some(sent) = ping_sent.take()
                && in_window
            {
                let rtt_us = (now - sent).as_micros() as u64;
                shared.rtt_us.saturating_record(rtt_us.max(1));
                Live::add(&live.rtt_us_sum, rtt_us);
                Live::add(&live.rtt_samples, 1);
            }
        }
        Some(code::ERROR) => return Err(format!("the room sent ERROR {}", describe(body))),
        Some(code::LEAVE_ROOM) => return Err("the room sent LEAVE_ROOM".into()),
        _ => {}
    }
    Ok(())
}

/// A message's first bytes in hex, for an error report.
fn describe(body: &[u8]) -> String {
    let shown: Vec<String> = body
        .iter()
        .take(48)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("({} bytes: {})", body.len(), shown.join(""))
}

/// What arrived on the socket: `Ok(Some(body))` for a data message, `Ok(None)` for control
/// frames (tungstenite answers pings itself), `Err` when the connection ended.
fn inbound_data(
    inbound: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
) -> Result<Option<Bytes>, String> {
    match inbound {
        Some(Ok(Message::Binary(body))) => Ok(Some(body)),
        Some(Ok(Message::Text(text))) => Ok(Some(Bytes::from(text.as_bytes().to_vec()))),
        Some(Ok(Message::Close(frame))) => Err(match frame {
            Some(frame) => format!("closed by the server ({} {})", frame.code, frame.reason),
            None => "closed by the server".into(),
        }),
        Some(Ok(_)) => Ok(None),
        Some(Err(error)) => Err(error.to_string()),
        None => Err("the connection ended".into()),
    }
}

/// Writes `frames` and flushes them.
async fn send_all(
    socket: &mut Socket,
    frames: impl Iterator<Item = Message>,
) -> Result<(), String> {
    for frame in frames {
        socket
            .feed(frame)
            .await
            .map_err(|error| error.to_string())?;
    }
    socket.flush().await.map_err(|error| error.to_string())
}

/// Closes the WebSocket (the room hears the leave), within a bound: a server that stopped
/// reading must not hold the run.
async fn close(mut socket: Socket) {
    let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
}

/// The arena logic's inputs as Colyseus `ROOM_DATA` messages, waiting to be written.
#[derive(Default)]
struct Inputs {
    frames: Vec<Message>,
    refused: u64,
}

impl Outbox for Inputs {
    fn send(&mut self, channel: u8, message: Bytes) -> bool {
        let newest = decode_exact::<ClientInput>(&message)
            .ok()
            .filter(|_| channel == INPUT)
            .and_then(|input| input.inputs().first().copied());
        let Some(command) = newest else {
            self.refused += 1;
            return false;
        };
        let mut frame = Vec::with_capacity(32);
        frame.push(code::ROOM_DATA);
        // The type, as `@colyseus/schema`'s `encode.string` writes it: a msgpack fixstr.
        frame.push(0xa0 | b"input".len() as u8);
        frame.extend_from_slice(b"input");
        // The body, msgpack: a fixarray of five.
        frame.push(0x95);
        frame.push(0xcd);
        frame.extend_from_slice(&command.sequence.to_be_bytes());
        for value in [command.move_x, command.move_y, command.aim] {
            frame.push(0xca);
            frame.extend_from_slice(&value.to_be_bytes());
        }
        // A positive fixint: buttons are four bits.
        frame.push(command.buttons & 0x7f);
        self.frames.push(Message::Binary(frame.into()));
        true
    }
}

/// Matchmakes bot `bot` into its room: the first bot of each room creates it, the others
/// join it once it exists (see the module docs).
async fn reserve(spec: &GroupSpec, bot: u32) -> Result<Seat, String> {
    let kind = spec.scenario.name();
    let rooms = spec.scenario.rooms();
    let index = bot as usize % rooms;
    let creator = (bot as usize) < rooms;
    let timeout = spec.config.connect_timeout;
    if !creator {
        tokio::time::timeout(timeout * 3, spec.directory.room(index))
            .await
            .map_err(|_| format!("room {index} was not created in time"))??;
    }
    let method = if creator { "create" } else { "join" };
    let body = format!("{{\"room\":{index}}}");
    let path = format!("/matchmake/{method}/{kind}");
    let answer = tokio::time::timeout(timeout, post(&spec.config.server, &path, &body))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")))
        .and_then(|answer| {
            serde_json::from_slice::<Seat>(&answer)
                .map_err(|error| format!("the seat reservation does not parse: {error}"))
        });
    if creator {
        let slot = match answer {
            Ok(_) => RoomSlot::Created(index as u64),
            Err(_) => RoomSlot::Failed,
        };
        spec.directory.set(index, slot);
    }
    answer
}

/// `POST path` with a JSON `body` to `server` (`http://host:port`) over HTTP/1.1, one
/// connection per request as a browser's `fetch` to a fresh origin makes it: the answer's
/// body when the status is 200.
async fn post(server: &str, path: &str, body: &str) -> Result<Vec<u8>, String> {
    let authority = authority(server)?;
    let mut stream = TcpStream::connect(authority)
        .await
        .map_err(|error| format!("cannot reach {server}: {error}"))?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|error| format!("sending the request: {error}"))?;
    let mut answer = Vec::new();
    (&mut stream)
        .take(MAX_ANSWER_BYTES as u64)
        .read_to_end(&mut answer)
        .await
        .map_err(|error| format!("reading the answer: {error}"))?;
    let split = answer
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .ok_or("the answer has no end of headers")?;
    let head = String::from_utf8_lossy(&answer[..split]);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| format!("no HTTP status in {head:?}"))?;
    let body = answer.split_off(split + 4);
    if status != 200 {
        return Err(format!(
            "refused ({status}): {}",
            String::from_utf8_lossy(&body).trim()
        ));
    }
    Ok(body)
}

/// `host:port` of `server`, `http://host:port`.
fn authority(server: &str) -> Result<&str, String> {
    server
        .strip_prefix("http://")
        .map(|rest| rest.trim_end_matches('/'))
        .ok_or_else(|| format!("bad server URL {server:?}: expected http://host:port"))
}

/// Opens the seat's WebSocket and completes the join: waits for `JOIN_ROOM` and
/// acknowledges it.
async fn join(server: &str, seat: &Seat) -> Result<Socket, String> {
    let authority = authority(server)?;
    let tcp = TcpStream::connect(authority)
        .await
        .map_err(|error| format!("cannot reach {authority}: {error}"))?;
    tcp.set_nodelay(true)
        .map_err(|error| format!("TCP_NODELAY: {error}"))?;
    let url = format!(
        "ws://{authority}/{}/{}?sessionId={}",
        seat.process_id, seat.room_id, seat.session_id
    );
    let config = WebSocketConfig::default()
        .read_buffer_size(CODEC_BUFFER_BYTES)
        .write_buffer_size(CODEC_BUFFER_BYTES)
        .max_message_size(Some(MAX_INBOUND_BYTES))
        .max_frame_size(Some(MAX_INBOUND_BYTES));
    let (mut socket, _) = tokio_tungstenite::client_async_with_config(url, tcp, Some(config))
        .await
        .map_err(|error| format!("upgrade: {error}"))?;
    loop {
        let body = inbound_data(socket.next().await)?;
        match body
            .as_deref()
            .and_then(|body| body.first())
            .map(|first| first & code::MASK)
        {
            Some(code::JOIN_ROOM) => break,
            Some(code::ERROR) => {
                return Err(format!(
                    "the room refused: {}",
                    describe(&body.unwrap_or_default())
                ));
            }
            _ => {}
        }
    }
    let ack = Message::Binary(Bytes::from_static(&[code::JOIN_ROOM]));
    send_all(&mut socket, std::iter::once(ack)).await?;
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use tickwire_arena::InputCommand;
    use tickwire_arena::messages::RELIABLE;
    use tickwire_wire::encode_to_slice;

    use super::*;

    #[test]
    fn an_input_becomes_the_room_data_message_the_sdk_would_send() {
        let newest = InputCommand {
            sequence: 300,
            move_x: 1.0,
            move_y: -0.5,
            aim: 0.0,
            buttons: InputCommand::FIRE,
        };
        let mut input = ClientInput::new(Some(7));
        input.push(newest);
        input.push(InputCommand::default());
        let mut buffer = [0u8; 32];
        let len = encode_to_slice(&input, &mut buffer).unwrap();
        let mut out = Inputs::default();
        assert!(out.send(INPUT, Bytes::copy_from_slice(&buffer[..len])));
        let Message::Binary(frame) = &out.frames[0] else {
            panic!("a binary message");
        };
        // `room.send("input", [300, 1, -0.5, aim, 1])` with msgpackr's float32 choice;
        // the aim as the input's grid holds it (0 is not one of its steps).
        let aim = decode_exact::<ClientInput>(&buffer[..len])
            .unwrap()
            .inputs()[0]
            .aim;
        let mut expected = vec![code::ROOM_DATA, 0xa5];
        expected.extend_from_slice(b"input");
        expected.extend_from_slice(&[0x95, 0xcd, 0x01, 0x2c]);
        expected.extend_from_slice(&[0xca, 0x3f, 0x80, 0, 0, 0xca, 0xbf, 0, 0, 0, 0xca]);
        expected.extend_from_slice(&aim.to_be_bytes());
        expected.push(1);
        assert_eq!(
            frame[..],
            expected[..],
            "the newest command only, as msgpack"
        );

        assert!(
            !out.send(RELIABLE, Bytes::copy_from_slice(&buffer[..len])),
            "only inputs are translated"
        );
        assert!(!out.send(INPUT, Bytes::from_static(b"\xff")));
        assert_eq!((out.frames.len(), out.refused), (1, 2));
    }
}
