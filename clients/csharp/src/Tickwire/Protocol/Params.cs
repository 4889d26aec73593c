// What the server dictates (the accepted packet's body), why a connection ended, and the
// connect token: PROTOCOL.md, "UDP protocol".
using System;
using System.Net;

namespace Tickwire.Protocol
{
    /// <summary>What a channel promises.</summary>
    public enum ChannelKind : byte
    {
        /// <summary>Every message, exactly once, in order.</summary>
        Reliable = 0,
        /// <summary>At most once, any order.</summary>
        Unreliable = 1,
        /// <summary>At most once, never older than one already delivered (latest wins).</summary>
        UnreliableSequenced = 2,
    }

    /// <summary>Why a connection ended: the UDP reason codes (WebSocket close codes 4001-4009 map onto them).</summary>
    public enum DisconnectReason : byte
    {
        /// <summary>A code this SDK does not know.</summary>
        Other = 0,
        /// <summary>The other side asked (or this side called Disconnect).</summary>
        Requested = 1,
        /// <summary>Nothing authenticated from the peer for the timeout.</summary>
        TimedOut = 2,
        /// <summary>The server is shutting down.</summary>
        ServerShuttingDown = 3,
        /// <summary>Kicked by the room or an operator.</summary>
        Kicked = 4,
        /// <summary>The reliable queue overflowed: a side did not keep up.</summary>
        ReliableQueueFull = 5,
        /// <summary>A protocol violation.</summary>
        ProtocolViolation = 6,
        /// <summary>The server is full (denied).</summary>
        ServerFull = 7,
        /// <summary>The same player connected again elsewhere.</summary>
        ConnectedElsewhere = 8,
        /// <summary>The handshake did not complete in time (client-side only).</summary>
        HandshakeTimedOut = 9,
        /// <summary>Client-side only: the server refused the token (WebSocket 4010-4012). Retried with a fresh one.</summary>
        TokenRefused = 10,
        /// <summary>Client-side only: the socket died without a close code. Retried.</summary>
        ConnectionLost = 11,
        /// <summary>Client-side only: closed with a code this SDK does not map (see CloseCode).</summary>
        Closed = 12,
    }

    /// <summary>Helpers for reason codes.</summary>
    public static class DisconnectReasons
    {
        /// <summary>The reason for a wire code (Other for unknown ones).</summary>
        public static DisconnectReason FromCode(byte code)
        {
            return code >= 1 && code <= 9 ? (DisconnectReason)code : DisconnectReason.Other;
        }

        /// <summary>
        /// A WebSocket close code as a reason: 4001-4009 are 4000 + the UDP code, 4010-4012 a
        /// refused token and 4014 a login without proof of the token's key (TokenRefused), 1000
        /// a normal close (Requested), 1006 or none a lost connection.
        /// </summary>
        public static DisconnectReason FromCloseCode(int code)
        {
            if (code >= 4001 && code <= 4009) return (DisconnectReason)(code - 4000);
            if ((code >= 4010 && code <= 4012) || code == 4014) return DisconnectReason.TokenRefused;
            if (code == 1000) return DisconnectReason.Requested;
            if (code == 1006 || code == 0) return DisconnectReason.ConnectionLost;
            return DisconnectReason.Closed;
        }

        /// <summary>True for endings a reconnection may cure (what the Rust client retries).</summary>
        public static bool IsRetryable(DisconnectReason reason)
        {
            return reason == DisconnectReason.TimedOut || reason == DisconnectReason.ReliableQueueFull
                || reason == DisconnectReason.HandshakeTimedOut || reason == DisconnectReason.TokenRefused
                || reason == DisconnectReason.ConnectionLost;
        }
    }

    /// <summary>The connection parameters the server dictates (PROTOCOL.md, "Connection parameters").</summary>
    public sealed class ConnectionParams
    {
        /// <summary>The tick rate of the room the player sits in, 1 to 128 Hz.</summary>
        public int TickRateHz;
        /// <summary>Keepalive interval in milliseconds.</summary>
        public int KeepaliveMs;
        /// <summary>Silence after which a side drops the connection, in milliseconds.</summary>
        public long TimeoutMs;
        /// <summary>Largest datagram either side sends (UDP only).</summary>
        public int Mtu;
        /// <summary>Largest reliable message.</summary>
        public int MaxMessageSize;
        /// <summary>Each channel's kind; the channel id is the index.</summary>
        public ChannelKind[] Channels;

