// The SDK's front door: matchmaking, a connection over UDP (falling back to WebSocket), and
// reconnection to the same seat, all driven by Poll() on the caller's thread (Unity's main
// thread): no event is ever raised from another thread.
using System;
using Tickwire.Protocol;

namespace Tickwire
{
    /// <summary>Which transports the client may use.</summary>
    public enum TransportChoice
    {
        /// <summary>UDP, falling back to WebSocket if UDP does not connect (as the TypeScript SDK falls back from WebTransport).</summary>
        Auto,
        /// <summary>UDP only.</summary>
        Udp,
        /// <summary>WebSocket only (what a WebGL build uses).</summary>
        WebSocket,
    }

    /// <summary>Settings of a <see cref="TickwireClient"/>; the defaults suit a game.</summary>
    public sealed class TickwireClientOptions
    {
        /// <summary>The server's HTTP origin, e.g. http://127.0.0.1:8080.</summary>
        public string ServerUrl = "http://127.0.0.1:8080";
        /// <summary>What to ask the matchmaker for.</summary>
        public MatchmakeRequest Request = new MatchmakeRequest { Kind = "arena" };
        /// <summary>Transports to use.</summary>
        public TransportChoice Transport = TransportChoice.Auto;
        /// <summary>Prefer the wss:// endpoint when the server offers one.</summary>
        public bool PreferWss;
        /// <summary>In Auto, how long UDP may take to connect before falling back to WebSocket.</summary>
        public TimeSpan UdpFallbackTimeout = TimeSpan.FromSeconds(3);
        /// <summary>How long a WebSocket may take to be accepted.</summary>
        public TimeSpan WebSocketHandshakeTimeout = TimeSpan.FromSeconds(10);
        /// <summary>How long a matchmaking request may take.</summary>
        public TimeSpan MatchmakeTimeout = TimeSpan.FromSeconds(10);
        /// <summary>Reconnect after a lost connection (a fresh token, the same seat if still held).</summary>
        public bool Reconnect = true;
        /// <summary>First reconnection delay ceiling; doubles per attempt (the Rust client's Backoff).</summary>
        public TimeSpan BackoffInitial = TimeSpan.FromMilliseconds(250);
        /// <summary>Largest reconnection delay.</summary>
        public TimeSpan BackoffMax = TimeSpan.FromSeconds(8);
        /// <summary>Attempts before giving up.</summary>
        public int BackoffAttempts = 8;
        /// <summary>The HTTP seam (default HttpClient; UnityWebRequest on WebGL).</summary>
        public IHttpPost Http;
        /// <summary>Makes the WebSocket for each connection (default ClientWebSocket; a .jslib bridge on WebGL).</summary>
        public Func<IWebSocket> WebSocketFactory = () => new ClientWebSocketConnection();
        /// <summary>Seed of the backoff jitter (0: from the clock).</summary>
        public int RandomSeed;
    }

    /// <summary>Where a client stands.</summary>
    public enum ClientState
    {
        /// <summary>Not started.</summary>
        Idle,
        /// <summary>Asking the matchmaker.</summary>
        Matchmaking,
        /// <summary>Handshaking with the server.</summary>
        Connecting,
        /// <summary>Messages flow.</summary>
        Connected,
        /// <summary>Waiting to reconnect.</summary>
        Waiting,
        /// <summary>Over (closed, or failed for good).</summary>
        Closed,
    }

    /// <summary>What happened.</summary>
    public enum ClientEventType
    {
        /// <summary>The matchmaker gave a seat (see <see cref="TickwireClient.Answer"/>).</summary>
        Matched,
        /// <summary>Connected (again, if Reconnected); Transport says over what.</summary>
        Connected,
        /// <summary>A message on Channel; its bytes are Message, valid until the next Poll.</summary>
        Message,
        /// <summary>The connection ended with Reason; RetryInMs is -1 when no reconnection follows.</summary>
        Disconnected,
        /// <summary>UDP did not connect (Reason); trying WebSocket.</summary>
        Fallback,
        /// <summary>Matchmaking failed (Error); RetryInMs is -1 when no retry follows.</summary>
        MatchmakeFailed,
    }

    /// <summary>An event from <see cref="TickwireClient.TryGetEvent"/>. A struct: taking one allocates nothing.</summary>
    public struct ClientEvent
    {
        /// <summary>What happened.</summary>
        public ClientEventType Type;
        /// <summary>A message's channel.</summary>
        public byte Channel;
        /// <summary>A message's bytes, valid until the next Poll (copy what you keep).</summary>
        public ArraySegment<byte> Message;
        /// <summary>Why a connection ended (or UDP was given up).</summary>
        public DisconnectReason Reason;
        /// <summary>The transport of a Connected event.</summary>
        public TransportKind Transport;
        /// <summary>Connected to the seat held from before (a reconnection).</summary>
        public bool Reconnected;
        /// <summary>Milliseconds until the next attempt, or -1 for none.</summary>
        public long RetryInMs;
        /// <summary>A matchmaking failure.</summary>
        public MatchmakeException Error;
    }

