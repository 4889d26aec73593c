//! The read API over HTTP, as an axum [`Router`] the server merges into its own.
//!
//! | route | answer |
//! |---|---|
//! | `GET /api/leaderboard?limit=N` | `[LeaderboardEntry]`, top N (1..=1000, default 100) |
//! | `GET /api/players/{id}` | [`PlayerProfile`](crate::PlayerProfile): profile, totals, rank |
//! | `GET /api/players/{id}/matches?limit=N` | `[MatchSummary]`, newest first |
//! | `GET /api/players/{id}/around?radius=N` | `[LeaderboardEntry]`, N (0..=100, default 5) either side |
//!
//! A bad id or parameter is `400 {"error": "..."}`, an unknown player `404`, a database
//! failure `503` (the detail goes to the log, not to the client).

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::store::{Store, StoreError};

/// Most entries a list endpoint returns.
pub const MAX_LIMIT: u32 = 1000;
/// Entries a list endpoint returns without `limit`.
pub const DEFAULT_LIMIT: u32 = 100;
/// Most neighbours either side for `/around`.
pub const MAX_RADIUS: u32 = 100;

/// The routes, with `store` as their state.
pub fn router(store: Store) -> Router {
    Router::new()
        .route("/api/leaderboard", get(leaderboard))
        .route("/api/players/{id}", get(player))
        .route("/api/players/{id}/matches", get(matches))
        .route("/api/players/{id}/around", get(around))
        .with_state(store)
}

struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({ "error": self.1 }))).into_response()
    }
}

impl ApiError {
    /// The answer to a failed query: the detail goes to the store's (throttled) log, not to
    /// the client.
    fn from_store(store: &Store) -> impl FnOnce(StoreError) -> Self + '_ {
        move |error| match error {
            StoreError::PlayerId(id) => {
                bad_request(format!("player id {id} exceeds max {max}", max = i64::MAX))
            }
            other => {
                store.log_read_failure(&other);
                ApiError(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "database unavailable".to_owned(),
                )
            }
        }
    }
}

fn bad_request(message: String) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, message)
}

fn parse_id(raw: &str) -> Result<u64, ApiError> {
    match raw.parse::<u64>() {
        Ok(id) if id <= i64::MAX as u64 => Ok(id),
        _ => Err(bad_request(format!(
            "player id {raw:?} is not an integer from 0 to {max}",
            max = i64::MAX
        ))),
    }
}

/// Reads integer parameter `name` from a query string: `default` when absent, 400 when not
/// an integer within `min..=max`. Other parameters are ignored.
fn parse_param(
    query: &Option<String>,
    name: &str,
    default: u32,
    min: u32,
    max: u32,
) -> Result<u32, ApiError> {
    let Some(query) = query else {
        return Ok(default);
    };
    let Some(raw) = query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find_map(|(key, value)| (key == name).then_some(value))
    else {
        return Ok(default);
    };
    match raw.parse::<u32>() {
        Ok(value) if (min..=max).contains(&value) => Ok(value),
        _ => Err(bad_request(format!(
            "{name} {raw:?} is not an integer from {min} to {max}"
        ))),
    }
}

async fn leaderboard(
    State(store): State<Store>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let limit = parse_param(&query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    Ok(axum::Json(
        store
            .leaderboard(limit)
            .await
            .map_err(ApiError::from_store(&store))?,
    )
    .into_response())
}

async fn player(State(store): State<Store>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    match store
        .player(id)
        .await
        .map_err(ApiError::from_store(&store))?
    {
        Some(profile) => Ok(axum::Json(profile).into_response()),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no player with id {id}"),
        )),
    }
}

async fn matches(
    State(store): State<Store>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let limit = parse_param(&query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    if store
        .player(id)
        .await
        .map_err(ApiError::from_store(&store))?
        .is_none()
    {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no player with id {id}"),
        ));
    }
    Ok(axum::Json(
        store
            .matches(id, limit)
            .await
            .map_err(ApiError::from_store(&store))?,
    )
    .into_response())
}

async fn around(
    State(store): State<Store>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let radius = parse_param(&query, "radius", 5, 0, MAX_RADIUS)?;
    match store
        .around(id, radius)
        .await
        .map_err(ApiError::from_store(&store))?
    {
        Some(entries) => Ok(axum::Json(entries).into_response()),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no player with id {id}"),
        )),
    }
}
