//! `RoomHost` runs one [`Room`]: seats, membership, ticks and timers on schedule, the
//! room's lock, label and metadata, and the commands the room issues, without any I/O. A
//! shard owns many hosts; a game's tests drive one directly, with a clock of their own.
//!
//! Every call into the room is made under [`catch_unwind`](std::panic::catch_unwind): a
//! panic in the game's code marks the room [`crashed`](RoomHost::crashed) and no further
//! call reaches it; the shard then disposes of it alone.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_wire::EncodeError;

use crate::listing::{Listing, RoomOptions};
use tickwire_replicate::{ReplicationProfile, ViewerId};

use crate::room::{
    Command, CreateRefused, JoinRefused, LeaveReason, Member, PlayerId, Room, RoomContext,
    RoomState, Seat,
};
use crate::sessions::IdMap;
use crate::shard::RoomId;
use crate::timers::TimerId;
use crate::timestep::{Due, FixedTimestep, TickRateError};

/// Counters of one room's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoomStats {
    /// Ticks run.
    pub ticks: u64,
    /// Ticks skipped because the room fell too far behind.
    pub ticks_skipped: u64,
    /// Messages handed to the room.
    pub messages: u64,
    /// Messages ignored because their sender is not a connected member.
    pub messages_from_strangers: u64,
    /// Messages the room could not decode as its message type
    /// ([`RoomContext::decode`]), dropped.
    pub messages_malformed: u64,
    /// Messages the room asked to send that did not encode
    /// ([`RoomContext::send_message`]), not sent.
    pub messages_unencodable: u64,
    /// Timers fired.
    pub timers_fired: u64,
}

/// Takes of a room's commands between two looks at the queue's capacity (a few seconds
/// of a busy room: one take per message and per tick).
const TIDY_TAKES: u32 = 256;

/// Commands a room's queue keeps room for however quiet it is.
const KEPT_COMMANDS: usize = 64;

/// One room and everything the runtime keeps about it.
pub struct RoomHost {
    id: RoomId,
    room: Box<dyn Room>,
    /// In join order, as rooms see them.
    members: Vec<Member>,
    /// Each member's `connected`, by id: every message is checked against it, so it must not
    /// cost a walk over a room of thousands.
    connected: IdMap<PlayerId, bool>,
    /// Which seats are taken, by seat number: a join takes the lowest free one.
    seats_taken: Vec<bool>,
    capacity: u16,
    timestep: FixedTimestep,
    commands: Vec<Command>,
    /// The most commands one take has found since the queue was last tidied, and the takes
    /// since then (see [`take_commands`](Self::take_commands)).
    commands_peak: usize,
    takes: u32,
    state: RoomState,
    /// Set when a call into the room panicked: what the panic said.
    crashed: Option<String>,
    stats: RoomStats,
    /// The tick of the replicated world's last snapshots.
    replicated_tick: Option<u64>,
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// A member leaves: the room's own `leave`, then its replicated world forgets the viewer
/// and empties its seat in the roster.
fn leave_room(
    room: &mut dyn Room,
    ctx: &mut RoomContext<'_>,
    player: PlayerId,
    reason: LeaveReason,
) {
    let seat = ctx.member(player).map(|member| member.seat);
    room.leave(ctx, player, reason);
    if let Some(replication) = room.replication() {
        replication.world.remove_viewer(ViewerId(player.0));
        if let Some(seat) = seat {
            replication.world.remove_member(seat.0);
        }
    }
}

impl RoomHost {
    /// Hosts `room` with `capacity` seats, ticking from `now` at the room's rate.
    pub fn new(
        id: RoomId,
        room: Box<dyn Room>,
        now: Instant,
        capacity: u16,
    ) -> Result<Self, TickRateError> {
        let timestep = FixedTimestep::new(now, room.tick_rate_hz())?;
        Ok(Self {
            id,
            room,
            members: Vec::new(),
            connected: IdMap::default(),
            seats_taken: vec![false; usize::from(capacity)],
            capacity,
            timestep,
            commands: Vec::new(),
            commands_peak: 0,
            takes: 0,
            state: RoomState::default(),
            crashed: None,
            stats: RoomStats::default(),
            replicated_tick: None,
        })
    }

