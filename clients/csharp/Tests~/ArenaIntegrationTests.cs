// A C# bot plays the arena of a real `tickwire serve` for 10 s over UDP: it decodes the
// Welcome and every snapshot, moves and fires with acknowledged inputs, and the server's
// snapshots show it moving. It also measures what steady-state receiving allocates.
using System;
using System.Threading;
using Tickwire.Arena;

namespace Tickwire.Tests
{
    static class ArenaIntegrationTests
    {
        [Test]
        public static void A_csharp_bot_plays_the_arena_for_10_seconds_and_its_snapshots_decode()
        {
            if (!ServerHarness.Available("arena bot")) return;
            using (var server = new ServerHarness())
            {
                var client = new TickwireClient(new TickwireClientOptions
                {
                    ServerUrl = server.HttpUrl,
                    Request = new MatchmakeRequest { Kind = "arena", Name = "csharp-bot" },
                    Transport = TransportChoice.Udp,
                    Reconnect = false,
                });
                client.Start();
                ServerMessage welcome = null;
                SnapshotDecoder decoder = null;
                var inputs = new InputSender();
                int snapshots = 0, failures = 0, messages = 0;
                string lastFailure = null;
                float startX = float.NaN, startY = float.NaN, maxDistance = 0;
                int lastInput = -1;
                string ended = null;
                long nextInput = 0;
                long measuredBytes = 0;
                int measuredSnapshots = 0;
                var clock = System.Diagnostics.Stopwatch.StartNew();
                bool measuring = false;
                long measureStart = 0;
                int snapshotsAtMeasureStart = 0, messagesAtMeasureStart = 0, measuredMessages = 0;
                while (clock.Elapsed < TimeSpan.FromSeconds(10.5) && ended == null)
                {
                    // Seconds 4 to 9: everything the loop allocates, socket reads and decoding included.
                    if (!measuring && clock.Elapsed > TimeSpan.FromSeconds(4) && decoder != null)
                    {
                        measuring = true;
                        measureStart = GC.GetAllocatedBytesForCurrentThread();
                        snapshotsAtMeasureStart = snapshots;
                        messagesAtMeasureStart = messages;
                    }
                    if (measuring && measuredSnapshots == 0 && clock.Elapsed > TimeSpan.FromSeconds(9))
                    {
                        measuredBytes = GC.GetAllocatedBytesForCurrentThread() - measureStart;
                        measuredSnapshots = snapshots - snapshotsAtMeasureStart;
                        measuredMessages = messages - messagesAtMeasureStart;
                    }
                    client.Poll();
                    ClientEvent e;
                    while (client.TryGetEvent(out e))
                    {
                        if (e.Type == ClientEventType.Disconnected) ended = "disconnected: " + e.Reason;
                        if (e.Type == ClientEventType.MatchmakeFailed) ended = "matchmaking: " + e.Error.Message;
                        if (e.Type != ClientEventType.Message) continue;
                        if (e.Channel == ArenaChannels.Messages)
                        {
                            messages++;
                            var m = ServerMessage.Decode(e.Message.Array, e.Message.Offset, e.Message.Count);
                            if (m.Type == ServerMessageType.Welcome)
                            {
                                welcome = m;
                                decoder = new SnapshotDecoder(SnapshotSchema.FromWelcome(m), m.SnapshotHistory);
                            }
                        }
                        else if (e.Channel == ArenaChannels.Snapshots && decoder != null)
                        {
                            try
                            {
                                var s = decoder.Decode(e.Message);
                                snapshots++;
                                if (float.IsNaN(startX)) { startX = s.Me.X; startY = s.Me.Y; }
                                float dx = s.Me.X - startX, dy = s.Me.Y - startY;
                                maxDistance = Math.Max(maxDistance, (float)Math.Sqrt(dx * dx + dy * dy));
                                if (s.LastInput >= 0) lastInput = s.LastInput;
                            }
                            catch (SnapshotException error)
                            {
                                failures++;
                                lastFailure = error.Message;
                            }
                        }
                    }
                    if (decoder != null && clock.ElapsedMilliseconds >= nextInput)
                    {
                        nextInput = clock.ElapsedMilliseconds + 33;
                        // Walk a slow circle and fire now and then.
                        double t = clock.Elapsed.TotalSeconds;
                        var input = inputs.Next((float)Math.Cos(t), (float)Math.Sin(t), (float)(t % 6 - 3),
                            (clock.ElapsedMilliseconds / 500) % 2 == 0 ? Buttons.Fire : Buttons.None, decoder.Newest);
                        client.Send(ArenaChannels.Inputs, input.Array, input.Offset, input.Count);
                    }
                    Thread.Sleep(1);
                }
                Assert.True(ended == null, "the bot's connection ended: " + ended);
                Assert.True(welcome != null, "no Welcome arrived");
                Assert.Equal(ArenaChannels.Protocol, (int)welcome.Protocol, "arena protocol");
                Assert.True(failures == 0, failures + " snapshots failed to decode, the last: " + lastFailure);
                Assert.True(snapshots >= 300, "only " + snapshots + " snapshots decoded in 10 s");
                Assert.True(maxDistance > 2, "the server never moved the bot (it went " + maxDistance + " m)");
                Assert.True(lastInput > 100, "the server applied inputs up to sequence " + lastInput);
                // Only reliable ServerMessages (a scoreboard, a kill) allocate: their objects and strings.
                Assert.True(measuredSnapshots > 200, "the allocation window saw only " + measuredSnapshots + " snapshots");
                Assert.True(measuredBytes <= 4096L * measuredMessages,
                    measuredBytes + " bytes allocated in the steady state, with " + measuredMessages + " server messages");
                Console.WriteLine("        arena bot: " + snapshots + " snapshots, " + messages + " messages, moved up to " + maxDistance.ToString("0.0")
                    + " m, rtt " + client.UdpStats.RttMicros / 1000.0 + " ms; allocated " + measuredBytes + " bytes over "
                    + measuredSnapshots + " snapshots and " + measuredMessages + " messages in the 5 s steady-state window (sockets, decoding, inputs)");
                client.Close();
                client.Poll();
            }
        }
    
