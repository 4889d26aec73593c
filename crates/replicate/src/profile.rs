//! What a world's snapshots cost, by what they carry: bytes per kind of entity and per field,
//! the roster's, and the framing around them (headers, counts, ids, kinds, field masks), so a
//! game's developer sees what their state costs (`/metrics`, the admin page).
//!
//! Measuring every field of every entity sent would cost as much again as writing it; one
//! send in [`PROFILE_EVERY`] is measured, exactly, and counted that many times over, so the
//! figures are estimates whose error shrinks with time.

use tickwire_wire::replicate::{FieldMask, Replicate};
use tickwire_wire::{BitCounter, BitWrite};

/// One [`ServerWorld::snapshots`](crate::ServerWorld::snapshots) call in this many is profiled.
pub const PROFILE_EVERY: u64 = 8;

/// Bytes spent on one kind (estimated: see the module's documentation).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KindProfile {
    /// The kind's name (its struct's).
    pub kind: &'static str,
    /// Its entities' ids, kinds and field masks.
    pub framing_bytes: f64,
    /// Each field's values, in field order.
    pub fields: Vec<(&'static str, f64)>,
}

impl KindProfile {
    fn of(kind: tickwire_wire::replicate::KindLayout) -> Self {
        Self {
            kind: kind.name,
            framing_bytes: 0.0,
            fields: kind.fields.iter().map(|field| (field.name, 0.0)).collect(),
        }
    }

    /// Every byte it accounts for.
    pub fn total_bytes(&self) -> f64 {
        self.framing_bytes + self.fields.iter().map(|(_, bytes)| bytes).sum::<f64>()
    }

    fn merge(&mut self, other: &Self) {
        self.framing_bytes += other.framing_bytes;
        for ((_, bytes), (_, more)) in self.fields.iter_mut().zip(&other.fields) {
            *bytes += more;
        }
    }

    fn clear(&mut self) {
        self.framing_bytes = 0.0;
        for (_, bytes) in &mut self.fields {
            *bytes = 0.0;
        }
    }
}

/// Bytes a world's snapshots spent since the profile was last taken.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplicationProfile {
    /// Per kind of the world's entities, in kind order.
    pub kinds: Vec<KindProfile>,
    /// The roster's entries.
    pub roster: KindProfile,
    /// Headers, section counts and destroys.
    pub overhead_bytes: f64,
    /// Snapshots written (all of them, not only those measured).
    pub snapshots: u64,
}

impl ReplicationProfile {
    pub(crate) fn new<E: Replicate>() -> Self {
        let roster = crate::Member::layout()
            .into_iter()
            .next()
            .map(KindProfile::of);
        Self {
            kinds: E::layout().into_iter().map(KindProfile::of).collect(),
            roster: roster.unwrap_or_default(),
            overhead_bytes: 0.0,
            snapshots: 0,
        }
    }

    /// Every byte it accounts for.
    pub fn total_bytes(&self) -> f64 {
        self.overhead_bytes
            + self.roster.total_bytes()
            + self.kinds.iter().map(KindProfile::total_bytes).sum::<f64>()
    }

    /// Adds `other`'s bytes (a profile of the same types: another room of the same kind).
    pub fn merge(&mut self, other: &Self) {
        if self.kinds.len() != other.kinds.len() {
            *self = other.clone();
            return;
        }
        for (kind, more) in self.kinds.iter_mut().zip(&other.kinds) {
            kind.merge(more);
        }
        self.roster.merge(&other.roster);
        self.overhead_bytes += other.overhead_bytes;
        self.snapshots += other.snapshots;
    }

    /// This profile's figures, and zero in their place.
    pub(crate) fn take(&mut self) -> Self {
        let taken = self.clone();
        for kind in &mut self.kinds {
            kind.clear();
        }
        self.roster.clear();
        self.overhead_bytes = 0.0;
        self.snapshots = 0;
        taken
    }
}

/// What one measured section adds: called per entity written.
pub(crate) fn add_entity<T: Replicate>(
    profile: &mut KindProfile,
    state: &T,
    mask: FieldMask,
    framing_bits: usize,
) {
    let scale = PROFILE_EVERY as f64 / 8.0;
    profile.framing_bytes += framing_bits as f64 * scale;
    let mut rest = mask;
    while rest != 0 {
        let field = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        let mut counter = BitCounter::default();
        if state.encode_fields(1 << field, &mut counter).is_ok()
            && let Some((_, bytes)) = profile.fields.get_mut(field)
        {
            *bytes += counter.bits_written() as f64 * scale;
        }
    }
}

/// The overhead of one measured snapshot of `bits`, of which `accounted` were entities'.
pub(crate) fn add_overhead(profile: &mut ReplicationProfile, bits: usize, accounted: f64) {
    let scale = PROFILE_EVERY as f64 / 8.0;
    profile.overhead_bytes += (bits as f64 * scale - accounted).max(0.0);
}
