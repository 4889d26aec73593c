// Entity ids on the wire (REPLICATION.md, "Snapshot"): each list's ids ascend and each is
// written as its gap g from the one before plus one (from 0 for the first): `0` + uint(4)
// below 16, `1 0` + uint(8) of g - 16 below 272, `1 1` + uint(16) of g otherwise. A port of
// crates/replicate/src/gaps.rs; the writer is for tests that build snapshots by hand.
using System;
using Tickwire.Wire;

namespace Tickwire.Replication
{
    struct EntityIds
    {
        /// <summary>The smallest id the next one may be: 0, then the previous id + 1.</summary>
        int _next;

        /// <summary>The next id of a list; an id past <see cref="Mirror.MaxEntityId"/> is out of range.</summary>
        public int Read(BitReader reader)
        {
            int gap;
            if (!reader.ReadBool()) gap = (int)reader.ReadBits(4);
            else if (!reader.ReadBool()) gap = (int)reader.ReadBits(8) + 16;
            else gap = (int)reader.ReadBits(16);
            int id = _next + gap;
            if (id > Mirror.MaxEntityId)
                throw new DecodeException(DecodeErrorKind.OutOfRange, "entity id " + id + " exceeds max " + Mirror.MaxEntityId);
            _next = id + 1;
            return id;
        }

        /// <summary>Writes <paramref name="id"/>, which must be above the list's previous one.</summary>
        public void Write(BitWriter writer, int id)
        {
            int gap = id - _next;
            if (gap < 0 || id > Mirror.MaxEntityId)
                throw new ArgumentOutOfRangeException("id", "entity id " + id + " does not follow " + (_next - 1) + " within 0..=" + Mirror.MaxEntityId);
            if (gap < 16) writer.WriteBits((ulong)gap << 1, 5);
            else if (gap < 272) writer.WriteBits(0b01 | (ulong)(gap - 16) << 2, 10);
            else writer.WriteBits(0b11 | (ulong)gap << 2, 18);
            _next = id + 1;
        }
    }
}
