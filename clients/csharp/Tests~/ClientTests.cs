// TickwireClient's behaviour around the transports: UDP that never answers falls back to
// WebSocket with a fresh token for the same session (fakes, no server), and a lost
// connection comes back to the same seat (a real server).
using System;
using System.Collections.Generic;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Tickwire.Protocol;

namespace Tickwire.Tests
{
    static class ClientTests
    {
        /// A public token naming 127.0.0.1:<paramref name="port"/>, expiring in an hour.
        static byte[] Token(int port)
        {
            var raw = new byte[ConnectToken.Bytes];
            Buffer.BlockCopy(ConnectToken.VersionInfo, 0, raw, 0, 13);
            ulong expires = MonotonicClock.UnixSeconds() + 3600;
            for (int i = 0; i < 8; i++) raw[29 + i] = (byte)(expires >> (8 * i));
            raw[1073] = 5; // timeout_seconds
            raw[1077] = 1;
            raw[1078] = 1;
            raw[1079] = 127; raw[1082] = 1;
            raw[1083] = (byte)port; raw[1084] = (byte)(port >> 8);
            return raw;
        }

        sealed class FakeMatchmaker : IHttpPost
        {
            public readonly List<string> Requests = new List<string>();
            public int Port;

            public Task<HttpReply> PostJsonAsync(string url, string json, CancellationToken cancel)
            {
                lock (Requests) Requests.Add(json);
                string body = "{\"player_id\":7,\"name\":\"ann\",\"room\":3,\"kind\":\"relay\",\"reconnect\":" + (Requests.Count > 1 ? "true" : "false")
                    + ",\"session\":\"s-7\",\"token\":\"" + Convert.ToBase64String(Token(Port)) + "\",\"expires_at\":0,"
                    + "\"endpoints\":{\"udp\":\"127.0.0.1:" + Port + "\",\"ws\":\"ws://127.0.0.1:1/ws\",\"wss\":null,\"wt\":null}}";
                return Task.FromResult(new HttpReply { Status = 200, Body = body });
            }
        }

        sealed class FakeWebSocket : IWebSocket
        {
            public readonly Queue<byte[]> Incoming = new Queue<byte[]>();
            public readonly List<byte[]> Sent = new List<byte[]>();
            public string Url;
            public WebSocketStatus Status { get; set; }
            public int CloseCode { get; set; }

            public readonly byte[] Nonce = new byte[32];

            public void Open(string url)
            {
                Url = url;
                Status = WebSocketStatus.Open;
                // The server speaks first: its 32-byte challenge.
                for (int i = 0; i < 32; i++) Nonce[i] = (byte)(0xa0 + i);
                Incoming.Enqueue(Nonce);
            }

            public void Send(byte[] bytes, int offset, int length)
            {
                var copy = new byte[length];
                Buffer.BlockCopy(bytes, offset, copy, 0, length);
                Sent.Add(copy);
                // The login (token and proof): answered with the default accepted message of PROTOCOL.md.
                if (Sent.Count == 1 && length == 2080) Incoming.Enqueue(Hex.Decode("3c6400102700" + "00b00400000400030001" + "02"));
                else if (length > 0 && copy[0] == 0 && length < 100) Incoming.Enqueue(copy); // echo data messages
            }

            public bool TryReceive(out ArraySegment<byte> message)
            {
                if (Incoming.Count == 0) { message = default(ArraySegment<byte>); return false; }
                message = new ArraySegment<byte>(Incoming.Dequeue());
                return true;
            }

            public void Close(int code) { CloseCode = code; Status = WebSocketStatus.Closed; }
        }

