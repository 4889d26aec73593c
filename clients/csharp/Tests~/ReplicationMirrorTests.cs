// The mirror beyond the vectors: snapshots that break each rule of REPLICATION.md are
// refused and leave it as it was; stale ticks, missing baselines, the 32 views kept, tick
// wrap-around, Clear; hostile bytes; and a steady stream applied without allocating.
using System;
using System.Collections.Generic;
using System.Linq;
using Tickwire.Replication;
using Tickwire.Tests.Generated;
using Tickwire.Wire;

namespace Tickwire.Tests
{
    static class ReplicationMirrorTests
    {
        const ulong AllRunner = Runner.PositionField | Runner.NameField | Runner.HealthField | Runner.StaminaField;

        /// <summary>Tick <paramref name="tick"/>, a full state: runners 0 and 5, a score 9.</summary>
        static byte[] FullState(uint tick)
        {
            var w = new SnapshotWriter(Entity.Schema);
            const ulong placed = Runner.PositionField | Runner.NameField;
            return w.Begin(tick, null).List(0).List(3)
                .Create(0, 0, AllRunner).Runner(AllRunner, 1.5f, 2.25f, "ada", 100, 7)
                .Create(5, 0, placed).Runner(placed, 3, 4, "bo")
                .Create(9, 1, Score.RedField).Score(Score.RedField, 2, 0)
                .List(0).NoRoster().ToArray();
        }

        /// <summary>A delta of <paramref name="tick"/> moving runner 0 to x.</summary>
        static byte[] Move(uint tick, int baselineAge, float x)
        {
            var w = new SnapshotWriter(Entity.Schema);
            return w.Begin(tick, baselineAge).List(0).List(0).List(1)
                .Update(0, 0, Runner.PositionField).Runner(Runner.PositionField, x, 2.25f).NoRoster().ToArray();
        }

        static Mirror Applied(params byte[][] snapshots)
        {
            var mirror = new Mirror(Entity.Schema);
            foreach (var bytes in snapshots) MustApply(mirror, bytes, "setup");
            return mirror;
        }

        static uint MustApply(Mirror mirror, byte[] bytes, string what)
        {
            uint tick;
            MirrorError error;
            Assert.True(mirror.TryApply(bytes, 0, bytes.Length, out tick, out error), what + ": refused: " + error);
            return tick;
        }

        static MirrorError MustRefuse(Mirror mirror, byte[] bytes, string what)
        {
            string before = MirrorText.Describe(mirror);
            uint tick;
            MirrorError error;
            Assert.True(!mirror.TryApply(bytes, 0, bytes.Length, out tick, out error), what + ": applied, but it breaks a rule");
            Assert.Equal(before, MirrorText.Describe(mirror), what + ": the mirror changed");
            return error;
        }

        [Test]
        public static void A_snapshot_not_newer_than_the_newest_is_stale_and_changes_nothing()
        {
            var mirror = Applied(FullState(1), Move(2, 1, 8));
            var error = MustRefuse(mirror, Move(2, 1, 9), "tick 2 again");
            Assert.Equal(MirrorErrorKind.Stale, error.Kind, "tick 2 again");
            Assert.Equal("2/2", error.Tick + "/" + error.Newest, "its tick and the newest");
            error = MustRefuse(mirror, FullState(1), "tick 1 after 2");
            Assert.Equal(MirrorErrorKind.Stale, error.Kind, "tick 1 after 2");
            Assert.Equal("snapshot of tick 1 is not newer than tick 2", error.ToString(), "the message");
        }

        [Test]
        public static void Ticks_wrap_in_32_bits()
        {
            var mirror = Applied(FullState(uint.MaxValue));
            MustApply(mirror, Move(0, 1, 6), "tick 0 after 2^32 - 1, as a delta against it");
            MustApply(mirror, Move(1, 2, 7), "tick 1 against 2^32 - 1");
            Assert.Equal(1L, mirror.Tick, "the newest tick");
            var error = MustRefuse(mirror, FullState(uint.MaxValue), "2^32 - 1 after 1");
            Assert.Equal(MirrorErrorKind.Stale, error.Kind, "2^32 - 1 is older than 1");
        }

