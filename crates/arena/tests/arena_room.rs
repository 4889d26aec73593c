//! The arena room driven sans-IO through `tickwire-room`'s `Shard` (the public driver; a
//! `RoomContext` cannot be built outside `tickwire-room`): join → welcome → inputs and
//! acks → hits and a kill → events and stats → leave, and hostile senders kicked.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_arena::geom::Vec2;
use tickwire_arena::messages::{ClientInput, ClientMessage, ServerMessage};
use tickwire_arena::room::{ArenaConfig, ArenaRoomFactory, StatEvent, StatSink};
use tickwire_arena::snapshot::{SnapshotDecoder, SnapshotSchema};
use tickwire_arena::{BuiltinMap, InputCommand};
use tickwire_room::room::{LeaveReason, PlayerId};
use tickwire_room::shard::{RoomId, Shard, ShardConfig, ShardOutput};
use tickwire_wire::{decode_exact, encode_to_vec};

#[derive(Default)]
struct Recorded(Mutex<Vec<StatEvent>>);

impl StatSink for Recorded {
    fn record(&self, event: StatEvent) {
        self.0.lock().unwrap().push(event);
    }
}

struct Client {
    id: PlayerId,
    you: u16,
    decoder: Option<SnapshotDecoder>,
    sequence: u16,
    snapshots: u32,
    events: Vec<ServerMessage>,
}

impl Client {
    fn new(id: u64) -> Self {
        Self {
            id: PlayerId(id),
            you: u16::MAX,
            decoder: None,
            sequence: 0,
            snapshots: 0,
            events: Vec::new(),
        }
    }

    fn handle(&mut self, channel: u8, message: &Bytes, config: &ArenaConfig) {
        match channel {
            0 => {
                let message: ServerMessage =
                    decode_exact(message).expect("a server message decodes");
                if let ServerMessage::Welcome {
                    you,
                    map_width,
                    map_height,
                    max_health,
                    ..
                } = &message
                {
                    self.you = *you;
                    let schema =
                        SnapshotSchema::new(Vec2::new(*map_width, *map_height), *max_health)
                            .unwrap();
                    self.decoder = Some(SnapshotDecoder::new(schema, &config.snapshot));
                }
                self.events.push(message);
            }
            2 => {
                let decoder = self.decoder.as_mut().expect("a welcome before snapshots");
                decoder
                    .decode(message)
                    .expect("every snapshot decodes against its baseline");
                self.snapshots += 1;
            }
            other => panic!("message on channel {other}"),
        }
    }

    /// An input walking towards `target` (or the map centre) and firing at it.
    fn input(&mut self, target: Option<Vec2>) -> Bytes {
        self.sequence = self.sequence.wrapping_add(1);
        let decoder = self.decoder.as_ref().unwrap();
        let me = decoder.current().me.position;
        let target = target.unwrap_or(Vec2::new(20.0, 15.0));
        let (dx, dy) = (target.x - me.x, target.y - me.y);
        let length = (dx * dx + dy * dy).sqrt().max(1e-3);
        let quantize = |v: f32| (v * 64.0).round() / 64.0;
        let mut message = ClientInput::new(decoder.newest());
        message.push(InputCommand {
            sequence: self.sequence,
            move_x: quantize(dx / length),
            move_y: quantize(dy / length),
            aim: dy.atan2(dx),
            buttons: InputCommand::FIRE,
        });
        Bytes::from(encode_to_vec(&message).unwrap())
    }

    fn sees(&self, id: u16) -> Option<Vec2> {
        let decoder = self.decoder.as_ref()?;
        let entity = decoder.current().entities.iter().find(|e| e.id == id)?;
        Some(Vec2::new(
            entity.state.x as f32 / 64.0,
            entity.state.y as f32 / 64.0,
        ))
    }
}

fn route(shard: &mut Shard, clients: &mut [Client], config: &ArenaConfig) -> Vec<ShardOutput> {
    let mut others = Vec::new();
    for output in shard.drain_outputs().collect::<Vec<_>>() {
        match &output {
            ShardOutput::Send {
                to,
                channel,
                message,
            } => {
                if let Some(client) = clients.iter_mut().find(|c| c.id == *to) {
                    client.handle(*channel, message, config);
                }
            }
            _ => others.push(output),
        }
    }
    others
}

fn setup(config: ArenaConfig) -> (Shard, Arc<Recorded>, Instant) {
    setup_for(config, 16)
}

