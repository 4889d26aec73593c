//! Batched UDP on real loopback sockets: what arrives, from where, what is dropped, and that
//! a bad destination never stops the rest of a batch.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use tickwire_net::udp::{
    BatchSocket, RECV_BUFFER_BYTES, RecvBatch, SendBatch, bind, bind_reuseport,
};
use tokio::io::Interest;
use tokio::time::timeout;

/// Long enough for a loaded CI machine, short enough that a lost datagram fails fast.
const TIMEOUT: Duration = Duration::from_secs(5);

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Datagram `i` of a test: its index in the first four bytes, then a pattern derived from it,
/// `len(i)` bytes in all (4..=1403, so sizes vary widely).
fn len(i: u32) -> usize {
    4 + (i as usize * 37) % 1400
}

fn fill(i: u32, slot: &mut [u8]) -> usize {
    let n = len(i);
    slot[..4].copy_from_slice(&i.to_le_bytes());
    for (k, b) in slot[4..n].iter_mut().enumerate() {
        *b = (i as usize * 7 + k) as u8;
    }
    n
}

fn check(datagram: &[u8]) -> u32 {
    let i = u32::from_le_bytes(
        datagram[..4]
            .try_into()
            .expect("datagram shorter than 4 bytes"),
    );
    let mut expected = vec![0; len(i)];
    fill(i, &mut expected);
    assert_eq!(
        datagram,
        &expected[..],
        "datagram {i} arrived with wrong bytes"
    );
    i
}

/// Sends everything in `items` through `batch`, a full batch per `send_batch`.
async fn send_all(socket: &BatchSocket, batch: &mut SendBatch, items: &[(SocketAddr, u32)]) {
    for &(dest, i) in items {
        if !batch.push_with(dest, |slot| fill(i, slot)) {
            socket.send_batch(batch).await.expect("send_batch failed");
            assert!(
                batch.push_with(dest, |slot| fill(i, slot)),
                "empty batch refused a push"
            );
        }
    }
    socket.send_batch(batch).await.expect("send_batch failed");
    assert!(
        batch.is_empty(),
        "send_batch returned with datagrams still queued"
    );
}

/// Receives until `want` datagrams arrived, each checked and returned as (index, source).
async fn recv_n(socket: &BatchSocket, want: usize) -> Vec<(u32, SocketAddr)> {
    let mut batch = RecvBatch::new();
    let mut got = Vec::new();
    let result = timeout(TIMEOUT, async {
        while got.len() < want {
            socket
                .recv_batch(&mut batch)
                .await
                .expect("recv_batch failed");
            got.extend(batch.iter().map(|(from, datagram)| (check(datagram), from)));
        }
    })
    .await;
    let local = socket.local_addr().unwrap();
    assert!(
        result.is_ok(),
        "{local} received {} of {want} datagrams within {TIMEOUT:?}",
        got.len()
    );
    got
}

#[tokio::test]
async fn a_batch_of_200_varied_datagrams_to_3_sockets_arrives_complete() {
    let sender = BatchSocket::bind(loopback()).unwrap();
    let from = sender.local_addr().unwrap();
    let receivers: Vec<BatchSocket> = (0..3)
        .map(|_| BatchSocket::bind(loopback()).unwrap())
        .collect();
    let addrs: Vec<SocketAddr> = receivers.iter().map(|r| r.local_addr().unwrap()).collect();

    // Datagram i goes to receiver i % 3: every sendmmsg call addresses all three.
    let items: Vec<(SocketAddr, u32)> = (0..200).map(|i| (addrs[i as usize % 3], i)).collect();
    let mut batch = SendBatch::new();
    send_all(&sender, &mut batch, &items).await;
    let stats = *batch.stats();
    assert_eq!(stats.datagrams, 200, "kernel accepted {stats:?}");
    let total_bytes: usize = (0..200).map(len).sum();
    assert_eq!(stats.bytes, total_bytes as u64);
    assert_eq!(stats.dropped(), 0, "nothing may be dropped: {stats:?}");
    assert!(
        stats.syscalls <= 4,
        "200 datagrams took {} sendmmsg calls",
        stats.syscalls
    );

    for (r, receiver) in receivers.iter().enumerate() {
        let expected: Vec<u32> = (0..200).filter(|i| *i as usize % 3 == r).collect();
        let got = recv_n(receiver, expected.len()).await;
        // UDP on loopback keeps order per socket, but the test only relies on completeness.
        let mut indices: Vec<u32> = got.iter().map(|&(i, _)| i).collect();
        indices.sort_unstable();
        assert_eq!(indices, expected, "receiver {r} got the wrong set");
        for (i, source) in got {
            assert_eq!(
                source, from,
                "datagram {i} reports source {source}, sent from {from}"
            );
        }
    }
}

