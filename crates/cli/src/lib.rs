//! The library half of the `tickwire` binary: each subcommand's work, kept apart from
//! argument parsing so benchmarks and tests can call it directly.
//!
//! | module | subcommand |
//! |---|---|
//! | [`bench::wire`] | `tickwire bench wire` |
//! | [`bench::load`] | `tickwire bench sfs|nettest|hobo|teleport|arena` |
//! | [`bots`] | `tickwire bots` |
//! | [`bench::udp`] | `tickwire bench udp` |
//! | [`serve`] | `tickwire serve` |
//! | [`agones`] | `tickwire serve` as an Agones GameServer (`[agones]`) |
//! | [`health`] | `tickwire healthcheck` (the container image's HEALTHCHECK) |
//! | [`web`] | `tickwire serve`'s browser client at `/` and the map it draws |
//! | [`codegen`] | `tickwire codegen ts` |

pub mod agones;
pub mod arena;
pub mod bench;
pub mod bots;
pub mod codegen;
pub mod health;
pub mod serve;
pub mod web;
