//! The game's rules, tested the way docs/GUIDE.md shows: a `RoomHost` runs the room with a
//! clock of the test's own, players join, send moves and read what the room sent them. No
//! sockets, no threads, no waiting.

use std::time::{Duration, Instant};

use bytes::Bytes;
use four_in_a_row::{FourInARow, Move, Status, Update};
use tickwire_room::host::RoomHost;
use tickwire_room::listing::RoomOptions;
use tickwire_room::room::{Command, LeaveReason, PlayerId};
use tickwire_room::shard::RoomId;

const ADA: PlayerId = PlayerId(1);
const BOB: PlayerId = PlayerId(2);

/// A room with two players seated (ada first, so she plays seat 0 and moves first).
fn game(options: &[(&str, &str)]) -> (RoomHost, Instant) {
    let start = Instant::now();
    let mut host = RoomHost::new(RoomId(1), Box::new(FourInARow::default()), start, 2).unwrap();
    let options = RoomOptions::new(
        options
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string())),
    )
    .unwrap();
    host.create(start, &options).unwrap();
    host.join(start, ADA, "ada".into()).unwrap();
    host.join(start, BOB, "bob".into()).unwrap();
    (host, start)
}

fn play(host: &mut RoomHost, now: Instant, player: PlayerId, column: u8) {
    let bytes = tickwire_wire::encode_to_vec(&Move::Drop { column }).unwrap();
    host.message(now, player, 0, Bytes::from(bytes));
}

/// What the room sent `to` since the last call, decoded.
fn sent_to(host: &mut RoomHost, to: PlayerId) -> Vec<Update> {
    host.take_commands()
        .filter_map(|command| match command {
            Command::Send {
                to: recipient,
                message,
                ..
            } if recipient == to => Some(tickwire_wire::decode_exact::<Update>(&message).unwrap()),
            _ => None,
        })
        .collect()
}

fn last_game(updates: &[Update]) -> (Status, u8, u8, [u8; 42]) {
    updates
        .iter()
        .rev()
        .find_map(|update| match update {
            Update::Game {
                cells,
                status,
                turn,
                you,
            } => Some((*status, *turn, *you, *cells)),
            _ => None,
        })
        .expect("a game update")
}

#[test]
fn the_second_player_starts_the_game_and_locks_the_room() {
    let start = Instant::now();
    let mut host = RoomHost::new(RoomId(1), Box::new(FourInARow::default()), start, 2).unwrap();
    host.create(start, &RoomOptions::default()).unwrap();
    host.join(start, ADA, "ada".into()).unwrap();
    assert_eq!(last_game(&sent_to(&mut host, ADA)).0, Status::Waiting);
    host.take_listing_change();
    host.join(start, BOB, "bob".into()).unwrap();
    assert!(host.take_listing_change().expect("locked").locked);
    let (status, turn, you, _) = last_game(&sent_to(&mut host, ADA));
    assert_eq!(
        (status, turn, you),
        (Status::Playing, 0, 0),
        "ada moves first"
    );
}

#[test]
fn four_in_a_column_wins() {
    let (mut host, now) = game(&[]);
    for _ in 0..3 {
        play(&mut host, now, ADA, 3);
        play(&mut host, now, BOB, 4);
    }
    play(&mut host, now, ADA, 3);
    let (status, winner, you, cells) = last_game(&sent_to(&mut host, BOB));
    assert_eq!(
        (status, winner, you),
        (Status::Won, 0, 1),
        "ada (seat 0) won"
    );
    assert_eq!(cells[3 * 7 + 3], 1, "her fourth disc is on row 3");
}

#[test]
fn a_diagonal_wins_too() {
    let (mut host, now) = game(&[]);
    // ada builds the diagonal (0,0) (1,1) (2,2) (3,3); bob fills beneath it.
    for (ada, bob) in [(0, 1), (1, 2), (2, 3), (2, 3), (3, 6), (3, 6)] {
        play(&mut host, now, ADA, ada);
        play(&mut host, now, BOB, bob);
    }
    play(&mut host, now, ADA, 3);
    assert_eq!(last_game(&sent_to(&mut host, ADA)).0, Status::Won);
}

#[test]
fn an_illegal_move_is_refused_with_its_reason() {
    let (mut host, now) = game(&[]);
    sent_to(&mut host, BOB);
    play(&mut host, now, BOB, 0);
    assert_eq!(
        sent_to(&mut host, BOB),
        [Update::Refused {
            reason: "not your turn".into()
        }]
    );
    for _ in 0..3 {
        play(&mut host, now, ADA, 0);
        play(&mut host, now, BOB, 0);
    }
    sent_to(&mut host, ADA);
    play(&mut host, now, ADA, 0);
    assert_eq!(
        sent_to(&mut host, ADA),
        [Update::Refused {
            reason: "column 1 is full".into()
        }]
    );
    // Bytes that are no move are dropped and counted, never a crash.
    host.message(now, ADA, 0, Bytes::from_static(&[0xff, 0xff]));
    assert_eq!(host.stats().messages_malformed, 1);
}

