// Arena snapshots (docs/ARENA.md, "Snapshot"): delta-compressed against an acknowledged
// baseline, decoded into plain structs in buffers the decoder owns, so decoding a snapshot
// allocates nothing. A port of crates/arena/src/snapshot/decode.rs (and the TypeScript
// SnapshotDecoder), held to crates/arena/tests/vectors/snapshots.json.
using System;
using Tickwire.Wire;

namespace Tickwire.Arena
{
    /// <summary>An entity in view, as quantized steps (see <see cref="SnapshotSchema"/> for metres and radians).</summary>
    public struct EntityView
    {
        /// <summary>Entity id (0..=65534).</summary>
        public ushort Id;
        /// <summary>Position steps on the map's x and y grids (1/64 m).</summary>
        public ushort X, Y;
        /// <summary>Aim step on the aim grid.</summary>
        public ushort Aim;
        /// <summary>Health.</summary>
        public ushort Health;
        /// <summary>Alive or waiting to respawn.</summary>
        public bool Alive;
    }

    /// <summary>The recipient's own state (exact position).</summary>
    public struct SelfView
    {
        /// <summary>Alive.</summary>
        public bool Alive;
        /// <summary>Exact position, metres.</summary>
        public float X, Y;
        /// <summary>Aim step.</summary>
        public ushort Aim;
        /// <summary>Health.</summary>
        public ushort Health;
        /// <summary>Ticks until respawn (0 when alive).</summary>
        public uint RespawnIn;
        /// <summary>Counters.</summary>
        public uint Kills, Deaths, Score;
    }

    /// <summary>A bullet near the recipient.</summary>
    public struct BulletView
    {
        /// <summary>Position steps.</summary>
        public ushort X, Y;
        /// <summary>Direction step on the aim grid.</summary>
        public ushort Direction;
        /// <summary>Fired by the recipient.</summary>
        public bool Mine;
    }

    /// <summary>A snapshot that cannot be decoded or applied.</summary>
    public sealed class SnapshotException : Exception
    {
        /// <summary>True when the baseline it names is not held (drop it; the server falls back to a full snapshot).</summary>
        public readonly bool UnknownBaseline;

        /// <summary>A failure.</summary>
        public SnapshotException(string message, bool unknownBaseline = false) : base(message) { UnknownBaseline = unknownBaseline; }
    }

    /// <summary>What the snapshot format depends on, from the Welcome message.</summary>
    public sealed class SnapshotSchema
    {
        /// <summary>Largest map side, metres.</summary>
        public const int MaxMapSide = 1023;
        /// <summary>Grid of x positions.</summary>
        public readonly Quantize PositionX;
        /// <summary>Grid of y positions.</summary>
        public readonly Quantize PositionY;
        /// <summary>Highest health.</summary>
        public readonly int MaxHealth;
        /// <summary>Bits of a health field.</summary>
        public readonly int HealthBits;

        /// <summary>A schema for a map of the given size and a maximum health.</summary>
        public SnapshotSchema(float mapWidth, float mapHeight, int maxHealth)
        {
            if (!(mapWidth >= 1 && mapWidth <= MaxMapSide && mapHeight >= 1 && mapHeight <= MaxMapSide))
                throw new ArgumentException("map size " + mapWidth + "x" + mapHeight + " m outside 1..=1023 m per side");
            if (maxHealth < 1 || maxHealth > 1023) throw new ArgumentException("max health " + maxHealth + " outside 1..=1023");
            PositionX = new Quantize(0, mapWidth, 1.0 / 64);
            PositionY = new Quantize(0, mapHeight, 1.0 / 64);
            MaxHealth = maxHealth;
            HealthBits = Bits.ForSpan((ulong)maxHealth);
        }

        /// <summary>The schema a Welcome describes.</summary>
        public static SnapshotSchema FromWelcome(ServerMessage welcome)
        {
            return new SnapshotSchema(welcome.MapWidth, welcome.MapHeight, welcome.MaxHealth);
        }