    /// Calls into the room with a context for `now` and `tick`, under `catch_unwind`; false
    /// if the room has crashed (now or before), in which case `f` may not have run.
    fn invoke(
        &mut self,
        now: Instant,
        tick: u64,
        f: impl FnOnce(&mut dyn Room, &mut RoomContext<'_>),
    ) -> bool {
        if self.crashed.is_some() {
            return false;
        }
        let mut ctx = RoomContext::new(
            self.id,
            now,
            (tick, self.timestep.step()),
            &self.members,
            &mut self.commands,
            &mut self.state,
        );
        let room = self.room.as_mut();
        // The room is never called again after a panic, so state it left half-changed is
        // never observed: asserting unwind safety is sound.
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| f(room, &mut ctx)));
        if let Err(payload) = outcome {
            self.crashed = Some(panic_text(payload.as_ref()));
            return false;
        }
        true
    }

    /// Calls into the room, then applies any kicks it issued.
    fn call(&mut self, now: Instant, f: impl FnOnce(&mut dyn Room, &mut RoomContext<'_>)) {
        let issued_from = self.commands.len();
        if self.invoke(now, self.timestep.next_tick(), f) {
            self.apply_kicks(now, issued_from);
        }
    }

    /// Removes the players kicked by commands from `index` on. A kicked player's `leave`
    /// runs at once, and any kicks it issues are applied in turn. The kick commands stay
    /// queued so the runtime also disconnects those players.
    fn apply_kicks(&mut self, now: Instant, mut index: usize) {
        while index < self.commands.len() {
            let kicked = match &self.commands[index] {
                Command::Kick { player, .. } => Some(*player),
                _ => None,
            };
            index += 1;
            let Some(player) = kicked else { continue };
            let Some(seat) = self.members.iter().position(|member| member.id == player) else {
                continue;
            };
            let tick = self.timestep.next_tick();
            self.invoke(now, tick, |room, ctx| {
                leave_room(room, ctx, player, LeaveReason::Kicked);
            });
            self.unseat(seat);
        }
    }

    /// Removes the member at `index` from the roster and frees their seat.
    fn unseat(&mut self, index: usize) {
        let member = self.members.remove(index);
        self.connected.remove(&member.id);
        if let Some(taken) = self.seats_taken.get_mut(usize::from(member.seat.0)) {
            *taken = false;
        }
    }

    fn position(&self, id: PlayerId) -> Option<usize> {
        if !self.connected.contains_key(&id) {
            return None;
        }
        self.members.iter().position(|member| member.id == id)
    }

    /// Starts the room with the options it was created with (its [`Room::create`]).
    pub fn create(&mut self, now: Instant, options: &RoomOptions) -> Result<(), CreateRefused> {
        let mut verdict = Ok(());
        self.call(now, |room, ctx| verdict = room.create(ctx, options));
        match &self.crashed {
            // The panic itself is in `crashed()` for the shard to report.
            Some(_) => Err(CreateRefused("room crashed".into())),
            None => verdict,
        }
    }

    /// Seats a player in the lowest free seat, if the room has one and accepts them.
    pub fn join(&mut self, now: Instant, id: PlayerId, name: String) -> Result<Seat, JoinRefused> {
        if self.crashed.is_some() {
            return Err(JoinRefused::Crashed);
        }
        if self.state.dispose_requested {
            return Err(JoinRefused::Closed);
        }
        if self.connected.contains_key(&id) {
            return Err(JoinRefused::AlreadyMember);
        }
        let Some(free) = self.seats_taken.iter().position(|taken| !taken) else {
            return Err(JoinRefused::Full {
                capacity: self.capacity,
            });
        };
        // One of `capacity` (a u16) seats.
        let seat = Seat(free as u16);
        self.seats_taken[free] = true;
        let member = Member {
            id,
            seat,
            name,
            connected: true,
        };
        self.members.push(member.clone());
        self.connected.insert(id, true);
        let mut verdict = Ok(());
        self.call(now, |room, ctx| {
            verdict = room.join(ctx, &member);
            if verdict.is_ok()
                && let Some(replication) = room.replication()
            {
                let viewer = ViewerId(id.0);
                replication.world.add_viewer(viewer);
                replication
                    .world
                    .set_member(seat.0, viewer, &member.name, true);
            }
        });
        if self.crashed.is_some() {
            verdict = Err(JoinRefused::Crashed);
        }
        if let Err(refused) = verdict {
            if let Some(index) = self.position(id) {
                self.unseat(index);
            }
            return Err(refused);
        }
        Ok(seat)
    }

    /// The player's connection was lost; their seat is held. False for a non-member.
    pub fn disconnected(&mut self, now: Instant, id: PlayerId) -> bool {
        let Some(index) = self.position(id) else {
            return false;
        };
        self.members[index].connected = false;
        self.connected.insert(id, false);
        let member = self.members[index].clone();
        self.call(now, |room, ctx| {
            room.disconnected(ctx, id);
            if let Some(replication) = room.replication() {
                let viewer = ViewerId(id.0);
                replication
                    .world
                    .set_member(member.seat.0, viewer, &member.name, false);
            }
        });
        true
    }

    /// The player is back in their held seat; `None` if they have no seat here.
    pub fn reconnected(&mut self, now: Instant, id: PlayerId) -> Option<Seat> {
        let index = self.position(id)?;
        let member = &mut self.members[index];
        member.connected = true;
        let seat = member.seat;
        self.connected.insert(id, true);
        let name = member.name.clone();
        self.call(now, |room, ctx| {
            room.reconnected(ctx, id);
            if let Some(replication) = room.replication() {
                let viewer = ViewerId(id.0);
                // Its mirror starts empty again.
                replication.world.reset_viewer(viewer);
                replication.world.set_member(seat.0, viewer, &name, true);
            }
        });
        Some(seat)
    }

    /// The player leaves for good and frees their seat. False for a non-member.
    pub fn leave(&mut self, now: Instant, id: PlayerId, reason: LeaveReason) -> bool {
        if !self.connected.contains_key(&id) {
            return false;
        }
        self.call(now, |room, ctx| leave_room(room, ctx, id, reason));
        // The room's leave may have kicked others (not this player: it is leaving anyway).
        if let Some(index) = self.position(id) {
            self.unseat(index);
        }
        true
    }

    /// Hands a message to the room; ignored (and counted) unless the sender is a connected
    /// member.
    pub fn message(&mut self, now: Instant, from: PlayerId, channel: u8, message: Bytes) -> bool {
        if self.connected.get(&from) != Some(&true) {
            self.stats.messages_from_strangers += 1;
            return false;
        }
        self.stats.messages += 1;
        self.call(now, |room, ctx| {
            if let Some(replication) = room.replication()
                && replication.ack_channel == channel
            {
                // A refused acknowledgement is the world's to count.
                let _ = replication.world.ack(ViewerId(from.0), &message);
                return;
            }
            room.message(ctx, from, channel, message);
        });
        true
    }

    /// Passes an operator's announcement to the room.
    pub fn announce(&mut self, now: Instant, text: &str) {
        self.call(now, |room, ctx| room.announce(ctx, text));
    }

    /// Fires the timers due by `until`, each seeing the time it was due and `tick`, the
    /// index of the tick that follows them.
    fn fire_timers(&mut self, until: Instant, tick: u64) {
        while let Some((due, timer)) = self.state.timers.pop_due(until) {
            self.stats.timers_fired += 1;
            let issued_from = self.commands.len();
            if self.invoke(due, tick, |room, ctx| room.timer(ctx, timer)) {
                self.apply_kicks(due, issued_from);
            }
            if self.is_closing() {
                return;
            }
        }
    }

    /// Runs the timers and ticks due by `now` in the order they fall due, each seeing the
    /// time it was due. A room that crashes or asks to be disposed of runs nothing more.
    pub fn advance(&mut self, now: Instant) -> Due {
        let first = self.timestep.next_tick();
        let due = self.timestep.advance(now);
        let last = self.timestep.next_tick();
        for tick in (last - u64::from(due.ticks))..last {
            let due_at = self.timestep.due_at(tick);
            self.fire_timers(due_at, tick);
            if self.is_closing() {
                break;
            }
            let issued_from = self.commands.len();
            if self.invoke(due_at, tick, |room, ctx| room.tick(ctx)) {
                self.apply_kicks(due_at, issued_from);
            }
        }
        if !self.is_closing() {
            self.fire_timers(now, last);
        }
        debug_assert!(last - first == u64::from(due.ticks) + due.skipped);
        self.stats.ticks += u64::from(due.ticks);
        self.stats.ticks_skipped += due.skipped;
        due
    }

    /// The room's [`publish`](Room::publish) phase, after the ticks of a turn.
    /// Then, for a room with a replicated world, every connected member's snapshot of the
    /// tick (once per tick, however often this runs).
    pub fn publish(&mut self, now: Instant) {
        let tick = self.timestep.next_tick();
        let rate = self.timestep.rate_hz();
        let replicate = self.replicated_tick != Some(tick);
        self.replicated_tick = Some(tick);
        self.call(now, |room, ctx| {
            room.publish(ctx);
            if !replicate {
                return;
            }
            if let Some(replication) = room.replication() {
                let channel = replication.state_channel;
                // Snapshot ticks wrap at 2^32 (2.3 years at 60 Hz); mirrors compare them so.
                replication
                    .world
                    .send_snapshots(tick as u32, rate, &mut |viewer, bytes| {
                        let to = PlayerId(viewer.0);
                        if ctx.member(to).is_some_and(|member| member.connected) {
                            ctx.send(to, channel, Bytes::copy_from_slice(bytes));
                        }
                    });
            }
        });
    }

    /// What the room's replicated world sent since the last call, by kind and field (see
    /// `tickwire_replicate::ReplicationProfile`); `None` for a room without one, or when it
    /// sent nothing since.
    pub fn take_replication_profile(&mut self, now: Instant) -> Option<ReplicationProfile> {
        let mut taken = None;
        let tick = self.timestep.next_tick();
        self.invoke(now, tick, |room, _| {
            taken = room
                .replication()
                .and_then(|replication| replication.world.take_profile());
        });
        taken
    }

    /// Every member leaves with [`LeaveReason::Disposed`] (their `leave` runs; the runtime
    /// disconnects them), then the room's [`dispose`](Room::dispose) runs: its last call.
    /// A crashed room is called no more: its members are only unseated. The players who
    /// were seated, for the runtime to disconnect.
    pub fn dispose(&mut self, now: Instant) -> Vec<PlayerId> {
        let seated: Vec<PlayerId> = self.members.iter().map(|member| member.id).collect();
        for player in &seated {
            self.leave(now, *player, LeaveReason::Disposed);
        }
        self.call(now, |room, ctx| room.dispose(ctx));
        seated
    }

    /// Sets the lock from outside the room (an operator); the room sees it in
    /// [`RoomContext::is_locked`].
    pub fn set_locked(&mut self, locked: bool) {
        if self.state.listing.locked != locked {
            self.state.listing.locked = locked;
            self.state.listing_changed = true;
        }
    }

    /// The room's listing if it changed since the last call, to copy to the matchmaker.
    pub fn take_listing_change(&mut self) -> Option<&Listing> {
        std::mem::take(&mut self.state.listing_changed).then_some(&self.state.listing)
    }

    /// The first message that did not encode since the last call, to log, and how many
    /// did not.
    pub fn take_unencodable(&mut self) -> Option<(EncodeError, u64)> {
        self.state.unencodable.take()
    }

    /// The room's lock, label and metadata.
    pub fn listing(&self) -> &Listing {
        &self.state.listing
    }

    /// What a panic in the room's code said, once it crashed.
    pub fn crashed(&self) -> Option<&str> {
        self.crashed.as_deref()
    }

    /// Whether the room crashed or asked to be disposed of: it takes no one and runs
    /// nothing more, and its shard disposes of it.
    pub fn is_closing(&self) -> bool {
        self.crashed.is_some() || self.state.dispose_requested
    }

    /// Whether the calls since the shard last routed this room left it anything to carry
    /// out: commands, a listing change, a crash or a request to be disposed of. A room
    /// that took a message and said nothing (an input kept for its next tick, a relay's
    /// message held for it) needs no routing.
    pub fn has_output(&self) -> bool {
        !self.commands.is_empty()
            || self.state.listing_changed
            || self.state.unencodable.is_some()
            || self.is_closing()
    }

    /// How long the room lives once its last player left, if the room chose
    /// ([`RoomContext::set_auto_dispose`]): `Some(None)` for never.
    pub fn auto_dispose(&self) -> Option<Option<Duration>> {
        self.state.auto_dispose
    }

    /// When the room's next tick is due (its timers aside).
    pub fn next_tick_at(&self) -> Instant {
        self.timestep.next_deadline()
    }

    /// When the next tick or timer is due.
    pub fn next_deadline(&self) -> Instant {
        let tick = self.timestep.next_deadline();
        self.state
            .timers
            .next_due()
            .map_or(tick, |timer| timer.min(tick))
    }

    /// Whether a timer is pending.
    pub fn is_timer_pending(&self, timer: TimerId) -> bool {
        self.state.timers.is_pending(timer)
    }

    /// The commands issued since the last call, for the runtime to carry out.
    ///
    /// Every [`TIDY_TAKES`] takes the queue gives back what it grew beyond four times the
    /// most one take found meanwhile: a burst within one call (a tick that tells a crowd
    /// something) grows it for a moment, and it kept that peak for the room's life. A
    /// steady room never reallocates.
    pub fn take_commands(&mut self) -> std::vec::Drain<'_, Command> {
        self.commands_peak = self.commands_peak.max(self.commands.len());
        self.takes += 1;
        if self.takes >= TIDY_TAKES {
            let keep = (2 * self.commands_peak).max(KEPT_COMMANDS);
            if self.commands.capacity() > 2 * keep {
                self.commands.shrink_to(keep);
            }
            self.takes = 0;
            self.commands_peak = 0;
        }
        self.commands.drain(..)
    }

