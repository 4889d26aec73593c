//! The four-in-a-row server: the room kind `four-in-a-row`, two seats a room, and the
//! browser page at `/`. `cargo run -p four-in-a-row`, then open http://127.0.0.1:8080 in two
//! windows. An address as the first argument moves the HTTP listener (`127.0.0.1:0` picks
//! a free port, logged on stderr as `listening http=…`).

use four_in_a_row::FourInARow;
use tickwire_server::Server;
// The server's own axum: no version of it to match by hand.
use tickwire_server::axum::Router;
use tickwire_server::axum::response::Html;
use tickwire_server::axum::routing::get;
use tickwire_server::runtime::Extras;

/// The page: HTML and its script in one file, no build step.
const PAGE: &str = include_str!("../web/index.html");

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let http = std::env::args()
        .nth(1)
        .map(|address| address.parse())
        .transpose()?;
    let page = Router::new().route("/", get(|| async { Html(PAGE) }));
    let server = Server::builder()
        .room::<FourInARow>("four-in-a-row", 2)
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
    // Logs `listening http=…` on stderr, serves until Ctrl-C, then shuts down gracefully.
    server.run().await?;
    Ok(())
}