        [Test]
        public static void Udp_that_never_answers_falls_back_to_websocket_for_the_same_session()
        {
            // A bound socket nobody reads: UDP requests vanish.
            using (var silent = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
            {
                silent.Bind(new IPEndPoint(IPAddress.Loopback, 0));
                var http = new FakeMatchmaker { Port = ((IPEndPoint)silent.LocalEndPoint).Port };
                var socket = new FakeWebSocket();
                var client = new TickwireClient(new TickwireClientOptions
                {
                    ServerUrl = "http://fake",
                    Request = new MatchmakeRequest { Kind = "relay", Name = "ann" },
                    Http = http,
                    WebSocketFactory = () => socket,
                    UdpFallbackTimeout = TimeSpan.FromMilliseconds(300),
                });
                client.Start();
                var seen = new List<string>();
                string echoed = null;
                bool sent = false;
                Drive.Until(client, TimeSpan.FromSeconds(5), "the echo over WebSocket", () => echoed != null, e =>
                {
                    seen.Add(e.Type == ClientEventType.Connected ? "Connected:" + e.Transport
                        : e.Type == ClientEventType.Fallback ? "Fallback:" + e.Reason : e.Type.ToString());
                    if (e.Type == ClientEventType.Connected && !sent)
                    {
                        sent = true;
                        Assert.Equal(SendResult.Ok, client.Send(0, Encoding.UTF8.GetBytes("hi")), "send over the fake WebSocket");
                    }
                    if (e.Type == ClientEventType.Message) echoed = e.Channel + ":" + Encoding.UTF8.GetString(e.Message.Array, e.Message.Offset, e.Message.Count);
                });
                Assert.Equal("Matched,Fallback:HandshakeTimedOut,Matched,Connected:WebSocket,Message", string.Join(",", seen), "events");
                Assert.Equal("0:hi", echoed, "the echoed message");
                Assert.True(client.UdpFailed, "the client remembers UDP failed");
                Assert.Equal("ws://127.0.0.1:1/ws", socket.Url, "the WebSocket URL from the answer");
                Assert.Equal(2080, socket.Sent[0].Length, "the login (token and proof) is the first WebSocket message");
                var token = ConnectToken.Read(socket.Sent[0].Take(2048).ToArray());
                Assert.Equal(Hex.Encode(WebSocketLink.LoginMessage(token, socket.Nonce, 0)), Hex.Encode(socket.Sent[0]),
                    "the proof is the HMAC of the fake server's challenge");
                Assert.Equal("{\"kind\":\"relay\",\"name\":\"ann\"}", http.Requests[0], "the first request");
                Assert.Equal("{\"kind\":\"relay\",\"name\":\"ann\",\"session\":\"s-7\"}", http.Requests[1], "the fallback's request names the session");
            }
        }

        [Test]
        public static void A_lost_connection_comes_back_to_the_same_seat_over_udp()
        {
            if (!ServerHarness.Available("reconnection over UDP")) return;
            LostAndBack(TransportChoice.Udp);
        }

        [Test]
        public static void A_lost_connection_comes_back_to_the_same_seat_over_websocket()
        {
            if (!ServerHarness.Available("reconnection over WebSocket")) return;
            LostAndBack(TransportChoice.WebSocket);
        }

        static void LostAndBack(TransportChoice transport)
        {
            using (var server = new ServerHarness())
            {
                var client = new TickwireClient(new TickwireClientOptions
                {
                    ServerUrl = server.HttpUrl,
                    Request = new MatchmakeRequest { Kind = "relay", Name = "comeback" },
                    Transport = transport,
                    BackoffInitial = TimeSpan.FromMilliseconds(50),
                });
                client.Start();
                var seen = new List<string>();
                int connects = 0;
                Action<ClientEvent> onEvent = e =>
                {
                    if (e.Type == ClientEventType.Message) return;
                    seen.Add(e.Type == ClientEventType.Connected ? "Connected:" + (e.Reconnected ? "seat kept" : "new seat")
                        : e.Type == ClientEventType.Disconnected ? "Disconnected:" + e.Reason + (e.RetryInMs >= 0 ? ":retry" : ":final")
                        : e.Type.ToString());
                    if (e.Type == ClientEventType.Connected) connects++;
                };
                Drive.Until(client, TimeSpan.FromSeconds(10), "the first connection", () => connects == 1, onEvent);
                ulong room = client.Answer.Room, player = client.Answer.PlayerId;
                client.AbandonConnection();
                Drive.Until(client, TimeSpan.FromSeconds(10), "the reconnection (" + string.Join(",", seen) + ")", () => connects == 2, onEvent);
                Assert.Equal("Matched,Connected:new seat,Disconnected:ConnectionLost:retry,Matched,Connected:seat kept", string.Join(",", seen), "events");
                Assert.Equal(room, client.Answer.Room, "the room after reconnecting");
                Assert.Equal(player, client.Answer.PlayerId, "the player after reconnecting");
                Assert.Equal(SendResult.Ok, client.Send(0, Encoding.UTF8.GetBytes("still here")), "sending after reconnecting");
                client.Close();
                client.Poll();
            }
        }
    
        sealed class ScriptedHttp : IHttpPost
        {
            public readonly Queue<HttpReply> Replies = new Queue<HttpReply>();
            public int Calls;

            public Task<HttpReply> PostJsonAsync(string url, string json, CancellationToken cancel)
            {
                Calls++;
                return Task.FromResult(Replies.Dequeue());
            }
        }

        [Test]
        public static void Matchmaking_failures_are_retried_only_when_trying_again_can_help()
        {
            var http = new ScriptedHttp();
            http.Replies.Enqueue(new HttpReply { Status = 503, Body = "{\"error\":\"server is draining\"}" });
            http.Replies.Enqueue(new HttpReply { Status = 404, Body = "{\"error\":\"unknown room kind \\\"x\\\"\"}" });
            var client = new TickwireClient(new TickwireClientOptions
            {
                ServerUrl = "http://fake",
                Request = new MatchmakeRequest { Kind = "x" },
                Http = http,
                BackoffInitial = TimeSpan.FromMilliseconds(20),
            });
            client.Start();
            var failures = new List<ClientEvent>();
            Drive.Until(client, TimeSpan.FromSeconds(5), "two matchmaking failures", () => failures.Count == 2, e =>
            {
                if (e.Type == ClientEventType.MatchmakeFailed) failures.Add(e);
            });
            Assert.Equal(MatchmakeErrorKind.Unavailable, failures[0].Error.Kind, "503");
            Assert.True(failures[0].RetryInMs >= 10 && failures[0].RetryInMs <= 20, "503 is retried after the first backoff step, not " + failures[0].RetryInMs + " ms");
            Assert.Equal(MatchmakeErrorKind.NotFound, failures[1].Error.Kind, "404");
            Assert.Equal("matchmaking: 404 unknown room kind \"x\"", failures[1].Error.Message, "the server's error text");
            Assert.Equal(-1L, failures[1].RetryInMs, "404 is final");
            Assert.Equal(ClientState.Closed, client.State, "state after a final failure");
            Assert.Equal(2, http.Calls, "requests made");
        }

        [Test]
        public static void A_malformed_answer_is_a_bad_answer_not_a_crash()
        {
            foreach (var body in new[]
            {
                "not json",
                "{\"player_id\":1}",
                "{\"player_id\":1,\"name\":\"a\",\"room\":1,\"kind\":\"relay\",\"reconnect\":false,\"session\":\"s\",\"token\":\"AAAA\",\"expires_at\":0,"
                    + "\"endpoints\":{\"udp\":\"127.0.0.1:7777\",\"ws\":\"ws://x/ws\",\"wss\":null}}",
            })
            {
                var error = Assert.Throws<MatchmakeException>(() => MatchmakeAnswer.Parse(body), body);
                Assert.Equal(MatchmakeErrorKind.BadAnswer, error.Kind, body);
            }
        }
    }
}
