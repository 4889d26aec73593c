// One connection to a room over one transport: the UDP protocol on a non-blocking socket, or
// WebSocket through the IWebSocket seam. Both are pumped from the caller's thread by Poll and
// put messages and connection events into the same Inbox.
using System;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Net.WebSockets;
using System.Threading;
using System.Threading.Tasks;
using Tickwire.Protocol;

namespace Tickwire
{
    /// <summary>Which transport a connection uses.</summary>
    public enum TransportKind
    {
        /// <summary>tickwire's UDP protocol: encrypted, reliable and unreliable channels.</summary>
        Udp,
        /// <summary>WebSocket (ws:// or wss://).</summary>
        WebSocket,
    }

    /// <summary>The monotonic clock in microseconds the SDK runs on.</summary>
    public static class MonotonicClock
    {
        static readonly double MicrosPerTick = 1000000.0 / Stopwatch.Frequency;

        /// <summary>Microseconds since an arbitrary start.</summary>
        public static long NowMicros() { return (long)(Stopwatch.GetTimestamp() * MicrosPerTick); }

        /// <summary>Unix time in seconds.</summary>
        public static ulong UnixSeconds() { return (ulong)DateTimeOffset.UtcNow.ToUnixTimeSeconds(); }
    }

    internal interface ILink
    {
        TransportKind Transport { get; }
        bool IsConnected { get; }
        bool IsEnded { get; }
        ConnectionParams Params { get; }
        void Poll(long now);
        SendResult Send(int channel, byte[] bytes, int offset, int length);
        void Close();
        void Abandon();
    }

    /// <summary>The UDP protocol over a connected, non-blocking socket; all I/O happens in Poll.</summary>
    internal sealed class UdpLink : ILink
    {
        readonly UdpConnection _connection;
        readonly Inbox _inbox;
        readonly byte[] _datagram = new byte[UdpConnection.MaxDatagramBytes];
        Socket _socket;
        IPEndPoint _connectedTo;

        public UdpLink(ConnectToken token, Inbox inbox, long now)
        {
            _connection = new UdpConnection(token, now, MonotonicClock.UnixSeconds(), inbox);
            _inbox = inbox;
        }

        public UdpConnection Connection { get { return _connection; } }
        public TransportKind Transport { get { return TransportKind.Udp; } }
        public bool IsConnected { get { return _connection.State == ConnectionState.Connected; } }
        public bool IsEnded { get { return _connection.State == ConnectionState.Disconnected; } }
        public ConnectionParams Params { get { return _connection.Params; } }

        void EnsureSocket()
        {
            var address = _connection.ServerAddress;
            if (_socket != null && address.Equals(_connectedTo)) return;
            if (_socket != null) _socket.Close();
            _socket = new Socket(address.AddressFamily, SocketType.Dgram, ProtocolType.Udp) { Blocking = false };
            _socket.Connect(address);
            _connectedTo = address;
        }

        public void Poll(long now)
        {
            if (_socket == null && (IsEnded || _abandoned)) return;
            EnsureSocket();
            while (_socket.Available > 0)
            {
                SocketError error;
                int length = _socket.Receive(_datagram, 0, _datagram.Length, SocketFlags.None, out error);
                if (error != SocketError.Success || length <= 0) break;
                _connection.HandleDatagram(now, _datagram, length);
            }
            _connection.HandleTimeout(now);
            Flush(now);
            if (IsEnded) Release();
        }

        void Flush(long now)
        {
            if (_socket == null) return;
            int length;
            while ((length = _connection.PollTransmit(now, _datagram)) > 0)
            {
                SocketError error;
                _socket.Send(_datagram, 0, length, SocketFlags.None, out error);
            }
        }

        public SendResult Send(int channel, byte[] bytes, int offset, int length)
        {
            return _connection.Send(channel, bytes, offset, length);
        }

        public void Close()
        {
            if (_socket == null) return;
            long now = MonotonicClock.NowMicros();
            _connection.Disconnect(now);
            Flush(now);
            Release();
        }

        bool _abandoned;

        public void Abandon()
        {
            _abandoned = true;
            Release();
            if (!IsEnded) _inbox.AddSignal(InboxKind.Disconnected, (byte)DisconnectReason.ConnectionLost);
        }

        void Release()
        {
            if (_socket != null) _socket.Close();
            _socket = null;
        }
    }