        [Test]
        public static void A_delta_against_a_view_not_held_is_a_missing_baseline()
        {
            var vectors = ReplicationVectors.ByViewer(ReplicationVectors.File())[1];
            var delta = Hex.Decode(vectors[1]["hex"].AsString());
            var mirror = new Mirror(Entity.Schema);
            var error = MustRefuse(mirror, delta, "a delta first");
            Assert.Equal(MirrorErrorKind.MissingBaseline, error.Kind, "a delta first");
            Assert.Equal("2/1", error.Tick + "/" + error.Baseline, "its tick and baseline");
            Assert.Equal(-1L, mirror.Tick, "nothing applied");

            mirror = Applied(FullState(1));
            error = MustRefuse(mirror, Move(3, 1, 8), "a delta against tick 2, never received");
            Assert.Equal(MirrorErrorKind.MissingBaseline, error.Kind, "against tick 2");
        }

        [Test]
        public static void The_32_newest_views_are_baselines_and_no_older_one()
        {
            var mirror = Applied(FullState(1));
            for (uint tick = 2; tick <= 33; tick++) MustApply(mirror, Move(tick, 1, tick), "tick " + tick);
            // 33 views made; the 32 newest are ticks 2 to 33.
            var w = new SnapshotWriter(Entity.Schema);
            var error = MustRefuse(mirror, w.Begin(34, 33).List(0).List(0).List(0).NoRoster().ToArray(), "a delta against tick 1");
            Assert.Equal(MirrorErrorKind.MissingBaseline, error.Kind, "tick 1 is the 33rd newest");
            MustApply(mirror, w.Begin(34, 32).List(0).List(0).List(0).NoRoster().ToArray(), "a delta against tick 2");
            Runner runner;
            Assert.True(mirror.TryGet(0, out runner), "runner 0 in view");
            Assert.Equal(2f, runner.Position[0], "the view is tick 2's");
            Assert.Equal("Changed(0, 1)", MirrorText.Changes(mirror), "against tick 33's view, runner 0 moved back");
        }

        [Test]
        public static void Clear_forgets_every_view()
        {
            var mirror = Applied(FullState(1), Move(2, 1, 8));
            mirror.Clear();
            Assert.Equal("-1 0 0 0 0", mirror.Tick + " " + mirror.Count + " " + mirror.Changes.Count + " " + mirror.Roster.Count + " "
                + mirror.RosterChanges.Count, "no tick, entities, changes, members or roster changes");
            Assert.Equal(MirrorErrorKind.MissingBaseline, MustRefuse(mirror, Move(3, 1, 9), "a delta after Clear").Kind, "no baseline");
            MustApply(mirror, FullState(1), "tick 1 again: nothing is newer");
            Assert.Equal("Added(0) Added(5) Added(9)", MirrorText.Changes(mirror), "everything added again");
        }

        [Test]
        public static void TryGet_finds_an_entity_by_id_and_kind()
        {
            var mirror = Applied(FullState(1));
            Runner runner;
            Score score;
            Assert.True(mirror.TryGet(0, out runner) && runner.Name == "ada" && runner.Stamina == 7, "runner 0");
            Assert.True(mirror.TryGet(9, out score) && score.Red == 2, "score 9");
            Assert.True(!mirror.TryGet(9, out runner) && runner == null, "9 is not a runner");
            IReplicatedKind any;
            Assert.True(!mirror.TryGet(4, out any) && any == null, "nothing under 4");
            Assert.Equal("Runner(3, 4, \"bo\", 0, 0)", MirrorText.Entity(mirror.Entities[1].Entity), "fields not sent hold their defaults");
        }

