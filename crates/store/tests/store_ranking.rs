//! Rank queries against a brute-force ranking of random (seeded) data with many ties, on
//! every backend.

mod common;

use common::{Server, TestDb};
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use tickwire_store::{MatchResult, Outcome, StatEvent};

const PLAYERS: u64 = 300;

async fn agrees_with_brute_force(db: &TestDb, seed: u64) {
    let store = &db.store;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // A few matches each, scores in a narrow range (negative ones too): ties everywhere.
    let mut totals = vec![0i64; PLAYERS as usize + 1];
    let mut events = Vec::new();
    for m in 0..600 {
        let mut outcomes: Vec<Outcome> = Vec::new();
        for _ in 0..rng.random_range(1..6) {
            let player = rng.random_range(1..=PLAYERS);
            if outcomes.iter().any(|o| o.player == player) {
                continue;
            }
            let score = rng.random_range(-3..8);
            totals[player as usize] += score;
            outcomes.push(Outcome {
                player,
                kills: 0,
                deaths: 0,
                score,
                play_time_ms: 1,
            });
        }
        events.push(StatEvent::MatchEnded(MatchResult {
            room: format!("r{m}"),
            started_ms: m,
            ended_ms: m + 1,
            outcomes,
        }));
    }
    // Every player exists, even one who never played (score 0).
    for player in 1..=PLAYERS {
        events.push(StatEvent::PlayerSeen {
            player,
            name: format!("p{player}"),
            at_ms: 0,
        });
    }
    for chunk in events.chunks(97) {
        store.apply(chunk).await.unwrap();
    }

    // Brute force: leaderboard order is score descending, then id; rank is 1 + the number
    // of players with a strictly higher score.
    let mut order: Vec<u64> = (1..=PLAYERS).collect();
    order.sort_by_key(|&p| (-totals[p as usize], p));
    let rank = |p: u64| {
        1 + order
            .iter()
            .filter(|&&q| totals[q as usize] > totals[p as usize])
            .count() as u64
    };
    let expected: Vec<(u64, u64, i64)> = order
        .iter()
        .map(|&p| (p, rank(p), totals[p as usize]))
        .collect();
    let distinct: std::collections::HashSet<i64> = totals[1..].iter().copied().collect();
    assert!(distinct.len() < PLAYERS as usize / 3, "the data has ties");

    let full: Vec<(u64, u64, i64)> = store
        .leaderboard(1000)
        .await
        .unwrap()
        .iter()
        .map(|e| (e.player, e.rank, e.stats.score))
        .collect();
    assert_eq!(full, expected, "full leaderboard differs from brute force");
    let top: Vec<(u64, u64, i64)> = store
        .leaderboard(17)
        .await
        .unwrap()
        .iter()
        .map(|e| (e.player, e.rank, e.stats.score))
        .collect();
    assert_eq!(top, expected[..17], "top 17 differs");

    for player in 1..=PLAYERS {
        assert_eq!(
            store.rank(player).await.unwrap(),
            Some(rank(player)),
            "rank of player {player} (score {})",
            totals[player as usize]
        );
    }
    for _ in 0..60 {
        let player = rng.random_range(1..=PLAYERS);
        let radius = rng.random_range(0..6u32);
        let at = order.iter().position(|&p| p == player).unwrap();
        let from = at.saturating_sub(radius as usize);
        let to = (at + radius as usize + 1).min(order.len());
        let got: Vec<(u64, u64, i64)> = store
            .around(player, radius)
            .await
            .unwrap()
            .unwrap()
            .iter()
            .map(|e| (e.player, e.rank, e.stats.score))
            .collect();
        assert_eq!(
            got,
            expected[from..to],
            "around player {player}, radius {radius}"
        );
    }
}

#[tokio::test]
async fn ranks_agree_with_brute_force_on_sqlite() {
    for seed in [1, 2] {
        let db = TestDb::sqlite().await;
        agrees_with_brute_force(&db, seed).await;
        db.cleanup().await;
    }
}

#[tokio::test]
async fn ranks_agree_with_brute_force_on_postgres() {
    let test = "ranks_agree_with_brute_force_on_postgres";
    let Some(db) = TestDb::server(Server::Postgres, test).await else {
        return;
    };
    agrees_with_brute_force(&db, 3).await;
    db.cleanup().await;
}

#[tokio::test]
async fn ranks_agree_with_brute_force_on_mysql() {
    let test = "ranks_agree_with_brute_force_on_mysql";
    let Some(db) = TestDb::server(Server::MySql, test).await else {
        return;
    };
    agrees_with_brute_force(&db, 4).await;
    db.cleanup().await;
}
