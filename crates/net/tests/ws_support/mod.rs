//! A WebSocket server on loopback and tokio-tungstenite clients for the `ws_*` tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};

/// Sends `message` from its own task, so a send the server stops reading halfway (an
/// oversize frame) cannot block the test, and returns the reading half.
pub fn send_detached(
    client: Client,
    message: Message,
) -> futures_util::stream::SplitStream<Client> {
    let (mut write, read) = client.split();
    tokio::spawn(async move {
        let _ = write.send(message).await;
        // Keep the writing half alive so the client can still answer the close.
        std::future::pending::<()>().await;
    });
    read
}
use rand::SeedableRng;
use rand::rngs::StdRng;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tickwire_net::ws::{
    CloseCode, HttpListener, ListenConfig, ListenMetrics, TlsIdentity, WsClosed, WsConfig,
    WsEndpoint, WsLinkDepth, WsLinkEvent, WsLinkId, WsLinks, WsSendError, WsSocket,
};
use tickwire_proto::ConnectionParams;
use tickwire_proto::admission::{Admission, UsedTokens};
use tickwire_proto::crypto::{KEY_BYTES, Key};
use tickwire_proto::login::{SERVER_NONCE_BYTES, ServerNonce, login_for_token};
use tickwire_proto::token::TokenIssuer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

pub const PROTOCOL_ID: u64 = 0x7469_636b;
/// Upper bound on any single awaited event: a failure shows as a timeout, not a hang.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(5);

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub type Client = WebSocketStream<Box<dyn Io>>;

/// A running server: the listener serving the endpoint's router, and the hand-off queue.
pub struct TestServer {
    pub address: SocketAddr,
    pub endpoint: WsEndpoint,
    pub listen: ListenMetrics,
    /// Each admitted client once the test's shard attached it.
    pub connections: mpsc::Receiver<ServerSide>,
    /// The test's shard: the links every admitted client is attached to.
    pub links: Arc<Mutex<WsLinks>>,
    pub issuer: TokenIssuer,
    pub identity: Option<Arc<TlsIdentity>>,
    /// What the accepted message must carry: the endpoint's parameters with the test
    /// shard's room rate.
    pub params: ConnectionParams,
    rng: StdRng,
}

#[derive(Default)]
pub struct Options {
    pub ws: WsConfig,
    pub listen: ListenConfig,
    pub tls: bool,
}

impl TestServer {
    pub async fn start(options: Options) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let key = Key([7; KEY_BYTES]);
        let identity = options
            .tls
            .then(|| Arc::new(TlsIdentity::self_signed(&["localhost", "127.0.0.1"]).unwrap()));
        let tls = identity
            .as_ref()
            .map(|identity| identity.server_config().unwrap());
        let listener = HttpListener::from_listener(listener, tls, options.listen);
        let admission = Admission::new(PROTOCOL_ID, &key, vec![address], UsedTokens::new(1024));
        let (handoff, arrivals) = mpsc::channel(16);
        let params = ConnectionParams {
            tick_rate_hz: ROOM_TICK_RATE_HZ,
            ..options.ws.params.clone()
        };
        let endpoint = WsEndpoint::new(options.ws, admission, handoff).unwrap();
        let listen = listener.metrics();
        tokio::spawn(listener.serve(endpoint.router(), std::future::pending()));
        let links = Arc::new(Mutex::new(WsLinks::new().unwrap()));
        let (attached, connections) = mpsc::channel(16);
        tokio::spawn(run_shard(links.clone(), arrivals, attached));
        Self {
            address,
            endpoint,
            listen,
            connections,
            links,
            issuer: TokenIssuer {
                protocol_id: PROTOCOL_ID,
                key,
                server_addresses: vec![address],
                validity_seconds: 60,
                timeout_seconds: 5,
            },
            identity,
            params,
            rng: StdRng::seed_from_u64(address.port().into()),
        }
    }

    /// A connect token for `client_id`, issued now.
    pub fn token(&mut self, client_id: u64) -> Vec<u8> {
        self.token_at(client_id, unix_now())
    }

    /// A connect token issued at `unix_time`.
    pub fn token_at(&mut self, client_id: u64, unix_time: u64) -> Vec<u8> {
        let token = self
            .issuer
            .issue(&mut self.rng, unix_time, client_id, b"ws test")
            .unwrap();
        token.to_bytes().unwrap().to_vec()
    }

    /// A TCP (or TLS) connection to the server, before any HTTP.
    pub async fn connect_stream(&self) -> Box<dyn Io> {
        self.connect_stream_with(None).await
    }

    /// As [`connect_stream`], with the client's receive buffer set first (a small one makes
    /// a client that stops reading fill up quickly).
    pub async fn connect_stream_with(&self, recv_buffer: Option<u32>) -> Box<dyn Io> {
        let socket = TcpSocket::new_v4().unwrap();
        if let Some(bytes) = recv_buffer {
            socket.set_recv_buffer_size(bytes).unwrap();
        }
        let tcp = socket.connect(self.address).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        match &self.identity {
            None => Box::new(tcp),
            Some(identity) => Box::new(tls_connect(tcp, identity.certificate().clone()).await),
        }
    }

    /// A WebSocket client that has upgraded but not yet read the challenge nor sent its login.
    pub async fn upgrade(&self) -> Client {
        self.upgrade_with(None).await
    }

    pub async fn upgrade_with(&self, recv_buffer: Option<u32>) -> Client {
        let stream = self.connect_stream_with(recv_buffer).await;
        let url = format!("ws://{}/ws", self.address);
        let (client, response) =
            tokio::time::timeout(EVENT_TIMEOUT, tokio_tungstenite::client_async(url, stream))
                .await
                .expect("upgrade timed out")
                .expect("upgrade failed");
        assert!(
            response.headers().get("sec-websocket-extensions").is_none(),
            "the server negotiates no extension"
        );
        client
    }

    /// A client that sent a fresh token for `client_id` and read the accepted message, and
    /// the server's side of it.
    pub async fn connect(&mut self, client_id: u64) -> (Client, ServerSide) {
        self.connect_with(client_id, None).await
    }

    pub async fn connect_with(
        &mut self,
        client_id: u64,
        recv_buffer: Option<u32>,
    ) -> (Client, ServerSide) {
        let mut client = self.upgrade_with(recv_buffer).await;
        let token = self.token(client_id);
        login(&mut client, &token).await;
        let accepted = next_binary(&mut client).await;
        assert_eq!(
            ConnectionParams::read(&accepted),
            Some(self.params.clone()),
            "the accepted message carries the connection parameters"
        );
        let connection = tokio::time::timeout(EVENT_TIMEOUT, self.connections.recv())
            .await
            .expect("no connection handed over")
            .expect("hand-off closed");
        assert_eq!(connection.client_id(), client_id);
        (client, connection)
    }
}