        [Test]
        public static void The_roster_section_comes_only_when_the_roster_changed()
        {
            const ulong seated = Member.NameField | Member.ConnectedField;
            var w = new SnapshotWriter(Entity.Schema);
            w.Begin(1, null).List(0).List(0).List(0).Roster().List(0).List(2)
                .Create(0, 0, seated | Member.YouField).Member(seated | Member.YouField, "ada", true, true)
                .Create(4, 0, seated).Member(seated, "bo", true);
            var mirror = Applied(w.List(0).ToArray());
            Assert.Equal(0, mirror.MySeat, "my seat, from `you`");
            Assert.Equal("Added(0) Added(4)", MirrorText.Changes(mirror.RosterChanges), "the roster's changes");
            MustApply(mirror, w.Begin(2, 1).List(0).List(0).List(0).NoRoster().ToArray(), "a delta without a roster section");
            Member bo;
            Assert.True(mirror.TryGetMember(4, out bo) && bo.Name == "bo" && bo.Connected, "the baseline's roster stands");
            Assert.Equal("", MirrorText.Changes(mirror.RosterChanges), "no roster changes");
            var error = MustRefuse(mirror, w.Begin(3, 1).List(0).List(0).List(0).Roster().List(0).List(0).List(1)
                .Update(5, 0, Member.ConnectedField).Member(Member.ConnectedField, "", false).ToArray(), "an update of seat 5");
            Assert.Equal("an update of an entity not in view", error.Reason, "seat 5 is empty");
            MustApply(mirror, w.Begin(3, 1).List(0).List(0).List(0).Roster().List(1).Id(0).List(0).List(1)
                .Update(4, 0, Member.ConnectedField).Member(Member.ConnectedField, "", false).ToArray(), "ada leaves, bo drops");
            Assert.Equal("Removed(0) Changed(4, 2)", MirrorText.Changes(mirror.RosterChanges), "the roster's changes");
            Assert.Equal(-1, mirror.MySeat, "my seat is gone");
            Assert.True(!mirror.TryGetMember(0, out bo) && bo == null, "seat 0 is empty");
            MustApply(mirror, FullState(4), "a full state without a roster section");
            Assert.Equal(0, mirror.Roster.Count, "a full state starts from an empty roster");
        }

        /// <summary>A snapshot written by <paramref name="write"/> on a writer already at a delta of tick 2 against tick 1.</summary>
        static byte[] Delta(Action<SnapshotWriter> write)
        {
            var w = new SnapshotWriter(Entity.Schema);
            w.Begin(2, 1);
            write(w);
            return w.NoRoster().ToArray();
        }

        [Test]
        public static void Snapshots_that_break_a_rule_are_refused_and_leave_the_baseline_intact()
        {
            var empty = Delta(w => w.List(0).List(0).List(0));
            var cases = new List<KeyValuePair<string, byte[]>>();
            Action<string, byte[]> add = (what, bytes) => cases.Add(new KeyValuePair<string, byte[]>(what, bytes));
            var w0 = new SnapshotWriter(Entity.Schema);
            add("invalid: a baseline 0 ticks back", w0.Begin(2, 0).List(0).List(0).List(0).NoRoster().ToArray());
            add("invalid: a destroy of an entity not in view", Delta(w => w.List(1).Id(4).List(0).List(0)));
            add("invalid: a create of an entity already in view", Delta(w => w.List(0).List(1).Create(5, 1, 0).List(0)));
            add("invalid: an update of an entity not in view", Delta(w => w.List(0).List(0).List(1).Update(6, 0, 0)));
            add("invalid: an update of an entity not in view", Delta(w => w.List(1).Id(5).List(0).List(1).Update(5, 0, 0)));
            add("malformed TrailingBytes", empty.Concat(new byte[] { 0 }).ToArray());
            var padded = (byte[])empty.Clone();
            padded[padded.Length - 1] |= 0x80;
            add("malformed NonZeroPadding", padded);
            var full = FullState(2);
            add("malformed Truncated", full.Take(full.Length - 1).ToArray());
            add("malformed OutOfRange", Delta(w => { w.List(1); w.Bits.WriteBits(0b11 | 65535UL << 2, 18); w.List(0).List(0); }));
            add("malformed OutOfRange", Delta(w => { w.List(0).List(0).List(1).Update(0, 0, Runner.PositionField); w.Bits.WriteBits(25601, 15); w.Bits.WriteBits(0, 15); }));
            add("malformed OutOfRange", Delta(w => { w.List(0).List(0).List(1).Update(0, 0, Runner.HealthField); w.Bits.WriteBits(101, 7); }));
            add("malformed OutOfRange", Delta(w => { w.List(0).List(0).List(1).Update(9, 1, Score.RedField); w.Bits.WriteVarint(1UL << 32); }));
            add("malformed TooLong", Delta(w => { w.List(0).List(0).List(1).Update(0, 0, Runner.NameField); w.Bits.WriteBits(17, 5); }));
            add("malformed InvalidUtf8", Delta(w =>
            {
                w.List(0).List(0).List(1).Update(0, 0, Runner.NameField);
                w.Bits.WriteBits(2, 5);
                w.Bits.WriteBits(0xc3, 8);
                w.Bits.WriteBits(0x28, 8);
            }));
            foreach (var c in cases)
            {
                var mirror = Applied(FullState(1));
                var error = MustRefuse(mirror, c.Value, c.Key);
                string got = error.Kind == MirrorErrorKind.Invalid ? "invalid: " + error.Reason
                    : error.Kind == MirrorErrorKind.Malformed ? "malformed " + error.Decode : error.Kind.ToString();
                Assert.Equal(c.Key, got, c.Key + " (" + error + ")");
                MustApply(mirror, Move(2, 1, 8), c.Key + ", then a good delta against tick 1");
                Assert.Equal("Changed(0, 1)", MirrorText.Changes(mirror), c.Key + ", then the good delta's changes");
            }
        }

