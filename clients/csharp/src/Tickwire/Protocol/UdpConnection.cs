// The UDP protocol's client endpoint, sans-IO (crates/proto/src/client.rs and connection.rs):
// the handshake with a connect token, encrypted packets with a replay window, keepalives,
// the timeout and disconnects. A driver feeds it datagrams and the clock, and sends what
// PollTransmit writes; nothing here touches a socket or reads a clock.
using System;
using System.Net;
using Tickwire.Crypto;

namespace Tickwire.Protocol
{
    /// <summary>Where the handshake stands.</summary>
    public enum ConnectionState
    {
        /// <summary>Sending requests or responses.</summary>
        Connecting,
        /// <summary>Accepted: data flows.</summary>
        Connected,
        /// <summary>Over; see <see cref="UdpConnection.Reason"/>.</summary>
        Disconnected,
    }

    /// <summary>
    /// One client connection over the UDP protocol. A driver calls, each turn:
    /// <see cref="HandleDatagram"/> for every datagram from <see cref="ServerAddress"/>,
    /// <see cref="HandleTimeout"/>, then <see cref="PollTransmit"/> until it returns 0, and
    /// sleeps at most until <see cref="PollTimeout"/>. Events and messages go to the inbox.
    /// Times are microseconds on any monotonic clock.
    /// </summary>
    public sealed class UdpConnection
    {
        /// <summary>Handshake packets are resent this often, microseconds.</summary>
        public const long HandshakeResendInterval = 100000;
        /// <summary>Largest datagram accepted.</summary>
        public const int MaxDatagramBytes = 2048;
        const int TagBytes = 16;
        const int ChallengeTokenBytes = 384;
        /// <summary>A response: prefix, 8 sequence bytes, the challenge token sealed, tag.</summary>
        const int ResponseBytes = 1 + 8 + ChallengeTokenBytes + TagBytes;
        /// <summary>Set in every handshake packet's sequence, in no connection packet's.</summary>
        const ulong HandshakeSequenceBit = 1UL << 63;
        const int DisconnectRedundancy = 3;

        const int PhaseRequest = 0, PhaseResponse = 1, PhaseConnected = 2, PhaseDisconnected = 3;

        readonly ConnectToken _token;
        readonly Inbox _inbox;
        readonly ChaCha20Poly1305 _receive;
        readonly ChaCha20Poly1305 _send;
        readonly byte[] _aad = new byte[22];
        readonly byte[] _scratch = new byte[MaxDatagramBytes];
        readonly long _clockStart;
        readonly ulong _unixStart;
        int _phase = PhaseRequest;
        DisconnectReason _reason;
        string _reasonText = "";
        int _serverIndex;
        long _serverStarted;
        bool _hasLastSent;
        long _handshakeLastSent;
        ulong _challengeSequence;
        // The response, sealed once under the client-to-server key and resent as is.
        readonly byte[] _response = new byte[ResponseBytes];

        // Connected.
        Reliability _reliability;
        ConnectionParams _params;
        ulong _sendSequence;
        ReplayWindow _replay;
        long _lastSent, _lastReceived;
        byte[][] _farewells;
        int _farewellCount, _farewellNext;

        /// <summary>Packets that did not authenticate (counted, dropped).</summary>
        public ulong PacketsUnauthenticated { get; private set; }
        /// <summary>Payloads refused as malformed (counted, dropped).</summary>
        public ulong PayloadsMalformed { get; private set; }

        /// <summary>A connection that starts its handshake at <paramref name="now"/>.</summary>
        public UdpConnection(ConnectToken token, long now, ulong unixSeconds, Inbox inbox)
        {
            _token = token;
            _inbox = inbox;
            _receive = new ChaCha20Poly1305(token.ServerToClientKey);
            _send = new ChaCha20Poly1305(token.ClientToServerKey);
            _clockStart = now;
            _unixStart = unixSeconds;
            _serverStarted = now;
            Buffer.BlockCopy(ConnectToken.VersionInfo, 0, _aad, 0, 13);
            for (int i = 0; i < 8; i++) _aad[13 + i] = (byte)(token.ProtocolId >> (8 * i));
        }

        /// <summary>Where the handshake stands.</summary>
        public ConnectionState State
        {
            get
            {
                return _phase == PhaseConnected ? ConnectionState.Connected
                    : _phase == PhaseDisconnected ? ConnectionState.Disconnected : ConnectionState.Connecting;
            }
        }