impl TestServer {
    /// What a server's shutdown does: the endpoint refuses new clients, the shard closes
    /// the connections it drives.
    pub fn shutdown(&self) {
        self.endpoint.shutdown();
        self.links
            .lock()
            .unwrap()
            .close_all(CloseCode::ServerShutdown, "server shutting down");
    }
}

/// The tick rate of the test shard's one room, unlike the endpoint's default: the accepted
/// message carries the room's.
pub const ROOM_TICK_RATE_HZ: u8 = 24;

/// A shard in miniature: attaches every admitted client (seating everyone), and every
/// millisecond reads, runs timers, routes events to the test's handles and flushes. A real
/// shard awaits readiness instead; polling keeps this one simple, since the tests share the
/// links with it behind a lock.
async fn run_shard(
    links: Arc<Mutex<WsLinks>>,
    mut arrivals: mpsc::Receiver<WsSocket>,
    attached: mpsc::Sender<ServerSide>,
) {
    let mut inbound: HashMap<WsLinkId, mpsc::UnboundedSender<Delivery>> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    loop {
        tokio::select! {
            arrival = arrivals.recv() => match arrival {
                Some(socket) => {
                    let (client_id, user_data, peer) =
                        (socket.client().client_id(), *socket.client().user_data(), socket.client().peer_address());
                    let link = links.lock().unwrap().attach(std::time::Instant::now(), socket, ROOM_TICK_RATE_HZ).unwrap();
                    let (events, receiver) = mpsc::unbounded_channel();
                    inbound.insert(link, events);
                    let side = ServerSide {
                        client_id,
                        user_data,
                        peer,
                        inbound: receiver,
                        closed: None,
                        sender: SideSender { link, links: links.clone() },
                    };
                    if attached.send(side).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            _ = tick.tick() => {}
        }
        let mut links = links.lock().unwrap();
        let now = std::time::Instant::now();
        links.handle_io(now);
        links.handle_timeout(now);
        while let Some(event) = links.poll_event() {
            match event {
                WsLinkEvent::Message {
                    link,
                    channel,
                    message,
                } => {
                    if let Some(events) = inbound.get(&link) {
                        let _ = events.send(Ok((channel, message)));
                    }
                }
                WsLinkEvent::Closed { link, closed } => {
                    if let Some(events) = inbound.remove(&link) {
                        let _ = events.send(Err(closed));
                    }
                }
            }
        }
        links.flush();
    }
}

/// What the test's shard passes to a client's handle: a message, or how it ended.
type Delivery = Result<(u8, Bytes), WsClosed>;

/// The server's side of one client, as the test's shard attached it.
pub struct ServerSide {
    client_id: u64,
    user_data: [u8; tickwire_proto::token::USER_DATA_BYTES],
    peer: Option<SocketAddr>,
    inbound: mpsc::UnboundedReceiver<Delivery>,
    closed: Option<WsClosed>,
    sender: SideSender,
}

impl ServerSide {
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    pub fn user_data(&self) -> &[u8] {
        &self.user_data
    }

    pub fn peer_address(&self) -> Option<SocketAddr> {
        self.peer
    }

    pub fn sender(&self) -> SideSender {
        self.sender.clone()
    }

    pub fn close(&self, code: CloseCode, reason: &str) {
        self.sender.close(code, reason);
    }

    /// The next message, or how the connection ended (a close the test's side started
    /// with [`close`](Self::close) is reported as the server's).
    pub async fn recv(&mut self) -> Result<(u8, Bytes), WsClosed> {
        if let Some(closed) = &self.closed {
            return Err(closed.clone());
        }
        match self.inbound.recv().await {
            Some(Ok(message)) => Ok(message),
            Some(Err(closed)) => {
                self.closed = Some(closed.clone());
                Err(closed)
            }
            None => Err(WsClosed::Lost),
        }
    }
}

/// Sends to one client through the shard's links (written at the shard's next flush).
#[derive(Clone)]
pub struct SideSender {
    link: WsLinkId,
    links: Arc<Mutex<WsLinks>>,
}

impl SideSender {
    pub fn send(&self, channel: u8, message: Bytes) -> Result<(), WsSendError> {
        self.links.lock().unwrap().send(self.link, channel, message)
    }

    pub fn close(&self, code: CloseCode, reason: &str) {
        self.links.lock().unwrap().close(self.link, code, reason);
    }

    pub fn depth(&self) -> WsLinkDepth {
        self.links
            .lock()
            .unwrap()
            .depth(self.link)
            .unwrap_or_default()
    }

    pub fn is_closing(&self) -> bool {
        !self.links.lock().unwrap().is_open(self.link)
    }

    /// Runs `f` on the shard's links with this client's link, holding the shard off for the
    /// whole call: what `f` sends is queued within one turn, and written only where `f`
    /// flushes or at the shard's next flush once `f` returns.
    pub fn with_links<R>(&self, f: impl FnOnce(&mut WsLinks, WsLinkId) -> R) -> R {
        f(&mut self.links.lock().unwrap(), self.link)
    }
}

pub use tickwire_proto::unix_now;

/// The next binary message, skipping control frames; panics on anything else.
/// Reads the server's challenge, the first message after the upgrade.
pub async fn challenge(client: &mut Client) -> ServerNonce {
    let body = next_binary(client).await;
    ServerNonce::read(&body).unwrap_or_else(|| {
        panic!(
            "the first message is the {SERVER_NONCE_BYTES}-byte challenge, not {} bytes",
            body.len()
        )
    })
}

/// Reads the challenge and answers it with the login for `token` (its proof under the
/// token's own client-to-server key).
pub async fn login(client: &mut Client, token: &[u8]) {
    let nonce = challenge(client).await;
    let login = login_for_token(token, &nonce).expect("a connect token");
    client.send(Message::Binary(login.into())).await.unwrap();
}

pub async fn next_binary(client: &mut Client) -> Bytes {
    loop {
        let message = tokio::time::timeout(EVENT_TIMEOUT, client.next())
            .await
            .expect("no message in time")
            .expect("stream ended")
            .expect("read failed");
        match message {
            Message::Binary(bytes) => return bytes,
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected a binary message, got {other:?}"),
        }
    }
}

/// Reads until the server's close frame; returns its code and reason. Data messages before
/// it are counted.
pub async fn expect_close<S>(client: &mut S) -> (u16, String, usize)
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let mut data = 0;
    loop {
        let message = tokio::time::timeout(EVENT_TIMEOUT, client.next())
            .await
            .expect("no close frame in time");
        match message {
            Some(Ok(Message::Close(Some(frame)))) => {
                return (
                    u16::from(frame.code),
                    frame.reason.as_str().to_owned(),
                    data,
                );
            }
            Some(Ok(Message::Close(None))) => panic!("close frame without a code"),
            Some(Ok(Message::Binary(_))) => data += 1,
            Some(Ok(_)) => {}
            Some(Err(error)) => panic!("connection failed before a close frame: {error}"),
            None => panic!("connection ended without a close frame"),
        }
    }
}

/// A client message: channel id, then payload.
pub fn framed(channel: u8, payload: &[u8]) -> Message {
    let mut bytes = vec![channel];
    bytes.extend_from_slice(payload);
    Message::Binary(bytes.into())
}

async fn tls_connect(
    tcp: TcpStream,
    certificate: CertificateDer<'static>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            certificate,
            provider,
        }))
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(EVENT_TIMEOUT, connector.connect(name, tcp))
        .await
        .expect("tls handshake timed out")
        .expect("tls handshake failed")
}

/// Trusts exactly the server's generated certificate (what a developer does by hand in a
/// browser), still checking the handshake signatures made with its key.
#[derive(Debug)]
struct Pinned {
    certificate: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.certificate.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("not the pinned certificate".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