    /// <summary>Where a WebSocket stands.</summary>
    public enum WebSocketStatus
    {
        /// <summary>Opening.</summary>
        Connecting,
        /// <summary>Open: messages flow.</summary>
        Open,
        /// <summary>Closed; see CloseCode.</summary>
        Closed,
    }

    /// <summary>
    /// The seam between the SDK and a WebSocket implementation, polled from the caller's
    /// thread. The default, <see cref="ClientWebSocketConnection"/>, wraps
    /// System.Net.WebSockets.ClientWebSocket; a WebGL build implements it over the browser's
    /// WebSocket with a .jslib plugin (README.md, "WebGL"), since WebGL has no sockets.
    /// </summary>
    public interface IWebSocket
    {
        /// <summary>Starts connecting to <paramref name="url"/> (ws:// or wss://, no subprotocol).</summary>
        void Open(string url);
        /// <summary>Where it stands.</summary>
        WebSocketStatus Status { get; }
        /// <summary>Sends one binary message (copied; may be called while Connecting: sent once open).</summary>
        void Send(byte[] bytes, int offset, int length);
        /// <summary>The next binary message received, valid until the next call; false when none.</summary>
        bool TryReceive(out ArraySegment<byte> message);
        /// <summary>Once Closed: the close frame's code, or 1006 when the connection died without one.</summary>
        int CloseCode { get; }
        /// <summary>Closes with <paramref name="code"/> (1000 or 4001: the player leaves).</summary>
        void Close(int code);
    }

    /// <summary>
    /// IWebSocket over System.Net.WebSockets.ClientWebSocket (every platform but WebGL). Its
    /// receive loop runs on the thread pool and hands whole messages to <see cref="TryReceive"/>
    /// in pooled buffers; ClientWebSocket itself allocates a task and a result per receive,
    /// which .NET Standard 2.0's API cannot avoid (README.md, "Allocation").
    /// </summary>
    public sealed class ClientWebSocketConnection : IWebSocket
    {
        struct Received { public byte[] Bytes; public int Length; }

        readonly ClientWebSocket _socket = new ClientWebSocket();
        readonly object _lock = new object();
        readonly System.Collections.Generic.Queue<Received> _received = new System.Collections.Generic.Queue<Received>();
        readonly System.Collections.Generic.Queue<Received> _outgoing = new System.Collections.Generic.Queue<Received>();
        readonly Protocol.BytePool _pool = new Protocol.BytePool();
        readonly CancellationTokenSource _cancel = new CancellationTokenSource();
        byte[] _taken;
        bool _sending;
        volatile int _status = (int)WebSocketStatus.Connecting;
        volatile int _closeCode = 1006;

        /// <summary>
        /// A WebSocket that sends a keepalive (an unsolicited pong) every second, as the Rust
        /// client pings every second: the server times out a client it hears nothing from, and
        /// it only pings when it has nothing to send, so a silent client streaming snapshots
        /// would otherwise be dropped.
        /// </summary>
        public ClientWebSocketConnection()
        {
            _socket.Options.KeepAliveInterval = TimeSpan.FromSeconds(1);
        }

        /// <inheritdoc/>
        public WebSocketStatus Status { get { return (WebSocketStatus)_status; } }
        /// <inheritdoc/>
        public int CloseCode { get { return _closeCode; } }

        /// <inheritdoc/>
        public void Open(string url) { Task.Run(() => Run(new Uri(url))); }

        async Task Run(Uri uri)
        {
            try
            {
                await _socket.ConnectAsync(uri, _cancel.Token).ConfigureAwait(false);
                _status = (int)WebSocketStatus.Open;
                StartSending();
                var message = new byte[64 * 1024];
                int length = 0;
                while (true)
                {
                    if (message.Length - length < 16 * 1024) Array.Resize(ref message, message.Length * 2);
                    var result = await _socket.ReceiveAsync(new ArraySegment<byte>(message, length, message.Length - length), _cancel.Token).ConfigureAwait(false);
                    if (result.MessageType == WebSocketMessageType.Close)
                    {
                        _closeCode = result.CloseStatus.HasValue ? (int)result.CloseStatus.Value : 1005;
                        try { await _socket.CloseOutputAsync(WebSocketCloseStatus.NormalClosure, "", CancellationToken.None).ConfigureAwait(false); }
                        catch (Exception) { }
                        break;
                    }
                    length += result.Count;
                    if (!result.EndOfMessage) continue;
                    if (result.MessageType == WebSocketMessageType.Binary)
                    {
                        lock (_lock)
                        {
                            var copy = _pool.Rent(length);
                            Buffer.BlockCopy(message, 0, copy, 0, length);
                            _received.Enqueue(new Received { Bytes = copy, Length = length });
                        }
                    }
                    length = 0;
                }
            }
            catch (Exception)
            {
                if (_socket.CloseStatus.HasValue) _closeCode = (int)_socket.CloseStatus.Value;
            }
            _status = (int)WebSocketStatus.Closed;
        }

