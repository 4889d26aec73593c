//! The SQL each backend runs: the versioned migrations and the statements, written once with
//! `?` placeholders and `{p}` for the table prefix, then specialised per dialect at connect.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Which database a [`Store`](crate::Store) talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// SQLite, embedded (`sqlite://path`).
    Sqlite,
    /// PostgreSQL (`postgres://…`).
    Postgres,
    /// MySQL or MariaDB (`mysql://…`, `mariadb://…`).
    MySql,
}

impl Backend {
    /// Lowercase name: `sqlite`, `postgres`, `mysql`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
            Self::MySql => "mysql",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One schema version: the statements that take the schema from `version - 1` to `version`.
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) description: &'static str,
    pub(crate) statements: Vec<String>,
}

/// Rewrites `?` placeholders to `$1, $2, …` for PostgreSQL. None of tickwire's SQL has a `?`
/// inside a string literal, which is what makes this plain rewrite safe.
pub(crate) fn placeholders(backend: Backend, sql: &str) -> String {
    if backend != Backend::Postgres {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// Expands `{p}` (table prefix), `{int}` (the 64-bit integer type; SQLite's `INTEGER PRIMARY
/// KEY` is the rowid itself), `{table}` (MySQL's engine and charset) and MySQL's inline
/// indexes in a template.
fn expand(backend: Backend, prefix: &str, template: &str) -> String {
    let int = match backend {
        Backend::Sqlite => "INTEGER",
        Backend::Postgres | Backend::MySql => "BIGINT",
    };
    let table = match backend {
        Backend::MySql => " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        Backend::Sqlite | Backend::Postgres => "",
    };
    let (players_index, match_players_index) = match backend {
        Backend::MySql => (
            ",\n INDEX {p}players_score (score DESC, id ASC)",
            ",\n INDEX {p}match_players_player (player_id, match_id)",
        ),
        Backend::Sqlite | Backend::Postgres => ("", ""),
    };
    template
        .replace("{players_index}", players_index)
        .replace("{match_players_index}", match_players_index)
        .replace("{p}", prefix)
        .replace("{int}", int)
        .replace("{table}", table)
}

/// The migrations, in order. Append a new version; never edit a released one.
pub(crate) fn migrations(backend: Backend, prefix: &str) -> Vec<Migration> {
    let mut v1 = vec![
        "CREATE TABLE IF NOT EXISTS {p}players (
            id {int} NOT NULL PRIMARY KEY,
            name VARCHAR(64) NULL,
            created_ms BIGINT NOT NULL,
            last_seen_ms BIGINT NOT NULL,
            kills BIGINT NOT NULL DEFAULT 0,
            deaths BIGINT NOT NULL DEFAULT 0,
            score BIGINT NOT NULL DEFAULT 0,
            play_time_ms BIGINT NOT NULL DEFAULT 0,
            matches BIGINT NOT NULL DEFAULT 0{players_index}
        ){table}",
        "CREATE TABLE IF NOT EXISTS {p}matches (
            id {int} NOT NULL PRIMARY KEY,
            room VARCHAR(64) NOT NULL,
            started_ms BIGINT NOT NULL,
            ended_ms BIGINT NOT NULL
        ){table}",
        "CREATE TABLE IF NOT EXISTS {p}match_players (
            match_id BIGINT NOT NULL REFERENCES {p}matches (id),
            player_id BIGINT NOT NULL REFERENCES {p}players (id),
            kills BIGINT NOT NULL,
            deaths BIGINT NOT NULL,
            score BIGINT NOT NULL,
            play_time_ms BIGINT NOT NULL,
            PRIMARY KEY (match_id, player_id){match_players_index}
        ){table}",
        "CREATE TABLE IF NOT EXISTS {p}sequences (
            name VARCHAR(32) NOT NULL PRIMARY KEY,
            next_id BIGINT NOT NULL
        ){table}",
    ];
    // The leaderboard's order, score descending then id ascending, is read straight off an
    // index. MySQL has no CREATE INDEX IF NOT EXISTS, so there the indexes are declared
    // inside CREATE TABLE (see `expand`).
    if backend != Backend::MySql {
        v1.push("CREATE INDEX IF NOT EXISTS {p}players_score ON {p}players (score DESC, id ASC)");
        v1.push(
            "CREATE INDEX IF NOT EXISTS {p}match_players_player ON {p}match_players (player_id, match_id)",
        );
    }
    v1.push(match backend {
        Backend::Sqlite | Backend::Postgres => {
            "INSERT INTO {p}sequences (name, next_id) VALUES ('match', 1) ON CONFLICT (name) DO NOTHING"
        }
        Backend::MySql => "INSERT IGNORE INTO {p}sequences (name, next_id) VALUES ('match', 1)",
    });
    vec![Migration {
        version: 1,
        description: "players, matches, match_players, sequences",
        statements: v1.iter().map(|t| expand(backend, prefix, t)).collect(),
    }]
}

/// Rows in the largest multi-row statement: 512 rows of 9 columns are 4,608 parameters,
/// under every backend's limit (SQLite 32,766; PostgreSQL and MySQL 65,535).
pub(crate) const MAX_ROWS_PER_STATEMENT: usize = 512;