        [Test]
        public static void A_view_holds_at_most_255_entities()
        {
            var w = new SnapshotWriter(Entity.Schema);
            w.Begin(1, null).List(0).List(255);
            for (int id = 0; id < 255; id++) w.Create(id * 3, 1, 0);
            var mirror = Applied(w.List(0).NoRoster().ToArray());
            Assert.Equal(255, mirror.Count, "a full view");
            var error = MustRefuse(mirror, w.Begin(2, 1).List(0).List(1).Create(1, 1, 0).List(0).NoRoster().ToArray(), "a 256th entity");
            Assert.Equal("a view of more than 255 entities", error.Reason, "the rule");
            MustApply(mirror, w.Begin(2, 1).List(1).Id(0).List(1).Create(1, 1, 0).List(0).NoRoster().ToArray(), "one destroyed, one created");
            Assert.Equal("Removed(0) Added(1)", MirrorText.Changes(mirror), "the changes");
        }

        /// <summary>A kind without fields whose index is given: for worlds of any size.</summary>
        sealed class Marker : IReplicatedKind
        {
            readonly int _kind;
            public Marker(int kind) { _kind = kind; }
            public int Kind { get { return _kind; } }
            public void ReadFields(ulong mask, BitReader reader) { }
            public void ResetFields() { }
            public void CopyFrom(IReplicatedKind other) { }
            public ulong Changed(IReplicatedKind baseline) { return 0; }
        }

        [Test]
        public static void A_create_of_a_kind_the_world_lacks_is_refused()
        {
            var schema = new ReplicatedSchema("Markers", Enumerable.Range(0, 3)
                .Select(k => new ReplicatedKindInfo("Marker" + k, new string[0], 0, () => new Marker(k))).ToArray());
            Assert.Equal(2, schema.KindBits, "3 kinds take 2 bits");
            var mirror = new Mirror(schema);
            var w = new SnapshotWriter(schema);
            MustApply(mirror, w.Begin(1, null).List(0).List(1).Create(7, 2, 0).List(0).NoRoster().ToArray(), "kind 2");
            w.Begin(2, null).List(0).List(1).Id(7).Bits.WriteBits(3, schema.KindBits);
            var error = MustRefuse(mirror, w.List(0).NoRoster().ToArray(), "kind 3");
            Assert.Equal("a create of an unknown kind", error.Reason, "the rule");
        }