        /// <summary>An x step in metres.</summary>
        public float X(ushort step) { return PositionX.ValueAt(Math.Min(step, PositionX.LastStep)); }
        /// <summary>A y step in metres.</summary>
        public float Y(ushort step) { return PositionY.ValueAt(Math.Min(step, PositionY.LastStep)); }
        /// <summary>An aim step in radians.</summary>
        public static float Angle(ushort step) { return ArenaGrids.Aim.ValueAt(Math.Min(step, ArenaGrids.Aim.LastStep)); }
    }

    /// <summary>
    /// The decoded snapshot: plain fields and arrays the decoder reuses (valid until the next
    /// Decode; copy what you keep, or use <see cref="Interpolation"/>).
    /// </summary>
    public sealed class Snapshot
    {
        /// <summary>Most entities in view.</summary>
        public const int MaxView = 255;
        /// <summary>Most bullets.</summary>
        public const int MaxBullets = 63;

        /// <summary>Server tick.</summary>
        public uint Tick;
        /// <summary>The baseline tick, or -1 for a full snapshot.</summary>
        public long Baseline;
        /// <summary>Newest input sequence the server applied, or -1.</summary>
        public int LastInput;
        /// <summary>Your own state.</summary>
        public SelfView Me;
        /// <summary>Entities in view, ordered by id: the first EntityCount.</summary>
        public readonly EntityView[] Entities = new EntityView[MaxView];
        /// <summary>How many entities.</summary>
        public int EntityCount;
        /// <summary>Ids that left the view: the first DestroyedCount.</summary>
        public readonly ushort[] Destroyed = new ushort[MaxView];
        /// <summary>How many destroyed.</summary>
        public int DestroyedCount;
        /// <summary>Ids that entered the view: the first CreatedCount.</summary>
        public readonly ushort[] Created = new ushort[MaxView];
        /// <summary>How many created.</summary>
        public int CreatedCount;
        /// <summary>Ids whose state changed: the first UpdatedCount.</summary>
        public readonly ushort[] Updated = new ushort[MaxView];
        /// <summary>How many updated.</summary>
        public int UpdatedCount;
        /// <summary>Bullets near you: the first BulletCount.</summary>
        public readonly BulletView[] Bullets = new BulletView[MaxBullets];
        /// <summary>How many bullets.</summary>
        public int BulletCount;

        /// <summary>The index of entity <paramref name="id"/> in Entities, or -1.</summary>
        public int IndexOf(ushort id) { return Find(Entities, EntityCount, id); }

        internal static int Find(EntityView[] list, int count, ushort id)
        {
            int lo = 0, hi = count;
            while (lo < hi)
            {
                int mid = (lo + hi) >> 1;
                if (list[mid].Id == id) return mid;
                if (list[mid].Id < id) lo = mid + 1; else hi = mid;
            }
            return -1;
        }
    }

    /// <summary>
    /// Decodes a room's snapshots for one player: keeps the last <c>history</c> views to apply
    /// deltas to. Acknowledge <see cref="Newest"/> in every ClientInput.
    /// </summary>
    public sealed class SnapshotDecoder
    {
        readonly SnapshotSchema _schema;
        readonly long[] _historyTicks;
        readonly EntityView[][] _historyViews;
        readonly int[] _historyCounts;
        readonly BitReader _reader = new BitReader();
        readonly Snapshot _snapshot = new Snapshot();
        readonly EntityView[] _created = new EntityView[Snapshot.MaxView];
        readonly EntityView[] _updates = new EntityView[Snapshot.MaxView];
        readonly EntityView[] _merged = new EntityView[2 * Snapshot.MaxView];
        long _newest = -1;

        /// <summary>A decoder for <paramref name="schema"/> holding <paramref name="history"/> views (the Welcome's snapshot_history).</summary>
        public SnapshotDecoder(SnapshotSchema schema, int history)
        {
            _schema = schema;
            int slots = Math.Max(2, Math.Min(255, history));
            _historyTicks = new long[slots];
            _historyViews = new EntityView[slots][];
            _historyCounts = new int[slots];
            for (int i = 0; i < slots; i++)
            {
                _historyTicks[i] = -1;
                _historyViews[i] = new EntityView[Snapshot.MaxView];
            }
        }