    /// <summary>
    /// A player's connection to a tickwire room. Call <see cref="Start"/> once, then every
    /// frame <see cref="Poll"/> followed by <see cref="TryGetEvent"/> until it returns false;
    /// send with <see cref="Send(int, byte[])"/>. Everything happens on the thread calling Poll.
    /// <code>
    /// var client = new TickwireClient(new TickwireClientOptions { ServerUrl = "http://127.0.0.1:8080" });
    /// client.Start();
    /// // every frame:
    /// client.Poll();
    /// ClientEvent e;
    /// while (client.TryGetEvent(out e))
    ///     if (e.Type == ClientEventType.Message) Handle(e.Channel, e.Message);
    /// </code>
    /// </summary>
    public sealed class TickwireClient
    {
        readonly TickwireClientOptions _options;
        readonly Inbox _inbox = new Inbox();
        readonly Ring<ClientEvent> _events = new Ring<ClientEvent>(64);
        readonly Random _random;
        ClientState _state = ClientState.Idle;
        System.Threading.Tasks.Task<MatchmakeAnswer> _matchmaking;
        MatchmakeAnswer _answer;
        ILink _link;
        long _linkStarted;
        bool _udpFailed;
        int _attempts;
        long _retryAt;

        /// <summary>A client with <paramref name="options"/>; nothing happens until Start.</summary>
        public TickwireClient(TickwireClientOptions options)
        {
            _options = options;
            _random = options.RandomSeed != 0 ? new Random(options.RandomSeed) : new Random();
        }

        /// <summary>Where it stands.</summary>
        public ClientState State { get { return _state; } }
        /// <summary>The latest matchmaking answer (player id, room, session), or null.</summary>
        public MatchmakeAnswer Answer { get { return _answer; } }
        /// <summary>The transport in use, once connecting.</summary>
        public TransportKind? Transport { get { return _link != null ? _link.Transport : (TransportKind?)null; } }
        /// <summary>What the server dictated, once connected.</summary>
        public ConnectionParams Params { get { return _link != null ? _link.Params : null; } }
        /// <summary>True once UDP failed and Auto moved to WebSocket.</summary>
        public bool UdpFailed { get { return _udpFailed; } }

        /// <summary>UDP reliability stats (RTT, loss), when connected over UDP.</summary>
        public ReliabilityStats UdpStats
        {
            get { var udp = _link as UdpLink; return udp != null ? udp.Connection.Stats : default(ReliabilityStats); }
        }

        /// <summary>Starts matchmaking.</summary>
        public void Start()
        {
            if (_state != ClientState.Idle) return;
            BeginMatchmaking();
        }

        /// <summary>Sends a message on a channel; copied, so the buffer may be reused at once.</summary>
        public SendResult Send(int channel, byte[] bytes, int offset, int length)
        {
            return _link != null && _state == ClientState.Connected ? _link.Send(channel, bytes, offset, length) : SendResult.NotConnected;
        }

        /// <summary>Sends a whole array.</summary>
        public SendResult Send(int channel, byte[] bytes) { return Send(channel, bytes, 0, bytes.Length); }

        /// <summary>Leaves: the seat is given up at once. A Disconnected(Requested) event follows at the next Poll.</summary>
        public void Close()
        {
            if (_state == ClientState.Closed) return;
            _state = ClientState.Closed;
            if (_link != null) _link.Close();
            _matchmaking = null;
        }

        /// <summary>
        /// The next event, or false when none is left. Take them all after each <see cref="Poll"/>:
        /// the next Poll drops what is left and reuses the messages' memory.
        /// </summary>
        public bool TryGetEvent(out ClientEvent e)
        {
            if (_events.Count == 0)
            {
                e = default(ClientEvent);
                return false;
            }
            e = _events.PopFront();
            return true;
        }

        /// <summary>Does all the client's work for this frame: network I/O, timers, events.</summary>
        public void Poll()
        {
            _events.Clear();
            _inbox.Clear();
            long now = MonotonicClock.NowMicros();
            if (_state == ClientState.Matchmaking && _matchmaking != null && _matchmaking.IsCompleted) FinishMatchmaking(now);
            if (_state == ClientState.Waiting && now >= _retryAt) BeginMatchmaking();
            if (_link != null)
            {
                _link.Poll(now);
                if (_state == ClientState.Connecting && !_link.IsConnected && !_link.IsEnded && _link.Transport == TransportKind.Udp
                    && _options.Transport == TransportChoice.Auto && now - _linkStarted >= Micros(_options.UdpFallbackTimeout))
                {
                    // Not connected: nothing to tell the server, and the link's own end is not news.
                    _link.Close();
                    DiscardInbox();
                    FallBack(DisconnectReason.HandshakeTimedOut);
                    return;
                }
                DrainInbox(now);
            }
        }

