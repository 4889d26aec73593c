//! A worker's WebTransport sessions: the shard's own [`WtLinks`] on a UDP port of its own,
//! driven by the worker's thread like its WebSocket connections (no task, lock or hop per
//! session), and what it needs beside them: the token check every transport shares and
//! the certificate hash matchmaking hands out.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use tickwire_net::ws::WsEndpoint;
use tickwire_net::wt::WtLinks;
use tokio::io::unix::AsyncFd;

/// The hash of the certificate a shard's WebTransport port presents, as matchmaking hands
/// it out (`None` with an operator's certificate). The worker writes it when its
/// self-signed certificate is renewed; the HTTP side reads it for every answer.
#[derive(Debug, Clone, Default)]
pub struct CertHash(Arc<Mutex<Option<String>>>);

impl CertHash {
    /// The hash in use.
    pub fn get(&self) -> Option<String> {
        self.lock().clone()
    }

    fn set(&self, hash: Option<&str>) {
        let mut held = self.lock();
        if held.as_deref() != hash {
            *held = hash.map(str::to_owned);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<String>> {
        self.0.lock().unwrap_or_else(|poison| poison.into_inner())
    }
}

/// What a worker is given to serve WebTransport (see [`Control::WebTransport`]).
///
/// [`Control::WebTransport`]: super::Control::WebTransport
pub struct WebTransport {
    /// The shard's sessions, on its bound socket.
    pub links: WtLinks,
    /// The WebSocket endpoint, for the connect-token check every transport shares (and the
    /// connection cap and shutdown phase it enforces).
    pub doorman: WsEndpoint,
    /// Where the certificate's hash is published.
    pub cert: CertHash,
}

/// [`WebTransport`] with the readiness of its socket registered in the worker's runtime.
pub(super) struct WtHost {
    /// A duplicate of the links' socket descriptor (the same socket), for its readiness.
    ready: AsyncFd<OwnedFd>,
    /// `handle_io` stopped at its budget with datagrams still waiting.
    more: bool,
    pub(super) links: WtLinks,
    pub(super) doorman: WsEndpoint,
    cert: CertHash,
}

impl WtHost {
    /// Registers the socket with the current (worker's) runtime.
    pub(super) fn new(serve: WebTransport) -> io::Result<Self> {
        let socket = serve.links.as_fd().try_clone_to_owned()?;
        // SAFETY: the AsyncFd owns its duplicate descriptor, which stays open and refers to
        // the same socket for the AsyncFd's whole life.
        let ready =
            unsafe { AsyncFd::register_with_interest(socket, tokio::io::Interest::READABLE) }
                .map_err(|error| error.into_parts().1)?;
        serve.cert.set(serve.links.cert_sha256());
        Ok(Self {
            ready,
            more: false,
            links: serve.links,
            doorman: serve.doorman,
            cert: serve.cert,
        })
    }

    /// Waits until the socket may hold datagrams.
    pub(super) async fn readable(&self) -> io::Result<()> {
        if self.more {
            return Ok(());
        }
        let mut guard = self.ready.readable().await?;
        guard.retain_ready();
        Ok(())
    }

    /// Reads what waits in the socket (up to the links' budget), clearing the readiness
    /// once it is empty.
    pub(super) fn handle_io(&mut self, now: Instant) {
        // Taken before the reads, so readiness that arrives during them is not cleared.
        let mut context = Context::from_waker(Waker::noop());
        let guard = match self.ready.poll_read_ready(&mut context) {
            Poll::Ready(Ok(guard)) => Some(guard),
            _ => None,
        };
        let emptied = self.links.handle_io(now);
        self.more = !emptied;
        if let (true, Some(mut guard)) = (emptied, guard) {
            guard.clear_ready();
        }
    }

    /// Runs the links' timers if due, and publishes a renewed certificate's hash.
    pub(super) fn handle_timeout(&mut self, now: Instant) {
        if self.links.poll_timeout().is_some_and(|at| at <= now) {
            self.links.handle_timeout(now);
            self.cert.set(self.links.cert_sha256());
        }
    }
}
