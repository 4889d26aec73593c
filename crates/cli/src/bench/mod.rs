//! `tickwire bench <scenario>`: commands that measure and print figures.

pub mod cluster;
pub mod colyseus;
pub mod load;
pub mod raw;
pub mod relay;
pub mod soak;
pub mod udp;
pub mod wire;