        /// <summary>Why it ended (meaningful once Disconnected).</summary>
        public DisconnectReason Reason { get { return _reason; } }

        /// <summary>
        /// The server's words with its disconnect, after the reason code: a room's refusal or
        /// a kick's reason ("room crashed"), at most 123 bytes; empty when it sent the code alone.
        /// </summary>
        public string ReasonText { get { return _reasonText; } }

        /// <summary>A disconnect body in the scratch buffer: its code, and its words kept.</summary>
        DisconnectReason ReadDisconnect(int body)
        {
            int words = Math.Min(body - 1, 123);
            _reasonText = words > 0 ? System.Text.Encoding.UTF8.GetString(_scratch, 1, words) : "";
            return DisconnectReasons.FromCode(_scratch[0]);
        }

        /// <summary>The address handshaking with (the token's addresses in turn).</summary>
        public IPEndPoint ServerAddress { get { return _token.ServerAddresses[_serverIndex]; } }

        /// <summary>What the server dictated, once connected.</summary>
        public ConnectionParams Params { get { return _params; } }

        /// <summary>Reliability counters, once connected.</summary>
        public ReliabilityStats Stats { get { return _reliability != null ? _reliability.Stats : default(ReliabilityStats); } }

        /// <summary>The largest message a channel takes, or -1 (not connected, or no such channel).</summary>
        public int MaxMessageLength(int channel) { return _reliability != null ? _reliability.MaxMessageLength(channel) : -1; }

        void End(DisconnectReason reason)
        {
            if (_phase == PhaseDisconnected) return;
            _phase = PhaseDisconnected;
            _reason = reason;
            _inbox.AddSignal(InboxKind.Disconnected, (byte)reason);
        }

        /// <summary>A datagram from the server (the driver checks where it came from).</summary>
        public void HandleDatagram(long now, byte[] datagram, int length)
        {
            if (length > MaxDatagramBytes || length < 1 || _phase == PhaseDisconnected) return;
            byte prefix = datagram[0];
            int type = prefix & 0x0f;
            if (type == 0 || type == 3 || type > 6) return;
            int sequenceLength = prefix >> 4;
            if (sequenceLength < 1 || sequenceLength > 8 || length < 1 + sequenceLength + TagBytes) return;
            ulong sequence = 0;
            for (int i = 0; i < sequenceLength; i++) sequence |= (ulong)datagram[1 + i] << (8 * i);
            int headerLength = 1 + sequenceLength;

            bool handshakeHalf = (sequence & HandshakeSequenceBit) != 0;
            if (_phase == PhaseConnected)
            {
                // Only what the server sends on a connection (accepted, payload, disconnect),
                // in the connection's half of the sequence space, is opened: a recorded
                // challenge must not reach the replay window.
                if (type == 1 || type == 2 || handshakeHalf) return;
                if (_replay.IsReplay(sequence)) return;
                int body = Open(prefix, sequence, datagram, headerLength, length - headerLength);
                if (body < 0)
                {
                    PacketsUnauthenticated++;
                    return;
                }
                _replay.Accept(sequence);
                _lastReceived = now;
                if (type == 5)
                {
                    var result = _reliability.ReadPacket(now, _scratch, 0, body);
                    if (result == ReadResult.Fatal) Close(now, DisconnectReason.ProtocolViolation);
                    else if (result == ReadResult.Malformed) PayloadsMalformed++;
                }
                else if (type == 6 && body >= 1)
                {
                    End(ReadDisconnect(body));
                }
                return;
            }

            // Challenges and denials come in the handshake half, the accepted packet and a
            // disconnect in the connection's; a challenge older than the one answered is stale.
            bool handshakePacket = type == 1 || type == 2;
            if (handshakePacket != handshakeHalf || type == 5) return;
            if (type == 2 && _phase == PhaseResponse && sequence <= _challengeSequence) return;
            int opened = Open(prefix, sequence, datagram, headerLength, length - headerLength);
            if (opened < 0) return;
            if (type == 1)
            {
                End(opened > 0 ? DisconnectReasons.FromCode(_scratch[0]) : DisconnectReason.Other);
            }
            else if (type == 6 && _phase == PhaseResponse)
            {
                // Accepted and at once closed, the two reordered: the close is authentic.
                if (opened >= 1) End(ReadDisconnect(opened));
            }
            else if (type == 2)
            {
                if (opened != ChallengeTokenBytes) return;
                // The token goes back sealed under the client-to-server key, with the
                // challenge's own sequence as the nonce: the server learns this client holds
                // the key, and no connection packet can share that nonce.
                _challengeSequence = sequence;
                _response[0] = (byte)(8 << 4 | 3);
                for (int i = 0; i < 8; i++) _response[1 + i] = (byte)(sequence >> (8 * i));
                _aad[21] = _response[0];
                _send.Seal(_send.SequenceNonce(sequence), _aad, 0, 22, _scratch, 0, ChallengeTokenBytes, _response, 9);
                _phase = PhaseResponse;
                _hasLastSent = false;
            }
            else if (type == 4 && _phase == PhaseResponse)
            {
                var p = ConnectionParams.Read(_scratch, 0, opened);
                if (p == null) return;
                try
                {
                    _reliability = new Reliability(p.Channels, p.Mtu - 25, p.MaxMessageSize, _inbox);
                }
                catch (ArgumentException)
                {
                    End(DisconnectReason.ProtocolViolation);
                    return;
                }
                _params = p;
                _phase = PhaseConnected;
                _lastSent = now;
                _lastReceived = now;
                // The accepted packet came through this connection's sequence space.
                _replay.Accept(sequence);
                _inbox.AddSignal(InboxKind.Connected, 0);
            }
        }

