//! The tokio driver: moves datagrams and time between a [`BatchSocket`] and a sans-IO
//! [`Endpoint`] (a protocol server or client). One driver per worker thread; the endpoint
//! and its connections live in it, so nothing on the packet path is shared or locked.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickwire_proto::{Client, Endpoint, Server};

use crate::udp::{BatchSocket, RecvBatch, SendBatch};

/// The shortest wait between two turns of the loop when the endpoint reports a deadline
/// that has already passed.
pub const MIN_WAIT: Duration = Duration::from_millis(1);

/// A driver running the protocol's server endpoint.
pub type ServerDriver = Driver<Server>;
/// A driver running the protocol's client endpoint.
pub type ClientDriver = Driver<Client>;

/// Counters of what the driver moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// `recvmmsg` batches taken in.
    pub receive_batches: u64,
    /// `sendmmsg` batches handed to the socket.
    pub send_batches: u64,
}

/// Runs an [`Endpoint`] over a [`BatchSocket`].
///
/// The application owns the driver and calls [`next_event`](Self::next_event) in a loop;
/// between events it reaches the endpoint through [`endpoint_mut`](Self::endpoint_mut)
/// (to send or disconnect) and calls [`flush`](Self::flush) when it wants queued data on
/// the wire without waiting for the next event.
///
/// ```no_run
/// # use tickwire_net::driver::ServerDriver;
/// # use tickwire_proto::ServerEvent;
/// # async fn echo(mut driver: ServerDriver) -> std::io::Result<()> {
/// loop {
///     if let ServerEvent::Message { connection, channel, message } = driver.next_event().await? {
///         let now = std::time::Instant::now();
///         let _ = driver.endpoint_mut().send(now, connection, channel, message);
///     }
/// }
/// # }
/// ```
pub struct Driver<E: Endpoint> {
    socket: BatchSocket,
    endpoint: E,
    inbox: RecvBatch,
    outbox: SendBatch,
    stats: DriverStats,
}

impl<E: Endpoint> Driver<E> {
    /// A driver for `endpoint` on `socket`.
    pub fn new(socket: BatchSocket, endpoint: E) -> Self {
        Self {
            socket,
            endpoint,
            inbox: RecvBatch::new(),
            outbox: SendBatch::new(),
            stats: DriverStats::default(),
        }
    }

    /// The endpoint, to read its state and statistics.
    pub fn endpoint(&self) -> &E {
        &self.endpoint
    }

    /// The endpoint, to queue messages or disconnect.
    pub fn endpoint_mut(&mut self) -> &mut E {
        &mut self.endpoint
    }

    /// The socket's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// What the driver moved so far.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// Sends every datagram the endpoint has ready, `sendmmsg` batch by batch.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.stats.send_batches +=
            transmit(&mut self.endpoint, &self.socket, &mut self.outbox).await?;
        Ok(())
    }

    /// Drives the socket and the endpoint's timers until the endpoint reports an event.
    /// Queued data is flushed before every wait.
    pub async fn next_event(&mut self) -> io::Result<E::Event> {
        loop {
            if let Some(event) = self.endpoint.poll_event() {
                return Ok(event);
            }
            let now = Instant::now();
            if self.endpoint.poll_timeout().is_some_and(|at| at <= now) {
                // What arrived while nobody polled comes first: a connection whose packets
                // wait in the socket has not timed out (a driver polled late, on a busy
                // thread, once read its timeout before the server's goodbye beside it).
                self.take_waiting(now)?;
                if let Some(event) = self.endpoint.poll_event() {
                    return Ok(event);
                }
                self.endpoint.handle_timeout(now);
                if let Some(event) = self.endpoint.poll_event() {
                    return Ok(event);
                }
            }
            // A due deadline may be a resend or keepalive, which only `poll_transmit` clears.
            self.flush().await?;
            // Never spin on a deadline the endpoint still reports as past.
            let deadline = self
                .endpoint
                .poll_timeout()
                .map(|at| at.max(now + MIN_WAIT));
            let received = tokio::select! {
                received = self.socket.recv_batch(&mut self.inbox) => Some(received?),
                () = sleep_until(deadline) => None,
            };
            if received.is_some() {
                self.stats.receive_batches += 1;
                let now = Instant::now();
                for (from, datagram) in &self.inbox {
                    self.endpoint.handle_datagram(now, from, datagram);
                }
            }
        }
    }

    /// Hands the endpoint every datagram already waiting in the socket, without waiting.
    fn take_waiting(&mut self, now: Instant) -> io::Result<()> {
        loop {
            match self.socket.try_recv_batch(&mut self.inbox) {
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) => return Err(error),
            }
            self.stats.receive_batches += 1;
            for (from, datagram) in &self.inbox {
                self.endpoint.handle_datagram(now, from, datagram);
            }
            if self.inbox.len() < self.inbox.capacity() {
                return Ok(());
            }
        }
    }
}

/// Sends every datagram `endpoint` has ready through `socket`, `sendmmsg` batch by batch,
/// each written straight into its slot of `outbox`. Returns the batches sent. For loops that
/// own an endpoint but need more than [`Driver`] offers (a shard worker).
///
/// # Panics
///
/// If `outbox`'s slots are shorter than the MTU (`poll_transmit` writes at most that).
pub async fn transmit<E: Endpoint>(
    endpoint: &mut E,
    socket: &BatchSocket,
    outbox: &mut SendBatch,
) -> io::Result<u64> {
    let now = Instant::now();
    let mut batches = 0;
    loop {
        if outbox.is_full() {
            socket.send_batch(outbox).await?;
            batches += 1;
        }
        let queued = outbox.push_addressed(|slot| {
            endpoint
                .poll_transmit(now, slot)
                .map(|transmit| (transmit.destination, transmit.len))
        });
        if !queued {
            break;
        }
    }
    if !outbox.is_empty() {
        socket.send_batch(outbox).await?;
        batches += 1;
    }
    Ok(batches)
}

/// Sleeps until `deadline`, or forever without one.
pub async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}
