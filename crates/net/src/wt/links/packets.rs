//! The packet path of [`WtLinks`]: datagrams in through quinn's endpoint to the sessions
//! they touched, and the touched sessions' packets out in `sendmmsg` batches.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::Instant;

use quinn_proto::{ConnectionHandle, DatagramEvent, Incoming, Transmit};

use super::session::Conn;
use super::{
    ARENA_BLOCK_BYTES, MAX_SEGMENTS, READ_BUDGET, WtLinkEvent, WtLinkId, WtLinks, arena_room,
};
use crate::worklist;
use crate::ws::{WsClosed, WsCounters};
use crate::wt::stats::WtCounters;

impl WtLinks {
    /// Reads every datagram waiting on the socket (at most 1024: returns `false` if it
    /// stopped with more waiting, so the driver calls it again without waiting for
    /// readiness), hands them to QUIC, sorts new connections (Retry, the caps), and runs
    /// every session they touched.
    pub fn handle_io(&mut self, now: Instant) -> bool {
        self.clock = self.clock.max(now);
        let Some(mut recv) = self.recv.take() else {
            return true;
        };
        let mut read = 0;
        let drained = loop {
            match recv.recv_from_fd(self.socket.as_fd()) {
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break true,
                Err(error) => {
                    tracing::debug!(%error, "webtransport: receive failed");
                    break true;
                }
            }
            for (from, data) in recv.iter() {
                self.datagram(now, from, data);
            }
            read += recv.len();
            if read >= READ_BUDGET {
                break false;
            }
        };
        self.recv = Some(recv);
        self.drive_touched(now);
        drained
    }

    /// One datagram into quinn's endpoint, which routes it.
    fn datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        arena_room(&mut self.arena, data.len(), ARENA_BLOCK_BYTES);
        self.arena.extend_from_slice(data);
        let data = self.arena.split();
        let mut buf = std::mem::take(&mut self.transmit);
        buf.clear();
        match self.endpoint.handle(now, from, None, None, data, &mut buf) {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(conn) = self.conns.get_mut(handle.0).and_then(Option::as_mut) {
                    conn.quic.handle_event(event);
                    self.touch(handle.0);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.incoming(now, incoming, &mut buf),
            Some(DatagramEvent::Response(transmit)) => self.queue_transmit(&transmit, &buf),
            None => {}
        }
        self.transmit = buf;
    }

    /// A new connection attempt: Retry, a refusal at a cap, or a new session.
    fn incoming(&mut self, now: Instant, incoming: Incoming, buf: &mut Vec<u8>) {
        WtCounters::bump(&self.counters.incoming);
        if self.config.retry && !incoming.remote_address_validated() {
            WtCounters::bump(&self.counters.retries_sent);
            match self.endpoint.retry(incoming, buf) {
                Ok(transmit) => self.queue_transmit(&transmit, buf),
                Err(error) => self.endpoint.ignore(error.into_incoming()),
            }
            return;
        }
        let ip = incoming.remote_address().ip().to_canonical();
        let at_ip = self.per_ip.get(&ip).copied().unwrap_or(0);
        let refused = if self.live >= self.config.max_sessions {
            Some(&self.counters.refused_total)
        } else if at_ip >= self.config.max_sessions_per_ip && !self.config.exempt.contains(&ip) {
            Some(&self.counters.refused_per_ip)
        } else {
            None
        };
        if let Some(counter) = refused {
            WtCounters::bump(counter);
            let transmit = self.endpoint.refuse(incoming, buf);
            self.queue_transmit(&transmit, buf);
            return;
        }
        match self.endpoint.accept(incoming, now, buf, None) {
            Ok((handle, quic)) => {
                let index = handle.0;
                if self.conns.len() <= index {
                    self.conns.resize_with(index + 1, || None);
                    self.generations.resize(index + 1, 0);
                }
                self.generations[index] = self.generations[index].wrapping_add(1);
                let conn = Conn::new(quic, self.generations[index], now, &self.shared);
                self.conns[index] = Some(conn);
                self.live += 1;
                *self.per_ip.entry(ip).or_default() += 1;
                self.touch(index);
            }
            Err(error) => {
                WtCounters::bump(&self.counters.handshakes_failed);
                if let Some(transmit) = error.response {
                    self.queue_transmit(&transmit, buf);
                }
            }
        }
    }

    /// Builds the packets of every session touched since the last flush and sends them,
    /// batched across sessions (`sendmmsg`).
    pub fn flush(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
        let mut buf = std::mem::take(&mut self.transmit);
        let dirty = std::mem::take(&mut self.dirty);
        for &index in &dirty {
            let Some(generation) = self.conns[index].as_mut().map(|conn| {
                conn.dirty = false;
                conn.generation
            }) else {
                continue;
            };
            if let Some((conn, mut ctx)) = self.split(WtLinkId::new(index, generation), now) {
                conn.write_out(&mut ctx);
            }
            loop {
                if self.send.is_full() {
                    self.send_batch();
                }
                let room = (self.send.capacity() - self.send.len()).clamp(1, MAX_SEGMENTS);
                buf.clear();
                let Some(conn) = self.conns[index].as_mut() else {
                    break;
                };
                let Some(transmit) = conn.quic.poll_transmit(now, room, &mut buf) else {
                    break;
                };
                self.queue_transmit(&transmit, &buf);
            }
            // Sending may move QUIC's timers (loss detection, pacing) and the control
            // stream's events may have closed the session.
            self.forward_endpoint_events(index);
            self.rearm(index);
        }
        self.dirty = worklist::reuse(dirty, &mut self.dirty);
        self.transmit = buf;
        self.send_batch();
        self.publish_counts();
    }

