//! What the world remembers per member: the views its last snapshots left it with (each a
//! possible baseline), the one it acknowledged last, its focus and its bandwidth.
//!
//! Memory is bounded by the configuration, whatever the member does: `history` views of at
//! most `max_entities` entity records and 255 roster records, plus the acknowledged one. A
//! member that acknowledges nothing keeps its last acknowledged view as baseline until
//! `history` snapshots have gone out since; after that its mirror may no longer hold it, and
//! the member is sent the full state (no baseline) until an acknowledgement arrives again.

use tickwire_wire::{BitReader, DecodeError};

use crate::EntityId;
use crate::roster::Member;

/// An entity (or roster seat) as a snapshot left it in the member's mirror.
#[derive(Debug, Clone)]
pub(crate) struct Record<T> {
    pub(crate) id: EntityId,
    /// The state the mirror holds: what was sent (fields the member is not sent at their
    /// defaults).
    pub(crate) state: T,
    /// The tick that state was current on: the priority accumulator's zero.
    pub(crate) refreshed: u32,
}

/// One section of one snapshot sent: the view it leaves the mirror with, in id order.
#[derive(Debug, Clone)]
struct Sent<T> {
    tick: u32,
    /// Snapshots sent to this member before this one.
    serial: u64,
    records: Vec<Record<T>>,
}

const NO_ACK: u64 = u64::MAX;

/// The views of one section (entities or roster) the member's last snapshots left it with.
#[derive(Debug)]
pub(crate) struct History<T> {
    /// The last snapshots sent, a ring of at most `history`.
    sent: Vec<Sent<T>>,
    /// Where the next goes once the ring is full.
    next: usize,
    /// The newest acknowledged (`serial` of [`NO_ACK`] for none).
    acked: Sent<T>,
}

impl<T: Clone> History<T> {
    fn new() -> Self {
        Self {
            sent: Vec::new(),
            next: 0,
            acked: Sent {
                tick: 0,
                serial: NO_ACK,
                records: Vec::new(),
            },
        }
    }

    fn reset(&mut self) {
        self.sent.clear();
        self.next = 0;
        self.acked.serial = NO_ACK;
        self.acked.records.clear();
    }

    /// The acknowledged view's records.
    pub(crate) fn baseline(&self) -> &[Record<T>] {
        &self.acked.records
    }

    /// The serial of the snapshot of `tick`, if its view is held.
    fn serial_of(&self, tick: u32) -> Option<u64> {
        self.sent
            .iter()
            .find(|sent| sent.tick == tick)
            .map(|sent| sent.serial)
    }

    /// Makes the view sent as `serial` the acknowledged one; false if it is not held.
    fn ack(&mut self, serial: u64) -> bool {
        let Some(sent) = self.sent.iter().find(|sent| sent.serial == serial) else {
            return false;
        };
        self.acked.tick = sent.tick;
        self.acked.serial = sent.serial;
        self.acked.records.clone_from(&sent.records);
        true
    }

    /// Stores a view, taken from `records` (which gets the overwritten slot's vector back,
    /// emptied, for its allocation).
    fn store(&mut self, tick: u32, serial: u64, records: &mut Vec<Record<T>>, history: usize) {
        let sent = Sent {
            tick,
            serial,
            records: std::mem::take(records),
        };
        if self.sent.len() < history {
            self.sent.push(sent);
        } else {
            self.next %= self.sent.len();
            let old = std::mem::replace(&mut self.sent[self.next], sent);
            *records = old.records;
            records.clear();
            self.next += 1;
        }
    }

    fn records_held(&self) -> usize {
        self.sent
            .iter()
            .map(|sent| sent.records.len())
            .sum::<usize>()
            + self.acked.records.len()
    }
}

/// Why an acknowledgement was refused; the world counts each.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AckError {
    /// The bytes are not an acknowledgement (4 bytes, a tick).
    #[error("malformed acknowledgement: {0}")]
    Malformed(DecodeError),
    /// No snapshot of that tick is held for the member: never sent, or long gone.
    #[error("acknowledgement of tick {0}, which this member was not sent or no longer holds")]
    Unknown(u32),
    /// The member is not a viewer of this world.
    #[error("acknowledgement from a member who is not a viewer")]
    NotViewer,
}

/// A member's replication state.
#[derive(Debug)]
pub(crate) struct Viewer<E> {
    pub(crate) focus: Option<[f32; 2]>,
    /// Snapshots sent so far.
    serial: u64,
    pub(crate) entities: History<E>,
    pub(crate) roster: History<Member>,
    /// Bytes it may still be sent; refilled per tick.
    pub(crate) tokens: i64,
    pub(crate) last_tick: Option<u32>,
}

impl<E: Clone> Viewer<E> {
    pub(crate) fn new(tokens: i64) -> Self {
        Self {
            focus: None,
            serial: 0,
            entities: History::new(),
            roster: History::new(),
            tokens,
            last_tick: None,
        }
    }

    /// Forgets everything sent: the next snapshot is the full state (a reconnect).
    pub(crate) fn reset(&mut self) {
        self.entities.reset();
        self.roster.reset();
    }

    /// How far back the baseline for a snapshot of `tick` is, if there is one: the
    /// acknowledged view, if the member's mirror still holds it (at most `history` sent
    /// since) and it is at most 255 ticks back.
    pub(crate) fn baseline_age(&self, tick: u32, history: usize) -> Option<u32> {
        let acked = &self.entities.acked;
        let held = acked.serial != NO_ACK && self.serial - acked.serial <= history as u64;
        let age = tick.wrapping_sub(acked.tick);
        (held && (1..=255).contains(&age)).then_some(age)
    }

    /// Notes the acknowledgement of `tick`: its views become the baseline if they are newer
    /// than the ones acknowledged before. A repeated or older acknowledgement changes nothing.
    pub(crate) fn ack(&mut self, tick: u32) -> Result<(), AckError> {
        let Some(serial) = self.entities.serial_of(tick) else {
            return Err(AckError::Unknown(tick));
        };
        let acked = self.entities.acked.serial;
        if acked != NO_ACK && serial <= acked {
            return Ok(());
        }
        // Both sections store every snapshot, so both hold it.
        self.entities.ack(serial);
        self.roster.ack(serial);
        Ok(())
    }

    /// Stores the views a snapshot of `tick` leaves the mirror with.
    pub(crate) fn store(
        &mut self,
        tick: u32,
        entities: &mut Vec<Record<E>>,
        roster: &mut Vec<Record<Member>>,
        history: usize,
    ) {
        let serial = self.serial;
        self.serial += 1;
        self.entities.store(tick, serial, entities, history);
        self.roster.store(tick, serial, roster, history);
    }

    /// Records held, over every stored view: for tests of the bound.
    pub(crate) fn records_held(&self) -> usize {
        self.entities.records_held() + self.roster.records_held()
    }
}

/// An acknowledgement's bytes: the tick of the snapshot received, 32 bits.
pub fn ack_message(tick: u32) -> [u8; 4] {
    tick.to_le_bytes()
}

/// Reads an acknowledgement.
pub fn parse_ack(bytes: &[u8]) -> Result<u32, AckError> {
    let mut reader = BitReader::new(bytes);
    let tick = reader.read_bits(32).map_err(AckError::Malformed)?;
    reader.finish().map_err(AckError::Malformed)?;
    Ok(tick)
}