        /// <summary>Opens a packet body into _scratch; its length, or -1 if it does not authenticate.</summary>
        int Open(byte prefix, ulong sequence, byte[] datagram, int offset, int sealedLength)
        {
            _aad[21] = prefix;
            return _receive.Open(_receive.SequenceNonce(sequence), _aad, 0, 22, datagram, offset, sealedLength, _scratch, 0)
                ? sealedLength - TagBytes : -1;
        }

        ulong UnixSeconds(long now) { return _unixStart + (ulong)Math.Max(0, (now - _clockStart) / 1000000); }

        /// <summary>Timers: handshake deadlines and the connection timeout.</summary>
        public void HandleTimeout(long now)
        {
            if (_phase == PhaseRequest || _phase == PhaseResponse)
            {
                if (UnixSeconds(now) >= _token.ExpireTimestamp)
                {
                    End(DisconnectReason.HandshakeTimedOut);
                    return;
                }
                if (now - _serverStarted >= (long)_token.TimeoutSeconds * 1000000)
                {
                    if (_serverIndex + 1 < _token.ServerAddresses.Length)
                    {
                        _serverIndex++;
                        _serverStarted = now;
                        _phase = PhaseRequest;
                        _hasLastSent = false;
                    }
                    else End(DisconnectReason.HandshakeTimedOut);
                }
            }
            else if (_phase == PhaseConnected && now - _lastReceived >= _params.TimeoutMs * 1000)
            {
                End(DisconnectReason.TimedOut);
            }
        }

        /// <summary>When <see cref="HandleTimeout"/> or <see cref="PollTransmit"/> next has work, or -1.</summary>
        public long PollTimeout()
        {
            if (_farewellNext < _farewellCount) return 0;
            if (_phase == PhaseRequest || _phase == PhaseResponse)
            {
                long resend = _hasLastSent ? _handshakeLastSent + HandshakeResendInterval : _serverStarted;
                return Math.Min(resend, _serverStarted + (long)_token.TimeoutSeconds * 1000000);
            }
            if (_phase == PhaseConnected)
            {
                long next = Math.Min(_lastSent + _params.KeepaliveMs * 1000L, _lastReceived + _params.TimeoutMs * 1000);
                long resend = _reliability.NextTimeout();
                if (resend >= 0) next = Math.Min(next, resend);
                if (_reliability.WantsToSend) next = Math.Min(next, _lastSent);
                return next;
            }
            return -1;
        }

        /// <summary>Queues a message; copied, so the caller may reuse its buffer at once.</summary>
        public SendResult Send(int channel, byte[] bytes, int offset, int length)
        {
            if (_phase != PhaseConnected) return SendResult.NotConnected;
            return _reliability.Send(channel, bytes, offset, length);
        }

        /// <summary>Leaves: three disconnect packets go out with the next transmits.</summary>
        public void Disconnect(long now) { Close(now, DisconnectReason.Requested); }