fn setup_for(config: ArenaConfig, capacity: u16) -> (Shard, Arc<Recorded>, Instant) {
    let map = Arc::new(BuiltinMap::Courtyard.load().unwrap());
    let sink = Arc::new(Recorded::default());
    let factory = ArenaRoomFactory::new(map, config, 5)
        .unwrap()
        .with_stat_sink(sink.clone());
    let mut shard = Shard::new(ShardConfig::default());
    let start = Instant::now();
    shard
        .create_room(
            start,
            RoomId(1),
            "arena",
            Box::new(factory.create()),
            capacity,
        )
        .unwrap();
    (shard, sink, start)
}

/// A room sending each player a snapshot every third tick, with `players` joined and
/// their welcomes handed over.
fn joined_every_third_tick(players: u64) -> (Shard, Vec<Client>, ArenaConfig, Instant) {
    let config = ArenaConfig {
        snapshot_interval_ticks: 3,
        ..ArenaConfig::default()
    };
    let (mut shard, _sink, start) = setup_for(config.clone(), players as u16);
    let mut clients: Vec<Client> = (1..=players).map(Client::new).collect();
    for client in &clients {
        shard
            .join(start, RoomId(1), client.id, format!("p{}", client.id.0))
            .unwrap();
    }
    route(&mut shard, &mut clients, &config);
    (shard, clients, config, start)
}

#[test]
fn two_players_join_fight_and_leave() {
    let config = ArenaConfig {
        world: tickwire_arena::WorldConfig {
            bullet_damage: 50,
            ..Default::default()
        },
        ..ArenaConfig::default()
    };
    let (mut shard, sink, start) = setup(config.clone());
    let mut clients = vec![Client::new(1), Client::new(2)];
    for client in &clients {
        shard
            .join(start, RoomId(1), client.id, format!("p{}", client.id.0))
            .unwrap();
    }
    route(&mut shard, &mut clients, &config);
    assert!(
        clients.iter().all(|c| c.decoder.is_some()),
        "every player is welcomed on join"
    );
    let (you1, you2) = (clients[0].you, clients[1].you);
    assert_ne!(you1, you2);
    for client in &clients {
        for (id, name) in [(you1, "p1"), (you2, "p2")] {
            assert!(
                client.events.iter().any(
                    |e| matches!(e, ServerMessage::Player { id: i, name: n } if *i == id && n == name)
                ),
                "player {} was not told that entity {id} is {name}",
                client.id.0
            );
        }
    }

    let step = Duration::from_secs(1) / 60;
    let mut now = start;
    let mut kills = 0;
    for _ in 0..60 * 60 {
        now += step;
        shard.run(now);
        route(&mut shard, &mut clients, &config);
        if clients[0].snapshots == 0 {
            continue;
        }
        let target1 = clients[0].sees(you2);
        let target2 = clients[1].sees(you1);
        let input1 = clients[0].input(target1);
        let input2 = clients[1].input(target2);
        shard.message(now, clients[0].id, 1, input1);
        shard.message(now, clients[1].id, 1, input2);
        kills = clients[0]
            .events
            .iter()
            .filter(|e| matches!(e, ServerMessage::Kill { .. }))
            .count();
        if kills > 0 {
            break;
        }
    }
    assert!(
        kills > 0,
        "no kill in a minute of two players shooting at each other"
    );
    for client in &clients {
        assert!(
            client
                .events
                .iter()
                .any(|e| matches!(e, ServerMessage::Hit { .. })),
            "player {} was told of no hit",
            client.id.0
        );
    }
    // The scoreboard follows within its interval, the killer's score on it.
    for _ in 0..config.scoreboard_interval_ticks {
        now += step;
        shard.run(now);
        route(&mut shard, &mut clients, &config);
    }
    let scored = clients[1].events.iter().rev().find_map(|e| match e {
        ServerMessage::Scores { scores } => Some(scores.clone()),
        _ => None,
    });
    let scores = scored.expect("a scoreboard after the kill");
    assert_eq!(scores.len(), 2, "both players are on the scoreboard");
    assert!(
        scores.iter().any(|s| s.kills > 0) && scores[0].score >= scores[1].score,
        "the scoreboard counts the kill, best first: {scores:?}"
    );
    // A tick later, each player's snapshot acknowledges an input of theirs.
    now += step;
    shard.run(now);
    route(&mut shard, &mut clients, &config);
    for client in &clients {
        let last = client.decoder.as_ref().unwrap().current().last_input;
        assert!(
            last.is_some_and(|s| client.sequence.wrapping_sub(s) < 4),
            "snapshot reports input {last:?}, the client sent up to {}",
            client.sequence
        );
    }
    assert!(
        sink.0
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, StatEvent::Kill { .. })),
        "the stat sink heard the kill"
    );

    // Chat, ping and announcements on channel 0.
    let chat = encode_to_vec(&ClientMessage::Chat { text: "gg".into() }).unwrap();
    shard.message(now, clients[0].id, 0, Bytes::from(chat));
    let ping = encode_to_vec(&ClientMessage::Ping { nonce: 77 }).unwrap();
    shard.message(now, clients[1].id, 0, Bytes::from(ping));
    shard.announce(now, "round over");
    route(&mut shard, &mut clients, &config);
    assert!(
        clients[1].events.iter().any(
            |e| matches!(e, ServerMessage::Chat { from, text } if *from == you1 && text == "gg")
        )
    );
    assert!(
        clients[1]
            .events
            .iter()
            .any(|e| matches!(e, ServerMessage::Pong { nonce: 77, .. }))
    );
    assert!(clients.iter().all(|c| {
        c.events
            .iter()
            .any(|e| matches!(e, ServerMessage::Announcement { text } if text == "round over"))
    }));

    // Player 2 leaves: their session is recorded and they vanish from player 1's view.
    shard.leave(now, clients[1].id, LeaveReason::Left);
    for _ in 0..3 {
        now += step;
        shard.run(now);
        route(&mut shard, &mut clients, &config);
        let input = clients[0].input(None);
        shard.message(now, clients[0].id, 1, input);
    }
    assert!(
        clients[0].sees(you2).is_none(),
        "a departed player is still in view"
    );
    assert!(
        clients[0]
            .events
            .iter()
            .any(|e| matches!(e, ServerMessage::Left { id } if *id == you2)),
        "the remaining player was not told that player 2 left"
    );
    let events = sink.0.lock().unwrap();
    assert!(
        events.contains(&StatEvent::Joined {
            room: RoomId(1),
            player: PlayerId(2),
            name: "p2".into()
        }),
        "the stat sink heard who joined: {events:?}"
    );
    let ended = events
        .iter()
        .find_map(|e| match e {
            StatEvent::SessionEnded {
                room: RoomId(1),
                player,
                kills,
                deaths,
                duration,
                ..
            } if *player == PlayerId(2) => Some((*kills, *deaths, *duration)),
            _ => None,
        })
        .expect("the stat sink heard player 2's session end in room 1");
    assert!(ended.2 > Duration::ZERO);
    assert!(
        ended.0 + ended.1 > 0,
        "player 2's session had a kill or a death"
    );
}

