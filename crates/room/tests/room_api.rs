//! The Room API as a game uses it, driven the way a game's own tests drive it: a
//! [`RoomHost`] (or a [`Shard`] for what spans rooms) and a clock of the test's own. Create
//! options, typed messages, lock, label and metadata, timers, dispose and auto-dispose, and
//! a panicking room contained.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_room::host::RoomHost;
use tickwire_room::listing::RoomOptions;
use tickwire_room::room::{
    CreateRefused, JoinRefused, LeaveReason, Member, PlayerId, Room, RoomContext,
};
use tickwire_room::shard::{
    JoinError, ROOM_CLOSED, ROOM_CRASHED, RoomId, SeatChange, Shard, ShardConfig, ShardOutput,
};
use tickwire_room::timers::TimerId;
use tickwire_wire::{Decode, Encode};

/// What clients send a counting game.
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
enum Input {
    Add {
        #[wire(min = 1, max = 10)]
        amount: u8,
    },
    Finish,
}

/// What it sends them.
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
enum Update {
    Total {
        #[wire(min = 0, max = 1000)]
        total: u16,
    },
    Timer,
}

const ROUND: TimerId = TimerId(1);
const PULSE: TimerId = TimerId(2);

/// A small game: options set its target, typed inputs add up, a round timer, a lock when
/// full, and `Finish` disposes of the room; everything it is told lands in `log`.
#[derive(Default)]
struct Counting {
    target: u16,
    total: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Counting {
    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

impl Room for Counting {
    fn create(
        &mut self,
        ctx: &mut RoomContext<'_>,
        options: &RoomOptions,
    ) -> Result<(), CreateRefused> {
        self.target = options.parse_or("target", 10).map_err(CreateRefused)?;
        if !(1..=1000).contains(&self.target) {
            return Err(CreateRefused(format!(
                "target {} outside 1..=1000",
                self.target
            )));
        }
        let mode = options.get("mode").unwrap_or("casual");
        ctx.set_label("mode", mode).unwrap();
        ctx.set_metadata(format!("{{\"target\":{}}}", self.target))
            .unwrap();
        ctx.delay(ROUND, Duration::from_secs(60));
        Ok(())
    }

    fn join(&mut self, ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        if member.name == "cheater" {
            return Err(JoinRefused::game("cheaters may not play"));
        }
        if ctx.members().len() == 2 {
            ctx.lock();
        }
        Ok(())
    }

    fn leave(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId, reason: LeaveReason) {
        ctx.unlock();
        self.note(format!("leave {} {reason:?}", player.0));
    }

    fn message(&mut self, ctx: &mut RoomContext<'_>, _from: PlayerId, _channel: u8, bytes: Bytes) {
        let Some(input) = ctx.decode::<Input>(&bytes) else {
            return;
        };
        match input {
            Input::Add { amount } => {
                self.total += u16::from(amount);
                ctx.broadcast_message(0, &Update::Total { total: self.total })
                    .unwrap();
                if self.total >= self.target {
                    ctx.every(PULSE, Duration::from_millis(100));
                }
            }
            Input::Finish => ctx.dispose(),
        }
    }

    fn timer(&mut self, ctx: &mut RoomContext<'_>, timer: TimerId) {
        self.note(format!("timer {} at {:?}", timer.0, ctx.tick()));
        if timer == PULSE {
            ctx.broadcast_message(0, &Update::Timer).unwrap();
        }
    }

    fn dispose(&mut self, ctx: &mut RoomContext<'_>) {
        self.note(format!(
            "dispose total {} members {}",
            self.total,
            ctx.members().len()
        ));
    }
}

fn options(pairs: &[(&str, &str)]) -> RoomOptions {
    RoomOptions::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
}

fn encode(input: &Input) -> Bytes {
    Bytes::from(tickwire_wire::encode_to_vec(input).unwrap())
}

fn updates(host: &mut RoomHost) -> Vec<Update> {
    host.take_commands()
        .filter_map(|command| match command {
            tickwire_room::room::Command::Broadcast { message, .. } => {
                Some(tickwire_wire::decode_exact::<Update>(&message).unwrap())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn create_options_reach_the_room_and_a_refusal_says_why() {
    let start = Instant::now();
    let mut host = RoomHost::new(RoomId(1), Box::new(Counting::default()), start, 4).unwrap();
    assert_eq!(
        host.create(start, &options(&[("target", "lots")])),
        Err(CreateRefused(
            "option target = \"lots\" is not valid".into()
        ))
    );
    let mut host = RoomHost::new(RoomId(1), Box::new(Counting::default()), start, 4).unwrap();
    assert_eq!(
        host.create(start, &options(&[("target", "5000")])),
        Err(CreateRefused("target 5000 outside 1..=1000".into()))
    );
    let mut host = RoomHost::new(RoomId(1), Box::new(Counting::default()), start, 4).unwrap();
    host.create(start, &options(&[("target", "3"), ("mode", "ranked")]))
        .unwrap();
    let listing = host
        .take_listing_change()
        .expect("create set the label")
        .clone();
    assert_eq!(listing.label.get("mode"), Some("ranked"));
    assert_eq!(listing.metadata, "{\"target\":3}");
    assert!(!listing.locked);
    assert!(host.take_listing_change().is_none(), "reported once");
}

#[test]
fn typed_messages_are_decoded_and_garbage_is_counted_not_seen() {
    let start = Instant::now();
    let mut host = RoomHost::new(RoomId(1), Box::new(Counting::default()), start, 4).unwrap();
    host.create(start, &RoomOptions::default()).unwrap();
    host.join(start, PlayerId(1), "ada".into()).unwrap();
    host.message(start, PlayerId(1), 0, encode(&Input::Add { amount: 4 }));
    host.message(start, PlayerId(1), 0, encode(&Input::Add { amount: 5 }));
    assert_eq!(
        updates(&mut host),
        [Update::Total { total: 4 }, Update::Total { total: 9 }]
    );
    // Nothing at all; bytes past the message's end; an amount past its declared bounds
    // (1 to 10 takes 4 bits: 15 is out).
    let mut trailing = encode(&Input::Add { amount: 1 }).to_vec();
    trailing.push(0xff);
    for garbage in [vec![], trailing, vec![0b0001_1110]] {
        host.message(start, PlayerId(1), 0, Bytes::from(garbage));
    }
    assert!(updates(&mut host).is_empty(), "nothing reached the game");
    assert_eq!(host.stats().messages_malformed, 3);
}

/// What a greeting game sends: a name of at most 4 bytes, and a digit.
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
struct Greeting {
    #[wire(max_len = 4)]
    name: String,
    #[wire(min = 0, max = 9)]
    digit: u8,
}

/// Greets whoever sends anything, by name, with the message's length as its digit: a long
/// name, or a long message, does not encode.
struct Greeter;

impl Room for Greeter {
    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, _channel: u8, bytes: Bytes) {
        let name = ctx.member(from).map(|member| member.name.clone()).unwrap();
        let greeting = Greeting {
            name,
            digit: bytes.len() as u8,
        };
        let sent = ctx.send_message(from, 0, &greeting);
        assert_eq!(
            sent.is_err(),
            greeting.name.len() > 4 || greeting.digit > 9,
            "the game is told"
        );
    }
}

#[test]
fn a_message_that_does_not_encode_is_counted_and_logged_once_per_kind() {
    let now = Instant::now();
    let mut shard = Shard::new(ShardConfig::default());
    for room in [1, 2] {
        shard
            .create_room(now, RoomId(room), "greet", Box::new(Greeter), 4)
            .unwrap();
    }
    shard
        .join(now, RoomId(1), PlayerId(1), "ada".into())
        .unwrap();
    shard
        .join(now, RoomId(1), PlayerId(2), "charlotte".into())
        .unwrap();
    shard
        .join(now, RoomId(2), PlayerId(3), "bartholomew".into())
        .unwrap();
    shard.drain_outputs().for_each(drop);

    let say = |shard: &mut Shard, player: u64, len: usize| {
        shard.message(now, PlayerId(player), 0, Bytes::from(vec![0u8; len]));
    };
    say(&mut shard, 1, 3); // fine
    say(&mut shard, 2, 3); // too long a name
    say(&mut shard, 2, 3); // again
    say(&mut shard, 3, 3); // the same kind of failure, in the other room of the kind
    say(&mut shard, 1, 12); // a digit out of range: another kind
    let sent = shard
        .drain_outputs()
        .filter(|output| matches!(output, ShardOutput::Send { .. }))
        .count();
    assert_eq!(sent, 1, "only ada's greeting went out");
    assert_eq!(
        shard.stats().messages_unencodable,
        4,
        "every failure counted"
    );
    let logged: Vec<_> = shard
        .drain_encode_failures()
        .map(|failure| (failure.room, failure.kind, failure.error.path.to_string()))
        .collect();
    assert_eq!(
        logged,
        [
            (RoomId(1), "greet".to_string(), "name".to_string()),
            (RoomId(1), "greet".to_string(), "digit".to_string()),
        ],
        "the first of each kind, for the room kind"
    );
    say(&mut shard, 3, 3);
    assert_eq!(shard.drain_encode_failures().count(), 0, "logged once");
    assert_eq!(shard.stats().messages_unencodable, 5);
}

#[test]
fn a_join_refusal_keeps_its_reason_and_a_full_game_locks_itself() {
    let start = Instant::now();
    let mut host = RoomHost::new(RoomId(1), Box::new(Counting::default()), start, 4).unwrap();
    host.create(start, &RoomOptions::default()).unwrap();
    host.take_listing_change();
    assert_eq!(
        host.join(start, PlayerId(9), "cheater".into())
            .unwrap_err()
            .to_string(),
        "cheaters may not play",
        "the game's words, verbatim"
    );
    host.join(start, PlayerId(1), "ada".into()).unwrap();
    assert!(host.take_listing_change().is_none());
    host.join(start, PlayerId(2), "bob".into()).unwrap();
    assert!(host.take_listing_change().expect("locked").locked);
    host.leave(start, PlayerId(2), LeaveReason::Left);
    assert!(!host.take_listing_change().expect("unlocked").locked);
}

#[test]
fn timers_fire_on_the_rooms_clock_between_ticks() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let room = Counting {
        log: log.clone(),
        ..Counting::default()
    };
    let start = Instant::now();
    let mut host = RoomHost::new(RoomId(1), Box::new(room), start, 4).unwrap();
    host.create(start, &options(&[("target", "2")])).unwrap();
    host.join(start, PlayerId(1), "ada".into()).unwrap();
    host.advance(start);
    host.message(start, PlayerId(1), 0, encode(&Input::Add { amount: 2 }));
    updates(&mut host);
    assert!(host.next_deadline() <= start + Duration::from_millis(17));
    // 350 ms in 10 ms turns: the 100 ms pulse fired three times, each before the tick
    // due with it.
    for ms in (10..=350).step_by(10) {
        host.advance(start + Duration::from_millis(ms));
    }
    let pulses = log
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.starts_with("timer 2"))
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(pulses, ["timer 2 at 6", "timer 2 at 12", "timer 2 at 18"]);
    assert_eq!(
        updates(&mut host),
        [Update::Timer, Update::Timer, Update::Timer]
    );
    assert!(host.is_timer_pending(ROUND));
    host.advance(start + Duration::from_secs(60));
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|line| line == "timer 1 at 3600")
    );
    assert!(!host.is_timer_pending(ROUND), "a delay fires once");
    assert!(host.is_timer_pending(PULSE), "a repeat goes on");
}

fn shard(ttl: Duration) -> (Shard, Instant) {
    let config = ShardConfig {
        empty_room_ttl: ttl,
        ..ShardConfig::default()
    };
    (Shard::new(config), Instant::now())
}

fn disconnects(shard: &mut Shard) -> Vec<(PlayerId, String)> {
    shard
        .drain_outputs()
        .filter_map(|output| match output {
            ShardOutput::Disconnect { player, reason } => Some((player, reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_room_that_disposes_of_itself_persists_then_lets_its_players_go() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let room = Counting {
        log: log.clone(),
        ..Counting::default()
    };
    let (mut shard, now) = shard(Duration::from_secs(30));
    shard
        .create_room_with(
            now,
            RoomId(1),
            "counting",
            Box::new(room),
            4,
            &RoomOptions::default(),
        )
        .unwrap();
    shard
        .join(now, RoomId(1), PlayerId(1), "ada".into())
        .unwrap();
    shard
        .join(now, RoomId(1), PlayerId(2), "bob".into())
        .unwrap();
    shard.message(now, PlayerId(1), 0, encode(&Input::Add { amount: 7 }));
    shard.message(now, PlayerId(2), 0, encode(&Input::Finish));
    let outputs: Vec<_> = shard.drain_outputs().collect();
    for player in [1, 2] {
        assert!(outputs.contains(&ShardOutput::Disconnect {
            player: PlayerId(player),
            reason: ROOM_CLOSED.into()
        }));
    }
    assert!(
        outputs.contains(&ShardOutput::Seat(SeatChange::RoomDisposed {
            room: RoomId(1)
        }))
    );
    assert_eq!(shard.rooms().count(), 0);
    assert_eq!(shard.room_of(PlayerId(1)), None);
    let log = log.lock().unwrap();
    assert_eq!(
        log[log.len() - 3..],
        [
            "leave 1 Disposed",
            "leave 2 Disposed",
            "dispose total 7 members 0"
        ],
        "players leave, then the room persists its result"
    );
}

#[test]
fn an_empty_room_goes_after_its_own_delay_zero_included() {
    let (mut shard, now) = shard(Duration::from_secs(30));
    shard
        .create_room(
            now,
            RoomId(1),
            "counting",
            Box::new(AutoDispose(Some(Duration::ZERO))),
            4,
        )
        .unwrap();
    shard
        .create_room(now, RoomId(2), "counting", Box::new(AutoDispose(None)), 4)
        .unwrap();
    // Before anyone joins, a room waits the server's delay for its first player.
    shard.run(now + Duration::from_secs(1));
    assert_eq!(shard.rooms().count(), 2);
    shard
        .join(now, RoomId(1), PlayerId(1), "ada".into())
        .unwrap();
    shard
        .join(now, RoomId(2), PlayerId(2), "bob".into())
        .unwrap();
    let later = now + Duration::from_secs(2);
    shard.leave(later, PlayerId(1), LeaveReason::Left);
    shard.leave(later, PlayerId(2), LeaveReason::Left);
    assert_eq!(shard.next_deadline().map(|at| at <= later), Some(true));
    shard.run(later);
    let rooms: Vec<_> = shard.rooms().map(|room| room.id).collect();
    assert_eq!(rooms, [RoomId(2)], "delay 0 goes at once, `None` never");
    shard.run(later + Duration::from_secs(3600));
    assert_eq!(shard.rooms().count(), 1);
}

/// Chooses its empty-room delay.
struct AutoDispose(Option<Duration>);

impl Room for AutoDispose {
    fn create(&mut self, ctx: &mut RoomContext<'_>, _: &RoomOptions) -> Result<(), CreateRefused> {
        ctx.set_auto_dispose(self.0);
        Ok(())
    }
}

/// Panics in the hook it is told to.
struct Panics(&'static str);

impl Room for Panics {
    fn tick_rate_hz(&self) -> u32 {
        if self.0 == "tick_rate_hz" {
            panic!("tick_rate_hz blew up");
        }
        60
    }

    fn create(&mut self, _: &mut RoomContext<'_>, _: &RoomOptions) -> Result<(), CreateRefused> {
        if self.0 == "create" {
            panic!("create blew up");
        }
        Ok(())
    }

    fn join(&mut self, _ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        if self.0 == "join" && member.name == "trigger" {
            panic!("join blew up");
        }
        Ok(())
    }

    fn message(&mut self, _ctx: &mut RoomContext<'_>, _: PlayerId, _: u8, _: Bytes) {
        if self.0 == "message" {
            panic!("message blew up");
        }
    }

    fn tick(&mut self, ctx: &mut RoomContext<'_>) {
        if self.0 == "tick" && ctx.tick() == 3 {
            panic!("tick blew up");
        }
    }
}

/// Counts its ticks.
struct Steady(Arc<Mutex<u64>>);

impl Room for Steady {
    fn tick(&mut self, _ctx: &mut RoomContext<'_>) {
        *self.0.lock().unwrap() += 1;
    }
}

#[test]
fn a_panic_in_any_hook_disposes_of_that_room_alone() {
    for hook in ["tick", "message", "join"] {
        let ticks = Arc::new(Mutex::new(0));
        let (mut shard, now) = shard(Duration::from_secs(30));
        shard
            .create_room(now, RoomId(1), "steady", Box::new(Steady(ticks.clone())), 4)
            .unwrap();
        shard
            .create_room(now, RoomId(2), "panics", Box::new(Panics(hook)), 4)
            .unwrap();
        shard
            .join(now, RoomId(1), PlayerId(1), "ada".into())
            .unwrap();
        shard
            .join(now, RoomId(2), PlayerId(2), "bob".into())
            .unwrap();
        shard.drain_outputs().for_each(drop);
        match hook {
            "message" => shard.message(now, PlayerId(2), 0, Bytes::from_static(b"x")),
            "join" => assert_eq!(
                shard.join(now, RoomId(2), PlayerId(3), "trigger".into()),
                Err(JoinError::Refused(JoinRefused::Crashed))
            ),
            _ => {}
        }
        for ms in (0..=200).step_by(10) {
            shard.run(now + Duration::from_millis(ms));
        }
        let closed = disconnects(&mut shard);
        assert_eq!(closed, [(PlayerId(2), ROOM_CRASHED.to_string())], "{hook}");
        let crashes: Vec<_> = shard.drain_crashes().collect();
        assert_eq!(crashes.len(), 1, "{hook}");
        assert_eq!(crashes[0].panic, format!("{hook} blew up"));
        assert_eq!(crashes[0].kind, "panics");
        assert_eq!(shard.stats().rooms_crashed, 1);
        let rooms: Vec<_> = shard.rooms().map(|room| room.id).collect();
        assert_eq!(rooms, [RoomId(1)], "{hook}: the other room lives");
        assert_eq!(
            *ticks.lock().unwrap(),
            13,
            "{hook}: and ticked at 60 Hz throughout"
        );
        assert_eq!(shard.room_of(PlayerId(1)), Some(RoomId(1)));
        assert_eq!(shard.room_of(PlayerId(2)), None);
    }
}

#[test]
fn a_panic_while_a_room_is_created_refuses_it_and_the_shard_goes_on() {
    let (mut shard, now) = shard(Duration::from_secs(30));
    for hook in ["tick_rate_hz", "create"] {
        let refused = shard.create_room(now, RoomId(1), "panics", Box::new(Panics(hook)), 4);
        assert!(
            matches!(&refused, Err(tickwire_room::shard::CreateError::Crashed(_))),
            "{hook}: {refused:?}"
        );
    }
    assert_eq!(shard.rooms().count(), 0);
    let crashes: Vec<_> = shard.drain_crashes().map(|crash| crash.panic).collect();
    assert_eq!(
        crashes,
        ["tick_rate_hz panicked", "create blew up"],
        "logged"
    );
    assert_eq!(shard.stats().rooms_crashed, 2, "and counted");
    shard
        .create_room(now, RoomId(1), "panics", Box::new(Panics("none")), 4)
        .unwrap();
    assert_eq!(shard.rooms().count(), 1);
}
