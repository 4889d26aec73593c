// The replication golden vectors (crates/replicate/tests/vectors/replication.json): every
// stored snapshot applied in order by one mirror per viewer, over the hand-written
// generated code of Tests~/Generated, must leave the stored view (ids, kinds, every field's
// value exactly), roster and change lists.
using System.Collections.Generic;
using System.Linq;
using Tickwire.Replication;
using Tickwire.Tests.Generated;
using Tickwire.Wire;

namespace Tickwire.Tests
{
    static class ReplicationVectorTests
    {
        static void AssertView(string name, JsonValue want, Mirror mirror)
        {
            var items = want.Items;
            Assert.Equal(items.Count, mirror.Count, name + ": entities in view");
            int i = 0;
            foreach (var entry in mirror.Entities)
            {
                var expected = items[i++];
                string what = name + ": entity " + expected["id"].Text;
                Assert.Equal(expected["id"].AsLong(), (long)entry.Id, what + " id");
                var kind = mirror.Schema[entry.Entity.Kind];
                Assert.Equal(expected["kind"].AsString(), kind.Name, what + " kind");
                var fields = expected["fields"];
                var wantNames = fields.Members.Select(m => m.Key).OrderBy(k => k, System.StringComparer.Ordinal);
                var haveNames = Enumerable.Range(0, kind.FieldCount).Select(kind.FieldName).OrderBy(k => k, System.StringComparer.Ordinal);
                Assert.Equal(string.Join(",", wantNames), string.Join(",", haveNames), what + " field names");
                var runner = entry.Entity as Runner;
                if (runner != null)
                {
                    // The JSON holds each f32 widened to f64, so equality in doubles is exact.
                    Assert.Equal(fields["position"][0].AsDouble(), (double)runner.Position[0], what + " position[0]");
                    Assert.Equal(fields["position"][1].AsDouble(), (double)runner.Position[1], what + " position[1]");
                    Assert.Equal(fields["name"].AsString(), runner.Name, what + " name");
                    Assert.Equal(fields["health"].AsLong(), (long)runner.Health, what + " health");
                    Assert.Equal(fields["stamina"].AsLong(), (long)runner.Stamina, what + " stamina");
                }
                else
                {
                    var score = (Score)entry.Entity;
                    Assert.Equal(fields["red"].AsLong(), (long)score.Red, what + " red");
                    Assert.Equal(fields["blue"].AsLong(), (long)score.Blue, what + " blue");
                }
                IReplicatedKind found;
                Assert.True(mirror.TryGet(entry.Id, out found) && ReferenceEquals(found, entry.Entity), what + ": TryGet finds it");
            }
        }

        static void AssertRoster(string name, JsonValue want, Mirror mirror)
        {
            Assert.Equal(want.Items.Count, mirror.Roster.Count, name + ": members in the roster");
            int i = 0, mine = -1;
            foreach (var entry in mirror.Roster)
            {
                var expected = want.Items[i++];
                var member = (Member)entry.Entity;
                string got = entry.Id + " " + member.Name + " " + member.Connected + " " + member.You;
                string wanted = expected["seat"].Text + " " + expected["name"].AsString() + " " + expected["connected"].Bool + " " + expected["you"].Bool;
                Assert.Equal(wanted, got, name + ": seat, name, connected, you");
                if (member.You) mine = entry.Id;
            }
            Assert.Equal(mine, mirror.MySeat, name + ": my seat");
        }

