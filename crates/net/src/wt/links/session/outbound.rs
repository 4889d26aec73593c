//! What a session sends: datagrams handed to QUIC at once, frames gathered for one stream
//! write per flush.

use bytes::{Buf, BytesMut};
use quinn_proto::{SendDatagramError, WriteError};
use tickwire_proto::reliable::ChannelKind;

use super::{Conn, Ctx, KEEP_BUFFER_BYTES, Phase, SEND_BLOCK_DATAGRAMS};
use crate::ws::{CloseCode, WsCounters, WsSendError};
use crate::wt::framing::{FRAME_HEADER_BYTES, datagram_header_bytes, put_data_frame};
use crate::wt::links::arena_room;
use crate::wt::stats::WtCounters;

impl Conn {
    /// Queues `message`: a datagram for an unreliable channel when it fits, a frame
    /// otherwise. Returns whether anything was queued for the next flush.
    pub(in crate::wt::links) fn send(
        &mut self,
        channel: u8,
        message: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<(), WsSendError> {
        if self.phase != Phase::Open {
            return Err(WsSendError::Closed);
        }
        let shared = ctx.shared;
        let Some(&kind) = shared.channels.get(usize::from(channel)) else {
            return Err(WsSendError::UnknownChannel {
                channel,
                count: shared.channels.len(),
            });
        };
        let len = message.len();
        if len > shared.max_payload {
            WsCounters::bump(&ctx.messages.sends_too_large);
            return Err(WsSendError::TooLarge {
                len,
                max: shared.max_payload,
            });
        }
        if kind != ChannelKind::Reliable {
            if self.send_datagram(channel, kind, message, ctx) {
                return Ok(());
            }
            WtCounters::bump(&ctx.counters.datagrams_too_large);
            if self.blocked {
                // An unreliable message waits for nobody: behind a backlog it is stale.
                WsCounters::bump(&ctx.messages.unreliable_dropped);
                return Ok(());
            }
        }
        let queued = self.out.len();
        if queued + FRAME_HEADER_BYTES + 1 + len > shared.max_reliable_bytes {
            WsCounters::bump(&ctx.messages.closed_slow_client);
            let error = WsSendError::SlowClient {
                queued,
                len,
                max: shared.max_reliable_bytes,
            };
            self.close_server(CloseCode::SlowClient, &error.to_string(), true, ctx);
            return Err(error);
        }
        put_data_frame(&mut self.out, channel, message);
        ctx.counts.frames_sent += 1;
        ctx.counts.messages_sent += 1;
        ctx.counts.bytes_sent += len as u64;
        Ok(())
    }

    /// Hands a datagram to QUIC (whose send buffer drops its oldest past 64 KiB, so a slow
    /// client never holds snapshots back); false if it does not fit the path.
    fn send_datagram(
        &mut self,
        channel: u8,
        kind: ChannelKind,
        message: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let size = self.prefix.len() + datagram_header_bytes(kind) + message.len();
        if self
            .quic
            .datagrams()
            .max_size()
            .is_none_or(|max| size > max)
        {
            return false;
        }
        let block = &mut self.send_block;
        arena_room(block, size, size * SEND_BLOCK_DATAGRAMS);
        block.extend_from_slice(&self.prefix);
        block.extend_from_slice(&[channel]);
        if kind == ChannelKind::UnreliableSequenced {
            let sequence = &mut self.sequences[usize::from(channel)];
            *sequence = sequence.wrapping_add(1);
            block.extend_from_slice(&sequence.to_le_bytes());
        }
        block.extend_from_slice(message);
        let datagram = block.split().freeze();
        match self.quic.datagrams().send(datagram, true) {
            Ok(()) => {
                ctx.counts.datagrams_sent += 1;
                ctx.counts.messages_sent += 1;
                ctx.counts.bytes_sent += message.len() as u64;
                true
            }
            Err(SendDatagramError::TooLarge) => false,
            // The client took no datagrams: an unreliable message is dropped.
            Err(_) => true,
        }
    }

    /// Moves framed bytes into QUIC's stream (one write per flush), and finishes the stream
    /// behind a close frame.
    pub(in crate::wt::links) fn write_out(&mut self, ctx: &mut Ctx<'_>) {
        let Some(id) = self.control else {
            self.out.clear();
            return;
        };
        while !self.out.is_empty() {
            match self.quic.send_stream(id).write(&self.out) {
                Ok(0) | Err(WriteError::Blocked) => {
                    self.blocked = true;
                    return;
                }
                Ok(n) => self.out.advance(n),
                Err(WriteError::Stopped(_) | WriteError::ClosedStream) => {
                    return self.control_stopped(ctx);
                }
            }
        }
        self.blocked = false;
        if self.out.capacity() > KEEP_BUFFER_BYTES {
            self.out = BytesMut::new();
        }
        if self.finish {
            self.finish = false;
            let _ = self.quic.send_stream(id).finish();
        }
    }
}
