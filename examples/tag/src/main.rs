//! The tag server: the room kind `tag`, eight seats a room, and the browser page at `/`
//! (built by `npm run build` in `web/`). `cargo run -p tag`, then open
//! http://127.0.0.1:8080 in two windows. An address as the first argument moves the HTTP
//! listener (`127.0.0.1:0` picks a free port, logged on stderr as `listening http=…`).

use tag::Tag;
use tickwire_server::Server;
use tickwire_server::axum::Router;
use tickwire_server::axum::http::header;
use tickwire_server::axum::response::Html;
use tickwire_server::axum::routing::get;
use tickwire_server::runtime::Extras;

const PAGE: &str = include_str!("../web/index.html");

/// The page's script, bundled from `web/src` (or a note that it is not built yet).
fn script() -> String {
    let built = concat!(env!("CARGO_MANIFEST_DIR"), "/web/dist/main.js");
    std::fs::read_to_string(built).unwrap_or_else(|_| {
        "document.body.textContent = 'Build the page first: cd examples/tag/web && npm ci && npm run build';".into()
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let http = std::env::args()
        .nth(1)
        .map(|address| address.parse())
        .transpose()?;
    let page = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route(
            "/main.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript")], script()) }),
        );
    let server = Server::builder()
        .room::<Tag>("tag", 8)
        .extras(Extras::default().routes(page))
        .configure(|config| {
            if let Some(http) = http {
                // A free port for everything else too, so test runs do not collide.
                config.http.listen = http;
                config.udp.listen.set_port(0);
                config.admin.listen.set_port(0);
                config.webtransport.enabled = false;
                config.console.enabled = false;
            }
        });
    server.run().await?;
    Ok(())
}
