// The reliability layer: PROTOCOL.md's example payload, and a deterministic link simulator
// (seeded loss, duplication, reordering and jitter on a virtual clock) under which reliable
// delivery must be exactly once and in order, and sequenced delivery must never go back.
using System;
using System.Collections.Generic;
using Tickwire.Protocol;

namespace Tickwire.Tests
{
    static class ReliabilityTests
    {
        static readonly ChannelKind[] Channels = { ChannelKind.Reliable, ChannelKind.Unreliable, ChannelKind.UnreliableSequenced };

        static List<KeyValuePair<byte, string>> Drain(Inbox inbox)
        {
            var list = new List<KeyValuePair<byte, string>>();
            InboxKind kind;
            byte channel;
            ArraySegment<byte> message;
            while (inbox.TryTake(out kind, out channel, out message))
                list.Add(new KeyValuePair<byte, string>(channel, Hex.Encode(message.Array, message.Offset, message.Count)));
            inbox.Clear();
            return list;
        }

        [Test]
        public static void The_protocol_md_example_payload_delivers_its_three_messages()
        {
            var inbox = new Inbox();
            var receiver = new Reliability(Channels, 1150, 262144, inbox);
            var payload = Hex.Decode("010500030005000000000000026869010175020700" + "00");
            Assert.Equal(ReadResult.Ok, receiver.ReadPacket(0, payload, 0, payload.Length), "read");
            var got = Drain(inbox);
            Assert.Equal(3, got.Count, "messages delivered");
            Assert.Equal("0:6869", got[0].Key + ":" + got[0].Value, "reliable hi");
            Assert.Equal("1:75", got[1].Key + ":" + got[1].Value, "unreliable u");
            Assert.Equal("2:", got[2].Key + ":" + got[2].Value, "empty sequenced");
        }

        [Test]
        public static void Malformed_payloads_are_refused_whole()
        {
            var inbox = new Inbox();
            var receiver = new Reliability(Channels, 1150, 262144, inbox);
            string[] bad =
            {
                "0105000300",                                  // short header
                "040000000000000000",                          // reserved flag
                "000000030000000000",                          // stray ack
                "000000000000000000" + "00000002686921" + "05",  // a good frame, then an unknown channel
                "000000000000000000" + "2000000100",           // reserved tag bits
                "000000000000000000" + "810000c800000040000300", // fragment on an unreliable channel
                "000000000000000000" + "800900c8000000300003", // fragment size below 64 (and short)
                "000000000000000000" + "0000008000",           // overlong varint
                "000000000000000000" + "00000405",             // length past the end
                "000000000000000000" + "00000402",             // reliable id 1024 ahead: out of window
            };
            foreach (var hex in bad)
            {
                var bytes = Hex.Decode(hex);
                var result = receiver.ReadPacket(0, bytes, 0, bytes.Length);
                Assert.Equal(ReadResult.Malformed, result, "payload " + hex);
                Assert.Equal(0, inbox.Count, "payload " + hex + " delivered something");
            }
        }

        /// A seeded link: each packet is lost, duplicated, delayed with jitter (so reordered).
        sealed class Link
        {
            struct InFlight { public long At; public byte[] Bytes; public int Length; }
            readonly List<InFlight> _inFlight = new List<InFlight>();
            readonly Random _random;
            readonly double _loss, _duplicate;
            readonly long _latency, _jitter;

            public Link(int seed, double loss, double duplicate, long latencyMicros, long jitterMicros)
            {
                _random = new Random(seed);
                _loss = loss;
                _duplicate = duplicate;
                _latency = latencyMicros;
                _jitter = jitterMicros;
            }

            public void Send(long now, byte[] bytes, int length)
            {
                int copies = _random.NextDouble() < _duplicate ? 2 : 1;
                for (int i = 0; i < copies; i++)
                {
                    if (_random.NextDouble() < _loss) continue;
                    var copy = new byte[length];
                    Buffer.BlockCopy(bytes, 0, copy, 0, length);
                    _inFlight.Add(new InFlight { At = now + _latency + (long)(_random.NextDouble() * _jitter), Bytes = copy, Length = length });
                }
            }

            public void Deliver(long now, Reliability to)
            {
                for (int i = 0; i < _inFlight.Count; i++)
                {
                    if (_inFlight[i].At > now) continue;
                    var packet = _inFlight[i];
                    _inFlight.RemoveAt(i--);
                    var result = to.ReadPacket(now, packet.Bytes, 0, packet.Length);
                    Assert.True(result == ReadResult.Ok, "a packet the peer wrote was refused: " + result);
                }
            }
        }

        static byte[] MessageBytes(int side, int index)
        {
            int length = index % 10 == 0 ? 3000 + index * 7 : index % 3 == 0 ? 0 : 1 + (index * 37) % 900;
            var bytes = new byte[length + 4];
            bytes[0] = (byte)side; bytes[1] = (byte)index; bytes[2] = (byte)(index >> 8);
            for (int i = 3; i < bytes.Length; i++) bytes[i] = (byte)(i * 31 + index);
            return bytes;
        }

        static void Pump(long now, Reliability from, Link link, byte[] packet)
        {
            int length;
            while ((length = from.WritePacket(now, packet, 0, packet.Length, false)) > 0) link.Send(now, packet, length);
        }

