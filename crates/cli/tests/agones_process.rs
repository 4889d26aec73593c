//! `tickwire serve` as an Agones GameServer, against a test sidecar implementing the SDK's
//! documented REST paths (`GET /gameserver`, `POST /ready`, `/health`, `/allocate`,
//! `/shutdown`, `PUT /metadata/label`): the server listens on the ports the GameServer was
//! given, says Ready once listening, pings Health while its shard turns, labels its load,
//! allocates itself when its first player arrives, and says Shutdown after its drain. The
//! calls and their order are asserted.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post, put};
use serde_json::{Value, json};
use tickwire_client::{ConnectOptions, MatchmakeRequest, Session, Transport};
use tokio::time::timeout;

mod common;

use common::{WAIT, http, scratch_dir, tickwire};

#[derive(Default)]
struct Sidecar {
    calls: Vec<String>,
    state: String,
    ports: Vec<(String, u16)>,
}

type Shared = Arc<Mutex<Sidecar>>;

fn note(sidecar: &Shared, call: impl Into<String>) {
    sidecar.lock().unwrap().calls.push(call.into());
}

async fn game_server(State(sidecar): State<Shared>) -> axum::Json<Value> {
    let sidecar_state = {
        let mut sidecar = sidecar.lock().unwrap();
        sidecar.calls.push("GET /gameserver".into());
        (sidecar.state.clone(), sidecar.ports.clone())
    };
    let ports: Vec<Value> = sidecar_state
        .1
        .iter()
        .map(|(name, port)| json!({ "name": name, "port": port }))
        .collect();
    axum::Json(json!({
        "object_meta": { "name": "tickwire-abcde", "namespace": "default" },
        "status": { "state": sidecar_state.0, "address": "127.0.0.1", "ports": ports },
    }))
}

async fn ready(State(sidecar): State<Shared>) -> axum::Json<Value> {
    note(&sidecar, "POST /ready");
    sidecar.lock().unwrap().state = "Ready".into();
    axum::Json(json!({}))
}

async fn health(State(sidecar): State<Shared>) -> axum::Json<Value> {
    note(&sidecar, "POST /health");
    axum::Json(json!({}))
}

async fn allocate(State(sidecar): State<Shared>) -> axum::Json<Value> {
    note(&sidecar, "POST /allocate");
    sidecar.lock().unwrap().state = "Allocated".into();
    axum::Json(json!({}))
}

async fn shutdown(State(sidecar): State<Shared>) -> axum::Json<Value> {
    note(&sidecar, "POST /shutdown");
    sidecar.lock().unwrap().state = "Shutdown".into();
    axum::Json(json!({}))
}

async fn label(
    State(sidecar): State<Shared>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    note(
        &sidecar,
        format!(
            "PUT /metadata/label {}={}",
            body["key"].as_str().unwrap_or_default(),
            body["value"].as_str().unwrap_or_default()
        ),
    );
    axum::Json(json!({}))
}

fn free_port(udp: bool) -> u16 {
    if udp {
        std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    } else {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_game_server_says_ready_pings_health_allocates_with_players_and_shuts_down_after_its_drain()
 {
    let (http_port, udp_port) = (free_port(false), free_port(true));
    let sidecar: Shared = Arc::new(Mutex::new(Sidecar {
        state: "Scheduled".into(),
        ports: vec![("http".into(), http_port), ("udp".into(), udp_port)],
        ..Sidecar::default()
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sdk_port = listener.local_addr().unwrap().port();
    let router = Router::new()
        .route("/gameserver", get(game_server))
        .route("/ready", post(ready))
        .route("/health", post(health))
        .route("/allocate", post(allocate))
        .route("/shutdown", post(shutdown))
        .route("/metadata/label", put(label))
        .with_state(sidecar.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let dir = scratch_dir("agones");
    let mut child = tickwire(&dir)
        .args([
            "serve",
            "--no-wt",
            "--console",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--shards",
            "2",
        ])
        .env("AGONES_SDK_HTTP_PORT", sdk_port.to_string())
        .env("TICKWIRE_AGONES__HEALTH_INTERVAL_MS", "300")
        .env("TICKWIRE_AGONES__LABEL_INTERVAL_MS", "300")
        .env("TICKWIRE_ADMIN__TOKEN", "operator")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let (listening, _stdout) = common::listening(&mut child).await;
    let http_address = SocketAddr::from(([127, 0, 0, 1], http_port));
    assert_eq!(
        listening.http,
        SocketAddr::from(([0, 0, 0, 0], http_port)),
        "the GameServer's http port"
    );
    let calls = |sidecar: &Shared| sidecar.lock().unwrap().calls.clone();
    let wait_for = async |what: &str, check: &dyn Fn(&[String]) -> bool| {
        let start = Instant::now();
        while !check(&calls(&sidecar)) {
            assert!(start.elapsed() < WAIT, "{what}: {:?}", calls(&sidecar));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    wait_for("health pings", &|calls| {
        calls.iter().filter(|call| *call == "POST /health").count() >= 2
    })
    .await;
    wait_for("an idle load label", &|calls| {
        calls.contains(&"PUT /metadata/label players=0".to_string())
            && calls.contains(&"PUT /metadata/label accepting=true".to_string())
    })
    .await;

    // A player, over UDP to the GameServer's udp port.
    let mut session = Session::start(
        &format!("http://{http_address}"),
        MatchmakeRequest::kind("relay").named("agones"),
        Transport::Udp,
        ConnectOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(session.answer().endpoints.udp.port(), udp_port);
    wait_for("allocated with a player", &|calls| {
        calls.contains(&"POST /allocate".to_string())
            && calls.contains(&"PUT /metadata/label players=1".to_string())
    })
    .await;

    // Drain: labels say so; the player leaves; the server exits, then says Shutdown.
    let (status, _) = http(
        listening.admin,
        "POST",
        "/api/admin/drain",
        "Authorization: Bearer operator\r\n",
        "",
    )
    .await;
    assert_eq!(status, 200);
    wait_for("not accepting", &|calls| {
        calls.contains(&"PUT /metadata/label accepting=false".to_string())
    })
    .await;
    session.close().await;
    let exit = timeout(WAIT * 2, child.wait())
        .await
        .expect("exits after its drain")
        .unwrap();
    assert!(exit.success(), "{exit:?}");

    let calls = calls(&sidecar);
    let first = |call: &str| {
        calls
            .iter()
            .position(|made| made == call)
            .unwrap_or_else(|| panic!("{call} never made: {calls:?}"))
    };
    let last = |call: &str| calls.iter().rposition(|made| made == call).unwrap();
    assert_eq!(calls[0], "GET /gameserver", "the ports first: {calls:?}");
    assert!(first("POST /ready") < first("POST /health"), "{calls:?}");
    assert!(first("POST /health") < first("POST /allocate"), "{calls:?}");
    assert_eq!(
        calls.iter().filter(|call| *call == "POST /ready").count(),
        1
    );
    assert_eq!(
        calls
            .iter()
            .filter(|call| *call == "POST /allocate")
            .count(),
        1,
        "once: then it is Allocated"
    );
    assert_eq!(
        calls.last().map(String::as_str),
        Some("POST /shutdown"),
        "{calls:?}"
    );
    assert!(last("POST /health") < first("POST /shutdown"));
}
