//! The bots' measurement against a fake relay with known behaviour: a virtual clock, an
//! open-loop schedule like the engine's, every message stamped and decoded as on the wire,
//! a relay that forwards each message to every other member after an injected delay and
//! drops a known, seeded fraction. The reported counts and percentiles must be what was
//! injected.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tickwire_bots::scenario::{RelayScenario, Scenario};
use tickwire_bots::stamp::Stamp;
use tickwire_bots::tally::{Seen, SeqWindow, Tally, Window};

const MS: u64 = 1_000_000;

/// The injected delay of the `n`th forwarded copy: 90 % take 2 ms, 8 % 10 ms, 2 % 50 ms.
fn injected_delay_ns(n: u64) -> u64 {
    match n % 100 {
        0..90 => 2 * MS,
        90..98 => 10 * MS,
        _ => 50 * MS,
    }
}

struct Outcome {
    tally: Tally,
    sent_in_window: u64,
    dropped_in_window: u64,
    reordered: u64,
}

/// One room of `members` bots at `rate_hz` for `seconds`, measured over the middle part.
fn run_fake_relay(
    members: u32,
    scenario: &RelayScenario,
    drop_fraction: f64,
    seed: u64,
) -> Outcome {
    let period_ns = (1e9 / scenario.rate_hz()) as u64;
    let window = Window {
        start_ns: 1_000 * MS,
        end_ns: 6_000 * MS,
    };
    let end_of_sends_ns = 7_000 * MS;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tally = Tally::new(window);
    let mut seen = vec![vec![SeqWindow::default(); members as usize]; members as usize];
    let mut sent_in_window = 0;
    let mut dropped_in_window = 0;
    let mut reordered = 0;
    let mut copies = 0u64;
    for sender in 0..members {
        let mut scheduled_ns = rng.random_range(0..period_ns);
        let mut seq = 0;
        while scheduled_ns < end_of_sends_ns {
            seq += 1;
            let mut message = Vec::new();
            Stamp {
                bot: sender,
                seq,
                scheduled_ns,
            }
            .write(&mut message);
            scenario.write_body(&mut rng, &mut message);
            let recipients = scenario.recipients(members as usize) as u32;
            tally.on_sent(scheduled_ns, recipients);
            if window.contains(scheduled_ns) {
                sent_in_window += 1;
            }
            // The fake relay: every other member, after the injected delay, or dropped.
            for receiver in (0..members).filter(|receiver| *receiver != sender) {
                copies += 1;
                if rng.random_bool(drop_fraction) {
                    if window.contains(scheduled_ns) {
                        dropped_in_window += 1;
                    }
                    continue;
                }
                let arrived_ns = scheduled_ns + injected_delay_ns(copies);
                let stamp = Stamp::read(&message).expect("a stamped message");
                let observed = seen[receiver as usize][stamp.bot as usize].observe(stamp.seq);
                if observed == Seen::Reordered {
                    reordered += 1;
                }
                tally.on_arrival(stamp.scheduled_ns, arrived_ns, observed);
            }
            scheduled_ns += period_ns;
        }
    }
    Outcome {
        tally,
        sent_in_window,
        dropped_in_window,
        reordered,
    }
}

fn assert_ms(what: &str, measured: f64, injected: f64) {
    // HDR histograms at 3 significant digits: within 0.1 %.
    assert!(
        (measured - injected).abs() <= injected * 0.001 + 0.001,
        "{what}: measured {measured} ms, injected {injected} ms"
    );
}

#[test]
fn counts_and_percentiles_match_what_a_lossy_relay_injected() {
    let scenario = RelayScenario::sfs();
    let outcome = run_fake_relay(16, &scenario, 0.05, 1);
    let summary = outcome.tally.summary();
    assert_eq!(summary.sent, outcome.sent_in_window);
    // 16 bots × 30/s × 5 s, give or take a message per bot at the window's edges.
    assert!((2_384..=2_416).contains(&summary.sent), "{summary:?}");
    assert_eq!(summary.expected, outcome.sent_in_window * 15);
    assert_eq!(
        summary.delivered,
        summary.expected - outcome.dropped_in_window,
        "every copy not dropped is delivered, once"
    );
    assert_eq!(summary.lost, outcome.dropped_in_window);
    let loss = summary.lost as f64 / summary.expected as f64;
    assert!((0.04..0.06).contains(&loss), "loss {loss}, injected 0.05");
    assert_eq!(summary.duplicates, 0);
    assert_eq!(summary.reordered, outcome.reordered);
    assert_ms("p50", summary.latency_p50_ms, 2.0);
    assert_ms("p90", summary.latency_p90_ms, 10.0);
    assert_ms("p99", summary.latency_p99_ms, 50.0);
    assert_ms("max", summary.latency_max_ms, 50.0);
}

#[test]
fn a_lossless_reliable_relay_reports_delivered_equal_to_expected() {
    let outcome = run_fake_relay(300, &RelayScenario::nettest(), 0.0, 4);
    let summary = outcome.tally.summary();
    // 300 bots × 1/s × 5 s, each line to 299 others.
    assert_eq!(summary.sent, 1_500);
    assert_eq!(summary.expected, 1_500 * 299);
    assert_eq!(summary.delivered, summary.expected);
    assert_eq!(summary.lost, 0);
    assert_ms("p50", summary.latency_p50_ms, 2.0);
}

#[test]
fn merged_group_tallies_add_up() {
    let a = run_fake_relay(8, &RelayScenario::sfs(), 0.1, 7).tally;
    let b = run_fake_relay(8, &RelayScenario::sfs(), 0.1, 8).tally;
    let mut merged = a.clone();
    merged.merge(&b);
    let (a, b, merged) = (a.summary(), b.summary(), merged.summary());
    assert_eq!(merged.expected, a.expected + b.expected);
    assert_eq!(merged.delivered, a.delivered + b.delivered);
    assert_ms("max", merged.latency_max_ms, 50.0);
}