        /// <summary>Reads the 14 + c bytes; null for any other length or a broken bound.</summary>
        public static ConnectionParams Read(byte[] bytes, int offset, int length)
        {
            if (length < 14) return null;
            int count = bytes[offset + 13];
            if (count < 1 || count > 32 || length != 14 + count) return null;
            var p = new ConnectionParams
            {
                TickRateHz = bytes[offset],
                KeepaliveMs = bytes[offset + 1] | bytes[offset + 2] << 8,
                TimeoutMs = LittleEndian.U32(bytes, offset + 3),
                Mtu = bytes[offset + 7] | bytes[offset + 8] << 8,
                MaxMessageSize = (int)Math.Min(int.MaxValue, LittleEndian.U32(bytes, offset + 9)),
                Channels = new ChannelKind[count],
            };
            for (int i = 0; i < count; i++)
            {
                byte kind = bytes[offset + 14 + i];
                if (kind > 2) return null;
                p.Channels[i] = (ChannelKind)kind;
            }
            if (p.TickRateHz < 1 || p.TickRateHz > 128 || p.Mtu < 576 || p.Mtu > 1472
                || p.KeepaliveMs == 0 || p.TimeoutMs <= p.KeepaliveMs)
                return null;
            return p;
        }
    }

    /// <summary>The 2048-byte public connect token the matchmaker hands out (PROTOCOL.md, "Connect tokens").</summary>
    public sealed class ConnectToken
    {
        /// <summary>Bytes of a public token.</summary>
        public const int Bytes = 2048;
        /// <summary>"TICKWIRE 1.1" and a zero byte.</summary>
        public static readonly byte[] VersionInfo = { 0x54, 0x49, 0x43, 0x4b, 0x57, 0x49, 0x52, 0x45, 0x20, 0x31, 0x2e, 0x31, 0x00 };

        /// <summary>The token exactly as received (sent whole over WebSocket).</summary>
        public byte[] Raw;
        /// <summary>The game's protocol id.</summary>
        public ulong ProtocolId;
        /// <summary>Unix seconds it was made.</summary>
        public ulong CreateTimestamp;
        /// <summary>Unix seconds after which the server refuses it.</summary>
        public ulong ExpireTimestamp;
        /// <summary>Offset in Raw of the 12-byte nonce and the 1024-byte sealed private token after it.</summary>
        public const int NonceOffset = 37;
        /// <summary>How long a handshake may stay silent.</summary>
        public uint TimeoutSeconds;
        /// <summary>UDP server addresses, in the order to try them.</summary>
        public IPEndPoint[] ServerAddresses;
        /// <summary>Key of client-to-server packets.</summary>
        public byte[] ClientToServerKey;
        /// <summary>Key of server-to-client packets.</summary>
        public byte[] ServerToClientKey;

        /// <summary>Reads a public token; FormatException when it is not one.</summary>
        public static ConnectToken Read(byte[] raw)
        {
            if (raw == null || raw.Length != Bytes) throw new FormatException("connect token is not 2048 bytes");
            for (int i = 0; i < VersionInfo.Length; i++)
                if (raw[i] != VersionInfo[i]) throw new FormatException("connect token has another VERSION_INFO");
            var token = new ConnectToken
            {
                Raw = raw,
                ProtocolId = LittleEndian.U64(raw, 13),
                CreateTimestamp = LittleEndian.U64(raw, 21),
                ExpireTimestamp = LittleEndian.U64(raw, 29),
                TimeoutSeconds = LittleEndian.U32(raw, 1073),
            };
            int count = raw[1077];
            if (count < 1 || count > 32) throw new FormatException("connect token address count " + count + " outside 1..=32");
            token.ServerAddresses = new IPEndPoint[count];
            int at = 1078;
            for (int i = 0; i < count; i++)
            {
                byte type = raw[at];
                int ipLength = type == 1 ? 4 : type == 2 ? 16 : -1;
                if (ipLength < 0) throw new FormatException("connect token address type " + type);
                var ip = new byte[ipLength];
                Buffer.BlockCopy(raw, at + 1, ip, 0, ipLength);
                int port = raw[at + 1 + ipLength] | raw[at + 2 + ipLength] << 8;
                token.ServerAddresses[i] = new IPEndPoint(new IPAddress(ip), port);
                at += 3 + ipLength;
            }
            token.ClientToServerKey = new byte[32];
            token.ServerToClientKey = new byte[32];
            Buffer.BlockCopy(raw, at, token.ClientToServerKey, 0, 32);
            Buffer.BlockCopy(raw, at + 32, token.ServerToClientKey, 0, 32);
            return token;
        }
    }
}
