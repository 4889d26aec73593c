//! The game's rules, tested the way docs/GUIDE.md shows: a `RoomHost` runs the room with a
//! clock of the test's own, players join and steer, and each holds a `Mirror` of what the
//! room's replicated world sent them, as a browser would. No sockets, no threads, no waiting.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tag::{FIELD, INPUT_CHANNEL, Runner, Steer, TAG_BACK_TICKS, TICK_RATE, Tag};
use tickwire_room::host::RoomHost;
use tickwire_room::replicate::{Mirror, ack_message};
use tickwire_room::room::{Command, LeaveReason, PlayerId};
use tickwire_room::shard::RoomId;
use tickwire_wire::replicate::Replicate as _;

const ADA: PlayerId = PlayerId(1);
const BOB: PlayerId = PlayerId(2);

/// A room, its clock, and a mirror per player fed from what the room sends them.
struct Game {
    host: RoomHost,
    now: Instant,
    mirrors: Vec<(PlayerId, Mirror<Runner>)>,
}

impl Game {
    fn new(players: &[PlayerId]) -> Self {
        let now = Instant::now();
        let mut host = RoomHost::new(RoomId(1), Box::new(Tag::default()), now, 8).unwrap();
        for (n, &player) in players.iter().enumerate() {
            host.join(now, player, format!("p{n}")).unwrap();
        }
        let mirrors = players
            .iter()
            .map(|&player| (player, Mirror::new()))
            .collect();
        Self { host, now, mirrors }
    }

    fn steer(&mut self, player: PlayerId, x: f32, y: f32) {
        let bytes = tickwire_wire::encode_to_vec(&Steer { x, y }).unwrap();
        self.host
            .message(self.now, player, INPUT_CHANNEL, Bytes::from(bytes));
    }

    /// Runs `ticks` ticks, delivering and acknowledging every snapshot.
    fn run(&mut self, ticks: u32) {
        for _ in 0..ticks {
            // A tick's length rounded up, so that n steps reach n ticks.
            self.now += Duration::from_nanos(1_000_000_000u64.div_ceil(u64::from(TICK_RATE)));
            self.host.advance(self.now);
            self.host.publish(self.now);
            let commands: Vec<Command> = self.host.take_commands().collect();
            for command in commands {
                let Command::Send {
                    to,
                    channel: 2,
                    message,
                } = command
                else {
                    continue;
                };
                let Some((_, mirror)) = self.mirrors.iter_mut().find(|(p, _)| *p == to) else {
                    continue;
                };
                let tick = mirror.apply(&message).unwrap();
                let ack = Bytes::copy_from_slice(&ack_message(tick));
                self.host.message(self.now, to, 2, ack);
            }
        }
    }

    fn mirror(&self, player: PlayerId) -> &Mirror<Runner> {
        &self.mirrors.iter().find(|(p, _)| *p == player).unwrap().1
    }

    /// The runner of `seat`, as `viewer` sees it.
    fn runner(&self, viewer: PlayerId, seat: u8) -> Runner {
        let mirror = self.mirror(viewer);
        mirror
            .iter()
            .find(|(_, runner)| runner.seat == seat)
            .unwrap()
            .1
            .clone()
    }
}

#[test]
fn the_first_runner_is_it_and_everyone_sees_everyone_and_the_roster() {
    let mut game = Game::new(&[ADA, BOB]);
    game.run(1);
    for viewer in [ADA, BOB] {
        assert_eq!(game.mirror(viewer).len(), 2);
        assert!(game.runner(viewer, 0).it);
        assert!(!game.runner(viewer, 1).it);
        let names: Vec<_> = game
            .mirror(viewer)
            .roster()
            .map(|(_, m)| m.name.clone())
            .collect();
        assert_eq!(names, ["p0", "p1"]);
    }
    assert_eq!(game.mirror(ADA).my_seat(), Some(0));
    assert_eq!(game.mirror(BOB).my_seat(), Some(1));
}

