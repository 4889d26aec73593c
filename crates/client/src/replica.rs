//! [`Replica`]: a room's replicated state on this client, fed from a link. Snapshots arrive
//! on the state channel; each one applied is acknowledged on the ack channel, so the server
//! sends the next as a delta against it (`docs/REPLICATION.md`).

use bytes::Bytes;
use tickwire_replicate::{Mirror, MirrorError, Replicate, ack_message};

use crate::link::{Link, SendError};

/// What [`Replica::handle`] made of a message.
#[derive(Debug)]
pub enum Handled {
    /// Not a snapshot: the message is the game's.
    NotState,
    /// A snapshot, applied and acknowledged: its tick.
    Applied(u32),
    /// A snapshot the mirror refused (stale, or its baseline is gone); the mirror is as it
    /// was and the next snapshot repairs it.
    Refused(MirrorError),
    /// A snapshot applied whose acknowledgement could not be sent (the link ended).
    Unacknowledged(u32, SendError),
}

/// The mirror of a room's `#[derive(Replicate)]` world, and the channels its server uses
/// (those of `tickwire_room::room::Replication`: 2 for both by default).
#[derive(Debug, Clone)]
pub struct Replica<E> {
    mirror: Mirror<E>,
    state_channel: u8,
    ack_channel: u8,
}

impl<E: Replicate> Default for Replica<E> {
    fn default() -> Self {
        Self::new(2, 2)
    }
}

impl<E: Replicate> Replica<E> {
    /// An empty replica reading snapshots on `state_channel` and acknowledging on
    /// `ack_channel`.
    pub fn new(state_channel: u8, ack_channel: u8) -> Self {
        Self {
            mirror: Mirror::new(),
            state_channel,
            ack_channel,
        }
    }

    /// Hands it a message the link received: a snapshot is applied and acknowledged; any
    /// other message is left to the game.
    pub fn handle(&mut self, link: &mut Link, channel: u8, message: &[u8]) -> Handled {
        if channel != self.state_channel {
            return Handled::NotState;
        }
        match self.mirror.apply(message) {
            Ok(tick) => {
                let ack = Bytes::copy_from_slice(&ack_message(tick));
                match link.send(self.ack_channel, ack) {
                    Ok(()) => Handled::Applied(tick),
                    Err(error) => Handled::Unacknowledged(tick, error),
                }
            }
            Err(error) => Handled::Refused(error),
        }
    }

    /// The state as the newest snapshot left it: entities, roster, changes.
    pub fn mirror(&self) -> &Mirror<E> {
        &self.mirror
    }

    /// Forgets everything: after a reconnection the server sends the full state again.
    pub fn reset(&mut self) {
        self.mirror.clear();
    }
}
