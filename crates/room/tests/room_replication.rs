//! A room with a replicated world, hosted: the host makes members viewers, routes their
//! acknowledgements, sends full states on join and reconnect and a snapshot per tick after
//! publish, and the game writes none of it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_room::host::RoomHost;
use tickwire_room::replicate::{Change, Mirror, ServerWorld, ack_message};
use tickwire_room::room::{Command, LeaveReason, Member, PlayerId, Replication, Room, RoomContext};
use tickwire_room::shard::RoomId;
use tickwire_wire::Replicate;

#[derive(Debug, Clone, PartialEq, Replicate)]
struct Dot {
    #[wire(quantize(min = 0.0, max = 100.0, resolution = 0.01))]
    x: f32,
    #[wire(min = 0, max = 15)]
    seat: u8,
}

/// Every member is a dot that moves one step a tick; the room logs the messages it gets.
struct Dots {
    world: ServerWorld<Dot>,
    dots: Vec<(PlayerId, u16)>,
    messages: Arc<Mutex<Vec<(u8, Bytes)>>>,
}

impl Room for Dots {
    fn tick_rate_hz(&self) -> u32 {
        20
    }

    fn join(
        &mut self,
        _: &mut RoomContext<'_>,
        member: &Member,
    ) -> Result<(), tickwire_room::room::JoinRefused> {
        let seat = member.seat.0 as u8;
        let id = self.world.spawn(Dot { x: 0.0, seat }).unwrap();
        self.dots.push((member.id, id));
        Ok(())
    }

    fn leave(&mut self, _: &mut RoomContext<'_>, player: PlayerId, _: LeaveReason) {
        if let Some(index) = self.dots.iter().position(|(p, _)| *p == player) {
            let (_, id) = self.dots.remove(index);
            self.world.despawn(id);
        }
    }

    fn message(&mut self, _: &mut RoomContext<'_>, _: PlayerId, channel: u8, message: Bytes) {
        self.messages.lock().unwrap().push((channel, message));
    }

    fn tick(&mut self, _: &mut RoomContext<'_>) {
        for (_, id) in &self.dots {
            self.world.get_mut(*id).unwrap().x += 1.0;
        }
    }

    fn replication(&mut self) -> Option<Replication<'_>> {
        Some(Replication::new(&mut self.world))
    }
}

struct Harness {
    host: RoomHost,
    now: Instant,
    mirrors: Vec<(PlayerId, Mirror<Dot>)>,
    messages: Arc<Mutex<Vec<(u8, Bytes)>>>,
}

impl Harness {
    fn new() -> Self {
        let now = Instant::now();
        let messages = Arc::default();
        let room = Dots {
            world: ServerWorld::default(),
            dots: Vec::new(),
            messages: Arc::clone(&messages),
        };
        Self {
            host: RoomHost::new(RoomId(1), Box::new(room), now, 8).unwrap(),
            now,
            mirrors: Vec::new(),
            messages,
        }
    }

    fn join(&mut self, player: u64) {
        self.host
            .join(self.now, PlayerId(player), format!("p{player}"))
            .unwrap();
        self.mirrors.push((PlayerId(player), Mirror::new()));
    }

    /// One tick and publish; each snapshot is applied by its player's mirror and, if
    /// `ack`, acknowledged on channel 2. Returns who got a snapshot.
    fn turn(&mut self, ack: bool) -> Vec<PlayerId> {
        self.now += Duration::from_millis(50);
        self.host.advance(self.now);
        self.host.publish(self.now);
        let commands: Vec<Command> = self.host.take_commands().collect();
        let mut got = Vec::new();
        for command in commands {
            let Command::Send {
                to,
                channel,
                message,
            } = command
            else {
                continue;
            };
            assert_eq!(channel, 2, "snapshots go on the state channel");
            let (_, mirror) = self.mirrors.iter_mut().find(|(p, _)| *p == to).unwrap();
            let tick = mirror.apply(&message).unwrap();
            got.push(to);
            if ack {
                self.host
                    .message(self.now, to, 2, Bytes::copy_from_slice(&ack_message(tick)));
            }
        }
        got
    }

    fn mirror(&self, player: u64) -> &Mirror<Dot> {
        &self
            .mirrors
            .iter()
            .find(|(p, _)| *p == PlayerId(player))
            .unwrap()
            .1
    }
}

#[test]
fn members_are_sent_the_world_without_game_code() {
    let mut h = Harness::new();
    h.join(1);
    h.join(2);
    assert_eq!(h.turn(true), [PlayerId(1), PlayerId(2)]);
    assert_eq!(h.mirror(1).len(), 2);
    assert_eq!(h.mirror(2).changes(), &[Change::Added(0), Change::Added(1)]);
    // The roster, with no game code: names, connection, and which seat is the client's.
    let roster = |h: &Harness, player| -> Vec<(u16, String, bool)> {
        h.mirror(player)
            .roster()
            .map(|(seat, member)| (seat, member.name.clone(), member.connected))
            .collect()
    };
    assert_eq!(
        roster(&h, 1),
        [(0, "p1".into(), true), (1, "p2".into(), true)]
    );
    assert_eq!(h.mirror(1).my_seat(), Some(0));
    assert_eq!(h.mirror(2).my_seat(), Some(1));
    for _ in 0..5 {
        h.turn(true);
    }
    let xs: Vec<f32> = h.mirror(1).iter().map(|(_, dot)| dot.x).collect();
    // The tick at the start and one per 50 ms turn: seven.
    assert_eq!(xs, [7.0, 7.0]);
    assert!(
        h.messages.lock().unwrap().is_empty(),
        "acknowledgements never reach the room"
    );

    // A message on another channel is the room's.
    h.host
        .message(h.now, PlayerId(1), 1, Bytes::from_static(b"hi"));
    assert_eq!(h.messages.lock().unwrap().len(), 1);
}

#[test]
fn a_reconnected_member_is_sent_the_full_state_and_a_disconnected_one_nothing() {
    let mut h = Harness::new();
    h.join(1);
    h.join(2);
    h.turn(true);
    h.turn(true);
    h.host.disconnected(h.now, PlayerId(2));
    assert_eq!(
        h.turn(true),
        [PlayerId(1)],
        "no snapshot for a lost connection"
    );
    let (_, held) = h.mirror(1).roster().find(|(seat, _)| *seat == 1).unwrap();
    assert!(
        !held.connected,
        "the others see the seat held, disconnected"
    );
    h.host.reconnected(h.now, PlayerId(2));
    h.mirrors[1].1 = Mirror::new();
    assert_eq!(h.turn(true), [PlayerId(1), PlayerId(2)]);
    assert_eq!(h.mirror(2).len(), 2, "the full state, into an empty mirror");
}

#[test]
fn a_member_who_leaves_is_removed_from_everyone_view() {
    let mut h = Harness::new();
    h.join(1);
    h.join(2);
    h.turn(true);
    h.host.leave(h.now, PlayerId(2), LeaveReason::Left);
    h.mirrors.retain(|(p, _)| *p == PlayerId(1));
    assert_eq!(h.turn(true), [PlayerId(1)]);
    assert_eq!(
        h.mirror(1).changes(),
        &[Change::Changed(0, 0b01), Change::Removed(1)]
    );
    assert_eq!(h.mirror(1).roster_changes(), &[Change::Removed(1)]);
}

#[test]
fn publishing_twice_in_a_tick_sends_one_snapshot() {
    let mut h = Harness::new();
    h.join(1);
    h.turn(true);
    h.host.publish(h.now);
    assert_eq!(h.host.take_commands().count(), 0);
}
