// What a snapshot changed against the mirror's newest view before it, per entity id in
// ascending order (the order of the Rust Mirror::changes): the list a mirror keeps after
// each apply, and the listener it calls with the same entries.
using System;

namespace Tickwire.Replication
{
    /// <summary>What happened to one entity.</summary>
    public enum ChangeKind
    {
        /// <summary>It came into view (spawned, or came into range).</summary>
        Added,
        /// <summary>Fields of it changed: <see cref="Change.Fields"/>.</summary>
        Changed,
        /// <summary>It left the view (despawned, or out of range).</summary>
        Removed,
    }

    /// <summary>
    /// One entry of a mirror's change list. An entity whose kind changed is Removed then
    /// Added under its id.
    /// </summary>
    public readonly struct Change
    {
        /// <summary>What happened.</summary>
        public readonly ChangeKind Kind;

        /// <summary>The entity's id.</summary>
        public readonly ushort Id;

        /// <summary>For <see cref="ChangeKind.Changed"/>, the fields whose value differs (bit i for field i); otherwise 0.</summary>
        public readonly ulong Fields;

        /// <summary>
        /// The entity as it is now (Added, Changed) or as it was last (Removed). Owned by the
        /// mirror: read it before the next apply, never change it.
        /// </summary>
        public readonly IReplicatedKind Entity;

        internal Change(ChangeKind kind, ushort id, ulong fields, IReplicatedKind entity)
        {
            Kind = kind;
            Id = id;
            Fields = fields;
            Entity = entity;
        }

        /// <summary>As the Rust Change prints: "Added(3)", "Changed(3, 9)", "Removed(3)".</summary>
        public override string ToString()
        {
            return Kind == ChangeKind.Changed ? "Changed(" + Id + ", " + Fields + ")" : Kind + "(" + Id + ")";
        }
    }

    /// <summary>
    /// The changes of the last applied snapshot, valid until the next apply. A struct with a
    /// struct enumerator: <c>foreach (var change in mirror.Changes)</c> allocates nothing.
    /// </summary>
    public readonly struct ChangeList
    {
        readonly Change[] _changes;
        readonly int _count;

        internal ChangeList(Change[] changes, int count)
        {
            _changes = changes;
            _count = count;
        }

        /// <summary>Entries.</summary>
        public int Count { get { return _count; } }

        /// <summary>Entry <paramref name="index"/>, in ascending id order.</summary>
        public Change this[int index]
        {
            get
            {
                if ((uint)index >= (uint)_count) throw new ArgumentOutOfRangeException("index");
                return _changes[index];
            }
        }

        /// <summary>The entries in order.</summary>
        public Enumerator GetEnumerator() { return new Enumerator(_changes, _count); }

        /// <summary>Walks a <see cref="ChangeList"/>.</summary>
        public struct Enumerator
        {
            readonly Change[] _changes;
            readonly int _count;
            int _index;

            internal Enumerator(Change[] changes, int count)
            {
                _changes = changes;
                _count = count;
                _index = -1;
            }

            /// <summary>The current entry.</summary>
            public Change Current { get { return _changes[_index]; } }

            /// <summary>Steps to the next entry.</summary>
            public bool MoveNext() { return ++_index < _count; }
        }
    }

    /// <summary>
    /// Told what each applied snapshot changed, entry by entry in the change list's order,
    /// once the mirror holds the new view (<see cref="Mirror.Listener"/>). The entities are
    /// the mirror's: read them during the call, never change them, and do not apply
    /// another snapshot from inside a call.
    /// </summary>
    public interface IMirrorListener
    {
        /// <summary><paramref name="entity"/> came into view under <paramref name="id"/>.</summary>
        void OnAdded(ushort id, IReplicatedKind entity);

        /// <summary>The <paramref name="fields"/> of <paramref name="entity"/> changed (bit i for field i).</summary>
        void OnChanged(ushort id, IReplicatedKind entity, ulong fields);

        /// <summary>The entity left the view; <paramref name="last"/> is its state before it did.</summary>
        void OnRemoved(ushort id, IReplicatedKind last);
    }
}
