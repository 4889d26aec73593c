//! Room kinds that ship with the server.
//!
//! | kind | what |
//! |---|---|
//! | [`relay::RelayRoom`] | forwards every message to the other members on its channel |
//! | [`chat::ChatRoom`] | validated chat lines with names, join and leave notices |

pub mod chat;
pub mod relay;
