//! What the server remembers of the snapshots it sent: [`History`] (per recipient, the
//! views its last snapshots left it with, each a possible baseline) and [`PastStates`]
//! (per room, the states of its last captures, which those views point into).
//!
//! A view's entity is almost always *fresh*: sent or unchanged, so the client holds its
//! state of the snapshot's capture. Such an entry is its id alone (2 bytes), its state read
//! from the room's copy of that capture, which every recipient shares. Only an entity that
//! waited (changed, but left out by the byte budget) keeps an older state, so only it is
//! held whole (a 12-byte [`Record`]). In rooms of 30 the history had been 1.5 KB of a
//! player's heap at 12 bytes an entry; the room's copies of its captures cost 8 bytes per
//! player per capture held.

use tickwire_proto::prefetch::prefetch;

use super::{EntityId, PackedState};

/// An entity as one snapshot left it in the client's view, in 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Record {
    pub(super) id: EntityId,
    pub(super) state: PackedState,
    /// The low 16 bits of the tick whose state this is: the priority accumulator's zero.
    /// An age past 65,535 ticks (18 minutes at 60 Hz) wraps and only lowers a long-starved
    /// update's priority for one round.
    pub(super) refreshed: u16,
}

impl Record {
    pub(super) fn new(id: EntityId, state: impl Into<PackedState>, tick: u32) -> Self {
        Self {
            id,
            state: state.into(),
            refreshed: tick as u16,
        }
    }

    pub(super) fn state(&self) -> super::EntityState {
        self.state.into()
    }

    /// Ticks since the state was current, as of `tick`.
    pub(super) fn age(&self, tick: u32) -> u16 {
        (tick as u16).wrapping_sub(self.refreshed)
    }
}

/// One stored view: the entities a snapshot left in the client's view, in id order.
#[derive(Debug, Clone, Copy)]
pub(super) struct View<'a> {
    /// The snapshot's tick.
    pub(super) tick: u32,
    /// The capture it was encoded from ([`PastStates`]).
    pub(super) capture: u32,
    /// Every entity of the view.
    pub(super) ids: &'a [EntityId],
    /// Those that waited, whole, in id order; the others hold the capture's state.
    pub(super) waits: &'a [Record],
}

impl<'a> View<'a> {
    /// Each entity as the view left it, in id order; `states` are the view's capture's
    /// ([`PastStates::states`]), which hold every fresh entity (it was in that capture).
    pub(super) fn records(self, states: &'a [PackedState]) -> impl Iterator<Item = Record> + 'a {
        let mut waits = self.waits.iter().peekable();
        self.ids
            .iter()
            .map(move |&id| match waits.next_if(|wait| wait.id == id) {
                Some(wait) => *wait,
                None => Record::new(id, states[usize::from(id)], self.tick),
            })
    }

    /// Appends [`records`](Self::records) to `out`, without the merge when no entity
    /// waited, as in most snapshots.
    pub(super) fn read_into(self, states: &[PackedState], out: &mut Vec<Record>) {
        if self.waits.is_empty() {
            let fresh = |&id: &EntityId| Record::new(id, states[usize::from(id)], self.tick);
            out.extend(self.ids.iter().map(fresh));
        } else {
            out.extend(self.records(states));
        }
    }
}

/// A recipient's last snapshots, as the views they left it with: possible baselines.
///
/// Two blocks, `slots × stride` ids and `slots × wait_stride` waiting records, all powers
/// of two sized to what the recipient needs, so a player allocates a handful of times in
/// its life:
/// - the stride is the largest view this recipient has had: one who sees three others
///   holds 4 ids per slot rather than `max_entities`;
/// - the wait stride is the most entities one of its snapshots left waiting, 0 for a
///   player whose snapshots always fit;
/// - the slots hold the last snapshots sent, one each, whatever ticks they went out on: at
///   one snapshot every third tick (seed 003's plaza) 4 slots reach back 12 ticks, not 4.
///   They start at [`INITIAL_SLOTS`], double (up to the configured history) when an ack
///   arrives for a snapshot already overwritten that the client may still hold, and halve
///   again once the acks need a quarter of them ([`History::review`]): a player whose acks
///   come back within 4 snapshots never pays for the half-second a slow link needs, nor
///   for a slow spell past.
#[derive(Debug, Clone)]
pub(super) struct History {
    /// Each slot's tick, if it holds one, its capture and its counts; one vector, so an
    /// encode's lookup touches one line besides the view.
    heads: Vec<SlotHead>,
    /// The slot the next snapshot's view goes to: the oldest held.
    next: usize,
    pub(super) stride: usize,
    ids: Vec<EntityId>,
    pub(super) wait_stride: usize,
    waits: Vec<Record>,
    /// The configured history: the most slots this may grow to, and the most ticks back a
    /// baseline may be (the client's decoder holds views by tick, that many).
    pub(super) max_slots: usize,
    /// Snapshots stored since the last [`History::review`].
    stored_since_review: usize,
    /// The most slots an ack needed since then: its snapshot and every newer one.
    needed: usize,
    /// The [`PastStates::owner`] whose captures the views point into (0 before any).
    pub(super) owner: u64,
}

/// What a history slot holds.
#[derive(Debug, Clone, Copy, Default)]
struct SlotHead {
    tick: Option<u32>,
    capture: u32,
    /// Entities in the view (at most [`MAX_VIEW`](super::MAX_VIEW)).
    len: u16,
    /// Of them, those that waited.
    waits: u16,
}

/// Slots a recipient's history starts with, and the fewest it shrinks back to: acks that
/// ride a player's inputs come back within 4 snapshots on a good link (at 60 Hz with an
/// input every 40 ms and a 10 ms round trip, 2 to 4).
const INITIAL_SLOTS: usize = 4;

/// Snapshots between two reviews of the history's size (about 2 s at 60 Hz).
const REVIEW_EVERY: usize = 128;

impl History {
    pub(super) fn new(max_slots: usize) -> Self {
        let slots = INITIAL_SLOTS.min(max_slots);
        Self {
            heads: vec![SlotHead::default(); slots],
            next: 0,
            stride: 0,
            ids: Vec::new(),
            wait_stride: 0,
            waits: Vec::new(),
            max_slots,
            stored_since_review: 0,
            needed: 0,
            owner: 0,
        }
    }