        /// <inheritdoc/>
        public void Send(byte[] bytes, int offset, int length)
        {
            lock (_lock)
            {
                var copy = _pool.Rent(length);
                Buffer.BlockCopy(bytes, offset, copy, 0, length);
                _outgoing.Enqueue(new Received { Bytes = copy, Length = length });
            }
            if (_status == (int)WebSocketStatus.Open) StartSending();
        }

        void StartSending()
        {
            lock (_lock)
            {
                if (_sending || _outgoing.Count == 0) return;
                _sending = true;
            }
            Task.Run(SendAll);
        }

        async Task SendAll()
        {
            try
            {
                while (true)
                {
                    Received next;
                    lock (_lock)
                    {
                        if (_outgoing.Count == 0)
                        {
                            _sending = false;
                            return;
                        }
                        next = _outgoing.Dequeue();
                    }
                    await _socket.SendAsync(new ArraySegment<byte>(next.Bytes, 0, next.Length), WebSocketMessageType.Binary, true, _cancel.Token).ConfigureAwait(false);
                    lock (_lock) _pool.Return(next.Bytes);
                }
            }
            catch (Exception)
            {
                lock (_lock) _sending = false;
            }
        }

        /// <inheritdoc/>
        public bool TryReceive(out ArraySegment<byte> message)
        {
            lock (_lock)
            {
                // The previous message's buffer goes back to the pool: the caller is done with it.
                if (_taken != null) _pool.Return(_taken);
                _taken = null;
                if (_received.Count == 0)
                {
                    message = default(ArraySegment<byte>);
                    return false;
                }
                var next = _received.Dequeue();
                _taken = next.Bytes;
                message = new ArraySegment<byte>(next.Bytes, 0, next.Length);
                return true;
            }
        }

        /// <inheritdoc/>
        public void Close(int code)
        {
            if (_status == (int)WebSocketStatus.Closed) return;
            _closeCode = code;
            Task.Run(async () =>
            {
                try
                {
                    while (true)
                    {
                        lock (_lock) if (!_sending) break;
                        await Task.Delay(1).ConfigureAwait(false);
                    }
                    await _socket.CloseAsync((WebSocketCloseStatus)code, "", CancellationToken.None).ConfigureAwait(false);
                }
                catch (Exception) { }
                _cancel.Cancel();
            });
        }
    }

    /// <summary>The WebSocket transport (PROTOCOL.md, "WebSocket transport") over an IWebSocket.</summary>
    internal sealed class WebSocketLink : ILink
    {
        /// <summary>Bytes of the server's challenge, its first message.</summary>
        public const int ServerNonceBytes = 32;
        /// <summary>What the login's proof is computed over first (PROTOCOL.md, "Login: proof of possession").</summary>
        static readonly byte[] LoginLabel = System.Text.Encoding.ASCII.GetBytes("tickwire stream login v1");

        readonly IWebSocket _socket;
        readonly Inbox _inbox;
        readonly long _handshakeDeadline;
        readonly ConnectToken _token;
        byte[] _frame = new byte[1024];
        ConnectionParams _params;
        bool _loggedIn;
        bool _ended;
        // Messages sent before the login went out: they follow it, in order.
        System.Collections.Generic.List<byte[]> _early = new System.Collections.Generic.List<byte[]>();

        public WebSocketLink(IWebSocket socket, string url, ConnectToken token, Inbox inbox, long now, long handshakeTimeoutMicros)
        {
            _socket = socket;
            _inbox = inbox;
            _token = token;
            _handshakeDeadline = now + handshakeTimeoutMicros;
            // The server speaks first: a 32-byte challenge, answered by the login in Poll.
            _socket.Open(url);
        }

