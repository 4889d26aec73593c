// What the replication tests share: snapshots written by hand in REPLICATION.md's format
// (with the C# BitWriter, independently of any server), the vector file, and a mirror's
// whole visible state as text, to say "unchanged" in one comparison.
using System.Collections.Generic;
using System.Globalization;
using System.Text;
using Tickwire.Replication;
using Tickwire.Tests.Generated;
using Tickwire.Wire;

namespace Tickwire.Tests
{
    /// <summary>Builds snapshots field by field; the caller writes the lists in the format's order.</summary>
    sealed class SnapshotWriter
    {
        /// <summary>Runner.position's grid (support/mod.rs).</summary>
        public static readonly Quantize PositionGrid = new Quantize(0, 256, 0.01);

        readonly ReplicatedSchema _world;
        /// <summary>The kinds of the section being written: the world's, then the roster's.</summary>
        ReplicatedSchema _schema;
        readonly BitWriter _bits = new BitWriter(1200);
        EntityIds _ids;

        public SnapshotWriter(ReplicatedSchema world) { _world = world; }

        /// <summary>The writer, for fields and deliberately broken bits.</summary>
        public BitWriter Bits { get { return _bits; } }

        /// <summary>A snapshot of <paramref name="tick"/>: a delta <paramref name="baselineAge"/> ticks back, or a full state for null.</summary>
        public SnapshotWriter Begin(uint tick, int? baselineAge)
        {
            _bits.Reset();
            _schema = _world;
            _bits.WriteBits(tick, 32);
            _bits.WriteBool(baselineAge.HasValue);
            if (baselineAge.HasValue) _bits.WriteBits((ulong)baselineAge.Value, 8);
            return this;
        }

        /// <summary>The count of the next list (destroys, creates, updates); its ids start again from 0.</summary>
        public SnapshotWriter List(int count)
        {
            _bits.WriteBits((ulong)count, 8);
            _ids = new EntityIds();
            return this;
        }

        /// <summary>A destroy, or any id of a list.</summary>
        public SnapshotWriter Id(int id)
        {
            _ids.Write(_bits, id);
            return this;
        }

        /// <summary>A create's id, kind and mask; its fields follow.</summary>
        public SnapshotWriter Create(int id, int kind, ulong mask)
        {
            Id(id);
            _bits.WriteBits((ulong)kind, _schema.KindBits);
            _bits.WriteUInt(mask, _schema[kind].FieldCount);
            return this;
        }

        /// <summary>An update's id and mask, for an entity of <paramref name="kind"/>; its fields follow.</summary>
        public SnapshotWriter Update(int id, int kind, ulong mask)
        {
            Id(id);
            _bits.WriteUInt(mask, _schema[kind].FieldCount);
            return this;
        }

        /// <summary>The Runner fields in <paramref name="mask"/>, in field order.</summary>
        public SnapshotWriter Runner(ulong mask, float x, float y, string name = "", int health = 0, int stamina = 0)
        {
            if ((mask & Generated.Runner.PositionField) != 0)
            {
                _bits.WriteQuantized(x, PositionGrid);
                _bits.WriteQuantized(y, PositionGrid);
            }
            if ((mask & Generated.Runner.NameField) != 0) _bits.WriteString(name, 16);
            if ((mask & Generated.Runner.HealthField) != 0) _bits.WriteRange(health, 0, 100);
            if ((mask & Generated.Runner.StaminaField) != 0) _bits.WriteRange(stamina, 0, 1000);
            return this;
        }

        /// <summary>The Score fields in <paramref name="mask"/>.</summary>
        public SnapshotWriter Score(ulong mask, uint red, uint blue)
        {
            if ((mask & Generated.Score.RedField) != 0) _bits.WriteVarint(red);
            if ((mask & Generated.Score.BlueField) != 0) _bits.WriteVarint(blue);
            return this;
        }

        /// <summary>After the entity section: the roster did not change.</summary>
        public SnapshotWriter NoRoster()
        {
            _bits.WriteBool(false);
            return this;
        }