    /// Grows to hold at least `slots` (a power of two, at most the configured history),
    /// keeping every held view, oldest first, so the next store overwrites none of them.
    pub(super) fn grow_slots(&mut self, slots: usize) {
        let slots = slots.next_power_of_two().min(self.max_slots);
        if slots > self.slots() {
            self.resize_slots(slots);
        }
    }

    /// Notes that an ack found its view in `slot`: the slots must hold it and every newer
    /// snapshot, so that many at least until the next review.
    pub(super) fn note_ack(&mut self, slot: usize) {
        let slots = self.slots();
        let newer = (self.next + slots - 1 - slot) % slots;
        self.needed = self.needed.max(newer + 1);
    }

    /// Every [`REVIEW_EVERY`] snapshots: half the slots when the acks of the stretch needed
    /// at most a quarter of them (never below [`INITIAL_SLOTS`]), so a history grown by a
    /// burst of late acks (a crowd's arrival, a slow spell) gives the memory back once the
    /// acks are prompt again; the halved history still holds twice what they needed.
    fn review(&mut self) {
        let slots = self.slots();
        if slots > INITIAL_SLOTS && self.needed * 4 <= slots {
            self.resize_slots(slots / 2);
        }
        self.needed = 0;
        self.stored_since_review = 0;
    }

    /// Moves to `slots` slots, keeping the newest held views that fit, oldest first.
    fn resize_slots(&mut self, slots: usize) {
        let old = self.slots();
        let mut heads = vec![SlotHead::default(); slots];
        let mut ids = vec![0; slots * self.stride];
        let mut waits = vec![Record::default(); slots * self.wait_stride];
        let held = self.heads.iter().filter(|head| head.tick.is_some()).count();
        let oldest_first = (0..old).map(|k| (self.next + k) % old);
        let kept = oldest_first
            .filter(|&from| self.heads[from].tick.is_some())
            .skip(held.saturating_sub(slots));
        let mut to = 0;
        for from in kept {
            let head = self.heads[from];
            copy_slot(&self.ids, &mut ids, self.stride, from, to, head.len);
            copy_slot(
                &self.waits,
                &mut waits,
                self.wait_stride,
                from,
                to,
                head.waits,
            );
            heads[to] = head;
            to += 1;
        }
        self.heads = heads;
        self.ids = ids;
        self.waits = waits;
        self.next = to % slots;
    }