        [Test]
        public static void A_silent_spectator_stays_connected_and_decodes_snapshots_over_websocket()
        {
            if (!ServerHarness.Available("arena spectator over WebSocket")) return;
            Spectate(TransportChoice.WebSocket);
        }

        [Test]
        public static void A_silent_spectator_stays_connected_and_decodes_snapshots_over_udp()
        {
            if (!ServerHarness.Available("arena spectator over UDP")) return;
            Spectate(TransportChoice.Udp);
        }

        static void Spectate(TransportChoice transport)
        {
            // A 3 s timeout: a client that sends nothing while the server streams snapshots
            // (so the server never pings) must keep the connection alive by itself.
            using (var server = new ServerHarness("TICKWIRE_CONNECTION__TIMEOUT_MS=3000"))
            {
                var client = new TickwireClient(new TickwireClientOptions
                {
                    ServerUrl = server.HttpUrl,
                    Request = new MatchmakeRequest { Kind = "arena", Name = "spectator" },
                    Transport = transport,
                    Reconnect = false,
                });
                client.Start();
                SnapshotDecoder decoder = null;
                int snapshots = 0, messages = 0;
                string ended = null;
                var clock = System.Diagnostics.Stopwatch.StartNew();
                long allocatedAt2 = -1, allocatedAt6 = -1;
                int snapshotsAt2 = 0, snapshotsAt6 = 0, messagesAt2 = 0, messagesAt6 = 0;
                Drive.Until(client, TimeSpan.FromSeconds(10), "7 s of snapshots", () =>
                {
                    // This thread's allocations from second 2 to 6: Poll, the transport's hand-off, decoding.
                    if (allocatedAt2 < 0 && clock.Elapsed > TimeSpan.FromSeconds(2)) { allocatedAt2 = GC.GetAllocatedBytesForCurrentThread(); snapshotsAt2 = snapshots; messagesAt2 = messages; }
                    if (allocatedAt6 < 0 && clock.Elapsed > TimeSpan.FromSeconds(6)) { allocatedAt6 = GC.GetAllocatedBytesForCurrentThread(); snapshotsAt6 = snapshots; messagesAt6 = messages; }
                    return ended != null || clock.Elapsed > TimeSpan.FromSeconds(7);
                }, e =>
                {
                    if (e.Type == ClientEventType.Disconnected) ended = "disconnected: " + e.Reason + " after " + clock.Elapsed.TotalSeconds.ToString("0.0") + " s";
                    if (e.Type != ClientEventType.Message) return;
                    if (e.Channel == ArenaChannels.Messages)
                    {
                        messages++;
                        var m = ServerMessage.Decode(e.Message.Array, e.Message.Offset, e.Message.Count);
                        if (m.Type == ServerMessageType.Welcome) decoder = new SnapshotDecoder(SnapshotSchema.FromWelcome(m), m.SnapshotHistory);
                    }
                    else if (e.Channel == ArenaChannels.Snapshots && decoder != null)
                    {
                        decoder.Decode(e.Message);
                        snapshots++;
                    }
                });
                Assert.True(ended == null, "the silent client's connection ended: " + ended);
                Assert.True(snapshots > 200, "only " + snapshots + " snapshots over " + transport + " in 7 s");
                long allocated = allocatedAt6 - allocatedAt2;
                Assert.True(allocated <= 4096L * (messagesAt6 - messagesAt2),
                    allocated + " bytes allocated on the polling thread over " + transport + ", with " + (messagesAt6 - messagesAt2) + " server messages");
                Console.WriteLine("        spectator over " + transport + ": " + snapshots + " snapshots; the polling thread allocated " + allocated
                    + " bytes over " + (snapshotsAt6 - snapshotsAt2) + " snapshots and " + (messagesAt6 - messagesAt2) + " messages in seconds 2 to 6");
                client.Close();
                client.Poll();
            }
        }
    }
}