#[test]
fn a_server_socket_has_large_buffers_and_owns_its_port() {
    let socket = bind(loopback()).unwrap();
    let addr = socket.local_addr().unwrap();
    assert!(bind(addr).is_err(), "a port in use is an error");
    assert!(
        bind_reuseport(addr).is_err(),
        "nor can a reuseport socket join it"
    );
    // Linux doubles the request (for its bookkeeping) up to twice `net.core.rmem_max`;
    // whatever the cap, it is far above the 208 KiB default.
    let granted = socket2::SockRef::from(&socket).recv_buffer_size().unwrap();
    let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(RECV_BUFFER_BYTES);
    if may_force_buffers() {
        // A process that may ask past the cap (CAP_NET_ADMIN; CI runs as root) gets the
        // whole request, whatever `rmem_max` says.
        assert_eq!(
            granted,
            2 * RECV_BUFFER_BYTES,
            "receive buffer (rmem_max {rmem_max})"
        );
    } else {
        assert!(
            granted >= 2 * RECV_BUFFER_BYTES.min(rmem_max),
            "receive buffer {granted} bytes (rmem_max {rmem_max})"
        );
    }
}

/// Whether this process may set a socket buffer past `net.core.rmem_max`.
fn may_force_buffers() -> bool {
    use std::os::fd::AsRawFd;
    let probe = std::net::UdpSocket::bind(loopback()).unwrap();
    let value: libc::c_int = 1 << 20;
    // SAFETY: a valid descriptor and a c_int option value of its true size.
    let result = unsafe {
        libc::setsockopt(
            probe.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    result == 0
}

#[tokio::test]
async fn sockets_bound_to_port_zero_each_get_a_port_of_their_own() {
    // A client binds port 0 and trusts it is alone there. With SO_REUSEPORT, Linux may give
    // two such sockets the same port and split their traffic between them by hash: two
    // clients would share one address, and each see half of the other's handshake.
    let sockets: Vec<BatchSocket> = (0..3_000)
        .map(|_| BatchSocket::bind(loopback()).unwrap())
        .collect();
    let mut ports: Vec<u16> = sockets
        .iter()
        .map(|socket| socket.local_addr().unwrap().port())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), sockets.len(), "ports handed out twice");
}

#[tokio::test]
async fn two_sockets_share_a_port_with_reuseport() {
    let first = bind_reuseport(loopback()).unwrap();
    let addr = first.local_addr().unwrap();
    let second = bind_reuseport(addr).expect("a second SO_REUSEPORT socket on the same port");
    assert_eq!(second.local_addr().unwrap(), addr);
    let plain = UdpSocket::bind(addr);
    assert!(
        plain.is_err(),
        "a socket without SO_REUSEPORT must not join the group"
    );

    // Datagrams from 16 sources are spread over the two; together they receive every one.
    let (a, b) = (
        BatchSocket::from_std(first).unwrap(),
        BatchSocket::from_std(second).unwrap(),
    );
    for i in 0..16u32 {
        let source = UdpSocket::bind(loopback()).unwrap();
        let mut buf = [0; 2048];
        let n = fill(i, &mut buf);
        source.send_to(&buf[..n], addr).unwrap();
    }
    let (mut batch_a, mut batch_b) = (RecvBatch::new(), RecvBatch::new());
    let mut seen = BTreeMap::new();
    let result = timeout(TIMEOUT, async {
        while seen.len() < 16 {
            tokio::select! {
                r = a.recv_batch(&mut batch_a) => {
                    r.unwrap();
                    for (_, d) in &batch_a { seen.insert(check(d), 'a'); }
                }
                r = b.recv_batch(&mut batch_b) => {
                    r.unwrap();
                    for (_, d) in &batch_b { seen.insert(check(d), 'b'); }
                }
            }
        }
    })
    .await;
    assert!(
        result.is_ok(),
        "the two sockets received {} of 16 datagrams",
        seen.len()
    );
}