        /// <summary>The schema.</summary>
        public SnapshotSchema Schema { get { return _schema; } }
        /// <summary>The newest tick decoded (what to acknowledge), or -1.</summary>
        public long Newest { get { return _newest; } }
        /// <summary>The last snapshot decoded, or null.</summary>
        public Snapshot Current { get; private set; }

        SnapshotException Inconsistent(string what) { return new SnapshotException("inconsistent snapshot: " + what); }

        /// <summary>
        /// Decodes and applies one snapshot; throws <see cref="SnapshotException"/> for one that
        /// is malformed, inconsistent or names a baseline not held (drop it and go on).
        /// </summary>
        public Snapshot Decode(byte[] bytes, int offset, int length)
        {
            try
            {
                return DecodeInto(bytes, offset, length);
            }
            catch (DecodeException e)
            {
                throw new SnapshotException("malformed snapshot: " + e.Message);
            }
        }

        /// <summary>Decodes a message's bytes.</summary>
        public Snapshot Decode(ArraySegment<byte> message) { return Decode(message.Array, message.Offset, message.Count); }

        Snapshot DecodeInto(byte[] bytes, int offset, int length)
        {
            var r = _reader;
            r.Reset(bytes, offset, length);
            var s = _snapshot;
            int xBits = _schema.PositionX.Bits, yBits = _schema.PositionY.Bits;
            uint xLast = (uint)_schema.PositionX.LastStep, yLast = (uint)_schema.PositionY.LastStep;
            int slots = _historyTicks.Length;

            uint tick = (uint)r.ReadBits(32);
            long baseline = -1;
            if (r.ReadBool())
            {
                uint age = (uint)r.ReadBits(8);
                if (age == 0 || age >= slots) throw Inconsistent("baseline age outside the history");
                baseline = (uint)(tick - age);
            }
            EntityView[] baseView = _historyViews[0];
            int baseCount = 0;
            if (baseline >= 0)
            {
                int slot = (int)(baseline % slots);
                if (_historyTicks[slot] != baseline)
                    throw new SnapshotException("snapshot " + tick + " is a delta against " + baseline + ", which this client does not hold", true);
                baseView = _historyViews[slot];
                baseCount = _historyCounts[slot];
            }
            int lastInput = r.ReadBool() ? (int)r.ReadBits(16) : -1;
            var me = new SelfView { Alive = r.ReadBool(), X = r.ReadF32(), Y = r.ReadF32() };
            if (float.IsNaN(me.X) || float.IsInfinity(me.X) || float.IsNaN(me.Y) || float.IsInfinity(me.Y)) throw Inconsistent("own position is not finite");
            me.Aim = (ushort)r.ReadBits(10);
            me.Health = ReadHealth(r);
            me.RespawnIn = me.Alive ? 0 : ReadU32(r);
            me.Kills = ReadU32(r);
            me.Deaths = ReadU32(r);
            me.Score = ReadU32(r);

            int destroyed = (int)r.ReadBits(8);
            int next = 0;
            for (int i = 0; i < destroyed; i++)
            {
                ushort id = ReadId(r, ref next);
                if (Snapshot.Find(baseView, baseCount, id) < 0) throw Inconsistent("destroy of an entity not in view");
                s.Destroyed[i] = id;
            }
            int created = (int)r.ReadBits(8);
            next = 0;
            for (int i = 0; i < created; i++)
            {
                _created[i] = new EntityView
                {
                    Id = ReadId(r, ref next),
                    X = ReadStep(r, xBits, xLast),
                    Y = ReadStep(r, yBits, yLast),
                    Aim = (ushort)r.ReadBits(10),
                    Health = ReadHealth(r),
                    Alive = r.ReadBool(),
                };
            }
            int updated = (int)r.ReadBits(8);
            next = 0;
            for (int i = 0; i < updated; i++)
            {
                ushort id = ReadId(r, ref next);
                int index = Snapshot.Find(baseView, baseCount, id);
                if (index < 0) throw Inconsistent("update of an entity not in view");
                var state = baseView[index];
                if (r.ReadBool())
                {
                    state.X = ReadAxis(r, state.X, xBits, xLast);
                    state.Y = ReadAxis(r, state.Y, yBits, yLast);
                }
                if (r.ReadBool()) state.Aim = (ushort)r.ReadBits(10);
                if (r.ReadBool())
                {
                    state.Health = ReadHealth(r);
                    state.Alive = r.ReadBool();
                }
                _updates[i] = state;
            }
            int bullets = (int)r.ReadBits(6);
            for (int i = 0; i < bullets; i++)
            {
                s.Bullets[i] = new BulletView
                {
                    X = ReadStep(r, xBits, xLast),
                    Y = ReadStep(r, yBits, yLast),
                    Direction = (ushort)r.ReadBits(10),
                    Mine = r.ReadBool(),
                };
            }
            r.Finish();

            // The new view: the baseline minus destroyed, with updates, plus created; by id.
            int d = 0, u = 0, c = 0, count = 0;
            for (int b = 0; b < baseCount; b++)
            {
                ushort id = baseView[b].Id;
                while (d < destroyed && s.Destroyed[d] < id) d++;
                if (d < destroyed && s.Destroyed[d] == id)
                {
                    while (u < updated && _updates[u].Id < id) u++;
                    if (u < updated && _updates[u].Id == id) throw Inconsistent("update of a destroyed entity");
                    continue;
                }
                while (c < created && _created[c].Id < id) _merged[count++] = _created[c++];
                if (c < created && _created[c].Id == id) throw Inconsistent("create of an entity already in view");
                while (u < updated && _updates[u].Id < id) u++;
                _merged[count++] = u < updated && _updates[u].Id == id ? _updates[u] : baseView[b];
            }
            while (c < created) _merged[count++] = _created[c++];
            if (count > Snapshot.MaxView) throw Inconsistent("more than " + Snapshot.MaxView + " entities in view");

            s.Tick = tick;
            s.Baseline = baseline;
            s.LastInput = lastInput;
            s.Me = me;
            s.DestroyedCount = destroyed;
            s.CreatedCount = created;
            for (int i = 0; i < created; i++) s.Created[i] = _created[i].Id;
            s.UpdatedCount = updated;
            for (int i = 0; i < updated; i++) s.Updated[i] = _updates[i].Id;
            s.BulletCount = bullets;
            s.EntityCount = count;
            Array.Copy(_merged, s.Entities, count);

            int store = (int)(tick % slots);
            _historyTicks[store] = tick;
            _historyCounts[store] = count;
            Array.Copy(_merged, _historyViews[store], count);
            if (_newest < 0 || ((tick - (uint)_newest) != 0 && (tick - (uint)_newest) < 0x80000000u)) _newest = tick;
            Current = s;
            return s;
        }

