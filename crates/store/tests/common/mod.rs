//! Shared by the store's integration tests: a fresh, isolated store per test on each
//! backend. SQLite always (a new file); PostgreSQL and MariaDB when
//! `TICKWIRE_TEST_POSTGRES_URL` / `TICKWIRE_TEST_MYSQL_URL` are set (`.ci/run` sets them),
//! each test under its own table prefix, so tests run in parallel and re-run on the same
//! servers.

#![allow(dead_code, unreachable_pub)]

pub mod disk;
pub mod proxy;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use tickwire_store::{MatchResult, Outcome, StatEvent, Store, StoreConfig};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A name no other test, process or earlier run uses: pid, a counter and the clock.
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{tag}{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        nanos % 1_000_000_000
    )
}

/// A fresh SQLite file in the temp directory (removed by [`TestDb::cleanup`]).
pub fn sqlite_path() -> PathBuf {
    std::env::temp_dir().join(format!("tickwire-store-{}.db", unique("t")))
}

/// Which server backends to test, from the environment.
pub enum Server {
    Postgres,
    MySql,
}

impl Server {
    pub fn env(&self) -> &'static str {
        match self {
            Self::Postgres => "TICKWIRE_TEST_POSTGRES_URL",
            Self::MySql => "TICKWIRE_TEST_MYSQL_URL",
        }
    }

    /// The URL, or `None` after printing why the test is skipped.
    pub fn url(&self, test: &str) -> Option<String> {
        match std::env::var(self.env()) {
            Ok(url) if !url.is_empty() => Some(url),
            _ => {
                eprintln!("{test}: skipped: set {} to run it", self.env());
                None
            }
        }
    }
}

/// An isolated store and what to remove afterwards.
pub struct TestDb {
    pub store: Store,
    pub config: StoreConfig,
    pub sqlite: Option<PathBuf>,
}

impl TestDb {
    pub async fn sqlite() -> Self {
        let path = sqlite_path();
        let config = StoreConfig {
            url: format!("sqlite://{}", path.display()),
            ..StoreConfig::default()
        };
        let store = Store::connect_with(&config).await.expect("sqlite connects");
        Self {
            store,
            config,
            sqlite: Some(path),
        }
    }

    /// `None` (and a printed "skipped") when the server's URL is not set.
    pub async fn server(server: Server, test: &str) -> Option<Self> {
        let mut url = server.url(test)?;
        if let Server::MySql = server {
            url = mysql_test_database(&url).await;
        }
        let config = StoreConfig {
            url,
            table_prefix: format!("{}_", unique("t")),
            max_connections: 4,
            ..StoreConfig::default()
        };
        let store = Store::connect_with(&config)
            .await
            .unwrap_or_else(|e| panic!("{} is set but connecting failed: {e}", server.env()));
        Some(Self {
            store,
            config,
            sqlite: None,
        })
    }

    /// Drops this test's tables (server backends) or deletes its file (SQLite).
    pub async fn cleanup(self) {
        if self.sqlite.is_none() {
            self.store.drop_tables(&[]).await.expect("test tables drop");
        }
        self.store.close().await;
        if let Some(path) = self.sqlite {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
    }
}

/// Tests keep out of the database the URL names (`mysql` in CI): they work in
/// `tickwire_test` on the same server, created here if missing.
async fn mysql_test_database(url: &str) -> String {
    let pool = sqlx::MySqlPool::connect(url)
        .await
        .unwrap_or_else(|e| panic!("TICKWIRE_TEST_MYSQL_URL is set but connecting failed: {e}"));
    sqlx::query("CREATE DATABASE IF NOT EXISTS tickwire_test CHARACTER SET utf8mb4")
        .execute(&pool)
        .await
        .expect("create database tickwire_test");
    pool.close().await;
    let (base, params) = match url.split_once('?') {
        Some((base, params)) => (base, format!("?{params}")),
        None => (url, String::new()),
    };
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let root = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    format!("{root}/tickwire_test{params}")
}

/// One match of player 1 scoring 1: player 1's `matches` counts the committed events, so a
/// lost or doubled event shows.
pub fn one_point(seq: u64) -> StatEvent {
    StatEvent::MatchEnded(MatchResult {
        room: format!("m{seq}"),
        started_ms: seq as i64,
        ended_ms: seq as i64 + 1,
        outcomes: vec![Outcome {
            player: 1,
            kills: 0,
            deaths: 0,
            score: 1,
            play_time_ms: 1,
        }],
    })
}