    /// Runs each session touched since the last call: QUIC's endpoint events both ways,
    /// then the session's own events.
    pub(super) fn drive_touched(&mut self, now: Instant) {
        let touched = std::mem::take(&mut self.touched);
        for &index in &touched {
            if let Some(conn) = self.conns[index].as_mut() {
                conn.touched = false;
            }
            self.drive(index, now);
        }
        self.touched = worklist::reuse(touched, &mut self.touched);
    }

    fn drive(&mut self, index: usize, now: Instant) {
        loop {
            let drained = self.forward_endpoint_events(index);
            let Some(generation) = self.conns[index].as_ref().map(|conn| conn.generation) else {
                return;
            };
            if drained {
                return self.remove(index);
            }
            let Some((conn, mut ctx)) = self.split(WtLinkId::new(index, generation), now) else {
                return;
            };
            let mut any = false;
            while let Some(event) = conn.quic.poll() {
                conn.handle_event(event, &mut ctx);
                any = true;
            }
            if !any {
                break;
            }
        }
        self.mark_dirty(index);
        self.rearm(index);
    }

    /// Hands a session's endpoint events to quinn's endpoint and its answers back; true if
    /// the session has drained (quinn forgot it).
    fn forward_endpoint_events(&mut self, index: usize) -> bool {
        let Some(conn) = self.conns[index].as_mut() else {
            return false;
        };
        let mut drained = false;
        while let Some(event) = conn.quic.poll_endpoint_events() {
            drained |= event.is_drained();
            if let Some(answer) = self.endpoint.handle_event(ConnectionHandle(index), event) {
                conn.quic.handle_event(answer);
            }
        }
        if drained {
            self.remove(index);
        }
        drained
    }

    /// Files the session's next timer.
    fn rearm(&mut self, index: usize) {
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        self.timers.set(index, conn.next_timeout());
    }

    fn remove(&mut self, index: usize) {
        let Some(conn) = self.conns[index].take() else {
            return;
        };
        self.timers.forget(index);
        self.live -= 1;
        let ip = conn.peer.ip().to_canonical();
        if let Some(count) = self.per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&ip);
            }
        }
        if conn.opened {
            WtCounters::bump(&self.counters.sessions_closed);
        }
        if conn.accepted {
            WsCounters::bump(&self.messages.connections_closed);
        }
        if conn.announced {
            self.events.push_back(WtLinkEvent::Closed {
                link: WtLinkId::new(index, conn.generation),
                closed: WsClosed::Lost,
            });
        }
    }

    /// Puts a transmit's datagrams in the send batch, one slot each (sending the batch
    /// whenever it fills).
    fn queue_transmit(&mut self, transmit: &Transmit, buf: &[u8]) {
        let size = transmit.size.min(buf.len());
        let segment = transmit.segment_size.unwrap_or(size).max(1);
        for datagram in buf[..size].chunks(segment) {
            if self.send.is_full() {
                self.send_batch();
            }
            if datagram.len() > self.send.slot_size() {
                self.dropped_would_block += 1;
                continue;
            }
            self.send.push(transmit.destination, datagram);
        }
    }

    /// One `sendmmsg` round for what the batch holds. A full socket buffer drops the rest
    /// (counted): QUIC takes it as loss and sends again, and nothing waits behind it.
    fn send_batch(&mut self) {
        if self.send.is_empty() {
            return;
        }
        if let Err(error) = self
            .send
            .send_to_fd(self.socket.as_fd(), self.socket_is_ipv6)
        {
            if error.kind() != io::ErrorKind::WouldBlock {
                tracing::debug!(%error, "webtransport: send failed");
            }
            self.dropped_would_block += self.send.len() as u64;
            self.send.clear();
        }
    }

    fn publish_counts(&mut self) {
        let counts = std::mem::take(&mut self.counts);
        let (wt, ws) = (&*self.counters, &*self.messages);
        for (counter, n) in [
            (&ws.messages_sent, counts.messages_sent),
            (&ws.bytes_sent, counts.bytes_sent),
            (&ws.messages_received, counts.messages_received),
            (&ws.bytes_received, counts.bytes_received),
            (&wt.datagrams_sent, counts.datagrams_sent),
            (&wt.datagrams_received, counts.datagrams_received),
            (&wt.stream_frames_sent, counts.frames_sent),
            (&wt.stream_frames_received, counts.frames_received),
        ] {
            if n > 0 {
                WsCounters::add(counter, n);
            }
        }
    }
}

/// Datagrams never fragmented, so quinn may probe the path's MTU: IPv4's don't-fragment
/// bit, or on an IPv6 socket (dual stack) IPv6's (and IPv4's for mapped peers, where the
/// kernel takes it).
pub(super) fn dont_fragment(socket: &UdpSocket, ipv6: bool) -> io::Result<()> {
    if !ipv6 {
        return crate::udp::set_dont_fragment(socket);
    }
    let _ = crate::udp::set_dont_fragment(socket);
    crate::udp::set_int_option(socket, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1)
}