        void Close(long now, DisconnectReason reason)
        {
            if (_phase == PhaseConnected)
            {
                _farewells = new byte[DisconnectRedundancy][];
                for (int i = 0; i < DisconnectRedundancy; i++)
                {
                    var packet = new byte[64];
                    _scratch[0] = (byte)reason;
                    int length = WriteEncrypted(packet, 6, _scratch, 1);
                    _farewells[i] = new byte[length];
                    Buffer.BlockCopy(packet, 0, _farewells[i], 0, length);
                }
                _farewellCount = DisconnectRedundancy;
                _farewellNext = 0;
                _lastSent = now;
            }
            End(reason);
        }

        /// <summary>Seals a packet of <paramref name="type"/> with the next sequence; returns its length.</summary>
        int WriteEncrypted(byte[] buffer, int type, byte[] body, int bodyLength)
        {
            // A connection stops short of the handshake half (2^63 packets: never, in practice).
            if (_sendSequence >= HandshakeSequenceBit) return 0;
            ulong sequence = _sendSequence++;
            int sequenceLength = SequenceBytes(sequence);
            int header = 1 + sequenceLength;
            byte prefix = (byte)(sequenceLength << 4 | type);
            buffer[0] = prefix;
            for (int i = 0; i < sequenceLength; i++) buffer[1 + i] = (byte)(sequence >> (8 * i));
            _aad[21] = prefix;
            _send.Seal(_send.SequenceNonce(sequence), _aad, 0, 22, body, 0, bodyLength, buffer, header);
            return header + bodyLength + TagBytes;
        }

        static int SequenceBytes(ulong sequence)
        {
            int n = 1;
            while (n < 8 && (sequence >> (8 * n)) != 0) n++;
            return n;
        }

        /// <summary>
        /// Writes the next datagram to send to <see cref="ServerAddress"/> into
        /// <paramref name="buffer"/> (at least the MTU, 1472 bytes, is enough); its length, or 0.
        /// </summary>
        public int PollTransmit(long now, byte[] buffer)
        {
            if (_farewellNext < _farewellCount)
            {
                var packet = _farewells[_farewellNext++];
                Buffer.BlockCopy(packet, 0, buffer, 0, packet.Length);
                return packet.Length;
            }
            bool due = !_hasLastSent || now - _handshakeLastSent >= HandshakeResendInterval;
            if (_phase == PhaseRequest && due)
            {
                _hasLastSent = true;
                _handshakeLastSent = now;
                buffer[0] = 0;
                Buffer.BlockCopy(ConnectToken.VersionInfo, 0, buffer, 1, 13);
                Buffer.BlockCopy(_token.Raw, 13, buffer, 14, 8);
                Buffer.BlockCopy(_token.Raw, 29, buffer, 22, 8);
                Buffer.BlockCopy(_token.Raw, ConnectToken.NonceOffset, buffer, 30, 12 + 1024);
                return 1066;
            }
            if (_phase == PhaseResponse && due)
            {
                _hasLastSent = true;
                _handshakeLastSent = now;
                Buffer.BlockCopy(_response, 0, buffer, 0, ResponseBytes);
                return ResponseBytes;
            }
            if (_phase != PhaseConnected) return 0;
            bool force = now - _lastSent >= _params.KeepaliveMs * 1000L;
            ulong sequence = _sendSequence;
            int sequenceLength = SequenceBytes(sequence);
            int header = 1 + sequenceLength;
            int room = Math.Min(buffer.Length, _params.Mtu) - header - TagBytes;
            int bodyLength = _reliability.WritePacket(now, _scratch, 0, room, force);
            if (bodyLength == 0) return 0;
            _lastSent = now;
            return WriteEncrypted(buffer, 5, _scratch, bodyLength);
        }

        /// <summary>The replay window of PROTOCOL.md, "Encrypted packets" (replay.rs).</summary>
        struct ReplayWindow
        {
            bool _hasNewest;
            ulong _newest;
            Bits256 _seen;

            public bool IsReplay(ulong sequence)
            {
                if (sequence == ulong.MaxValue) return true;
                if (!_hasNewest || sequence > _newest) return false;
                ulong behind = _newest - sequence;
                return behind >= 256 || _seen.Get((int)behind);
            }

            public void Accept(ulong sequence)
            {
                if (_hasNewest && sequence <= _newest)
                {
                    _seen.Set((int)(_newest - sequence), true);
                    return;
                }
                if (_hasNewest) _seen.ShiftUp((int)Math.Min(256UL, sequence - _newest));
                _hasNewest = true;
                _newest = sequence;
                _seen.Set(0, true);
            }
        }
    }
}