#[tokio::test]
async fn a_datagram_larger_than_its_slot_is_dropped_and_counted() {
    let receiver = BatchSocket::bind(loopback()).unwrap();
    let to = receiver.local_addr().unwrap();
    let source = UdpSocket::bind(loopback()).unwrap();
    // One byte over the 512-byte slot is too big; exactly 512 fits.
    for size in [100, 513, 512, 3000, 200] {
        source.send_to(&vec![size as u8; size], to).unwrap();
    }

    let mut batch = RecvBatch::with_capacity(8, 512);
    let mut sizes = Vec::new();
    let result = timeout(TIMEOUT, async {
        while batch.stats().datagrams + batch.stats().dropped_truncated < 5 {
            receiver.recv_batch(&mut batch).await.unwrap();
            for (_, d) in &batch {
                assert!(
                    d.iter().all(|&b| b == d.len() as u8),
                    "payload of {} bytes",
                    d.len()
                );
                sizes.push(d.len());
            }
        }
    })
    .await;
    assert!(
        result.is_ok(),
        "not all 5 datagrams arrived: {:?}",
        batch.stats()
    );
    assert_eq!(
        sizes,
        [100, 512, 200],
        "only the datagrams that fit are passed on"
    );
    assert_eq!(batch.stats().dropped_truncated, 2, "{:?}", batch.stats());
    assert_eq!(batch.stats().bytes, 812);
}

#[tokio::test]
async fn a_closed_port_and_an_invalid_destination_do_not_wedge_the_batch() {
    let sender = BatchSocket::bind(loopback()).unwrap();
    let live = BatchSocket::bind(loopback()).unwrap();
    let live_addr = live.local_addr().unwrap();
    let closed_addr = {
        let s = UdpSocket::bind(loopback()).unwrap();
        s.local_addr().unwrap()
    };
    // Port 0 is refused by the kernel for that one datagram (EINVAL).
    let invalid_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));

    // Two rounds: the second checks that whatever the first left on the socket (ICMP port
    // unreachable comes back on loopback at once) does not stop it either.
    let mut batch = SendBatch::new();
    let mut expected = Vec::new();
    for round in 0..2u32 {
        let mut items = Vec::new();
        for k in 0..20u32 {
            let i = round * 100 + k;
            let dest = match k % 4 {
                1 => closed_addr,
                3 => invalid_addr,
                _ => live_addr,
            };
            if dest == live_addr {
                expected.push(i);
            }
            items.push((dest, i));
        }
        send_all(&sender, &mut batch, &items).await;
    }
    let stats = *batch.stats();
    assert_eq!(
        stats.dropped_invalid, 10,
        "the port-0 datagrams are counted: {stats:?}"
    );
    // Linux reports ICMP errors only on connected sockets or with IP_RECVERR, so the
    // closed-port datagrams count as sent.
    assert_eq!(stats.datagrams, 30, "{stats:?}");

    let mut got: Vec<u32> = recv_n(&live, expected.len())
        .await
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    got.sort_unstable();
    assert_eq!(got, expected, "every datagram to the live socket arrives");
}