#[test]
fn a_player_too_slow_loses_on_the_rooms_clock() {
    let (mut host, start) = game(&[("turn_secs", "10")]);
    play(&mut host, start, ADA, 0);
    sent_to(&mut host, ADA);
    // bob's clock started with ada's move; 9 s pass in 1 s ticks, nothing happens.
    for secs in 1..=9 {
        host.advance(start + Duration::from_secs(secs));
    }
    assert!(sent_to(&mut host, ADA).is_empty());
    host.advance(start + Duration::from_secs(10));
    let (status, winner, ..) = last_game(&sent_to(&mut host, ADA));
    assert_eq!((status, winner), (Status::Won, 0), "bob ran out of time");
}

#[test]
fn bad_options_are_refused_when_the_room_is_created() {
    let start = Instant::now();
    let mut host = RoomHost::new(RoomId(1), Box::new(FourInARow::default()), start, 2).unwrap();
    let options = RoomOptions::new([("turn_secs".to_string(), "1".to_string())]).unwrap();
    assert_eq!(
        host.create(start, &options).unwrap_err().to_string(),
        "turn_secs 1 outside 5..=600"
    );
}

#[test]
fn a_reconnected_player_gets_the_game_back_and_a_leaver_reopens_the_room() {
    let (mut host, now) = game(&[]);
    play(&mut host, now, ADA, 5);
    host.disconnected(now, BOB);
    sent_to(&mut host, BOB);
    host.reconnected(now, BOB);
    let (status, turn, you, cells) = last_game(&sent_to(&mut host, BOB));
    assert_eq!((status, turn, you, cells[5]), (Status::Playing, 1, 1, 1));
    host.take_listing_change();
    host.leave(now, BOB, LeaveReason::Left);
    assert!(!host.take_listing_change().expect("unlocked").locked);
    assert_eq!(last_game(&sent_to(&mut host, ADA)).0, Status::Waiting);
}

#[test]
fn both_asking_for_a_rematch_starts_again_with_the_loser() {
    let (mut host, now) = game(&[]);
    for _ in 0..3 {
        play(&mut host, now, ADA, 0);
        play(&mut host, now, BOB, 1);
    }
    play(&mut host, now, ADA, 0);
    let rematch = Bytes::from(tickwire_wire::encode_to_vec(&Move::Rematch).unwrap());
    host.message(now, ADA, 0, rematch.clone());
    assert_eq!(
        last_game(&sent_to(&mut host, ADA)).0,
        Status::Won,
        "one asked"
    );
    host.message(now, BOB, 0, rematch);
    let (status, turn, _, cells) = last_game(&sent_to(&mut host, ADA));
    assert_eq!((status, turn), (Status::Playing, 1), "bob lost, bob starts");
    assert!(cells.iter().all(|cell| *cell == 0));
}

#[test]
fn the_bytes_the_page_writes_and_reads_are_the_rooms() {
    // web/index.html encodes moves and decodes updates by hand; these pin the layout.
    for column in 0..7u8 {
        assert_eq!(
            tickwire_wire::encode_to_vec(&Move::Drop { column }).unwrap(),
            [column << 1],
            "Drop {{ column: {column} }}"
        );
    }
    assert_eq!(tickwire_wire::encode_to_vec(&Move::Rematch).unwrap(), [1]);
    let mut cells = [0u8; 42];
    cells[0] = 1;
    cells[41] = 2;
    let game = Update::Game {
        cells,
        status: Status::Won,
        turn: 1,
        you: 0,
    };
    let bytes = tickwire_wire::encode_to_vec(&game).unwrap();
    // 1 + 84 + 2 + 1 + 1 = 89 bits: cell 0 in bits 1-2, cell 41 in bits 83-84, status in
    // 85-86, turn in 87, you in 88.
    assert_eq!(bytes.len(), 12);
    assert_eq!(bytes[0], 0b0000_0010, "variant 0, then cell 0 = 1");
    assert_eq!(
        bytes[10], 0b1101_0000,
        "cell 41 = 2 (bit 84 set), status 2 (bit 86 set), turn 1 (bit 87)"
    );
    assert_eq!(bytes[11], 0, "you 0 (bit 88), then padding");
    let refused = Update::Refused {
        reason: "ab".into(),
    };
    // variant 1, length 2 in 7 bits, then 'a' and 'b' from bit 8.
    assert_eq!(
        tickwire_wire::encode_to_vec(&refused).unwrap(),
        [0b0000_0101, b'a', b'b']
    );
}
