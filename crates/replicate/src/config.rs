//! What a world's replication may spend per member, and how members are interested.

use crate::encode::{HEADER_BITS, SECTION_BITS};

/// Most entities one member's view may hold: the snapshot's counts are 8-bit.
pub const MAX_VIEW: usize = 255;

/// Most snapshots a mirror keeps as possible baselines, so the most a world may look back.
pub const MAX_HISTORY: usize = 32;

/// Which entities a member is sent, before its cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interest {
    /// Every entity its audience allows.
    Everything,
    /// Entities within `radius` of the member's focus ([`ServerWorld::set_focus`]), found
    /// through a grid of `cell_size` cells; entities without a position are always in
    /// range. One already in view stays until it is 10% beyond the radius, so the edge does
    /// not flicker.
    ///
    /// [`ServerWorld::set_focus`]: crate::ServerWorld::set_focus
    Radius {
        /// Metres (or the game's unit).
        radius: f32,
        /// Side of a grid cell; about the radius / 2 to the radius.
        cell_size: f32,
    },
}

/// Replication tunables. Public fields with [`Default`]; [`ReplicationConfig::validate`]
/// refuses what the engine or the wire format cannot do.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicationConfig {
    /// Most bytes one snapshot may take. Default 1,100: with the protocol's headers it fits
    /// one 1,200-byte datagram.
    pub packet_budget: usize,
    /// Most bytes per second of snapshots to one member. Default 48,000.
    pub bandwidth_bytes_per_sec: u32,
    /// Most entities in one member's view, nearest first. Default 64, at most 255.
    pub max_entities: usize,
    /// Snapshots remembered per member as possible baselines. Default 32, 2 to 32: a member
    /// whose acknowledgements stop for that many snapshots is sent a full state.
    pub history: usize,
    /// Who sees what. Default [`Interest::Everything`].
    pub interest: Interest,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        Self {
            packet_budget: 1100,
            bandwidth_bytes_per_sec: 48_000,
            max_entities: 64,
            history: MAX_HISTORY,
            interest: Interest::Everything,
        }
    }
}

/// A [`ReplicationConfig`] field the engine cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("replication config: {field} {value}: {reason}")]
pub struct ConfigError {
    /// The field.
    pub field: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: &'static str,
}

impl ReplicationConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let error = |field, value: &dyn ToString, reason| ConfigError {
            field,
            value: value.to_string(),
            reason,
        };
        if !(1..=MAX_VIEW).contains(&self.max_entities) {
            return Err(error("max_entities", &self.max_entities, "must be 1..=255"));
        }
        // The header, both sections' counts and a destroy for every entity in view always fit.
        let fixed = HEADER_BITS + 2 * SECTION_BITS + 1;
        let floor = (fixed + self.max_entities * crate::gaps::ID_BITS_MAX).div_ceil(8);
        if self.packet_budget < floor || self.packet_budget > 65_000 {
            return Err(error(
                "packet_budget",
                &self.packet_budget,
                "must hold the header and a destroy per entity in view (11 + 2.25 × max_entities bytes), and at most 65,000",
            ));
        }
        if self.bandwidth_bytes_per_sec == 0 {
            return Err(error(
                "bandwidth_bytes_per_sec",
                &self.bandwidth_bytes_per_sec,
                "must be positive",
            ));
        }
        if !(2..=MAX_HISTORY).contains(&self.history) {
            return Err(error("history", &self.history, "must be 2..=32"));
        }
        if let Interest::Radius { radius, cell_size } = self.interest {
            if !(radius.is_finite() && radius > 0.0) {
                return Err(error("interest radius", &radius, "must be positive"));
            }
            if !(cell_size.is_finite() && cell_size > 0.0) {
                return Err(error("interest cell_size", &cell_size, "must be positive"));
            }
            if radius * 1.1 / cell_size > 32.0 {
                return Err(error(
                    "interest cell_size",
                    &cell_size,
                    "the radius spans more than 32 cells; use larger cells",
                ));
            }
        }
        Ok(())
    }
}
