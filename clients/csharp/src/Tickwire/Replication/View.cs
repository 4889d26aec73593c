// A view: what a mirror held after one snapshot, the game's entities and the room's roster,
// each an EntitySet sorted by id in arrays sized for the largest view (255), so building
// and recycling one never allocates. Each set owns its entity instances outright (no
// sharing between views): a recycled view returns them to their section's pool, and a
// baseline never changes under a delta built from it.
using System;

namespace Tickwire.Replication
{
    sealed class View
    {
        public uint Tick;
        public readonly EntitySet Entities = new EntitySet();
        /// <summary>The roster's members, by seat.</summary>
        public readonly EntitySet Roster = new EntitySet();
    }

    /// <summary>One section's entities in a view, in id order.</summary>
    sealed class EntitySet
    {
        public int Count;
        public readonly ushort[] Ids = new ushort[Mirror.MaxView];
        public readonly IReplicatedKind[] Entities = new IReplicatedKind[Mirror.MaxView];

        /// <summary>The index of <paramref name="id"/>, or the bitwise complement of where it would go.</summary>
        public int IndexOf(int id)
        {
            int lo = 0, hi = Count - 1;
            while (lo <= hi)
            {
                int mid = (lo + hi) >> 1;
                int held = Ids[mid];
                if (held == id) return mid;
                if (held < id) lo = mid + 1; else hi = mid - 1;
            }
            return ~lo;
        }

        /// <summary>Puts <paramref name="entity"/> at <paramref name="index"/>; the caller checked the room and the order.</summary>
        public void Insert(int index, ushort id, IReplicatedKind entity)
        {
            Array.Copy(Ids, index, Ids, index + 1, Count - index);
            Array.Copy(Entities, index, Entities, index + 1, Count - index);
            Ids[index] = id;
            Entities[index] = entity;
            Count++;
        }

        /// <summary>Takes entry <paramref name="index"/> out; the caller returns its instance to the pool.</summary>
        public void RemoveAt(int index)
        {
            Count--;
            Array.Copy(Ids, index + 1, Ids, index, Count - index);
            Array.Copy(Entities, index + 1, Entities, index, Count - index);
            Entities[Count] = null;
        }
    }

    /// <summary>An entity in a mirror's view.</summary>
    public readonly struct MirrorEntry
    {
        /// <summary>Its id.</summary>
        public readonly ushort Id;

        /// <summary>Its state, owned by the mirror: read it before the next apply, never change it.</summary>
        public readonly IReplicatedKind Entity;

        internal MirrorEntry(ushort id, IReplicatedKind entity)
        {
            Id = id;
            Entity = entity;
        }
    }

    /// <summary>
    /// The entities (or roster members) of a mirror's newest view in id order, valid until the next apply. A
    /// struct with a struct enumerator: <c>foreach (var entry in mirror.Entities)</c>
    /// allocates nothing.
    /// </summary>
    public readonly struct MirrorView
    {
        readonly EntitySet _view;

        internal MirrorView(EntitySet view) { _view = view; }

        /// <summary>Entities in view.</summary>
        public int Count { get { return _view == null ? 0 : _view.Count; } }

        /// <summary>Entry <paramref name="index"/> in id order.</summary>
        public MirrorEntry this[int index]
        {
            get
            {
                if ((uint)index >= (uint)Count) throw new ArgumentOutOfRangeException("index");
                return new MirrorEntry(_view.Ids[index], _view.Entities[index]);
            }
        }

        /// <summary>The entries in id order.</summary>
        public Enumerator GetEnumerator() { return new Enumerator(_view); }

        /// <summary>Walks a <see cref="MirrorView"/>.</summary>
        public struct Enumerator
        {
            readonly EntitySet _view;
            readonly int _count;
            int _index;

            internal Enumerator(EntitySet view)
            {
                _view = view;
                _count = view == null ? 0 : view.Count;
                _index = -1;
            }

            /// <summary>The current entry.</summary>
            public MirrorEntry Current { get { return new MirrorEntry(_view.Ids[_index], _view.Entities[_index]); } }

            /// <summary>Steps to the next entry.</summary>
            public bool MoveNext() { return ++_index < _count; }
        }
    }
}