        uint ReadU32(BitReader r)
        {
            ulong value = r.ReadVarint();
            if (value > uint.MaxValue) throw Inconsistent("counter exceeds 32 bits");
            return (uint)value;
        }

        ushort ReadHealth(BitReader r)
        {
            ulong health = r.ReadBits(_schema.HealthBits);
            if (health > (ulong)_schema.MaxHealth) throw Inconsistent("health above the maximum");
            return (ushort)health;
        }

        ushort ReadStep(BitReader r, int bits, uint last)
        {
            ulong step = r.ReadBits(bits);
            if (step > last) throw Inconsistent("position outside the map");
            return (ushort)step;
        }

        ushort ReadAxis(BitReader r, ushort old, int bits, uint last)
        {
            if (r.ReadBool())
            {
                int step = old + (int)r.ReadBits(8) - 128;
                if (step < 0 || step > last) throw Inconsistent("position delta leaves the map");
                return (ushort)step;
            }
            return ReadStep(r, bits, last);
        }

        ushort ReadId(BitReader r, ref int next)
        {
            int gap;
            if (!r.ReadBool()) gap = (int)r.ReadBits(4);
            else if (!r.ReadBool()) gap = (int)r.ReadBits(8) + 16;
            else gap = (int)r.ReadBits(16);
            int id = next + gap;
            if (id > 0xfffe) throw Inconsistent("entity id out of range");
            next = id + 1;
            return (ushort)id;
        }
    }