        [Test]
        public static void Reliable_delivery_is_exactly_once_and_in_order_under_heavy_loss()
        {
            foreach (int seed in new[] { 1, 7, 42 })
            {
                var inboxA = new Inbox();
                var inboxB = new Inbox();
                var a = new Reliability(Channels, 1175, 262144, inboxA);
                var b = new Reliability(Channels, 1175, 262144, inboxB);
                var aToB = new Link(seed, 0.3, 0.1, 20000, 30000);
                var bToA = new Link(seed + 1000, 0.3, 0.1, 20000, 30000);
                const int count = 200;
                var packet = new byte[1175];
                int sentA = 0, sentB = 0, receivedAtB = 0, receivedAtA = 0;
                int lastSequencedAtB = -1;
                long now = 0;
                for (; now < 120000000 && (receivedAtA < count || receivedAtB < count); now += 1000)
                {
                    // A few messages per virtual millisecond each way, plus a sequenced stream.
                    if (sentA < count && now % 3000 == 0) { var m = MessageBytes(1, sentA++); Assert.Equal(SendResult.Ok, a.Send(0, m, 0, m.Length), "send a"); }
                    if (sentB < count && now % 4000 == 0) { var m = MessageBytes(2, sentB++); Assert.Equal(SendResult.Ok, b.Send(0, m, 0, m.Length), "send b"); }
                    if (now % 16000 == 0)
                    {
                        var s = BitConverter.GetBytes((int)(now / 16000));
                        a.Send(2, s, 0, s.Length);
                    }
                    Pump(now, a, aToB, packet);
                    Pump(now, b, bToA, packet);
                    aToB.Deliver(now, b);
                    bToA.Deliver(now, a);
                    InboxKind kind;
                    byte channel;
                    ArraySegment<byte> message;
                    while (inboxB.TryTake(out kind, out channel, out message))
                    {
                        if (channel == 2)
                        {
                            int number = BitConverter.ToInt32(message.Array, message.Offset);
                            Assert.True(number > lastSequencedAtB, "seed " + seed + ": sequenced " + number + " after " + lastSequencedAtB);
                            lastSequencedAtB = number;
                            continue;
                        }
                        Expect(seed, "b", message, MessageBytes(1, receivedAtB++));
                    }
                    inboxB.Clear();
                    while (inboxA.TryTake(out kind, out channel, out message)) Expect(seed, "a", message, MessageBytes(2, receivedAtA++));
                    inboxA.Clear();
                }
                Assert.Equal(count, receivedAtB, "seed " + seed + ": messages a sent that b received (virtual " + now / 1000 + " ms)");
                Assert.Equal(count, receivedAtA, "seed " + seed + ": messages b sent that a received");
                Assert.True(a.Stats.UnitsResent > 0, "seed " + seed + ": nothing was resent at 30% loss");
                Assert.True(lastSequencedAtB > 0, "seed " + seed + ": no sequenced message arrived");
                Console.WriteLine("        seed " + seed + ": 2 x " + count + " reliable messages in " + now / 1000 + " virtual ms, "
                    + (a.Stats.UnitsResent + b.Stats.UnitsResent) + " units resent, measured loss " + a.Stats.PacketLoss.ToString("0.00"));
            }
        }

        static void Expect(int seed, string side, ArraySegment<byte> got, byte[] expected)
        {
            if (got.Count != expected.Length)
                throw new AssertionException("seed " + seed + ": " + side + " got " + got.Count + " bytes (message " + (got.Array[got.Offset + 1] | got.Array[got.Offset + 2] << 8) + "), expected " + expected.Length + " (message " + (expected[1] | expected[2] << 8) + ")");
            for (int i = 0; i < expected.Length; i++)
                if (got.Array[got.Offset + i] != expected[i]) throw new AssertionException("seed " + seed + ": " + side + " message differs at byte " + i);
        }

        [Test]
        public static void Receiving_in_steady_state_allocates_nothing()
        {
            var inboxA = new Inbox();
            var inboxB = new Inbox();
            var a = new Reliability(Channels, 1175, 262144, inboxA);
            var b = new Reliability(Channels, 1175, 262144, inboxB);
            var packet = new byte[1175];
            var snapshot = new byte[600];
            var input = new byte[40];
            var chat = new byte[100];
            long now = 0;
            Action tick = () =>
            {
                now += 16667;
                a.Send(2, snapshot, 0, snapshot.Length);
                if (now % 5 == 0) a.Send(0, chat, 0, chat.Length);
                b.Send(1, input, 0, input.Length);
                int length;
                while ((length = a.WritePacket(now, packet, 0, packet.Length, false)) > 0) b.ReadPacket(now, packet, 0, length);
                while ((length = b.WritePacket(now, packet, 0, packet.Length, false)) > 0) a.ReadPacket(now, packet, 0, length);
                InboxKind kind;
                byte channel;
                ArraySegment<byte> message;
                while (inboxA.TryTake(out kind, out channel, out message)) { }
                while (inboxB.TryTake(out kind, out channel, out message)) { }
                inboxA.Clear();
                inboxB.Clear();
            };
            for (int i = 0; i < 2000; i++) tick();
            long allocated = Alloc.Measure(tick, 2000);
            Assert.Equal(0L, allocated, "bytes allocated over 2000 ticks of snapshots, inputs and reliable chat");
        }
    }
}