#[test]
fn a_hostile_sender_is_counted_then_kicked() {
    let config = ArenaConfig {
        max_violations: 5,
        ..ArenaConfig::default()
    };
    let (mut shard, _sink, start) = setup(config.clone());
    let mut clients = vec![Client::new(1)];
    shard
        .join(start, RoomId(1), PlayerId(1), "p".into())
        .unwrap();
    route(&mut shard, &mut clients, &config);
    let garbage = [
        (1, vec![0xff; 40]),
        (0, vec![0xff, 0xff, 0xff]),
        (7, vec![1, 2, 3]),
        (1, vec![]),
        (0, vec![]),
        (1, vec![0x01, 0, 0, 0, 0x10]), // an ack of a tick never sent
    ];
    let mut kicked = false;
    for (channel, bytes) in garbage {
        shard.message(start, PlayerId(1), channel, Bytes::from(bytes));
        kicked |= route(&mut shard, &mut clients, &config)
            .iter()
            .any(|o| matches!(o, ShardOutput::Disconnect { player, .. } if *player == PlayerId(1)));
    }
    assert!(
        kicked,
        "six violations with a limit of five did not kick the sender"
    );
}

#[test]
fn snapshots_go_out_every_interval_and_at_once_after_a_warp() {
    let (mut shard, mut clients, config, start) = joined_every_third_tick(3);
    let step = Duration::from_secs(1) / 60;
    // Half a tick off the due times, so that each step passes exactly one (`step` is 1/60 s
    // floored to the nanosecond: from `start` it would land on tick 1's due time).
    let mut now = start - step / 2;
    let mut per_tick = Vec::new();
    for _ in 0..30 {
        now += step;
        let before: Vec<u32> = clients.iter().map(|c| c.snapshots).collect();
        shard.run(now);
        route(&mut shard, &mut clients, &config);
        let got: Vec<bool> = clients
            .iter()
            .zip(&before)
            .map(|(client, before)| client.snapshots > *before)
            .collect();
        per_tick.push(got);
    }
    for (index, client) in clients.iter().enumerate() {
        assert_eq!(
            client.snapshots, 10,
            "player {index}: one snapshot in three ticks"
        );
    }
    assert!(
        per_tick
            .iter()
            .all(|got| got.iter().filter(|g| **g).count() == 1),
        "the players' snapshots are spread over the ticks: {per_tick:?}"
    );

    // Right after player 1's snapshot tick, a warp: the next tick is not theirs, but its
    // snapshot comes at once, showing them where the confirmation says they landed.
    while !per_tick.last().unwrap()[0] {
        now += step;
        let before = clients[0].snapshots;
        shard.run(now);
        route(&mut shard, &mut clients, &config);
        per_tick.push(vec![clients[0].snapshots > before]);
    }
    clients[0].sequence += 1;
    let mut warp = ClientInput::new(clients[0].decoder.as_ref().unwrap().newest());
    warp.push(InputCommand {
        sequence: clients[0].sequence,
        buttons: InputCommand::WARP,
        ..InputCommand::default()
    });
    shard.message(
        now,
        clients[0].id,
        1,
        Bytes::from(encode_to_vec(&warp).unwrap()),
    );
    let before = clients[0].snapshots;
    now += step;
    shard.run(now);
    route(&mut shard, &mut clients, &config);
    assert_eq!(
        clients[0].snapshots,
        before + 1,
        "a snapshot right after the warp"
    );
    let landed = clients[0]
        .events
        .iter()
        .find_map(|event| match event {
            ServerMessage::Teleported { x, y, .. } => Some(Vec2::new(*x, *y)),
            _ => None,
        })
        .expect("the warp is confirmed");
    assert_eq!(
        clients[0].decoder.as_ref().unwrap().current().me.position,
        landed
    );
}

