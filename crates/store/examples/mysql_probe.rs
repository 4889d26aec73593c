//! Where a MySQL/MariaDB read's time goes: runs one of seed 004's reads `N` times on one sqlx
//! connection and prints the mean wall time per query, with the database server's CPU time
//! per query when `--server-pid` names its process on this machine (`/proc/PID/stat`, utime +
//! stime). The client's own CPU is what `/usr/bin/time` says about this process.
//!
//! ```text
//! cargo run --release -p tickwire-store --example mysql_probe -- \
//!     mysql://root@127.0.0.1:3306/tickwire_bench seek 5000 --server-pid $(pgrep -x mariadbd)
//! ```
//!
//! Reads: `seek` (one row by id), `top-desc` (top 1,000 reading the index backwards),
//! `top-asc` (the same rows' worth reading it forwards), `top-text` (the top 1,000 over the
//! text protocol), `top-concat` (the top 1,000 packed into one `GROUP_CONCAT` row and parsed
//! here). The table `tickwire_probe_accounts` (50,000 rows, as seed 004's) is made on first
//! use and kept for the next run; drop it when done.

use std::time::Instant;

use sqlx::mysql::MySqlConnection;
use sqlx::{Connection as _, Executor as _, Row as _};

const ROWS: i64 = 50_000;
const TABLE: &str = "tickwire_probe_accounts";

fn usage() -> ! {
    eprintln!(
        "usage: mysql_probe URL seek|top-desc|top-asc|top-text|top-concat N [--server-pid PID]"
    );
    std::process::exit(2);
}

/// Clock ticks of CPU (user + system) the process has used.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

async fn fill(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    let count: Option<i64> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {TABLE}")))
            .fetch_one(&mut *conn)
            .await
            .ok();
    if count == Some(ROWS) {
        return Ok(());
    }
    conn.execute(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {TABLE}")))
        .await?;
    conn.execute(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {TABLE} (id BIGINT NOT NULL PRIMARY KEY, random_num BIGINT NOT NULL, \
         random_indexed_num BIGINT NOT NULL, INDEX {TABLE}_indexed (random_indexed_num)) \
         ENGINE=InnoDB"
    )))
    .await?;
    for chunk in (1..=ROWS).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|id| {
                format!(
                    "({id},{},{})",
                    id * 7919 % 2_000_000,
                    id * 104_729 % 20_000_000
                )
            })
            .collect();
        let sql = format!("INSERT INTO {TABLE} VALUES {}", values.join(","));
        conn.execute(sqlx::AssertSqlSafe(sql)).await?;
    }
    Ok(())
}

async fn read_once(conn: &mut MySqlConnection, read: &str, i: i64) -> Result<(), sqlx::Error> {
    let top = |order: &str| {
        format!(
            "SELECT id, random_indexed_num FROM {TABLE} ORDER BY random_indexed_num {order} LIMIT 1000"
        )
    };
    let rows = match read {
        "seek" => {
            let sql = format!("SELECT id, random_num FROM {TABLE} WHERE id = ?");
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(i * 7717 % ROWS + 1)
                .fetch_one(&mut *conn)
                .await?;
            let _: i64 = row.try_get(1)?;
            return Ok(());
        }
        "top-desc" => {
            sqlx::query(sqlx::AssertSqlSafe(top("DESC")))
                .fetch_all(&mut *conn)
                .await?
        }
        "top-asc" => {
            sqlx::query(sqlx::AssertSqlSafe(top("ASC")))
                .fetch_all(&mut *conn)
                .await?
        }
        "top-text" => {
            sqlx::raw_sql(sqlx::AssertSqlSafe(top("DESC")))
                .fetch_all(&mut *conn)
                .await?
        }
        "top-concat" => {
            let sql = format!(
                "SELECT GROUP_CONCAT(id, ' ', random_indexed_num SEPARATOR ' ') FROM ({}) top",
                top("DESC")
            );
            let packed: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(&mut *conn)
                .await?;
            let numbers: Vec<i64> = packed.split(' ').filter_map(|n| n.parse().ok()).collect();
            assert_eq!(numbers.len(), 2000, "GROUP_CONCAT truncated the page");
            return Ok(());
        }
        _ => usage(),
    };
    for row in &rows {
        let _: (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
    }
    assert_eq!(rows.len(), 1000);
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(read), Some(n)) = (args.first(), args.get(1), args.get(2)) else {
        usage()
    };
    let n: i64 = n.parse().unwrap_or_else(|_| usage());
    let server_pid: Option<u32> = match (args.get(3).map(String::as_str), args.get(4)) {
        (Some("--server-pid"), Some(pid)) => Some(pid.parse().unwrap_or_else(|_| usage())),
        (None, None) => None,
        _ => usage(),
    };
    // One connection, one query at a time, as seed 004's telnet commands.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        let mut conn = MySqlConnection::connect(url).await?;
        fill(&mut conn).await?;
        read_once(&mut conn, read, 0).await?; // prepared, and pages warm
        let server_before = server_pid.and_then(cpu_ticks);
        let start = Instant::now();
        for i in 0..n {
            read_once(&mut conn, read, i).await?;
        }
        let wall_ms = start.elapsed().as_secs_f64() * 1e3 / n as f64;
        let server_ms = server_pid
            .and_then(cpu_ticks)
            .zip(server_before)
            .map(|(after, before)| {
                // SAFETY: sysconf has no preconditions.
                let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
                (after - before) as f64 * 1e3 / hz / n as f64
            });
        Ok::<_, sqlx::Error>((wall_ms, server_ms))
    });
    match result {
        Ok((wall_ms, server_ms)) => {
            print!("{read}: {wall_ms:.4} ms per query");
            if let Some(server_ms) = server_ms {
                print!(", database server CPU {server_ms:.4} ms per query");
            }
            println!();
        }
        Err(error) => {
            eprintln!("mysql_probe: {error}");
            std::process::exit(1);
        }
    }
}
