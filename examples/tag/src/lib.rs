//! Tag: up to eight runners on a 40 m field; whoever is "it" chases the others, and touching
//! one makes them it. The room simulates at 30 Hz and keeps the runners in a replicated
//! world, which the server sends each player as deltas (docs/GUIDE.md, "A real-time game").

use std::collections::HashMap;

use bytes::Bytes;
use tickwire_room::replicate::{EntityId, ServerWorld};
use tickwire_room::room::{
    JoinRefused, LeaveReason, Member, PlayerId, Replication, Room, RoomContext,
};
use tickwire_wire::{Decode, Describe, Encode, Replicate};

/// The field's side, metres.
pub const FIELD: f32 = 40.0;
/// Ticks per second.
pub const TICK_RATE: u32 = 30;
/// Where players send their [`Steer`]: unreliable, the newest wins anyway.
pub const INPUT_CHANNEL: u8 = 1;
/// Metres per second; whoever is it runs 10% faster.
pub const SPEED: f32 = 6.0;
/// How close "it" must come to tag, metres.
pub const REACH: f32 = 1.0;
/// Ticks after a tag before the new it may tag back (1 s).
pub const TAG_BACK_TICKS: u32 = 30;

/// A runner, as every player sees it.
#[derive(Debug, Clone, PartialEq, Replicate)]
pub struct Runner {
    /// Where it is on the field.
    #[replicate(position)]
    #[wire(quantize(min = 0.0, max = 40.0, resolution = 0.01))]
    pub position: [f32; 2],
    /// The seat of the player running it: their name is in the roster.
    #[wire(min = 0, max = 7)]
    pub seat: u8,
    /// Chasing.
    pub it: bool,
    /// Times tagged.
    #[wire(varint)]
    pub tagged: u32,
}

/// Where a player wants to run: a direction, each axis in -1..=1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Encode, Decode, Describe)]
pub struct Steer {
    /// Rightward.
    #[wire(quantize(min = -1.0, max = 1.0, resolution = 0.01))]
    pub x: f32,
    /// Downward (screen coordinates).
    #[wire(quantize(min = -1.0, max = 1.0, resolution = 0.01))]
    pub y: f32,
}

/// The room: the runners and what each player last asked for.
#[derive(Default)]
pub struct Tag {
    world: ServerWorld<Runner>,
    runners: HashMap<PlayerId, (EntityId, Steer)>,
    /// Ticks until "it" may tag.
    tag_back: u32,
}

impl Tag {
    fn it(&self) -> Option<(EntityId, [f32; 2])> {
        let (id, runner) = self.world.iter().find(|(_, runner)| runner.it)?;
        Some((id, runner.position))
    }

    /// Whoever "it" touches (once it may tag again) becomes it; returns who.
    fn tag(&mut self) -> Option<EntityId> {
        self.tag_back = self.tag_back.saturating_sub(1);
        let (it, [x, y]) = self.it().filter(|_| self.tag_back == 0)?;
        let near = |r: &Runner| (r.position[0] - x).hypot(r.position[1] - y) <= REACH;
        let touched = self.world.iter().find(|&(id, r)| id != it && near(r));
        let caught = touched.map(|(id, _)| id)?;
        for (id, runner) in self.world.iter_mut() {
            runner.it = id == caught;
            runner.tagged += u32::from(id == caught);
        }
        self.tag_back = TAG_BACK_TICKS;
        Some(caught)
    }
}

impl Room for Tag {
    fn tick_rate_hz(&self) -> u32 {
        TICK_RATE
    }

    fn join(&mut self, _: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        let seat = member.seat.0 as u8;
        let (column, row) = (f32::from(seat % 4), f32::from(seat / 4));
        let runner = Runner {
            position: [5.0 + 10.0 * column, 10.0 + 20.0 * row],
            seat,
            it: self.it().is_none(),
            tagged: 0,
        };
        let id = self.world.spawn(runner).map_err(|_| JoinRefused::Closed)?;
        self.runners.insert(member.id, (id, Steer::default()));
        Ok(())
    }

    fn disconnected(&mut self, _: &mut RoomContext<'_>, player: PlayerId) {
        if let Some((_, steer)) = self.runners.get_mut(&player) {
            *steer = Steer::default();
        }
    }

    fn leave(&mut self, _: &mut RoomContext<'_>, player: PlayerId, _: LeaveReason) {
        let Some((id, _)) = self.runners.remove(&player) else {
            return;
        };
        let was_it = self.world.despawn(id).is_some_and(|runner| runner.it);
        if let Some((_, next)) = self.world.iter_mut().next() {
            next.it |= was_it;
        }
    }

    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, channel: u8, bytes: Bytes) {
        if channel == INPUT_CHANNEL
            && let Some(steer) = ctx.decode::<Steer>(&bytes)
            && let Some((_, wanted)) = self.runners.get_mut(&from)
        {
            *wanted = steer;
        }
    }

    fn tick(&mut self, _: &mut RoomContext<'_>) {
        for (id, steer) in self.runners.values() {
            let Some(runner) = self.world.get_mut(*id) else {
                continue;
            };
            let speed = if runner.it { SPEED * 1.1 } else { SPEED } / TICK_RATE as f32;
            let scale = speed / steer.x.hypot(steer.y).max(1.0);
            for (axis, toward) in [steer.x, steer.y].into_iter().enumerate() {
                runner.position[axis] = (runner.position[axis] + toward * scale).clamp(0.0, FIELD);
            }
        }
        self.tag();
    }

    fn replication(&mut self) -> Option<Replication<'_>> {
        Some(Replication::new(&mut self.world))
    }
}