/// A turn that runs late runs the ticks it owes at once and publishes once: every player
/// whose snapshot fell due on any of those ticks gets it then, none waits a whole interval
/// more (a loaded shard had given a third of its players 12 of 20 snapshots a second).
#[test]
fn a_late_turn_sends_the_snapshots_of_every_tick_it_ran() {
    let (mut shard, mut clients, config, start) = joined_every_third_tick(3);
    let step = Duration::from_secs(1) / 60;
    // Half a tick past tick 0's due time: each later step of `late_by` ticks passes exactly
    // that many due times.
    let mut now = start + step / 2;
    shard.run(now);
    route(&mut shard, &mut clients, &config);
    for (late_by, expected) in [(2, 2), (1, 1), (3, 3), (2, 2), (6, 3)] {
        let before: u32 = clients.iter().map(|client| client.snapshots).sum();
        now += step * late_by;
        shard.run(now);
        route(&mut shard, &mut clients, &config);
        let sent = clients.iter().map(|client| client.snapshots).sum::<u32>() - before;
        assert_eq!(
            sent, expected,
            "a turn {late_by} ticks after the last: one snapshot per player due in them"
        );
    }
}

/// A player's wire id goes back to the room once it has rested longer than any baseline
/// lasts: a newcomer then gets the lowest one, not a new one per join for the room's life.
#[test]
fn a_leavers_entity_id_is_handed_out_again_once_it_has_rested() {
    let (mut shard, mut clients, config, start) = joined_every_third_tick(3);
    let left_id = clients[1].you;
    let step = Duration::from_secs(1) / 60;
    let mut now = start + step;
    shard.leave(now, clients[1].id, LeaveReason::Left);
    let join = |shard: &mut Shard, clients: &mut Vec<Client>, now: Instant, id: u64| {
        clients.push(Client::new(id));
        shard
            .join(now, RoomId(1), PlayerId(id), format!("p{id}"))
            .unwrap();
        route(shard, clients, &config);
        clients.last().unwrap().you
    };
    shard.run(now);
    let soon = join(&mut shard, &mut clients, now, 10);
    assert_ne!(
        soon, left_id,
        "still resting: a baseline may hold the player who left"
    );
    shard.leave(now, PlayerId(10), LeaveReason::Left);
    for _ in 0..=tickwire_arena::snapshot::ID_REST_TICKS {
        now += step;
        shard.run(now);
    }
    assert_eq!(join(&mut shard, &mut clients, now, 11), left_id.min(soon));
}

