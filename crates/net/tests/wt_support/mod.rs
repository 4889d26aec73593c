//! What the `wt_*` tests share: a `WtLinks` driven by a thread of its own, as a shard would
//! drive it, and the wait on its socket.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tickwire_net::wt::WtLinks;

/// The thread serving the links, stopped and joined when dropped.
pub struct LinksThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LinksThread {
    /// Runs `serve` on a thread of its own; it should return once the flag it is given is
    /// set.
    pub fn spawn(serve: impl FnOnce(&AtomicBool) + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || serve(&stopping));
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for LinksThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A shard's wait between turns: until the links' socket is readable or their next
/// deadline, 5 ms at most (so a test's commands are seen).
pub fn wait_for_turn(links: &WtLinks) {
    let wait = links
        .poll_timeout()
        .map_or(Duration::from_millis(5), |at| {
            at.saturating_duration_since(Instant::now())
        })
        .min(Duration::from_millis(5));
    wait_readable(links, wait);
}

/// Waits until the links' socket is readable, or `wait` (at most a second) has passed.
fn wait_readable(links: &WtLinks, wait: Duration) {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: links.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = wait.as_millis().min(1000) as libc::c_int;
    // SAFETY: one valid pollfd for the call's duration.
    unsafe { libc::poll(&mut poll, 1, millis) };
}
