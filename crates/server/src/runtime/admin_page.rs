//! The admin page, built into the binary: `clients/ts/web/admin` compiled by `npm run
//! build:admin` into `crates/server/assets/admin/` (committed; a browser test fails when it
//! is stale) and embedded here, so every server, a `Server::builder()` game's included,
//! serves it on its operator listener beside the admin API it calls, with no Node and no
//! `[web] dir`. The public port says where it went.

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX: &str = include_str!("../../assets/admin/index.html");
const SCRIPT: &str = include_str!("../../assets/admin/admin.js");
const STYLE: &str = include_str!("../../assets/admin/admin.css");

/// A file of the page. `no-cache`: the names stay the same when the contents change.
fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// `/admin` (and `/admin/`) and the two files the page loads, for the operator listener.
pub(super) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let index = || async { file("text/html; charset=utf-8", INDEX) };
    Router::new()
        .route("/admin", get(index))
        .route("/admin/", get(index))
        .route(
            "/admin/admin.js",
            get(|| async { file("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/admin/admin.css",
            get(|| async { file("text/css; charset=utf-8", STYLE) }),
        )
}

/// What the public port answers for the admin page: a page whose every call would fail is
/// worse than a 404 that says where to go.
pub(super) fn moved<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let moved = || async {
        (
            StatusCode::NOT_FOUND,
            "The admin page is served on the operator listener (admin.listen, \
             127.0.0.1:9090 by default), with the admin API and /metrics.\n",
        )
    };
    Router::new()
        .route("/admin", get(moved))
        .route("/admin/", get(moved))
        .route("/admin/{*file}", get(moved))
}
