// Bytes from the network never crash the SDK: every decoder of peer bytes is fed seeded
// random mutations of valid inputs (bit flips, truncations, random tails) and may only
// refuse them in its documented way. The C# stand-in for the Rust fuzz targets.
using System;
using System.Linq;
using Tickwire.Arena;
using Tickwire.Protocol;
using Tickwire.Wire;

namespace Tickwire.Tests
{
    static class HostileInputTests
    {
        /// <summary>A seeded mutation of <paramref name="seed"/>: bit flips, a truncation, a random tail, or random bytes.</summary>
        internal static byte[] Mutate(Random random, byte[] seed)
        {
            byte[] bytes;
            switch (random.Next(4))
            {
                case 0:
                    bytes = (byte[])seed.Clone();
                    for (int flips = random.Next(1, 4); flips > 0 && bytes.Length > 0; flips--)
                        bytes[random.Next(bytes.Length)] ^= (byte)(1 << random.Next(8));
                    return bytes;
                case 1:
                    return seed.Take(random.Next(seed.Length + 1)).ToArray();
                case 2:
                    bytes = new byte[seed.Length + random.Next(1, 40)];
                    Buffer.BlockCopy(seed, 0, bytes, 0, seed.Length);
                    for (int i = seed.Length; i < bytes.Length; i++) bytes[i] = (byte)random.Next(256);
                    return bytes;
                default:
                    bytes = new byte[random.Next(0, 300)];
                    random.NextBytes(bytes);
                    return bytes;
            }
        }

        [Test]
        public static void Snapshots_and_server_messages_refuse_garbage_only_with_their_exceptions()
        {
            var random = new Random(20261125);
            var snapshots = Repo.Json("crates", "arena", "tests", "vectors", "snapshots.json")["vectors"].Items
                .Select(v => Hex.Decode(v["hex"].AsString())).ToArray();
            var messages = Repo.Json("crates", "arena", "tests", "vectors", "messages.json")["server_messages"].Items
                .Select(v => Hex.Decode(v["hex"].AsString())).ToArray();
            int refused = 0;
            for (int i = 0; i < 20000; i++)
            {
                var decoder = new SnapshotDecoder(new SnapshotSchema(40, 30, 100), 32);
                foreach (var good in snapshots.Take(random.Next(snapshots.Length))) decoder.Decode(good, 0, good.Length);
                var bytes = Mutate(random, snapshots[random.Next(snapshots.Length)]);
                try { decoder.Decode(bytes, 0, bytes.Length); }
                catch (SnapshotException) { refused++; }

                bytes = Mutate(random, messages[random.Next(messages.Length)]);
                try { ServerMessage.Decode(bytes, 0, bytes.Length); }
                catch (DecodeException) { refused++; }
            }
            Assert.True(refused > 10000, "only " + refused + " of 40000 mutated inputs were refused: the mutations are too gentle");
        }

        [Test]
        public static void Reliability_payloads_and_connection_params_refuse_garbage_without_throwing()
        {
            var random = new Random(7);
            var channels = new[] { ChannelKind.Reliable, ChannelKind.Unreliable, ChannelKind.UnreliableSequenced };
            var seeds = new[]
            {
                Hex.Decode("01050003000500000000000002686901017502070000"),
                Hex.Decode("000000000000000000" + "800900c8000000400003" + "00" + "0102030405060708"),
                Hex.Decode("3c6400102700" + "00b00400000400030001" + "02"),
            };
            var inbox = new Inbox();
            var reliability = new Reliability(channels, 1150, 262144, inbox);
            int fatal = 0;
            for (int i = 0; i < 50000; i++)
            {
                var bytes = Mutate(random, seeds[random.Next(seeds.Length)]);
                if (reliability.ReadPacket(i * 1000L, bytes, 0, bytes.Length) == ReadResult.Fatal)
                {
                    fatal++;
                    reliability = new Reliability(channels, 1150, 262144, inbox);
                }
                ConnectionParams.Read(bytes, 0, bytes.Length);
                InboxKind kind; byte channel; ArraySegment<byte> message;
                while (inbox.TryTake(out kind, out channel, out message)) { }
                inbox.Clear();
                var buffer = new byte[1200];
                while (reliability.WritePacket(i * 1000L, buffer, 0, buffer.Length, false) > 0) { }
            }
            Assert.True(fatal < 50000, "every payload was fatal");
        }
    }
}