        /// <summary>
        /// Drops the connection without telling the server, as a dead network would (tests use it
        /// to exercise reconnection): the server holds the seat, and the client reconnects to it.
        /// </summary>
        internal void AbandonConnection()
        {
            if (_link != null) _link.Abandon();
        }

        static long Micros(TimeSpan span) { return span.Ticks / 10; }

        void Add(ClientEvent e) { _events.PushBack(e); }

        void BeginMatchmaking()
        {
            _state = ClientState.Matchmaking;
            var request = _answer != null ? _options.Request.WithSession(_answer.Session) : _options.Request;
            _matchmaking = Matchmaker.RequestAsync(_options.ServerUrl, request, _options.Http, _options.MatchmakeTimeout);
        }

        void FinishMatchmaking(long now)
        {
            var task = _matchmaking;
            _matchmaking = null;
            if (task.IsFaulted || task.IsCanceled)
            {
                var error = task.Exception != null ? task.Exception.InnerException as MatchmakeException : null;
                if (error == null) error = new MatchmakeException(MatchmakeErrorKind.Network, 0, task.Exception != null ? task.Exception.InnerException.Message : "cancelled");
                long delay = error.IsRetryable ? NextDelay() : -1;
                Add(new ClientEvent { Type = ClientEventType.MatchmakeFailed, Error = error, RetryInMs = delay });
                Wait(now, delay);
                return;
            }
            _answer = task.Result;
            Add(new ClientEvent { Type = ClientEventType.Matched });
            Connect(now);
        }

        void Connect(long now)
        {
            _state = ClientState.Connecting;
            _linkStarted = now;
            bool udp = _options.Transport == TransportChoice.Udp || (_options.Transport == TransportChoice.Auto && !_udpFailed);
            if (udp)
            {
                _link = new UdpLink(_answer.Token, _inbox, now);
            }
            else
            {
                string url = _options.PreferWss && _answer.WssUrl != null ? _answer.WssUrl : _answer.WsUrl;
                _link = new WebSocketLink(_options.WebSocketFactory(), url, _answer.Token, _inbox, now, Micros(_options.WebSocketHandshakeTimeout));
            }
        }

        void DiscardInbox()
        {
            InboxKind kind;
            byte channel;
            ArraySegment<byte> message;
            while (_inbox.TryTake(out kind, out channel, out message)) { }
        }

        void DrainInbox(long now)
        {
            InboxKind kind;
            byte channel;
            ArraySegment<byte> message;
            while (_inbox.TryTake(out kind, out channel, out message))
            {
                switch (kind)
                {
                    case InboxKind.Message:
                        Add(new ClientEvent { Type = ClientEventType.Message, Channel = channel, Message = message });
                        break;
                    case InboxKind.Connected:
                        _state = ClientState.Connected;
                        _attempts = 0;
                        Add(new ClientEvent { Type = ClientEventType.Connected, Transport = _link.Transport, Reconnected = _answer.Reconnect });
                        break;
                    default:
                        Ended(now, (DisconnectReason)channel);
                        return;
                }
            }
        }

        void Ended(long now, DisconnectReason reason)
        {
            bool wasConnected = _state == ClientState.Connected;
            var link = _link;
            _link = null;
            if (_state == ClientState.Closed)
            {
                Add(new ClientEvent { Type = ClientEventType.Disconnected, Reason = reason, RetryInMs = -1 });
                return;
            }
            if (link.Transport == TransportKind.Udp && _options.Transport == TransportChoice.Auto && !wasConnected
                && (reason == DisconnectReason.HandshakeTimedOut || reason == DisconnectReason.ConnectionLost || reason == DisconnectReason.ProtocolViolation))
            {
                FallBack(reason);
                return;
            }
            long delay = _options.Reconnect && DisconnectReasons.IsRetryable(reason) ? NextDelay() : -1;
            Add(new ClientEvent { Type = ClientEventType.Disconnected, Reason = reason, RetryInMs = delay });
            Wait(now, delay);
        }

        void FallBack(DisconnectReason reason)
        {
            _link = null;
            _udpFailed = true;
            Add(new ClientEvent { Type = ClientEventType.Fallback, Reason = reason });
            // Tokens are single-use: a fresh one for the WebSocket, for the same seat.
            BeginMatchmaking();
        }

        void Wait(long now, long delayMs)
        {
            if (delayMs < 0)
            {
                _state = ClientState.Closed;
                return;
            }
            _state = ClientState.Waiting;
            _retryAt = now + delayMs * 1000;
        }

        /// <summary>The Rust client's Backoff: a ceiling doubling per attempt up to the max, and a delay in [ceiling/2, ceiling]; -1 past the attempts.</summary>
        long NextDelay()
        {
            if (_attempts >= _options.BackoffAttempts) return -1;
            double ceiling = Math.Min(_options.BackoffInitial.TotalMilliseconds * Math.Pow(2, Math.Min(_attempts, 31)), _options.BackoffMax.TotalMilliseconds);
            _attempts++;
            return (long)(ceiling / 2 + ceiling / 2 * _random.NextDouble());
        }
    }
}
