//! A WebSocket client on a bare TCP socket, for tests that send what no WebSocket library
//! will: unmasked frames, reserved bits and opcodes, broken close frames.

use std::net::SocketAddr;
use std::time::Duration;

use tickwire_proto::login::{ServerNonce, login_for_token};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::WAIT;

/// The upgrade request a browser would send, without a token yet.
pub const UPGRADE: &str = "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Version: 13\r\n\r\n";

/// A client frame: `first` is the FIN/RSV/opcode byte; masked unless `masked` is false.
pub fn client_frame(first: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mask = [0x12, 0x34, 0x56, 0x78];
    let bit = if masked { 0x80 } else { 0 };
    let mut out = vec![first];
    match payload.len() {
        len if len < 126 => out.push(bit | len as u8),
        len if len <= 0xFFFF => {
            out.push(bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            out.push(bit | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    if masked {
        out.extend_from_slice(&mask);
        out.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

/// A server frame: opcode and payload.
#[derive(Debug)]
pub struct ServerFrame {
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// A raw WebSocket connection: the socket and what was read past the last frame.
pub struct RawWs {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawWs {
    /// Connects and upgrades; panics unless the server answers 101.
    pub async fn upgrade(address: SocketAddr) -> Self {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(UPGRADE.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let head_end = timeout(WAIT, async {
            loop {
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    return end + 4;
                }
                let mut chunk = [0u8; 1024];
                let n = stream.read(&mut chunk).await.unwrap();
                assert!(n > 0, "closed during the upgrade");
                buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .expect("an upgrade answer in time");
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        buf.drain(..head_end);
        Self { stream, buf }
    }

    /// Upgrades and presents `token`; the accepted message must follow.
    pub async fn connect(address: SocketAddr, token: &[u8]) -> Self {
        let mut ws = Self::upgrade(address).await;
        let challenge = ws.next_frame().await.expect("the challenge");
        let nonce = ServerNonce::read(&challenge.payload).expect("a 32-byte challenge");
        let login = login_for_token(token, &nonce).expect("a connect token");
        ws.send(&client_frame(0x82, &login, true)).await;
        let accepted = ws.next_frame().await.expect("the accepted message");
        assert_eq!(accepted.opcode, 2, "{accepted:?}");
        ws
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// The next server frame, or `None` at the end of the stream.
    pub async fn next_frame(&mut self) -> Option<ServerFrame> {
        timeout(WAIT, async {
            loop {
                if let Some((frame, used)) = parse_server_frame(&self.buf) {
                    self.buf.drain(..used);
                    return Some(frame);
                }
                let mut chunk = [0u8; 4096];
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await
        .expect("a frame or the end of the stream in time")
    }

    /// Reads past data and pings to the server's close frame; its code. Then the server
    /// must drop the connection (without waiting for our answer for longer than its close
    /// timeout).
    pub async fn close_code_then_dropped(&mut self) -> u16 {
        self.close_code_then_dropped_answering(false).await
    }

    /// [`close_code_then_dropped`](Self::close_code_then_dropped), answering the server's
    /// close as a browser does when `answer`.
    pub async fn close_code_then_dropped_answering(&mut self, answer: bool) -> u16 {
        let code = loop {
            match self.next_frame().await {
                Some(ServerFrame { opcode: 8, payload }) => {
                    assert!(payload.len() >= 2, "a close frame with a code: {payload:?}");
                    break u16::from_be_bytes([payload[0], payload[1]]);
                }
                Some(_) => continue,
                None => panic!("the connection ended without a close frame"),
            }
        };
        if answer {
            let _ = self
                .stream
                .write_all(&client_frame(0x88, &code.to_be_bytes(), true))
                .await;
        }
        let ended = timeout(WAIT + Duration::from_secs(1), async {
            let mut chunk = [0u8; 1024];
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(
            ended.is_ok(),
            "the server kept the connection after closing with {code}"
        );
        code
    }
}

fn parse_server_frame(buf: &[u8]) -> Option<(ServerFrame, usize)> {
    let [first, second, ..] = *buf else {
        return None;
    };
    assert_eq!(second & 0x80, 0, "server frames are never masked");
    let (len, header) = match second & 0x7F {
        126 => (
            usize::from(u16::from_be_bytes([*buf.get(2)?, *buf.get(3)?])),
            4,
        ),
        127 => {
            let mut word = [0u8; 8];
            word.copy_from_slice(buf.get(2..10)?);
            (u64::from_be_bytes(word) as usize, 10)
        }
        short => (usize::from(short), 2),
    };
    let payload = buf.get(header..header + len)?.to_vec();
    Some((
        ServerFrame {
            opcode: first & 0x0F,
            payload,
        },
        header + len,
    ))
}
