//! Queries that return many rows (a leaderboard page, a match list, the bench's top 1,000),
//! read the cheapest way each backend allows.
//!
//! sqlx's SQLite driver steps a statement on the connection's worker thread and hands every
//! row to the caller through a channel, each value copied and the reader woken per row. For a
//! 1,000-row page that hand-off is nearly all the cost: about 0.7 ms, where SQLite's own
//! stepping is about 0.05 ms (the profile is in BENCHMARKS.md). So on SQLite [`fetch_all`]
//! takes the connection's handle from its worker (sqlx's documented `lock_handle`) and steps
//! the statement itself: one hand-off per query, not per row. PostgreSQL and MySQL decode rows
//! as they arrive off the socket; they go through sqlx as everything else.

use std::ffi::{CStr, c_int};
use std::ptr::NonNull;

use libsqlite3_sys as ffi;
use sqlx::{AssertSqlSafe, Row as _};

use crate::store::{Connection, StoreError};

/// One result row's columns, whichever backend produced it.
pub(crate) trait Columns {
    /// Column `index` (from 0) as a 64-bit integer; an error if it holds anything else.
    fn int(&self, index: usize) -> Result<i64, StoreError>;
    /// Column `index` as text, `None` for NULL.
    fn text(&self, index: usize) -> Result<Option<String>, StoreError>;

    /// Column `index` as text that is never NULL.
    fn text_not_null(&self, index: usize) -> Result<String, StoreError> {
        self.text(index)?
            .ok_or_else(|| mismatch(index, "NULL where text was expected".to_owned()))
    }
}

/// sqlx's own error for a column that does not hold what was asked for.
fn mismatch(index: usize, what: String) -> StoreError {
    StoreError::Database(sqlx::Error::ColumnDecode {
        index: index.to_string(),
        source: what.into(),
    })
}

macro_rules! sqlx_columns {
    ($row:ty) => {
        impl Columns for $row {
            fn int(&self, index: usize) -> Result<i64, StoreError> {
                Ok(self.try_get(index)?)
            }

            fn text(&self, index: usize) -> Result<Option<String>, StoreError> {
                Ok(self.try_get(index)?)
            }
        }
    };
}
sqlx_columns!(sqlx::sqlite::SqliteRow);
sqlx_columns!(sqlx::postgres::PgRow);
sqlx_columns!(sqlx::mysql::MySqlRow);

/// [`fetch_all`] through sqlx on one of its connections (the types differ, the calls not).
macro_rules! sqlx_fetch_all {
    ($conn:expr, $sql:expr, $binds:expr, $decode:expr) => {{
        let mut query = sqlx::query(AssertSqlSafe($sql));
        for bind in $binds {
            query = query.bind(*bind);
        }
        let rows = query.fetch_all(&mut **$conn).await?;
        rows.iter().map(|row| $decode(row)).collect()
    }};
}

/// Runs `sql` (the backend's dialect, `?` or `$n` placeholders) with integer `binds` on
/// `conn`, and decodes every row it returns with `decode`. Bound the rows in the SQL
/// (`LIMIT`): all of them are in memory at once.
pub(crate) async fn fetch_all<T>(
    conn: &mut Connection,
    sql: &str,
    binds: &[i64],
    mut decode: impl FnMut(&dyn Columns) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    match conn {
        Connection::Sqlite(conn) => {
            let mut locked = conn.lock_handle().await?;
            let db = locked.as_raw_handle();
            blocking(|| step_all(db, sql, binds, &mut decode))
        }
        Connection::Postgres(conn) => sqlx_fetch_all!(conn, sql, binds, decode),
        Connection::MySql(conn) => sqlx_fetch_all!(conn, sql, binds, decode),
    }
}