    pub(super) fn slots(&self) -> usize {
        self.heads.len()
    }

    /// The slot holding `tick`'s view: the heads are a few words, newest searched first
    /// (acks trail the newest snapshot by a round trip).
    pub(super) fn slot(&self, tick: u32) -> Option<usize> {
        let slots = self.slots();
        (1..=slots)
            .map(|back| (self.next + slots - back) % slots)
            .find(|&slot| self.heads[slot].tick == Some(tick))
    }

    /// The view `tick`'s snapshot left, while the history holds it.
    pub(super) fn view(&self, tick: u32) -> Option<View<'_>> {
        self.view_in(self.slot(tick)?, tick)
    }

    /// The same, looked for first in `hint` (where the ack found it).
    pub(super) fn view_hinted(&self, hint: usize, tick: u32) -> Option<View<'_>> {
        self.view_in(hint, tick).or_else(|| self.view(tick))
    }

    fn view_in(&self, slot: usize, tick: u32) -> Option<View<'_>> {
        let head = self.heads.get(slot)?;
        (head.tick == Some(tick)).then(|| {
            let ids = slot * self.stride;
            let waits = slot * self.wait_stride;
            View {
                tick,
                capture: head.capture,
                ids: &self.ids[ids..ids + usize::from(head.len)],
                waits: &self.waits[waits..waits + usize::from(head.waits)],
            }
        })
    }

    /// Stores the view `tick`'s snapshot (encoded from `capture`) left: `ids` in id order,
    /// of which `waits` (also in id order) kept an older state than the capture's.
    pub(super) fn store(&mut self, tick: u32, capture: u32, ids: &[EntityId], waits: &[Record]) {
        if ids.len() > self.stride {
            self.stride = regrow(&mut self.ids, &self.heads, self.stride, ids.len(), |h| {
                h.len
            });
        }
        if waits.len() > self.wait_stride {
            self.wait_stride = regrow(
                &mut self.waits,
                &self.heads,
                self.wait_stride,
                waits.len(),
                |h| h.waits,
            );
        }
        let slots = self.slots();
        let newest = (self.next + slots - 1) % slots;
        // A second snapshot on one tick replaces the first: an ack names a tick, so only
        // one view per tick can be the client's.
        let slot = if self.heads[newest].tick == Some(tick) {
            newest
        } else {
            let slot = self.next;
            self.next = (slot + 1) % slots;
            self.stored_since_review += 1;
            slot
        };
        let start = slot * self.stride;
        self.ids[start..start + ids.len()].copy_from_slice(ids);
        let start = slot * self.wait_stride;
        self.waits[start..start + waits.len()].copy_from_slice(waits);
        self.heads[slot] = SlotHead {
            tick: Some(tick),
            capture,
            // Views are at most `MAX_VIEW` (255) entities.
            len: ids.len() as u16,
            waits: waits.len() as u16,
        };
        if self.stored_since_review >= REVIEW_EVERY {
            self.review();
        }
    }

    pub(super) fn forget(&mut self) {
        self.heads.fill(SlotHead::default());
        self.next = 0;
    }

    /// Asks the CPU to start loading `slot`'s view (and its head), so that the encode
    /// which reads it next finds it in cache.
    pub(super) fn prefetch(&self, slot: usize) {
        if self.stride == 0 {
            return;
        }
        if let Some(head) = self.heads.get(slot) {
            prefetch(head);
        }
        if let Some(ids) = self.ids.get(slot * self.stride..(slot + 1) * self.stride) {
            prefetch(ids);
        }
    }
}

/// Copies slot `from`'s first `len` items of `source` to slot `to` of `target`, both
/// `stride` items a slot.
fn copy_slot<T: Copy>(
    source: &[T],
    target: &mut [T],
    stride: usize,
    from: usize,
    to: usize,
    len: u16,
) {
    let len = usize::from(len);
    target[to * stride..to * stride + len]
        .copy_from_slice(&source[from * stride..from * stride + len]);
}

