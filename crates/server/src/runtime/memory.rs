//! Giving memory back after a crowd leaves.
//!
//! glibc's allocator keeps what a program frees for its next allocations: a crowd of 5,000
//! players that leaves frees its connections, buffers and snapshot histories, but the pages
//! stay with the process (RSS 17 → 186 MB and never back, in the hostile-input suite's run).
//! Only the free space at the very top of a heap is returned by itself; everything freed
//! below a live allocation waits for `malloc_trim`, which hands every wholly free page back
//! to the kernel (`madvise(MADV_DONTNEED)`) and keeps the allocations where they are.
//!
//! Every [`CHECK_INTERVAL`], the runtime compares its anonymous resident memory with the
//! memory in use (the counting allocator's heap figure, when the binary installs it, and
//! what the embedding program's C libraries allocate beside it, as `tickwire serve`'s
//! SQLite page cache: `Extras::memory_outside_heap`): when more than [`SLACK_BYTES`] and
//! half of that again are resident but free, it trims, on a
//! blocking thread (a trim walks every arena: milliseconds on a large heap, never on a
//! shard). Anonymous, not the whole RSS: the executable's own pages, mapped from its file
//! as code first runs, are most of a release build's RSS (19 of 32 MB in an hour's soak)
//! and no trim can give them back; counted in, they made every check trim.

use std::time::Duration;

/// How often the resident and used figures are compared.
pub(super) const CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Free but resident memory always tolerated: below it a trim is not worth its walk.
pub(super) const SLACK_BYTES: u64 = 16 << 20;

/// What a trim did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Trimmed {
    /// Anonymous resident bytes before and after.
    pub(super) before: u64,
    pub(super) after: u64,
}

/// Whether `anonymous` bytes resident for `in_use` bytes allocated leave enough free to
/// trim.
pub(super) fn worth_trimming(anonymous: u64, in_use: u64) -> bool {
    anonymous.saturating_sub(in_use) > SLACK_BYTES.max(in_use / 2)
}

/// This process's anonymous resident memory, bytes: `/proc/self/statm`'s resident pages
/// less its shared ones (those backed by a file: the executable, the libraries).
pub(super) fn anonymous_resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut fields = statm.split_whitespace().skip(1);
    let resident: u64 = fields.next()?.parse().ok()?;
    let shared: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(resident.saturating_sub(shared) * u64::try_from(page).ok()?)
}

/// Returns every wholly free page of every heap to the kernel (glibc); elsewhere nothing
/// to do, as other allocators return memory on their own schedule.
pub(super) fn trim() -> Option<Trimmed> {
    let before = anonymous_resident_bytes()?;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's own free memory.
    unsafe {
        libc::malloc_trim(0);
    }
    Some(Trimmed {
        before,
        after: anonymous_resident_bytes()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executables_own_pages_are_not_counted_as_anonymous() {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let shared: u64 = statm.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert!(shared > 0, "a test binary runs from its file: {statm}");
        let resident: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let anonymous = anonymous_resident_bytes().unwrap();
        assert!(
            anonymous > 0 && anonymous < resident * page,
            "{anonymous} anonymous of {} resident",
            resident * page
        );
    }

    #[test]
    fn a_trim_is_worth_it_only_past_the_slack_and_half_the_heap() {
        let mib = 1 << 20;
        assert!(
            !worth_trimming(20 * mib, 10 * mib),
            "10 MiB free: under the slack"
        );
        assert!(worth_trimming(40 * mib, 10 * mib), "30 MiB free");
        assert!(
            !worth_trimming(250 * mib, 200 * mib),
            "50 MiB free of a 200 MiB heap"
        );
        assert!(worth_trimming(320 * mib, 200 * mib));
        assert!(!worth_trimming(10 * mib, 20 * mib), "never negative");
    }

    /// A crowd's worth of small allocations, every 16th kept (as a few long-lived objects
    /// are among a crowd's), then freed: the free pages stay resident until a trim.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_trim_returns_what_a_crowd_freed() {
        // On its own thread: a fresh allocator arena, untouched by the other tests.
        std::thread::spawn(|| {
            let chunks: Vec<Vec<u8>> = (0..24_000).map(|i| vec![i as u8; 4000]).collect();
            let mut keepers = Vec::new();
            for (i, chunk) in chunks.into_iter().enumerate() {
                if i % 16 == 0 {
                    keepers.push(chunk);
                }
            }
            let trimmed = trim().expect("/proc/self/statm");
            let returned = trimmed.before.saturating_sub(trimmed.after);
            assert!(
                returned > 40 << 20,
                "a trim gave back {} MiB of the ~86 MiB freed",
                returned >> 20
            );
            drop(keepers);
        })
        .join()
        .unwrap();
    }
}