    /// <summary>
    /// Smooth positions for other players: keeps the last few snapshots' views with their
    /// ticks, and samples an entity between the two around a render tick (usually the newest
    /// tick minus a delay of about two snapshots, advanced by elapsed time × tick rate).
    /// Allocation-free once constructed.
    /// </summary>
    public sealed class Interpolation
    {
        readonly SnapshotSchema _schema;
        readonly uint[] _ticks;
        readonly EntityView[][] _views;
        readonly int[] _counts;
        int _stored, _head;

        /// <summary>An interpolation buffer of <paramref name="depth"/> snapshots.</summary>
        public Interpolation(SnapshotSchema schema, int depth = 8)
        {
            _schema = schema;
            depth = Math.Max(2, depth);
            _ticks = new uint[depth];
            _views = new EntityView[depth][];
            _counts = new int[depth];
            for (int i = 0; i < depth; i++) _views[i] = new EntityView[Snapshot.MaxView];
        }

        /// <summary>The newest tick pushed, or -1.</summary>
        public long NewestTick { get { return _stored == 0 ? -1L : (long)_ticks[(_head + _ticks.Length - 1) % _ticks.Length]; } }

        /// <summary>Records a decoded snapshot's view (older or repeated ticks are ignored).</summary>
        public void Push(Snapshot snapshot)
        {
            if (_stored > 0 && (int)(snapshot.Tick - (uint)NewestTick) <= 0) return;
            _ticks[_head] = snapshot.Tick;
            _counts[_head] = snapshot.EntityCount;
            Array.Copy(snapshot.Entities, _views[_head], snapshot.EntityCount);
            _head = (_head + 1) % _ticks.Length;
            _stored = Math.Min(_stored + 1, _ticks.Length);
        }

        /// <summary>
        /// Entity <paramref name="id"/>'s position (metres) and aim (radians) at
        /// <paramref name="renderTick"/>, linear between the snapshots around it (the nearest end
        /// outside them). False when no stored snapshot has the entity.
        /// </summary>
        public bool TrySample(ushort id, double renderTick, out float x, out float y, out float aim)
        {
            x = y = aim = 0;
            int before = -1, after = -1;
            double beforeAt = 0, afterAt = 0;
            uint newest = (uint)NewestTick;
            for (int k = 0; k < _stored; k++)
            {
                int i = (_head + _ticks.Length - 1 - k) % _ticks.Length;
                if (Snapshot.Find(_views[i], _counts[i], id) < 0) continue;
                double at = newest - (double)(uint)(newest - _ticks[i]);
                if (at <= renderTick && (before < 0 || at > beforeAt)) { before = i; beforeAt = at; }
                if (at >= renderTick && (after < 0 || at < afterAt)) { after = i; afterAt = at; }
            }
            if (before < 0 && after < 0) return false;
            if (before < 0) { before = after; beforeAt = afterAt; }
            if (after < 0) { after = before; afterAt = beforeAt; }
            var a = _views[before][Snapshot.Find(_views[before], _counts[before], id)];
            var b = _views[after][Snapshot.Find(_views[after], _counts[after], id)];
            float t = afterAt > beforeAt ? (float)((renderTick - beforeAt) / (afterAt - beforeAt)) : 0f;
            x = Lerp(_schema.X(a.X), _schema.X(b.X), t);
            y = Lerp(_schema.Y(a.Y), _schema.Y(b.Y), t);
            aim = LerpAngle(SnapshotSchema.Angle(a.Aim), SnapshotSchema.Angle(b.Aim), t);
            return true;
        }

        static float Lerp(float a, float b, float t) { return a + (b - a) * t; }

        /// <summary>Interpolates angles the short way round.</summary>
        public static float LerpAngle(float a, float b, float t)
        {
            double d = b - a;
            while (d > Math.PI) d -= 2 * Math.PI;
            while (d < -Math.PI) d += 2 * Math.PI;
            double v = a + d * t;
            if (v > Math.PI) v -= 2 * Math.PI;
            if (v < -Math.PI) v += 2 * Math.PI;
            return (float)v;
        }
    }
}