/// `items` cut into the chunks the writer's multi-row statements take: as many of
/// [`MAX_ROWS_PER_STATEMENT`] rows as fit, then one chunk per power of two of the rest,
/// largest first (300 rows: 256 + 32 + 8 + 4). So a table has at most ten statement shapes,
/// each prepared once per connection and then reused from sqlx's statement cache, where
/// one shape per batch size would prepare (and evict) a new statement for nearly every
/// batch.
pub(crate) fn shaped_chunks<T>(items: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let rows = if rest.len() >= MAX_ROWS_PER_STATEMENT {
            MAX_ROWS_PER_STATEMENT
        } else {
            1 << rest.len().ilog2()
        };
        let (chunk, tail) = rest.split_at(rows);
        rest = tail;
        Some(chunk)
    })
}

/// One multi-row statement in every shape [`shaped_chunks`] makes, built once.
#[derive(Debug)]
pub(crate) struct MultiRow {
    /// Index `k`: the statement for `2^k` rows.
    by_log2: Vec<Arc<str>>,
}

impl MultiRow {
    fn new(backend: Backend, head: &str, columns: usize, tail: &str) -> Self {
        let shapes = MAX_ROWS_PER_STATEMENT.ilog2() + 1;
        Self {
            by_log2: (0..shapes)
                .map(|k| multi_row(backend, head, columns, 1 << k, tail).into())
                .collect(),
        }
    }

    /// The statement for `rows` rows, a power of two up to [`MAX_ROWS_PER_STATEMENT`].
    pub(crate) fn rows(&self, rows: usize) -> Arc<str> {
        debug_assert!(rows.is_power_of_two() && rows <= MAX_ROWS_PER_STATEMENT);
        self.by_log2[rows.ilog2() as usize].clone()
    }
}

/// Statements, specialised for one backend and prefix.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) backend: Backend,
    pub(crate) prefix: String,
    pub(crate) upsert_players: MultiRow,
    pub(crate) insert_matches: MultiRow,
    pub(crate) insert_match_players: MultiRow,
    pub(crate) bump_match_sequence: Arc<str>,
    pub(crate) read_match_sequence: Arc<str>,
    /// Records a writer's batch number under the writer's name (see `store::BatchMark`).
    pub(crate) mark_batch: Arc<str>,
    pub(crate) read_batch_mark: Arc<str>,
    pub(crate) player: Arc<str>,
    pub(crate) count_above_score: Arc<str>,
    pub(crate) count_before: Arc<str>,
    pub(crate) top: Arc<str>,
    pub(crate) above: Arc<str>,
    pub(crate) below: Arc<str>,
    pub(crate) matches_of: Arc<str>,
}

