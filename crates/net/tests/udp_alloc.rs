//! The batched UDP path allocates nothing per datagram once its batches exist.

use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tickwire_alloc_count::{CountingAllocator, thread_allocations};
use tickwire_net::udp::{BatchSocket, RecvBatch, SendBatch};
use tokio::time::timeout;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[tokio::test(flavor = "current_thread")]
async fn steady_state_send_and_receive_allocate_nothing() {
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let sender = BatchSocket::bind(loopback).unwrap();
    let receivers: Vec<BatchSocket> = (0..4)
        .map(|_| BatchSocket::bind(loopback).unwrap())
        .collect();
    let dests: Vec<SocketAddr> = receivers.iter().map(|r| r.local_addr().unwrap()).collect();
    let mut outbox = SendBatch::new();
    let mut inboxes: Vec<RecvBatch> = receivers.iter().map(|_| RecvBatch::new()).collect();

    // One round trip: fill a batch for all four receivers, send it, receive every datagram.
    let counted = Cell::new(0u64);
    let mut round = async |count: bool| {
        let before = thread_allocations();
        for i in 0..64u32 {
            outbox.push_with(dests[i as usize % 4], |slot| {
                slot[..4].copy_from_slice(&i.to_le_bytes());
                100
            });
        }
        sender.send_batch(&mut outbox).await.unwrap();
        for (receiver, inbox) in receivers.iter().zip(inboxes.iter_mut()) {
            let mut got = 0;
            while got < 16 {
                receiver.recv_batch(inbox).await.unwrap();
                got += inbox.iter().filter(|(_, d)| d.len() == 100).count();
            }
        }
        if count {
            counted.set(counted.get() + thread_allocations() - before);
        }
    };

    // Warm-up: tokio grows its list of deferred wakers the first time this task uses up its
    // cooperative budget (128 operations, about 20 rounds here), then reuses it.
    for _ in 0..50 {
        timeout(Duration::from_secs(5), round(false))
            .await
            .expect("warm-up round timed out");
    }
    for _ in 0..200 {
        timeout(Duration::from_secs(5), round(true))
            .await
            .expect("round timed out");
    }
    let allocations = counted.get();
    assert_eq!(
        allocations, 0,
        "200 rounds of 64 datagrams each way allocated {allocations} times"
    );
}