        [Test]
        public static void Hostile_bytes_never_throw_and_a_refused_snapshot_changes_nothing()
        {
            var random = new Random(20261207);
            var byViewer = ReplicationVectors.ByViewer(ReplicationVectors.File()).Values
                .Select(list => list.Select(v => Hex.Decode(v["hex"].AsString())).ToArray()).ToArray();
            // What each viewer's mirror shows after each of its snapshots, applied cleanly.
            var expected = byViewer.Select(snapshots =>
            {
                var mirror = new Mirror(Entity.Schema);
                return snapshots.Select(bytes => { MustApply(mirror, bytes, "clean"); return MirrorText.Describe(mirror); }).ToArray();
            }).ToArray();
            var every = byViewer.SelectMany(s => s).ToArray();
            int refused = 0, applied = 0;
            for (int trial = 0; trial < 10000; trial++)
            {
                int viewer = random.Next(byViewer.Length);
                var snapshots = byViewer[viewer];
                int prefix = random.Next(snapshots.Length);
                var mirror = Applied(snapshots.Take(prefix).ToArray());
                string before = MirrorText.Describe(mirror);
                var bytes = HostileInputTests.Mutate(random, every[random.Next(every.Length)]);
                bool ok;
                uint tick;
                MirrorError error;
                try { ok = mirror.TryApply(bytes, 0, bytes.Length, out tick, out error); }
                catch (Exception e) { throw new AssertionException("TryApply threw " + e.GetType().Name + " for " + Hex.Encode(bytes) + ": " + e); }
                if (ok)
                {
                    applied++;
                    continue;
                }
                refused++;
                Assert.Equal(before, MirrorText.Describe(mirror), "refused " + Hex.Encode(bytes) + " (" + error + "), but the mirror changed");
                for (int i = prefix; i < snapshots.Length; i++)
                {
                    MustApply(mirror, snapshots[i], "viewer " + viewer + "'s snapshot " + i + " after refusing " + Hex.Encode(bytes));
                    Assert.Equal(expected[viewer][i], MirrorText.Describe(mirror), "viewer " + viewer + "'s snapshot " + i + " after a refusal");
                }
            }
            Console.WriteLine("        10000 hostile snapshots: " + refused + " refused, " + applied + " applied (valid after all)");
            Assert.True(refused > 8000, "only " + refused + " of 10000 mutated snapshots were refused: the mutations are too gentle");
        }

        sealed class Counter : IMirrorListener
        {
            public long Added, Changed, Removed;
            public void OnAdded(ushort id, IReplicatedKind entity) { Added++; }
            public void OnChanged(ushort id, IReplicatedKind entity, ulong fields) { Changed++; }
            public void OnRemoved(ushort id, IReplicatedKind last) { Removed++; }
        }

        const int Runners = 50;
        const ushort ScoreId = 200;

        /// <summary>Runner r's position steps and health at <paramref name="tick"/>: all change every tick.</summary>
        static void RunnerAt(int r, uint tick, out float x, out float y, out int health)
        {
            x = SnapshotWriter.PositionGrid.ValueAt((ulong)((r * 500 + tick * 7) % 25601));
            y = SnapshotWriter.PositionGrid.ValueAt((ulong)((r * 300 + tick * 3) % 25601));
            health = (int)((r + tick) % 101);
        }

        /// <summary>
        /// Tick 1 a full state with a roster of four, then deltas against 1 to 3 ticks back,
        /// each moving every runner and changing its health and the score.
        /// </summary>
        static byte[][] SteadyStream(int count)
        {
            const ulong moving = Runner.PositionField | Runner.HealthField;
            const ulong scores = Score.RedField | Score.BlueField;
            const ulong seated = Member.NameField | Member.ConnectedField;
            var w = new SnapshotWriter(Entity.Schema);
            var stream = new byte[count][];
            float x, y;
            int health;
            for (uint tick = 1; tick <= count; tick++)
            {
                if (tick == 1)
                {
                    w.Begin(tick, null).List(0).List(Runners + 1);
                    for (int r = 0; r < Runners; r++)
                    {
                        RunnerAt(r, tick, out x, out y, out health);
                        w.Create(r * 3, 0, AllRunner).Runner(AllRunner, x, y, "runner " + r, health, 500);
                    }
                    w.Create(ScoreId, 1, scores).Score(scores, tick, tick / 2).List(0);
                    w.Roster().List(0).List(4);
                    for (int seat = 0; seat < 4; seat++) w.Create(seat, 0, seated).Member(seated, "player " + seat, true);
                    w.List(0);
                }
                else
                {
                    w.Begin(tick, 1 + (int)(tick % 3 % (tick - 1))).List(0).List(0).List(Runners + 1);
                    for (int r = 0; r < Runners; r++)
                    {
                        RunnerAt(r, tick, out x, out y, out health);
                        w.Update(r * 3, 0, moving).Runner(moving, x, y, health: health);
                    }
                    w.Update(ScoreId, 1, scores).Score(scores, tick, tick / 2).NoRoster();
                }
                stream[tick - 1] = w.ToArray();
            }
            return stream;
        }

