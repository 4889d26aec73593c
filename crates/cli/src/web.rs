//! The browser client in `tickwire serve`: the built web demo (`clients/ts/web/dist`, made by
//! `make web`) at `/`, and the arena's map at `GET /api/arena/map`, which the demo draws and
//! predicts movement with (walls in the server's order, so prediction matches it bit for bit).
//!
//! A missing directory is not an error: the server logs where it looked and `/` answers with
//! a page that says how to build the client, so the game server runs without Node.

use std::io;
use std::path::{Path, PathBuf};

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tickwire_arena::ArenaMap;
use tower_http::services::ServeDir;

/// The `[web]` section of `tickwire.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSettings {
    /// Directory of the built browser client, served at `/` (relative paths are from the
    /// working directory). Empty: no files are served, and `/` says so.
    pub dir: PathBuf,
}

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("clients/ts/web/dist"),
        }
    }
}

/// What `/` serves, decided once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebClient {
    /// The files of this directory (it holds an `index.html`).
    Files(PathBuf),
    /// No client: `[web] dir` is empty, or has no `index.html`.
    Missing {
        /// The directory looked in, if any.
        dir: Option<PathBuf>,
    },
}

impl WebSettings {
    /// Where the client is, checked now; logs what was found.
    pub fn locate(&self) -> WebClient {
        if self.dir.as_os_str().is_empty() {
            tracing::info!("web client off ([web] dir is empty)");
            return WebClient::Missing { dir: None };
        }
        if self.dir.join("index.html").is_file() {
            tracing::info!(dir = %self.dir.display(), "serving the web client at /");
            return WebClient::Files(self.dir.clone());
        }
        tracing::warn!(
            dir = %self.dir.display(),
            "no web client at [web] dir (no index.html): `make web` builds it; / explains"
        );
        WebClient::Missing {
            dir: Some(self.dir.clone()),
        }
    }
}

/// The routes: the map as JSON, and the client's files (or the page explaining their
/// absence) for every path no other route takes.
pub fn routes(client: &WebClient, map: &ArenaMap) -> Router {
    let map_json = map_json(map).to_string();
    let router = Router::new().route(
        "/api/arena/map",
        get(move || {
            let body = map_json.clone();
            async move {
                (
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::CACHE_CONTROL, "no-cache"),
                    ],
                    body,
                )
            }
        }),
    );
    match client {
        WebClient::Files(dir) => {
            let files = ServeDir::new(dir).append_index_html_on_directories(true);
            router.fallback(move |request: Request| serve_file(files.clone(), request))
        }
        WebClient::Missing { dir } => {
            let page = missing_page(dir.as_deref());
            router.fallback(move || {
                let page = page.clone();
                async move {
                    let mut response = (StatusCode::NOT_FOUND, Html(page)).into_response();
                    response
                        .headers_mut()
                        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                    response
                }
            })
        }
    }
}

/// A file of the client, or why not. `ServeDir` itself answers any I/O error but "not found"
/// with an empty 500; a name the file system refuses as too long (a path segment over 255
/// bytes, a path over 4 KiB) names no file, so it is a 404 like any other missing file.
async fn serve_file(mut files: ServeDir, request: Request) -> Response {
    match files.try_call(request).await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(error) if error.kind() == io::ErrorKind::InvalidFilename => {
            (StatusCode::NOT_FOUND, "not found").into_response()
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read a web client file");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot read the file").into_response()
        }
    }
}

/// The map as the browser needs it: size, walls as `[x0, y0, x1, y1]` boxes in the order
/// the server tests them, spawn points and teleports. Every number is an `f32` widened
/// exactly, so `Math.fround` of it gives the server's value.
pub fn map_json(map: &ArenaMap) -> Value {
    let rect = |a: &tickwire_arena::geom::Aabb| json!([a.min.x, a.min.y, a.max.x, a.max.y]);
    json!({
        "name": map.name(),
        "width": map.size().x,
        "height": map.size().y,
        "walls": map.walls().boxes().iter().map(rect).collect::<Vec<_>>(),
        "spawns": map.spawns().iter().map(|s| json!([s.x, s.y])).collect::<Vec<_>>(),
        "teleports": map.teleports().iter().map(|t| json!({
            "name": t.name,
            "pad": rect(&t.pad),
            "destination": rect(&t.destination),
        })).collect::<Vec<_>>(),
    })
}

fn missing_page(dir: Option<&Path>) -> String {
    let why = match dir {
        Some(dir) => format!(
            "There is no <code>index.html</code> in <code>{}</code> (the <code>[web] dir</code> setting).",
            escape(&dir.display().to_string())
        ),
        None => "The <code>[web] dir</code> setting is empty, so no web client is served.".into(),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tickwire</title>\
         <style>body{{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em;\
         background:#20242c;color:#e8e8e8}}code{{background:#0006;padding:0 .3em}}</style></head>\
         <body><h1>tickwire is running</h1><p>The game server is up, but the browser client is not \
         built. {why}</p><p>Build it with <code>make web</code> (or <code>npm ci &amp;&amp; npm run \
         build</code> in <code>clients/ts/web</code>) and reload, or start everything with \
         <code>make run</code>.</p><p>Native clients and bots can connect now: \
         <code>POST /api/matchmake</code>.</p></body></html>\n"
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwire_arena::BuiltinMap;

    #[test]
    fn the_map_json_lists_the_walls_in_the_servers_order() {
        let map = BuiltinMap::Courtyard.load().unwrap();
        let json = map_json(&map);
        assert_eq!(json["width"], 40.0);
        assert_eq!(json["height"], 30.0);
        let walls = json["walls"].as_array().unwrap();
        assert_eq!(walls.len(), map.walls().boxes().len());
        let first = map.walls().boxes()[0];
        assert_eq!(
            walls[0],
            json!([first.min.x, first.min.y, first.max.x, first.max.y])
        );
        assert_eq!(json["spawns"].as_array().unwrap().len(), map.spawns().len());
        assert_eq!(
            json["teleports"].as_array().unwrap().len(),
            map.teleports().len()
        );
    }

    #[tokio::test]
    async fn a_path_too_long_for_the_file_system_is_not_found_not_a_server_error() {
        let dir = std::env::temp_dir().join(format!("tickwire-web-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), "<html></html>").unwrap();
        let files = ServeDir::new(&dir).append_index_html_on_directories(true);
        let get = |path: String| {
            let files = files.clone();
            async move {
                let request = Request::get(path).body(axum::body::Body::empty()).unwrap();
                serve_file(files, request).await.status()
            }
        };
        assert_eq!(get("/".into()).await, StatusCode::OK);
        assert_eq!(get("/nope.js".into()).await, StatusCode::NOT_FOUND);
        let segment = "a".repeat(256);
        assert_eq!(
            get(format!("/{segment}")).await,
            StatusCode::NOT_FOUND,
            "a 256-byte segment"
        );
        let long = format!("/{}", vec!["b".repeat(200); 30].join("/"));
        assert_eq!(get(long).await, StatusCode::NOT_FOUND, "a 6 KiB path");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_missing_page_names_the_directory_escaped() {
        let page = missing_page(Some(Path::new("<dist>")));
        assert!(page.contains("&lt;dist&gt;"), "{page}");
        assert!(page.contains("make web"));
        assert!(missing_page(None).contains("empty"));
    }
}