#[test]
fn steering_moves_a_runner_at_its_speed_within_the_field() {
    let mut game = Game::new(&[ADA, BOB]);
    game.run(1);
    let start = game.runner(BOB, 1).position;
    game.steer(BOB, 1.0, 0.0);
    game.run(TICK_RATE);
    let moved = game.runner(ADA, 1).position;
    assert!(
        (moved[0] - start[0] - tag::SPEED).abs() < 0.05,
        "{start:?} → {moved:?}"
    );
    assert_eq!(moved[1], start[1]);
    // A diagonal is no faster, and nobody leaves the field.
    game.steer(BOB, 1.0, 1.0);
    game.run(TICK_RATE * 20);
    assert_eq!(game.runner(ADA, 1).position, [FIELD, FIELD]);
}

#[test]
fn it_tags_whoever_it_touches_who_cannot_tag_back_at_once() {
    let mut game = Game::new(&[ADA, BOB]);
    game.run(1);
    // Ada (it, at x = 5) runs right at Bob (x = 15, same row), and stops once she tags him:
    // 9 m at 6.6 m/s.
    game.steer(ADA, 1.0, 0.0);
    let mut ticks = 0;
    while !game.runner(ADA, 1).it {
        game.run(1);
        ticks += 1;
        assert!(ticks < TICK_RATE * 2, "no tag in 2 s");
    }
    assert!((40..=42).contains(&ticks), "tagged after {ticks} ticks");
    game.steer(ADA, 0.0, 0.0);
    assert_eq!(game.runner(BOB, 1).tagged, 1);
    assert!(!game.runner(BOB, 0).it);
    // Bob is within reach of Ada, but may not tag back for a second.
    game.run(TAG_BACK_TICKS - 2);
    assert!(game.runner(BOB, 1).it, "no tag back within the second");
    game.run(4);
    assert!(game.runner(BOB, 0).it, "then ada is it again");
}

#[test]
fn when_it_leaves_someone_else_is_it() {
    let mut game = Game::new(&[ADA, BOB]);
    game.run(1);
    game.host.leave(game.now, ADA, LeaveReason::Left);
    game.mirrors.retain(|(player, _)| *player == BOB);
    game.run(1);
    assert_eq!(game.mirror(BOB).len(), 1);
    assert!(game.runner(BOB, 1).it);
    assert_eq!(game.mirror(BOB).roster().count(), 1);
}

#[test]
fn malformed_steering_is_dropped() {
    let mut game = Game::new(&[ADA, BOB]);
    game.run(1);
    let start = game.runner(ADA, 1).position;
    game.host
        .message(game.now, BOB, INPUT_CHANNEL, Bytes::from_static(&[0xff; 9]));
    game.run(5);
    assert_eq!(game.runner(ADA, 1).position, start);
    assert_eq!(game.host.stats().messages_malformed, 1);
}

/// The page's generated code (`web/src/generated/`) and the C# mirror's classes
/// (`csharp/TagWorld.cs`, compiled by `clients/csharp/build.sh`) are what the Rust types
/// generate now: `TICKWIRE_BLESS=1 cargo test -p tag` rewrites them.
#[test]
fn the_pages_generated_code_is_current() {
    let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web/src/generated");
    let world = tickwire_wire::schema::typescript_replicated("Tag", &Runner::layout()).unwrap();
    let messages =
        tickwire_wire::schema::typescript(&[<Steer as tickwire_wire::Describe>::layout()]).unwrap();
    let csharp =
        tickwire_wire::schema::csharp_replicated("TagGame", "Tag", &Runner::layout()).unwrap();
    let files = [
        (web.join("world.ts"), world),
        (web.join("messages.ts"), messages),
        (web.join("../../../csharp/TagWorld.cs"), csharp),
    ];
    for (path, generated) in files {
        if std::env::var_os("TICKWIRE_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is stale: TICKWIRE_BLESS=1 cargo test -p tag",
            path.display()
        );
    }
}
