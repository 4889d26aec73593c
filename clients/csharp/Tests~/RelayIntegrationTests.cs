// A C# client and the Rust client (crates/client/examples/relay_peer.rs) in one relay room
// of a real `tickwire serve`, over UDP and over WebSocket: each receives the other's
// messages, the C# one's 5000-byte message included (fragmented over UDP).
using System;
using System.Collections.Generic;
using System.Text;
using Tickwire.Protocol;

namespace Tickwire.Tests
{
    static class RelayIntegrationTests
    {
        [Test]
        public static void A_csharp_and_a_rust_client_share_a_relay_room_over_udp()
        {
            if (!ServerHarness.Available("relay over UDP")) return;
            Exchange(TransportChoice.Udp, "udp", TransportKind.Udp);
        }

        [Test]
        public static void A_csharp_and_a_rust_client_share_a_relay_room_over_websocket()
        {
            if (!ServerHarness.Available("relay over WebSocket")) return;
            Exchange(TransportChoice.WebSocket, "ws", TransportKind.WebSocket);
        }

        [Test]
        public static void A_csharp_client_over_udp_and_a_rust_client_over_websocket_share_a_relay_room()
        {
            if (!ServerHarness.Available("relay across transports")) return;
            Exchange(TransportChoice.Udp, "ws", TransportKind.Udp);
        }

        static void Exchange(TransportChoice choice, string peerTransport, TransportKind expected)
        {
            using (var server = new ServerHarness())
            {
                var client = new TickwireClient(new TickwireClientOptions
                {
                    ServerUrl = server.HttpUrl,
                    Request = new MatchmakeRequest { Kind = "relay", Create = true, Name = "csharp" },
                    Transport = choice,
                    Reconnect = false,
                });
                client.Start();
                bool connected = false;
                var failures = new List<string>();
                Action<ClientEvent> onEvent = e =>
                {
                    if (e.Type == ClientEventType.Connected)
                    {
                        connected = true;
                        Assert.Equal(expected, e.Transport, "transport");
                    }
                    if (e.Type == ClientEventType.Disconnected) failures.Add("disconnected: " + e.Reason);
                    if (e.Type == ClientEventType.MatchmakeFailed) failures.Add("matchmaking: " + e.Error.Message);
                };
                Drive.Until(client, TimeSpan.FromSeconds(10), "the C# client to connect", () => connected || failures.Count > 0, onEvent);
                Assert.True(failures.Count == 0, string.Join("; ", failures));

                var peerOutput = new List<string>();
                var peer = ServerHarness.StartPeer(server.HttpUrl, peerTransport, client.Answer.Room, peerOutput);
                try
                {
                    string fromRust = null;
                    Drive.Until(client, TimeSpan.FromSeconds(15), "the Rust client's hello (peer said: " + string.Join(" | ", peerOutput) + ")",
                        () => fromRust != null || failures.Count > 0, e =>
                        {
                            onEvent(e);
                            if (e.Type == ClientEventType.Message)
                                fromRust = e.Channel + ":" + Encoding.UTF8.GetString(e.Message.Array, e.Message.Offset, e.Message.Count);
                        });
                    Assert.True(failures.Count == 0, string.Join("; ", failures));
                    Assert.Equal("0:hello from rust", fromRust, "the Rust client's message, on the reliable channel");

                    Assert.Equal(SendResult.Ok, client.Send(0, Encoding.UTF8.GetBytes("hello from csharp")), "send hello");
                    var big = new byte[5000];
                    for (int i = 0; i < big.Length; i++) big[i] = (byte)(i % 251);
                    Assert.Equal(SendResult.Ok, client.Send(0, big), "send 5000 bytes");
                    Drive.Until(client, TimeSpan.FromSeconds(15), "the Rust client to receive both and exit", () => peer.HasExited, onEvent);
                    peer.WaitForExit();
                    string output = string.Join(" | ", peerOutput);
                    Assert.Equal(0, peer.ExitCode, "relay_peer's exit code (its output: " + output + ")");
                    Assert.True(output.Contains("received 0 17 hello from csharp"), "the Rust client got the hello: " + output);
                    Assert.True(output.Contains("received 0 5000 pattern"), "the Rust client got the 5000 bytes intact: " + output);
                }
                finally
                {
                    if (!peer.HasExited) peer.Kill();
                }
                client.Close();
                bool closed = false;
                Drive.Until(client, TimeSpan.FromSeconds(2), "the close", () => closed, e => { if (e.Type == ClientEventType.Disconnected) closed = true; });
            }
        }
    }
}