        /// <summary>After the entity section: the roster's section follows (its three lists, of Members).</summary>
        public SnapshotWriter Roster()
        {
            _bits.WriteBool(true);
            _schema = Replication.Member.Schema;
            return this;
        }

        /// <summary>The Member fields in <paramref name="mask"/>.</summary>
        public SnapshotWriter Member(ulong mask, string name, bool connected, bool you = false)
        {
            if ((mask & Replication.Member.NameField) != 0) _bits.WriteString(name, 32);
            if ((mask & Replication.Member.ConnectedField) != 0) _bits.WriteBool(connected);
            if ((mask & Replication.Member.YouField) != 0) _bits.WriteBool(you);
            return this;
        }

        /// <summary>The snapshot's bytes (zero padding to the byte).</summary>
        public byte[] ToArray() { return _bits.ToArray(); }
    }

    /// <summary>crates/replicate/tests/vectors/replication.json.</summary>
    static class ReplicationVectors
    {
        public static JsonValue File() { return Repo.Json("crates", "replicate", "tests", "vectors", "replication.json"); }

        /// <summary>Each viewer's snapshots in the order they were sent, by viewer id.</summary>
        public static SortedDictionary<long, List<JsonValue>> ByViewer(JsonValue file)
        {
            var byViewer = new SortedDictionary<long, List<JsonValue>>();
            foreach (var snapshot in file["snapshots"].Items)
            {
                long viewer = snapshot["viewer"].AsLong();
                if (!byViewer.ContainsKey(viewer)) byViewer[viewer] = new List<JsonValue>();
                byViewer[viewer].Add(snapshot);
            }
            return byViewer;
        }

        /// <summary>A stored change list as the C# Change prints it.</summary>
        public static string Changes(JsonValue changes)
        {
            var text = new List<string>();
            foreach (var change in changes.Items)
            {
                if (change["added"] != null) text.Add("Added(" + change["added"].Text + ")");
                else if (change["removed"] != null) text.Add("Removed(" + change["removed"].Text + ")");
                else text.Add("Changed(" + change["changed"].Text + ", " + change["mask"].Text + ")");
            }
            return string.Join(" ", text);
        }
    }

    /// <summary>What a mirror shows, as text.</summary>
    static class MirrorText
    {
        public static string Changes(ChangeList changes)
        {
            var text = new List<string>();
            foreach (var change in changes) text.Add(change.ToString());
            return string.Join(" ", text);
        }

        public static string Changes(Mirror mirror) { return Changes(mirror.Changes); }

        public static string Entity(IReplicatedKind entity)
        {
            var runner = entity as Runner;
            if (runner != null)
                return "Runner(" + Float(runner.Position[0]) + ", " + Float(runner.Position[1]) + ", \"" + runner.Name + "\", "
                    + runner.Health + ", " + runner.Stamina + ")";
            var score = entity as Score;
            if (score != null) return "Score(" + score.Red + ", " + score.Blue + ")";
            var member = entity as Member;
            if (member != null) return "Member(\"" + member.Name + "\", " + member.Connected + ", " + member.You + ")";
            return "kind " + entity.Kind;
        }

        /// <summary>Tick, every entity and member with every field, and both change lists.</summary>
        public static string Describe(Mirror mirror)
        {
            var text = new StringBuilder("tick " + mirror.Tick + ":");
            foreach (var entry in mirror.Entities) text.Append(' ').Append(entry.Id).Append('=').Append(Entity(entry.Entity));
            text.Append(" | ").Append(Changes(mirror.Changes)).Append(" | roster:");
            foreach (var entry in mirror.Roster) text.Append(' ').Append(entry.Id).Append('=').Append(Entity(entry.Entity));
            return text.Append(" | ").Append(Changes(mirror.RosterChanges)).ToString();
        }

        static string Float(float value) { return value.ToString("R", CultureInfo.InvariantCulture); }
    }
}
