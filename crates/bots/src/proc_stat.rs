//! A process's CPU time, resident memory and UDP receive drops from `/proc` (Linux).

use std::collections::HashSet;
use std::io;

/// CPU time and RSS of one process at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessSample {
    /// User plus system CPU time so far, in seconds.
    pub cpu_s: f64,
    /// Resident set size, in bytes.
    pub rss_bytes: u64,
    /// Of it, anonymous memory (`RssAnon`): the heap, stacks and buffers, without the
    /// executable's and libraries' pages mapped from their files.
    pub anon_bytes: u64,
}

/// Reads `/proc/<pid>/stat` (utime + stime, in clock ticks of `sysconf(_SC_CLK_TCK)`) and
/// `/proc/<pid>/status` (`VmRSS`, `RssAnon`). `pid` 0 means this process.
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
        rss_bytes: status_kib(&status, "VmRSS:").unwrap_or(0) * 1024,
        anon_bytes: status_kib(&status, "RssAnon:").unwrap_or(0) * 1024,
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

/// Datagrams the kernel dropped because one of the process's UDP sockets was full (the
/// `drops` column of `/proc/<pid>/net/udp{,6}`, summed over the sockets the process holds;
/// counted since each socket opened). A receiver that does not keep up shows here: a load
/// tool whose sockets drop measured itself, a server whose socket drops was past its limit.
/// `pid` 0 means this process.
pub fn udp_drops(pid: u32) -> io::Result<u64> {
    let dir = if pid == 0 {
        "/proc/self".to_string()
    } else {
        format!("/proc/{pid}")
    };
    let mut inodes = HashSet::new();
    for entry in std::fs::read_dir(format!("{dir}/fd"))? {
        // A descriptor closed between the listing and the read is simply not counted.
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        if let Some(inode) = target
            .to_str()
            .and_then(|t| t.strip_prefix("socket:["))
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.parse::<u64>().ok())
        {
            inodes.insert(inode);
        }
    }
    let mut drops = 0;
    for table in ["udp", "udp6"] {
        if let Ok(text) = std::fs::read_to_string(format!("{dir}/net/{table}")) {
            drops += socket_drops(&text, &inodes);
        }
    }
    Ok(drops)
}

/// Sums the `drops` column (the last) of a `/proc/net/udp` table over the rows whose
/// `inode` (the tenth column) is in `inodes`.
fn socket_drops(table: &str, inodes: &HashSet<u64>) -> u64 {
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let columns: Vec<&str> = row.split_whitespace().collect();
            let inode: u64 = columns.get(9)?.parse().ok()?;
            let drops: u64 = columns.last()?.parse().ok()?;
            inodes.contains(&inode).then_some(drops)
        })
        .sum()
}

/// The KiB figure of `/proc/<pid>/status`'s line starting with `field`.
fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_after_a_command_name_with_spaces() {
        let stat = "1234 (tw (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(cpu_ticks(stat), Some(325));
        let status = "Name:\tx\nVmRSS:\t   7900 kB\nRssAnon:\t    2100 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(7900));
        assert_eq!(status_kib(status, "RssAnon:"), Some(2100));
        assert_eq!(status_kib(status, "RssShmem:"), None);
    }

    #[test]
    fn udp_drops_are_summed_over_the_processes_own_sockets() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  123: 0100007F:A1B2 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17
  124: 0100007F:A1B3 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4343 2 0000000000000000 5
  125: 0100007F:A1B4 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4444 2 0000000000000000 100
";
        let ours = HashSet::from([4242, 4343]);
        assert_eq!(socket_drops(table, &ours), 22);
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(
            udp_drops(0).unwrap(),
            0,
            "a fresh socket has dropped nothing"
        );
        drop(socket);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let sample = sample(0).unwrap();
        assert!(sample.rss_bytes > 0);
    }
}
