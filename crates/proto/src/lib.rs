//! The tickwire protocol without I/O: connect tokens, the handshake, packet encryption,
//! acks, channels and fragmentation. Time comes in as an argument and datagrams go in and out
//! as byte slices, so everything here is tested with a virtual clock and a simulated link.

pub mod reliable;