/// Seed 003's burst in small: every player warps in the same tick. The snapshots out of
/// turn that follow are spread over the next ticks, at most a quarter as many per tick as
/// are due in turn, so the publish after a crowd's warp costs a quarter more than a usual
/// one and holds the next tick back by no more; and still every player sees where they
/// landed within one snapshot interval.
#[test]
fn a_crowds_warp_spreads_its_snapshots_out_of_turn_over_the_next_ticks() {
    const PLAYERS: u64 = 30;
    let (mut shard, mut clients, config, start) = joined_every_third_tick(PLAYERS);
    let step = Duration::from_secs(1) / 60;
    let mut now = start;
    // Until everyone has a baseline to ack.
    for _ in 0..3 {
        now += step;
        shard.run(now);
        route(&mut shard, &mut clients, &config);
    }
    for client in &mut clients {
        client.sequence += 1;
        let mut warp = ClientInput::new(client.decoder.as_ref().unwrap().newest());
        warp.push(InputCommand {
            sequence: client.sequence,
            buttons: InputCommand::WARP,
            ..InputCommand::default()
        });
        shard.message(
            now,
            client.id,
            1,
            Bytes::from(encode_to_vec(&warp).unwrap()),
        );
    }
    let due_per_tick = PLAYERS.div_ceil(3) as u32;
    let out_of_turn = due_per_tick.div_ceil(4);
    let at_warp: Vec<u32> = clients.iter().map(|client| client.snapshots).collect();
    let mut served_by_tick = Vec::new();
    for tick in 1..=3 {
        let before: u32 = clients.iter().map(|client| client.snapshots).sum();
        now += step;
        shard.run(now);
        route(&mut shard, &mut clients, &config);
        let sent = clients.iter().map(|client| client.snapshots).sum::<u32>() - before;
        assert!(
            sent <= due_per_tick + out_of_turn,
            "tick {tick} after the warp sent {sent} snapshots; {due_per_tick} are due in turn"
        );
        let served = clients
            .iter()
            .zip(&at_warp)
            .filter(|(client, at_warp)| client.snapshots > **at_warp)
            .count();
        served_by_tick.push(served);
    }
    assert_eq!(
        served_by_tick[0],
        (due_per_tick + out_of_turn) as usize,
        "the first tick after the warp: those due in turn and the budget out of turn"
    );
    assert!(
        served_by_tick[0] < served_by_tick[1],
        "more each tick: {served_by_tick:?}"
    );
    assert_eq!(
        served_by_tick[2], PLAYERS as usize,
        "within the interval every player has seen where they landed: {served_by_tick:?}"
    );
    for client in &clients {
        assert!(
            client
                .events
                .iter()
                .any(|event| matches!(event, ServerMessage::Teleported { .. })),
            "player {} had their warp confirmed in its tick",
            client.id.0
        );
    }
}

#[test]
fn names_are_exchanged_only_within_the_roster_limit() {
    let config = ArenaConfig {
        roster_limit: 2,
        ..ArenaConfig::default()
    };
    let (mut shard, _sink, start) = setup(config.clone());
    let mut clients = vec![Client::new(1), Client::new(2), Client::new(3)];
    for client in &clients {
        shard
            .join(start, RoomId(1), client.id, format!("p{}", client.id.0))
            .unwrap();
    }
    route(&mut shard, &mut clients, &config);
    let names = |client: &Client| -> Vec<u16> {
        client
            .events
            .iter()
            .filter_map(|event| match event {
                ServerMessage::Player { id, .. } => Some(*id),
                _ => None,
            })
            .collect()
    };
    let (you1, you2, you3) = (clients[0].you, clients[1].you, clients[2].you);
    assert_eq!(
        names(&clients[0]),
        [you1, you2],
        "the first two know each other"
    );
    assert_eq!(names(&clients[1]), [you1, you2]);
    assert!(
        names(&clients[2]).is_empty(),
        "the third joined a room past the limit: no roster"
    );
    // The third leaves unannounced; the second, announced, is heard leaving.
    shard.leave(start, clients[2].id, LeaveReason::Left);
    shard.leave(start, clients[1].id, LeaveReason::Left);
    route(&mut shard, &mut clients, &config);
    let left: Vec<u16> = clients[0]
        .events
        .iter()
        .filter_map(|event| match event {
            ServerMessage::Left { id } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(left, [you2], "only announced players are heard leaving");
    assert_ne!(you3, you2);
}
