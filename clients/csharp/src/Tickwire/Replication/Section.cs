// One section of a snapshot (the game's entities, or the roster): its kinds, the pool its
// instances come from, how its destroys, creates and updates are read over a view being
// built, and what changed between two views of it. The two sections share this format.
using System;
using Tickwire.Wire;

namespace Tickwire.Replication
{
    sealed class Section
    {
        readonly ReplicatedSchema _schema;
        readonly EntityPool _pool;
        /// <summary>Each id of the two views adds at most two entries (a kind change), hence 2 × 255.</summary>
        readonly Change[] _changes = new Change[2 * Mirror.MaxView];
        int _changeCount;

        public Section(ReplicatedSchema schema)
        {
            _schema = schema;
            _pool = new EntityPool(schema);
        }

        public ReplicatedSchema Schema { get { return _schema; } }

        public ChangeList Changes { get { return new ChangeList(_changes, _changeCount); } }

        /// <summary>Makes the empty <paramref name="into"/> a copy of <paramref name="from"/>, in pooled instances.</summary>
        public void CopyInto(EntitySet from, EntitySet into)
        {
            for (int i = 0; i < from.Count; i++)
            {
                var source = from.Entities[i];
                var copy = _pool.Take(source.Kind);
                copy.CopyFrom(source);
                into.Ids[i] = from.Ids[i];
                into.Entities[i] = copy;
            }
            into.Count = from.Count;
        }

        /// <summary>Empties <paramref name="set"/>, every instance back to the pool.</summary>
        public void Release(EntitySet set)
        {
            for (int i = 0; i < set.Count; i++)
            {
                _pool.Return(set.Entities[i]);
                set.Entities[i] = null;
            }
            set.Count = 0;
        }

        /// <summary>
        /// The section's destroys, creates and updates over <paramref name="set"/>: the rule
        /// broken, or null. Bits that are not valid throw the reader's DecodeException.
        /// </summary>
        public string Read(BitReader reader, EntitySet set)
        {
            int destroys = (int)reader.ReadBits(8);
            var ids = new EntityIds();
            for (int n = 0; n < destroys; n++)
            {
                int index = set.IndexOf(ids.Read(reader));
                if (index < 0) return "a destroy of an entity not in view";
                _pool.Return(set.Entities[index]);
                set.RemoveAt(index);
            }
            int creates = (int)reader.ReadBits(8);
            ids = new EntityIds();
            for (int n = 0; n < creates; n++)
            {
                int id = ids.Read(reader);
                int kind = (int)reader.ReadBits(_schema.KindBits);
                if (kind >= _schema.KindCount) return "a create of an unknown kind";
                ulong mask = reader.ReadUInt(_schema[kind].FieldCount);
                int index = set.IndexOf(id);
                if (index >= 0) return "a create of an entity already in view";
                if (set.Count == Mirror.MaxView) return "a view of more than 255 entities";
                var entity = _pool.Take(kind);
                // In the set before its fields are read, so that a failure returns it to the pool.
                set.Insert(~index, (ushort)id, entity);
                entity.ResetFields();
                entity.ReadFields(mask, reader);
            }
            int updates = (int)reader.ReadBits(8);
            ids = new EntityIds();
            for (int n = 0; n < updates; n++)
            {
                int index = set.IndexOf(ids.Read(reader));
                if (index < 0) return "an update of an entity not in view";
                var entity = set.Entities[index];
                ulong mask = reader.ReadUInt(_schema[entity.Kind].FieldCount);
                entity.ReadFields(mask, reader);
            }
            return null;
        }

        /// <summary>The difference between <paramref name="before"/> (null: empty) and <paramref name="after"/>, per id.</summary>
        public void ListChanges(EntitySet before, EntitySet after)
        {
            ClearChanges();
            int old = 0, oldCount = before == null ? 0 : before.Count;
            int now = 0, nowCount = after.Count;
            while (old < oldCount || now < nowCount)
            {
                if (now == nowCount || (old < oldCount && before.Ids[old] < after.Ids[now]))
                {
                    Add(ChangeKind.Removed, before.Ids[old], 0, before.Entities[old]);
                    old++;
                }
                else if (old == oldCount || before.Ids[old] > after.Ids[now])
                {
                    Add(ChangeKind.Added, after.Ids[now], 0, after.Entities[now]);
                    now++;
                }
                else
                {
                    ushort id = after.Ids[now];
                    IReplicatedKind then = before.Entities[old], current = after.Entities[now];
                    if (then.Kind != current.Kind)
                    {
                        Add(ChangeKind.Removed, id, 0, then);
                        Add(ChangeKind.Added, id, 0, current);
                    }
                    else
                    {
                        ulong fields = current.Changed(then);
                        if (fields != 0) Add(ChangeKind.Changed, id, fields, current);
                    }
                    old++;
                    now++;
                }
            }
        }

        public void ClearChanges()
        {
            Array.Clear(_changes, 0, _changeCount);
            _changeCount = 0;
        }

        /// <summary>Tells <paramref name="listener"/> (null: nobody) each change in order.</summary>
        public void Notify(IMirrorListener listener)
        {
            if (listener == null) return;
            for (int i = 0; i < _changeCount; i++)
            {
                var change = _changes[i];
                switch (change.Kind)
                {
                    case ChangeKind.Added: listener.OnAdded(change.Id, change.Entity); break;
                    case ChangeKind.Changed: listener.OnChanged(change.Id, change.Entity, change.Fields); break;
                    default: listener.OnRemoved(change.Id, change.Entity); break;
                }
            }
        }

        void Add(ChangeKind kind, ushort id, ulong fields, IReplicatedKind entity)
        {
            _changes[_changeCount++] = new Change(kind, id, fields, entity);
        }
    }
}
