//! `tickwire bench <scenario>`: commands that measure and print figures.

pub mod relay;
pub mod udp;
pub mod wire;
