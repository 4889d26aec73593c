//! tickwire's load tool: thousands of bots in one process, each a real client of a
//! tickwire server (matchmaking, then the UDP protocol or WebSocket), sending on an
//! open-loop schedule and measuring every delivery into HDR histograms.
//!
//! ```no_run
//! use std::sync::Arc;
//! use tickwire_bots::engine::{self, Quiet, RunConfig};
//! use tickwire_bots::scenario::RelayScenario;
//!
//! let config = RunConfig { server: "http://127.0.0.1:8080".into(), ..RunConfig::default() };
//! let report = engine::run(&config, Arc::new(RelayScenario::nettest()), &mut Quiet)?;
//! assert_eq!(report.delivery.delivered, report.delivery.expected);
//! # Ok::<(), tickwire_bots::engine::RunError>(())
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`engine::run`], [`engine::RunConfig`] | connect the bots, run the schedule, report |
//! | [`engine::RunReport`] | the figures: deliveries, latency, RTT, packets, CPU |
//! | [`engine::Observer`], [`engine::Live`] | phases and live counters for a display |
//! | [`scenario::Scenario`], [`scenario::BotLogic`] | what the bots do, bot by bot |
//! | [`scenario::RelayScenario`] | relay rooms: `sfs` (seed 001), `nettest` (seed 004) |
//! | [`scenario::ArenaScenario`] | arena players: `hobo` (seed 000), `teleport` (seed 003), `arena` |
//! | [`plan::Plan`] | the run's schedule and rooms, as every bot sees it |
//! | [`meter::Meter`], [`meter::ArenaFigures`] | what a group measures; the arena's figures |
//! | [`tally::Tally`], [`tally::SeqWindow`] | expected versus delivered, latency histogram |
//! | [`stamp::Stamp`] | sender, sequence and scheduled time at the head of each message |
//! | [`proc_stat`] | a process's CPU time and RSS from `/proc` |
//!
//! The engine's design (threads, epoll and batched I/O, per-bot memory) is described in
//! [`engine`].

#![warn(missing_docs)]

pub mod engine;
pub mod meter;
pub mod plan;
pub mod proc_stat;
pub mod scenario;
pub mod stamp;
pub mod tally;