        [Test]
        public static void Every_snapshot_applies_to_the_stored_view_and_changes()
        {
            var file = ReplicationVectors.File();
            Assert.Equal("docs/REPLICATION.md 1.0", file["format"].AsString(), "the vectors' format");
            var mirrors = new Dictionary<long, Mirror>();
            int applied = 0;
            foreach (var snapshot in file["snapshots"].Items)
            {
                long viewer = snapshot["viewer"].AsLong();
                string name = snapshot["name"].AsString() + " (viewer " + viewer + ")";
                Mirror mirror;
                if (!mirrors.TryGetValue(viewer, out mirror)) mirrors[viewer] = mirror = new Mirror(Entity.Schema);
                var bytes = Hex.Decode(snapshot["hex"].AsString());
                uint tick;
                MirrorError error;
                Assert.True(mirror.TryApply(bytes, 0, bytes.Length, out tick, out error), name + ": refused: " + error);
                Assert.Equal(MirrorErrorKind.None, error.Kind, name + ": no error");
                Assert.Equal(snapshot["tick"].AsLong(), (long)tick, name + ": tick returned");
                Assert.Equal(snapshot["tick"].AsLong(), mirror.Tick, name + ": the mirror's tick");
                AssertView(name, snapshot["view"], mirror);
                Assert.Equal(ReplicationVectors.Changes(snapshot["changes"]), MirrorText.Changes(mirror), name + ": changes");
                AssertRoster(name, snapshot["roster"], mirror);
                Assert.Equal(ReplicationVectors.Changes(snapshot["roster_changes"]), MirrorText.Changes(mirror.RosterChanges), name + ": roster changes");
                applied++;
            }
            Assert.Equal(2, mirrors.Count, "viewers");
            Assert.Equal(10, applied, "snapshots applied");
        }

        sealed class Recorder : IMirrorListener
        {
            public readonly List<string> Heard = new List<string>();
            public void OnAdded(ushort id, IReplicatedKind entity) { Heard.Add("Added(" + id + ") " + MirrorText.Entity(entity)); }
            public void OnChanged(ushort id, IReplicatedKind entity, ulong fields) { Heard.Add("Changed(" + id + ", " + fields + ") " + MirrorText.Entity(entity)); }
            public void OnRemoved(ushort id, IReplicatedKind last) { Heard.Add("Removed(" + id + ") " + MirrorText.Entity(last)); }
        }

        static string Listed(ChangeList changes)
        {
            var listed = new List<string>();
            foreach (var change in changes) listed.Add(change + " " + MirrorText.Entity(change.Entity));
            return string.Join("; ", listed);
        }

        [Test]
        public static void The_listener_hears_the_change_list_with_each_entity_now_or_as_it_was_last()
        {
            var recorder = new Recorder();
            var roster = new Recorder();
            var mirror = new Mirror(Entity.Schema) { Listener = recorder, RosterListener = roster };
            foreach (var snapshot in ReplicationVectors.ByViewer(ReplicationVectors.File())[1])
            {
                string name = snapshot["name"].AsString();
                var bytes = Hex.Decode(snapshot["hex"].AsString());
                recorder.Heard.Clear();
                roster.Heard.Clear();
                uint tick;
                MirrorError error;
                Assert.True(mirror.TryApply(bytes, 0, bytes.Length, out tick, out error), name + ": refused: " + error);
                Assert.Equal(Listed(mirror.Changes), string.Join("; ", recorder.Heard), name + ": heard");
                Assert.Equal(Listed(mirror.RosterChanges), string.Join("; ", roster.Heard), name + ": heard of the roster");
                if (tick == 3) Assert.Equal("Removed(1) Runner(30.25, 4, \"bo\", 100, 0)", recorder.Heard[0], "bo's last state on despawn");
                if (tick == 4)
                    Assert.Equal("Removed(2) Score(1, 0); Added(2) Runner(1, 1, \"was score\", 100, 0)",
                        string.Join("; ", recorder.Heard.Skip(1)), "a kind change is the old kind removed, the new one added");
            }
        }

        [Test]
        public static void An_acknowledgement_is_the_tick_in_4_bytes_little_endian()
        {
            var ack = new byte[6];
            Mirror.WriteAck(0x04030201, ack, 1);
            Assert.Equal("000102030400", Hex.Encode(ack), "the ack of tick 0x04030201 at offset 1 (Rust ack_message: to_le_bytes)");
            Mirror.WriteAck(5, ack);
            Assert.Equal("05000000", Hex.Encode(ack, 0, Mirror.AckLength), "the ack of tick 5");
            Assert.Throws<System.ArgumentOutOfRangeException>(() => Mirror.WriteAck(5, ack, 3), "an ack past the buffer's end");
        }
    }
}
