//! tokio drivers that move datagrams between sockets and the sans-IO protocol.