/// Regrows `block` (one `stride`-item part per head) to the power of two that holds
/// `needed` a slot, keeping each slot's items (as many as `held` of its head says);
/// returns the new stride.
fn regrow<T: Copy + Default>(
    block: &mut Vec<T>,
    heads: &[SlotHead],
    stride: usize,
    needed: usize,
    held: impl Fn(&SlotHead) -> u16,
) -> usize {
    let new_stride = needed.next_power_of_two();
    let mut grown = vec![T::default(); heads.len() * new_stride];
    for (slot, head) in heads.iter().enumerate() {
        let len = usize::from(held(head));
        grown[slot * new_stride..slot * new_stride + len]
            .copy_from_slice(&block[slot * stride..slot * stride + len]);
    }
    *block = grown;
    new_stride
}

/// The states of a room's last captures, by capture number: the fresh entries of every
/// recipient's [`History`] point into them. Holds as many captures as the longest history
/// asks ([`PastStates::hold`]), and gives back what a burst of late acks had asked for once
/// the histories have shrunk ([`PastStates::review`]); a baseline whose capture has gone is
/// not used (the snapshot is then a full one), as one past the configured history is not.
#[derive(Debug, Clone)]
pub(super) struct PastStates {
    owner: Owner,
    /// Capture `n` is at `n % len` while held; the length is a power of two.
    frames: Vec<PastFrame>,
    /// The newest capture's number.
    newest: u32,
    /// The most captures [`hold`](Self::hold) asked for since the last review.
    asked: usize,
    /// Captures pushed since then.
    pushed_since_review: usize,
}

/// Tells one [`PastStates`] from every other, a clone's included (0 is none): a history
/// points into the captures of the encoder that stored it, and only into those.
#[derive(Debug, PartialEq, Eq)]
struct Owner(u64);

impl Owner {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl Clone for Owner {
    /// A clone's captures go their own way from here: a new owner.
    fn clone(&self) -> Self {
        Self::new()
    }
}

#[derive(Debug, Clone, Default)]
struct PastFrame {
    capture: Option<u32>,
    /// By entity id, as the capture's [`Frame`](super::Frame) had them.
    states: Vec<PackedState>,
}

/// Captures held at first, and the fewest held: twice a new recipient's [`INITIAL_SLOTS`].
const INITIAL_CAPTURES: usize = 2 * INITIAL_SLOTS;

/// Captures between two reviews of how many are held: twice a history's review period, so
/// the histories have shrunk before the captures they pointed into are given back.
const CAPTURES_PER_REVIEW: usize = 2 * REVIEW_EVERY;

impl PastStates {
    pub(super) fn new() -> Self {
        Self {
            owner: Owner::new(),
            frames: vec![PastFrame::default(); INITIAL_CAPTURES],
            newest: 0,
            asked: 0,
            pushed_since_review: 0,
        }
    }

    /// What tells these captures from every other encoder's.
    pub(super) fn owner(&self) -> u64 {
        self.owner.0
    }

    /// Keeps `states` as the next capture; returns its number. Allocates only while the
    /// room's crowd grows past every earlier capture's.
    pub(super) fn push(&mut self, states: &[PackedState]) -> u32 {
        self.newest = self.newest.wrapping_add(1);
        let depth = self.frames.len();
        let frame = &mut self.frames[self.newest as usize % depth];
        frame.capture = Some(self.newest);
        frame.states.clear();
        frame.states.extend_from_slice(states);
        self.pushed_since_review += 1;
        if self.pushed_since_review >= CAPTURES_PER_REVIEW {
            self.review();
        }
        self.newest
    }

    /// Capture `capture`'s states, while held.
    pub(super) fn states(&self, capture: u32) -> Option<&[PackedState]> {
        let frame = &self.frames[capture as usize % self.frames.len()];
        (frame.capture == Some(capture)).then_some(frame.states.as_slice())
    }

    /// Holds at least the last `captures` captures from now on (a recipient's history of
    /// that many snapshots reaches back that far when it gets one each capture).
    pub(super) fn hold(&mut self, captures: usize) {
        self.asked = self.asked.max(captures);
        let depth = captures.next_power_of_two();
        if depth > self.frames.len() {
            self.keep_newest(depth);
        }
    }

    /// Every [`CAPTURES_PER_REVIEW`] captures: down to what the period's histories asked
    /// for (never below [`INITIAL_CAPTURES`]), the newest kept.
    fn review(&mut self) {
        let depth = self.asked.next_power_of_two().max(INITIAL_CAPTURES);
        if depth < self.frames.len() {
            self.keep_newest(depth);
        }
        self.asked = 0;
        self.pushed_since_review = 0;
    }