impl Statements {
    pub(crate) fn new(backend: Backend, prefix: &str) -> Self {
        let s = |template: &str| -> Arc<str> {
            placeholders(backend, &expand(backend, prefix, template)).into()
        };
        let greatest = match backend {
            Backend::Sqlite => "max",
            Backend::Postgres | Backend::MySql => "GREATEST",
        };
        let upsert_players_tail = match backend {
            Backend::Sqlite | Backend::Postgres => format!(
                " ON CONFLICT (id) DO UPDATE SET \
                 name = COALESCE(excluded.name, {p}players.name), \
                 last_seen_ms = {greatest}({p}players.last_seen_ms, excluded.last_seen_ms), \
                 kills = {p}players.kills + excluded.kills, \
                 deaths = {p}players.deaths + excluded.deaths, \
                 score = {p}players.score + excluded.score, \
                 play_time_ms = {p}players.play_time_ms + excluded.play_time_ms, \
                 matches = {p}players.matches + excluded.matches",
                p = prefix
            ),
            Backend::MySql => " ON DUPLICATE KEY UPDATE \
                 name = COALESCE(VALUES(name), name), \
                 last_seen_ms = GREATEST(last_seen_ms, VALUES(last_seen_ms)), \
                 kills = kills + VALUES(kills), \
                 deaths = deaths + VALUES(deaths), \
                 score = score + VALUES(score), \
                 play_time_ms = play_time_ms + VALUES(play_time_ms), \
                 matches = matches + VALUES(matches)"
                .to_owned(),
        };
        let columns = "id, COALESCE(name, ''), created_ms, last_seen_ms, kills, deaths, score, play_time_ms, matches";
        Self {
            backend,
            prefix: prefix.to_owned(),
            upsert_players: MultiRow::new(
                backend,
                &expand(
                    backend,
                    prefix,
                    "INSERT INTO {p}players (id, name, created_ms, last_seen_ms, kills, deaths, score, play_time_ms, matches) VALUES ",
                ),
                9,
                &upsert_players_tail,
            ),
            insert_matches: MultiRow::new(
                backend,
                &expand(
                    backend,
                    prefix,
                    "INSERT INTO {p}matches (id, room, started_ms, ended_ms) VALUES ",
                ),
                4,
                "",
            ),
            insert_match_players: MultiRow::new(
                backend,
                &expand(
                    backend,
                    prefix,
                    "INSERT INTO {p}match_players (match_id, player_id, kills, deaths, score, play_time_ms) VALUES ",
                ),
                6,
                "",
            ),
            bump_match_sequence: s(
                "UPDATE {p}sequences SET next_id = next_id + ? WHERE name = 'match'",
            ),
            read_match_sequence: s("SELECT next_id FROM {p}sequences WHERE name = 'match'"),
            mark_batch: s(match backend {
                Backend::Sqlite | Backend::Postgres => {
                    "INSERT INTO {p}sequences (name, next_id) VALUES (?, ?) \
                     ON CONFLICT (name) DO UPDATE SET next_id = excluded.next_id"
                }
                Backend::MySql => {
                    "INSERT INTO {p}sequences (name, next_id) VALUES (?, ?) \
                     ON DUPLICATE KEY UPDATE next_id = VALUES(next_id)"
                }
            }),
            read_batch_mark: s("SELECT next_id FROM {p}sequences WHERE name = ?"),
            player: s(&format!("SELECT {columns} FROM {{p}}players WHERE id = ?")),
            count_above_score: s("SELECT COUNT(*) FROM {p}players WHERE score > ?"),
            count_before: s(
                "SELECT COUNT(*) FROM {p}players WHERE score > ? OR (score = ? AND id < ?)",
            ),
            top: s(&format!(
                "SELECT {columns} FROM {{p}}players ORDER BY score DESC, id ASC LIMIT ?"
            )),
            // The players just ahead of one (score, id) in leaderboard order, nearest first.
            above: s(&format!(
                "SELECT {columns} FROM {{p}}players WHERE score > ? OR (score = ? AND id < ?) \
                 ORDER BY score ASC, id DESC LIMIT ?"
            )),
            // The players just behind one (score, id), nearest first.
            below: s(&format!(
                "SELECT {columns} FROM {{p}}players WHERE score < ? OR (score = ? AND id > ?) \
                 ORDER BY score DESC, id ASC LIMIT ?"
            )),
            matches_of: s(
                "SELECT m.id, m.room, m.started_ms, m.ended_ms, mp.kills, mp.deaths, mp.score, mp.play_time_ms, \
                 (SELECT COUNT(*) FROM {p}match_players o WHERE o.match_id = m.id) \
                 FROM {p}match_players mp JOIN {p}matches m ON m.id = mp.match_id \
                 WHERE mp.player_id = ? ORDER BY mp.match_id DESC LIMIT ?",
            ),
        }
    }
}

/// `head (?, …, ?), (?, …, ?) … tail` with `rows` rows of `columns` placeholders, numbered
/// for PostgreSQL.
fn multi_row(backend: Backend, head: &str, columns: usize, rows: usize, tail: &str) -> String {
    let mut sql = String::with_capacity(head.len() + tail.len() + rows * (columns * 4 + 4));
    sql.push_str(head);
    let mut n = 0;
    for row in 0..rows {
        if row > 0 {
            sql.push(',');
        }
        sql.push('(');
        for column in 0..columns {
            if column > 0 {
                sql.push(',');
            }
            if backend == Backend::Postgres {
                n += 1;
                sql.push('$');
                sql.push_str(&n.to_string());
            } else {
                sql.push('?');
            }
        }
        sql.push(')');
    }
    sql.push_str(tail);
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_placeholders_are_numbered_in_order() {
        assert_eq!(
            placeholders(Backend::Postgres, "a = ? AND (b = ? OR c < ?)"),
            "a = $1 AND (b = $2 OR c < $3)"
        );
        assert_eq!(placeholders(Backend::MySql, "a = ?"), "a = ?");
        assert_eq!(
            multi_row(Backend::Postgres, "X ", 2, 2, " Y"),
            "X ($1,$2),($3,$4) Y"
        );
        assert_eq!(multi_row(Backend::Sqlite, "X ", 2, 2, ""), "X (?,?),(?,?)");
        let s = Statements::new(Backend::MySql, "t_");
        assert_eq!(s.insert_matches.rows(2).matches("(?,?,?,?)").count(), 2);
    }

    #[test]
    fn batches_are_cut_into_few_fixed_shapes() {
        for len in [0, 1, 2, 3, 300, 511, 512, 513, 1000, 4096, 4097] {
            let items: Vec<usize> = (0..len).collect();
            let chunks: Vec<&[usize]> = shaped_chunks(&items).collect();
            let sizes: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
            assert_eq!(
                chunks.concat(),
                items,
                "{len} rows: every row once, in order"
            );
            assert!(
                sizes
                    .iter()
                    .all(|n| n.is_power_of_two() && *n <= MAX_ROWS_PER_STATEMENT),
                "{len} rows: shapes {sizes:?}"
            );
            let rest = len % MAX_ROWS_PER_STATEMENT;
            assert_eq!(
                sizes.len(),
                len / MAX_ROWS_PER_STATEMENT + rest.count_ones() as usize,
                "{len} rows: fewest statements, {sizes:?}"
            );
        }
    }
}