        /// <summary>
        /// The login message: the public token, then HMAC-SHA256 under its client-to-server key
        /// over the label, the server's nonce and the token, which proves this client holds the key.
        /// </summary>
        public static byte[] LoginMessage(ConnectToken token, byte[] nonce, int offset)
        {
            var signed = new byte[LoginLabel.Length + ServerNonceBytes + token.Raw.Length];
            Buffer.BlockCopy(LoginLabel, 0, signed, 0, LoginLabel.Length);
            Buffer.BlockCopy(nonce, offset, signed, LoginLabel.Length, ServerNonceBytes);
            Buffer.BlockCopy(token.Raw, 0, signed, LoginLabel.Length + ServerNonceBytes, token.Raw.Length);
            byte[] proof;
            using (var hmac = new System.Security.Cryptography.HMACSHA256(token.ClientToServerKey)) proof = hmac.ComputeHash(signed);
            var login = new byte[token.Raw.Length + proof.Length];
            Buffer.BlockCopy(token.Raw, 0, login, 0, token.Raw.Length);
            Buffer.BlockCopy(proof, 0, login, token.Raw.Length, proof.Length);
            return login;
        }

        public TransportKind Transport { get { return TransportKind.WebSocket; } }
        public bool IsConnected { get { return _params != null && !_ended; } }
        public bool IsEnded { get { return _ended; } }
        public ConnectionParams Params { get { return _params; } }

        void End(DisconnectReason reason)
        {
            if (_ended) return;
            _ended = true;
            _inbox.AddSignal(InboxKind.Disconnected, (byte)reason);
        }

        public void Poll(long now)
        {
            if (_ended) return;
            ArraySegment<byte> message;
            while (_socket.TryReceive(out message))
            {
                if (!_loggedIn)
                {
                    if (message.Count != ServerNonceBytes)
                    {
                        _socket.Close(4006);
                        End(DisconnectReason.ProtocolViolation);
                        return;
                    }
                    var login = LoginMessage(_token, message.Array, message.Offset);
                    _socket.Send(login, 0, login.Length);
                    _loggedIn = true;
                    foreach (var early in _early) _socket.Send(early, 0, early.Length);
                    _early = null;
                    continue;
                }
                if (_params == null)
                {
                    _params = ConnectionParams.Read(message.Array, message.Offset, message.Count);
                    if (_params == null)
                    {
                        _socket.Close(4006);
                        End(DisconnectReason.ProtocolViolation);
                        return;
                    }
                    _inbox.AddSignal(InboxKind.Connected, 0);
                    continue;
                }
                if (message.Count < 1 || message.Array[message.Offset] >= _params.Channels.Length)
                {
                    _socket.Close(4006);
                    End(DisconnectReason.ProtocolViolation);
                    return;
                }
                _inbox.Add(message.Array[message.Offset], message.Array, message.Offset + 1, message.Count - 1);
            }
            if (_socket.Status == WebSocketStatus.Closed)
            {
                End(DisconnectReasons.FromCloseCode(_socket.CloseCode));
            }
            else if (_params == null && now >= _handshakeDeadline)
            {
                _socket.Close(4002);
                End(DisconnectReason.HandshakeTimedOut);
            }
        }

        public SendResult Send(int channel, byte[] bytes, int offset, int length)
        {
            if (_ended) return SendResult.NotConnected;
            if (_params != null)
            {
                if (channel < 0 || channel >= _params.Channels.Length) return SendResult.UnknownChannel;
                if (length > _params.MaxMessageSize) return SendResult.TooLarge;
            }
            else if (channel < 0 || channel >= 32) return SendResult.UnknownChannel;
            if (!_loggedIn)
            {
                var early = new byte[length + 1];
                early[0] = (byte)channel;
                Buffer.BlockCopy(bytes, offset, early, 1, length);
                _early.Add(early);
                return SendResult.Ok;
            }
            if (_frame.Length < length + 1) _frame = new byte[Math.Max(length + 1, _frame.Length * 2)];
            _frame[0] = (byte)channel;
            Buffer.BlockCopy(bytes, offset, _frame, 1, length);
            _socket.Send(_frame, 0, length + 1);
            return SendResult.Ok;
        }

        public void Close()
        {
            if (_ended) return;
            _socket.Close(4001);
            End(DisconnectReason.Requested);
        }

        public void Abandon()
        {
            if (_ended) return;
            // 4002 (timed out) tells the server the connection is lost, not left: it holds the seat.
            _socket.Close(4002);
            End(DisconnectReason.ConnectionLost);
        }
    }
}