    /// Everyone seated, connected or not.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The room's tick rate.
    pub fn tick_rate_hz(&self) -> u32 {
        self.timestep.rate_hz()
    }

    /// Seats in the room.
    pub fn capacity(&self) -> u16 {
        self.capacity
    }

    /// Counters of the room's life.
    pub fn stats(&self) -> RoomStats {
        RoomStats {
            messages_malformed: self.state.messages_malformed,
            messages_unencodable: self.state.messages_unencodable,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_of_commands_is_given_back_and_a_steady_room_never_reallocates() {
        let now = Instant::now();
        let mut host = RoomHost::new(RoomId(1), Box::new(Probe::default()), now, 4).unwrap();
        let command = || Command::Broadcast {
            channel: 0,
            message: Bytes::from_static(b"x"),
            except: None,
        };
        host.commands.extend((0..10_000).map(|_| command()));
        assert_eq!(host.take_commands().count(), 10_000);
        // The window that saw the burst keeps it; the next quiet one gives it back.
        for _ in 0..2 * TIDY_TAKES {
            host.commands.push(command());
            host.take_commands().for_each(drop);
        }
        let capacity = host.commands.capacity();
        assert!(
            capacity <= 2 * KEPT_COMMANDS,
            "the burst's peak is kept: {capacity}"
        );
        let steady = |host: &mut RoomHost| {
            for _ in 0..2 * TIDY_TAKES {
                host.commands.extend((0..100).map(|_| command()));
                host.take_commands().for_each(drop);
            }
            host.commands.capacity()
        };
        let settled = steady(&mut host);
        assert_eq!(steady(&mut host), settled, "a steady room reallocated");
    }

    /// Records what happens to it, for tests.
    #[derive(Default)]
    struct Probe {
        log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        refuse: Option<PlayerId>,
        kick_on_message: bool,
    }

    impl Room for Probe {
        fn tick_rate_hz(&self) -> u32 {
            20
        }

        fn join(&mut self, ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
            self.log
                .lock()
                .unwrap()
                .push(format!("join {} seat {}", member.id.0, member.seat.0));
            if self.refuse == Some(member.id) {
                return Err(JoinRefused::game("banned"));
            }
            ctx.broadcast_except(member.id, 0, Bytes::from_static(b"welcome"));
            Ok(())
        }

        fn leave(&mut self, _ctx: &mut RoomContext<'_>, player: PlayerId, reason: LeaveReason) {
            self.log
                .lock()
                .unwrap()
                .push(format!("leave {} {reason:?}", player.0));
        }

        fn message(
            &mut self,
            ctx: &mut RoomContext<'_>,
            from: PlayerId,
            _channel: u8,
            _message: Bytes,
        ) {
            if self.kick_on_message {
                ctx.kick(from, "no talking");
            }
        }

        fn tick(&mut self, ctx: &mut RoomContext<'_>) {
            self.log
                .lock()
                .unwrap()
                .push(format!("tick {}", ctx.tick()));
        }
    }

    fn host(probe: Probe, capacity: u16) -> (RoomHost, Instant) {
        let now = Instant::now();
        (
            RoomHost::new(RoomId(1), Box::new(probe), now, capacity).unwrap(),
            now,
        )
    }

    #[test]
    fn seats_fill_from_the_lowest_and_are_reused() {
        let (mut host, now) = host(Probe::default(), 3);
        assert_eq!(host.join(now, PlayerId(10), "a".into()), Ok(Seat(0)));
        assert_eq!(host.join(now, PlayerId(11), "b".into()), Ok(Seat(1)));
        assert_eq!(host.join(now, PlayerId(12), "c".into()), Ok(Seat(2)));
        assert_eq!(
            host.join(now, PlayerId(13), "d".into()),
            Err(JoinRefused::Full { capacity: 3 })
        );
        assert_eq!(
            host.join(now, PlayerId(11), "b".into()),
            Err(JoinRefused::AlreadyMember)
        );
        assert!(host.leave(now, PlayerId(11), LeaveReason::Left));
        assert_eq!(host.join(now, PlayerId(13), "d".into()), Ok(Seat(1)));
    }

    #[test]
    fn a_refused_join_leaves_no_trace() {
        let probe = Probe {
            refuse: Some(PlayerId(2)),
            ..Probe::default()
        };
        let (mut host, now) = host(probe, 4);
        host.join(now, PlayerId(1), "a".into()).unwrap();
        assert!(matches!(
            host.join(now, PlayerId(2), "b".into()),
            Err(JoinRefused::Game(_))
        ));
        assert_eq!(host.members().len(), 1);
        assert!(
            !host.message(now, PlayerId(2), 0, Bytes::new()),
            "not a member"
        );
        // The seat it was given back is the next one's.
        assert_eq!(host.join(now, PlayerId(3), "c".into()), Ok(Seat(1)));
    }

    #[test]
    fn a_held_seat_survives_a_reconnection_and_strangers_are_ignored() {
        let (mut host, now) = host(Probe::default(), 4);
        host.join(now, PlayerId(1), "a".into()).unwrap();
        host.join(now, PlayerId(2), "b".into()).unwrap();
        assert!(host.disconnected(now, PlayerId(1)));
        assert!(
            !host.message(now, PlayerId(1), 0, Bytes::new()),
            "a dropped player is not heard"
        );
        assert!(!host.message(now, PlayerId(9), 0, Bytes::new()));
        assert_eq!(host.stats().messages_from_strangers, 2);
        assert_eq!(host.reconnected(now, PlayerId(1)), Some(Seat(0)));
        assert!(host.message(now, PlayerId(1), 0, Bytes::new()));
        assert_eq!(host.reconnected(now, PlayerId(9)), None);
    }

    #[test]
    fn kicks_take_effect_at_once_and_reach_the_runtime() {
        let probe = Probe {
            kick_on_message: true,
            ..Probe::default()
        };
        let log = probe.log.clone();
        let (mut host, now) = host(probe, 4);
        host.join(now, PlayerId(1), "a".into()).unwrap();
        host.take_commands().for_each(drop);
        host.message(now, PlayerId(1), 0, Bytes::from_static(b"hi"));
        assert!(host.members().is_empty());
        assert!(!host.message(now, PlayerId(1), 0, Bytes::new()), "gone");
        assert!(
            log.lock()
                .unwrap()
                .iter()
                .any(|line| line == "leave 1 Kicked")
        );
        let commands: Vec<_> = host.take_commands().collect();
        assert!(matches!(
            &commands[..],
            [Command::Kick {
                player: PlayerId(1),
                ..
            }]
        ));
        // The kicked player's seat is free again, and so is their id.
        assert_eq!(host.join(now, PlayerId(1), "a".into()), Ok(Seat(0)));
    }

    #[test]
    fn a_full_room_refuses_and_a_leave_makes_room() {
        let (mut host, now) = host(Probe::default(), 2);
        host.join(now, PlayerId(1), "a".into()).unwrap();
        host.join(now, PlayerId(2), "b".into()).unwrap();
        assert_eq!(
            host.join(now, PlayerId(3), "c".into()),
            Err(JoinRefused::Full { capacity: 2 })
        );
        assert_eq!(
            host.join(now, PlayerId(2), "b".into()),
            Err(JoinRefused::AlreadyMember)
        );
        assert!(host.leave(now, PlayerId(1), LeaveReason::Left));
        assert!(
            !host.leave(now, PlayerId(1), LeaveReason::Left),
            "left already"
        );
        assert_eq!(host.join(now, PlayerId(3), "c".into()), Ok(Seat(0)));
        let seats: Vec<_> = host.members().iter().map(|m| (m.id, m.seat)).collect();
        assert_eq!(seats, [(PlayerId(2), Seat(1)), (PlayerId(3), Seat(0))]);
    }

    #[test]
    fn ticks_run_on_schedule_and_see_their_due_time() {
        let probe = Probe::default();
        let log = probe.log.clone();
        let (mut host, start) = host(probe, 4);
        assert_eq!(host.advance(start).ticks, 1);
        assert_eq!(host.advance(start + Duration::from_millis(149)).ticks, 2);
        assert_eq!(host.next_deadline(), start + Duration::from_millis(150));
        assert_eq!(host.stats().ticks, 3);
        let ticks: Vec<_> = log
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line.starts_with("tick"))
            .cloned()
            .collect();
        assert_eq!(ticks, ["tick 0", "tick 1", "tick 2"]);
    }
}