    /// Moves to `depth` (a power of two) captures, keeping the newest that fit.
    fn keep_newest(&mut self, depth: usize) {
        let mut frames = vec![PastFrame::default(); depth];
        for frame in self.frames.drain(..) {
            if let Some(capture) = frame.capture
                && (self.newest.wrapping_sub(capture) as usize) < depth
            {
                frames[capture as usize % depth] = frame;
            }
        }
        self.frames = frames;
    }

    /// Captures held.
    pub(super) fn depth(&self) -> usize {
        self.frames.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(x: u16) -> PackedState {
        PackedState {
            x,
            ..PackedState::default()
        }
    }

    #[test]
    fn a_view_reads_fresh_entries_from_its_capture_and_waits_whole() {
        let mut past = PastStates::new();
        let capture = past.push(&[state(10), state(11), state(12), state(13)]);
        let mut history = History::new(32);
        let waited = Record::new(2, state(99), 3);
        history.store(7, capture, &[0, 2, 3], &[waited]);
        let view = history.view(7).unwrap();
        let records: Vec<Record> = view.records(past.states(capture).unwrap()).collect();
        assert_eq!(
            records,
            [
                Record::new(0, state(10), 7),
                waited,
                Record::new(3, state(13), 7)
            ]
        );
    }

    #[test]
    fn past_states_keep_what_they_hold_when_they_grow_and_drop_the_oldest() {
        let mut past = PastStates::new();
        let first = past.push(&[state(1)]);
        for n in 0..INITIAL_CAPTURES - 1 {
            past.push(&[state(n as u16)]);
        }
        assert_eq!(past.states(first), Some(&[state(1)][..]));
        past.hold(3 * INITIAL_CAPTURES);
        assert_eq!(past.depth(), 4 * INITIAL_CAPTURES);
        assert_eq!(past.states(first), Some(&[state(1)][..]), "kept on growing");
        for _ in 0..4 * INITIAL_CAPTURES {
            past.push(&[]);
        }
        assert_eq!(
            past.states(first),
            None,
            "overwritten once as old as the depth"
        );
    }

    #[test]
    fn past_states_asked_for_by_a_burst_are_given_back_at_a_review() {
        let mut past = PastStates::new();
        // A review period with a burst of late acks: the histories ask for 64.
        for _ in 0..CAPTURES_PER_REVIEW {
            past.hold(64);
            past.push(&[]);
        }
        assert_eq!(past.depth(), 64, "kept while asked for");
        // The next period's histories ask for 8 at most: 64 held until its end.
        for n in 0..CAPTURES_PER_REVIEW - 1 {
            past.hold(8);
            past.push(&[state(n as u16)]);
        }
        assert_eq!(past.depth(), 64);
        past.hold(8);
        let newest = past.push(&[state(7)]);
        assert_eq!(past.depth(), INITIAL_CAPTURES, "given back at the review");
        assert_eq!(
            past.states(newest),
            Some(&[state(7)][..]),
            "the newest kept"
        );
        let oldest_kept = newest - INITIAL_CAPTURES as u32 + 1;
        assert!(past.states(oldest_kept).is_some());
        assert_eq!(past.states(oldest_kept - 1), None);
        // A steady demand keeps what it asks for.
        for _ in 0..2 * CAPTURES_PER_REVIEW {
            past.hold(INITIAL_CAPTURES);
            past.push(&[]);
        }
        assert_eq!(past.depth(), INITIAL_CAPTURES);
    }

    #[test]
    fn growing_a_history_keeps_its_views() {
        let mut past = PastStates::new();
        let mut history = History::new(32);
        let capture = past.push(&[state(0); 40]);
        history.store(1, capture, &[1, 2], &[]);
        // A larger view and more waits than any before: both blocks regrow.
        let ids: Vec<EntityId> = (0..20).collect();
        let waits: Vec<Record> = (0..5).map(|id| Record::new(id, state(5), 0)).collect();
        history.store(2, capture, &ids, &waits);
        history.grow_slots(8);
        assert_eq!(
            (history.stride, history.wait_stride, history.slots()),
            (32, 8, 8)
        );
        assert_eq!(history.view(1).unwrap().ids, [1, 2]);
        let view = history.view(2).unwrap();
        assert_eq!((view.ids, view.waits), (&ids[..], &waits[..]));
    }
}