/// Runs `work`, which blocks (SQLite reading pages, or waiting out its busy timeout), without
/// stalling the other tasks of a multi-threaded runtime: they move to another worker while it
/// runs. A single-threaded runtime (tests) has nowhere to move them, and just runs it.
fn blocking<R>(work: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// Prepares `sql` on `db`, binds `binds` to its parameters in order, and decodes every row.
fn step_all<T>(
    db: NonNull<ffi::sqlite3>,
    sql: &str,
    binds: &[i64],
    decode: &mut dyn FnMut(&dyn Columns) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let statement = Statement::prepare(db, sql)?;
    statement.bind_all(binds)?;
    let mut out = Vec::new();
    while statement.step()? {
        out.push(decode(&statement)?);
    }
    Ok(out)
}

/// A prepared SQLite statement on a handle locked out of sqlx's worker; finalized on drop.
struct Statement {
    db: NonNull<ffi::sqlite3>,
    raw: NonNull<ffi::sqlite3_stmt>,
}

impl Statement {
    fn prepare(db: NonNull<ffi::sqlite3>, sql: &str) -> Result<Self, StoreError> {
        let len = c_int::try_from(sql.len()).map_err(|_| StoreError::Sqlite {
            code: ffi::SQLITE_TOOBIG,
            message: format!("statement of {} bytes", sql.len()),
        })?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `db` is an open connection that this thread holds exclusively (sqlx's
        // handle lock); `sql` is valid for `len` bytes and need not end in a NUL when its
        // length is given. SQLite writes `raw` only.
        let code = unsafe {
            ffi::sqlite3_prepare_v2(
                db.as_ptr(),
                sql.as_ptr().cast(),
                len,
                &mut raw,
                std::ptr::null_mut(),
            )
        };
        if code != ffi::SQLITE_OK {
            return Err(error(db, code));
        }
        // SQLite returns no statement, and OK, for text holding no SQL.
        let raw = NonNull::new(raw).ok_or_else(|| StoreError::Sqlite {
            code: ffi::SQLITE_MISUSE,
            message: "no statement in the SQL".to_owned(),
        })?;
        Ok(Self { db, raw })
    }

    fn bind_all(&self, binds: &[i64]) -> Result<(), StoreError> {
        // SAFETY: `raw` is a live statement of this connection.
        let wanted = unsafe { ffi::sqlite3_bind_parameter_count(self.raw.as_ptr()) };
        if usize::try_from(wanted).ok() != Some(binds.len()) {
            return Err(StoreError::Sqlite {
                code: ffi::SQLITE_RANGE,
                message: format!("statement takes {wanted} parameters, given {}", binds.len()),
            });
        }
        for (index, value) in (1..).zip(binds) {
            // SAFETY: as above; `index` is from 1 to the parameter count.
            let code = unsafe { ffi::sqlite3_bind_int64(self.raw.as_ptr(), index, *value) };
            if code != ffi::SQLITE_OK {
                return Err(error(self.db, code));
            }
        }
        Ok(())
    }

    /// Steps once: `true` with a row to read, `false` when done.
    fn step(&self) -> Result<bool, StoreError> {
        // SAFETY: `raw` is a live statement of this connection, which this thread holds.
        match unsafe { ffi::sqlite3_step(self.raw.as_ptr()) } {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => Ok(false),
            code => Err(error(self.db, code)),
        }
    }

    /// The column's type, after checking `index` is one of the row's columns.
    fn column_type(&self, index: usize) -> Result<(c_int, c_int), StoreError> {
        // SAFETY: `raw` is a live statement with a current row.
        let count = unsafe { ffi::sqlite3_column_count(self.raw.as_ptr()) };
        let column = c_int::try_from(index)
            .ok()
            .filter(|column| *column < count)
            .ok_or_else(|| StoreError::Sqlite {
                code: ffi::SQLITE_RANGE,
                message: format!("column {index} of {count}"),
            })?;
        // SAFETY: as above, and `column` is in range.
        let kind = unsafe { ffi::sqlite3_column_type(self.raw.as_ptr(), column) };
        Ok((column, kind))
    }
}

impl Columns for Statement {
    fn int(&self, index: usize) -> Result<i64, StoreError> {
        match self.column_type(index)? {
            // SAFETY: the row is current and `column` in range.
            (column, ffi::SQLITE_INTEGER) => {
                Ok(unsafe { ffi::sqlite3_column_int64(self.raw.as_ptr(), column) })
            }
            (_, kind) => Err(mismatch(
                index,
                format!("SQLite type {kind}, not an integer"),
            )),
        }
    }

    fn text(&self, index: usize) -> Result<Option<String>, StoreError> {
        let (column, kind) = self.column_type(index)?;
        if kind == ffi::SQLITE_NULL {
            return Ok(None);
        }
        if kind != ffi::SQLITE_TEXT {
            return Err(mismatch(index, format!("SQLite type {kind}, not text")));
        }
        // SAFETY: the row is current and `column` in range. `sqlite3_column_text` comes
        // before `sqlite3_column_bytes`, as SQLite asks, and the bytes stay valid until the
        // next step, after this copy.
        let bytes = unsafe {
            let text = ffi::sqlite3_column_text(self.raw.as_ptr(), column);
            let len = ffi::sqlite3_column_bytes(self.raw.as_ptr(), column);
            if text.is_null() {
                return Ok(Some(String::new()));
            }
            std::slice::from_raw_parts(text, usize::try_from(len).unwrap_or(0))
        };
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| mismatch(index, "text that is not UTF-8".to_owned()))
    }
}

impl Drop for Statement {
    fn drop(&mut self) {
        // SAFETY: `raw` is live and finalized only here, on the thread holding the handle.
        unsafe { ffi::sqlite3_finalize(self.raw.as_ptr()) };
    }
}

/// SQLite's message for a failed call on `db`.
fn error(db: NonNull<ffi::sqlite3>, code: c_int) -> StoreError {
    // SAFETY: `db` is open and held by this thread; the message is copied before any other
    // call on it.
    let message = unsafe {
        let text = ffi::sqlite3_errmsg(db.as_ptr());
        if text.is_null() {
            String::new()
        } else {
            CStr::from_ptr(text).to_string_lossy().into_owned()
        }
    };
    StoreError::Sqlite { code, message }
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;

    async fn sqlite() -> Connection {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        sqlx::raw_sql(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score BIGINT NOT NULL);
             INSERT INTO t VALUES (1, 'ann', 30), (2, NULL, 10), (3, 'bö', 20), (4, 'dee', 20);",
        )
        .execute(&pool)
        .await
        .unwrap();
        Connection::Sqlite(pool.acquire().await.unwrap())
    }

    type Entry = (i64, Option<String>, i64);

    fn entry(row: &dyn Columns) -> Result<Entry, StoreError> {
        Ok((row.int(0)?, row.text(1)?, row.int(2)?))
    }

    // Multi-threaded, so the read runs under `block_in_place` as in the server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_rows_read_off_the_handle_equal_sqlx_rows() {
        let mut conn = sqlite().await;
        let sql = "SELECT id, name, score FROM t WHERE score >= ? ORDER BY score DESC, id LIMIT ?";
        let stepped = fetch_all(&mut conn, sql, &[15, 10], entry).await.unwrap();
        let Connection::Sqlite(inner) = &mut conn else {
            unreachable!()
        };
        let through_sqlx: Vec<Entry> = sqlx::query_as(sql)
            .bind(15)
            .bind(10)
            .fetch_all(&mut **inner)
            .await
            .unwrap();
        assert_eq!(stepped, through_sqlx);
        assert_eq!(
            stepped,
            [
                (1, Some("ann".to_owned()), 30),
                (3, Some("bö".to_owned()), 20),
                (4, Some("dee".to_owned()), 20)
            ]
        );
        // NULL text, and no rows at all.
        let null = fetch_all(
            &mut conn,
            "SELECT id, name, score FROM t WHERE id = 2",
            &[],
            entry,
        );
        assert_eq!(null.await.unwrap(), [(2, None, 10)]);
        let none = fetch_all(
            &mut conn,
            "SELECT id, name, score FROM t WHERE id > ?",
            &[9],
            entry,
        );
        assert!(none.await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn sqlite_reads_refuse_what_they_cannot_decode_and_keep_the_connection() {
        let mut conn = sqlite().await;
        let wrong_type = fetch_all(&mut conn, "SELECT name FROM t WHERE id = 1", &[], |row| {
            row.int(0)
        });
        let err = wrong_type.await.unwrap_err().to_string();
        assert!(err.contains("not an integer"), "{err}");
        let null = fetch_all(&mut conn, "SELECT name FROM t WHERE id = 2", &[], |row| {
            row.text_not_null(0)
        });
        assert!(null.await.unwrap_err().to_string().contains("NULL"));
        let past_end = fetch_all(&mut conn, "SELECT id FROM t", &[], |row| row.int(1));
        assert!(
            past_end
                .await
                .unwrap_err()
                .to_string()
                .contains("column 1 of 1")
        );
        let binds = fetch_all(&mut conn, "SELECT id FROM t WHERE id = ?", &[1, 2], |row| {
            row.int(0)
        });
        let err = binds.await.unwrap_err().to_string();
        assert!(err.contains("takes 1 parameters, given 2"), "{err}");
        let syntax = fetch_all(&mut conn, "SELEKT 1", &[], |row| row.int(0));
        let err = syntax.await.unwrap_err().to_string();
        assert!(err.contains("syntax error"), "{err}");
        let empty = fetch_all(&mut conn, "  ", &[], |row| row.int(0));
        assert!(empty.await.is_err());
        // The pool's only connection came back usable after every failure.
        let ok = fetch_all(&mut conn, "SELECT COUNT(*) FROM t", &[], |row| row.int(0));
        assert_eq!(ok.await.unwrap(), [4]);
    }
}
