//! A process's CPU time and resident memory from `/proc` (Linux).

use std::io;

/// CPU time and RSS of one process at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessSample {
    /// User plus system CPU time so far, in seconds.
    pub cpu_s: f64,
    /// Resident set size, in bytes.
    pub rss_bytes: u64,
}

/// Reads `/proc/<pid>/stat` (utime + stime, in clock ticks of `sysconf(_SC_CLK_TCK)`) and
/// `/proc/<pid>/status` (`VmRSS`). `pid` 0 means this process.
pub fn sample(pid: u32) -> io::Result<ProcessSample> {
    let dir = if pid == 0 {
        "/proc/self".to_string()
    } else {
        format!("/proc/{pid}")
    };
    let stat = std::fs::read_to_string(format!("{dir}/stat"))?;
    let status = std::fs::read_to_string(format!("{dir}/status"))?;
    let ticks = cpu_ticks(&stat)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable /proc stat"))?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok(ProcessSample {
        cpu_s: ticks as f64 / per_second,
        rss_bytes: rss_bytes(&status).unwrap_or(0),
    })
}

/// utime + stime: fields 14 and 15, counted after the parenthesised command name (which
/// may itself hold spaces and parentheses).
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // Field 3 (state) is the first after the name; utime is field 14.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_after_a_command_name_with_spaces() {
        let stat = "1234 (tw (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(cpu_ticks(stat), Some(325));
        assert_eq!(
            rss_bytes("Name:\tx\nVmRSS:\t   7900 kB\n"),
            Some(7900 * 1024)
        );
    }

    #[test]
    fn this_process_can_be_sampled() {
        let sample = sample(0).unwrap();
        assert!(sample.rss_bytes > 0);
    }
}
