// What a mirror knows of a game's replicated types: the interface each generated kind class
// implements, and the world schema listing the kinds in the Rust enum's variant order.
// The shape a generated class must have is described at the top of Mirror.cs.
using System;
using Tickwire.Wire;

namespace Tickwire.Replication
{
    /// <summary>
    /// One entity of one kind, as a mirror holds it: a generated class per kind implements
    /// this. A mirror reuses instances from a pool, so every method works in place.
    /// </summary>
    public interface IReplicatedKind
    {
        /// <summary>The kind's index in its world schema (the Rust enum's variant order, from 0).</summary>
        int Kind { get; }

        /// <summary>Reads the fields whose bit is set in <paramref name="mask"/>, in field order, over the current values.</summary>
        /// <remarks>Throws only <see cref="DecodeException"/> (the reader's), on bytes that are not valid.</remarks>
        void ReadFields(ulong mask, BitReader reader);

        /// <summary>Puts every field back to its default (0, false, "", each array element's default).</summary>
        void ResetFields();

        /// <summary>Copies every field of <paramref name="other"/>, an entity of the same kind, reusing this one's storage.</summary>
        void CopyFrom(IReplicatedKind other);

        /// <summary>The fields whose value differs from <paramref name="baseline"/>'s (same kind): bit i for field i.</summary>
        ulong Changed(IReplicatedKind baseline);
    }

    /// <summary>One kind of a world: its name, its fields' names, and how to make an instance.</summary>
    public sealed class ReplicatedKindInfo
    {
        /// <summary>Most fields a kind may have: one bit each in a field mask.</summary>
        public const int MaxFields = 64;

        readonly string[] _fieldNames;
        readonly Func<IReplicatedKind> _create;

        /// <summary>The Rust struct's name.</summary>
        public readonly string Name;

        /// <summary>Fields it declares: the width of its field mask on the wire.</summary>
        public readonly int FieldCount;

        /// <summary>The fields only the entity's owner is sent; other viewers hold their defaults.</summary>
        public readonly ulong OwnerOnlyFields;

        /// <summary>
        /// A kind named <paramref name="name"/> whose fields are <paramref name="fieldNames"/>
        /// (as Rust declares them, in wire order), made by <paramref name="create"/>.
        /// </summary>
        public ReplicatedKindInfo(string name, string[] fieldNames, ulong ownerOnlyFields, Func<IReplicatedKind> create)
        {
            if (name == null) throw new ArgumentNullException("name");
            if (fieldNames == null) throw new ArgumentNullException("fieldNames");
            if (create == null) throw new ArgumentNullException("create");
            if (fieldNames.Length > MaxFields)
                throw new ArgumentException("kind " + name + " has " + fieldNames.Length + " fields, more than " + MaxFields);
            Name = name;
            FieldCount = fieldNames.Length;
            _fieldNames = (string[])fieldNames.Clone();
            _create = create;
            if ((ownerOnlyFields & ~AllFields) != 0)
                throw new ArgumentException("kind " + name + ": owner-only mask " + ownerOnlyFields + " names fields it does not have");
            OwnerOnlyFields = ownerOnlyFields;
        }

        /// <summary>Every field's bit.</summary>
        public ulong AllFields { get { return FieldCount == MaxFields ? ulong.MaxValue : (1UL << FieldCount) - 1; } }

        /// <summary>The name of field <paramref name="field"/> (0 to <see cref="FieldCount"/> - 1).</summary>
        public string FieldName(int field) { return _fieldNames[field]; }

        internal IReplicatedKind Create() { return _create(); }
    }

    /// <summary>
    /// A world's kinds, in the Rust enum's variant order (a single struct is the one kind 0).
    /// Generated code declares one as a static field; a <see cref="Mirror"/> reads snapshots with it.
    /// </summary>
    public sealed class ReplicatedSchema
    {
        /// <summary>Most kinds a world may have.</summary>
        public const int MaxKinds = 256;

        readonly ReplicatedKindInfo[] _kinds;

        /// <summary>The Rust type's name (the enum, or the struct for a one-kind world).</summary>
        public readonly string Name;

        /// <summary>Bits of a create's kind: ceil(log2(kinds)), 0 for one kind.</summary>
        public readonly int KindBits;

        /// <summary>A world named <paramref name="name"/> of <paramref name="kinds"/> (1 to 256), in variant order.</summary>
        public ReplicatedSchema(string name, params ReplicatedKindInfo[] kinds)
        {
            if (name == null) throw new ArgumentNullException("name");
            if (kinds == null) throw new ArgumentNullException("kinds");
            if (kinds.Length < 1 || kinds.Length > MaxKinds)
                throw new ArgumentException("world " + name + " has " + kinds.Length + " kinds, not 1 to " + MaxKinds);
            for (int i = 0; i < kinds.Length; i++)
                if (kinds[i] == null) throw new ArgumentNullException("kinds", "world " + name + ": kind " + i + " is null");
            Name = name;
            _kinds = (ReplicatedKindInfo[])kinds.Clone();
            KindBits = Bits.ForSpan((ulong)(kinds.Length - 1));
        }

        /// <summary>Kinds in the world.</summary>
        public int KindCount { get { return _kinds.Length; } }

        /// <summary>Kind <paramref name="kind"/> (0 to <see cref="KindCount"/> - 1).</summary>
        public ReplicatedKindInfo this[int kind] { get { return _kinds[kind]; } }

        /// <summary>A new entity of <paramref name="kind"/>, every field at its default.</summary>
        /// <exception cref="InvalidOperationException">The kind's factory made an entity of another kind (a generator bug).</exception>
        public IReplicatedKind Create(int kind)
        {
            var entity = _kinds[kind].Create();
            if (entity == null || entity.Kind != kind)
                throw new InvalidOperationException("world " + Name + ": the factory of kind " + kind + " (" + _kinds[kind].Name
                    + ") made " + (entity == null ? "null" : "an entity of kind " + entity.Kind));
            return entity;
        }
    }
}
