//! Versioned migrations, run at connect. The applied versions live in
//! `{prefix}schema_migrations`; a lock per backend keeps two servers starting at once from
//! migrating together.
//!
//! SQLite and PostgreSQL apply each migration and record its version in one transaction, so
//! a crash leaves the schema at a whole version. MySQL commits DDL implicitly; its
//! statements are written to be re-runnable (`IF NOT EXISTS`, `INSERT IGNORE`), so a
//! migration cut short is simply run again.

use sqlx::{AssertSqlSafe, Row};

use crate::sql::{Backend, Migration, migrations, placeholders};
use crate::store::{ConnectError, Pool};

fn migration_error(m: &Migration) -> impl Fn(sqlx::Error) -> ConnectError + '_ {
    move |source| ConnectError::Migrate {
        version: m.version,
        description: m.description,
        source,
    }
}

/// A stable 64-bit key for PostgreSQL's advisory lock (FNV-1a of the lock name).
fn lock_key(name: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

pub(crate) async fn run(pool: &Pool, backend: Backend, prefix: &str) -> Result<(), ConnectError> {
    let all = migrations(backend, prefix);
    let known = all.last().map_or(0, |m| m.version);
    let create = format!(
        "CREATE TABLE IF NOT EXISTS {prefix}schema_migrations (\
         version BIGINT NOT NULL PRIMARY KEY, description VARCHAR(200) NOT NULL, applied_ms BIGINT NOT NULL)"
    );
    let applied_sql = format!("SELECT version FROM {prefix}schema_migrations ORDER BY version");
    let record = placeholders(
        backend,
        &format!(
            "INSERT INTO {prefix}schema_migrations (version, description, applied_ms) VALUES (?, ?, ?)"
        ),
    );
    let lock_name = format!("{prefix}tickwire_migrate");
    let setup = |source| ConnectError::Migrate {
        version: 0,
        description: "schema_migrations table and lock",
        source,
    };
    let now = crate::event::unix_ms(std::time::SystemTime::now());

    // What every backend does once it holds its lock: the versions table, the applied
    // versions, then each pending migration and its record, in order. A macro rather than
    // a function because each backend's connection is its own sqlx type.
    macro_rules! apply_pending {
        ($conn:ident) => {{
            sqlx::query(AssertSqlSafe(create.as_str()))
                .execute(&mut *$conn)
                .await
                .map_err(setup)?;
            let applied = versions(
                sqlx::query(AssertSqlSafe(applied_sql.as_str()))
                    .fetch_all(&mut *$conn)
                    .await
                    .map_err(setup)?
                    .iter()
                    .map(|r| r.try_get::<i64, _>(0)),
            )
            .map_err(setup)?;
            check_not_newer(&applied, known)?;
            for m in all.iter().filter(|m| !applied.contains(&m.version)) {
                for statement in &m.statements {
                    sqlx::query(AssertSqlSafe(statement.as_str()))
                        .execute(&mut *$conn)
                        .await
                        .map_err(migration_error(m))?;
                }
                sqlx::query(AssertSqlSafe(record.as_str()))
                    .bind(m.version)
                    .bind(m.description)
                    .bind(now)
                    .execute(&mut *$conn)
                    .await
                    .map_err(migration_error(m))?;
            }
        }};
    }

    // Each arm takes its backend's lock around `apply_pending`.
    match pool {
        Pool::Sqlite(pool) => {
            // BEGIN IMMEDIATE is the lock: one writer at a time per database file.
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(setup)?;
            apply_pending!(tx);
            tx.commit().await.map_err(setup)?;
        }
        Pool::Postgres(pool) => {
            let mut tx = pool.begin().await.map_err(setup)?;
            // Released when the transaction ends.
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(lock_key(&lock_name))
                .execute(&mut *tx)
                .await
                .map_err(setup)?;
            apply_pending!(tx);
            tx.commit().await.map_err(setup)?;
        }
        Pool::MySql(pool) => {
            let mut conn = pool.acquire().await.map_err(setup)?;
            let locked: i64 = sqlx::query("SELECT CAST(GET_LOCK(?, 60) AS SIGNED)")
                .bind(&lock_name)
                .fetch_one(&mut *conn)
                .await
                .map_err(setup)?
                .try_get(0)
                .map_err(setup)?;
            if locked != 1 {
                return Err(setup(sqlx::Error::Protocol(format!(
                    "could not take lock {lock_name:?} within 60 s"
                ))));
            }
            let result = async {
                apply_pending!(conn);
                Ok(())
            }
            .await;
            // The lock also ends with the session; releasing it here frees it for the next
            // server now rather than when the pool drops this connection.
            let _ = sqlx::query("SELECT RELEASE_LOCK(?)")
                .bind(&lock_name)
                .execute(&mut *conn)
                .await;
            result?;
        }
    }
    Ok(())
}

fn versions(rows: impl Iterator<Item = Result<i64, sqlx::Error>>) -> Result<Vec<i64>, sqlx::Error> {
    rows.collect()
}

fn check_not_newer(applied: &[i64], known: i64) -> Result<(), ConnectError> {
    match applied.iter().max() {
        Some(&found) if found > known => Err(ConnectError::SchemaTooNew { found, known }),
        _ => Ok(()),
    }
}