#[tokio::test]
async fn an_icmp_error_reported_at_send_costs_no_datagram() {
    let sender = BatchSocket::bind(loopback()).unwrap();
    // IP_RECVERR makes Linux report ICMP errors on an unconnected socket: the next send
    // then fails with ECONNREFUSED, at whichever datagram it was about to send.
    let on: libc::c_int = 1;
    // SAFETY: a valid fd, and a c_int option value with its size.
    let rc = unsafe {
        libc::setsockopt(
            sender.as_tokio().as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_RECVERR,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(
        rc,
        0,
        "setsockopt IP_RECVERR: {}",
        std::io::Error::last_os_error()
    );
    let live = BatchSocket::bind(loopback()).unwrap();
    let closed_addr = UdpSocket::bind(loopback()).unwrap().local_addr().unwrap();

    let mut batch = SendBatch::new();
    send_all(&sender, &mut batch, &[(closed_addr, 0)]).await;
    let pending = timeout(TIMEOUT, sender.as_tokio().ready(Interest::ERROR)).await;
    assert!(
        pending.is_ok(),
        "no ICMP port unreachable came back within {TIMEOUT:?}"
    );

    let items: Vec<_> = (1..=10).map(|i| (live.local_addr().unwrap(), i)).collect();
    send_all(&sender, &mut batch, &items).await;
    let stats = *batch.stats();
    assert!(
        stats.socket_errors >= 1,
        "the pending error was not seen: {stats:?}"
    );
    assert_eq!(
        stats.dropped(),
        0,
        "the error was about an earlier datagram: {stats:?}"
    );
    let got = recv_n(&live, 10).await;
    assert_eq!(got.len(), 10);
}

#[tokio::test]
async fn ipv6_and_dual_stack_sockets_send_and_receive() {
    let v6 = BatchSocket::bind("[::1]:0".parse().unwrap()).unwrap();
    // A wildcard IPv6 socket is dual stack: it also reaches, and is reached from, IPv4.
    let dual = BatchSocket::bind("[::]:0".parse().unwrap()).unwrap();
    let v4 = BatchSocket::bind(loopback()).unwrap();
    let dual_port = dual.local_addr().unwrap().port();

    let mut batch = SendBatch::new();
    send_all(
        &dual,
        &mut batch,
        &[(v6.local_addr().unwrap(), 1), (v4.local_addr().unwrap(), 2)],
    )
    .await;
    assert_eq!(batch.stats().dropped(), 0, "{:?}", batch.stats());
    let [(i, from)] = recv_n(&v6, 1).await[..] else {
        unreachable!()
    };
    assert_eq!(
        (i, from),
        (1, SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], dual_port)))
    );
    let [(i, from)] = recv_n(&v4, 1).await[..] else {
        unreachable!()
    };
    assert_eq!(
        (i, from),
        (2, SocketAddr::from((Ipv4Addr::LOCALHOST, dual_port)))
    );

    // The IPv4 peer's address reads back as IPv4, not as ::ffff:127.0.0.1.
    let mut reply = SendBatch::new();
    send_all(
        &v4,
        &mut reply,
        &[(SocketAddr::from((Ipv4Addr::LOCALHOST, dual_port)), 3)],
    )
    .await;
    let [(i, from)] = recv_n(&dual, 1).await[..] else {
        unreachable!()
    };
    assert_eq!((i, from), (3, v4.local_addr().unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_server_task_answers_every_datagram() {
    let server = BatchSocket::bind(loopback()).unwrap();
    let server_addr = server.local_addr().unwrap();
    // The worker loop a server runs: receive a batch, answer in place, send the batch.
    let echo = tokio::spawn(async move {
        let (mut inbox, mut outbox) = (RecvBatch::new(), SendBatch::new());
        let mut answered = 0;
        while answered < 150 {
            server.recv_batch(&mut inbox).await?;
            for (from, datagram) in &inbox {
                let queued = outbox.push_with(from, |slot| {
                    slot[..datagram.len()].copy_from_slice(datagram);
                    datagram.len()
                });
                assert!(queued, "outbox is as large as the inbox");
                answered += 1;
            }
            server.send_batch(&mut outbox).await?;
        }
        std::io::Result::Ok(answered)
    });

    let clients: Vec<BatchSocket> = (0..3)
        .map(|_| BatchSocket::bind(loopback()).unwrap())
        .collect();
    let mut batch = SendBatch::new();
    for (c, client) in clients.iter().enumerate() {
        let items: Vec<_> = (0..50)
            .map(|k| (server_addr, c as u32 * 1000 + k))
            .collect();
        send_all(client, &mut batch, &items).await;
    }
    for (c, client) in clients.iter().enumerate() {
        let got = recv_n(client, 50).await;
        let mut indices: Vec<u32> = got.iter().map(|&(i, _)| i).collect();
        indices.sort_unstable();
        let expected: Vec<u32> = (0..50).map(|k| c as u32 * 1000 + k).collect();
        assert_eq!(indices, expected, "client {c} got the wrong answers");
        assert!(got.iter().all(|&(_, from)| from == server_addr));
    }
    let answered = timeout(TIMEOUT, echo)
        .await
        .expect("echo task hung")
        .unwrap()
        .unwrap();
    assert_eq!(answered, 150);
}

#[tokio::test]
async fn one_socket_sends_and_receives_as_many_loopback_addresses() {
    let many = BatchSocket::from_std(std::net::UdpSocket::bind("0.0.0.0:0").unwrap()).unwrap();
    tickwire_net::udp::enable_local_addresses(std::os::fd::AsFd::as_fd(many.as_tokio())).unwrap();
    let port = many.local_addr().unwrap().port();
    let peer = BatchSocket::bind(loopback()).unwrap();
    let peer_addr = peer.local_addr().unwrap();
    let sources: Vec<Ipv4Addr> = (1..=40u8).map(|i| Ipv4Addr::new(127, 9, 0, i)).collect();

    // Out: each datagram leaves from its own address, all in one batch.
    let mut out = SendBatch::new();
    for (i, source) in sources.iter().enumerate() {
        assert!(out.push_from_with(Some(*source), peer_addr, |slot| {
            slot[0] = i as u8;
            1
        }));
    }
    many.send_batch(&mut out).await.unwrap();
    let mut seen = Vec::new();
    let mut inbox = RecvBatch::new();
    while seen.len() < sources.len() {
        peer.recv_batch(&mut inbox).await.unwrap();
        seen.extend(inbox.iter().map(|(from, data)| (from, data[0])));
    }
    for (from, i) in &seen {
        assert_eq!(*from, SocketAddr::from((sources[*i as usize], port)));
    }

    // Back: each reply is told apart by the address it was sent to.
    let mut replies = SendBatch::new();
    for (from, i) in &seen {
        replies.push(*from, &[*i]);
    }
    peer.send_batch(&mut replies).await.unwrap();
    let mut inbox = RecvBatch::with_controls();
    let mut back = 0;
    while back < sources.len() {
        many.recv_batch(&mut inbox).await.unwrap();
        for received in inbox.iter_received() {
            assert_eq!(received.from, peer_addr);
            assert_eq!(received.local, Some(sources[received.payload[0] as usize]));
            assert_eq!(
                received.arrived_ns, None,
                "arrival times were not asked for"
            );
            back += 1;
        }
    }
}

/// Nanoseconds since the Unix epoch, as the kernel's arrival stamps count them.
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[tokio::test]
async fn arrival_times_are_when_a_datagram_came_not_when_it_was_read() {
    let socket = BatchSocket::bind(loopback()).unwrap();
    let fd = std::os::fd::AsFd::as_fd(socket.as_tokio());
    tickwire_net::udp::enable_arrival_times(fd).unwrap();
    tickwire_net::udp::enable_local_addresses(fd).unwrap();
    let peer = BatchSocket::bind(loopback()).unwrap();
    // The kernel turns its receive stamping on in a work item of its own, not within the
    // call: until then a datagram is stamped when it is read. Probes until one keeps the
    // time it came (a busy machine may run that work item late).
    let mut inbox = RecvBatch::with_controls();
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let mut probe = SendBatch::new();
        probe.push(socket.local_addr().unwrap(), &[0xFF]);
        peer.send_batch(&mut probe).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        socket.recv_batch(&mut inbox).await.unwrap();
        let read = wall_ns();
        let stamped_early = inbox
            .iter_received()
            .filter_map(|received| received.arrived_ns)
            .any(|arrived| read - arrived >= 5_000_000);
        if stamped_early {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the kernel never stamped a datagram at its arrival"
        );
    }
    let before = wall_ns();
    let mut out = SendBatch::new();
    for i in 0..3u8 {
        out.push(socket.local_addr().unwrap(), &[i]);
    }
    peer.send_batch(&mut out).await.unwrap();
    let sent = wall_ns();
    // They wait in the socket's queue; the stamps must not move with the wait.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let mut seen = 0;
    while seen < 3 {
        socket.recv_batch(&mut inbox).await.unwrap();
        let read = wall_ns();
        for received in inbox.iter_received() {
            let arrived = received.arrived_ns.expect("an arrival time");
            assert!(
                (before..=sent).contains(&arrived),
                "stamped at {arrived}, sent between {before} and {sent}"
            );
            assert!(
                read - arrived >= 30_000_000,
                "the queue's wait is not in the stamp"
            );
            assert_eq!(received.local, Some(Ipv4Addr::LOCALHOST));
            seen += 1;
        }
    }
}