        [Test]
        public static void A_steady_stream_of_deltas_applies_without_allocating()
        {
            const int warmUp = 200, measured = 1000;
            var stream = SteadyStream(warmUp + 1 + measured);
            var mirror = new Mirror(Entity.Schema);
            var counter = new Counter();
            mirror.Listener = counter;
            var ack = new byte[Mirror.AckLength];
            int next = 0;
            float seen = 0;
            Action applyNext = () =>
            {
                var bytes = stream[next++];
                uint tick;
                MirrorError error;
                if (!mirror.TryApply(bytes, 0, bytes.Length, out tick, out error))
                    throw new AssertionException("snapshot " + next + " refused: " + error);
                Mirror.WriteAck(tick, ack);
                foreach (var change in mirror.Changes) seen += change.Fields;
                foreach (var entry in mirror.Entities)
                {
                    var runner = entry.Entity as Runner;
                    if (runner != null) seen += runner.Position[0];
                }
            };
            for (int i = 0; i < warmUp; i++) applyNext();
            // Alloc.Measure runs it once more to warm up, then `measured` times.
            long allocated = Alloc.Measure(applyNext, measured);
            Console.WriteLine("        " + measured + " snapshots of " + Runners + " moving runners and a score (about "
                + stream[stream.Length - 1].Length + " bytes each), deltas 1 to 3 ticks back: " + allocated
                + " bytes allocated, " + (double)allocated / measured + " per snapshot");
            Assert.Equal(0L, allocated, "bytes allocated applying " + measured + " snapshots in steady state");

            Assert.Equal((long)stream.Length, mirror.Tick, "every snapshot applied");
            Assert.Equal(Runners + 1, mirror.Count, "entities in view");
            Assert.Equal((long)(Runners + 1) * (stream.Length - 1), counter.Changed, "every entity changed on every delta");
            Assert.Equal((long)Runners + 1, counter.Added, "added once each");
            Assert.Equal(4, mirror.Roster.Count, "the roster carried from baseline to baseline");
            float x, y;
            int health;
            for (int r = 0; r < Runners; r++)
            {
                Runner runner;
                Assert.True(mirror.TryGet((ushort)(r * 3), out runner), "runner " + r + " in view");
                RunnerAt(r, (uint)stream.Length, out x, out y, out health);
                Assert.Equal(x + "," + y + "," + health + ",runner " + r + ",500",
                    runner.Position[0] + "," + runner.Position[1] + "," + runner.Health + "," + runner.Name + "," + runner.Stamina,
                    "runner " + r + " at the last tick");
            }
            GC.KeepAlive(seen);
        }

        [Test]
        public static void A_string_that_arrives_is_the_one_allocation()
        {
            var w = new SnapshotWriter(Entity.Schema);
            var stream = new List<byte[]> { FullState(1) };
            for (uint tick = 2; tick <= 300; tick++)
                stream.Add(w.Begin(tick, 1).List(0).List(0).List(1)
                    .Update(0, 0, Runner.NameField).Runner(Runner.NameField, 0, 0, "name " + tick % 7).NoRoster().ToArray());
            var mirror = new Mirror(Entity.Schema);
            int next = 0;
            Action applyNext = () =>
            {
                var bytes = stream[next++];
                uint tick;
                MirrorError error;
                if (!mirror.TryApply(bytes, 0, bytes.Length, out tick, out error))
                    throw new AssertionException("snapshot " + next + " refused: " + error);
            };
            for (int i = 0; i < 99; i++) applyNext();
            long allocated = Alloc.Measure(applyNext, 200);
            Console.WriteLine("        200 renames of one runner: " + (double)allocated / 200 + " bytes allocated per snapshot");
            Assert.True(allocated > 0 && allocated <= 200 * 64, allocated + " bytes for 200 six-character strings: more than the strings");
        }
    }
}
