//! The HTTP routes, driven with tower's `oneshot` (no socket).

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::TestDb;
use http_body_util::BodyExt as _;
use serde_json::Value;
use tickwire_store::{MatchResult, Outcome, StatEvent, http};
use tower::ServiceExt as _;

async fn get(db: &TestDb, uri: &str) -> (StatusCode, Value) {
    let response = http::router(db.store.clone())
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{uri}: body is not JSON ({e}): {bytes:?}"));
    (status, body)
}

async fn seeded() -> TestDb {
    let db = TestDb::sqlite().await;
    let mut events = Vec::new();
    for player in 1..=5u64 {
        events.push(StatEvent::PlayerSeen {
            player,
            name: format!("p{player}"),
            at_ms: 0,
        });
    }
    events.push(StatEvent::MatchEnded(MatchResult {
        room: "arena-1".into(),
        started_ms: 0,
        ended_ms: 60_000,
        outcomes: (1..=5u64)
            .map(|player| Outcome {
                player,
                kills: player as u32,
                deaths: 1,
                score: 10 * player as i64,
                play_time_ms: 60_000,
            })
            .collect(),
    }));
    db.store.apply(&events).await.unwrap();
    db
}

#[tokio::test]
async fn leaderboard_player_and_matches_answer_json() {
    let db = seeded().await;
    let (status, body) = get(&db, "/api/leaderboard?limit=3").await;
    assert_eq!(status, StatusCode::OK);
    let players: Vec<u64> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["player"].as_u64().unwrap())
        .collect();
    assert_eq!(players, [5, 4, 3]);
    assert_eq!(body[0]["rank"], 1);
    assert_eq!(body[0]["stats"]["score"], 50);

    let (status, body) = get(&db, "/api/leaderboard").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body.as_array().unwrap().len(),
        5,
        "default limit covers all five"
    );

    let (status, body) = get(&db, "/api/players/2").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["name"], "p2");
    assert_eq!(body["rank"], 4);
    assert_eq!(body["stats"]["kills"], 2);

    let (status, body) = get(&db, "/api/players/2/matches?limit=10").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0]["room"], "arena-1");
    assert_eq!(body[0]["players"], 5);
    assert_eq!(body[0]["score"], 20);

    let (status, body) = get(&db, "/api/players/3/around?radius=1").await;
    assert_eq!(status, StatusCode::OK);
    let players: Vec<u64> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["player"].as_u64().unwrap())
        .collect();
    assert_eq!(players, [4, 3, 2]);
    db.cleanup().await;
}

#[tokio::test]
async fn bad_parameters_are_400_and_unknown_players_404() {
    let db = seeded().await;
    for (uri, message) in [
        (
            "/api/leaderboard?limit=0",
            "limit \"0\" is not an integer from 1 to 1000",
        ),
        (
            "/api/leaderboard?limit=1001",
            "limit \"1001\" is not an integer from 1 to 1000",
        ),
        (
            "/api/leaderboard?limit=ten",
            "limit \"ten\" is not an integer from 1 to 1000",
        ),
        (
            "/api/leaderboard?limit=",
            "limit \"\" is not an integer from 1 to 1000",
        ),
        (
            "/api/players/abc",
            "player id \"abc\" is not an integer from 0 to 9223372036854775807",
        ),
        (
            "/api/players/-1/matches",
            "player id \"-1\" is not an integer from 0 to 9223372036854775807",
        ),
        (
            "/api/players/18446744073709551615",
            "player id \"18446744073709551615\" is not an integer from 0 to 9223372036854775807",
        ),
        (
            "/api/players/1/matches?limit=5000",
            "limit \"5000\" is not an integer from 1 to 1000",
        ),
        (
            "/api/players/1/around?radius=101",
            "radius \"101\" is not an integer from 0 to 100",
        ),
    ] {
        let (status, body) = get(&db, uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(body["error"], message, "{uri}");
    }
    for uri in [
        "/api/players/99",
        "/api/players/99/matches",
        "/api/players/99/around",
    ] {
        let (status, body) = get(&db, uri).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(body["error"], "no player with id 99", "{uri}");
    }
    db.cleanup().await;
}
